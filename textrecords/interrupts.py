"""Ctrl-C while a command is still starting: one line and exit 130, no traceback.

Once a command's `main` runs, `textrecords.runs.cli` turns Ctrl-C into
`error: interrupted` and exit 130. Before that, the command's imports take
up to a second (numpy, the package's modules), and an interrupt there used
to end in Python's KeyboardInterrupt traceback. `install_for_commands` (run
by `import textrecords`, the first import of every command) sets a
`sys.excepthook` that ends such an interrupt the same way, but only in a
process that is one of the project's commands (`python -m bert_data.create`,
the `bert-data-create` console scripts, ...): a program that imports the
packages keeps Python's own handling.
"""

import os
import sys
from typing import Optional, Sequence

# Packages whose `python -m` modules are commands, and the console scripts'
# name prefixes (setup.py's `console_scripts`).
COMMAND_PACKAGES = ("bert_data", "w2v_data", "mt_data", "textrecords")
SCRIPT_PREFIXES = ("bert-data-", "w2v-data-", "mt-data-", "textrecords-")
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as the commands' main exits
# Interpreter options that take the next argument as their value.
_OPTIONS_WITH_VALUE = ("-X", "-W", "--check-hash-based-pycs")


def run_module(orig_argv: Sequence[str]) -> Optional[str]:
  """The module of `python [options] -m MODULE ...` (None for a script or -c).

  >>> run_module(["python", "-X", "importtime", "-m", "bert_data.create", "-m"])
  'bert_data.create'
  >>> run_module(["python", "x.py", "-m", "bert_data.create"]) is None
  True
  """
  args = list(orig_argv[1:])
  while args:
    arg = args.pop(0)
    if arg == "-m":
      return args[0] if args else None
    if arg.startswith("-m"):
      return arg[2:]
    if arg in _OPTIONS_WITH_VALUE:
      args = args[1:]
    elif not arg.startswith("-") or arg.startswith("-c") or arg == "-":
      return None
  return None


def is_command(orig_argv: Sequence[str], argv0: str) -> bool:
  """True if this process runs one of the project's commands.

  >>> is_command(["python", "-m", "w2v_data.create"], "-m")
  True
  >>> is_command(["python", "/v/bin/bert-data-create"], "/v/bin/bert-data-create")
  True
  >>> is_command(["python", "-m", "pytest"], "-m"), is_command(["python", "t.py"], "t.py")
  (False, False)
  """
  module = run_module(orig_argv)
  if module is not None:
    return module.split(".")[0] in COMMAND_PACKAGES
  return os.path.basename(argv0).startswith(SCRIPT_PREFIXES)


def _interrupted(exc_type, exc, tb, previous=sys.__excepthook__):
  """sys.excepthook: an uncaught KeyboardInterrupt is one line and exit 130."""
  if not issubclass(exc_type, KeyboardInterrupt):
    previous(exc_type, exc, tb)
    return
  for stream, text in ((sys.stdout, ""), (sys.stderr, "error: interrupted\n")):
    try:
      stream.write(text)
      stream.flush()
    except (OSError, ValueError, AttributeError):
      pass
  os._exit(EXIT_INTERRUPTED)  # pylint: disable=protected-access


def install_for_commands():
  """Sets the excepthook above if this process is a command (see the module doc)."""
  if is_command(getattr(sys, "orig_argv", sys.argv), sys.argv[0] if sys.argv else ""):
    previous = sys.excepthook
    sys.excepthook = lambda t, e, tb: _interrupted(t, e, tb, previous)
