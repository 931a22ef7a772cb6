"""Random access to the records of uncompressed TFRecord files, without TensorFlow.

A `RecordSource` is a random-access view of the records of one or many
uncompressed TFRecord files, through their offset indexes
(`textrecords.datasets.index`): `len(source)`, `source[i]` (serialized bytes, both
CRCs checked; a corrupt record raises naming its file and record index, or
is skipped with `skip_corrupt`); `source.read_batch(indices)` reads a batch
at once (one read per run of neighbouring records) into a `RecordBatch`. It
is picklable (file handles are reopened in each process), so grain and
PyTorch workers can share it. `open_source` checks each file's index
against the metadata (or rebuilds it); `source_from_paths` opens plain files.
The numpy, grain and torch readers (`numpy_reader`, `grain_reader`,
`torch_reader`) read through it.
"""

import os
import struct
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np

from textrecords.reading import locations as dataset_files
from textrecords.wire import example_decoder
from textrecords.datasets import index as index_lib
from textrecords.datasets import layout as L
from textrecords.datasets import metadata
from textrecords.files import storage
from textrecords.files import tfrecord
from textrecords.errors import UserError


INDEX_MODES = ("build", "require")


class RecordSource:
  """Random access to the records of uncompressed TFRecord files.

  Args:
    files: [(path, offsets)] with offsets as from `textrecords.datasets.index`
      (records + 1 values, the last being the file size).
    skip_corrupt: a record failing its CRC gives None (logged once per
      record) instead of raising.
    log: where skipped records are reported.
  """

  def __init__(self, files: Sequence[Tuple[str, np.ndarray]], *, skip_corrupt: bool = False,
               log: Callable = print):
    self.paths = [p for p, _ in files]
    offsets = [np.asarray(o, np.int64) for _, o in files]
    counts = [len(o) - 1 for o in offsets]
    self._starts = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    # All files' offsets in one array: file f's start at _flat[_base[f]].
    self._flat = np.concatenate(offsets) if offsets else np.zeros(0, np.int64)
    self._base = np.concatenate(([0], np.cumsum([len(o) for o in offsets])))[:-1].astype(
        np.int64)
    self._offsets = [self._flat[b:b + len(o)] for b, o in zip(self._base, offsets)]
    self.skip_corrupt = skip_corrupt
    self.log = log
    self._fds = {}

  def __len__(self) -> int:
    return int(self._starts[-1])

  def __repr__(self) -> str:
    first = self.paths[0] if self.paths else "-"
    return (f"RecordSource({len(self)} records in {len(self.paths)} files, first {first!r}, "
            f"skip_corrupt={self.skip_corrupt})")

  def __getstate__(self):
    state = dict(self.__dict__)
    state["_fds"] = {}
    if state.get("log") is print:
      state["log"] = None
    return state

  def __setstate__(self, state):
    self.__dict__.update(state)
    if self.log is None:
      self.log = print

  def __del__(self):
    for fd in getattr(self, "_fds", {}).values():
      try:
        if isinstance(fd, int):
          os.close(fd)
        else:
          fd.close()
      except Exception:  # pylint: disable=broad-except  (also at interpreter exit)
        pass

  def _fd(self, f: int):
    """This process's open file `f`: an fd, or a file object for a URL."""
    key = (os.getpid(), f)
    fd = self._fds.get(key)
    if fd is None:
      if storage.is_url(self.paths[f]):
        fd = storage.open_read(self.paths[f])
      else:
        try:
          fd = os.open(storage.local_path(self.paths[f]), os.O_RDONLY)
        except OSError as e:
          raise UserError(f"cannot read {self.paths[f]}: {e.strerror}") from e
      self._fds[key] = fd
    return fd

  def _read(self, f: int, start: int, n: int) -> bytes:
    fd = self._fd(f)
    if isinstance(fd, int):
      return os.pread(fd, n, start)
    fd.seek(start)
    return fd.read(n)

  def locate(self, i: int) -> Tuple[int, int]:
    """(file number, record number in that file) of global record `i`."""
    n = len(self)
    if not -n <= i < n:
      raise IndexError(f"record {i} out of range ({n} records)")
    i = int(i) % n
    f = int(np.searchsorted(self._starts, i, side="right")) - 1
    return f, i - int(self._starts[f])

  def __getitem__(self, i: int) -> Optional[bytes]:
    f, j = self.locate(i)
    start, stop = int(self._offsets[f][j]), int(self._offsets[f][j + 1])
    try:
      raw = self._read(f, start, stop - start)
    except OSError as e:
      raise UserError(f"cannot read {self.paths[f]}: {e.strerror}") from e
    problem = _check_framed(raw, stop - start)
    if problem is None:
      return raw[tfrecord.HEADER_BYTES:-tfrecord.FOOTER_BYTES]
    msg = f"{self.paths[f]}: corrupt record {j} ({problem})"
    if not self.skip_corrupt:
      raise UserError(msg)
    self.log(f"skipping {msg}")
    return None

  def read(self, indices) -> List[bytes]:
    """The records at `indices`, corrupt ones left out when skip_corrupt."""
    out = []
    for i in indices:
      r = self[int(i)]
      if r is not None:
        out.append(r)
    return out

  def read_batch(self, indices, epoch: Optional[int] = None) -> example_decoder.RecordBatch:
    """The records at `indices` as one `RecordBatch` (of training epoch
    `epoch`, None in evaluation order): records next to each other in a file
    are read with one `pread` (a batch in file order: one read), the framing
    of all checked at once, both CRCs of each. Corrupt records raise, or are
    left out with skip_corrupt (as `read`)."""
    idx = np.asarray(indices, np.int64).reshape(-1)
    n = len(self)
    if idx.size and (idx.min() < -n or idx.max() >= n):
      bad = idx[(idx < -n) | (idx >= n)][0]
      raise IndexError(f"record {bad} out of range ({n} records)")
    if idx.size == 0:
      return example_decoder.RecordBatch(b"", idx, idx, epoch)
    idx = idx % n
    f = np.searchsorted(self._starts, idx, side="right") - 1
    at = self._base[f] + idx - self._starts[f]
    begin, end = self._flat[at], self._flat[at + 1]
    new_run = np.ones(idx.shape, bool)
    new_run[1:] = (f[1:] != f[:-1]) | (begin[1:] != end[:-1])
    first = np.flatnonzero(new_run)
    last = np.append(first[1:], idx.size) - 1
    chunks = []
    fi = int(f[0])
    try:
      files = f[first].tolist()
      fds = {k: self._fd(k) for k in set(files)}
      pread = os.pread
      for a, b, fi in zip(begin[first].tolist(), end[last].tolist(), files):
        fd = fds[fi]  # an fd, or a file object for a URL
        chunks.append(pread(fd, b - a, a) if isinstance(fd, int) else self._read(fi, a, b - a))
    except OSError as e:
      raise UserError(f"cannot read {self.paths[fi]}: {e.strerror}") from e
    data = b"".join(chunks) if len(chunks) > 1 else chunks[0]
    size = end - begin
    run_at = np.cumsum(size) - size  # each record's frame in `data`
    if len(data) != int(size.sum()) or not _frames_ok(data, run_at, size):
      # A short file or a bad record: record by record, for the exact
      # error (or the records skip_corrupt leaves).
      return example_decoder.RecordBatch.from_records(self.read(idx), epoch)
    return example_decoder.RecordBatch(data, run_at + tfrecord.HEADER_BYTES,
                                       run_at + size - tfrecord.FOOTER_BYTES, epoch)


