"""The Beam engine: a declared generator (`engine.protocol`) as an Apache Beam pipeline.

The pipeline runs the same engine-neutral steps as the local and Dask
engines (`engine.generator_steps`, `engine.record_files`), so the record
files and metadata are byte-identical to `--engine=local`:

  * `run`: pipeline options from `--beam_pipeline_options`, the run, and
    errors raised in workers turned back into the one-line `UserError`.
  * `run_generator`: any declared generator (`engine.protocol`): units ->
    Reshuffle -> passes as global combines (small side inputs; a
    partitioned pass's value staged once per partition and loaded by the
    workers of its units; the last pass's carried states staged for the
    examples) -> examples, each unit's sorted run per file
    written as an object under the run's parts folder -> (file, a run's
    reference) -> GroupByKey -> runs merged in key order a chunk at a
    time (`generator_steps.merged_run`) -> the generator's `finish_file`
    -> one writer per file -> finalize (a generator that deals its groups
    over the files: each group's lanes staged as objects, the groups'
    first ranks as a side input, a second GroupByKey of lane references
    per file: `engine.record_files`). The shuffles carry references, not
    records, as the Dask engine's tasks do.

Outputs may be URLs or local paths on a mount every worker has; nothing goes
through the launching machine's disk, so any runner works.

This module imports apache_beam: import it only after
`textrecords.engine.require_beam()` (EngineOptions.validate does that).

`runner=DirectRunner` (or no runner) runs on Beam's FnApiRunner, the
DirectRunner's batch engine, directly: Beam 2.77's DirectRunner first tries
to download and start the Prism runner, which needs the network.
`direct_num_workers` and `direct_running_mode` apply as usual.
"""

import collections
import ctypes
import pickle
import re
import threading
import traceback
import uuid
from typing import Any, Callable, Dict, Sequence

import apache_beam as beam

from textrecords.files import storage
from textrecords.engine import file_segments
from textrecords.engine import generator_steps
from textrecords.engine import parse_pipeline_options, require_beam
from textrecords.engine import protocol
from textrecords.engine import record_files
from textrecords.engine import sharded_pass
from textrecords.errors import UserError

_LOCAL_RUNNERS = ("DirectRunner", "SwitchingDirectRunner")
# Runners that talk to a job service through Beam's PortableRunner. Beam
# opens the job's state and message streams with `job_server_timeout` as
# their gRPC deadline (300 s by default), so a longer job fails with
# DEADLINE_EXCEEDED while it runs; unless the user sets it, it is a week.
_JOB_SERVICE_RUNNERS = ("PortableRunner", "FlinkRunner", "SparkRunner")
JOB_SERVER_TIMEOUT_S = 7 * 24 * 3600
_USER_ERROR = re.compile(r"UserError: ([^\n]+)")


def pipeline_options(text: str):
  """Beam PipelineOptions from the comma-separated key=value form.

  A job-service runner gets `job_server_timeout` of a week unless given
  (Beam's 300 s default is also the deadline of a running job's streams).
  """
  require_beam()
  from apache_beam.options import pipeline_options as po  # pylint: disable=import-outside-toplevel
  argv = parse_pipeline_options(text)
  if not any(a.startswith("--default_sdk_harness_log_level=") for a in argv):
    argv.append("--default_sdk_harness_log_level=WARNING")  # workers' INFO lines are noise
  opts = po.PipelineOptions(argv)
  std = opts.view_as(po.StandardOptions)
  if std.runner is None or std.runner in _LOCAL_RUNNERS:
    std.runner = "FnApiRunner"
  if std.runner in _JOB_SERVICE_RUNNERS and not any(
      a.startswith(("--job_server_timeout=", "--job-server-timeout=")) for a in argv):
    opts.view_as(po.PortableOptions).job_server_timeout = JOB_SERVER_TIMEOUT_S
  return opts


