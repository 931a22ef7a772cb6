#!/usr/bin/env python3
"""Object-store requests of bert's sorted write, estimated from its plan (issue 37).

An extrapolation, not a measurement: for a corpus of `size_mb` MB (2**20
bytes) of input at bert's defaults (`--dupe_factor=5`, `--num_shards=1`,
the worst case: one file of every record), the plan is made by the real
planning functions: 1 MiB units, each writing one run that spans every
order key; `file_segments.plan` cutting the file into `SEGMENT_BYTES`
segments; `file_segments.group_levels` merging the runs in groups before
them; `file_segments.grouped` giving each segment's runs. Its requests are
counted with this cost model of the code's reads and writes (every
intermediate object on the store):
  * an object written: 1 PUT up to `storage.WRITE_BLOCK_BYTES` (a band
    run: `file_segments.BAND_WRITE_BLOCK`), else a multipart upload
    (create, a part per block, complete);
  * a run read by a merge or a segment (`record_runs.chunked_records`):
    1 HEAD (its size) for a band run that its first read does not hold
    whole (a unit's run: none, its size from its entry's data bytes and
    its count; a band run is planned before it is written and its size
    is not passed on), 1 GET of its first chunk (its count, its keys and
    starts where they fit, else 2 GETs a chunk, and its first records),
    1 GET per chunk of `record_runs.chunk_bytes(runs merged, budget)`
    (`file_segments.GROUP_MERGE_BUDGET`, for merges and segments)
    record bytes (none where the run fits in its first chunk); a
    segment's run that is not inside its key range also reads its count
    and keys first (2 GETs);
  * a unit: `UNIT_READS` GET of its input range, the byte before it and
    `text_input.UNIT_OVERHANG_BYTES` after it (`text_input.range_read`;
    no HEAD) and 1 PUT of its run (`storage.write_staged`: one upload);
  * a segment: its object and its record starts written, then its
    placement (its starts read 8 MiB at a time, its part of the index
    written) and the store-side join (a copied part each for the file and
    the index) and 3 DELETEs.
Record bytes per input byte and per record are bench_scale's measure
(bert, Dask, S3, 100 MB at 4ffbfbb: 1,344,622,013 record bytes for
104,857,578 input bytes, 1,638,635 records); bytes are spread evenly over
the key space. Requests the plan does not drive (listing, vocab,
metadata: a few hundred) are left out.

  python scripts/bench/estimate_requests.py [--sizes_mb=100,400,1048576] [--fan_in=N]
"""

import bisect
import math
import os
import sys
from typing import Dict, List, Optional, Sequence

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from textrecords.engine import file_segments  # noqa: E402  pylint: disable=wrong-import-position
from textrecords.engine import record_runs  # noqa: E402  pylint: disable=wrong-import-position
from textrecords.files import storage  # noqa: E402  pylint: disable=wrong-import-position

MB = 1 << 20
RECORD_BYTES_PER_INPUT_BYTE = 1344622013 / 104857578  # bert, dupe 5 (bench_scale)
RECORD_BYTES = 1344622013 / 1638635  # framed bytes of one record
UNIT_BYTES = 1 << 20
UNIT_READS = 1  # ranged GETs of a unit's input (`text_input.range_read`)
KEYS = 1 << 40  # the order keys a file's runs span
RUN_PREFIX = "s3://bucket/out/.parts/"
ONE_TB_MB = 1 << 20


def write_requests(size: float, block: int = storage.WRITE_BLOCK_BYTES) -> int:
  """Requests to write an object of `size` bytes in parts of `block`.

  >>> write_requests(100), write_requests(20 << 20), write_requests(13e6, 16 << 20)
  (1, 5, 1)
  """
  return 1 if size <= block else 2 + math.ceil(size / block)


def read_requests(size: float, chunk: int, whole: bool = True, sized: bool = False) -> int:
  """Requests to read a run of `size` record bytes a chunk at a time
  (`record_runs.chunked_records`); not `whole`: a slice of it, its keys
  read first to find the slice (2 more); `sized`: its size known from its
  entry (a unit's run), else a HEAD where its first read does not reach
  its end.

  >>> read_requests(1 << 20, 4 << 20), read_requests(13 << 20, 4 << 20)
  (1, 6)
  >>> read_requests(13 << 20, 4 << 20, sized=True)
  5
  """
  index = 16 * size / RECORD_BYTES
  chunks = max(1, math.ceil(size / chunk))
  fits = 8 + index + size < chunk
  head = 0 if sized or fits else 1
  data = 0 if whole and fits else chunks
  keys = 0 if index <= chunk else 2 * chunks
  return head + 1 + data + keys + (0 if whole else 2)


def _density(entry: tuple, sizes: Dict[str, float]) -> float:
  return sizes[entry[1]] / (int(entry[3]) - int(entry[2]) + 1)


def _overlap(entry: tuple, lo: Optional[int], hi: Optional[int]) -> int:
  a = max(int(entry[2]), 0 if lo is None else int(lo))
  b = min(int(entry[3]) + 1, KEYS if hi is None else int(hi))
  return max(0, b - a)


def _segment_runs(runs: Sequence[tuple], plan: Sequence[tuple]) -> List[List[tuple]]:
  """For each segment of `plan`, the runs it reads (`file_segments.touching`,
  found by bisection: segment j holds keys [cuts[j - 1], cuts[j]))."""
  cuts = [int(b[0]) for b in plan[1:]]
  found: List[List[tuple]] = [[] for _ in plan]
  for e in runs:
    for j in range(bisect.bisect_right(cuts, int(e[2])), bisect.bisect_right(cuts, int(e[3])) + 1):
      found[j].append(e)
  return found


