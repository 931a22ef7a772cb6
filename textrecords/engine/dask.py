"""The Dask engine: a declared generator (`engine.protocol`) on dask.distributed.

`--engine=dask` runs the same steps as the other engines on a Dask cluster:
the scheduler named by `--dask_scheduler=HOST:PORT`, or else a local cluster
of `--num_workers` processes. dask.distributed is used directly (not Beam's
DaskRunner).

  1. Passes: each unit mapped in a task, `TREE_FAN_IN` units a group, each
     group's partials merged in a task and folded into a running merge as
     it comes, a few groups mapped ahead (`MAP_GROUPS_IN_FLIGHT`), so
     workers never hold every unit's partial; the small value goes to later
     tasks as an argument. A sharded pass's groups are split by token
     shard and staged (one object a group under the run's parts folder),
     then one task a shard merges that shard's pieces and selects
     (`engine.sharded_pass`); the selected parts are merged where the
     value is finished. A partitioned pass: per partition a tree and
     a finishing task, whose value (a future) goes only to its units' tasks,
     a partition at a time (`PARTITIONS_IN_FLIGHT`, `_partitioned_runs`).
  A map's `protocol.Carry` state is staged as one object under the run's
  parts folder and read back by its unit's examples
  (`generator_steps.map_pass_staged` / `staged_state`).
  2. Examples: each unit's records, framed and sorted by key, written as one
     run object per output file it touches under the run's parts folder
     (`DirectDataset.parts_dir`): a few large objects per unit, never one
     per record.
  3. Files: one task per record file merges its runs in key order, passes
     them through the generator's `finish_file` and streams the file in
     place (`DirectDataset.open`); a file over `segment_bytes` of records
     has a task per segment (a key range, `engine.file_segments`) and a
     task joining them on the store's side; a generator that deals
     (`deals_records`) first has a task per group make its lanes
     (`engine.record_files`), then a task per file writes its lanes of
     every group in order. A last task writes the small files and each
     dataset's metadata (`generator_steps.finalize_direct`).

Outputs are URLs or paths on a mount every worker has, as with Beam. A
failed task's `UserError` is raised here, the first unit's in unit order,
so bad input gives the local engine's one-line error.

This module imports dask.distributed: import it only after
`textrecords.engine.require_dask()` (EngineOptions.validate does that).
"""

import contextlib
import ctypes
import logging
import operator
import pickle
from typing import Any, Dict, Iterator, List, Sequence

import dask
import distributed

from textrecords.engine import file_segments
from textrecords.engine import generator_steps
from textrecords.engine import protocol
from textrecords.engine import record_files
from textrecords.engine import sharded_pass
from textrecords.files import storage

TREE_FAN_IN = 8  # partials merged per task
# glibc's top pad of a local cluster's workers (MALLOC_TOP_PAD_, added to
# dask's own MALLOC_TRIM_THRESHOLD_): without it every multi-MB buffer of a
# unit's records (kernels' arrays, run objects, socket reads) is trimmed on
# free and faulted in again on the next allocation: w2v at 25 MB took 0.9M
# page faults and 3.4 s of system CPU on 2 workers (the local engine 44k),
# 70k and 1.2 s with the pad.
WORKER_TOP_PAD = 64 << 20


@contextlib.contextmanager
def client_for(scheduler: str, num_workers: int) -> Iterator["distributed.Client"]:
  """A client of the scheduler at `scheduler` (HOST:PORT), or of a local
  cluster of `num_workers` single-threaded worker processes."""
  logging.getLogger("distributed").setLevel(logging.WARNING)  # its INFO lines are noise
  if scheduler:
    address = scheduler if "://" in scheduler else f"tcp://{scheduler}"
    with distributed.Client(address, timeout="30s") as client:
      yield client
    return
  with dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TOP_PAD_": WORKER_TOP_PAD}):
    cluster = distributed.LocalCluster(n_workers=max(1, num_workers), threads_per_worker=1,
                                       processes=True, dashboard_address=None)
  with cluster, distributed.Client(cluster) as client:
    yield client


