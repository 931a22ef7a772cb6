"""Atomic single files: written under a temp name, renamed into place on commit.

Owns the temp naming (".NAME.tmp-PID-NONCE", and telling a dead run's
leftovers from a live run's), the commit / abort of one file, its
background writeback, and the deterministic GZIP stream its bytes may go
through. What the bytes are (TFRecord framing, JSON, an index) is the
caller's business: framing lives in `tfrecord`.
"""

import errno
import gzip
import hashlib
import mmap
import os
import secrets

from textrecords.files import writeback
from textrecords.errors import UserError


def gzip_writer(sink) -> gzip.GzipFile:
  """A GZIP stream into `sink` whose bytes depend only on the data written
  (mtime 0, no file name, level 6: the same bytes run to run)."""
  return gzip.GzipFile(filename="", mode="wb", fileobj=sink, mtime=0, compresslevel=6)


def temp_path_for(path: str) -> str:
  """A temporary name, unique to this run, that `path` is written under.

  ".NAME.tmp-PID-NONCE": the pid lets a later run tell a dead run's leftovers
  (removable) from a live run's (see `temp_owner_alive`), the random nonce
  keeps two writers of one process (or a reused pid) apart.

  >>> import re; bool(re.fullmatch(r"d/\\.f\\.tmp-\\d+-[0-9a-f]{8}", temp_path_for("d/f")))
  True
  """
  d, base = os.path.split(path)
  return os.path.join(d, f".{base}.tmp-{os.getpid()}-{secrets.token_hex(4)}")


def is_temp_name(name: str) -> bool:
  return name.startswith(".") and ".tmp-" in name


def temp_owner_alive(name: str, folder: str = "") -> bool:
  """Whether the process that wrote temp file `name` (".X.tmp-PID[-NONCE]") still runs.

  With `folder` (where `name` lies), a process that started after the file
  was last written is another process that reuses the pid: the writer is dead.
  """
  pid = name.rsplit(".tmp-", 1)[-1].split("-", 1)[0]
  if not pid_alive(pid):
    return False
  if not folder:
    return True
  started = _process_start_time(pid)
  try:
    written = os.stat(os.path.join(folder, name)).st_mtime
  except OSError:
    return True  # gone already: nothing to remove
  # /proc/stat's boot time is in whole seconds: allow 2 s of slack.
  return started is None or started <= written + 2.0


def pid_alive(pid) -> bool:
  """True if a process with this id exists and has not exited (a bad id counts as dead).

  A zombie (exited, not yet reaped) is dead: in a container whose init never
  reaps, a killed run's orphaned workers stay zombies, and `kill(pid, 0)`
  still succeeds on them.
  """
  try:
    os.kill(int(pid), 0)
  except (ValueError, ProcessLookupError, OverflowError):
    return False
  except PermissionError:
    pass
  return _process_state(pid) not in ("Z", "X", "x")


def _proc_stat_fields(pid):
  """The fields of /proc/PID/stat after the command name, or None (no /proc)."""
  try:
    with open(f"/proc/{int(pid)}/stat", "rb") as f:
      text = f.read().decode("ascii", "replace")
  except (OSError, ValueError):
    return None
  return text[text.rindex(")") + 2:].split()


def _process_state(pid):
  """One letter (R, S, Z, ...) from /proc, or None where /proc cannot tell."""
  fields = _proc_stat_fields(pid)
  return fields[0] if fields else None


def _process_start_time(pid):
  """Seconds since the epoch when process `pid` started, or None where /proc cannot tell."""
  fields = _proc_stat_fields(pid)
  if not fields or len(fields) < 20:
    return None
  try:
    with open("/proc/stat", "rb") as f:
      boot = next(int(line.split()[1]) for line in f if line.startswith(b"btime "))
    return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
  except (OSError, ValueError, StopIteration):
    return None


