"""Sorted runs of framed records: how a unit's records travel to their file.

A `Run` is one unit's records for one output file in key order, held as two
int64 arrays (each record's key and its start offset) and one byte string of
framed records laid end to end. Records a generator encodes in bulk
(`protocol.RecordBlock`) become a run without a Python object per record;
single records (`protocol.Record`) are framed and sorted into one.

  * `from_keyed`, `from_block`: a run from sorted (key, framed) pairs or
    from a block.
  * `to_bytes`, `from_bytes`: a run as one object (a scratch file, a store
    object) and back.
  * `merged`: several runs of one file in key order. Runs whose key ranges
    do not overlap (units cover consecutive parts of the key space, the
    usual case) are passed through whole; others are merged record by
    record, ties broken by the framed bytes, as sorting (key, bytes) pairs
    would.
  * `chunked_records`, `merged_records`: a run as `to_bytes` wrote it, read
    a chunk at a time through ranged reads, and such record streams merged
    as `merged` merges runs: a file writer holds a chunk of each of its
    runs (`chunk_bytes`: `MERGE_BUDGET` over them all), never the file.
  * `write_streamed`: runs in order written as one object of `to_bytes`'s
    layout, spooled through scratch files (a merge of runs, never held).
"""

import heapq
import shutil
import struct
import tempfile
from typing import (Callable, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple,
                    Union)

import numpy as np

from textrecords.engine import protocol

_COUNT = struct.Struct("<Q")
MERGE_BATCH = 8192  # records per run a record-by-record merge yields
MERGE_BUDGET = 32 << 20  # record bytes a streaming merge reads ahead over all its runs
MIN_CHUNK = 64 << 10  # bytes per ranged read of a run, at least


class Run(NamedTuple):
  """Framed records of one file in key order.

  Attributes:
    keys: int64, each record's order key (non-decreasing).
    starts: int64, each record's start offset in `data`.
    data: the framed records laid end to end.
  """
  keys: np.ndarray
  starts: np.ndarray
  data: bytes

  def records(self) -> Iterator[Tuple[int, bytes]]:
    """(key, framed record) pairs in order."""
    ends = np.append(self.starts[1:], len(self.data)).tolist()
    data = self.data
    for key, a, b in zip(self.keys.tolist(), self.starts.tolist(), ends):
      yield key, data[a:b]


def from_keyed(items: Sequence[Tuple[int, bytes]]) -> Run:
  """A run of (key, framed record) pairs already in order.

  >>> r = from_keyed([(1, b"ab"), (4, b"c")])
  >>> r.keys.tolist(), r.starts.tolist(), r.data, list(r.records())
  ([1, 4], [0, 2], b'abc', [(1, b'ab'), (4, b'c')])
  """
  sizes = np.fromiter((len(x[1]) for x in items), np.int64, len(items))
  return Run(np.fromiter((x[0] for x in items), np.int64, len(items)),
             np.cumsum(sizes) - sizes, b"".join(x[1] for x in items))


def from_block(block: "protocol.RecordBlock") -> Run:
  """A block's records (keys first_key, first_key + 1, ...) as a run."""
  n = len(block.starts)
  return Run(np.arange(block.first_key, block.first_key + n, dtype=np.int64),
             np.asarray(block.starts, np.int64), bytes(block.data))


def to_bytes(run: Run) -> bytes:
  """One object holding the run (count, keys, starts, data)."""
  return b"".join((_COUNT.pack(len(run.keys)), run.keys.astype("<i8").tobytes(),
                   run.starts.astype("<i8").tobytes(), run.data))


def object_bytes(count: int, data_bytes: int) -> int:
  """The bytes of the object `to_bytes` writes for a run of `count` records
  of `data_bytes` framed bytes.

  >>> object_bytes(3, 5) == len(to_bytes(from_keyed([(1, b"ab"), (2, b""), (7, b"cde")])))
  True
  """
  return _COUNT.size + 16 * count + data_bytes


def from_bytes(blob: bytes) -> Run:
  """The run `to_bytes` wrote.

  >>> r = from_bytes(to_bytes(from_keyed([(2, b"xy"), (3, b"")])))
  >>> list(r.records())
  [(2, b'xy'), (3, b'')]
  """
  n = _COUNT.unpack_from(blob, 0)[0]
  at = _COUNT.size
  keys = np.frombuffer(blob, "<i8", n, at).astype(np.int64)
  starts = np.frombuffer(blob, "<i8", n, at + 8 * n).astype(np.int64)
  return Run(keys, starts, blob[at + 16 * n:])


def bounds(run: Run) -> Tuple[int, int]:
  """(first key, last key) of a non-empty run."""
  return int(run.keys[0]), int(run.keys[-1])


def disjoint(key_bounds: Sequence[Tuple[int, int]]) -> List[int]:
  """The order (indexes) that lays runs with these (first, last) keys end to
  end in key order, or [] when their ranges overlap.

  >>> disjoint([(5, 9), (0, 4)]), disjoint([(0, 5), (5, 9)])
  ([1, 0], [])
  """
  order = sorted(range(len(key_bounds)), key=lambda i: key_bounds[i])
  for a, b in zip(order, order[1:]):
    if key_bounds[a][1] >= key_bounds[b][0]:
      return []
  return order


def merged(runs: Iterable[Run]) -> Iterator[Run]:
  """Runs of one file in key order (see the module doc); empty runs dropped."""
  runs = [r for r in runs if len(r.keys)]
  order = disjoint([bounds(r) for r in runs])
  if order or not runs:
    for i in order:
      yield runs[i]
    return
  yield from merged_records([r.records() for r in runs])