def _raise_failed(futures: Sequence) -> None:
  """Waits for the futures; the first failed one's error (in list order)
  raised as itself."""
  distributed.wait(futures)
  for f in futures:
    if f.status == "error":
      raise f.exception()


def _results(client, futures: Sequence) -> List[Any]:
  """The futures' results in order (`_raise_failed` first)."""
  _raise_failed(futures)
  return client.gather(list(futures))


RESULTS_AT_ONCE = 16  # futures gathered (and released) together by `_released_results`


def _released_results(client, futures: List) -> List[Any]:
  """`_results`, gathered `RESULTS_AT_ONCE` at a time in order, each
  future dropped from `futures` once its result is here, so workers forget
  finished tasks while later ones run (the first failed one's error, in
  list order, raised as itself)."""
  out: List[Any] = []
  for i in range(0, len(futures), RESULTS_AT_ONCE):
    out.extend(_results(client, futures[i:i + RESULTS_AT_ONCE]))
    futures[i:i + RESULTS_AT_ONCE] = [None] * len(futures[i:i + RESULTS_AT_ONCE])
  return out


def _map_unit(unit, gen, name: str, values: Dict[str, Any], parts_dir: str = ""):
  """A unit's partial; with `parts_dir`, its `Carry` state staged there for
  its examples (`generator_steps.map_pass_staged`)."""
  if parts_dir:
    return generator_steps.map_pass_staged(gen, name, unit, values, parts_dir)
  return generator_steps.map_pass(gen, name, unit, values)


def _merge(gen, name: str, *partials):
  return generator_steps.merge_pass(gen, name, partials)


def _merge_split(gen, name: str, *partials):
  return sharded_pass.merge_split(generator_steps.pass_named(gen, name), partials)


def _select(gen, name: str, merged):
  return sharded_pass.select_pass(generator_steps.pass_named(gen, name), merged)


def _merge_tree(client, gen, name: str, futures: List):
  """Partials (futures) merged in a tree of tasks: one future, or None."""
  while len(futures) > 1:
    futures = [client.submit(_merge, gen, name, *futures[i:i + TREE_FAN_IN], pure=False)
               for i in range(0, len(futures), TREE_FAN_IN)]
  return futures[0] if futures else None


def _scattered(client, values: Dict[str, Any]):
  """The values as one future, sent to the workers once: `client.map` would
  make a keyword argument over 100 kB a data task named after it, which
  distributed 2026.11 fails to send (AssertionError: TaskState 'values').
  Under a key of its own (`hash=False`): equal values scattered again would
  share the key, and the release of the earlier future could drop it while
  the later one's tasks wait for it ("lost dependencies")."""
  shared, = client.scatter([values], hash=False)
  return shared


class _Fold:
  """Partials (futures) merged as they come, each into the running merge by
  one task: the cluster holds that merge and the partials not yet added,
  whatever the corpus. (A tree fed this way holds up to `TREE_FAN_IN` - 1
  futures a level: for token counts split into 32 shards, most of the
  corpus' partials at 100 MB.)"""

  def __init__(self, client, gen, name: str):
    self.client, self.gen, self.name = client, gen, name
    self.merged = None  # a future, or None before the first partial

  def add(self, future) -> None:
    """Merges one more partial (a future) into the running merge."""
    self.merged = future if self.merged is None else self.client.submit(
        _merge, self.gen, self.name, self.merged, future, pure=False)


MAP_GROUPS_IN_FLIGHT = 3  # groups of TREE_FAN_IN units mapped before the oldest's merge is
# waited for


def _shards_path(parts_dir: str, name: str, group: int) -> str:
  """Where a sharded pass's group of units keeps its pieces (one object)."""
  return storage.join(parts_dir, "shards-%s-g%06d" % (name, group))


