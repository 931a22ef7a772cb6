"""`make_dataset`: mt_data records -> `(x, y, sample_weight)` batches for Keras.

Fixed length (`num_steps=T`, d2l's arrays):
  source          = source ids (with <eos>) padded with <pad> or trimmed to T
  label           = target ids (with <eos>) padded or trimmed to T
  decoder_input   = [<bos>] + label[:T-1]
  source_valid_len = number of non-<pad> ids in source
  sample_weight   = 1.0 where label != <pad>, else 0.0

Bucketing (`bucket_boundaries=[...]`, `num_steps=None`): the same arrays with
T = the longest sequence of the batch (source or target), each pair going to
the bucket of max(len(source), len(target)) via
`tf.data.Dataset.bucket_by_sequence_length`.
"""

from typing import Optional, Sequence

from textrecords.wire import features
from textrecords.reading import locations as dataset_files
from textrecords.reading import tf_input
from textrecords.errors import UserError
from textrecords.reading import read_options
from textrecords.tf_import import require_tf

from mt_data import preprocess
from mt_data import schema
from textrecords.reading import mixtures


def open_dataset(location: str) -> dataset_files.Found:
  """The checked mt_data dataset at `location` (UserError if not one)."""
  found = dataset_files.open_datasets(location, schema.PACKAGE)[0]
  if features.schema_from_json(found.meta.get("schema", [])) != schema.SCHEMA:
    raise UserError(f"{found.layout.meta_path}: record schema differs from this mt_data "
                    "version's; rewrite the dataset with python -m mt_data.create")
  return found


def read_meta(location: str) -> dict:
  """The checked metadata of an mt_data dataset (UserError if not one)."""
  return open_dataset(location).meta


def record_files(location: str, split: str, *, verify: str = "checksum",
                 skip_corrupt: bool = False, log=print, input_context=None):
  """(meta, checked record entries) of one split, this input pipeline's share."""
  if split not in schema.SPLITS:
    raise UserError(f"split={split!r}: must be one of {', '.join(schema.SPLITS)}")
  found = open_dataset(location)
  meta = found.meta
  if meta["splits"][split]["num_records"] == 0:
    raise UserError(f"{location}: the {split!r} split has no pairs (see --num_train/"
                    "--num_val of mt_data.create)")
  entries = dataset_files.record_files([found], split, verify=verify,
                                       skip_corrupt=skip_corrupt, log=log,
                                       input_context=input_context)
  return meta, entries


def _check_args(num_steps, bucket_boundaries, bucket_batch_sizes=None,
                pad_to_bucket_boundary=None):
  """The checked bucket boundaries (None: fixed length `num_steps`)."""
  if bucket_boundaries is None:
    if num_steps is None or not isinstance(num_steps, int) or num_steps < 1:
      raise ValueError(f"num_steps={num_steps!r}: must be an int >= 1 (or None with "
                       "bucket_boundaries)")
    if (bucket_batch_sizes, pad_to_bucket_boundary) != (None, None):
      raise ValueError("bucket_batch_sizes and pad_to_bucket_boundary need "
                       "bucket_boundaries (and num_steps=None)")
    return None
  if num_steps is not None:
    raise ValueError("bucket_boundaries pads each batch to its own length: pass "
                     "num_steps=None with it (or drop bucket_boundaries for fixed T)")
  bounds = list(bucket_boundaries)
  if not bounds or any(not isinstance(b, int) or b < 1 for b in bounds) or any(
      a >= b for a, b in zip(bounds, bounds[1:])):
    raise ValueError(f"bucket_boundaries={bucket_boundaries!r}: must be a non-empty, "
                     "strictly increasing list of ints >= 1")
  return bounds


