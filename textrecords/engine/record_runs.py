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
"""

import heapq
import struct
from typing import Iterable, Iterator, List, NamedTuple, Sequence, Tuple

import numpy as np

from textrecords.engine import protocol

_COUNT = struct.Struct("<Q")
MERGE_BATCH = 8192  # records per run a record-by-record merge yields


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
  batch: List[Tuple[int, bytes]] = []
  for item in heapq.merge(*(r.records() for r in runs)):
    batch.append(item)
    if len(batch) >= MERGE_BATCH:
      yield from_keyed(batch)
      batch = []
  if batch:
    yield from_keyed(batch)


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
