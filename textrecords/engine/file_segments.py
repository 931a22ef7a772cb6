"""One record file written in segments by parallel workers, then joined.

A record file's records (its sorted runs, `generator_steps.RunEntry`) may
be cut at keys into *segments* of about `SEGMENT_BYTES` of framed records.
Each segment is written by its own worker as a hidden object (its records
in key order through the generator's `finish_file`, framed bytes, sha256,
record starts); one cheap step then joins them into the file
(`storage.concatenate`: copied in the kernel or on the store's side) and
writes its offset index from the segments' starts, shifted. The file's
bytes are those of one writer: an uncompressed TFRecord file is its
records end to end, and a generator's `finish_file` is only applied to
slices cut where `Generator.cut_keys` allows.

  * `plan`: the segments' key ranges, a function of the runs' key bounds
    and byte counts alone (the same on every engine and worker count;
    one range, (None, None), below `segment_bytes`).
  * `segment_records`: the records of one key range, in key order.
  * `write_segment`: a segment as a hidden object (+ its record starts).
  * `joined_info`: the file's info from its segments' (offsets, sizes,
    sha256s; a file of one non-empty segment is a plain file).
  * `check_segments`, `index_chunks`: before the join, every segment is
    there with its size; the offset index's bytes a segment at a time.

A joined file's metadata entry lists its segments ({"offset", "bytes",
"sha256"}) and its "sha256" is `hashing.segments_sha256` of them: no
worker ever reads the whole file. GZIP files are one stream: one writer
each, never segments.
"""

import hashlib
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from textrecords.datasets import index
from textrecords.engine import EngineOptions
from textrecords.engine import generator_steps
from textrecords.engine import record_runs
from textrecords.errors import UserError
from textrecords.files import hashing
from textrecords.files import storage

# framed record bytes (before finish_file) a segment aims at
SEGMENT_BYTES = EngineOptions.segment_bytes

Bounds = Tuple[Optional[int], Optional[int]]  # a segment's keys [lo, hi); None: open
WHOLE: List[Bounds] = [(None, None)]


# ---------------------------------------------------------------- the plan

