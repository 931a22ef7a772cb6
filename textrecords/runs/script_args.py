"""What every script in scripts/ checks before any work: its flags and its packages.

`ScriptParser` parses a script's flags with absl, in the reference's flag
syntax as the commands (`--packed`, `--nopacked`, `--packed=false`,
`--steps=3`, `--steps 3`), into a private `absl.flags.FlagValues` of its own
(so several scripts, or several parses, live in one process). It takes the
`add_argument` calls of argparse that the scripts use and adds a check per flag
(`check=`), run as soon as the flags are parsed, so that a bad value
(`--steps=-3`, `--learning_rate=0`, a missing `--vectors` file) ends the
script in one line naming the flag, exit 2, before TensorFlow is imported,
anything is read or a step is trained. `require` imports the optional
packages a script needs, or refuses in one line naming what to install.

Example:
  >>> p = ScriptParser(prog="train")
  >>> p.add_argument("--steps", type=int, default=50, check=POSITIVE)
  >>> p.add_argument("--packed", action="store_true")
  >>> a = p.parse_args(["--steps=3", "--packed"])
  >>> a.steps, a.packed, p.parse_args(["--nopacked"]).packed
  (3, True, False)
  >>> POSITIVE(0), RATE(-1.0), RATE(0.5), DROPOUT(1.0)
  ('must be >= 1', 'must be > 0', None, 'must be in [0, 1)')
"""

import dataclasses
import importlib
import os
import re
import sys
import textwrap
import types
from typing import Any, Callable, List, NoReturn, Optional, Sequence

from absl import flags

from textrecords.errors import UserError
from textrecords.runs import cli

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


SUPPRESS = "==SUPPRESS=="  # help= of an internal flag that --help does not list

# absl's definition of each argparse `type=`.
_DEFINE = {str: flags.DEFINE_string, int: flags.DEFINE_integer, float: flags.DEFINE_float}
_TYPE_NAMES = {None: "str", str: "str", int: "int", float: "float"}
_FLAG_VALUE = re.compile(r"^flag --([^=]+)=")  # absl's bad value: "flag --name=value: why"
_MISSING_VALUE = "Missing value for flag "  # absl's "--name" at the end of argv


@dataclasses.dataclass
class _Argument:
  """One `add_argument`: a flag (`--name`) or a positional argument (`name`)."""
  name: str
  dest: str
  kind: str  # "str", "int", "float", "bool", "choice", "multi"
  help: str
  required: bool = False
  check: Optional[Check] = None
  convert: Optional[Callable] = None  # a positional's type, or a choice's (choices=(0, 1, 2))
  choices: tuple = ()
  positional: bool = False

  @property
  def shown(self) -> str:
    return self.name if self.positional else f"--{self.name}"


