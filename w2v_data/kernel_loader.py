"""Whether w2v_data runs its compiled kernels, and loading (or building) them.

The kernels (`w2v_data.kernels`, numba code) are optional: with the `fast`
extra (`pip install textrecords[fast]`, i.e. numba) sampling and record
encoding run as compiled loops; without it, as numpy code. Both give the
same output bytes. `TEXTRECORDS_NUMBA=0` in the environment turns the
kernels off; `TEXTRECORDS_NUMBA=jit` keeps them in numba's JIT (below).

Loading numba's JIT costs CPU in every process (importing numba and its
compiler), about as much as the kernels then save on a corpus like PTB.
So the first run compiles them ahead of time (numba.pycc, in a child
process; needs a C compiler) into a small extension module in a cache
folder (the package's __pycache__, else ~/.cache/textrecords), named by a
hash of the kernels' source, numba's and Python's versions; later runs
import that module (a few ms, without numba). Where it cannot be built, a
`<name>.failed` file there keeps the compiler's output, and numba's JIT
(with its own on-disk cache) is used; delete the file to try again.

>>> kernels() is None or callable(kernels().sample_kernel)
True
"""

import hashlib
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import types
from typing import Callable, Optional

from textrecords.runs import cli

AVAILABLE = importlib.util.find_spec("numba") is not None
_MODE = os.environ.get("TEXTRECORDS_NUMBA", "1")
ENABLED = AVAILABLE and _MODE != "0"
MODEL_CODES = {"skipgram": 0, "cbow": 1, "pv_dm": 2, "pv_dbow": 3}
KERNELS = ("count_kernel", "sample_kernel", "encode_kernel", "alias_kernel")

_LOADED = []
_LOADING = []  # the background thread of `start_loading`
_LOCK = threading.Lock()


def kernels(say: Optional[Callable[[str], None]] = None):
  """The kernels (the functions named in KERNELS) when in use, else None.

  `say`, if given, is told (once) when a first run builds them (about a
  minute): `cli.BUILD_NOTICE`.
  """
  if not ENABLED:
    return None
  with _LOCK:
    if not _LOADED:
      _LOADED.append(_load(say))
  return _LOADED[0]


def loaded():
  """The kernels if this process has loaded them already, else None (loads nothing)."""
  return _LOADED[0] if ENABLED and _LOADED else None


def load_if_built() -> bool:
  """Loads the kernels now if that is quick (built ahead of time already: a
  few ms, no numba import); returns whether they are loaded."""
  if ENABLED and not _LOADED and not _LOADING and _MODE != "jit" and _find_built(
      _module_name())[0]:
    kernels()
  return loaded() is not None


def _load(say=None):
  if _MODE != "jit":
    mod = _ahead_of_time_module(say)
    if mod is not None:
      return types.SimpleNamespace(**{name: getattr(mod, name) for name in KERNELS},
                                   source="aot")
  return jit_kernels(say)


def jit_kernels(say: Optional[Callable[[str], None]] = None):
  """The kernels in numba's JIT (loaded, or compiled on a first run, into numba's cache;
  `say` is told if that takes long)."""
  with cli.notice_if_slow(say):
    # deferred: numba (the fast extra), compiles on import
    from w2v_data import kernels as jit  # pylint: disable=import-outside-toplevel
    jit.prepare()
  return types.SimpleNamespace(**{name: getattr(jit, name) for name in KERNELS}, source="jit")


def _source_key() -> str:
  spec = importlib.util.find_spec("w2v_data.kernels")
  with open(spec.origin, "rb") as f:
    source = f.read()
  h = hashlib.sha256(source + f"|{_numba_version()}|{sys.version}|{sys.platform}".encode())
  return h.hexdigest()[:16]


def _numba_version() -> str:
  """numba's version file (read, not imported: importing numba or
  importlib.metadata costs more than the whole lookup of a built module)."""
  spec = importlib.util.find_spec("numba")
  for folder in spec.submodule_search_locations or []:
    path = os.path.join(folder, "_version.py")
    if os.path.exists(path):
      with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()
  from importlib import metadata  # pylint: disable=import-outside-toplevel
  return metadata.version("numba")


def _cache_dirs():
  here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "__pycache__")
  home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  return [here, os.path.join(home, "textrecords")]


def _module_name() -> str:
  return f"_w2v_kernels_{_source_key()}"


def _find_built(name: str):
  """(path of the built module, or None; whether a `.failed` record comes first),
  looking through the cache folders in order."""
  for d in _cache_dirs():
    path = os.path.join(d, name + importlib.machinery.EXTENSION_SUFFIXES[0])
    if os.path.exists(path):
      return path, False
    if os.path.exists(os.path.join(d, name + ".failed")):
      return None, True
  return None, False


def _ahead_of_time_module(say=None):
  """The compiled extension module: imported, else built (once; `say` is told) and
  imported; None if it cannot be built here."""
  name = _module_name()
  suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
  dirs = _cache_dirs()
  path, failed = _find_built(name)
  if path is not None:
    return _import(name, path)
  if failed:
    return None
  if say is not None:
    say(cli.BUILD_NOTICE)
  for d in dirs:
    try:
      os.makedirs(d, exist_ok=True)
      tmp = tempfile.mkdtemp(prefix=f".{name}-", dir=d)
    except OSError:
      continue
    try:
      root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
      env = dict(os.environ, PYTHONPATH=os.pathsep.join(
          [root] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))
      p = subprocess.run([sys.executable, "-m", "w2v_data.kernels", tmp, name],
                         capture_output=True, text=True, env=env, check=False)
      built = os.path.join(tmp, name + suffix)
      if p.returncode != 0 or not os.path.exists(built):
        if p.returncode > 0 and "KeyboardInterrupt" not in p.stderr:  # not a Ctrl-C: keep
          with open(os.path.join(d, name + ".failed"), "w", encoding="utf-8") as f:
            f.write(p.stdout[-4000:] + p.stderr[-4000:])  # for whoever wonders why
        return None
      path = os.path.join(d, name + suffix)
      os.replace(built, path)
      return _import(name, path)
    finally:
      shutil.rmtree(tmp, ignore_errors=True)
  return None


def _import(name, path):
  spec = importlib.util.spec_from_file_location(name, path)
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  return mod


def start_loading(say: Optional[Callable[[str], None]] = None):
  """Starts `prepare` in a background thread (loading or building the kernels
  while this process waits for workers).

  Call it only when no process is forked before `prepare()` is called, which
  waits for the thread. Nothing to do when the kernels are not in use.
  """
  if ENABLED and not _LOADED and not _LOADING:
    thread = threading.Thread(target=_load_quietly, args=(say,), name="w2v_data kernels",
                              daemon=True)
    thread.start()
    _LOADING.append(thread)


def _load_quietly(say):
  try:
    kernels(say)
  except Exception:  # pylint: disable=broad-except  # prepare() in the caller raises it again
    pass


def wait_loading():
  """Waits for the thread of `start_loading`, if any (before any fork)."""
  if _LOADING and _LOADING[0] is not threading.current_thread():
    _LOADING.pop().join()


def prepare(say: Optional[Callable[[str], None]] = None):
  """Loads (or builds, on a first run: `say` is told) the kernels in this process.

  Called before forking workers: they inherit the loaded kernels instead of
  each loading them. Nothing to do when the kernels are not in use.
  """
  wait_loading()
  kernels(say)