def plan(entries: Sequence[tuple], allowed: Optional[Sequence[int]],
         segment_bytes: int = SEGMENT_BYTES) -> List[Bounds]:
  """The key ranges of one file's segments, in order.

  Args:
    entries: the file's runs as `generator_steps.RunEntry`s (only their
      first key, last key and bytes are used: [2], [3], [4]).
    allowed: the keys a segment may start at (`Generator.cut_keys`), or
      None for any key.
    segment_bytes: the run bytes a segment aims at.
  Returns:
    `WHOLE` when the runs hold under two segments' worth or no cut is
    allowed; else ceil(bytes / segment_bytes) ranges or fewer. Runs whose
    key ranges do not overlap (units in key order) are cut between runs,
    at the boundary nearest each equal share of the bytes; overlapping
    runs at the key where the bytes, taken as spread evenly over each
    run's key range, reach it (snapped to an allowed key).

  >>> e = [(0, "", 0, 9, 100), (0, "", 10, 19, 100), (0, "", 20, 29, 100)]
  >>> plan(e, None, 150), plan(e, None, 300)
  ([(None, 10), (10, None)], [(None, None)])
  >>> plan([(0, "", 0, 99, 100), (0, "", 0, 99, 100)], [20, 60], 100)
  [(None, 60), (60, None)]
  """
  total = sum(int(e[4]) for e in entries)
  n = -(-total // max(1, segment_bytes))
  if n < 2:
    return WHOLE
  bounds = [(int(e[2]), int(e[3])) for e in entries]
  order = record_runs.disjoint(bounds)
  if order:
    cuts = _run_cuts([entries[i] for i in order], allowed, n, total)
  else:
    cuts = _spread_cuts(entries, allowed, n, total)
  if not cuts:
    return WHOLE
  ends: List[Optional[int]] = [None, *cuts, None]
  return list(zip(ends[:-1], ends[1:]))


def _run_cuts(ordered: Sequence[tuple], allowed, n: int, total: int) -> List[int]:
  """Cut keys between runs laid end to end in key order: for each share
  j * total / n, the allowed boundary nearest it (ties: the earlier)."""
  candidates = []  # (bytes before, cut key)
  before = 0
  for prev, run in zip(ordered, ordered[1:]):
    before += int(prev[4])
    key = _allowed_in(allowed, int(prev[3]) + 1, int(run[2]))
    if key is not None:
      candidates.append((before, key))
  if not candidates:
    return []
  cuts = set()
  for j in range(1, n):
    share = j * total // n
    cuts.add(min(candidates, key=lambda c: (abs(c[0] - share), c[0]))[1])
  return sorted(cuts)


def _allowed_in(allowed, lo: int, hi: int) -> Optional[int]:
  """The key to cut at between keys lo - 1 and hi: hi when any key is
  allowed, else the first allowed key in [lo, hi], or None."""
  if allowed is None:
    return hi
  i = int(np.searchsorted(np.asarray(allowed, np.int64), lo, side="left"))
  return int(allowed[i]) if i < len(allowed) and allowed[i] <= hi else None


def _spread_cuts(entries: Sequence[tuple], allowed, n: int, total: int) -> List[int]:
  """Cut keys for runs whose key ranges overlap (hashed keys): the key
  where the estimated bytes before it reach each share (integers only, so
  every machine finds the same), snapped to the nearest allowed key."""
  spans = [(int(e[2]), int(e[3]) - int(e[2]) + 1, int(e[4])) for e in entries]
  lo = min(s[0] for s in spans)
  hi = max(s[0] + s[1] for s in spans)  # one past the last key

  def before(key: int) -> int:
    return sum(size * min(max(key - first, 0), length) // length
               for first, length, size in spans)

  cuts = set()
  for j in range(1, n):
    share = j * total // n
    a, b = lo, hi
    while a < b:  # the smallest key with before(key) >= share
      mid = (a + b) // 2
      if before(mid) >= share:
        b = mid
      else:
        a = mid + 1
    key = a if allowed is None else _nearest(allowed, a)
    if key is not None and lo < key < hi:
      cuts.add(key)
  return sorted(cuts)


def _nearest(allowed: Sequence[int], key: int) -> Optional[int]:
  """The allowed key nearest `key` (ties: the smaller), or None."""
  if not len(allowed):
    return None
  return min((int(k) for k in allowed), key=lambda k: (abs(k - key), k))


# ---------------------------------------------------------------- a segment's records

def _inside(entry: tuple, lo: Optional[int], hi: Optional[int]) -> bool:
  return (lo is None or entry[2] >= lo) and (hi is None or entry[3] < hi)


def _touches(entry: tuple, lo: Optional[int], hi: Optional[int]) -> bool:
  return (lo is None or entry[3] >= lo) and (hi is None or entry[2] < hi)


def segment_records(entries: Sequence[tuple], lo: Optional[int],
                    hi: Optional[int]) -> Iterable[record_runs.Run]:
  """The file's records with keys in [lo, hi) in key order, as runs: runs
  wholly inside as `generator_steps.merged_run` reads them; otherwise
  each run's records in the range, found from its keys and read a chunk
  at a time, merged record by record."""
  mine = [e for e in entries if _touches(e, lo, hi)]
  if all(_inside(e, lo, hi) for e in mine):
    return generator_steps.merged_run(mine)
  return _ranged_merge(mine, lo, hi)


def _ranged_merge(entries: Sequence[tuple], lo: Optional[int],
                  hi: Optional[int]) -> Iterator[record_runs.Run]:
  chunk = record_runs.chunk_bytes(len(entries))
  streams = []
  for e in sorted(entries, key=lambda e: e[1]):
    read_at = generator_steps.range_reader(e[1])
    size = storage.size(e[1])
    span = None if _inside(e, lo, hi) else _span(read_at, lo, hi)
    streams.append(record_runs.chunked_records(read_at, size, chunk, span))
  yield from record_runs.merged_records(streams)


def _span(read_at, lo: Optional[int], hi: Optional[int]) -> Tuple[int, int]:
  """(first, stop): the records of a run object with keys in [lo, hi)."""
  n = int(np.frombuffer(read_at(0, 8), "<u8")[0])
  keys = np.frombuffer(read_at(8, 8 + 8 * n), "<i8")
  first = 0 if lo is None else int(np.searchsorted(keys, lo, side="left"))
  stop = n if hi is None else int(np.searchsorted(keys, hi, side="left"))
  return first, max(first, stop)


# ---------------------------------------------------------------- writing and joining

def segment_path(parts_dir: str, file_index: int, segment: int) -> str:
  """Where segment `segment` of record file `file_index` waits for the join."""
  return storage.join(parts_dir, "segment-f%05d-s%05d" % (file_index, segment))


def starts_path(path: str) -> str:
  """Where a segment's record starts (int64, little endian) are kept."""
  return path + ".starts"


def write_segment(path: str, runs: Iterable[record_runs.Run]) -> dict:
  """Writes framed records (in the order given) as the object `path` and
  their starts beside it; returns {"path", "bytes", "sha256", "records"}.
  A rerun (a retried task) writes the same bytes."""
  h = hashlib.sha256()
  size = records = 0
  starts = []
  with storage.open_write(path) as out:
    for run in runs:
      if not len(run.keys):
        continue
      out.write(run.data)
      h.update(run.data)
      starts.append(np.asarray(run.starts, np.int64) + size)
      size += len(run.data)
      records += len(run.keys)
  all_starts = np.concatenate(starts) if starts else np.zeros(0, np.int64)
  storage.write_file(starts_path(path), all_starts.astype("<i8").tobytes())
  return {"path": path, "bytes": size, "sha256": h.hexdigest(), "records": records}


def joined_info(name: str, segments: Sequence[dict]) -> dict:
  """The info of the file the segments make, in order: {"name", "bytes",
  "sha256", "records"} and, for two or more non-empty segments,
  "segments" ({"offset", "bytes", "sha256"} each) with "sha256" their
  `hashing.segments_sha256`; one non-empty segment: its own sha256."""
  listed, offset = [], 0
  for s in segments:
    if s["bytes"]:
      listed.append({"offset": offset, "bytes": s["bytes"], "sha256": s["sha256"]})
      offset += s["bytes"]
  info = {"name": name, "bytes": offset, "records": sum(s["records"] for s in segments)}
  if len(listed) > 1:
    info.update(sha256=hashing.segments_sha256(listed), segments=listed)
  else:
    info["sha256"] = listed[0]["sha256"] if listed else hashing.sha256_bytes(b"")
  return info


def check_segments(name: str, segments: Sequence[dict]) -> None:
  """Raises a one-line UserError unless every segment object is there
  with its size (before anything of the file is written)."""
  for j, s in enumerate(segments):
    if not storage.exists(s["path"]) or storage.size(s["path"]) != s["bytes"]:
      raise UserError(f"{name}: segment {j} ({s['path']}) is missing or incomplete; "
                      "rerun with --resume")


def index_chunks(info: dict, segments: Sequence[dict]) -> Iterator[bytes]:
  """The offset index of the joined file, a segment at a time: the header,
  each segment's record starts shifted by its offset, the file size."""
  yield index.header_bytes(info["name"], info["bytes"], info["sha256"], info["records"])
  base = 0
  for s in segments:
    if s["records"]:
      starts = np.frombuffer(storage.read_bytes(starts_path(s["path"])), "<i8")
      if len(starts) != s["records"]:
        raise UserError(f"{starts_path(s['path'])}: {len(starts)} record starts, "
                        f"expected {s['records']}; rerun with --resume")
      yield (starts + base).astype("<u8").tobytes()
    base += s["bytes"]
  yield np.asarray([base], "<u8").tobytes()


def remove_segments(segments: Sequence[dict]) -> None:
  """Deletes the segment objects and their starts (after the join)."""
  for s in segments:
    storage.remove(s["path"])
    storage.remove(starts_path(s["path"]))



# ---------------------------------------------------------------- the engines' steps

def file_plan(gen, values, file_index: int, entries: Sequence[tuple], compression: str,
              segment_bytes: int = SEGMENT_BYTES) -> List[Bounds]:
  """`plan` of record file `file_index` of generator `gen` (`WHOLE` for a
  GZIP file: one stream, one writer)."""
  if compression:
    return WHOLE
  return plan(entries, gen.cut_keys(file_index, values), segment_bytes)


def touching(entries: Sequence[tuple], bounds: Bounds) -> List[tuple]:
  """The runs with records in a segment's key range."""
  return [e for e in entries if _touches(e, *bounds)]


def write_file_segment(gen, values, file_index: int, bounds: Bounds, entries: Sequence[tuple],
                       path: str) -> dict:
  """One segment of a record file: its key range's records in key order,
  through the generator's `finish_file`, written as the object `path`
  (`write_segment`)."""
  return write_segment(path, generator_steps.file_runs(
      gen, file_index, values, segment_records(entries, *bounds)))


def join_direct(dataset, path: str, segments: Sequence[dict]) -> dict:
  """A record file of a `DirectDataset` joined from its segments (every
  one checked first; none missing, or nothing is written); the segment
  objects removed after. Returns the file's info."""
  name = storage.basename(path)
  check_segments(name, segments)
  info = dataset.join(path, segments, lambda i: index_chunks(i, segments),
                      joined_info(name, segments))
  remove_segments(segments)
  return info
