"""The local engine's record files: framed parts appended to output files.

Every generator (and the Beam engine's file step) writes record files the
same way: workers frame records into *parts* (a run of framed records for
one output file, in memory or in a scratch file) and a `PartWriter` appends
the parts of each file in order through the dataset's file writer (temp
name, gzip framing, sha256, the hidden finished name). A part carries its
records' start offsets, so each file's offset index comes from the offsets
written: no finished file is read back.

  * `part`, `spill_part`: a part from framed records (bytes / scratch file).
  * `split_round_robin`: records spread over files in turn (bert's several
    --output_file datasets).
  * `PartWriter`: appends parts to the files it opens through `open_file`
    (a location: `DatasetWriter.open` of a path, or
    `dataset_writer.open_finished_file` in a Beam worker).
  * `append_parts`: a `PartWriter` per output file in writer processes
    (one per file, up to the worker count), fed part lists as workers make
    them; the files are recorded with their `DatasetWriter` here.
  * `run_generator`: any declared generator (`engine.protocol`) on this
    machine: passes over the units in worker processes (the states they
    carry, `protocol.Carry`, kept for the examples within a budget), each
    unit's records sorted into one run file per output file
    (`record_runs`), each file's runs merged in key order into parts for a
    `PartWriter` (a generator's groups dealt over the files, with
    `deals_records`: `record_files`), each dataset's metadata last. A
    generator whose keys follow its
    units (`Generator.keys_follow_units`, no `finish_file`) has each unit's
    records appended to their files as the units come, in order, while the
    workers go on.
"""

import os
import pickle
import struct
import sys
from typing import Callable, Dict, Iterable, List, NamedTuple, Optional, Sequence, Union

import numpy as np

from textrecords.engine import file_segments
from textrecords.engine import generator_steps
from textrecords.engine import parallel
from textrecords.engine import protocol
from textrecords.engine import record_files
from textrecords.engine import record_runs
from textrecords.datasets import index
from textrecords.files import atomic_file
from textrecords.files import hashing
from textrecords.files import storage

_LENGTH = struct.Struct("<Q")


class Part(NamedTuple):
  """Framed records bound for output file `file`.

  Attributes:
    file: the output file's index.
    data: the framed records, or the path of a scratch file holding them
      (removed once appended).
    records: how many records.
    starts: each record's start offset within `data` (int64), or None to
      take them from the framing.
  """
  file: int
  data: Union[bytes, str]
  records: int
  starts: Optional[np.ndarray] = None


def framed_starts(framed: Sequence[bytes]) -> np.ndarray:
  """Start offsets of framed records laid end to end.

  >>> framed_starts([b"x" * 18, b"y" * 20]).tolist()
  [0, 18]
  """
  sizes = np.fromiter(map(len, framed), np.int64, len(framed))
  return np.cumsum(sizes) - sizes


def starts_of(data) -> np.ndarray:
  """Start offsets of the framed records in `data` (their length headers).

  >>> from textrecords.files import tfrecord
  >>> starts_of(tfrecord.frame(b"ab") + tfrecord.frame(b"cde")).tolist()
  [0, 18]
  """
  out, pos, size = [], 0, len(data)
  while pos < size:
    out.append(pos)
    pos += 16 + _LENGTH.unpack_from(data, pos)[0]
  return np.asarray(out, np.int64)


def part(file_index: int, framed: Sequence[bytes]) -> Part:
  """An in-memory part of framed records."""
  return Part(file_index, b"".join(framed), len(framed), framed_starts(framed))


def spill_part(folder: str, name: str, file_index: int, framed: Sequence[bytes]) -> Part:
  """A part written to scratch file `folder/name` (a worker's output)."""
  path = os.path.join(folder, name)
  with open(path, "wb") as f:
    f.write(b"".join(framed))
  return Part(file_index, path, len(framed), framed_starts(framed))


