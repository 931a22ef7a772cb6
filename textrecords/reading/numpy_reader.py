"""TensorFlow-free numpy batches of a package's records.

Each package adds a batch decoder (`BatchDecoder`, generated from its
schema: a picklable callable, a `RecordBatch` or list of serialized records
-> `(x, y, sample_weight)` numpy arrays, equal to its `make_dataset`
batches). This module gives the order and the batches: `epoch_order` (eval
order or a seeded global shuffle, sharded), `record_batches` /
`numpy_batches` over a `RecordSource`, `sequential_batches` over GZIP
files (eval order only), and `planned_batches`, the read order of
`make_dataset` (`textrecords.reading.read_order`) read without TF.
Nothing here imports TensorFlow.
"""

from typing import Callable, Iterator, List, Optional, Sequence

import numpy as np

from textrecords.wire import example_decoder
from textrecords import seeding
from textrecords.files import tfrecord
from textrecords.errors import UserError
from textrecords.reading.locations import given
from textrecords.reading.record_source import RecordSource, open_source
from textrecords.reading.read_options import ReadOptions


class BatchDecoder:
  """Base of the packages' decoders: records -> `(x, y, sample_weight)`.

  Calling it drops records skipped as corrupt (None) and decodes the rest
  with `decode` (subclasses define it). Instances are picklable.
  """

  package = "textrecords"

  def __call__(self, records):
    if not isinstance(records, example_decoder.RecordBatch):
      records = [r for r in records if r is not None]
    if not len(records):
      raise UserError("a batch with no readable record left (all skipped as corrupt)")
    return self.checked(self.decode, records)

  def checked(self, fn: Callable, records):
    """fn(records), a DecodeError turned into a one-line UserError."""
    try:
      return fn(records)
    except example_decoder.DecodeError as e:
      raise UserError(f"not {self.package} records ({e}); read them with the package "
                      "that wrote them") from e

  def decode(self, records: List[bytes]):
    raise NotImplementedError


def epoch_order(n: int, *, training: bool, seed: Optional[int], epoch: int = 0,
                shard_index: int = 0, num_shards: int = 1) -> np.ndarray:
  """Record indices of one epoch: in order, or a seeded global permutation
  (different per epoch), then this shard's every `num_shards`-th."""
  if not 0 <= shard_index < num_shards:
    raise UserError(f"shard_index={shard_index}: must be in [0, {num_shards})")
  order = np.arange(n, dtype=np.int64)
  if training:
    rng = (np.random.default_rng() if seed is None
           else np.random.default_rng(seeding.derive_seed(int(seed), "reader", epoch)))
    order = rng.permutation(n)
  return order[shard_index::num_shards]


def check_batch_size(batch_size) -> int:
  if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or (
      batch_size < 1):
    raise UserError(f"batch_size={batch_size!r}: must be an integer >= 1")
  return int(batch_size)


def record_batches(source, batch_size: int, *, training: bool, seed: Optional[int],
                   drop_remainder: bool, shard_index: int = 0, num_shards: int = 1,
                   epochs: Optional[int] = 1) -> Iterator[List[bytes]]:
  """Lists of serialized records, `batch_size` at a time (corrupt ones skipped
  when the source skips them), for `epochs` epochs (None: forever)."""
  epoch = 0
  while epochs is None or epoch < epochs:
    order = epoch_order(len(source), training=training, seed=seed, epoch=epoch,
                        shard_index=shard_index, num_shards=num_shards)
    stop = len(order) - len(order) % batch_size if drop_remainder else len(order)
    for start in range(0, stop, batch_size):
      recs = source.read_batch(order[start:start + batch_size], epoch if training else None)
      if len(recs):
        yield recs
    epoch += 1


def numpy_batches(entries, compression: str, decode: Callable, batch_size: int, *,
                  training: bool, seed: Optional[int], drop_remainder: bool,
                  shard_index: int = 0, num_shards: int = 1, verify: str = "checksum",
                  skip_corrupt: bool = False, index: str = "build", log=print):
  """An iterator of decoded batches of one epoch over checked files (see
  `open_source`); bad arguments and files raise here, before iterating.

  GZIP files are read sequentially: eval order only, no sharding.
  """
  batch_size = check_batch_size(batch_size)
  if compression:
    if training or num_shards > 1:
      raise UserError(f"{entries[0].path}: {compression}-compressed records can only be read "
                      "sequentially: training=False and no sharding (write the dataset "
                      "without --compression for shuffled or sharded reading)")
    batches = sequential_batches([e.path for e in entries], compression, batch_size,
                                 drop_remainder=drop_remainder)
  else:
    source = open_source(entries, verify=verify, skip_corrupt=skip_corrupt, index=index,
                         log=log)
    batches = record_batches(source, batch_size, training=training, seed=seed,
                             drop_remainder=drop_remainder, shard_index=shard_index,
                             num_shards=num_shards)
  return (decode(recs) for recs in batches)