def run(options_text: str, build: Callable) -> None:
  """Builds a pipeline with `build(pipeline)`, runs it to the end.

  Raises:
    UserError: one raised inside a worker (bad input found while reading),
      with its original one-line message.
  """
  opts = pipeline_options(options_text)
  p = beam.Pipeline(options=opts)
  build(p)
  try:
    p.run().wait_until_finish()
  except Exception as e:  # pylint: disable=broad-except
    text = "".join(traceback.format_exception(e))
    m = _USER_ERROR.search(str(e)) or _USER_ERROR.search(text)
    if m:
      raise UserError(m.group(1).strip()) from None
    raise


# ---------------------------------------------------------------- declared generators

class _PassCombine(beam.CombineFn):
  """A generator pass's merge as a combiner (partials may arrive in any order)."""

  def __init__(self, gen, name: str):
    super().__init__()
    self.gen, self.name = gen, name

  def create_accumulator(self):
    return None

  def add_input(self, acc, element):
    return generator_steps.merge_pass(self.gen, self.name, [acc, element])

  def merge_accumulators(self, accumulators):
    return generator_steps.merge_pass(self.gen, self.name, list(accumulators))

  def extract_output(self, acc):
    return generator_steps.finish_pass(self.gen, self.name, acc)


class _ShardCombine(_PassCombine):
  """A sharded pass's merge of one shard, its output the shard's selection."""

  def extract_output(self, acc):
    return sharded_pass.select_pass(generator_steps.pass_named(self.gen, self.name), acc)


def _split_partial(partial, gen, name: str):
  return sharded_pass.keyed_pieces(generator_steps.pass_named(gen, name), partial)


def _trim_memory() -> int:
  """glibc's `malloc_trim(0)` in this process: the free heap pages given
  back (1 if any were; 0 where there is no glibc), so a worker's next big
  step starts from what it holds, not from an earlier step's peak."""
  try:
    return ctypes.CDLL("libc.so.6").malloc_trim(0)
  except (OSError, AttributeError):
    return 0


class _FinishCombine(_PassCombine):
  """A pass's global merge, finished once the worker's free heap pages are
  given back (`_trim_memory`)."""

  def extract_output(self, acc):
    _trim_memory()
    return super().extract_output(acc)


STAGE_UNITS = 8  # units of a bundle whose partials are merged, split and staged together


class _StageShards(beam.DoFn):
  """A sharded pass's (unit index, partial), `STAGE_UNITS` of a bundle's
  units at a time, merged and split by token shard, the pieces pickled one
  after another into one object under `parts_dir` (named by the pass and
  its units: a retry writes the same) -> (shard, (first unit, path, start,
  end)) of each piece that is not None. The shuffle carries references,
  and a worker holds a few units' partials, not every shard's counts of
  its bundle (a combiner's lifted accumulators: 33 MB more per worker for
  w2v at 400 MB)."""

  def __init__(self, gen, name: str, parts_dir: str):
    super().__init__()
    self.gen, self.name, self.parts_dir = gen, name, parts_dir
    self.held = []

  def start_bundle(self):
    self.held = []

  def process(self, item):
    self.held.append(item)
    if len(self.held) >= STAGE_UNITS:
      yield from self._staged()

  def finish_bundle(self):
    for shard_ref in self._staged():
      yield beam.transforms.window.GlobalWindows.windowed_value(shard_ref)

  def _staged(self):
    held, self.held = sorted(self.held, key=lambda x: x[0]), []
    if not held:
      return
    units = [u for u, _ in held]
    pieces = sharded_pass.merge_split(generator_steps.pass_named(self.gen, self.name),
                                      [x for _, x in held])
    del held
    path = storage.join(self.parts_dir, "shards-%s-u%s" % (
        self.name, "-".join("%08d" % u for u in (units[0], units[-1], len(units)))))
    blobs, refs, at = [], [], 0
    for shard, piece in enumerate(pieces):
      if piece is not None:
        blobs.append(pickle.dumps(piece, protocol=pickle.HIGHEST_PROTOCOL))
        refs.append((shard, (units[0], path, at, at + len(blobs[-1]))))
        at += len(blobs[-1])
    del pieces
    storage.write_staged(path, b"".join(blobs))
    yield from refs


