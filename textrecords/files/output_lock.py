"""An advisory lock on an output dataset, so two runs never write one output.

The lock is an `fcntl.flock` on a hidden file beside the metadata
(".NAME.lock"); it holds the owner's pid for the message. The kernel drops
the lock when its process ends, however it ends, so a killed run never
leaves a stale lock. A second run on the same output fails at once:

  error: out/train.tfrecord.meta.json: another run (pid 4242) is writing this
  output; wait for it to finish or choose another output
"""

import contextlib
import fcntl
import os
from typing import Iterator, List

from textrecords.files import storage
from textrecords.errors import UserError


def lock_path(meta_path: str) -> str:
  d, base = os.path.split(os.path.abspath(meta_path))
  return os.path.join(d, f".{base}.lock")


def _acquire(meta_path: str) -> int:
  path = lock_path(meta_path)
  while True:
    try:
      fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
      raise UserError(f"cannot write {path}: {e.strerror}") from e
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      try:
        owner = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
      finally:
        os.close(fd)
      who = f" (pid {owner})" if owner.isdigit() else ""
      raise UserError(f"{meta_path}: another run{who} is writing this output; wait for it "
                      "to finish or choose another output") from None
    # The holder before us may have removed the file after we opened it:
    # then we locked a dead inode, and must lock the file now at `path`.
    try:
      same = os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
      same = False
    if same:
      os.ftruncate(fd, 0)
      os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
      return fd
    os.close(fd)


def _release(meta_path: str, fd: int):
  try:
    os.remove(lock_path(meta_path))  # while still locked: no one else holds it
  except OSError:
    pass
  os.close(fd)


@contextlib.contextmanager
def hold(meta_paths: List[str]) -> Iterator[None]:
  """Holds the locks of these outputs (metadata paths) for the `with` block.

  Creates missing output folders (and removes them again at the end if they
  are still empty, so a failed run leaves nothing).

  Raises:
    UserError: another live run holds one of the locks, or a folder cannot
      be created.
  """
  created: List[str] = []
  held: List[tuple] = []
  try:
    # URL outputs (Beam runs write them in place) have no lock: two machines
    # writing one URL at once are not detected.
    for meta_path in sorted(set(os.path.abspath(p) for p in meta_paths
                                if not storage.is_url(p))):
      folder = os.path.dirname(meta_path)
      _make_folder(folder, created)
      if not os.access(folder, os.W_OK):
        raise UserError(f"output folder {folder} is not writable")
      held.append((meta_path, _acquire(meta_path)))
    yield
  finally:
    for meta_path, fd in reversed(held):
      _release(meta_path, fd)
    for d in reversed(created):
      try:
        os.rmdir(d)  # only if empty
      except OSError:
        pass


def _make_folder(folder: str, created: List[str]):
  missing = []
  d = folder
  while not os.path.isdir(d):
    if os.path.exists(d):
      raise UserError(f"cannot create output folder {folder}: {d} is not a folder")
    missing.append(d)
    parent = os.path.dirname(d)
    if parent == d:
      break
    d = parent
  for d in reversed(missing):
    try:
      os.mkdir(d)
    except FileExistsError:
      continue
    except OSError as e:
      raise UserError(f"cannot create output folder {folder}: {e.strerror}") from e
    created.append(d)