def sequential_batches(paths: Sequence[str], compression: str, batch_size: int, *,
                       drop_remainder: bool) -> Iterator[List[bytes]]:
  """Lists of records read file after file (GZIP or not), CRCs checked."""
  batch = []
  for path in paths:
    for rec in tfrecord.read_records(path, compression):
      batch.append(rec)
      if len(batch) == batch_size:
        yield batch
        batch = []
  if batch and not drop_remainder:
    yield batch


class ShardContext:
  """An input context of `num_shards` pipelines with one replica each (the
  TF-free readers' shard_index/num_shards)."""

  def __init__(self, num_shards: int, shard_index: int):
    self.num_input_pipelines = self.num_replicas_in_sync = num_shards
    self.input_pipeline_id = shard_index


def read_options(batch_size, *, split: str, shard_index: int = 0, num_shards: int = 1,
                 options: Optional[dict] = None, **kw):
  """The `ReadOptions` of a package's `numpy_batches`, decided for `split`
  (verify, skip_corrupt and log taken from its reading `options`)."""
  options = options or {}
  if (shard_index, num_shards) != (0, 1):
    if kw.get("input_context") is not None:
      raise UserError("pass input_context or shard_index/num_shards, not both")
    if isinstance(num_shards, bool) or not isinstance(num_shards, (int, np.integer)) or (
        num_shards < 1):
      raise UserError(f"num_shards={num_shards!r}: must be an integer >= 1")
    if not 0 <= shard_index < num_shards:
      raise UserError(f"shard_index={shard_index}: must be in [0, {num_shards})")
    kw["input_context"] = ShardContext(int(num_shards), int(shard_index))
  return ReadOptions(batch_size, verify=options.get("verify", "checksum"),
                     skip_corrupt=options.get("skip_corrupt", False),
                     log=options.get("log", print), **kw).for_split(split)


READ_ARGUMENTS = ("split", "training", "seed", "global_batch_size", "input_context",
                  "start_step", "drop_remainder", "shuffle_buffer", "repeat", "shard_index",
                  "num_shards", "options")


def read_options_from(args: dict):
  """`read_options` from a `numpy_batches`'s arguments (its `locals()`)."""
  return read_options(args["batch_size"], **{k: args[k] for k in READ_ARGUMENTS})


def planned_batches(opened: "Opened", opts) -> Iterator:
  """Decoded batches in the read order of `textrecords.reading.read_order` (the
  batches of `make_dataset` with the same options; `opts`: a
  `read_options.ReadOptions` decided for its split). Errors raise here,
  before iterating."""
  return map(opened.decoder, planned_records(opened, opts))


def planned_records(opened: "Opened", opts) -> Iterator:
  """The undecoded per-replica batches of `planned_batches`.

  GZIP files are read sequentially: evaluation order from step 0, one
  input pipeline.
  """
  plan = opts.plan([e.records for e in opened.entries], where=given(opened.entries))
  if opened.compression:
    if opts.training or plan.sharing.pipelines > 1 or opts.start_step:
      raise UserError(f"{opened.entries[0].path}: {opened.compression}-compressed records can "
                      "only be read sequentially: training=False, one input pipeline, "
                      "start_step=0 (write the dataset without --compression for more)")
    return sequential_batches([e.path for e in opened.entries], opened.compression,
                              plan.sharing.per_replica, drop_remainder=plan.drop_remainder)
  source = opened.source()
  opened.decoder.order_seed = plan.stream.seed  # a training order's salts (dynamic masks)
  return _read_plan(source, plan)


def _read_plan(source: RecordSource, plan):
  training = plan.stream.training
  for epoch, ids in plan.batches():
    recs = source.read_batch(ids, epoch if training else None)
    if len(recs):
      yield recs
