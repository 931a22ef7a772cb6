"""One record file written in segments by parallel workers, then joined.

A record file's records (its sorted runs, `generator_steps.RunEntry`) may
be cut at keys into *segments* of about `SEGMENT_BYTES` of framed records.
Each segment is written by its own worker as a hidden object (its records
in key order through the generator's `finish_file`, framed bytes, sha256,
record starts); then a task per segment places it in the file (copied
in the kernel; on a URL the store joins them) and writes its part of the
offset index (its starts, shifted), and one cheap step finishes. The file's
bytes are those of one writer: an uncompressed TFRecord file is its
records end to end, and a generator's `finish_file` is only applied to
slices cut where `Generator.cut_keys` allows.

  * `plan`: the segments' key ranges, a function of the runs' key bounds
    and byte counts alone (the same on every engine and worker count;
    one range, (None, None), below `segment_bytes`).
  * `segment_records`: the records of one key range, in key order.
  * `group_levels`, `merge_group`, `grouped`: where every unit's run
    spans the file's keys (bert's order buckets), each segment would read
    every run (units x segments reads); the runs are first merged in
    groups and cut into key bands (a task each, `GROUP_FAN_IN` runs and
    bands at most, level after level), so that segments read about units
    / segments band runs each, and every merge stays a few units' work.
  * `write_segment`: a segment as a hidden object (+ its record starts).
  * `joined_info`: the file's info from its segments' (offsets, sizes,
    sha256s; a file of one non-empty segment is a plain file).
  * `check_segments`: before the join, every segment is there with its size.
  * `start_placement`, `place`, `finish_direct`: the join as parallel
    steps: a small first step, a task per segment placing its records at
    their offset (local paths; URLs join on the store's side) and writing
    its own part of the offset index (`index_parts`: the header goes with
    the first part, the file size with the last), a small last step that
    checks the placements and renames (or joins the parts on the store's
    side): no step reads every segment's record starts.

A joined file's metadata entry lists its segments ({"offset", "bytes",
"sha256"}) and its "sha256" is `hashing.segments_sha256` of them: no
worker ever reads the whole file. Its offset index's entry lists the
index's parts the same way (one per non-empty segment). GZIP files are
one stream: one writer each, never segments.
"""

