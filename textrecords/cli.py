"""Shared absl flags, range checks, progress lines and the one-line error exit."""

import sys
import time
from typing import Callable, Optional

from absl import app
from absl import flags

from textrecords import parallel
from textrecords.errors import UserError

FLAGS = flags.FLAGS


def define_text_tool_flags():
  """Flags of every tool that reads text in workers (idempotent)."""
  if "num_workers" in FLAGS:
    return
  flags.DEFINE_integer("num_workers", None,
                       "Worker processes (default: the machine's cores). Output "
                       "bytes never depend on it.")
  flags.DEFINE_enum("on_decode_error", "strict", ["strict", "replace", "skip_line"],
                    "What to do with a line that is not valid UTF-8.")
  flags.DEFINE_bool("verbose", False, "Show tracebacks for unexpected errors.")
  flags.DEFINE_bool("quiet", False, "No progress lines on stderr.")
  flags.DEFINE_bool("overwrite", False, "Replace an existing complete output.")


def define_common_flags():
  """Flags every generator has (idempotent: safe to call from several modules)."""
  if "num_shards" in FLAGS:
    return
  define_text_tool_flags()
  flags.DEFINE_integer("num_shards", 1, "Output shards per file, named "
                       "<file>-SSSSS-of-NNNNN when > 1.")
  flags.DEFINE_string("compression", "", "'' (none) or GZIP.")
  flags.DEFINE_bool("resume", False, "Continue an interrupted run: keep finished "
                    "shards whose checksums match, redo the rest.")


def num_workers(value: Optional[int]) -> int:
  if value is None:
    return parallel.default_num_workers()
  check_range("num_workers", value, 1, 1024)
  return value


def check_range(flag: str, value, lo=None, hi=None):
  """Raises UserError `--flag=value: must be in [lo, hi]` when out of range."""
  if value is None or (lo is not None and value < lo) or (hi is not None and value > hi):
    lo_s = "-inf" if lo is None else lo
    hi_s = "inf" if hi is None else hi
    raise UserError(f"--{flag}={value}: must be in [{lo_s}, {hi_s}]")


class Progress:
  """Throttled progress lines on stderr ("what: n units ...")."""

  def __init__(self, quiet: bool = False, every_s: float = 5.0):
    self.quiet = quiet
    self.every_s = every_s
    self._last = time.monotonic()
    self.start = self._last

  def update(self, message: Callable[[], str], force: bool = False):
    if self.quiet:
      return
    now = time.monotonic()
    if force or now - self._last >= self.every_s:
      self._last = now
      print(f"[{now - self.start:7.1f}s] {message()}", file=sys.stderr, flush=True)


def pyplot():
  """matplotlib's pyplot on the Agg backend, or a UserError naming the extra."""
  try:
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise UserError("--plot needs matplotlib, which is not installed: "
                    "pip install 'textrecords[plot]'") from e
  return plt


def save_figure(plt, fig, path: str):
  """Lays out, saves and closes a figure; UserError naming --plot on failure."""
  fig.tight_layout()
  try:
    fig.savefig(path)
  except (OSError, ValueError) as e:
    raise UserError(f"--plot={path}: cannot save the figure: {e}") from e
  finally:
    plt.close(fig)


def _parse_flags(argv):
  try:
    return FLAGS(argv)
  except flags.Error as e:
    print(f"error: {e}", file=sys.stderr)
    sys.exit(2)


def run(main: Callable):
  """Runs `main(argv)` under absl; user errors become one line and exit 2."""

  def wrapped(argv):
    try:
      main(argv)
    except UserError as e:
      print(f"error: {e}", file=sys.stderr)
      sys.exit(2)
    except KeyboardInterrupt:
      print("error: interrupted", file=sys.stderr)
      sys.exit(130)
    except Exception as e:  # pylint: disable=broad-except
      if "verbose" in FLAGS and FLAGS.verbose:
        raise
      print(f"error: {type(e).__name__}: {e} (rerun with --verbose for a traceback)",
            file=sys.stderr)
      sys.exit(1)

  app.run(wrapped, flags_parser=_parse_flags)