def _select_shard(item, gen, name: str):
  """(shard, [(first unit, path, start, end)]) -> the shard's pieces read
  one at a time (one ranged read each, in unit order) into a running
  merge, then selected (`sharded_pass.select_pass`): a worker holds one
  shard's counts and one piece."""
  _, refs = item
  p = generator_steps.pass_named(gen, name)
  merged = None
  for _, path, start, end in sorted(refs):
    piece = pickle.loads(generator_steps.range_reader(path)(start, end))
    merged = piece if merged is None else protocol.merge_all(p, [merged, piece])
  return sharded_pass.select_pass(p, merged)


def _keyed_partial(unit, map_fn, *args):
  """(unit index, `map_fn(unit, *args)`): a unit's partial named by its unit."""
  return unit.index, map_fn(unit, *args)


def _pass_value(spread, gen, ps, names, values, parts_dir: str = "", staging: bool = False):
  """A pass's value (a singleton): units mapped (`_staging_map` when
  `staging`, else `_map_unit`; `values`: the earlier passes' staged values,
  `_pass_path`), partials merged globally; a sharded pass's partials staged
  by token shard under `parts_dir` (`_StageShards`), each shard merged from
  its pieces and selected (`_select_shard`), so the global merge sees
  selections only (without `parts_dir`: a CombinePerKey over the shards,
  whose lifted accumulators hold a bundle's every shard). The global merge
  finishes after `_trim_memory`."""
  sides = [beam.pvalue.AsSingleton(v) for v in values]
  args = (gen, ps.name, list(names)) + ((parts_dir,) if staging else ())
  map_fn = _staging_map if staging else _map_unit
  if sharded_pass.is_sharded(ps) and not parts_dir:
    partials = (spread | f"{ps.name}: map" >> beam.Map(map_fn, *args, *sides)
                | f"{ps.name}: split" >> beam.FlatMap(_split_partial, gen, ps.name)
                | f"{ps.name}: merge per shard" >> beam.CombinePerKey(_ShardCombine(gen, ps.name))
                | f"{ps.name}: selected" >> beam.Values())
  elif sharded_pass.is_sharded(ps):
    partials = (spread
                | f"{ps.name}: map" >> beam.Map(_keyed_partial, map_fn, *args, *sides)
                | f"{ps.name}: stage shards" >> beam.ParDo(
                    _StageShards(gen, ps.name, parts_dir))
                | f"{ps.name}: group shards" >> beam.GroupByKey()
                | f"{ps.name}: select shards" >> beam.Map(_select_shard, gen, ps.name))
  else:
    partials = spread | f"{ps.name}: map" >> beam.Map(map_fn, *args, *sides)
  return partials | f"{ps.name}: merge" >> beam.CombineGlobally(_FinishCombine(gen, ps.name))


class _TotalsCombine(beam.CombineFn):
  """The example statistics of every unit, merged."""

  def __init__(self, gen):
    super().__init__()
    self.gen = gen

  def create_accumulator(self):
    return None

  def add_input(self, acc, element):
    return generator_steps.merge_totals(self.gen, [acc, element])

  def merge_accumulators(self, accumulators):
    return generator_steps.merge_totals(self.gen, list(accumulators))

  def extract_output(self, acc):
    return acc


def _put(path: str, obj: Any) -> str:
  """Writes `obj` pickled as one object at `path` (under the run's parts
  folder); returns the path."""
  storage.write_staged(path, pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))
  return path


def _get(path: str) -> Any:
  """The object `_put` wrote at `path`."""
  return pickle.loads(storage.read_bytes(path))