def estimate(size_mb: float, fan_in: int = file_segments.GROUP_FAN_IN,
             budget: int = file_segments.GROUP_MERGE_BUDGET) -> dict:
  """The plan's requests for `size_mb` MB of input, by part of the job:
  {"units", "merge_reads", "merge_writes", "segment_reads",
  "segment_writes", "total", "per_mb", "segments", "levels",
  "merge_bytes_max", "merge_chunk"}."""
  units = max(1, math.ceil(size_mb * MB / UNIT_BYTES))
  run_bytes = RECORD_BYTES_PER_INPUT_BYTE * size_mb * MB / units
  entries = [(0, RUN_PREFIX + "run-u%08d" % u, 0, KEYS - 1, int(run_bytes))
             for u in range(units)]
  sizes = {e[1]: float(run_bytes) for e in entries}
  plan = file_segments.plan(entries, range(1, KEYS), file_segments.SEGMENT_BYTES)
  levels = file_segments.group_levels(entries, plan, fan_in)
  out = dict(units=(UNIT_READS + 1) * units, merge_reads=0, merge_writes=0,
             segment_reads=0, segment_writes=0, segments=len(plan), levels=len(levels),
             merge_bytes_max=0.0, merge_chunk=0)
  for level in levels:
    for bands, part in level:
      chunk = record_runs.chunk_bytes(len(part), budget)
      out["merge_chunk"] = max(out["merge_chunk"], chunk)
      out["merge_bytes_max"] = max(out["merge_bytes_max"], sum(sizes[e[1]] for e in part))
      out["merge_reads"] += sum(read_requests(sizes[e[1]], chunk, sized=int(e[4]) > 0)
                                for e in part)
      for band in bands:
        lo, hi = int(band[2]), int(band[3]) + 1
        sizes[band[1]] = sum(_density(e, sizes) * _overlap(e, lo, hi) for e in part)
        out["merge_writes"] += write_requests(sizes[band[1]], file_segments.BAND_WRITE_BLOCK)
  runs = file_segments.grouped(entries, levels)
  touches = _segment_runs(runs, plan)
  for (lo, hi), mine in zip(plan, touches):
    chunk = record_runs.chunk_bytes(len(mine), budget)
    parts = [_density(e, sizes) * _overlap(e, lo, hi) for e in mine]
    out["segment_reads"] += sum(
        read_requests(b, chunk, _overlap(e, lo, hi) == int(e[3]) - int(e[2]) + 1,
                      int(e[4]) > 0)
        for e, b in zip(mine, parts))
    segment = sum(parts)
    starts = 8 * segment / RECORD_BYTES
    out["segment_writes"] += (write_requests(segment) + write_requests(starts)
                              + 1 + math.ceil(starts / file_segments.INDEX_CHUNK_BYTES)
                              + write_requests(starts) + 2 + 3)
  out["total"] = sum(out[k] for k in ("units", "merge_reads", "merge_writes",
                                      "segment_reads", "segment_writes"))
  out["per_mb"] = out["total"] / size_mb
  return out


def _parse(argv: Sequence[str]):
  from textrecords.runs import script_args  # pylint: disable=import-outside-toplevel
  p = script_args.ScriptParser(description=__doc__.split("\n")[0])
  p.add_argument("--sizes_mb", default="100,400,%d" % ONE_TB_MB,
                 help="Input sizes in MB (2**20 bytes), comma separated.")
  p.add_argument("--fan_in", type=int, default=file_segments.GROUP_FAN_IN,
                 help="Runs a group merge reads (and bands it writes) at most.")
  p.add_argument("--budget_mb", type=float, default=file_segments.GROUP_MERGE_BUDGET / MB,
                 help="Record bytes a group merge reads ahead over its runs, in MB.")
  return p.parse_args(argv)


def main(argv: Sequence[str] = ()) -> int:
  args = _parse(argv)
  try:
    sizes = [float(s) for s in args.sizes_mb.split(",") if s.strip()]
  except ValueError:
    print(f"--sizes_mb: not a list of numbers: {args.sizes_mb!r}", file=sys.stderr)
    return 2
  if not sizes or min(sizes) <= 0 or args.fan_in < 2 or args.budget_mb <= 0:
    print("--sizes_mb and --budget_mb must be positive, --fan_in at least 2", file=sys.stderr)
    return 2
  budget = int(args.budget_mb * MB)
  print(f"fan_in {args.fan_in}, group merge budget {budget / MB:g} MiB, "
        f"segments of {file_segments.SEGMENT_BYTES >> 20} MiB (an extrapolation)")
  for size in sizes:
    r = estimate(size, args.fan_in, budget)
    print(f"{size:>9g} MB: {r['total']:>12,} requests ({r['per_mb']:.1f} a MB); "
          f"units {r['units']:,}, merges {r['merge_reads']:,} reads + "
          f"{r['merge_writes']:,} writes ({r['levels']} levels, "
          f"{r['merge_chunk'] >> 10} KiB reads, largest merge "
          f"{r['merge_bytes_max'] / MB:,.0f} MiB), segments ({r['segments']:,}) "
          f"{r['segment_reads']:,} reads + {r['segment_writes']:,} writes")
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