def spill_parts(folder: str, name: str, groups) -> List[Part]:
  """`spill_part` of each non-empty (file index, framed records) group,
  named `name-FFFFF`."""
  return [spill_part(folder, f"{name}-{f:05d}", f, recs) for f, recs in groups if recs]


def split_round_robin(framed: Sequence[bytes], first: int, n_files: int):
  """[(file, records)] when record `first + j` goes to file (first + j) % n_files.

  >>> split_round_robin(["a", "b", "c"], 1, 2)
  [(0, ['b']), (1, ['a', 'c'])]
  """
  return [(f, list(framed[(f - first) % n_files::n_files])) for f in range(n_files)]


class PartWriter:
  """Appends parts to output files, each file's parts in order.

  Args:
    open_file: file index -> an open file handle (`DatasetWriter.open`,
      `open_finished_file`), or None for a file not to write (finished by
      the run being resumed: its parts are dropped).
  """

  def __init__(self, open_file: Callable[[int], Optional[object]]):
    self._open_file = open_file
    self._handles: Dict[int, object] = {}
    self._skip = set()

  def _handle(self, f: int):
    h = self._handles.get(f)
    if h is None and f not in self._skip:
      h = self._open_file(f)
      if h is None:
        self._skip.add(f)
      else:
        self._handles[f] = h
    return h

  def append(self, p: Part):
    """Appends part `p` to its file (opened at its first part)."""
    h = self._handle(p.file)
    if isinstance(p.data, str):
      if h is not None:
        starts = p.starts
        if starts is None:
          with open(p.data, "rb") as src:
            starts = starts_of(src.read())
        h.append_framed_file(p.data, p.records, starts)
      os.remove(p.data)
    elif h is not None and p.data:
      h.write_framed(p.data, starts_of(p.data) if p.starts is None else p.starts, p.records)

  def finish(self, f: int, commit: bool = True) -> Optional[dict]:
    """Completes file f (an empty file if it got no part); returns its info.

    `commit=False` only completes the temp file (`FileHandle.finish`), for
    the process that owns the DatasetWriter to record; None for a skipped file.
    """
    h = self._handle(f)
    self._handles.pop(f, None)
    if h is None:
      return None
    try:
      return h.commit() if commit else h.finish()
    except BaseException:
      h.abort()
      raise

  def abort(self):
    """Removes every file still open (after an error)."""
    for h in self._handles.values():
      h.abort()
    self._handles.clear()


# ---------------------------------------------------------------- writer processes

_WRITER: Dict[str, PartWriter] = {}  # a writer process's PartWriter


def _init_writer(targets, compression: str):
  def open_file(f):
    target = targets[f]
    return None if target is None else target[0].open(target[1], compression)
  _WRITER["w"] = PartWriter(open_file)


def _write(msg):
  """Writer process: ("append", Part) or ("finish", file index) -> (file
  index, info) or None."""
  w = _WRITER["w"]
  if msg[0] == "append":
    w.append(msg[1])
    return None
  return msg[1], w.finish(msg[1], commit=False)


def _route(msg) -> int:
  return msg[1].file if msg[0] == "append" else msg[1]


def append_parts(part_lists: Iterable, targets: Sequence, compression: str,
                 num_workers: int,
                 amend: Optional[Callable[[int, dict], dict]] = None) -> None:
  """Appends parts to the outputs in writer processes; records the finished files.

  This process only passes parts along (scratch file names, start offsets):
  writer processes (one per output file, up to `num_workers`) copy the parts
  (in the kernel) and hash them while the workers make the next parts.

  Args:
    part_lists: yields ([Part], [file indexes now complete]).
    targets: per output file, (DatasetWriter, path), or None if finished.
    compression: "" or "GZIP".
    amend: (file index, the info of its written file) -> the info to
      record (`segmented_info`), or None.
  """
  def messages():
    for parts, finished in part_lists:
      for p in parts:
        yield ("append", p)
      for f in finished:
        yield ("finish", f)

  infos = {}
  try:
    for done in parallel.ordered_map(_write, messages(), max(1, min(num_workers, len(targets))),
                                     in_process=False, prefetch=256, window=1 << 20,
                                     route=_route, initializer=_init_writer,
                                     initargs=(targets, compression)):
      if done is not None:  # (by file index: datasets may share file names)
        infos[done[0]] = done[1]
  except BaseException:
    for t in targets:
      if t is not None:
        t[0].remove_temps(t[1])
    raise
  for f, t in enumerate(targets):
    if t is not None:
      writer, path = t
      writer.record_finished(path, infos[f] if amend is None else amend(f, infos[f]))