import bisect
import hashlib
import itertools
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
    entries: the file's runs as `generator_steps.RunEntry`s.
    allowed: the keys inside the file a segment may start at
      (`Generator.cut_keys`), or None for any key.
    segment_bytes: the run bytes a segment aims at.
  Returns:
    `WHOLE` when the runs hold under two segments' worth or no cut is
    possible; else n = ceil(bytes / segment_bytes) ranges or fewer, cut
    where only the records decide, never the units (whose sizes may follow
    the worker count): with `allowed`, at evenly spaced allowed keys
    (`even_cuts`: the generator's slices, e.g. order buckets, taken as of
    equal size); with any key allowed and runs whose key ranges do not
    overlap (keys in unit order), at the first record starting at or after
    each equal share of the bytes (`share_offsets`; its run's keys and
    starts read); overlapping runs without `allowed`: whole.

  >>> e = [(0, "", 0, 9, 100), (0, "", 10, 19, 100), (0, "", 20, 29, 100)]
  >>> plan(e, None, 100), plan(e, None, 300)
  ([(None, 10), (10, 20), (20, None)], [(None, None)])
  >>> plan([(0, "", 0, 99, 100), (0, "", 0, 99, 100)], None, 100)
  [(None, None)]
  >>> plan(e, [5, 12, 18, 25], 100)
  [(None, 12), (12, 18), (18, None)]
  """
  total = sum(int(e[4]) for e in entries)
  if allowed is not None:
    cuts = allowed_cuts(total, allowed, segment_bytes)
  else:
    order = record_runs.disjoint([(int(e[2]), int(e[3])) for e in entries])
    cuts = _byte_cuts([entries[i] for i in order], total, segment_bytes) if order else []
  if not cuts:
    return WHOLE
  ends: List[Optional[int]] = [None, *cuts, None]
  return list(zip(ends[:-1], ends[1:]))


def segment_count(total: int, segment_bytes: int) -> int:
  """How many segments `total` bytes of runs aim at: ceil(total / segment_bytes)."""
  return -(-total // max(1, segment_bytes))


def share_offsets(total: int, segment_bytes: int) -> List[int]:
  """The byte offsets j * total // n, j = 1 .. n - 1 (n: `segment_count`),
  each followed by the first record starting at or after it.

  >>> share_offsets(300, 100), share_offsets(300, 300)
  ([100, 200], [])
  """
  n = segment_count(total, segment_bytes)
  return [j * total // n for j in range(1, n)] if n >= 2 else []


def allowed_cuts(total: int, allowed: Sequence[int], segment_bytes: int) -> List[int]:
  """The cut keys of a file of `total` bytes of runs whose generator
  allows cuts only at `allowed` (`even_cuts`; none under two segments)."""
  n = segment_count(total, segment_bytes)
  return even_cuts(allowed, n) if n >= 2 else []


def even_cuts(allowed: Sequence[int], n: int) -> List[int]:
  """n - 1 cut keys (fewer where they coincide) from the m allowed keys
  inside a file, which cut it into m + 1 slices: the allowed key before
  slice round(j * (m + 1) / n), j = 1 .. n - 1.

  >>> even_cuts([10, 20, 30, 40, 50], 3), even_cuts([10], 4), even_cuts([], 2)
  ([20, 40], [10], [])
  """
  m = len(allowed)
  picks = {min(m, max(1, (2 * j * (m + 1) + n) // (2 * n))) - 1 for j in range(1, n)}
  return [int(allowed[i]) for i in sorted(picks)] if m else []


def _byte_cuts(ordered: Sequence[tuple], total: int, segment_bytes: int) -> List[int]:
  """Cut keys of runs laid end to end in key order: the key of the first
  record starting at or after each of `share_offsets` (the keys and starts
  of the run it falls in read from its object)."""
  befores = np.cumsum([0] + [int(e[4]) for e in ordered]).tolist()
  cuts = set()
  for at in share_offsets(total, segment_bytes):
    r = bisect.bisect_right(befores, at) - 1
    key = _key_at(ordered[r], at - befores[r]) if at > befores[r] else int(ordered[r][2])
    if key is None and r + 1 < len(ordered):
      key = int(ordered[r + 1][2])
    if key is not None and key > int(ordered[0][2]):
      cuts.add(key)
  return sorted(cuts)


def _key_at(entry: tuple, offset: int) -> Optional[int]:
  """The key of the run's first record starting at or after byte `offset`
  of its records (None: none does)."""
  read_at = generator_steps.range_reader(entry[1])
  n = int(np.frombuffer(read_at(0, 8), "<u8")[0])
  index_bytes = read_at(8, 8 + 16 * n)
  starts = np.frombuffer(index_bytes, "<i8", n, 8 * n)
  i = int(np.searchsorted(starts, offset, side="left"))
  return int(np.frombuffer(index_bytes, "<i8", 1, 8 * i)[0]) if i < n else None


# ---------------------------------------------------------------- a segment's records

def _inside(entry: tuple, lo: Optional[int], hi: Optional[int]) -> bool:
  return (lo is None or entry[2] >= lo) and (hi is None or entry[3] < hi)


def _touches(entry: tuple, lo: Optional[int], hi: Optional[int]) -> bool:
  return (lo is None or entry[3] >= lo) and (hi is None or entry[2] < hi)


def segment_records(entries: Sequence[tuple], lo: Optional[int],
                    hi: Optional[int]) -> Iterable[record_runs.Run]:
  """The file's records with keys in [lo, hi) in key order, as runs: runs
  wholly inside as `generator_steps.merged_run` reads them
  (`GROUP_MERGE_BUDGET` over them); otherwise
  each run's records in the range, found from its keys and read a chunk
  at a time, merged record by record."""
  mine = [e for e in entries if _touches(e, lo, hi)]
  if all(_inside(e, lo, hi) for e in mine):
    return generator_steps.merged_run(mine, GROUP_MERGE_BUDGET)
  return _ranged_merge(mine, lo, hi)


def _ranged_merge(entries: Sequence[tuple], lo: Optional[int],
                  hi: Optional[int]) -> Iterator[record_runs.Run]:
  """Runs whose key ranges do not overlap (w2v, mt) come one after another
  in key order, each as its records in the range (`_run_in_range`: a run
  held at a time, as `generator_steps.merged_run` holds one); others are
  merged record by record, each read a chunk at a time."""
  order = record_runs.disjoint([(int(e[2]), int(e[3])) for e in entries])
  if order:
    for i in order:
      yield _run_in_range(entries[i], lo, hi)
    return
  chunk = record_runs.chunk_bytes(len(entries), GROUP_MERGE_BUDGET)
  streams = []
  for e in sorted(entries, key=lambda e: e[1]):
    read_at = generator_steps.range_reader(e[1])
    span = None if _inside(e, lo, hi) else _span(read_at, lo, hi)
    streams.append(record_runs.chunked_records(read_at, generator_steps.run_bytes(e),
                                               chunk, span))
  yield from record_runs.merged_records(streams)


def _run_in_range(entry: tuple, lo: Optional[int], hi: Optional[int]) -> record_runs.Run:
  """The records of one run object with keys in [lo, hi), as a run: the
  whole object when its keys all are, else that slice (ranged reads)."""
  if _inside(entry, lo, hi):
    return record_runs.from_bytes(storage.read_bytes(entry[1]))
  read_at = generator_steps.range_reader(entry[1])
  first, stop = _span(read_at, lo, hi)
  if stop <= first:
    return record_runs.Run(np.zeros(0, np.int64), np.zeros(0, np.int64), b"")
  n = int(np.frombuffer(read_at(0, 8), "<u8")[0])
  starts_at, data_at = 8 + 8 * n, 8 + 16 * n
  keys = np.frombuffer(read_at(8 + 8 * first, 8 + 8 * stop), "<i8").astype(np.int64)
  starts = np.frombuffer(read_at(starts_at + 8 * first, starts_at + 8 * min(n, stop + 1)),
                         "<i8").astype(np.int64)
  end = (int(starts[stop - first]) if stop < n
         else generator_steps.run_bytes(entry)(n) - data_at)
  base = int(starts[0])
  return record_runs.Run(keys, starts[:stop - first] - base,
                         read_at(data_at + base, data_at + end))


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
  their starts beside it, a run at a time (the segment's starts are never
  held: 8 bytes a record); returns {"path", "bytes", "sha256", "records"}.
  A rerun (a retried task) writes the same bytes."""
  h = hashlib.sha256()
  size = records = 0
  with storage.open_write(path) as out, storage.open_write(starts_path(path)) as starts:
    for run in runs:
      if not len(run.keys):
        continue
      out.write(run.data)
      h.update(run.data)
      starts.write((np.asarray(run.starts, np.int64) + size).astype("<i8").tobytes())
      size += len(run.data)
      records += len(run.keys)
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


