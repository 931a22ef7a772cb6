"""The command-line contract every tool shares.

Shared absl flags, range checks, progress lines, the summary (one line on
stderr, `--quiet` silences it, `--summary_json=PATH` for machines), `--help`
that lists every flag the command takes and exits 0, repeated single-value
flags refused, Ctrl-C as one line and exit 130, the one-line error exit, and
a closed stdout (`... | head -1`) ending the command quietly with exit 141
(128 + SIGPIPE, as Unix tools end).
"""

import contextlib
import gc
import json
import os
import select
import sys
import threading
import time
from typing import Callable, List, Optional

from absl import app
from absl import flags

from textrecords.engine import parallel
from textrecords.errors import UserError
from textrecords.files import text_input
from textrecords.files import storage
from textrecords.files import atomic_file

FLAGS = flags.FLAGS

HELP_FLAGS = ("--help", "-help", "-h", "--h", "-?", "--helpshort", "-helpshort",
              "--helpfull", "-helpfull")


def define_tool_flags():
  """Flags every tool has, readers too (idempotent)."""
  if "verbose" in FLAGS:
    return
  flags.DEFINE_bool("verbose", False, "Show tracebacks for unexpected errors.")


def define_text_tool_flags():
  """Flags of every tool that reads text in workers (idempotent)."""
  define_tool_flags()
  if "num_workers" in FLAGS:
    return
  flags.DEFINE_integer("num_workers", None,
                       "Worker processes (default: the machine's cores). Output "
                       "bytes never depend on it.")
  flags.DEFINE_enum("on_decode_error", "strict", ["strict", "replace", "skip_line"],
                    "What to do with a line that is not valid UTF-8 (replace and "
                    "skip_line report how many lines they changed).")
  flags.DEFINE_bool("quiet", False, "No progress lines and no summary line on stderr "
                    "(warnings and errors still show).")
  flags.DEFINE_bool("overwrite", False, "Replace an existing complete output.")


def define_summary_flag():
  """--summary_json, of every tool that ends with a summary (idempotent)."""
  if "summary_json" in FLAGS:
    return
  flags.DEFINE_string("summary_json", None, "Also write the run's full summary as JSON "
                      "to this file (atomically), for scripts.")


def define_common_flags():
  """Flags every generator has (idempotent: safe to call from several modules)."""
  if "num_shards" in FLAGS:
    return
  define_text_tool_flags()
  flags.DEFINE_integer("num_shards", 1, "Output shards per file, named "
                       "<file>-SSSSS-of-NNNNN when > 1.")
  flags.DEFINE_string("compression", "", "'' (none) or GZIP, any case.")
  flags.DEFINE_bool("resume", False, "Continue an interrupted run: keep finished "
                    "shards whose checksums match, redo the rest.")
  define_summary_flag()
  flags.DEFINE_enum("engine", "local", ["local", "beam", "dask"],
                    "local: worker processes on this machine; beam: an Apache Beam "
                    "pipeline (same bytes; needs textrecords[beam]); dask: a "
                    "dask.distributed cluster (same bytes; needs textrecords[dask]).")
  flags.DEFINE_string("dask_scheduler", "",
                      "With --engine=dask: the scheduler's HOST:PORT; without it, a local "
                      "cluster of --num_workers processes.")
  flags.DEFINE_string("beam_pipeline_options", "",
                      "With --engine=beam: Beam pipeline options as comma-separated "
                      "key=value, e.g. runner=DirectRunner,direct_num_workers=2,"
                      "direct_running_mode=multi_processing.")


def num_workers(value: Optional[int]) -> int:
  if value is None:
    return parallel.default_num_workers()
  check_range("num_workers", value, 1, 1024)
  return value


def check_range(flag: str, value, lo=None, hi=None, *, hi_flag: Optional[str] = None):
  """Raises UserError `--flag=value: must be in [lo, hi]` when out of range.

  `hi_flag` names the flag whose value `hi` is, so that the message names
  both flags (the user may have changed either):

  >>> check_range("max_predictions_per_seq", 20, 0, 5, hi_flag="max_seq_length")
  Traceback (most recent call last):
  ...
  textrecords.errors.UserError: --max_predictions_per_seq=20: must be in [0, 5] \
(at most --max_seq_length=5): lower it or raise --max_seq_length
  """
  if value is None or (lo is not None and value < lo) or (hi is not None and value > hi):
    lo_s = "-inf" if lo is None else lo
    hi_s = "inf" if hi is None else hi
    bound = (f" (at most --{hi_flag}={hi}): lower it or raise --{hi_flag}"
             if hi_flag and value is not None and hi is not None and value > hi else "")
    raise UserError(f"--{flag}={value}: must be in [{lo_s}, {hi_s}]{bound}")


