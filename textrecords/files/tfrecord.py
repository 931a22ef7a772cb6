"""TFRecord framing and reading, without TensorFlow.

A TFRecord file is a sequence of records, each framed as:
  uint64 length (little endian), uint32 masked_crc32c(length bytes),
  data bytes, uint32 masked_crc32c(data).
The mask is ((crc >> 15) | (crc << 17)) + 0xa282ead8 (mod 2**32).
"""

import bisect
import gzip
import struct
import zlib
from typing import Iterator, Optional

from textrecords.files import hashing
from textrecords.errors import UserError
from textrecords.files import storage

try:
  import google_crc32c as _crc32c_mod

  def crc32c(data: bytes) -> int:
    return _crc32c_mod.value(data)
except ImportError:  # pragma: no cover - exercised only without the C module
  _TABLE = []
  for _i in range(256):
    _c = _i
    for _ in range(8):
      _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _TABLE.append(_c)

  def crc32c(data: bytes) -> int:
    c = 0xFFFFFFFF
    for b in data:
      c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF

COMPRESSIONS = ("", "GZIP")

# A framed record: its length (8 bytes) and the length's masked crc (4), the
# data, then the data's masked crc (4).
HEADER_BYTES = 12
FOOTER_BYTES = 4
FRAME_BYTES = HEADER_BYTES + FOOTER_BYTES  # framing added to each record


def mask_crc(crc):
  """TFRecord's mask of a CRC32C: an int, or elementwise on a uint64 numpy array.

  >>> hex(mask_crc(0))
  '0xa282ead8'
  """
  return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
  return mask_crc(crc32c(data))


def frame(record: bytes) -> bytes:
  """One record in TFRecord framing."""
  header = struct.pack("<Q", len(record))
  return b"".join((header, struct.pack("<I", masked_crc(header)), record,
                   struct.pack("<I", masked_crc(record))))


def frame_starts(data) -> list:
  """The offsets of the framed records in `data` (walking their headers).

  >>> frame_starts(frame(b"ab") + frame(b""))
  [0, 18]
  """
  starts, pos, size = [], 0, len(data)
  unpack = struct.Struct("<Q").unpack_from
  while pos < size:
    starts.append(pos)
    pos += FRAME_BYTES + unpack(data, pos)[0]
  return starts


def normalize_compression(compression: Optional[str]):
  """The canonical spelling of a compression name; unknown names are returned as given.

  >>> normalize_compression("gzip"), normalize_compression("None"), normalize_compression("lz4")
  ('GZIP', '', 'lz4')
  """
  c = (compression or "").strip().upper()
  if c == "NONE":
    c = ""
  return c if c in COMPRESSIONS else compression


def check_compression(compression: Optional[str]) -> str:
  """Normalises a compression name ("" or "GZIP"); raises UserError otherwise."""
  c = normalize_compression(compression)
  if c not in COMPRESSIONS:
    raise UserError(f"--compression={compression!r}: must be one of '' (none) or GZIP")
  return c


file_sha256 = hashing.file_sha256


def _open_records(path: str, compression: str):
  """A binary reader of `path` (local or URL), gunzipped for GZIP."""
  if not storage.is_url(path):
    path = storage.local_path(path)
    return gzip.open(path, "rb") if compression == "GZIP" else open(path, "rb")
  raw = storage.open_read(path)
  return gzip.GzipFile(fileobj=raw, mode="rb") if compression == "GZIP" else raw


def read_records(path: str, compression: str = "") -> Iterator[bytes]:
  """Yields the records of a TFRecord file, checking both CRCs.

  Raises:
    UserError: naming the file and record index on truncation or CRC mismatch.
  """
  with _open_records(path, compression) as f:
    index = 0
    while True:
      try:
        header = f.read(12)
      except (OSError, EOFError, zlib.error) as e:
        raise UserError(f"{path}: corrupt compressed data at record {index}: {e}") from e
      if not header:
        return
      if len(header) < 12:
        raise UserError(f"{path}: truncated record header at record {index}")
      (length,), (hcrc,) = struct.unpack("<Q", header[:8]), struct.unpack("<I", header[8:])
      if masked_crc(header[:8]) != hcrc:
        raise UserError(f"{path}: corrupt record length at record {index}")
      try:
        body = f.read(length + 4)
      except (OSError, EOFError, zlib.error) as e:
        raise UserError(f"{path}: corrupt compressed data at record {index}: {e}") from e
      if len(body) < length + 4:
        raise UserError(f"{path}: truncated record {index}")
      data, (dcrc,) = body[:length], struct.unpack("<I", body[length:])
      if masked_crc(data) != dcrc:
        raise UserError(f"{path}: corrupt record {index} (data checksum mismatch)")
      yield data
      index += 1


def range_shard_of(index: int, n: int, num_shards: int) -> int:
  """The shard of item `index` when n items are cut into contiguous ranges,
  shard i holding [i*n//num_shards, (i+1)*n//num_shards) (some may be empty).

  >>> [range_shard_of(i, 5, 3) for i in range(5)]
  [0, 1, 1, 2, 2]
  """
  starts = [i * n // num_shards for i in range(num_shards)]
  return bisect.bisect_right(starts, index) - 1

