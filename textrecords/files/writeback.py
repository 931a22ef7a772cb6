"""Getting a file's data onto disk while the file is still being written.

Every output file is fsynced once, when it is complete, so that a crash never
leaves a file that looks finished but is not on disk. Left alone, the kernel
keeps most of the written data in memory until then (it starts writing back
only past `vm.dirty_background_ratio` of RAM, or after about 30 s), so the
final fsync waits for all of it, with no CPU work to overlap (timed by
figures in docs/benchmarks_history.md), longer for larger
files and slower disks. `Writeback` has a thread ask the
kernel to write what is there each time the file has grown by `every` bytes,
so the final fsync waits for the last stretch only.
"""

import os
import threading
from typing import Optional

DEFAULT_EVERY = 8 << 20

_sync = getattr(os, "fdatasync", os.fsync)  # data, not metadata: the final fsync does both


class Writeback:
  """Writes a growing file's data to disk in the background, every `every` bytes.

  One sync at a time; growth while one runs is picked up by the next.
  `wait()` before the file is closed (it is not closed here).

  >>> import tempfile
  >>> with tempfile.TemporaryFile() as f:
  ...   w = Writeback(f.fileno(), every=4)
  ...   _ = f.write(b"12345"); f.flush(); w.wrote(5)
  ...   w.wait(); w.synced_to
  5
  """

  def __init__(self, fd: int, every: int = DEFAULT_EVERY):
    self._fd = fd
    self._every = every
    self.synced_to = 0  # the file's size when the last sync started
    self._thread: Optional[threading.Thread] = None
    self._error: Optional[OSError] = None

  def wrote(self, size: int):
    """Tells the file's size now (its bytes handed to the kernel)."""
    if size - self.synced_to < self._every:
      return
    if self._thread is not None:
      if self._thread.is_alive():
        return
      self._thread.join()
    self.synced_to = size
    self._thread = threading.Thread(target=self._run, name="textrecords-writeback",
                                    daemon=True)
    self._thread.start()

  def _run(self):
    try:
      _sync(self._fd)
    except OSError as e:
      self._error = e

  def wait(self):
    """Waits for a sync under way.

    Raises:
      OSError: the disk refused a background sync (the caller's own fsync
        would have failed the same way).
    """
    if self._thread is not None:
      self._thread.join()
      self._thread = None
    if self._error is not None:
      error, self._error = self._error, None
      raise error