def refuse_without_effect(flag_values, names, why: str):
  """UserError naming the first of `names` given on the command line, which
  would have no effect with the options chosen (`why`, e.g. "with
  --tokenizer=word"), rather than ignoring it silently."""
  for name in names:
    if flag_values[name].present:
      raise UserError(f"--{name}={flag_values[name].value}: has no effect {why}; drop it")


BUILD_NOTICE = "building compiled kernels once, ~1 min (later runs reuse them)"


@contextlib.contextmanager
def notice_if_slow(say: Optional[Callable[[str], None]], message: str = BUILD_NOTICE,
                   after_s: float = 3.0):
  """Calls `say(message)` once if the block is still running after `after_s`.

  For a step that is quick except the first time (numba compiling kernels
  into its cache), so that a first run is not silent for a minute. `say`
  None (e.g. --quiet) says nothing.
  """
  timer = None
  if say is not None:
    timer = threading.Timer(after_s, say, (message,))
    timer.daemon = True
    timer.start()
  try:
    yield
  finally:
    if timer is not None:
      timer.cancel()


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

  def sayer(self, prefix: str = "") -> Optional[Callable[[str], None]]:
    """`say(message)`: one progress line now (for `notice_if_slow`); None if quiet."""
    if self.quiet:
      return None
    return lambda message: self.update(lambda: prefix + message, force=True)


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


def check_summary_path(path: Optional[str]) -> Optional[str]:
  """Fails early (before the run) if --summary_json cannot be written."""
  if not path:
    return None
  folder = os.path.dirname(os.path.abspath(path))
  if os.path.isdir(path):
    raise UserError(f"--summary_json={path}: is a folder, expected a file path")
  if not os.path.isdir(folder):
    raise UserError(f"--summary_json={path}: folder {folder} does not exist")
  if not os.access(folder, os.W_OK):
    raise UserError(f"--summary_json={path}: folder {folder} is not writable")
  return path


def report(line: str, summary: dict, *, quiet: bool, summary_json: Optional[str]):
  """The end of a generator run: one summary line on stderr, and the JSON file.

  Args:
    line: the one-line summary ("pkg: counts -> output"); not printed if quiet.
    summary: the full summary, written to `summary_json` if that is set.
  """
  if summary_json:
    w = atomic_file.AtomicWriter(summary_json)
    w.write((json.dumps(summary, indent=1, sort_keys=True, ensure_ascii=False)
             + "\n").encode("utf-8"))
    w.commit()
  if not quiet:
    print(line.replace("\n", " "), file=sys.stderr, flush=True)


def decode_note(counts: dict) -> str:
  """", 3 lines with invalid UTF-8 replaced" from a dict with replaced_lines /
  skipped_lines (as `text_input.DecodeErrorCounts.as_dict`), or ''.

  >>> decode_note({"replaced_lines": 0, "skipped_lines": 2})
  ', 2 lines with invalid UTF-8 skipped'
  """
  text = text_input.DecodeErrorCounts(counts.get("replaced_lines", 0),
                                      counts.get("skipped_lines", 0)).describe()
  return f", {text}" if text else ""


def decode_errors(counts: dict) -> dict:
  """The summary JSON's `decode_errors` block (the same in every generator) from a
  dict with replaced_lines / skipped_lines (missing: 0, as in older metadata).

  >>> decode_errors({"documents": 3, "skipped_lines": 2})
  {'replaced_lines': 0, 'skipped_lines': 2}
  """
  return {k: counts.get(k, 0) for k in ("replaced_lines", "skipped_lines")}


