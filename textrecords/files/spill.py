"""Bounded-memory global ordering: spill records to hash buckets, sort per bucket.

Records carry a 64-bit order key. `SpillWriter` appends each record to the
bucket file for the top bits of its key; buckets are contiguous key ranges,
so reading buckets in order and sorting each one in memory yields the global
order while holding only one bucket at a time. Any number of writers (one per
worker process) may spill into the same folder under distinct prefixes.
"""

import glob
import os
import struct
import zlib
from typing import Iterator, List, Tuple

_HEADER = struct.Struct("<QI")
_CHUNK = struct.Struct("<I")
_COMPRESSED = 1 << 31


class SpillWriter:
  """Appends (key, record) pairs to bucket files `<dir>/<prefix>-b<bucket>.spill`."""

  def __init__(self, directory: str, prefix: str, num_buckets: int,
               buffer_bytes: int = 1 << 20, compress: bool = False):
    self.dir = directory
    self.prefix = prefix
    self.num_buckets = num_buckets
    self._buffers: List[List[bytes]] = [[] for _ in range(num_buckets)]
    self._sizes = [0] * num_buckets
    self._limit = max(4096, buffer_bytes // max(1, num_buckets) * 4)
    self.compress = compress
    self.count = 0
    self.bucket_counts = [0] * num_buckets  # records added per bucket
    self.bucket_bytes = [0] * num_buckets  # their bytes

  def add(self, key: int, record: bytes):
    b = (key * self.num_buckets) >> 64
    chunk = _HEADER.pack(key, len(record)) + record
    self._buffers[b].append(chunk)
    self._sizes[b] += len(chunk)
    self.count += 1
    self.bucket_counts[b] += 1
    self.bucket_bytes[b] += len(record)
    if self._sizes[b] >= self._limit:
      self._flush(b)

  def _flush(self, b: int):
    """Appends the bucket's buffer as one chunk, zlib-compressed if asked
    (padded records shrink several times, for a little CPU per record)."""
    if not self._buffers[b]:
      return
    data = b"".join(self._buffers[b])
    header = len(data)
    if self.compress:
      data = zlib.compress(data, 1)
      header = len(data) | _COMPRESSED
    with open(os.path.join(self.dir, f"{self.prefix}-b{b:05d}.spill"), "ab") as f:
      f.write(_CHUNK.pack(header) + data)
    self._buffers[b] = []
    self._sizes[b] = 0

  def close(self):
    for b in range(self.num_buckets):
      self._flush(b)


def bucket_files(directory: str, bucket: int) -> List[str]:
  """The spill files of one bucket (one per writer prefix), sorted by name."""
  return sorted(glob.glob(os.path.join(directory, f"*-b{bucket:05d}.spill")))


def read_bucket(directory: str, bucket: int) -> List[Tuple[int, bytes]]:
  """All (key, record) pairs of one bucket from every writer, sorted.

  Sorting by (key, record) makes the order independent of which writer spilled
  what, even in the (astronomically unlikely) case of equal keys.
  """
  items = []
  for path in bucket_files(directory, bucket):
    with open(path, "rb") as f:
      data = f.read()
    pos = 0
    while pos < len(data):
      (header,) = _CHUNK.unpack_from(data, pos)
      pos += _CHUNK.size
      n = header & ~_COMPRESSED
      chunk = data[pos:pos + n]
      items.extend(_parse(zlib.decompress(chunk) if header & _COMPRESSED else chunk))
      pos += n
  items.sort()
  return items


def _parse(data: bytes) -> Iterator[Tuple[int, bytes]]:
  pos, n = 0, len(data)
  unpack = _HEADER.unpack_from
  while pos < n:
    key, length = unpack(data, pos)
    pos += _HEADER.size
    yield key, data[pos:pos + length]
    pos += length


def pack(items) -> bytes:
  """(key, record) pairs as one run of bytes (the spill files' record layout).

  >>> list(unpack(pack([(3, b"ab"), (7, b"")])))
  [(3, b'ab'), (7, b'')]
  """
  return b"".join(_HEADER.pack(key, len(record)) + record for key, record in items)


def unpack(data: bytes) -> Iterator[Tuple[int, bytes]]:
  """The (key, record) pairs of a run made by `pack`, in order."""
  return _parse(data)
