"""The TensorFlow edge of the readers: files -> shuffled, interleaved records."""

from typing import Callable, List, Optional

from textrecords import storage
from textrecords.errors import UserError
from textrecords.tf_import import require_tf

_READ_BUFFER = 1 << 20


def shard_files(files: List[str], input_context) -> List[str]:
  """This input pipeline's share of `files` (every n-th, as tf.distribute does)."""
  if input_context is None or input_context.num_input_pipelines <= 1:
    return files
  n = input_context.num_input_pipelines
  if len(files) < n:
    raise UserError(f"{len(files)} record files cannot be sharded over {n} input "
                    "pipelines; write more shards (--num_shards)")
  return files[input_context.input_pipeline_id::n]


def check_readable_by_tf(files: List[str]):
  """UserError for a URL whose scheme tf.data (tf.io.gfile) cannot read."""
  for f in files:
    scheme, _ = storage.split_scheme(f)
    if scheme not in (None, "file") and scheme not in storage.TF_SCHEMES:
      raise UserError(f"{f}: tf.data cannot read {scheme}:// URLs (it reads local paths "
                      f"and {', '.join(s + '://' for s in storage.TF_SCHEMES)}); copy the "
                      "dataset to a local folder or gs:// first")


def record_dataset(files: List[str], compression: str, *, training: bool,
                   seed: Optional[int] = None, input_context=None,
                   cycle_length: int = 8, parallel: bool = True,
                   block_length: Optional[int] = None,
                   records_of: Optional[Callable] = None):
  """A `tf.data.Dataset` of serialized records from `files`.

  Training: files are sharded by `input_context` (one input pipeline per
  host), shuffled (seedable) and read interleaved. Evaluation: files in
  order, records in order.

  Args:
    parallel: read the interleaved files in parallel (large records); False
      interleaves sequentially, cheaper per record for small records.
    block_length: records taken from a file before moving to the next.
    records_of: instead of reading file i, take records_of(i) (an int64
      scalar tensor -> a Dataset, e.g. indices of records held in memory):
      the same order, shuffles and interleaving as reading the files.
  """
  tf = require_tf()
  files = shard_files(files, input_context)
  if records_of is None:
    check_readable_by_tf(files)
    comp = compression or None
    ds = tf.data.Dataset.from_tensor_slices(files)
    read = lambda f: tf.data.TFRecordDataset(f, compression_type=comp, buffer_size=_READ_BUFFER)
  else:
    ds = tf.data.Dataset.range(len(files))
    read = records_of
  if not training or len(files) == 1:
    if records_of is not None:
      return ds.flat_map(read)
    return tf.data.TFRecordDataset(ds, compression_type=comp, buffer_size=_READ_BUFFER)
  ds = ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
  if not parallel:
    return ds.interleave(read, cycle_length=min(cycle_length, len(files)),
                         block_length=block_length)
  return ds.interleave(read, cycle_length=min(cycle_length, len(files)),
                       block_length=block_length, num_parallel_calls=tf.data.AUTOTUNE,
                       deterministic=seed is not None)


_FROM_OPTIONS = object()


def epoch_records(files: List[str], compression: str, options, *,
                  shuffle_buffer: Optional[int] = None, seed=_FROM_OPTIONS,
                  repeat: Optional[bool] = None, **read_kw):
  """Records of `files` by the shared contract (`options`: a ReadOptions for a split).

  Training: files shuffled and interleaved, records shuffled by
  `shuffle_buffer` (default options.shuffle_buffer), reshuffled each pass.
  Repeat (default options.repeat): repeated forever, before batching. Files
  must already be this input pipeline's share (`dataset_files.record_files`).

  Args:
    seed: overrides options.seed (e.g. a per-epoch seed tensor).
    read_kw: cycle_length, parallel, block_length, records_of of `record_dataset`.
  """
  seed = options.seed if seed is _FROM_OPTIONS else seed
  ds = record_dataset(files, compression, training=options.training, seed=seed, **read_kw)
  if options.training:
    ds = ds.shuffle(shuffle_buffer or options.shuffle_buffer, seed=seed,
                    reshuffle_each_iteration=True)
  if options.repeat if repeat is None else repeat:
    ds = ds.repeat()
  return ds


def with_known_batches(ds, options, num_examples: int):
  """`ds` (batches of `num_examples` examples) with its length asserted.

  Keras then shows step totals and does not warn "ran out of data". When
  repeating, the dataset is marked infinite.
  """
  tf = require_tf()
  n = options.num_batches(num_examples)
  return ds.apply(tf.data.experimental.assert_cardinality(
      tf.data.INFINITE_CARDINALITY if n is None else n))