def summary(package: str, outputs, counts: dict, files=(), **details) -> dict:
  """The `--summary_json` of every generator (and build_vocab): one shape.

  {"package": "w2v_data", "outputs": ["out/w2v"], "counts": {...},
   "decode_errors": {"replaced_lines": 0, "skipped_lines": 0},
   "files": [{"name", "bytes", "sha256", ...}], ...package details...}

  Args:
    package: the tool's package.
    outputs: the output locations as given (a str or a list).
    counts: the run's counts (the metadata's `counts`).
    files: the files written (the metadata's `files` entries).
    details: package-specific fields (vocab sizes, splits, ...); they may not
      shadow the shared ones.

  >>> summary("p", "out", {"lines": 2})["decode_errors"]
  {'replaced_lines': 0, 'skipped_lines': 0}
  """
  out = {"package": package, "outputs": [outputs] if isinstance(outputs, str) else list(outputs),
         "counts": dict(counts), "decode_errors": decode_errors(counts), "files": list(files)}
  clash = sorted(set(details) & set(out))
  if clash:
    raise ValueError(f"summary details {clash} shadow the shared fields")
  out.update(details)
  return out


def check_no_positional(argv):
  if len(argv) > 1:
    raise UserError(f"unexpected arguments {' '.join(argv[1:])}: every setting is a --flag")


def _module_key(main: Callable) -> str:
  """The name absl registered the main module's flags under."""
  return sys.argv[0] if main.__module__ == "__main__" else main.__module__


def _help_text(main: Callable, full: bool) -> str:
  module = sys.modules.get(main.__module__)
  doc = (module.__doc__ or "").strip() if module else ""
  if full:
    return f"{doc}\n\n{FLAGS.get_help()}\n" if doc else FLAGS.get_help() + "\n"
  parts = [doc] if doc else []
  by_module = FLAGS.flags_by_module_dict()
  own = _module_key(main)
  for name in (own, __name__):
    if by_module.get(name):
      parts.append(FLAGS.module_help(name).replace(f"{own}:", "flags:", 1)
                   .replace(f"{__name__}:", "shared flags:", 1))
  parts.append("--helpfull lists every flag (absl's own too).")
  return "\n\n".join(p.strip("\n") for p in parts) + "\n"


def asks_for_help(args) -> List[str]:
  """The help flags (HELP_FLAGS) among `args`, the arguments before a `--`."""
  if "--" in args:
    args = args[:args.index("--")]
  return [a.split("=", 1)[0] for a in args if a.split("=", 1)[0] in HELP_FLAGS]


def repeated_flag(flag_values: flags.FlagValues) -> Optional[str]:
  """What is wrong with a single-value flag given more than once, or None.

  >>> values = flags.FlagValues()
  >>> _ = flags.DEFINE_string("input_file", None, "", flag_values=values)
  >>> _ = values(["tool", "--input_file=a", "--input_file=b"])
  >>> repeated_flag(values)
  '--input_file is given 2 times; give it once (several files: one comma-separated value)'
  """
  for name in sorted(flag_values):
    flag = flag_values[name]
    if flag.present > 1 and not isinstance(flag, flags.MultiFlag):
      return (f"--{name} is given {flag.present} times; give it once"
              + (" (several files: one comma-separated value)" if "file" in name else ""))
  return None


def _parse_flags(argv, main: Optional[Callable] = None, unknown_flag: Optional[str] = None):
  helps = asks_for_help(argv[1:])
  if helps and main is not None:
    try:
      sys.stdout.write(_help_text(main, full=any("helpfull" in h for h in helps)))
      sys.stdout.flush()
    except BrokenPipeError:
      sys.exit(_silence_stdout())
    sys.exit(0)
  try:
    rest = FLAGS(argv)
  except flags.UnrecognizedFlagError as e:
    print(f"error: {unknown_flag.format(flag=f'--{e.flagname}') if unknown_flag else e}",
          file=sys.stderr)
    sys.exit(2)
  except flags.Error as e:
    print(f"error: {e}", file=sys.stderr)
    sys.exit(2)
  repeated = repeated_flag(FLAGS)
  if repeated:
    print(f"error: {repeated}", file=sys.stderr)
    sys.exit(2)
  return rest


