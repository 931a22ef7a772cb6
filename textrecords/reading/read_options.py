"""The `make_dataset` contract shared by bert_data, w2v_data and mt_data.

Every package's `make_dataset(location, batch_size=None, *, split=..., ...)`
and `numpy_batches` take these keyword arguments with these defaults,
checked here once, so the same mistake gets the same one-line error in
every package:

  batch_size=None      examples per replica's batch (or global_batch_size)
  training=None        shuffle (the read order of `textrecords.reading.read_order`);
                       None: True for the "train" split, False otherwise
  seed=None            makes the order (and other draws) repeatable
  global_batch_size=None  examples per step over all replicas; with an
                       input_context each replica gets
                       ctx.get_per_replica_batch_size(global_batch_size)
  input_context=None   a tf.distribute.InputContext: its pipeline's share
                       of every global batch
  start_step=0         the global step to start at (resume)
  drop_remainder=None  drop the last partial batch (static batch
                       dimension); None: True when training
  shuffle_buffer=10000 records mixed by the window shuffle (training only)
  repeat=False         repeat the epochs forever (an infinite dataset)
  verify="checksum"    "checksum" (size + sha256), "size" or "none"
  skip_corrupt=False   skip (and log) files that fail `verify`
  log=print            where skipped files and long checks are reported

Example:
  >>> ReadOptions(32).for_split("valid")
  ReadOptions(batch_size=32, training=False, seed=None, global_batch_size=None, \
input_context=None, start_step=0, drop_remainder=False, shuffle_buffer=10000, repeat=False, \
verify='checksum', skip_corrupt=False)
  >>> ReadOptions(32).for_split("train").num_batches(100)
  3
  >>> ReadOptions(8.0)
  Traceback (most recent call last):
  ...
  textrecords.errors.UserError: batch_size=8.0: must be a positive integer
"""

import dataclasses
import numbers
from typing import Any, Callable, Optional

from textrecords.errors import UserError
from textrecords.datasets.layout import DEFAULT_SPLIT
from textrecords.datasets.metadata import VERIFY_MODES
from textrecords.reading import read_order

SHUFFLE_BUFFER = 10000


def _is_int(value) -> bool:
  return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _check(name: str, value, ok: bool, what: str):
  if not ok:
    raise UserError(f"{name}={value!r}: must be {what}")