PASS_VALUES_KEPT = 8  # global pass values a worker process keeps loaded (a run has a few)
_PASS_VALUES: "collections.OrderedDict[str, Any]" = collections.OrderedDict()


def _pass_path(value, parts_dir: str, name: str) -> str:
  """A pass's value pickled as one object under `parts_dir` (`name`: the
  pass's and the run's, so a process's loaded values never outlive their
  run, and a retry writes the same object); its path is the side input,
  so the runner never holds the value and a worker loads it once for all
  its steps (`_named_values`), not once a stage as a decoded side input
  (w2v at 400 MB: +92 MB at the examples, +47 at the file writers)."""
  return _put(storage.join(parts_dir, "value-%s" % name), value)


def _pass_loaded(path: str):
  """The value `_pass_path` staged at `path`, loaded once in this process
  (the last `PASS_VALUES_KEPT` kept: `_kept_load`)."""
  return _kept_load(_PASS_VALUES, PASS_VALUES_KEPT, path)


def _kept_load(kept: "collections.OrderedDict[str, Any]", most: int, path: str):
  """The object `_put` wrote at `path`, from `kept` (the last `most` loaded,
  most recent last) or loaded and kept there."""
  with _LOADED_LOCK:
    if path in kept:
      kept.move_to_end(path)
      return kept[path]
  value = _get(path)
  with _LOADED_LOCK:
    value = kept.setdefault(path, value)
    while len(kept) > most:
      kept.popitem(last=False)
  return value


def _named_values(names, paths) -> Dict[str, Any]:
  """{pass name: its value} from the values' staged paths (`_pass_loaded`)."""
  return {name: _pass_loaded(path) for name, path in zip(names, paths)}


def _staging_map(unit, gen, name: str, names, parts_dir: str, *values):
  """The last pass's map of one unit: its partial; its `protocol.Carry`
  state (if any) staged for the unit's examples
  (`generator_steps.map_pass_staged`, as on Dask), which then skip the work
  the state holds, as on the local engine (the bytes are the same)."""
  return generator_steps.map_pass_staged(gen, name, unit, _named_values(names, values),
                                         parts_dir)


TOTALS = "totals"  # the tag of a unit's example statistics


def _staged_unit(gen, unit, values: Dict[str, Any], parts_dir: str, state: Any = None):
  """A unit's examples (`state`: its carried state or None): its totals
  (tagged), then (file index, (file, path, first key, last key)) of each
  run object written under `parts_dir` (`generator_steps.keyed_runs`:
  named by file and unit, so a retried bundle writes the same objects
  again)."""
  by_file, totals = generator_steps.unit_records(gen, unit, values, state)
  yield beam.pvalue.TaggedOutput(TOTALS, totals)
  for entry in generator_steps.keyed_runs(parts_dir, unit.index, by_file):
    yield entry[0], entry


class _UnitRecords(beam.DoFn):
  """A unit -> `_staged_unit`, with the state its last pass's map staged
  (`generator_steps.staged_state`): only references to its runs go on."""

  def __init__(self, gen, names, parts_dir: str):
    super().__init__()
    self.gen, self.names, self.parts_dir = gen, list(names), parts_dir

  def setup(self):
    _trim_memory()  # (the passes' merges before it freed their pages)

  def process(self, unit, *values):
    state = generator_steps.staged_state(self.gen, self.parts_dir, unit)
    yield from _staged_unit(self.gen, unit, _named_values(self.names, values), self.parts_dir,
                            state)


VALUES_KEPT = 2  # partition values a worker process keeps loaded
_LOADED: "collections.OrderedDict[str, Any]" = collections.OrderedDict()
_LOADED_LOCK = threading.Lock()


def _loaded_value(path: str):
  """The partition value staged at `path` (`_partition_value`); the last
  `VALUES_KEPT` loaded in this process are kept, not every one."""
  return _kept_load(_LOADED, VALUES_KEPT, path)


