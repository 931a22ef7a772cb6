"""Whether w2v_data runs its compiled kernels (numba), and loading them.

The kernels (`w2v_data.kernels`) are optional: with the `fast` extra
(`pip install textrecords[fast]`, i.e. numba) sampling and record encoding
run as compiled loops; without it, as numpy code. Both give the same
output bytes. `TEXTRECORDS_NUMBA=0` in the environment turns the kernels
off. numba is imported only when a kernel is first needed, so runs and
readers that never sample pay nothing for it.

>>> kernels() is None or hasattr(kernels(), "sample_kernel")
True
"""

import importlib.util
import os

AVAILABLE = importlib.util.find_spec("numba") is not None
ENABLED = AVAILABLE and os.environ.get("TEXTRECORDS_NUMBA", "1") != "0"

_LOADED = []


def kernels():
  """The kernels module when the compiled kernels are in use, else None."""
  if not ENABLED:
    return None
  if not _LOADED:
    from w2v_data import kernels as mod  # pylint: disable=import-outside-toplevel
    _LOADED.append(mod)
  return _LOADED[0]


def prepare():
  """Loads (or compiles, on a first run) every kernel in this process.

  Called before forking workers: they inherit the compiled code instead of
  each loading it. Nothing to do when the kernels are not in use.
  """
  mod = kernels()
  if mod is not None:
    mod.prepare()
