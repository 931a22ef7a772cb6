"""The `make_dataset` contract shared by bert_data, w2v_data and mt_data.

Every package's `make_dataset(location, [split,] batch_size, *, ...)` takes
these keyword arguments with these defaults, checked here once, so the same
mistake gets the same one-line error in every package:

  training=None        shuffle (files and records, reshuffled each epoch);
                       None: True for the "train" split, False otherwise
  seed=None            makes shuffling (and other draws) repeatable
  shuffle_buffer=10000 examples mixed by the record shuffle (training only)
  drop_remainder=False drop the last partial batch (static batch dimension)
  repeat=False         repeat the records forever (an infinite dataset)
  input_context=None   a tf.distribute.InputContext: files are shared out
  verify="checksum"    "checksum" (size + sha256), "size" or "none"
  skip_corrupt=False   skip (and log) files that fail `verify`
  log=print            where skipped files and long checks are reported

Example:
  >>> ReadOptions(32).for_split("valid")
  ReadOptions(batch_size=32, training=False, seed=None, shuffle_buffer=10000, \
drop_remainder=False, repeat=False, input_context=None, verify='checksum', skip_corrupt=False)
  >>> ReadOptions(32, drop_remainder=True).num_batches(100)
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
from textrecords.layout import DEFAULT_SPLIT
from textrecords.metadata import VERIFY_MODES

SHUFFLE_BUFFER = 10000


def _is_int(value) -> bool:
  return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _check(name: str, value, ok: bool, what: str):
  if not ok:
    raise UserError(f"{name}={value!r}: must be {what}")


@dataclasses.dataclass(frozen=True)
class ReadOptions:
  """The validated shared arguments of `make_dataset` (see the module doc)."""
  batch_size: int
  training: Optional[bool] = None
  seed: Optional[int] = None
  shuffle_buffer: int = SHUFFLE_BUFFER
  drop_remainder: bool = False
  repeat: bool = False
  input_context: Any = None
  verify: str = "checksum"
  skip_corrupt: bool = False
  log: Callable[[str], Any] = dataclasses.field(default=print, repr=False, compare=False)

  def __post_init__(self):
    _check("batch_size", self.batch_size, _is_int(self.batch_size) and self.batch_size >= 1,
           "a positive integer")
    _check("shuffle_buffer", self.shuffle_buffer,
           _is_int(self.shuffle_buffer) and self.shuffle_buffer >= 1, "a positive integer")
    _check("seed", self.seed, self.seed is None or _is_int(self.seed),
           "an integer or None")
    _check("training", self.training, self.training is None or isinstance(self.training, bool),
           "True, False or None")
    for name in ("drop_remainder", "repeat", "skip_corrupt"):
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
    for name in ("batch_size", "shuffle_buffer", "seed"):
      value = getattr(self, name)
      if value is not None:
        object.__setattr__(self, name, int(value))

  def for_split(self, split: str = DEFAULT_SPLIT) -> "ReadOptions":
    """These options with `training` decided for `split`."""
    training = (split == DEFAULT_SPLIT) if self.training is None else self.training
    return dataclasses.replace(self, training=training)

  def num_batches(self, num_examples: int) -> Optional[int]:
    """Batches in one pass over `num_examples`; None when repeating forever."""
    if self.repeat:
      return None
    if self.drop_remainder:
      return num_examples // self.batch_size
    return -(-num_examples // self.batch_size)