def _stage_split(gen, name: str, path: str, *partials):
  """A group's partials merged and split by token shard (`sharded_pass.
  merge_split`), the pieces pickled one after another into one object at
  `path` (named by group: a retry writes the same); returns (path,
  [(shard, start, end)]) of the pieces that are not None."""
  pieces = sharded_pass.merge_split(generator_steps.pass_named(gen, name), partials)
  blobs, index, at = [], [], 0
  for s, piece in enumerate(pieces):
    if piece is not None:
      blobs.append(pickle.dumps(piece, protocol=pickle.HIGHEST_PROTOCOL))
      index.append((s, at, at + len(blobs[-1])))
      at += len(blobs[-1])
  del pieces
  storage.write_staged(path, b"".join(blobs))
  return path, index


def _select_staged(gen, name: str, pieces: Sequence[tuple]):
  """One shard's staged pieces ((path, start, end), one ranged read each)
  merged one at a time into a running merge, then selected: the task holds
  that shard's merge and one piece, not every shard's."""
  p = generator_steps.pass_named(gen, name)
  merged = None
  for path, start, end in pieces:
    piece = pickle.loads(generator_steps.range_reader(path)(start, end))
    merged = piece if merged is None else protocol.merge_all(p, [merged, piece])
  return sharded_pass.select_pass(p, merged)


def _shard_pieces(staged: Sequence[tuple], shards: int) -> List[List[tuple]]:
  """For each shard, the (path, start, end) of its pieces in group order."""
  out: List[List[tuple]] = [[] for _ in range(shards)]
  for path, index in staged:
    for s, start, end in index:
      out[s].append((path, start, end))
  return out


