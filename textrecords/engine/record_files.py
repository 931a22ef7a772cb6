"""A run's record files: their datasets, and records dealt over them in turn.

A generator writes one dataset or several (`protocol.Generator.datasets`);
its record files are numbered over every dataset in order (the file index
of `examples` and `finish_file`), and an engine opens a file through its
own dataset's writer.

A generator that deals (`protocol.Generator.deals_records`) makes records
in *groups* instead of files: the groups in index order, each sorted by key
and passed through `finish_file`, make one ordered stream, whose r-th
record goes to record file r % (number of record files). Engines deal a
group at a time, without the whole stream in one place:

  * `lanes`: a group's records split by their place in the group (record
    j to lane j % n), with the group's count;
  * `first_ranks`: each group's first record's rank, from the groups' counts;
  * `lane_of`: the lane of a group that file f takes (the group's first
    rank decides it), `file_of` its inverse, `file_lanes` a file's lanes of
    every group in order;
  * `stage_lanes`, `read_lanes`: lanes as objects under a run's parts folder.

`targets` and `small_file_dataset` say which dataset writes each file.
The local engine deals the groups as they come, in order, and Beam and
Dask make each group's lanes in a worker and hand lane `lane_of(...)` of
every group, in group order, to the writer of file f.
"""

from typing import Any, Dict, Iterable, List, NamedTuple, Sequence, Tuple

import numpy as np

from textrecords.engine import protocol
from textrecords.engine import record_runs
from textrecords.files import storage


class Target(NamedTuple):
  """One record file: its dataset's index (`Generator.datasets`), its path
  and compression."""
  dataset: int
  path: str
  compression: str


def targets(gen: protocol.Generator) -> List[Target]:
  """Every record file of the run, by record file index."""
  return [Target(d, path, out.compression)
          for d, (_, out) in enumerate(gen.datasets()) for path in out.records]


def small_file_dataset(gen: protocol.Generator, path: str) -> int:
  """The dataset a small file (`Generator.small_files`) belongs to: the one
  whose `Outputs.small` lists it, else the first."""
  return next((d for d, (_, out) in enumerate(gen.datasets()) if path in out.small), 0)


def lanes(runs: Iterable[record_runs.Run], n_files: int) -> Tuple[int, List[record_runs.Run]]:
  """(how many records, [lane 0, ..., lane n_files - 1]) of one group's
  records in order: record j of the group goes to lane j % n_files.

  >>> count, out = lanes([record_runs.from_keyed([(1, b"a"), (2, b"b"), (3, b"c")])], 2)
  >>> count, [[r for _, r in lane.records()] for lane in out]
  (3, [[b'a', b'c'], [b'b']])
  """
  parts: List[List[record_runs.Run]] = [[] for _ in range(n_files)]
  count = 0
  for run in runs:
    n = len(run.keys)
    if not n:
      continue
    ends = np.append(run.starts[1:], len(run.data))
    for lane in range(n_files):
      pick = np.arange((lane - count) % n_files, n, n_files)
      if len(pick):
        parts[lane].append(_subset(run, pick, ends))
    count += n
  return count, [record_runs.concatenated(p) for p in parts]


def _subset(run: record_runs.Run, pick: np.ndarray, ends: np.ndarray) -> record_runs.Run:
  """The records of `run` at indexes `pick` (in order) as a run."""
  starts, stops = run.starts[pick].tolist(), ends[pick].tolist()
  sizes = ends[pick] - run.starts[pick]
  data = run.data
  return record_runs.Run(run.keys[pick], np.cumsum(sizes) - sizes,
                         b"".join(data[a:b] for a, b in zip(starts, stops)))


def first_ranks(counts: Dict[int, int]) -> Dict[int, int]:
  """{group: the rank of its first record in the stream} from {group: count}.

  >>> first_ranks({4: 3, 0: 2, 9: 1})
  {0: 0, 4: 2, 9: 5}
  """
  out, at = {}, 0
  for g in sorted(counts):
    out[g] = at
    at += counts[g]
  return out


def lane_of(first_rank: int, file_index: int, n_files: int) -> int:
  """The lane (`lanes`) of a group starting at `first_rank` whose records
  go to record file `file_index`.

  >>> [lane_of(5, f, 3) for f in range(3)]
  [1, 2, 0]
  """
  return (file_index - first_rank) % n_files


def file_of(first_rank: int, lane: int, n_files: int) -> int:
  """The record file that lane `lane` of a group starting at `first_rank`
  goes to (`lane_of`'s inverse).

  >>> [file_of(5, lane_of(5, f, 3), 3) for f in range(3)]
  [0, 1, 2]
  """
  return (first_rank + lane) % n_files


def file_lanes(dealt: Sequence[Tuple[int, int, Dict[int, Any]]], file_index: int,
               n_files: int) -> List[Any]:
  """What record file `file_index` takes, in group order, from the groups'
  (group, count, {lane: its records}) (lanes without records left out).

  >>> dealt = [(2, 1, {0: "c"}), (0, 2, {0: "a", 1: "b"})]
  >>> file_lanes(dealt, 0, 2), file_lanes(dealt, 1, 2)
  (['a', 'c'], ['b'])
  """
  firsts = first_ranks({g: count for g, count, _ in dealt})
  out = []
  for g, _, by_lane in sorted(dealt, key=lambda x: x[0]):
    lane = lane_of(firsts[g], file_index, n_files)
    if lane in by_lane:
      out.append(by_lane[lane])
  return out


def stage_lanes(parts_dir: str, group: int,
                group_lanes: Sequence[record_runs.Run]) -> Dict[int, str]:
  """Writes a group's non-empty lanes as objects under `parts_dir`;
  returns {lane: path}."""
  out = {}
  for lane, run in enumerate(group_lanes):
    if len(run.keys):
      out[lane] = storage.join(parts_dir, "lane-g%08d-l%05d" % (group, lane))
      storage.write_file(out[lane], record_runs.to_bytes(run))
  return out


def read_lanes(paths: Iterable[str]) -> Iterable[record_runs.Run]:
  """The lanes `stage_lanes` wrote, one at a time, in the order given."""
  for path in paths:
    yield record_runs.from_bytes(storage.read_bytes(path))