# ---------------------------------------------------------------- declared generators

_GEN: Dict[str, object] = {}  # a worker's generator, pass values and spill folder


def _init_generator(gen, values, spill_dir):
  _GEN.update(gen=gen, values=values, dir=spill_dir)


class _StateFile(NamedTuple):
  """A carried state a pass worker left pickled in the scratch folder (so
  that this process neither receives nor sends it again)."""
  path: str


def _map_unit(item):
  """Worker: a pass's map of one unit; a `protocol.Carry` state goes to a
  file in the scratch folder when there is one (workers run apart)."""
  name, unit = item
  result = generator_steps.map_pass_carry(_GEN["gen"], name, unit, _GEN["values"])
  folder = _GEN["dir"]
  if folder is not None and isinstance(result, protocol.Carry) and result.state is not None:
    path = os.path.join(folder, "state-%s-%08d" % (name, unit.index))
    with open(path, "wb") as f:
      pickle.dump(result.state, f, protocol=pickle.HIGHEST_PROTOCOL)
    result = protocol.Carry(result.partial, _StateFile(path), result.nbytes)
  return result


def _state_of(state):
  """A carried state as `_map_unit` handed it on (read back, its file removed)."""
  if not isinstance(state, _StateFile):
    return state
  with open(state.path, "rb") as f:
    out = pickle.load(f)
  os.remove(state.path)
  return out


def _unit_runs(item):
  """Worker: a unit's records (given its carried state or None), sorted, as
  one run file per output file it reaches; returns (the unit's totals,
  [(file index, run path, first key, last key)])."""
  unit, state = item
  by_file, totals = generator_steps.unit_records(_GEN["gen"], unit, _GEN["values"],
                                                 _state_of(state))
  return totals, generator_steps.keyed_runs(_GEN["dir"], unit.index, by_file)


class _Carried:
  """The units' `protocol.Carry` states kept for the examples, up to `budget`
  bytes in all (a state past it is dropped: its unit redoes the work)."""

  def __init__(self, budget: Optional[int] = None):
    self.states: Dict[int, object] = {}
    self.left = protocol.CARRY_BUDGET if budget is None else budget

  def keep(self, unit_index: int, state, nbytes: int):
    if state is not None and nbytes <= self.left:
      self.states[unit_index] = state
      self.left -= nbytes

  def pop(self, unit_index: int):
    return self.states.pop(unit_index, None)


def pass_values(gen, units, num_workers: int, carried: Optional[_Carried] = None,
                state_dir: Optional[str] = None) -> dict:
  """Every pass's value, the units mapped in worker processes, partials merged
  in unit order (a pass's `enough` stops the mapping early; a partitioned
  pass's value: {partition: value}, each merged and finished apart: this
  engine holds them all, one machine); the maps' carried states go to
  `carried` (a later pass's replaces an earlier one's), through files in
  `state_dir` if given."""
  values: dict = {}
  for p in gen.passes:
    merged: dict = {}  # partition (0 unless partitioned) -> merged partial
    results = parallel.ordered_map(_map_unit, ((p.name, u) for u in units), num_workers,
                                   initializer=_init_generator,
                                   initargs=(gen, values, state_dir), reuse_memory=True)
    for i, result in enumerate(results):  # (to the end: the pool then closes cleanly)
      unit = units[i]
      partial, state, nbytes = protocol.split_carry(result)
      if carried is not None:
        carried.pop(unit.index)
        carried.keep(unit.index, state, nbytes)
      k = unit.partition if p.partitioned else 0
      merged[k] = protocol.merge_all(p, [merged.get(k), partial])
      if p.enough is not None and merged[k] is not None and p.enough(merged[k]):
        results.close()
        break
    value = ({k: p.finish(m) for k, m in sorted(merged.items())} if p.partitioned
             else p.finish(merged.get(0)))
    values = dict(values, **{p.name: value})
  return values