def _merged_pass(client, gen, name: str, units, values: Dict[str, Any], parts_dir: str = ""):
  """One pass's partials merged (a future, or None): units mapped
  `TREE_FAN_IN` at a time, each group merged into a `_Fold`, at most
  `MAP_GROUPS_IN_FLIGHT` groups before the oldest's merge is waited for,
  so workers hold a few groups' partials, not every unit's. A sharded
  pass's groups are merged and split by token shard; with `parts_dir` each
  group's pieces are staged there (one object a group) and, once every
  group is, one task a shard merges that shard's pieces and selects
  (`_select_staged`): a worker holds one shard's counts at a time, not the
  running merges of half the shards; without it, a `_Fold` per shard.
  Returns the futures whose merge is the pass's merged partial: the one
  running merge, or a sharded pass's selected parts (merged by
  `_pass_value` where the value is finished, so no worker holds the
  vocabulary-sized merge as well). A failed map's error is raised in unit
  order."""
  p = generator_steps.pass_named(gen, name)
  sharded = sharded_pass.is_sharded(p)
  staging = sharded and bool(parts_dir)
  folds = [_Fold(client, gen, name) for _ in range(p.shards if sharded and not staging else 1)]
  shared = _scattered(client, values)
  flight: List[List[Any]] = []
  staged: List[Any] = []
  for i in range(0, len(units), TREE_FAN_IN):
    maps = client.map(_map_unit, units[i:i + TREE_FAN_IN], gen=gen, name=name, values=shared,
                      parts_dir=parts_dir, pure=False)
    if staging:
      group = client.submit(_stage_split, gen, name,
                            _shards_path(parts_dir, name, i // TREE_FAN_IN), *maps, pure=False)
      staged.append(group)
    elif sharded:
      group = client.submit(_merge_split, gen, name, *maps, pure=False)
      for s, fold in enumerate(folds):
        fold.add(client.submit(operator.getitem, group, s, pure=False))
    else:
      group = client.submit(_merge, gen, name, *maps, pure=False)
      folds[0].add(group)
    flight.append(maps + [group])
    if len(flight) >= MAP_GROUPS_IN_FLIGHT:
      _raise_failed(flight.pop(0))
  for futures in flight:
    _raise_failed(futures)
  if not sharded:
    return [] if folds[0].merged is None else [folds[0].merged]
  if staging:
    selected = [client.submit(_select_staged, gen, name, pieces, pure=False)
                for pieces in _shard_pieces(_results(client, staged), p.shards) if pieces]
  else:
    selected = [client.submit(_select, gen, name, f.merged, pure=False) for f in folds]
  return selected


def _pass_value(client, gen, name: str, units, values: Dict[str, Any], parts_dir: str = ""):
  """One pass (`_merged_pass`, carried states staged in `parts_dir`), its
  parts merged here as they come (`RESULTS_AT_ONCE` gathered at a time)
  and its value finished here."""
  futures = _merged_pass(client, gen, name, units, values, parts_dir)
  merged = None
  for i in range(0, len(futures), RESULTS_AT_ONCE):
    merged = generator_steps.merge_pass(
        gen, name, [merged] + _results(client, futures[i:i + RESULTS_AT_ONCE]))
    futures[i:i + RESULTS_AT_ONCE] = [None] * len(futures[i:i + RESULTS_AT_ONCE])
  return generator_steps.finish_pass(gen, name, merged)


def _finish(gen, name: str, merged):
  """A partition's value, finished in a worker once its free heap pages
  are given back (`_trim_memory`: the finish is a worker's largest step)."""
  _trim_memory()
  return generator_steps.finish_pass(gen, name, merged)


def _trim_memory() -> int:
  """glibc's `malloc_trim(0)` in this process: the free pages inside the
  heap given back (1 if any were), as dask's docs advise for workers whose
  memory is not returned; 0 where there is no glibc."""
  try:
    return ctypes.CDLL("libc.so.6").malloc_trim(0)
  except (OSError, AttributeError):
    return 0


PARTITIONS_IN_FLIGHT = 1  # a partitioned pass's partitions submitted at once: with 2, a
# worker finishing partition k + 1 still held partition k's value (~50 MB at 32 MiB)


def _partitioned_runs(client, gen, name: str, units, values: Dict[str, Any],
                      parts_dir: str) -> List[tuple]:
  """A partitioned pass (the last) and the examples: per partition, its
  units mapped, merged in a tree and finished in tasks, its value (a
  future) sent only to its units' tasks; `PARTITIONS_IN_FLIGHT` partitions
  at a time, so the cluster holds that many values, not the corpus. The
  generator is scattered once (bert's is ~120 kB pickled, which every task
  spec carried: the launcher's scheduler held and sent them all), and
  before each partition but the first every worker gives its free heap
  pages back (`_trim_memory`). bert at 400 MB on 2 local workers: the
  per-worker peak 436 -> 378 MB (309 at 25 MB), the launcher's 800 -> 190
  MB. The creep a partition at a time was bert's tokenizer word cache
  (a worker's for every unit: 25.6 MB of words at 400 MB), now bounded:
  330 MB at 400 MB, 295 at 25 (1.12x; b22a2ee); what is left follows the
  bench corpus, whose later copies give ~7% more word pieces a byte.
  Returns `_unit_runs` of every unit, in unit order."""
  by_partition: Dict[int, List[Any]] = {}
  for unit in units:
    by_partition.setdefault(unit.partition, []).append(unit)
  gen = _scattered(client, gen)  # each task's spec names it, not a pickled copy (~120 kB)
  done, flight = [], []
  for partition, part_units in sorted(by_partition.items()):
    if partition:  # the pages freed with the earlier partitions' values given back
      client.run(_trim_memory)
    parts = client.map(_map_unit, part_units, gen=gen, name=name, values=values, pure=False)
    value = client.submit(_finish, gen, name, _merge_tree(client, gen, name, parts), pure=False)
    unit_values = dict(values, **{name: {partition: value}})
    flight.append([client.submit(_unit_runs, u, gen, unit_values, parts_dir, pure=False)
                   for u in part_units])
    del parts, value, unit_values  # (the futures held only by the tasks in flight)
    if len(flight) >= PARTITIONS_IN_FLIGHT:
      done.extend(_released_results(client, flight.pop(0)))
  for futures in flight:
    done.extend(_released_results(client, futures))
  return done


def _unit_runs(unit, gen, values: Dict[str, Any], parts_dir: str):
  """A unit's records as run objects per output file; returns (totals,
  [(file, path, first key, last key)])."""
  by_file, totals = generator_steps.unit_records(
      gen, unit, values, generator_steps.staged_state(gen, parts_dir, unit))
  return totals, generator_steps.keyed_runs(parts_dir, unit.index, by_file)


def _write_file(gen, values: Dict[str, Any], dataset, file_index: int,
                target: record_files.Target, runs: Sequence[tuple]):
  """Record file `file_index` from its run objects, merged in key order and
  through the generator's `finish_file`; (its dataset, its info), or None
  (kept by a resume)."""
  if dataset.is_finished(target.path):
    return None
  return target.dataset, generator_steps.write_file(
      dataset.open(target.path, target.compression),
      generator_steps.file_runs(gen, file_index, values, generator_steps.merged_run(runs)))


def _deal_group(gen, values: Dict[str, Any], group: int, runs: Sequence[tuple],
                n_files: int, parts_dir: str):
  """A group's run objects (`deals_records`) merged in key order, through
  `finish_file`, split into lanes staged as objects; returns (group, count,
  {lane: path})."""
  count, lanes = record_files.lanes(
      generator_steps.file_runs(gen, group, values, generator_steps.merged_run(runs)), n_files)
  return group, count, record_files.stage_lanes(parts_dir, group, lanes)


def _write_dealt(dataset, target: record_files.Target, lane_paths: Sequence[str]):
  """A record file of dealt records from its lanes of every group in order."""
  if dataset.is_finished(target.path):
    return None
  return target.dataset, generator_steps.write_file(
      dataset.open(target.path, target.compression), record_files.read_lanes(lane_paths))


def _merge_group(dataset, target: record_files.Target, group, *after):
  """One group merge of a segmented file's runs (`file_segments.merge_group`;
  `after`: the merges of the groups it reads), or None (kept by a resume)."""
  if dataset.is_finished(target.path):
    return None
  return file_segments.merge_group(group)


def _write_segment(gen, values: Dict[str, Any], dataset, file_index: int,
                   target: record_files.Target, bounds, runs: Sequence[tuple], path: str,
                   *after):
  """One segment of a record file (`file_segments`; `after`: the group
  merges whose runs it reads), or None (kept by a resume)."""
  if dataset.is_finished(target.path):
    return None
  return file_segments.write_file_segment(gen, values, file_index, bounds, runs, path)


def _start_placement(dataset, target: record_files.Target, *segments):
  """A join's first step: one placement per segment (on a local path the
  temp files made; `file_segments.start_direct`), or None (kept by a resume)."""
  if dataset.is_finished(target.path) or any(s is None for s in segments):
    return None
  return file_segments.start_direct(dataset, target.path, segments)


def _place(placements, j: int):
  """Segment j placed: its records copied into the temp file at their
  offset (a local path) and its part of the offset index written
  (`file_segments.place`)."""
  return None if placements is None else file_segments.place(placements[j])


def _finish_placement(dataset, target: record_files.Target, *placed):
  """A join's last step (`file_segments.finish_direct`): (its
  dataset, the file's info), or None (kept by a resume)."""
  if any(p is None for p in placed):
    return None
  return target.dataset, file_segments.finish_direct(dataset, target.path, placed)


def _file_future(client, gen, values, dataset, file_index: int, target: record_files.Target,
                 runs: Sequence[tuple], plan: Sequence[tuple]):
  """The future of record file `file_index`: one task, or group merges of
  its runs where segments would read every run (`file_segments.group_levels`),
  one task per segment of its plan and their join: a small task starting it, a task
  per segment placing it (at its offset on a local path, a mount every
  worker has; a URL joins the records on the store's side) with its part
  of the offset index, and a small task finishing the file
  (`file_segments.place`)."""
  if len(plan) == 1:
    return client.submit(_write_file, gen, values, dataset, file_index, target, runs,
                         pure=False)
  levels = file_segments.group_levels(runs, plan)
  merges: Dict[str, Any] = {}  # a band run's path -> the future of the merge writing it
  for level in levels:
    for group in level:
      merged = client.submit(
          _merge_group, dataset, target, group,
          *{merges[e[1]].key: merges[e[1]] for e in group[1] if e[1] in merges}.values(),
          pure=False)
      for out in group[0]:
        merges[out[1]] = merged
  runs = file_segments.grouped(runs, levels)
  segments = []
  for j, bounds in enumerate(plan):
    mine = file_segments.touching(runs, bounds)
    segments.append(client.submit(
        _write_segment, gen, values, dataset, file_index, target, bounds, mine,
        file_segments.segment_path(dataset.parts_dir(), file_index, j),
        *[merges[e[1]] for e in mine if e[1] in merges], pure=False))
  started = client.submit(_start_placement, dataset, target, *segments, pure=False)
  placed = [client.submit(_place, started, j, pure=False) for j in range(len(plan))]
  return client.submit(_finish_placement, dataset, target, *placed, pure=False)


def _write_files(client, gen, values, datasets, runs: Dict[int, List[tuple]],
                 segment_bytes: int = file_segments.SEGMENT_BYTES) -> List:
  """One task per record file, or per segment of a large one and a task
  joining them (after a task per group, for a generator that deals: a
  file each); returns the futures of (dataset, info) or None."""
  files = record_files.targets(gen)
  if not gen.deals_records:
    plans = _results(client, [client.submit(file_segments.file_plan, gen, values, f,
                                            runs.get(f, []), t.compression, segment_bytes,
                                            pure=False) for f, t in enumerate(files)])
    return [_file_future(client, gen, values, datasets[t.dataset], f, t, runs.get(f, []),
                         plans[f]) for f, t in enumerate(files)]
  parts_dir = datasets[0].parts_dir()
  dealt = _results(client, [client.submit(_deal_group, gen, values, g, runs[g], len(files),
                                          parts_dir, pure=False) for g in sorted(runs)])
  return [client.submit(_write_dealt, datasets[t.dataset], t,
                        record_files.file_lanes(dealt, f, len(files)), pure=False)
          for f, t in enumerate(files)]


def _finalize(gen, datasets, values, totals, infos):
  generator_steps.finalize_direct(gen, datasets, values, totals, [i for i in infos if i])
  return True


def run_generator(gen, datasets: Sequence, scheduler: str, num_workers: int,
                  segment_bytes: int = file_segments.SEGMENT_BYTES) -> None:
  """Runs a declared generator on a Dask cluster; workers write `datasets`
  (a `DirectDataset` per dataset of `gen.datasets()`) in place, each
  dataset's metadata last; a record file over `segment_bytes` in segments."""
  units = gen.units()
  with client_for(scheduler, num_workers) as client:
    values: Dict[str, Any] = {}
    done = None
    for p in gen.passes:
      if p.partitioned:  # (the last pass)
        done = _partitioned_runs(client, gen, p.name, units, values, datasets[0].parts_dir())
        break
      values = dict(values, **{p.name: _pass_value(client, gen, p.name, units, values,
                                                   datasets[0].parts_dir())})
    shared = _scattered(client, values)  # sent once, not with each task
    if done is None:
      done = _released_results(client, client.map(_unit_runs, units, gen=gen, values=shared,
                                                  parts_dir=datasets[0].parts_dir(),
                                                  pure=False))
    totals = generator_steps.merge_totals(gen, [t for t, _ in done])
    runs: Dict[int, List[tuple]] = {}
    for _, unit_runs in done:
      for entry in unit_runs:
        runs.setdefault(entry[0], []).append(entry)
    infos = _write_files(client, gen, shared, datasets, runs, segment_bytes)
    _results(client, infos)
    # the scattered values: a worker that holds them (every worker that ran
    # examples) does not unpickle a second copy (w2v at 400 MB: ~12 MB)
    _results(client, [client.submit(_finalize, gen, datasets, shared, totals, infos,
                                    pure=False)])