def _frames_ok(data: bytes, at: np.ndarray, size: np.ndarray) -> bool:
  """Whether every frame data[at[i]:at[i] + size[i]] is intact: its length
  field says size - 16, both CRCs match."""
  buf = np.frombuffer(data, np.uint8)
  head = buf[at[:, None] + np.arange(tfrecord.HEADER_BYTES)]
  length = head[:, :8].copy().view("<u8")[:, 0]
  if np.any(length != (size - tfrecord.FRAME_BYTES).astype(np.uint64)):
    return False
  want_head = head[:, 8:].copy().view("<u4")[:, 0]
  foot, head_bytes = tfrecord.FOOTER_BYTES, tfrecord.HEADER_BYTES
  want_data = buf[(at + size - foot)[:, None] + np.arange(foot)].view("<u4")[:, 0]
  crc, n = tfrecord.crc32c, len(at)
  starts, stops = at.tolist(), (at + size - foot).tolist()
  got_head = np.fromiter((crc(data[a:a + 8]) for a in starts), np.uint64, n)
  got_data = np.fromiter((crc(data[a + head_bytes:b]) for a, b in zip(starts, stops)),
                         np.uint64, n)
  return bool((tfrecord.mask_crc(got_head) == want_head).all() and
              (tfrecord.mask_crc(got_data) == want_data).all())