def _spill_records(gen, units, values, spill_dir: str, num_workers: int,
                   carried: _Carried):
  """Every unit's records (from its carried state, if kept) as sorted runs
  per output file; returns (the merged totals, {file index: [run entries]})."""
  totals, runs = None, {}
  items = ((u, carried.pop(u.index)) for u in units)
  for partial, unit_runs in parallel.ordered_map(_unit_runs, items, num_workers,
                                                 initializer=_init_generator,
                                                 initargs=(gen, values, spill_dir)):
    totals = generator_steps.merge_totals(gen, [totals, partial])
    for entry in unit_runs:
      runs.setdefault(entry[0], []).append(entry)
  return totals, runs


def _file_writer(gen, writers) -> PartWriter:
  """A `PartWriter` of every record file of the run (`record_files.targets`),
  each opened through its dataset's writer (None: finished by the run
  being resumed)."""
  files = record_files.targets(gen)

  def open_file(f):
    w, t = writers[files[f].dataset], files[f]
    return None if w.is_finished(t.path) else w.open(t.path, t.compression)
  return PartWriter(open_file)


def _write_records(gen, writers, runs: dict, values: dict, spill_dir: str, num_workers: int,
                   segment_bytes: int):
  """Each record file from its runs merged in key order and through the
  generator's `finish_file`, a run a part (finished files of a resumed run
  are kept), a file over `segment_bytes` in segments written by the worker
  processes and joined (`_write_segmented`); a generator that deals
  (`deals_records`) has its groups dealt."""
  files = record_files.targets(gen)
  segmented = {} if gen.deals_records else _write_segmented(
      gen, writers, runs, values, spill_dir, num_workers, segment_bytes)
  out = _file_writer(gen, writers)
  try:
    if gen.deals_records:
      _deal_groups(gen, out, runs, values, len(files))
    for f, t in enumerate(files):
      if f in segmented:
        continue
      if not gen.deals_records and not writers[t.dataset].is_finished(t.path):
        for run in generator_steps.file_runs(gen, f, values,
                                             generator_steps.merged_run(runs.get(f, []))):
          out.append(Part(f, run.data, len(run.keys), run.starts))
      out.finish(f)
  finally:
    out.abort()


def _segment(item):
  """Worker: one segment of a record file (`file_segments`); its info."""
  f, bounds, entries, path = item
  return file_segments.write_file_segment(_GEN["gen"], _GEN["values"], f, bounds, entries, path)


def _write_segmented(gen, writers, runs: dict, values: dict, spill_dir: str,
                     num_workers: int, segment_bytes: int) -> set:
  """The record files whose runs hold over `segment_bytes` (as Dask and
  Beam cut them, `file_segments.file_plan`): every segment written by the
  worker processes into the scratch folder, then each file joined in the
  kernel (`storage.concatenate`) and recorded; returns their indexes."""
  files = record_files.targets(gen)
  plans = {}
  for f, t in enumerate(files):
    if not writers[t.dataset].is_finished(t.path):
      plan = file_segments.file_plan(gen, values, f, runs.get(f, []), t.compression,
                                     segment_bytes)
      if len(plan) > 1:
        plans[f] = plan
  read = _merged_groups({f: runs.get(f, []) for f in plans}, plans, num_workers)
  items = [(f, bounds, file_segments.touching(read[f], bounds),
            file_segments.segment_path(spill_dir, f, j))
           for f, plan in sorted(plans.items()) for j, bounds in enumerate(plan)]
  done = iter(parallel.ordered_map(_segment, items, num_workers, initializer=_init_generator,
                                   initargs=(gen, values, spill_dir)))
  started = {}
  for f, plan in sorted(plans.items()):
    segments = [next(done) for _ in plan]
    path = files[f].path
    started[f] = file_segments.start_placement(
        os.path.basename(path), atomic_file.temp_path_for(path), segments,
        atomic_file.temp_path_for(index.index_path(path)))
  placements = [p for f in sorted(started) for p in started[f]]
  placed = iter(parallel.ordered_map(file_segments.place, placements, num_workers))
  for f in sorted(started):
    _join_segments(writers[files[f].dataset], files[f].path,
                   [next(placed) for _ in started[f]])
  return set(plans)