class _PartitionRecords(_UnitRecords):
  """((partition, slot), [(unit, its partition's value path)]) -> each
  unit's `_staged_unit`, in unit order, the value loaded once
  (`_loaded_value`): it reaches only the workers of its units, never every
  worker as a side input."""

  def __init__(self, gen, names, parts_dir: str, partitioned: str):
    super().__init__(gen, names, parts_dir)
    self.partitioned = partitioned

  def process(self, item, *values):
    (partition, _), pairs = item
    unit_values = _named_values(self.names, values)
    for unit, path in sorted(pairs, key=lambda x: x[0].index):
      unit_values[self.partitioned] = {partition: _loaded_value(path)}
      yield from _staged_unit(self.gen, unit, unit_values, self.parts_dir)

  def teardown(self):
    with _LOADED_LOCK:
      _LOADED.clear()


def _staged_partial(unit, gen, name: str, names, parts_dir: str, *values):
  """A partitioned pass's map of one unit, its partial pickled as an object
  under `parts_dir` (named by unit: a retry writes the same object) ->
  (partition, (unit, the partial's path)): the shuffle carries references,
  not partials."""
  path = _put(storage.join(parts_dir, "partial-u%08d" % unit.index),
              _map_unit(unit, gen, name, names, *values))
  return unit.partition, (unit, path)


UNITS_PER_LOAD = 4  # consecutive units of a partition that one worker runs after one load