INDEX_CHUNK_BYTES = 8 << 20  # record starts read at a time by `index_part_chunks`


def index_name(name: str) -> str:
  """The name of record file `name`'s offset index (beside it)."""
  return storage.basename(index.index_path(name))


def index_parts(info: dict, segments: Sequence[dict]) -> List[Optional[dict]]:
  """Where each segment's part of the joined file's offset index goes: for
  each non-empty segment {"at": its byte offset in the index, "bytes": its
  size, "head":
  the index's header (the first such segment's part, else b""), "tail":
  the file size (the last one's, else None)}; None for an empty segment
  (and for every one of a file without records: it has no index). The
  parts end to end are the index of one writer (`index.header_bytes`,
  each record's start in the file, the file size), so each is written
  apart, by the segment's own placement.

  >>> segs = [{"bytes": 40, "records": 2}, {"bytes": 0, "records": 0}, {"bytes": 20, "records": 1}]
  >>> parts = index_parts({"name": "f", "bytes": 60, "sha256": "x", "records": 3}, segs)
  >>> [(p["at"], p["bytes"], len(p["head"]), p["tail"]) for p in parts if p], parts[1]
  ([(0, 128, 112, None), (128, 16, 0, 60)], None)
  """
  if not info["records"]:
    return [None] * len(segments)
  head = index.header_bytes(info["name"], info["bytes"], info["sha256"], info["records"])
  full = [j for j, s in enumerate(segments) if s["bytes"]]
  parts: List[Optional[dict]] = [None] * len(segments)
  at = 0
  for j in full:
    part = {"at": at, "head": head if j == full[0] else b"",
            "tail": int(info["bytes"]) if j == full[-1] else None}
    part["bytes"] = len(part["head"]) + 8 * int(segments[j]["records"]) + 8 * (j == full[-1])
    parts[j], at = part, at + part["bytes"]
  return parts


