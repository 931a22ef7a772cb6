"""What every script in scripts/ checks before any work: its flags and its packages.

`ScriptParser` is argparse's parser with one-line usage errors and a check
per flag (`check=`), run as soon as the flags are parsed, so that a bad value
(`--steps=-3`, `--learning_rate=0`, a missing `--vectors` file) ends the
script in one line naming the flag, exit 2, before TensorFlow is imported,
anything is read or a step is trained. `require` imports the optional
packages a script needs, or refuses in one line naming what to install.

Example:
  >>> p = ScriptParser(prog="train")
  >>> _ = p.add_argument("--steps", type=int, default=50, check=POSITIVE)
  >>> p.parse_args(["--steps=3"]).steps
  3
  >>> POSITIVE(0), RATE(-1.0), RATE(0.5), DROPOUT(1.0)
  ('must be >= 1', 'must be > 0', None, 'must be in [0, 1)')
"""

import argparse
import importlib
import os
import sys
from typing import Callable, Optional, Sequence

from textrecords.errors import UserError

# A check takes a parsed value and returns what is wrong with it, or None.
Check = Callable[[object], Optional[str]]

TENSORFLOW_INSTALL = "pip install -e '.[cpu]' (or '.[gpu]' for an NVIDIA GPU)"
JAX_INSTALL = "pip install -e '.[jax]'"


def at_least(lo) -> Check:
  """A check that the value is >= lo."""
  return lambda value: None if value >= lo else f"must be >= {lo}"


def above(lo) -> Check:
  """A check that the value is > lo (rates, thresholds)."""
  return lambda value: None if value > lo else f"must be > {lo}"


def within(lo, hi, *, lo_open: bool = False, hi_open: bool = False) -> Check:
  """A check that lo <= value <= hi (lo < value with `lo_open`, value < hi with `hi_open`)."""

  def check(value):
    low_ok = lo < value if lo_open else lo <= value
    high_ok = value < hi if hi_open else value <= hi
    if low_ok and high_ok:
      return None
    return f"must be in {'(' if lo_open else '['}{lo}, {hi}{')' if hi_open else ']'}"

  return check


POSITIVE = at_least(1)
NON_NEGATIVE = at_least(0)
RATE = above(0)
SEED = within(0, 2**32 - 1)  # numpy's and Keras's seeds
DROPOUT = within(0, 1, hi_open=True)
FRACTION = within(0, 1, lo_open=True)  # a subsampling threshold


def existing_files(value: str) -> Optional[str]:
  """A check that each comma-separated path names an existing file."""
  for path in filter(None, value.split(",")):
    if not os.path.isfile(path):
      return f"no such file: {path}" if "," in value else "no such file"
  return None


def writable_folder(value: str) -> Optional[str]:
  """A check that an output path's folder exists (the file is written after training)."""
  folder = os.path.dirname(os.path.abspath(value))
  if os.path.isdir(value):
    return "is a folder; give a file path"
  return None if os.path.isdir(folder) else f"its folder {folder} does not exist"


class ScriptParser(argparse.ArgumentParser):
  """argparse's parser whose errors are one line on stderr ("error: ..."), exit 2.

  `add_argument(..., check=CHECK)` checks the flag's parsed value (None,
  an absent flag without a default, is not checked): `--flag=value: what is
  wrong`. `refuse(message)` ends the script the same way, for checks of
  several flags together.
  """

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self._checks = []

  def add_argument(self, *args, check: Optional[Check] = None, **kwargs):  # pylint: disable=arguments-differ
    action = super().add_argument(*args, **kwargs)
    if check is not None:
      self._checks.append((action, check))
    return action

  def parse_known_args(self, args=None, namespace=None):
    parsed, rest = super().parse_known_args(args, namespace)
    for action, check in self._checks:
      value = getattr(parsed, action.dest, None)
      problem = None if value is None else check(value)
      if problem:
        self.refuse(f"{action.option_strings[0]}={value}: {problem}")
    return parsed, rest

  def refuse(self, message: str):
    """Ends the script: `error: message` on stderr, exit 2."""
    self.exit(2, f"error: {message}\n")

  def error(self, message):
    self.exit(2, f"error: {message} (--help for usage)\n")


def check_batch_fits(batch_size: int, available: int, what: str):
  """Refuses a batch larger than the data (a training dataset would have no batch).

  Raises:
    UserError: `--batch_size=B: more than the N <what>; lower --batch_size`.
  """
  if available < batch_size:
    raise UserError(f"--batch_size={batch_size}: more than the {available:,} {what}; "
                    "lower --batch_size")


def require(modules: Sequence[str], install: str):
  """Imports `modules` (in order); a missing one is a UserError naming it and `install`.

  Raises:
    UserError: `<module> is not installed: <install>` (also when a module's
      own import misses another package, e.g. keras on the JAX backend without jax).
  """
  for name in modules:
    if sys.modules.get(name) is not None:
      continue
    try:
      importlib.import_module(name)
    except ImportError as e:
      missing = (e.name or name).split(".")[0]
      raise UserError(f"{missing} is not installed (this script needs "
                      f"{', '.join(modules)}): {install}") from e


def require_tensorflow():
  """`require` of TensorFlow and Keras, naming the cpu / gpu extras."""
  require(("tensorflow", "keras"), TENSORFLOW_INSTALL)