class ScriptParser:
  """A script's flags on absl, declared with argparse's `add_argument`.

  `add_argument` takes the subset of argparse the scripts use: `type=` (str,
  int, float), `action="store_true"` (an absl bool: `--x`, `--nox`,
  `--x=false`), `action="append"` (a repeatable flag), `choices=`,
  `default=`, `help=` (`SUPPRESS` leaves the flag out of --help),
  `required=`, `dest=`, positional arguments (a name without dashes: what
  absl leaves over, in order), and `check=CHECK`, the flag's parsed value checked (None, an absent
  flag without a default, is not checked): `--flag=value: what is wrong`.
  `parse_args` returns a namespace of the values. Every error is one line
  on stderr (`error: ...` naming the flag), exit 2: an unknown flag, a bad
  value, a flag given twice, a missing required flag, a failed check.
  `refuse(message)` ends the script the same way, for checks of several
  flags together.
  """

  def __init__(self, prog: Optional[str] = None, description: Optional[str] = None):
    self.prog = prog or os.path.basename(sys.argv[0])
    self.description = description
    self._flag_values = flags.FlagValues()  # not absl's global FLAGS: one per parser
    self._arguments: List[_Argument] = []
    self._defaults = {}

  # type= and help= as argparse names them.
  def add_argument(  # pylint: disable=redefined-builtin
      self, name: str, *, type: Optional[Callable] = None, default: Any = None,
      help: str = "", required: bool = False, choices: Optional[Sequence] = None,
      action: Optional[str] = None, dest: Optional[str] = None,
      check: Optional[Check] = None) -> None:
    """Declares `--name` (a flag) or `name` (a positional argument); see the class."""
    flag = name.lstrip("-")
    argument = _Argument(name=flag, dest=dest or flag.replace("-", "_"), kind="str", help=help,
                         required=required, check=check, positional=not name.startswith("-"))
    if argument.positional:
      argument.required, argument.convert = True, type
      argument.kind = _TYPE_NAMES.get(type, "str")
    else:
      self._define(argument, type, default, choices, action)
    self._arguments.append(argument)

  def _define(self, argument: _Argument, kind: Optional[Callable], default, choices, action):
    """Defines the absl flag of `argument` in this parser's FlagValues."""
    name, text, values = argument.name, argument.help, self._flag_values
    kind = str if kind is None else kind
    if action == "store_true":
      argument.kind = "bool"
      flags.DEFINE_bool(name, bool(default), text, flag_values=values)
    elif action == "append":
      argument.kind = "multi"
      flags.DEFINE_multi_string(name, default, text, flag_values=values)
    elif action is not None or kind not in _DEFINE:
      raise ValueError(f"ScriptParser: --{name}: action={action!r}, type={kind!r} "
                       "not supported")
    elif choices is not None:
      argument.kind, argument.choices = "choice", tuple(str(c) for c in choices)
      argument.convert = None if kind is str else kind
      flags.DEFINE_enum(name, None if default is None else str(default), argument.choices,
                        text, flag_values=values)
    else:
      argument.kind = _TYPE_NAMES[kind]
      _DEFINE[kind](name, default, text, flag_values=values)

  def set_defaults(self, **values):
    """Attributes of every parse's namespace that no flag sets."""
    self._defaults.update(values)

  def parse_args(self, argv: Optional[Sequence[str]] = None) -> types.SimpleNamespace:
    """The values of `argv` (default: sys.argv[1:]), by `dest`; --help prints the
    flags and exits 0, an error is one line and exit 2."""
    args = list(sys.argv[1:] if argv is None else argv)
    if cli.asks_for_help(args):
      sys.stdout.write(self.format_help())
      sys.exit(0)
    values = self._flag_values
    values.unparse_flags()  # a parser may parse again
    try:
      rest = values([self.prog, *args])[1:]
    except flags.Error as e:
      self.error(self._describe(e))
    repeated = cli.repeated_flag(values)
    if repeated:
      self.refuse(repeated)
    parsed = types.SimpleNamespace(**self._defaults)
    self._take_positionals(rest, parsed)
    for argument in self._arguments:
      if not argument.positional:
        value = values[argument.name].value
        if argument.convert is not None and value is not None:
          value = argument.convert(value)
        setattr(parsed, argument.dest, value)
    self._check(parsed)
    return parsed

  def _take_positionals(self, rest: List[str], parsed: types.SimpleNamespace):
    """Sets the positional arguments from absl's leftover argv; refuses missing
    required flags and arguments, and leftovers that no argument takes."""
    positionals = [a for a in self._arguments if a.positional]
    missing = [a.shown for a in self._arguments
               if a.required and not a.positional and not self._flag_values[a.name].present]
    missing += [a.shown for a in positionals[len(rest):]]
    if missing:
      self.error(f"the following arguments are required: {', '.join(missing)}")
    if len(rest) > len(positionals):
      self.error(f"unrecognized arguments: {' '.join(rest[len(positionals):])}")
    for argument, raw in zip(positionals, rest):
      try:
        value = raw if argument.convert is None else argument.convert(raw)
      except ValueError:
        self.error(f"argument {argument.name}: invalid {argument.kind} value: {raw!r}")
      setattr(parsed, argument.dest, value)

  def _check(self, parsed: types.SimpleNamespace):
    for argument in self._arguments:
      value = getattr(parsed, argument.dest)
      problem = None if argument.check is None or value is None else argument.check(value)
      if problem:
        self.refuse(f"{argument.shown}={value}: {problem}")

  def _describe(self, e: flags.Error) -> str:
    """absl's parse error as one line naming the flag (argparse's words for a bad value)."""
    if isinstance(e, flags.UnrecognizedFlagError):
      return f"--{e.flagname}: unknown flag"
    if str(e).startswith(_MISSING_VALUE):
      return f"argument {str(e)[len(_MISSING_VALUE):]}: expected a value"
    text, match = str(e), _FLAG_VALUE.match(str(e))
    argument = next((a for a in self._arguments if match and a.name == match.group(1)), None)
    reason = f": {e.__context__}"
    if argument is None or e.__context__ is None or not text.endswith(reason):
      return text
    raw = text[match.end():-len(reason)]
    if argument.kind == "choice":
      return (f"argument --{argument.name}: invalid choice: {raw!r} (choose from "
              f"{', '.join(repr(c) for c in argument.choices)})")
    suffix = " (true or false)" if argument.kind == "bool" else ""
    return f"argument --{argument.name}: invalid {argument.kind} value: {raw!r}{suffix}"

  def format_help(self) -> str:
    """The usage line, the description and every flag but the SUPPRESS ones."""
    positionals = [a for a in self._arguments if a.positional]
    lines = [" ".join([f"usage: {self.prog} [flags]", *(a.name for a in positionals)])]
    if self.description:
      lines += ["", self.description.strip()]
    for title, positional in (("arguments:", True), ("flags:", False)):
      shown = [a for a in self._arguments if a.positional == positional and a.help != SUPPRESS]
      lines += ["", title] if shown else []
      for argument in shown:
        text = ": ".join(filter(None, [self._synopsis(argument), self._details(argument)]))
        lines += textwrap.wrap(text, 88, initial_indent="  ", subsequent_indent="      ")
    return "\n".join(lines) + "\n"

  @staticmethod
  def _synopsis(argument: _Argument) -> str:
    if argument.positional:
      return argument.name
    if argument.kind == "bool":
      return f"--[no]{argument.name}"
    if argument.kind == "choice":
      return f"--{argument.name}=<{'|'.join(argument.choices)}>"
    return f"--{argument.name}=<{'str' if argument.kind == 'multi' else argument.kind}>"

  def _details(self, argument: _Argument) -> str:
    notes = []
    if argument.required and not argument.positional:
      notes.append("required")
    elif argument.kind == "multi":
      notes.append("repeatable")
    elif not argument.positional and self._flag_values[argument.name].default is not None:
      notes.append(f"default: {self._flag_values[argument.name].default!r}")
    return " ".join(filter(None, [argument.help, f"({'; '.join(notes)})" if notes else ""]))

  def print_help(self):
    sys.stdout.write(self.format_help())

  def refuse(self, message: str) -> NoReturn:
    """Ends the script: `error: message` on stderr, exit 2."""
    sys.stderr.write(f"error: {message}\n")
    sys.exit(2)

  def error(self, message: str) -> NoReturn:
    """Ends the script on a usage error: `error: message (--help for usage)`, exit 2."""
    self.refuse(f"{message} (--help for usage)")


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