def index_part_chunks(segment: dict, offset: int, part: dict) -> Iterator[bytes]:
  """The bytes of one segment's part of the offset index (`index_parts`):
  its head, the segment's record starts (its `.starts` object, read
  `INDEX_CHUNK_BYTES` at a time) shifted by the segment's `offset` in the
  file, its tail."""
  yield part["head"]
  if segment["records"]:
    path = starts_path(segment["path"])
    size = storage.size(path)
    if size != 8 * segment["records"]:
      raise UserError(f"{path}: {size // 8} record starts, "
                      f"expected {segment['records']}; rerun with --resume")
    read_at = generator_steps.range_reader(path)
    for a in range(0, size, INDEX_CHUNK_BYTES):  # (a segment's starts never held whole)
      yield (np.frombuffer(read_at(a, min(size, a + INDEX_CHUNK_BYTES)), "<i8")
             + offset).astype("<u8").tobytes()
  if part["tail"] is not None:
    yield np.asarray([part["tail"]], "<u8").tobytes()


def index_part_path(segment_object: str) -> str:
  """Where a segment's part of the offset index is kept for a store-side join."""
  return segment_object + ".index"


def remove_segments(segments: Sequence[dict]) -> None:
  """Deletes the segment objects, their starts and index parts (after the join)."""
  for s in segments:
    storage.remove(s["path"])
    storage.remove(starts_path(s["path"]))
    storage.remove(index_part_path(s["path"]))



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


# ---------------------------------------------------------------- merging runs in groups

GROUP_FAN_IN = 16  # runs one group merge reads, and key bands it writes, at most
# record bytes a group merge, or a segment merging overlapping runs, reads
# ahead over its runs: ranged reads of 4 MiB at `GROUP_FAN_IN` runs (see
# scripts/bench/estimate_requests.py)
GROUP_MERGE_BUDGET = 64 << 20
# a URL's band run is uploaded in parts of this: one request for a band
# of a unit's size (bert at dupe 5: about 13 MB), four in 8 MiB parts
BAND_WRITE_BLOCK = 16 << 20

# (the band runs it writes: RunEntries of keys [first, last] and 0 bytes, in
# key order; the runs it merges)
Group = Tuple[List[tuple], List[tuple]]


def segment_reads(entries: Sequence[tuple], plan: Sequence[Bounds]) -> int:
  """How many (run, segment) pairs the segments of `plan` read: for each
  run, the segments its key range touches (found by bisection, not by
  trying every pair).

  >>> segment_reads([(0, "a", 0, 29, 9), (0, "b", 5, 9, 9)], [(None, 10), (10, 20), (20, None)])
  4
  """
  if len(plan) < 2:
    return len(entries)
  cuts = [int(b[0]) for b in plan[1:]]  # segment j holds keys [cuts[j-1], cuts[j])
  return sum(bisect.bisect_right(cuts, int(e[3])) - bisect.bisect_right(cuts, int(e[2])) + 1
             for e in entries)