class AtomicWriter:
  """A binary file written under a temp name, renamed into place on `commit`.

  Tracks size and sha256 of the bytes as they would appear on disk. If the
  writer is closed without `commit` (error, exception, or a `with` block left
  without committing), the temp file is removed, its descriptor closed and
  `path` is untouched.
  """

  def __init__(self, path: str, compression: str = ""):
    self.path = path
    self.tmp = temp_path_for(path)
    try:
      self._raw = open(self.tmp, "wb")
    except OSError as e:
      raise UserError(f"cannot write {path}: {e.strerror}") from e
    self._hash = hashlib.sha256()
    self.size = 0
    self.records = 0
    self.committed = False
    # Written to disk as it grows: the fsync on commit waits for little.
    self._writeback = writeback.Writeback(self._raw.fileno())
    # (file offset, record starts within the bytes written there) of every
    # write, while each write said where its records start; else None.
    self._record_starts = []
    self._gz = None
    if compression == "GZIP":
      self._gz = gzip_writer(_HashingFile(self))

  def _raw_write(self, data: bytes):
    self._raw.write(data)
    self._hash.update(data)
    self.size += len(data)
    self._writeback.wrote(self.size)

  def write(self, data: bytes, num_records: int = 0):
    """Writes bytes holding `num_records` framed records (counted; where
    they start is not tracked, see `write_framed`)."""
    self._record_starts = None  # where records start is not known any more
    self._write(data)
    self.records += num_records

  def write_framed(self, data: bytes, record_starts, num_records: int):
    """Writes framed records, `record_starts` their offsets within `data`.

    Knowing every record's offset lets the offset index be built without
    reading the file again.
    """
    if self._record_starts is not None:
      self._record_starts.append((self.size, record_starts))
    self._write(data)
    self.records += num_records

  def record_starts(self):
    """[(file offset, record starts relative to it)] of every record, or None
    if some bytes were written without saying where records start."""
    starts = self._record_starts
    if starts is None or self._gz is not None or sum(len(s) for _, s in starts) != self.records:
      return None
    return starts

  def _write(self, data: bytes):
    try:
      if self._gz is not None:
        self._gz.write(data)
      else:
        self._raw_write(data)
    except OSError as e:
      self.abort()
      raise UserError(f"cannot write {self.path}: {e.strerror}") from e

  def append_framed_file(self, path: str, num_records: int, record_starts=None):
    """Appends a file of `num_records` framed records, copied in the kernel.

    Uncompressed outputs use `os.copy_file_range` (no copy through Python)
    and hash the source through a memory map; GZIP outputs stream it.
    `record_starts`, if given, are the records' offsets in the file (see
    `write_framed`).
    """
    if self._record_starts is not None:
      if record_starts is None:
        self._record_starts = None
      else:
        self._record_starts.append((self.size, record_starts))
    size = os.path.getsize(path)
    if self._gz is not None or size == 0 or not hasattr(os, "copy_file_range"):
      with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
          self._write(block)
      self.records += num_records
      return
    try:
      self._raw.flush()
      with open(path, "rb") as src:
        offset = 0
        while offset < size:
          n = os.copy_file_range(src.fileno(), self._raw.fileno(), size - offset, offset)
          if n <= 0:
            raise OSError(errno.EIO, "copy_file_range made no progress")
          offset += n
        with mmap.mmap(src.fileno(), 0, access=mmap.ACCESS_READ) as m:
          self._hash.update(m)
      self._raw.seek(0, os.SEEK_END)
    except OSError as e:
      self.abort()
      raise UserError(f"cannot write {self.path}: {e.strerror}") from e
    self.size += size
    self.records += num_records
    self._writeback.wrote(self.size)

  def commit(self) -> dict:
    """Flushes, fsyncs and renames into place; returns {name, bytes, sha256, records}."""
    self._close_synced()
    try:
      self._publish()
    except OSError as e:
      self.abort()
      raise UserError(f"cannot write {self.path}: {e.strerror}") from e
    self.committed = True
    return {"name": os.path.basename(self.path), "bytes": self.size,
            "sha256": self._hash.hexdigest(), "records": self.records}

  def _close_synced(self):
    """Ends the gzip stream, flushes, fsyncs and closes the temp file."""
    try:
      if self._gz is not None:
        self._gz.close()
      self._raw.flush()
      self._writeback.wait()
      os.fsync(self._raw.fileno())
      self._raw.close()
    except OSError as e:
      self.abort()
      raise UserError(f"cannot write {self.path}: {e.strerror}") from e

  def _publish(self):
    """Moves the closed temp file to its final place (subclasses change where)."""
    os.replace(self.tmp, self.path)

  def abort(self):
    """Closes and removes the temp file; `path` is untouched. Idempotent."""
    if self.committed:
      return
    try:
      self._writeback.wait()  # no sync left running on the descriptor it closes
    except OSError:
      pass
    try:
      self._raw.close()
    except OSError:
      pass
    try:
      os.remove(self.tmp)
    except OSError:
      pass

  def __enter__(self):
    return self

  def __exit__(self, exc_type, exc, tb):
    if not self.committed:
      self.abort()


class _HashingFile:
  """File-like sink for GzipFile that forwards to an AtomicWriter."""

  def __init__(self, writer: AtomicWriter):
    self._w = writer

  def write(self, data):
    self._w._raw_write(bytes(data))  # pylint: disable=protected-access
    return len(data)

  def flush(self):
    pass
