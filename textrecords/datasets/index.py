"""Record offset index: where each record of an uncompressed TFRecord file starts.

Random access (grain's global shuffle, PyTorch map-style datasets) needs each
record's byte offset. Generators write an index beside every uncompressed
record file (listed, with its sha256, in the dataset's metadata);
`python -m textrecords.index FILE...` (the command in `textrecords/index.py`)
builds one for any TFRecord file.

File format (little endian):
  8 bytes   magic b"TRIDX01\\n"
  uint32    n, the length of a UTF-8 JSON header
  n bytes   {"format", "record_file", "bytes", "sha256", "records"} of the
            record file the offsets belong to
  padding   zero bytes up to a multiple of 8
  uint64    records + 1 offsets: record i spans [offsets[i], offsets[i + 1]),
            framing included; the last offset is the file size.

A record's data is then `length = offsets[i+1] - offsets[i] - 16` bytes at
`offsets[i] + 12`. GZIP files have no index: they are read sequentially.

Example:
  >>> import os, tempfile
  >>> d = tempfile.mkdtemp(); p = os.path.join(d, "r.tfrecord")
  >>> _ = open(p, "wb").write(tfrecord.frame(b"ab") + tfrecord.frame(b"cde"))
  >>> scan(p).tolist()
  [0, 18, 37]
"""

import contextlib
import json
import mmap
import os
import struct
from typing import Optional

import numpy as np

from textrecords.files import atomic_file
from textrecords.datasets import layout as L
from textrecords.files import storage
from textrecords.files import tfrecord
from textrecords.errors import UserError

MAGIC = b"TRIDX01\n"
FORMAT = "textrecords-index/1"
_GZIP_MAGIC = b"\x1f\x8b"
_HEADER = struct.Struct("<QI")


def index_path(record_path: str) -> str:
  """Where the index of `record_path` lives (beside it; named by the layout)."""
  return L.join(L.parent(record_path), L.index_name(L.basename(record_path)))


def is_gzip(path: str) -> bool:
  with storage.open_read(path) as f:
    return f.read(2) == _GZIP_MAGIC


def scan(path: str, check_data: bool = False) -> np.ndarray:
  """The offsets (records + 1, uint64) of an uncompressed TFRecord file.

  Walks the record headers, checking each length's CRC; `check_data` also
  checks every record's data CRC (reads the whole file).

  Raises:
    UserError: a GZIP file, or a corrupt/truncated record (naming file and record).
  """
  size = storage.size(path)
  if size == 0:
    return np.zeros(1, np.uint64)
  if is_gzip(path):
    raise UserError(f"{path}: GZIP-compressed records can only be read sequentially; "
                    "no index can be built (write the dataset without --compression "
                    "for random access)")
  offsets = []
  masked_crc = tfrecord.masked_crc
  with _mapped(path) as m:
    pos = 0
    while pos < size:
      if pos + tfrecord.HEADER_BYTES > size:
        raise UserError(f"{path}: truncated record header at record {len(offsets)}")
      length, hcrc = _HEADER.unpack_from(m, pos)
      if masked_crc(m[pos:pos + 8]) != hcrc:
        raise UserError(f"{path}: corrupt record length at record {len(offsets)} "
                        f"(byte {pos}); not an uncompressed TFRecord file?")
      end = pos + tfrecord.FRAME_BYTES + length
      if end > size:
        raise UserError(f"{path}: truncated record {len(offsets)}")
      if check_data:
        footer_at = end - tfrecord.FOOTER_BYTES
        (dcrc,) = struct.unpack_from("<I", m, footer_at)
        if masked_crc(m[pos + tfrecord.HEADER_BYTES:footer_at]) != dcrc:
          raise UserError(f"{path}: corrupt record {len(offsets)} (data checksum mismatch)")
      offsets.append(pos)
      pos = end
  offsets.append(size)
  return np.asarray(offsets, np.uint64)


@contextlib.contextmanager
def _mapped(path: str):
  """The bytes of `path`: mmapped if local, downloaded once if a URL."""
  if storage.is_url(path):
    yield storage.read_bytes(path)
    return
  with open(storage.local_path(path), "rb") as f, mmap.mmap(
      f.fileno(), 0, access=mmap.ACCESS_READ) as m:
    yield m


def encode(offsets: np.ndarray, record_name: str, size: int, sha256: str) -> bytes:
  """The bytes of an index file for a record file of `size` bytes and `sha256`."""
  return b"".join((header_bytes(record_name, size, sha256, len(offsets) - 1),
                   memoryview(np.ascontiguousarray(offsets, "<u8")).cast("B")))


def header_bytes(record_name: str, size: int, sha256: str, records: int) -> bytes:
  """An index file's bytes before its offsets (magic, header, padding):
  the offsets (`records + 1` of them, little-endian uint64) follow."""
  header = json.dumps({"format": FORMAT, "record_file": record_name, "bytes": int(size),
                       "sha256": sha256, "records": int(records)},
                      sort_keys=True).encode("utf-8")
  pad = b"\0" * (-(len(MAGIC) + 4 + len(header)) % 8)
  return b"".join((MAGIC, struct.pack("<I", len(header)), header, pad))


class RecordIndex:
  """A loaded index: `offsets` (uint64, records + 1) and its header dict."""

  def __init__(self, offsets: np.ndarray, header: dict):
    self.offsets = offsets
    self.header = header

  def __len__(self) -> int:
    return len(self.offsets) - 1


def decode(data: bytes, where: str) -> RecordIndex:
  """Parses index bytes; UserError naming `where` if they are not a valid index."""
  try:
    if data[:8] != MAGIC:
      raise ValueError("bad magic")
    (n,) = struct.unpack_from("<I", data, 8)
    header = json.loads(data[12:12 + n].decode("utf-8"))
    start = 12 + n + (-(12 + n) % 8)
    offsets = np.frombuffer(data, "<u8", offset=start).astype(np.uint64)
    ok = (header.get("format") == FORMAT and len(offsets) == header["records"] + 1
          and int(offsets[-1]) == header["bytes"]
          and (len(offsets) < 2 or bool(np.all(np.diff(offsets) >= 16))))
  except (ValueError, KeyError, TypeError, struct.error) as e:
    raise UserError(f"{where}: not a textrecords index file ({e}); rebuild it with "
                    "python -m textrecords.index RECORD_FILE") from e
  if not ok:
    raise UserError(f"{where}: inconsistent index; rebuild it with "
                    "python -m textrecords.index RECORD_FILE")
  return RecordIndex(offsets, header)


def load(path: str) -> RecordIndex:
  if storage.is_url(path):
    return decode(storage.read_bytes(path), path)
  try:
    with open(storage.local_path(path), "rb") as f:
      data = f.read()
  except OSError as e:
    raise UserError(f"cannot read index {path}: {e.strerror}") from e
  return decode(data, path)


def is_index_file(path: str) -> bool:
  """True if the file at `path` starts as a textrecords index does (an
  index the index command may rebuild, even a stale or damaged one)."""
  with storage.open_read(path) as f:
    return f.read(len(MAGIC)) == MAGIC


def build(record_path: str, out_path: Optional[str] = None) -> str:
  """Scans `record_path` (all CRCs checked) and writes its index atomically
  (local paths or URLs)."""
  out_path = out_path or index_path(record_path)
  offsets = scan(record_path, check_data=True)
  data = encode(offsets, storage.basename(record_path), storage.size(record_path),
                storage.sha256(record_path))
  if storage.is_url(out_path):
    storage.write_file(out_path, data)
    return out_path
  w = atomic_file.AtomicWriter(out_path)
  w.write(data)
  w.commit()
  return out_path