def _merged_groups(runs: dict, plans: dict, num_workers: int) -> dict:
  """Each segmented file's runs merged in groups where its segments would
  read every run (`file_segments.group_levels`), a level of every file's
  merges at a time by the worker processes; returns the runs each file's
  segments read (`file_segments.grouped`)."""
  levels = {f: file_segments.group_levels(runs[f], plans[f]) for f in sorted(plans)}
  for depth in range(max((len(x) for x in levels.values()), default=0)):
    groups = [g for f in sorted(levels) if depth < len(levels[f]) for g in levels[f][depth]]
    list(parallel.ordered_map(file_segments.merge_group, groups, num_workers))
  return {f: file_segments.grouped(runs[f], levels[f]) for f in levels}


def _join_segments(writer, path: str, placed: Sequence[dict]) -> None:
  """A record file of a `DatasetWriter` whose segments and offset index
  parts the worker processes placed into their temp files
  (`file_segments.place`, as Dask's and Beam's tasks), checked
  (`file_segments.placed_segments`) and recorded."""
  done = file_segments.placed_segments(os.path.basename(path), placed)
  info = dict(done.info, _tmp=done.tmp)
  if done.index_info is not None:
    info["_index_file"] = dict(done.index_info, _tmp=done.index_tmp)
  try:
    writer.record_finished(path, info)
  except BaseException:
    storage.remove(done.tmp)
    if done.index_tmp is not None:
      storage.remove(done.index_tmp)
    raise
  file_segments.remove_segments(done.segments)


def _deal_groups(gen, out: PartWriter, runs: dict, values: dict, n_files: int):
  """The groups' records (`deals_records`), each group's merged in key order
  and through `finish_file`, dealt over the files in turn, a group at a time."""
  first = 0
  for g in sorted(runs):
    count, lanes = record_files.lanes(
        generator_steps.file_runs(gen, g, values, generator_steps.merged_run(runs[g])), n_files)
    for f in range(n_files):
      lane = lanes[record_files.lane_of(first, f, n_files)]
      if len(lane.keys):
        out.append(Part(f, lane.data, len(lane.keys), lane.starts))
    first += count


def _unit_parts(item):
  """Worker (a generator whose keys follow its units): a unit's records as
  parts per output file (one scratch file per file when workers run apart,
  else in memory); returns (the unit's totals, [(file, first key, last key,
  Part)])."""
  unit, state = item
  by_file, totals = generator_steps.unit_runs(_GEN["gen"], unit, _GEN["values"],
                                              _state_of(state))
  out = []
  for f in sorted(by_file):
    runs = by_file[f]
    if _GEN["dir"] is None:
      out.extend((f, *record_runs.bounds(r), Part(f, r.data, len(r.keys), r.starts))
                 for r in runs)
      continue
    path = os.path.join(_GEN["dir"], "part-f%05d-u%08d" % (f, unit.index))
    with open(path, "wb") as fh:
      for r in runs:
        fh.write(r.data)
    sizes = np.cumsum([0] + [len(r.data) for r in runs[:-1]])
    starts = np.concatenate([r.starts + o for r, o in zip(runs, sizes)])
    out.append((f, record_runs.bounds(runs[0])[0], record_runs.bounds(runs[-1])[1],
                Part(f, path, len(starts), starts)))
  return totals, out