def _check_framed(raw: bytes, size: int) -> Optional[str]:
  """Why a framed record is bad, or None."""
  if len(raw) != size:
    return "file shorter than its index says"
  (length,) = struct.unpack_from("<Q", raw)
  if tfrecord.masked_crc(raw[:8]) != struct.unpack_from("<I", raw, 8)[0]:
    return "length checksum mismatch"
  if length != size - tfrecord.FRAME_BYTES:
    return "length differs from the index: stale index"
  footer_at = size - tfrecord.FOOTER_BYTES
  if tfrecord.masked_crc(raw[tfrecord.HEADER_BYTES:footer_at]) != struct.unpack_from(
      "<I", raw, footer_at)[0]:
    return "data checksum mismatch"
  return None


def _offsets_for(rec: dataset_files.RecordFile, verify: str, index_mode: str,
                 log) -> np.ndarray:
  """The checked offsets of one record file: from its index, or rebuilt."""
  meta, lay = rec.found.meta, rec.found.layout
  idx_name = L.index_name(rec.name)
  idx_path = index_lib.index_path(rec.path)
  infos = metadata.file_infos(meta) if meta is not None else {}
  info = infos.get(rec.name)
  problem = None
  if not L.exists(idx_path):
    problem = f"{idx_path} is missing"
  else:
    try:
      if idx_name in infos:  # listed: its own size/sha256 are checked too
        metadata.verified_files(meta, lay, [idx_name], verify, companions=False)
      idx = index_lib.load(idx_path)
      size = info["bytes"] if info else storage.size(rec.path)
      if idx.header["bytes"] != size:
        problem = (f"{idx_path} is stale: made for {idx.header['bytes']} bytes, "
                   f"{rec.name} has {size}")
      elif info and idx.header["sha256"] != info["sha256"]:
        problem = f"{idx_path} is stale: made for another {rec.name} (sha256)"
      elif not info and verify == "checksum" and (
          tfrecord.file_sha256(rec.path) != idx.header["sha256"]):
        problem = f"{idx_path} is stale: {rec.name}'s sha256 differs"
      elif info and len(idx) != info.get("records", len(idx)):
        problem = f"{idx_path}: {len(idx)} records, the metadata says {info['records']}"
      else:
        return idx.offsets
    except UserError as e:
      problem = str(e)
  if index_mode == "require":
    raise UserError(f"{problem}; rebuild it with python -m textrecords.index {rec.path}")
  log(f"{problem}: scanning {rec.path} for record offsets (python -m textrecords.index "
      f"{rec.path} writes the index)")
  return index_lib.scan(rec.path)


def open_source(entries: Sequence[dataset_files.RecordFile], *, verify: str = "checksum",
                skip_corrupt: bool = False, index: str = "build",
                log=print) -> RecordSource:
  """A RecordSource over checked record files.

  Args:
    entries: record files as `dataset_files.record_files` gives them (their
      size/sha256 already checked against the metadata), or plain files.
    index: "build" (a missing or stale index is rebuilt in memory, with a
      log line) or "require" (refused).
  Raises:
    UserError: GZIP files (sequential only), stale indexes with
      index="require", unreadable files.
  """
  if index not in INDEX_MODES:
    raise UserError(f"index={index!r}: must be one of {', '.join(INDEX_MODES)}")
  files = []
  for rec in entries:
    meta = rec.found.meta
    if (meta is not None and meta.get("compression")) or (
        storage.size(rec.path) and index_lib.is_gzip(rec.path)):
      raise UserError(f"{rec.path}: GZIP-compressed records can only be read sequentially "
                      "(numpy_batches with training=False); write the dataset without "
                      "--compression for random access")
    files.append((rec.path, _offsets_for(rec, verify, index, log)))
  return RecordSource(files, skip_corrupt=skip_corrupt, log=log)


def source_from_paths(paths: Sequence[str], *, verify: str = "size",
                      skip_corrupt: bool = False, index: str = "build",
                      log=print) -> RecordSource:
  """A RecordSource over plain TFRecord files (no metadata), e.g. others' files."""
  entries = []
  for p in paths:
    if not L.exists(p):
      raise UserError(f"{p}: no such file")
    found = dataset_files.Found(p, None, None, [p])
    entries.append(dataset_files.RecordFile(p, L.basename(p), 0, found))
  return open_source(entries, verify=verify, skip_corrupt=skip_corrupt, index=index, log=log)