def entry_point(define_flags: Callable[[], None], main: Callable,
                unknown_flag: Optional[str] = None) -> Callable[[], None]:
  """A console script (setup.py) for a tool: defines its flags, then `run(main)`."""

  def start():
    define_flags()
    run(main, unknown_flag=unknown_flag)

  return start


def run_script(main: Callable[[], Optional[int]]) -> int:
  """Runs a script's `main()` (flags: `script_args.ScriptParser`): the exit status, with user
  errors as one line and exit 2, Ctrl-C as one line and exit 130."""
  try:
    status = main() or 0
    sys.stdout.flush()
    return status
  except UserError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  except KeyboardInterrupt:
    print("error: interrupted", file=sys.stderr)
    return 130
  except BrokenPipeError:
    if not stdout_reader_gone():
      raise
    return _silence_stdout()
  except Exception as e:  # pylint: disable=broad-except
    if _unreachable_storage(e):
      return 2
    raise


def _unreachable_storage(e: Exception) -> bool:
  """Prints `error: cannot reach the storage: WHY` and returns True if `e` is
  a storage client's failure to use its service (no credentials, no
  connection) that no `storage.reaching` block turned into a UserError."""
  if not storage.is_unreachable_error(e):
    return False
  print(f"error: cannot reach the storage: {type(e).__name__}: {e}", file=sys.stderr)
  return True


EXIT_CLOSED_PIPE = 141  # 128 + SIGPIPE: the status of a Unix tool whose reader left


def stdout_reader_gone() -> bool:
  """Whether stdout is a pipe whose reading end was closed (`| head -1`), so a
  BrokenPipeError came from our output (not from, say, a worker's pipe)."""
  try:
    poller = select.poll()
    poller.register(sys.stdout.fileno(), select.POLLOUT)
    return any(ev & select.POLLERR for _, ev in poller.poll(0))
  except (AttributeError, OSError, ValueError):  # no poll, stdout not a file
    return False


def _silence_stdout() -> int:
  """Points stdout at /dev/null (so the flush at exit prints no 'Exception
  ignored' line); returns the exit status of a command whose reader left."""
  try:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
  except (OSError, ValueError):
    pass
  return EXIT_CLOSED_PIPE


def _skip_collections_at_exit():
  """The process exits next: its objects need no more cycle collection.

  Python's shutdown runs the cycle collector over every object while it
  tears the modules down (most of a w2v_data run's exit, after numpy,
  absl and the generator's modules; docs/benchmarks_history.md). Frozen objects are skipped; the
  memory goes back to the system with the process, files were closed and
  committed by then, and atexit handlers still run.
  """
  gc.freeze()


def run(main: Callable, unknown_flag: Optional[str] = None):
  """Runs `main(argv)` under absl; user errors become one line and exit 2.

  `main` gets the arguments that are no flag (argv[0] first). An unknown flag
  is one line, absl's words or `unknown_flag` with `{flag}` (`--name`) filled.

  Ctrl-C (SIGINT, to this process or its whole process group) prints
  `error: interrupted` and exits 130; worker processes ignore SIGINT (see
  `parallel`), so no traceback is printed. A closed stdout (`| head -1`)
  ends the command silently with exit 141.
  """

  def wrapped(argv):
    try:
      main(argv)
      sys.stdout.flush()  # a closed pipe shows here, not at exit
      _skip_collections_at_exit()
    except UserError as e:
      print(f"error: {e}", file=sys.stderr)
      sys.exit(2)
    except KeyboardInterrupt:
      print("error: interrupted", file=sys.stderr)
      sys.exit(130)
    except Exception as e:  # pylint: disable=broad-except
      if isinstance(e, BrokenPipeError) and stdout_reader_gone():
        sys.exit(_silence_stdout())
      has_verbose = "verbose" in FLAGS
      if has_verbose and FLAGS.verbose:
        raise
      if _unreachable_storage(e):
        sys.exit(2)
      hint = " (rerun with --verbose for a traceback)" if has_verbose else ""
      print(f"error: {type(e).__name__}: {e}{hint}", file=sys.stderr)
      sys.exit(1)

  try:
    app.run(wrapped, flags_parser=lambda argv: _parse_flags(argv, main, unknown_flag))
  except KeyboardInterrupt:  # before main started (imports, flag parsing)
    print("error: interrupted", file=sys.stderr)
    sys.exit(130)