def _stream_records(gen, writers, units, values, spill_dir: Optional[str], num_workers: int,
                    carried: _Carried, segment_bytes: int = file_segments.SEGMENT_BYTES):
  """For a generator whose keys follow its units (`keys_follow_units`):
  each unit's records appended to their files as the units come, in unit
  order (nothing sorted or spilled across units); returns the merged totals.
  A file whose units hold over `segment_bytes` is written whole here, and
  its segments (where Dask and Beam cut it) hashed after (`_streamed_segments`).

  Raises:
    RuntimeError: a unit's records come before records already written (the
      declaration is wrong).
  """
  out = _file_writer(gen, writers)
  totals, last, sizes = None, {}, {}
  items = ((u, carried.pop(u.index)) for u in units)
  try:
    for partial, parts in parallel.ordered_map(_unit_parts, items, num_workers,
                                               initializer=_init_generator,
                                               initargs=(gen, values, spill_dir),
                                               reuse_memory=True):
      totals = generator_steps.merge_totals(gen, [totals, partial])
      for f, first, end, p in parts:
        if f in last and first <= last[f]:
          raise RuntimeError(f"{gen.package}: keys_follow_units is declared, but a unit's "
                             f"records come before earlier ones in record file {f}")
        last[f] = end
        sizes[f] = sizes.get(f, 0) + (len(p.data) if isinstance(p.data, bytes)
                                      else os.path.getsize(p.data))
        out.append(p)
    for f, t in enumerate(record_files.targets(gen)):
      if (t.compression or gen.cut_keys(f, values) is not None
          or not file_segments.share_offsets(sizes.get(f, 0), segment_bytes)):
        out.finish(f)
        continue
      info = out.finish(f, commit=False)
      if info is not None:
        writers[t.dataset].record_finished(
            t.path, _streamed_segments(info, segment_bytes, num_workers))
  finally:
    out.abort()
  return totals


def _range_sha256(item) -> str:
  return hashing.range_sha256(*item)


def _streamed_segments(info: dict, segment_bytes: int, num_workers: int) -> dict:
  """`segmented_info` of a file written whole, of unique keys in unit
  order, cut as `file_segments.plan` cuts such runs: at the first record
  starting at or after each of `file_segments.share_offsets` (found in
  the file's offset index)."""
  offsets = _index_offsets(info)
  at = np.searchsorted(offsets, file_segments.share_offsets(info["bytes"], segment_bytes))
  cuts = sorted({int(offsets[i]) for i in at} - {0, info["bytes"]})
  return segmented_info(info, cuts, num_workers)


def _index_offsets(info: dict) -> np.ndarray:
  """The offsets (records + 1) in the offset index `FileHandle.finish`
  wrote beside the file of `info` (info["_index_file"]), mapped: what a
  search reads is read, never the whole index."""
  header = index.header_bytes(info["name"], info["bytes"], info["sha256"], info["records"])
  return np.memmap(info["_index_file"]["_tmp"], "<u8", "r", len(header), info["records"] + 1)


def segmented_info(info: dict, cuts: Sequence[int], num_workers: int) -> dict:
  """The info (`FileHandle.finish`'s) of a file written whole, made that of
  its segments, which start at byte offsets `cuts` (after the first, at 0),
  as Dask and Beam write them (`file_segments.joined_info`): their
  sha256s hashed in the worker processes; its offset index
  (info["_index_file"], `FileHandle.finish`'s) given the header to match
  and listed in the parts Dask's and Beam's placements write
  (`_index_parts`)."""
  offsets = [0, *cuts, info["bytes"]]
  ranges = [(info["_tmp"], a, b - a) for a, b in zip(offsets, offsets[1:])]
  indexed = info.get("_index_file") is not None
  counts = (np.diff(np.searchsorted(_index_offsets(info)[:-1], offsets)).tolist() if indexed
            else [0] * len(ranges))
  segs = [{"bytes": n, "sha256": sha, "records": int(c)} for (_, _, n), sha, c in
          zip(ranges, parallel.ordered_map(_range_sha256, ranges, num_workers), counts)]
  out = file_segments.joined_info(info["name"], segs)
  out.update(records=info["records"], _tmp=info["_tmp"])
  if indexed:
    out["_index_file"] = _index_parts(info["_index_file"], out, segs, num_workers)
  return out