def merged_records(streams: Sequence[Iterable[Tuple[int, bytes]]]) -> Iterator[Run]:
  """(key, framed record) streams, each in order, merged record by record
  (ties broken by the bytes) into runs of `MERGE_BATCH` records."""
  batch: List[Tuple[int, bytes]] = []
  for item in heapq.merge(*streams):
    batch.append(item)
    if len(batch) >= MERGE_BATCH:
      yield from_keyed(batch)
      batch = []
  if batch:
    yield from_keyed(batch)


def chunk_bytes(num_runs: int, budget: Optional[int] = None) -> int:
  """The bytes of each ranged read when `num_runs` runs merge at once
  (`budget` over them all; default `MERGE_BUDGET`)."""
  return max(MIN_CHUNK, (MERGE_BUDGET if budget is None else budget) // max(1, num_runs))


def chunked_records(read_at: Callable[[int, int], bytes],
                    size: Union[int, Callable[[int], int]], chunk: int,
                    span: Optional[Tuple[int, int]] = None) -> Iterator[Tuple[int, bytes]]:
  """(key, framed record) pairs of a run `to_bytes` wrote (`size` bytes, or
  `size(count)` where the first read does not reach its end: `object_bytes`,
  no request to ask its size), read through `read_at(start, end)` (short at
  the object's end) about `chunk` record bytes at a time: one ranged read of
  its first `chunk` bytes (the count, and the keys and starts where they
  fit, with the first records), then one a chunk; `span`: only records
  [first, stop) of it (default: all).

  >>> blob = to_bytes(from_keyed([(1, b"ab"), (2, b""), (7, b"cde")]))
  >>> list(chunked_records(lambda a, b: blob[a:b], len(blob), 1))
  [(1, b'ab'), (2, b''), (7, b'cde')]
  >>> list(chunked_records(lambda a, b: blob[a:b], len(blob), 1, (1, 3)))
  [(2, b''), (7, b'cde')]
  >>> reads = []
  >>> def logged(a, b):
  ...   reads.append((a, b))
  ...   return blob[a:b]
  >>> list(chunked_records(logged, len(blob), 1 << 20)) == list(from_bytes(blob).records())
  True
  >>> reads
  [(0, 61)]
  """
  want = max(_COUNT.size, chunk)
  head = read_at(0, want if callable(size) else min(size, want))
  n = _COUNT.unpack_from(head, 0)[0]
  if callable(size):
    size = len(head) if len(head) < want else size(n)
  keys_at, starts_at = _COUNT.size, _COUNT.size + 8 * n
  data_at = starts_at + 8 * n
  per_chunk = max(1, chunk * n // max(1, size - data_at))
  first, stop = span or (0, n)
  prefix = _Prefix(read_at, head)
  held = None  # the keys and starts, read at once where they fit in a chunk
  if 16 * n <= chunk and stop > first:
    held = np.frombuffer(prefix.read(keys_at, data_at), "<i8")
  for a in range(first, stop, per_chunk):
    b = min(stop, a + per_chunk)
    if held is not None:
      keys = held[a:b].tolist()
      starts = held[n + a:n + min(n, b + 1)].tolist()
    else:
      keys = np.frombuffer(prefix.read(keys_at + 8 * a, keys_at + 8 * b), "<i8").tolist()
      starts = np.frombuffer(prefix.read(starts_at + 8 * a, starts_at + 8 * min(n, b + 1)),
                             "<i8").tolist()
    if len(starts) == b - a:
      starts.append(size - data_at)
    base = starts[0]
    data = prefix.read(data_at + base, data_at + starts[-1])
    for i, key in enumerate(keys):
      yield key, data[starts[i] - base:starts[i + 1] - base]


class _Prefix:
  """Ranged reads of an object whose first bytes are already read (`head`):
  a range inside them costs no read, one that begins inside them reads
  only the rest; the head is let go once a read passes its end."""

  def __init__(self, read_at: Callable[[int, int], bytes], head: bytes):
    self.read_at, self.head = read_at, head

  def read(self, start: int, end: int) -> bytes:
    """Bytes [start, end) of the object."""
    held = len(self.head)
    if end <= held:
      return self.head[start:end]
    rest = self.read_at(max(start, held), end)
    out = self.head[start:] + rest if start < held else rest
    self.head = b""
    return out


def concatenated(runs: Sequence[Run]) -> Run:
  """Runs already in key order as one run."""
  if not runs:
    return Run(np.zeros(0, np.int64), np.zeros(0, np.int64), b"")
  if len(runs) == 1:
    return runs[0]
  offsets = np.cumsum([0] + [len(r.data) for r in runs[:-1]])
  return Run(np.concatenate([r.keys for r in runs]),
             np.concatenate([r.starts + o for r, o in zip(runs, offsets)]),
             b"".join(r.data for r in runs))


def write_streamed(out, runs: Iterable[Run]) -> Tuple[int, int]:
  """Writes runs already in key order to the binary file object `out` as
  `to_bytes` lays out their concatenation; keys, starts and records are
  spooled to scratch files first (the layout puts the count and the keys
  before the records), so no more than a run is held. Returns (records,
  record bytes)."""
  count = size = 0
  with tempfile.TemporaryFile() as keys, tempfile.TemporaryFile() as starts, \
      tempfile.TemporaryFile() as data:
    for run in runs:
      if not len(run.keys):
        continue
      keys.write(np.asarray(run.keys, "<i8").tobytes())
      starts.write((np.asarray(run.starts, np.int64) + size).astype("<i8").tobytes())
      data.write(run.data)
      count += len(run.keys)
      size += len(run.data)
    out.write(_COUNT.pack(count))
    for spool in (keys, starts, data):
      spool.seek(0)
      shutil.copyfileobj(spool, out, 8 << 20)
  return count, size