def _partition_value(item, gen, name: str, parts_dir: str):
  """(partition, [(unit, its partial's path)]) -> ((partition, slot), (unit,
  the value's path)) for each unit: the partition's partials merged in unit
  order, its value finished and pickled once as an object under
  `parts_dir` (named by partition), its units in slots of `UNITS_PER_LOAD`
  consecutive units."""
  partition, pairs = item
  pairs = sorted(pairs, key=lambda x: x[0].index)
  merged = generator_steps.merge_pass(gen, name, [_get(path) for _, path in pairs])
  path = _put(storage.join(parts_dir, "value-p%06d" % partition),
              generator_steps.finish_pass(gen, name, merged))
  for i, (unit, _) in enumerate(pairs):
    yield (partition, i // UNITS_PER_LOAD), (unit, path)


def _partition_records(spread, gen, ps, names, values, parts_dir: str):
  """A partitioned pass (the last): each unit's partial staged as an
  object, the references grouped by partition, where one worker merges
  them and stages the partition's value once (`_partition_value`); its
  units and the value's path (a few bytes) spread in slots over the
  workers, each loading the value (`_PartitionRecords`)."""
  sides = [beam.pvalue.AsSingleton(v) for v in values]
  return (spread
          | f"{ps.name}: map" >> beam.Map(_staged_partial, gen, ps.name, list(names), parts_dir,
                                          *sides)
          | f"{ps.name}: group partitions" >> beam.GroupByKey()
          | f"{ps.name}: value" >> beam.FlatMap(_partition_value, gen, ps.name, parts_dir)
          | "spread slots" >> beam.GroupByKey()
          | "examples" >> beam.ParDo(_PartitionRecords(gen, names, parts_dir, ps.name),
                                     *sides).with_outputs(TOTALS, main="records"))


def _map_unit(unit, gen, name, names, *values):
  return generator_steps.map_pass(gen, name, unit, _named_values(names, values))


def _plan_segments(item, gen, datasets, files, segment_bytes: int, max_levels: int, names,
                   *values):
  """(file index, {"records": [run references], "file": [...]}) -> (file
  index, (its plan, its group levels, its run references)): the file's
  segments (`file_segments.file_plan`: one for a file under
  `segment_bytes`) and the group merges of its runs before them
  (`file_segments.group_levels`, in `max_levels` steps at most); nothing
  for a file finished by the resumed run."""
  file_index, grouped = item
  target = files[file_index]
  if datasets[target.dataset].is_finished(target.path):
    return
  entries = list(grouped["records"])
  plan = file_segments.file_plan(gen, _named_values(names, values), file_index, entries,
                                 target.compression, segment_bytes)
  yield file_index, (plan, file_segments.group_levels(entries, plan, max_levels=max_levels),
                     entries)


def _level_items(item, level: int):
  """(file index, job) -> the job itself and each group merge of its
  level `level`, keyed by the file."""
  file_index, job = item
  yield file_index, ("job", job)
  if level < len(job[1]):
    for group in job[1][level]:
      yield file_index, ("group", group)


def _merge_item(item):
  """A group merge done (`file_segments.merge_group`); a job passed on."""
  file_index, (kind, value) = item
  if kind == "group":
    return file_index, (kind, file_segments.merge_group(value))
  return item


def _job_after(item):
  """(file index, [the job, its level's merges done]) -> (file index, job)."""
  file_index, done = item
  return file_index, next(value for kind, value in done if kind == "job")


def _merged_levels(jobs, max_levels: int):
  """Each level of group merges as a step (a merge per element, spread),
  the next level after all of a file's merges of this one."""
  for level in range(max_levels):
    jobs = (jobs | f"group merges {level}" >> beam.FlatMap(_level_items, level)
            | f"spread merges {level}" >> beam.Reshuffle()
            | f"merge groups {level}" >> beam.Map(_merge_item)
            | f"merged {level}" >> beam.GroupByKey()
            | f"after merges {level}" >> beam.Map(_job_after))
  return jobs


def _segment_items(item):
  """(file index, job) -> (file index, (segment, segments, key range, the
  runs it reads: group runs where merged)) for each segment."""
  file_index, (plan, levels, entries) = item
  runs = file_segments.grouped(entries, levels)
  for j, bounds in enumerate(plan):
    yield file_index, (j, len(plan), bounds, file_segments.touching(runs, bounds))


def merge_steps(units: int) -> int:
  """The levels of group merges a Beam graph has room for: enough for
  `units` runs a file at `file_segments.GROUP_FAN_IN` runs a merge.

  >>> merge_steps(2), merge_steps(16), merge_steps(17), merge_steps(10 ** 6)
  (1, 1, 2, 5)
  """
  levels, reach = 1, file_segments.GROUP_FAN_IN
  while reach < units:
    levels, reach = levels + 1, reach * file_segments.GROUP_FAN_IN
  return levels


def _write_sorted(item, gen, datasets, files, names, *values):
  """(file index, (segment, segments, key range, run references)) -> (file
  index, (segment, segments, info)): a file of one segment written in place
  (its runs merged in key order a chunk at a time,
  `generator_steps.merged_run`, through the generator's `finish_file`),
  else the segment as a hidden object (`file_segments.write_file_segment`)."""
  file_index, (j, count, bounds, entries) = item
  target = files[file_index]
  dataset = datasets[target.dataset]
  values = _named_values(names, values)
  if count == 1:
    runs = generator_steps.file_runs(gen, file_index, values, generator_steps.merged_run(entries))
    info = generator_steps.write_file(dataset.open(target.path, target.compression), runs)
  else:
    info = file_segments.write_file_segment(
        gen, values, file_index, bounds, entries,
        file_segments.segment_path(dataset.parts_dir(), file_index, j))
  return file_index, (j, count, info)


JOINED = "joined"  # the tag of a file finished by `_start_join` ((dataset, info))


def _start_join(item, datasets, files):
  """(file index, [(segment, segments, info)]) -> a file of one segment as
  (its dataset, its info) tagged `JOINED`; a file of segments: (file
  index, placement) for each segment (`file_segments.start_direct`: on a
  local path, a mount every worker has, its temp files made), placed by
  `_place_segment`."""
  file_index, parts = item
  target = files[file_index]
  parts = sorted(parts, key=lambda x: x[0])
  count = parts[0][1]
  if count == 1:
    yield beam.pvalue.TaggedOutput(JOINED, (target.dataset, parts[0][2]))
    return
  if [x[0] for x in parts] != list(range(count)):
    raise UserError(f"{target.path}: {len(parts)} of its {count} segments written; "
                    "rerun with --resume")
  for p in file_segments.start_direct(datasets[target.dataset], target.path,
                                      [x[2] for x in parts]):
    yield file_index, p


def _place_segment(item):
  """(file index, placement) -> (file index, placed): one segment copied
  into its file's temp file at its offset (a local path) and its part of
  the offset index written (`file_segments.place`)."""
  file_index, placement = item
  return file_index, file_segments.place(placement)


def _finished_file(item, datasets, files):
  """(file index, [placed]) -> (its dataset, the file's info): the join's
  last step (`file_segments.finish_direct`)."""
  file_index, placed = item
  target = files[file_index]
  yield target.dataset, file_segments.finish_direct(datasets[target.dataset], target.path,
                                                    list(placed))


COUNTS = "counts"  # the tag of a dealt group's record count


def _deal_group(item, gen, n_files: int, parts_dir: str, names, *values):
  """(group, its run references) -> ((group, (lane, lane object's path)) of
  each non-empty lane, staged (`record_files.stage_lanes`); the group's
  count tagged apart."""
  group, entries = item
  count, lanes = record_files.lanes(
      generator_steps.file_runs(gen, group, _named_values(names, values),
                                generator_steps.merged_run(list(entries))), n_files)
  yield beam.pvalue.TaggedOutput(COUNTS, (group, count))
  for lane, path in record_files.stage_lanes(parts_dir, group, lanes).items():
    yield group, (lane, path)


def _lane_to_file(item, n_files: int, firsts: Dict[int, int]):
  """(group, (lane, path)) -> (its record file, (group, path)); `firsts`:
  each group's first rank (`record_files.first_ranks`, made once)."""
  group, (lane, path) = item
  return record_files.file_of(firsts[group], lane, n_files), (group, path)


def _write_dealt(item, datasets, files):
  """(file index, {"lanes": [(group, lane path)], "file": [...]}) -> (its
  dataset, the file's info): its lanes read one at a time in group order."""
  file_index, grouped = item
  target = files[file_index]
  dataset = datasets[target.dataset]
  if dataset.is_finished(target.path):
    return
  paths = [path for _, path in sorted(grouped["lanes"])]
  yield target.dataset, generator_steps.write_file(
      dataset.open(target.path, target.compression), record_files.read_lanes(paths))


def _dealt_files(recs, file_keys, gen, datasets, files, names, sides):
  """The files of a generator that deals (`deals_records`): each group's
  runs merged and split into lanes, staged as objects, by a worker; the
  groups' first ranks (one small side input, made once from their counts)
  deciding each lane's file; one writer per file reads its lanes in group
  order. Only references go through the shuffles."""
  parts_dir = datasets[0].parts_dir()
  dealt = (recs
           | "group records" >> beam.GroupByKey()
           | "deal groups" >> beam.FlatMap(_deal_group, gen, len(files), parts_dir, names,
                                           *sides).with_outputs(COUNTS, main="lanes"))
  firsts = (dealt[COUNTS] | "group counts" >> beam.combiners.ToDict()
            | "first ranks" >> beam.Map(record_files.first_ranks))
  lanes = dealt.lanes | "lanes to files" >> beam.Map(
      _lane_to_file, len(files), beam.pvalue.AsSingleton(firsts))
  return ({"lanes": lanes, "file": file_keys}
          | "group lanes by file" >> beam.CoGroupByKey()
          | "write files" >> beam.FlatMap(_write_dealt, datasets, files))


def _finalize_generator(infos, gen, datasets, names, totals, *values):
  generator_steps.finalize_direct(gen, datasets, _named_values(names, values), totals, infos)
  return True


def run_generator(gen, datasets: Sequence, options_text: str,
                  segment_bytes: int = file_segments.SEGMENT_BYTES) -> None:
  """Runs a declared generator (`engine.protocol`) as a Beam pipeline whose
  workers write `datasets` (a `DirectDataset` per dataset of
  `gen.datasets()`) in place, each dataset's metadata last.

  Units are created and spread; each pass is a map and a global combine
  whose (small) value reaches later steps as a side input (a partitioned
  pass: its partials staged as objects and merged per partition, its value
  staged once as an object and loaded by the workers of its units:
  `_partition_records`; the last pass's carried states staged for the
  units' examples: `_staging_map`); each unit's
  records for a file are written as one run object under the run's parts
  folder, and only its reference (file, path, first key, last key) goes
  through the shuffle; one worker per file merges its runs in key order a
  chunk at a time and writes the file, or one worker per segment of a file
  over `segment_bytes` (`engine.file_segments`; after group merges of its
  runs, level after level, where segments would read units x segments
  runs: `file_segments.group_levels`) and one joining them (a
  generator that deals: `_dealt_files`); the last step writes the metadata.
  """
  units = gen.units()
  files = record_files.targets(gen)
  datasets = list(datasets)
  parts_dir = datasets[0].parts_dir()
  levels = merge_steps(len(units))
  run_id = uuid.uuid4().hex[:12]  # (names the staged pass values: `_pass_path`)

  def build(p):
    single = beam.pvalue.AsSingleton
    spread = (p | "units" >> beam.Create(units) | "spread units" >> beam.Reshuffle())
    names, values, recs = [], [], None
    for i, ps in enumerate(gen.passes):
      if ps.partitioned:  # (the last pass: never a side input)
        recs = _partition_records(spread, gen, ps, names, values, parts_dir)
        break
      # (the last pass's states go to the examples: `_staging_map`)
      values.append(_pass_value(spread, gen, ps, names, values, parts_dir,
                                staging=i == len(gen.passes) - 1)
                    | f"{ps.name}: stage value" >> beam.Map(_pass_path, parts_dir,
                                                            f"{ps.name}-{run_id}"))
      names.append(ps.name)
    sides = [single(v) for v in values]
    if recs is None:
      recs = spread | "examples" >> beam.ParDo(_UnitRecords(gen, names, parts_dir),
                                                *sides).with_outputs(TOTALS, main="records")
    totals = recs[TOTALS] | "totals" >> beam.CombineGlobally(_TotalsCombine(gen))
    file_keys = (p | "files" >> beam.Create(list(range(len(files))))
                 | "key files" >> beam.Map(lambda i: (i, None)))
    if gen.deals_records:
      infos = _dealt_files(recs.records, file_keys, gen, datasets, files, names, sides)
    else:
      infos = ({"records": recs.records, "file": file_keys}
               | "group by file" >> beam.CoGroupByKey()
               | "plan segments" >> beam.FlatMap(_plan_segments, gen, datasets, files,
                                                 segment_bytes, levels, names, *sides))
      infos = (_merged_levels(infos, levels)
               | "segments" >> beam.FlatMap(_segment_items)
               | "spread segments" >> beam.Reshuffle()
               | "write files" >> beam.Map(_write_sorted, gen, datasets, files, names, *sides)
               | "group segments" >> beam.GroupByKey()
               | "join segments" >> beam.FlatMap(_start_join, datasets, files).with_outputs(
                   JOINED, main="placements"))
      placed = (infos.placements | "spread placements" >> beam.Reshuffle()
                | "place segments" >> beam.Map(_place_segment)
                | "group placements" >> beam.GroupByKey()
                | "finish joins" >> beam.FlatMap(_finished_file, datasets, files))
      infos = (infos[JOINED], placed) | "file infos" >> beam.Flatten()
    _ = (infos | "all infos" >> beam.combiners.ToList()
         | "finalize" >> beam.Map(_finalize_generator, gen, datasets, names, single(totals),
                                  *sides))

  run(options_text, build)