def _index_parts(written: dict, info: dict, segs: List[dict], num_workers: int) -> dict:
  """The offset index `written` (`FileHandle.finish`'s info of it) given
  the header of the file of `info` and segments `segs` (of the same size:
  only the sha256 differs); returns its info ("_tmp": its temp file),
  listing the parts that Dask's and Beam's placements write
  (`file_segments.index_parts`), hashed in the worker processes."""
  tmp = written["_tmp"]
  header = index.header_bytes(info["name"], info["bytes"], info["sha256"], info["records"])
  storage.write_local_at(tmp, 0, [header])
  storage.check_local_size(tmp, written["bytes"])
  ranges = [(tmp, p["at"], p["bytes"]) for p in file_segments.index_parts(info, segs) if p]
  if sum(n for _, _, n in ranges) != written["bytes"]:
    raise RuntimeError(f"{tmp}: {written['bytes']} bytes, its parts "
                       f"{sum(n for _, _, n in ranges)}")
  parts = [{"bytes": n, "sha256": sha, "records": 0} for (_, _, n), sha in
           zip(ranges, parallel.ordered_map(_range_sha256, ranges, num_workers))]
  return dict(file_segments.joined_info(written["name"], parts), _tmp=tmp)


def _say_kept(gen, writers, options) -> None:
  """A resumed run's line on stderr naming the record files it keeps."""
  files = record_files.targets(gen)
  kept = sum(1 for t in files if writers[t.dataset].is_finished(t.path))
  if kept and options.resume and not options.quiet:
    print(f"{gen.package}: resume: keeping {kept} of {len(files)} finished record files",
          file=sys.stderr, flush=True)


def run_generator(gen, run, num_workers: int,
                  segment_bytes: int = file_segments.SEGMENT_BYTES) -> List[dict]:
  """Runs a declared generator inside `run` (a `GeneratorRun`); returns each
  dataset's metadata written; a record file over `segment_bytes` in
  segments, as every engine cuts it (`engine.file_segments`)."""
  writers = run.writers
  _say_kept(gen, writers, run.options)
  units = gen.units()
  carried = _Carried()
  spill_dir = os.path.join(run.scratch_dir(), "records")
  os.makedirs(spill_dir, exist_ok=True)
  try:
    values = pass_values(gen, units, num_workers, carried,
                         spill_dir if num_workers > 1 else None)
    run.mark("passes")
    if (gen.keys_follow_units and not protocol.finishes_files(gen)
        and not gen.deals_records):
      totals = _stream_records(gen, writers, units, values,
                               spill_dir if num_workers > 1 else None, num_workers, carried,
                               segment_bytes)
      runs = None
    else:
      totals, runs = _spill_records(gen, units, values, spill_dir, num_workers, carried)
  finally:
    _GEN.clear()
  values = generator_steps.global_values(gen, values)
  run.mark("examples")
  for path, data in sorted(gen.small_files(values).items()):
    w = writers[record_files.small_file_dataset(gen, path)]
    if not w.is_finished(path):
      w.write_bytes(path, data)
  if runs is not None:
    _write_records(gen, writers, runs, values, spill_dir, num_workers, segment_bytes)
  run.mark("write")
  return run.finalize([lambda infos: gen.metadata(values, totals, infos)] * len(writers))