def _pays(runs: int, segments: int, reads: int) -> bool:
  return segments > 1 and runs > 1 and reads > 2 * (runs + segments)


def group_levels(entries: Sequence[tuple], plan: Sequence[Bounds],
                 fan_in: int = GROUP_FAN_IN, max_levels: Optional[int] = None) -> List[List[Group]]:
  """The group merges that keep a segmented file's reads linear, level by
  level, or [] where they do not pay (segments reading at most 2 x (runs
  + segments) runs: one segment; narrow runs: w2v, mt).

  A butterfly: a band of the file's keys (at first all of them; always
  whole segments) and the runs holding it; its runs, in key order, are
  merged `fan_in` at a time, each group writing one band run per sub-band
  (the band's segments cut into `fan_in` or fewer runs of segments;
  nothing for a sub-band no run of the group touches); each sub-band then
  holds 1 / fan_in of the runs, each as large as a unit's run. So every
  merge reads and writes about `fan_in` units' records, on every level;
  a level reads each record once; after log_fan_in(segments) levels each
  segment reads about units / segments runs. `max_levels` (an engine with
  a fixed number of steps): the last one cuts every band into its
  segments. A function of the runs' bounds only: the same on every engine
  and worker count.

  >>> e = [(0, "p/run-%d" % i, 0, 99, 10) for i in range(8)]
  >>> four = [(None, 20), (20, 40), (40, 60), (60, None)]
  >>> [[([o[1:4] for o in g[0]], len(g[1])) for g in level] for level in group_levels(e, four, 4)]
  ... # doctest: +NORMALIZE_WHITESPACE
  [[([('p/band-f00000-l0-s00000-g00000', 0, 19), ('p/band-f00000-l0-s00001-g00000', 20, 39),
      ('p/band-f00000-l0-s00002-g00000', 40, 59), ('p/band-f00000-l0-s00003-g00000', 60, 99)],
     4),
    ([('p/band-f00000-l0-s00000-g00001', 0, 19), ('p/band-f00000-l0-s00001-g00001', 20, 39),
      ('p/band-f00000-l0-s00002-g00001', 40, 59), ('p/band-f00000-l0-s00003-g00001', 60, 99)],
     4)]]
  >>> group_levels(e, [(None, None)]), [len(level) for level in group_levels(e, four, 2)]
  ([], [4])
  """
  if not _pays(len(entries), len(plan), segment_reads(entries, plan)):
    return []
  bands = [(0, len(plan), sorted(entries, key=lambda e: (int(e[2]), int(e[3]), e[1])))]
  levels: List[List[Group]] = []
  while True:
    bands = [(a, b, runs) for a, b, runs in bands
             if _pays(len(runs), b - a, segment_reads(runs, plan[a:b]))]
    if not bands:
      return levels
    last = max_levels is not None and len(levels) == max_levels - 1
    level: List[Group] = []
    split = []
    for a, b, runs in bands:
      chunks = _parts(list(range(a, b)), b - a if last else min(fan_in, b - a))
      groups = _parts(runs, -(-len(runs) // fan_in))
      outs = [[] for _ in chunks]
      for g, part in enumerate(groups):
        written = []
        for c, chunk in enumerate(chunks):
          lo, hi = plan[chunk[0]][0], plan[chunk[-1]][1]
          if any(_touches(e, lo, hi) for e in part):
            band = _band_entry(part, lo, hi, "band-f%05d-l%d-s%05d-g%05d" % (
                int(part[0][0]), len(levels), chunk[0], g))
            written.append(band)
            outs[c].append(band)
        level.append((written, part))
      split += [(chunk[0], chunk[-1] + 1, out) for chunk, out in zip(chunks, outs) if out]
    levels.append(level)
    bands = split


def _parts(items: list, count: int) -> List[list]:
  """`items` in `count` consecutive parts of even sizes."""
  return [items[i * len(items) // count:(i + 1) * len(items) // count] for i in range(count)]


def _band_entry(part: Sequence[tuple], lo: Optional[int], hi: Optional[int], name: str) -> tuple:
  """The RunEntry of a group's band run of keys [lo, hi) (None: open),
  beside the group's first run; its keys' bounds those of the band, kept
  inside the group's (its bytes unknown until merged: 0)."""
  first = int(lo) if lo is not None else min(int(e[2]) for e in part)
  last = int(hi) - 1 if hi is not None else max(int(e[3]) for e in part)
  return (int(part[0][0]), storage.join(storage.parent(part[0][1]), name), first,
          max(first, last), 0)


def grouped(entries: Sequence[tuple], levels: Sequence[Sequence[Group]]) -> List[tuple]:
  """The runs the segments read after `levels`: every run no group merges
  (the units' runs left and the band runs of each band's last level), in
  key order."""
  merged = {e[1] for level in levels for g in level for e in g[1]}
  made = [o for level in levels for g in level for o in g[0]]
  return sorted((e for e in list(entries) + made if e[1] not in merged),
                key=lambda e: (int(e[2]), int(e[3]), e[1]))


def merge_group(group: Group) -> List[tuple]:
  """One group merge: its runs merged in key order, a chunk of each held
  at a time (`generator_steps.merged_run`, `GROUP_MERGE_BUDGET` over them
  all), cut at its band runs' first
  keys and written as them (`record_runs.write_streamed`, one after the
  other, an empty one where no record falls; a rerun writes the same
  bytes); returns the band runs' RunEntries."""
  outs, part = group
  cuts = [int(o[2]) for o in outs[1:]]
  pieces = _cut_runs(generator_steps.merged_run(part, GROUP_MERGE_BUDGET), cuts)
  done = 0
  for i, runs in itertools.groupby(pieces, key=lambda x: x[0]):
    for j in range(done, i):
      _write_band(outs[j], [])
    _write_band(outs[i], (run for _, run in runs))
    done = i + 1
  for j in range(done, len(outs)):
    _write_band(outs[j], [])
  return list(outs)


def _write_band(entry: tuple, runs: Iterable[record_runs.Run]) -> None:
  with storage.open_write(entry[1], BAND_WRITE_BLOCK) as out:
    record_runs.write_streamed(out, runs)


def _cut_runs(runs: Iterable[record_runs.Run],
              cuts: Sequence[int]) -> Iterator[Tuple[int, record_runs.Run]]:
  """(band, slice) for runs in key order cut before each key of `cuts`:
  band i holds keys [cuts[i - 1], cuts[i])."""
  for run in runs:
    at = np.searchsorted(run.keys, cuts, side="left").tolist()
    ends = [0, *at, len(run.keys)]
    for i, (a, b) in enumerate(zip(ends[:-1], ends[1:])):
      if b > a:
        yield i, _slice(run, a, b)


def _slice(run: record_runs.Run, a: int, b: int) -> record_runs.Run:
  """Records [a, b) of a run."""
  end = int(run.starts[b]) if b < len(run.keys) else len(run.data)
  base = int(run.starts[a])
  return record_runs.Run(run.keys[a:b], run.starts[a:b] - base, run.data[base:end])


def write_file_segment(gen, values, file_index: int, bounds: Bounds, entries: Sequence[tuple],
                       path: str) -> dict:
  """One segment of a record file: its key range's records in key order,
  through the generator's `finish_file`, written as the object `path`
  (`write_segment`)."""
  return write_segment(path, generator_steps.file_runs(
      gen, file_index, values, segment_records(entries, *bounds)))


def join_direct(dataset, path: str, segments: Sequence[dict]) -> dict:
  """A record file of a `DirectDataset` joined from its segments (every
  one checked first; none missing, or nothing is written), the segment
  objects removed after; returns the file's info: the engines' parallel
  steps (`start_direct`, `place`, `finish_direct`) one after the other."""
  return finish_direct(dataset, path, [place(p) for p in start_direct(dataset, path, segments)])


# ---------------------------------------------------------------- placing segments and index parts

def in_place(path: str) -> bool:
  """True where a file's segments are placed by parallel tasks (a local
  path, or a mount every worker has); URLs join on the store's side."""
  return not storage.is_url(path)


def start_direct(dataset, path: str, segments: Sequence[dict]) -> List[dict]:
  """`start_placement` of a `DirectDataset`'s record file: on a local path
  (`in_place`) with hidden temp names for the file and its index, on a
  URL without (its index parts become objects beside the segments)."""
  name = storage.basename(path)
  if not in_place(path):
    return start_placement(name, None, segments)
  return start_placement(name, dataset.temp_path(name), segments,
                         dataset.temp_path(index_name(name)))


def start_placement(name: str, tmp: Optional[str], segments: Sequence[dict],
                    index_tmp: Optional[str] = None) -> List[dict]:
  """The first, small step of a join: every segment checked and one
  placement per segment ({"tmp", "segment", "count", "offset", "info",
  "copy", "index"}: offsets the prefix sums of the sizes; "index": its
  part of the offset index, `index_parts`, with "tmp" or "path") for
  `place`. On a local path (`tmp` given) the hidden temp file `tmp` is
  made (segment 0's object linked as it, no byte copied, where the
  filesystem allows; else empty) and the index's temp file `index_tmp`
  (empty; a file without records has none); on a URL (`tmp` None) each
  index part goes to its own object (`index_part_path`)."""
  check_segments(name, segments)
  offsets = np.cumsum([0] + [int(s["bytes"]) for s in segments]).tolist()
  parts = index_parts(joined_info(name, segments), segments)
  linked = False
  if tmp is not None:
    linked = bool(segments and segments[0]["bytes"]) and storage.link_local(
        segments[0]["path"], tmp)
    if not linked:
      storage.create_empty(tmp)
    if any(parts):
      storage.create_empty(index_tmp)
  for part, s in zip(parts, segments):
    if part is not None and tmp is not None:
      part["tmp"] = index_tmp
    elif part is not None:
      part["path"] = index_part_path(s["path"])
  return [{"tmp": tmp, "segment": j, "count": len(segments), "offset": offsets[j], "info": s,
           "copy": tmp is not None and bool(s["bytes"]) and not (j == 0 and linked),
           "index": parts[j]}
          for j, s in enumerate(segments)]


def place(placement: dict) -> dict:
  """One segment copied into the temp file at its offset (local paths) and
  its part of the offset index written (`index_part_chunks`: into the
  index's temp file at its offset, or as its own object on a URL): a task
  per segment; a rerun writes the same bytes. Returns the placement with
  "copied" (record bytes this call copied) and "index_part" ({"bytes",
  "sha256", "records": 0, "path"} of the index part, or None). A local
  segment's object is removed once placed (its starts stay for a retry).
  On failure the temp files are removed, so the file's last step and
  every later placement fail too."""
  try:
    s = placement["info"]
    copied = _copy_in(placement) if placement["copy"] else 0
    part = placement["index"]
    written = None if part is None else _write_index_part(
        part, index_part_chunks(s, placement["offset"], part))
    if placement["tmp"] is not None:
      storage.remove(s["path"])  # (its bytes freed here, a task a segment, not at the end)
  except BaseException:
    _remove_temps([placement])
    raise
  return dict(placement, copied=copied, index_part=written)


def _copy_in(placement: dict) -> int:
  """A segment's bytes copied into the temp file at its offset; a retried
  placement whose segment object its first attempt removed copies nothing
  if the temp file holds the segment there (its sha256 checked)."""
  s, tmp, offset = placement["info"], placement["tmp"], placement["offset"]
  if (not storage.exists(s["path"]) and storage.exists(tmp)
      and storage.size(tmp) >= offset + s["bytes"]
      and hashing.range_sha256(storage.local_path(tmp), offset, s["bytes"]) == s["sha256"]):
    return 0
  return storage.place_local(s["path"], tmp, offset, s["bytes"])


def _write_index_part(part: dict, chunks: Iterable[bytes]) -> dict:
  """Writes an index part's chunks (into the local temp file part["tmp"]
  at part["at"], fsynced; or as the object part["path"]); returns its
  {"bytes", "sha256", "records": 0, "path"}."""
  h = hashlib.sha256()

  def hashed():
    for chunk in chunks:
      h.update(chunk)
      yield chunk
  if part.get("tmp") is not None:
    size = storage.write_local_at(part["tmp"], part["at"], hashed())
    path = part["tmp"]
  else:
    size = 0
    with storage.open_write(part["path"]) as out:
      for chunk in hashed():
        out.write(chunk)
        size += len(chunk)
    path = part["path"]
  return {"bytes": size, "sha256": h.hexdigest(), "records": 0, "path": path}


def _remove_temps(placements: Sequence[dict]) -> None:
  """Removes a local join's temp files (the record file's and its index's)."""
  for p in placements:
    for t in (p.get("tmp"), (p.get("index") or {}).get("tmp")):
      if t is not None:
        storage.remove(t)


class Placed:
  """A join's checked placements (`placed_segments`): `tmp` (the local
  temp file, None on a URL), `segments` (their infos, in order), `info`
  (the file's, `joined_info`), `index_tmp` (the index's local temp file),
  `index_sources` (its part objects on a URL) and `index_info` (the
  index's info from its parts' sizes and sha256s, `joined_info`; None for
  a file without records)."""

  def __init__(self, name: str, placed: Sequence[dict]):
    self.tmp = placed[0]["tmp"] if placed else None
    self.segments = [p["info"] for p in placed]
    self.info = joined_info(name, self.segments)
    parts = [p["index_part"] for p in placed if p["index_part"] is not None]
    self.index_tmp = next((p["index"].get("tmp") for p in placed if p["index"]), None)
    self.index_sources = [p["path"] for p in parts]
    self.index_info = joined_info(index_name(name), parts) if parts else None


def placed_segments(name: str, placed: Sequence[dict]) -> Placed:
  """The last step's check of every segment's placement (one each, in
  order, into one temp file, at the prefix sums of the sizes) and of each
  index part (where `index_parts` puts it); on a local path the temp
  files' sizes, fsynced. No segment's starts are read here. On failure
  the temp files are removed and a one-line UserError raised."""
  placed = sorted(placed, key=lambda p: p["segment"])
  try:
    count = placed[0]["count"] if placed else 0
    if (len({p["tmp"] for p in placed}) != 1
        or [p["segment"] for p in placed] != list(range(count))):
      raise UserError(f"{name}: {len(placed)} of its {count} segments placed; "
                      "rerun with --resume")
    out = Placed(name, placed)
    offsets = np.cumsum([0] + [int(s["bytes"]) for s in out.segments]).tolist()
    want = index_parts(out.info, out.segments)
    if ([p["offset"] for p in placed] != offsets[:-1]
        or [None if p["index"] is None else p["index"]["at"] for p in placed]
        != [None if w is None else w["at"] for w in want]
        or any((p["index"] or {}).get("bytes") != (p.get("index_part") or {}).get("bytes")
               for p in placed)):
      raise UserError(f"{name}: segments placed at other offsets; rerun with --resume")
    if out.tmp is not None:
      storage.check_local_size(out.tmp, offsets[-1])
      if out.index_info is not None:
        storage.check_local_size(out.index_tmp, out.index_info["bytes"])
  except BaseException:
    _remove_temps(placed)
    raise
  return out


def finish_direct(dataset, path: str, placed: Sequence[dict]) -> dict:
  """The last, small step of a join of a `DirectDataset`'s file: the
  placements checked (`placed_segments`: no record start read), the temp
  files renamed to the finished names (local), or the segments and the
  index parts each joined on the store's side (a URL), the segment
  objects removed; returns the file's info."""
  done = placed_segments(storage.basename(path), placed)
  if done.tmp is None:
    info = dataset.join(path, done.segments, done.info, done.index_sources, done.index_info)
  else:
    info = dataset.commit_placed(done.tmp, done.info, done.index_tmp, done.index_info)
  remove_segments(done.segments)
  return info
