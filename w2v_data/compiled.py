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
import threading

AVAILABLE = importlib.util.find_spec("numba") is not None
ENABLED = AVAILABLE and os.environ.get("TEXTRECORDS_NUMBA", "1") != "0"

_LOADED = []
_LOADING = []  # the background thread of `start_loading`


def kernels():
  """The kernels module when the compiled kernels are in use, else None."""
  if not ENABLED:
    return None
  if not _LOADED:
    from w2v_data import kernels as mod  # pylint: disable=import-outside-toplevel
    _LOADED.append(mod)
  return _LOADED[0]


def start_loading():
  """Starts `prepare` in a background thread (loading numba takes ~0.3 s of
  CPU, mostly while this process waits for workers).

  Call it only when no process is forked before `prepare()` is called, which
  waits for the thread. Nothing to do when the kernels are not in use.
  """
  if ENABLED and not _LOADED and not _LOADING:
    thread = threading.Thread(target=_load_quietly, name="w2v_data kernels", daemon=True)
    thread.start()
    _LOADING.append(thread)


def _load_quietly():
  try:
    prepare()
  except Exception:  # pylint: disable=broad-except  # prepare() in the caller raises it again
    pass


def wait_loading():
  """Waits for the thread of `start_loading`, if any (before any fork)."""
  if _LOADING and _LOADING[0] is not threading.current_thread():
    _LOADING.pop().join()


def prepare():
  """Loads (or compiles, on a first run) every kernel in this process.

  Called before forking workers: they inherit the compiled code instead of
  each loading it. Nothing to do when the kernels are not in use.
  """
  wait_loading()
  mod = kernels()
  if mod is not None:
    mod.prepare()