def make_dataset(location, batch_size: Optional[int] = None, *, split: str = "train",
                 training: Optional[bool] = None, seed: Optional[int] = None,
                 global_batch_size: Optional[int] = None, input_context=None,
                 start_step: int = 0, drop_remainder: Optional[bool] = None,
                 shuffle_buffer: int = 10000, repeat: bool = False,
                 verify: str = "checksum", skip_corrupt: bool = False, log=print,
                 num_steps: Optional[int] = 9,
                 bucket_boundaries: Optional[Sequence[int]] = None,
                 bucket_batch_sizes: Optional[Sequence[int]] = None,
                 pad_to_bucket_boundary: Optional[bool] = None,
                 data_service: Optional[str] = None, job_name: Optional[str] = None,
                 weights: Optional[Sequence[float]] = None):
  """A `tf.data.Dataset` of `(x, y, sample_weight)` for `keras.Model.fit`:
  x = {"source": int32 (B, T), "decoder_input": int32 (B, T),
  "source_valid_len": int32 (B,)}, y = int32 (B, T), w = float32 (B, T).

  The arguments from batch_size to log are the shared
  `textrecords.reading.read_options.ReadOptions` (split: "train" or
  "valid"); pairs come in the order of `textrecords.reading.read_order`.
  With `num_steps` the number of batches is known unless `repeat`.

  Args:
    location: the --output_dir of `python -m mt_data.create` (or its
      meta.json, or record files / a shard glob of it); a list of them with
      `weights`: a mixture (`textrecords.reading.mixtures`).
    num_steps: T, the fixed length of every array (d2l's num_steps). None
      with `bucket_boundaries`.
    bucket_boundaries: bucket i holds the pairs with bounds[i-1] <=
      max(len(source), len(target)) < bounds[i].
    bucket_batch_sizes: pairs per batch of each bucket (len(bucket_boundaries)
      + 1 ints, e.g. a token budget); default batch_size for all.
    pad_to_bucket_boundary: pad a bucket's batches to one length (its
      boundary - 1; the last bucket to the split's longest pair), not the
      batch's longest. None: as drop_remainder. With drop_remainder and one
      batch size the batch dimension is static; the batches are counted
      once (a pass over the pairs' lengths) unless `repeat`, or unless the
      training passes differ in pairs (several input pipelines, or a
      start_step inside an epoch): then their number is unknown.
    data_service, job_name: run the pipeline on a tf.data service
      (`textrecords.reading.tf_input.data_service_step`).

  Raises:
    UserError: missing/foreign metadata, a missing or corrupt file.
    ValueError: bad arguments (num_steps < 1, ...).

  Example: `model.fit(make_dataset("out/mt", 64, seed=1), epochs=10)`.
  """
  opts = read_options.from_arguments(locals())
  bounds = _check_args(num_steps, bucket_boundaries, bucket_batch_sizes, pad_to_bucket_boundary)
  serve = tf_input.data_service_step(data_service, job_name)
  if not isinstance(location, str) or weights is not None:
    return serve(_mixture(location, weights, split, opts, bounds, num_steps))
  ds = _one_dataset(location, split, opts, num_steps, bounds, bucket_batch_sizes,
                    pad_to_bucket_boundary)
  return serve(ds.prefetch(require_tf().data.AUTOTUNE))


def _one_dataset(location: str, split: str, opts: read_options.ReadOptions, num_steps, bounds,
                 bucket_batch_sizes, pad_to_bucket_boundary):
  """The (x, y, w) batches of one dataset: fixed length, or bucketed by `bounds`."""
  meta, entries = record_files(location, split, verify=opts.verify,
                               skip_corrupt=opts.skip_corrupt, log=opts.log)
  if bounds is None:
    return _fixed_length_batches(meta, entries, opts, num_steps)
  return _bucketed_batches(meta["splits"][split], meta, entries, opts, bounds,
                           _bucket_batch_sizes(bucket_batch_sizes, opts.per_replica, bounds),
                           pad_to_bucket_boundary)


def _mixture(locations, weights, split: str, opts: read_options.ReadOptions, bounds, num_steps):
  """The fixed-length batches of a mixture (`textrecords.reading.mixtures`)."""
  if bounds is not None:
    raise UserError("bucket_boundaries: a mixture gives fixed-length batches (num_steps)")
  tf = require_tf()
  load = lambda loc: record_files(loc, split, verify=opts.verify,  # noqa: E731
                                  skip_corrupt=opts.skip_corrupt, log=opts.log)
  return mixtures.tf_mixture(locations, weights, opts, load,
                             lambda meta: lambda s, salt: _fixed_length(tf, num_steps)(s))


