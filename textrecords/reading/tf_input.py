"""The TensorFlow edge of the readers: files -> shuffled, interleaved records."""

import os
import sys
import threading
from typing import Callable, List, Optional

from textrecords.files import storage
from textrecords.errors import UserError
from textrecords.tf_import import require_tf
from textrecords.reading import tf_order

_READ_BUFFER = 1 << 20
_reader_log = threading.Lock()
_reader_log_done = []


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
  quiet_reader_log()
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


def quiet_reader_log():
  """Keeps TF's one INFO line about TFRecordDataset buffers off stderr.

  TF's TFRecordDataset kernel logs, once per process, "The default buffer
  size is 262144, which is overridden by the user specified `buffer_size`"
  (or "`buffer_size` is unspecified"): any buffer size logs one of the
  two, at INFO, which TF prints unless TF_CPP_MIN_LOG_LEVEL is set. This
  builds that kernel once (an empty reader) with stderr (fd 2) pointed at
  /dev/null for that moment, so the line is spent. A TF_CPP_MIN_LOG_LEVEL
  the user set is left to decide.
  """
  if "TF_CPP_MIN_LOG_LEVEL" in os.environ:
    return
  with _reader_log:
    if _reader_log_done:
      return
    tf = require_tf()
    sys.stderr.flush()
    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
      os.dup2(null, 2)
      with tf.init_scope(), tf.device("/CPU:0"):
        tf.raw_ops.TFRecordDataset(filenames=tf.constant([], tf.string), compression_type="",
                                   buffer_size=tf.constant(_READ_BUFFER, tf.int64))
    finally:
      os.dup2(saved, 2)
      os.close(saved)
      os.close(null)
    _reader_log_done.append(True)


def data_service_step(data_service: Optional[str], job_name: Optional[str]) -> Callable:
  """The last step of a pipeline: run it on a tf.data service (identity when None).

  As Model Garden's `enable_tf_data_service`: the dataset is sent to the
  dispatcher at `data_service` ("grpc://host:port" or "host:port") and every
  worker runs the whole pipeline (processing_mode "parallel_epochs"); input
  pipelines that give the same `job_name` read one shared job (each batch to
  one of them), without it each gets its own. Checked here, before any work.

  Raises:
    UserError: data_service not a "host:port" address, or job_name without it.
  """
  if data_service is None:
    if job_name is not None:
      raise UserError(f"job_name={job_name!r} needs data_service=ADDRESS (a tf.data "
                      "service dispatcher)")
    return lambda ds: ds
  address = data_service.split("://", 1)[-1] if isinstance(data_service, str) else ""
  host, _, port = address.rpartition(":")
  if not host or not port.isdigit():
    raise UserError(f"data_service={data_service!r}: must be a tf.data service dispatcher "
                    "address, \"host:port\" or \"grpc://host:port\"")
  if job_name is not None and (not isinstance(job_name, str) or not job_name):
    raise UserError(f"job_name={job_name!r}: must be a non-empty string or None")

  def distribute(ds):
    tf = require_tf()
    service = tf.data.experimental.service
    ds = ds.apply(service.distribute(processing_mode=service.ShardingPolicy.OFF,
                                     service=data_service, job_name=job_name))
    return ds.prefetch(tf.data.AUTOTUNE)

  return distribute


def planned_batches(entries, compression: str, plan, log=print):
  """(epoch, serialized records) per-replica batches of `plan`
  (`textrecords.reading.read_order.Plan`) over the record files `entries` (every
  file of the split, in order: the plan shares them out)."""
  tf = require_tf()
  files = [e.path for e in entries]
  check_readable_by_tf(files)
  note_compressed_resume(compression, plan, log)
  read = file_reader(files, compression)
  ds = tf_order.plan_dataset(plan, read, read_files=read)
  return plan_cardinality(ds, plan)


def note_compressed_resume(compression: str, plan, log=print):
  """Logs one line when `plan` resumes (start_step) in compressed records:
  they cannot be entered at an offset, so the records before the step in
  its file are read through."""
  if compression and plan.start_step:
    log(f"note: {compression} records cannot be entered at an offset: resuming at step "
        f"{plan.start_step} reads the records before it in their file")


def file_reader(files: List[str], compression: str) -> Callable:
  """read_file(i): a TFRecordDataset of files[i] (i an int64 tensor; a
  vector of them reads those files in sequence)."""
  tf = require_tf()
  check_readable_by_tf(files)
  quiet_reader_log()
  paths = tf.constant(files)
  comp = compression or None
  return lambda i: tf.data.TFRecordDataset(tf.gather(paths, i), compression_type=comp,
                                           buffer_size=_READ_BUFFER)


def plan_cardinality(ds, plan):
  """`ds`, the batches of `plan` (`read_order.Plan`), with its length
  asserted where every pass has it (`plan.passes_alike`): infinite with
  repeat. A training dataset resumed inside an epoch (start_step) has a
  shorter first pass than its later ones (whole epochs): its length is
  left unknown (Keras then reads each pass to its end)."""
  if not plan.passes_alike:
    return ds
  return with_cardinality(ds, plan.num_batches())


def with_cardinality(ds, n: Optional[int]):
  """`ds` with its length asserted (None: infinite)."""
  tf = require_tf()
  return ds.apply(tf.data.experimental.assert_cardinality(
      tf.data.INFINITE_CARDINALITY if n is None else n))