@dataclasses.dataclass(frozen=True)
class ReadOptions:
  """The validated shared arguments of `make_dataset` (see the module doc)."""
  batch_size: Optional[int] = None
  training: Optional[bool] = None
  seed: Optional[int] = None
  global_batch_size: Optional[int] = None
  input_context: Any = None
  start_step: int = 0
  drop_remainder: Optional[bool] = None
  shuffle_buffer: int = SHUFFLE_BUFFER
  repeat: bool = False
  verify: str = "checksum"
  skip_corrupt: bool = False
  log: Callable[[str], Any] = dataclasses.field(default=print, repr=False, compare=False)

  def __post_init__(self):
    if (self.batch_size is None) == (self.global_batch_size is None):
      raise UserError("pass batch_size (per replica) or global_batch_size, not both"
                      if self.batch_size is not None else
                      "batch_size or global_batch_size is required")
    for name in ("batch_size", "global_batch_size"):
      value = getattr(self, name)
      _check(name, value, value is None or (_is_int(value) and value >= 1),
             "a positive integer")
    _check("start_step", self.start_step, _is_int(self.start_step) and self.start_step >= 0,
           "an integer >= 0")
    _check("drop_remainder", self.drop_remainder,
           self.drop_remainder is None or isinstance(self.drop_remainder, bool),
           "True, False or None")
    _check("shuffle_buffer", self.shuffle_buffer,
           _is_int(self.shuffle_buffer) and self.shuffle_buffer >= 1, "a positive integer")
    _check("seed", self.seed, self.seed is None or _is_int(self.seed),
           "an integer or None")
    _check("training", self.training, self.training is None or isinstance(self.training, bool),
           "True, False or None")
    for name in ("repeat", "skip_corrupt"):
      value = getattr(self, name)
      _check(name, value, isinstance(value, bool), "True or False")
    _check("verify", self.verify, self.verify in VERIFY_MODES,
           f"one of {', '.join(VERIFY_MODES)}")
    ctx = self.input_context
    _check("input_context", ctx, ctx is None or (
        hasattr(ctx, "num_input_pipelines") and hasattr(ctx, "input_pipeline_id")),
           "a tf.distribute.InputContext or None")
    _check("log", self.log, callable(self.log), "callable")
    # Plain ints from here on (numpy integers are accepted above).
    for name in ("batch_size", "global_batch_size", "start_step", "shuffle_buffer", "seed"):
      value = getattr(self, name)
      if value is not None:
        object.__setattr__(self, name, int(value))

  def for_split(self, split: str = DEFAULT_SPLIT) -> "ReadOptions":
    """These options with `training` (and `drop_remainder`) decided for
    `split`."""
    training = (split == DEFAULT_SPLIT) if self.training is None else self.training
    drop = training if self.drop_remainder is None else self.drop_remainder
    out = dataclasses.replace(self, training=training, drop_remainder=drop)
    out.sharing()  # checked now
    return out

  def keeping_remainder(self) -> "ReadOptions":
    """These options reading every record (for readers that drop their own
    partial batches, e.g. mt's buckets)."""
    return dataclasses.replace(self, drop_remainder=False)

  @property
  def per_replica(self) -> int:
    """Examples per batch this input pipeline yields."""
    return self.sharing().per_replica

  def sharing(self):
    """How a global batch is shared out (`read_order.Sharing`)."""
    ctx = self.input_context
    if ctx is None:
      return read_order.Sharing(self.batch_size or self.global_batch_size)
    replicas = int(getattr(ctx, "num_replicas_in_sync", 1))
    if replicas % ctx.num_input_pipelines:  # e.g. InputContext(2, i): one replica each
      replicas = ctx.num_input_pipelines
    if self.batch_size is not None:
      per_replica = self.batch_size
    else:
      per_replica, rest = divmod(self.global_batch_size, replicas)
      if rest:
        raise UserError(f"global_batch_size={self.global_batch_size} is not divisible by "
                        f"the {replicas} replicas in sync")
    return read_order.Sharing(per_replica * replicas, replicas, ctx.num_input_pipelines,
                              ctx.input_pipeline_id)

  def num_batches(self, num_examples: int) -> Optional[int]:
    """Batches of `per_replica` in one pass over `num_examples` read by one
    pipeline alone; None when repeating forever."""
    if self.repeat:
      return None
    b = self.per_replica
    return num_examples // b if self.drop_remainder else -(-num_examples // b)

  def plan(self, counts, key: int = 0, *, where: Optional[str] = None, unit: str = "records"):
    """The `read_order.Plan` of files of `counts` records (after `for_split`).

    Raises:
      UserError: drop_remainder with fewer records (`unit`) than one
        global batch (no batch at all), naming `where` and both numbers.
    """
    sharing = self.sharing()
    total = int(sum(counts))
    if self.drop_remainder and total < sharing.global_batch:
      raise UserError(too_few(total, sharing, where, unit))
    stream = read_order.Stream(
        tuple(int(c) for c in counts), bool(self.training),
        read_order.resolve_seed(self.seed) if self.training else 0,
        read_order.used_records(total, sharing.global_batch, bool(self.drop_remainder)),
        read_order.window_records(self.shuffle_buffer, sharing.global_batch), key)
    if self.repeat and not stream.used:
      raise UserError(f"{where + ': ' if where else ''}repeat=True: no {unit} to repeat")
    return read_order.Plan(stream, sharing, bool(self.drop_remainder), self.start_step,
                           self.repeat)


def too_few(total: int, sharing, where: Optional[str] = None, unit: str = "records") -> str:
  """The one-line error of `total` records, fewer than one (global) batch.

  >>> from textrecords.reading.read_order import Sharing
  >>> too_few(94, Sharing(128), "out/d/meta.json")
  'out/d/meta.json: 94 records, fewer than one batch of 128: drop_remainder=True (the \
training default) would give no batch; use a batch size of at most 94 or drop_remainder=False'
  """
  batch = f"batch of {sharing.global_batch}"
  if sharing.replicas > 1:
    batch = f"global {batch} ({sharing.replicas} replicas x {sharing.per_replica})"
  return (f"{where + ': ' if where else ''}{total} {unit}, fewer than one {batch}: "
          "drop_remainder=True (the training default) would give no batch; use a batch "
          f"size of at most {total} or drop_remainder=False")


SHARED_ARGUMENTS = ("training", "seed", "global_batch_size", "input_context", "start_step",
                    "drop_remainder", "shuffle_buffer", "repeat", "verify", "skip_corrupt",
                    "log")


def from_arguments(args: dict) -> ReadOptions:
  """The ReadOptions of a package's `make_dataset`, from its arguments (its
  `locals()`: batch_size, split and SHARED_ARGUMENTS), decided for its split."""
  return ReadOptions(args["batch_size"], **{k: args[k] for k in SHARED_ARGUMENTS}).for_split(
      args["split"])