def _fixed_length_batches(meta, entries, opts: read_options.ReadOptions, num_steps: int):
  """(x, y, w) batches padded or trimmed to `num_steps`, their number known."""
  tf = require_tf()
  plan = opts.plan([e.records for e in entries], where=dataset_files.given(entries))
  batches = tf_input.planned_batches(entries, meta.get("compression", ""), plan, opts.log)
  to_arrays = _fixed_length(tf, num_steps)
  return batches.map(lambda _, serialized: to_arrays(serialized),
                     num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def _bucketed_batches(split_meta, meta, entries, opts: read_options.ReadOptions, bounds,
                      batch_sizes, pad_to_bucket_boundary):
  """(x, y, w) batches bucketed by length (see `_bucketed`). Bucketing drops
  partial buckets, not records: every pair is read."""
  tf = require_tf()
  plan = opts.keeping_remainder().plan([e.records for e in entries])
  if opts.drop_remainder and sum(e.records for e in entries) < plan.sharing.global_batch:
    raise UserError(read_options.too_few(sum(e.records for e in entries), plan.sharing,
                                         dataset_files.given(entries)))
  deterministic = not opts.training or opts.seed is not None

  def read_pairs():
    batches = tf_input.planned_batches(entries, meta.get("compression", ""), plan, opts.log)
    return batches.map(lambda _, serialized: _parse_pairs(tf, serialized),
                       num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)

  # Batches are counted over pairs read apart: counting over the dataset's own
  # would spend its first pass (a training dataset gives the next epoch on
  # each pass). Every training pass holds the same pairs when it is a whole
  # epoch read by one pipeline; a shared-out pass's share depends on its order.
  alike = not opts.training or (plan.passes_alike and plan.sharing.pipelines == 1)
  return _bucketed(tf, read_pairs(), split_meta, bounds, batch_sizes,
                   drop_remainder=opts.drop_remainder,
                   count=read_pairs() if not opts.repeat and alike else None,
                   repeat=opts.repeat,
                   pad_to_boundary=opts.drop_remainder if pad_to_bucket_boundary is None
                   else pad_to_bucket_boundary,
                   deterministic=deterministic)


def _parse_pairs(tf, serialized):
  """A batch of serialized pairs -> (source ids, target ids) ragged int32."""
  parsed = tf.io.parse_example(serialized, features.parse_spec(schema.SCHEMA))
  return (tf.cast(parsed[schema.SOURCE_IDS.name], tf.int32),
          tf.cast(parsed[schema.TARGET_IDS.name], tf.int32))


def _bucket_batch_sizes(sizes, batch_size: int, bounds):
  """Per-bucket batch sizes (len(bounds) + 1), default batch_size for every bucket."""
  if sizes is None:
    return [batch_size] * (len(bounds) + 1)
  sizes = list(sizes)
  if len(sizes) != len(bounds) + 1 or any(
      not isinstance(b, int) or isinstance(b, bool) or b < 1 for b in sizes):
    raise ValueError(f"bucket_batch_sizes={sizes!r}: must be {len(bounds) + 1} ints >= 1 "
                     "(one per bucket: len(bucket_boundaries) + 1)")
  return sizes


def _bucket_widths(split_meta: dict, bounds):
  """The padded length of each bucket: its boundary - 1; the last, the split's longest."""
  longest = max(int(split_meta["source"]["max_len"]), int(split_meta["target"]["max_len"]), 1)
  return [b - 1 for b in bounds] + [max(longest, bounds[-1])]


def _bucket_batches(tf, pairs, bounds, batch_sizes, drop_remainder: bool) -> int:
  """Batches per pass of bucketed pairs (one pass over `pairs`, batches of
  ragged (source, target) ids)."""
  def count(acc, src, tgt):
    n = tf.maximum(src.row_lengths(), tgt.row_lengths())
    return acc + tf.math.bincount(tf.searchsorted(tf.constant(bounds, n.dtype), n, side="right"),
                                  minlength=len(bounds) + 1, maxlength=len(bounds) + 1,
                                  dtype=tf.int64)

  per_bucket = pairs.reduce(tf.zeros([len(bounds) + 1], tf.int64),
                            lambda acc, pair: count(acc, *pair))
  total = 0
  for n, size in zip(per_bucket.numpy().tolist(), batch_sizes):
    total += n // size if drop_remainder else -(-n // size)
  return total


def _bucketed(tf, pairs, split_meta, bounds, batch_sizes, *, drop_remainder: bool,
              count, repeat: bool, pad_to_boundary: bool, deterministic: bool):
  """Batches of parsed pairs -> (x, y, w) batches bucketed by
  max(len(source), len(target)).

  Bucket i holds the pairs of length bounds[i-1] <= n < bounds[i] (the last:
  n >= bounds[-1]) in batches of batch_sizes[i]. pad_to_boundary pads every
  batch of a bucket to one length (boundary - 1; the last bucket to the
  split's longest pair), else to the batch's longest. With drop_remainder
  and one batch size the batch dimension is static. The number of batches
  is counted (one pass over `count`, the same pairs) and set; infinite
  with `repeat`; count=None: left unknown.
  """
  def length(src, tgt):
    return tf.maximum(tf.shape(src)[0], tf.shape(tgt)[0])

  widths = _bucket_widths(split_meta, bounds)
  if pad_to_boundary:
    # TF pads bucket i to its upper boundary - 1: the last bucket ends past the longest pair.
    tf_bounds, sizes = bounds + [widths[-1] + 1], batch_sizes + [1]
  else:
    tf_bounds, sizes = bounds, batch_sizes
  # Unbatched ragged rows are rank-0 ragged; a map makes them tensors.
  rows = pairs.unbatch().map(lambda src, tgt: (src, tgt))
  ds = rows.bucket_by_sequence_length(
      length, bucket_boundaries=tf_bounds, bucket_batch_sizes=sizes,
      padding_values=(preprocess.PAD_ID, preprocess.PAD_ID),
      pad_to_bucket_boundary=pad_to_boundary, drop_remainder=drop_remainder)
  static = batch_sizes[0] if drop_remainder and len(set(batch_sizes)) == 1 else None

  def pad_batch(src, tgt):
    steps = tf.maximum(tf.shape(src)[1], tf.shape(tgt)[1])
    src = tf.pad(src, [[0, 0], [0, steps - tf.shape(src)[1]]])
    label = tf.pad(tgt, [[0, 0], [0, steps - tf.shape(tgt)[1]]])
    if static is not None:
      src, label = tf.ensure_shape(src, [static, None]), tf.ensure_shape(label, [static, None])
    return _outputs(tf, src, label)

  ds = ds.map(pad_batch, num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)
  if count is None and not repeat:
    return ds
  n = tf.data.INFINITE_CARDINALITY if repeat else _bucket_batches(
      tf, count, bounds, batch_sizes, drop_remainder)
  return ds.apply(tf.data.experimental.assert_cardinality(n))


def _fixed_length(tf, steps: int):
  """serialized pairs -> (x, y, w) padded or trimmed to `steps`."""
  spec = features.parse_spec(schema.SCHEMA)
  src_key, tgt_key = schema.SOURCE_IDS.name, schema.TARGET_IDS.name

  def to_arrays(serialized):
    parsed = tf.io.parse_example(serialized, spec)
    src = tf.cast(parsed[src_key].to_tensor(preprocess.PAD_ID, shape=[None, steps]), tf.int32)
    label = tf.cast(parsed[tgt_key].to_tensor(preprocess.PAD_ID, shape=[None, steps]),
                    tf.int32)
    return _outputs(tf, src, label)

  return to_arrays


def _outputs(tf, src, label):
  """(x, y, w) from padded source and label matrices of equal width T."""
  steps = tf.shape(label)[1]
  bos = tf.fill([tf.shape(label)[0], 1], preprocess.BOS_ID)
  decoder_input = tf.concat([bos, label], axis=1)[:, :steps]
  valid_len = tf.reduce_sum(tf.cast(tf.not_equal(src, preprocess.PAD_ID), tf.int32), axis=1)
  weight = tf.cast(tf.not_equal(label, preprocess.PAD_ID), tf.float32)
  x = {schema.X_SOURCE: src, schema.X_DECODER_INPUT: decoder_input,
       schema.X_SOURCE_VALID_LEN: valid_len}
  return x, label, weight
