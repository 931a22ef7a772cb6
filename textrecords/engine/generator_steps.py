"""The steps every engine runs for a declared generator, free of any engine.

`engine.local`, `engine.beam` and `engine.dask` call these on a
`protocol.Generator`, so a unit's records, a file's bytes and the metadata
are made by the same code whichever engine runs them:

  * `map_pass`, `merge_pass`, `finish_pass`: one `Pass` by name
    (`map_pass_carry`: with a unit's `protocol.Carry`, if any).
  * `global_values` / `unit_values`: the values the file and finalize
    steps get, and those a unit's examples get (its partition's value of a
    partitioned pass).
  * `unit_runs` / `unit_records`: a unit's examples, framed and grouped by
    output file, each group sorted `record_runs.Run`s (or one), plus the
    unit's totals.
  * `file_runs`: a file's merged runs through the generator's
    `finish_file` (its step after the sort), what every writer writes.
  * `write_file`: one record file from its runs in key order, streamed
    in place by a worker (temp name, sha256, offset index).
  * `keyed_runs` / `merged_run`: a file's records as per-unit runs (objects
    under the run's parts folder) and their merge in key order.
  * `finalize_direct`: small files, every file in place, each dataset's
    metadata last, for the engines whose workers write the outputs in place.
"""

import pickle
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from textrecords.engine import protocol
from textrecords.engine import record_files
from textrecords.engine import record_runs
from textrecords.files import storage
from textrecords.files import tfrecord

Keyed = Tuple[int, bytes]  # (order key, framed record)


def pass_named(gen: protocol.Generator, name: str) -> protocol.Pass:
  """The generator's pass called `name`."""
  for p in gen.passes:
    if p.name == name:
      return p
  raise KeyError(name)


def map_pass(gen: protocol.Generator, name: str, unit: protocol.Unit,
             values: Dict[str, Any]) -> Any:
  """Pass `name`'s partial of one unit (any `Carry` state dropped)."""
  return protocol.split_carry(map_pass_carry(gen, name, unit, values))[0]


def map_pass_carry(gen: protocol.Generator, name: str, unit: protocol.Unit,
                   values: Dict[str, Any]) -> Any:
  """Pass `name`'s map of one unit as given: a partial or a `protocol.Carry`."""
  return pass_named(gen, name).map(unit, values)


def merge_pass(gen: protocol.Generator, name: str, partials: Iterable[Any]) -> Any:
  """Pass `name`'s partials merged (None when every one is None)."""
  return protocol.merge_all(pass_named(gen, name), partials)


def finish_pass(gen: protocol.Generator, name: str, merged: Any) -> Any:
  """Pass `name`'s value from its merged partial."""
  return pass_named(gen, name).finish(merged)


def global_values(gen: protocol.Generator, values: Dict[str, Any]) -> Dict[str, Any]:
  """The values every worker may get: those of the passes not partitioned."""
  partitioned = {p.name for p in gen.passes if p.partitioned}
  return {k: v for k, v in values.items() if k not in partitioned}


def unit_values(gen: protocol.Generator, values: Dict[str, Any],
                unit: protocol.Unit) -> Dict[str, Any]:
  """The values a unit's examples get: a partitioned pass's entry (engines
  give {partition: value}, at least the unit's) as the unit's partition's."""
  out = dict(values)
  for p in gen.passes:
    if p.partitioned and p.name in out:
      out[p.name] = out[p.name][unit.partition]
  return out


def merge_totals(gen: protocol.Generator, partials: Iterable[Any]) -> Any:
  """The example statistics of several units (None when there are none)."""
  present = [x for x in partials if x is not None]
  if not present:
    return None
  return present[0] if len(present) == 1 else gen.merge_totals(present)


def unit_runs(gen: protocol.Generator, unit: protocol.Unit, values: Dict[str, Any],
              state: Any = None) -> Tuple[Dict[int, List[record_runs.Run]], Any]:
  """({file index: the unit's records for it as `record_runs.Run`s in key
  order}, totals) of one unit (`state`: a pass's `protocol.Carry` state for
  it, or None). Single records are framed and sorted here; blocks come
  framed and stay whole."""
  records, totals = gen.examples(unit, unit_values(gen, values, unit), state)
  singles: Dict[int, List[Keyed]] = {}
  blocks: Dict[int, List[record_runs.Run]] = {}
  frame = tfrecord.frame
  for rec in records:
    if isinstance(rec, protocol.RecordBlock):
      blocks.setdefault(rec.file, []).append(record_runs.from_block(rec))
    else:
      singles.setdefault(rec[0], []).append((rec[1], frame(rec[2])))
  by_file = {}
  for f in sorted(set(singles) | set(blocks)):
    runs = blocks.get(f, [])
    if f in singles:
      recs = singles[f]
      recs.sort()
      runs.append(record_runs.from_keyed(recs))
    runs = list(record_runs.merged(runs))
    if runs:
      by_file[f] = runs
  return by_file, totals


def unit_records(gen: protocol.Generator, unit: protocol.Unit, values: Dict[str, Any],
                 state: Any = None) -> Tuple[Dict[int, record_runs.Run], Any]:
  """`unit_runs` with each file's runs as one run."""
  by_file, totals = unit_runs(gen, unit, values, state)
  return {f: record_runs.concatenated(runs) for f, runs in by_file.items()}, totals


def file_runs(gen: protocol.Generator, file_index: int, values: Dict[str, Any],
              runs: Iterable[record_runs.Run]) -> Iterable[record_runs.Run]:
  """What every engine writes to record file `file_index`: its runs in key
  order through `gen.finish_file` (the generator's step after the sort)."""
  return gen.finish_file(file_index, values, runs)


def write_file(handle, runs: Iterable[record_runs.Run]) -> dict:
  """Writes runs of framed records (in the order given) through a file a
  worker streams in place (`DirectDataset.open`); returns its info."""
  try:
    for run in runs:
      if len(run.keys):
        handle.write_framed(run.data, len(run.keys))
    return handle.commit()
  except BaseException:
    handle.abort()
    raise


# ---------------------------------------------------------------- runs on the store

RunEntry = Tuple[int, str, int, int, int]  # (file index, path, first key, last key, data bytes)


def run_path(parts_dir: str, file_index: int, unit_index: int) -> str:
  """Where a unit's records for one output file are kept until written."""
  return storage.join(parts_dir, "run-f%05d-u%08d" % (file_index, unit_index))


def keyed_runs(parts_dir: str, unit_index: int,
               by_file: Dict[int, record_runs.Run]) -> List[RunEntry]:
  """Writes each file's run of a unit as one object; returns [(file index,
  path, first key, last key, bytes of its framed records)]."""
  out = []
  for file_index in sorted(by_file):
    path = run_path(parts_dir, file_index, unit_index)
    run = by_file[file_index]
    storage.write_staged(path, record_runs.to_bytes(run))
    out.append((file_index, path, *record_runs.bounds(run), len(run.data)))
  return out


def merged_run(entries: Sequence[RunEntry],
               budget: Optional[int] = None) -> Iterable[record_runs.Run]:
  """The records of one file's runs in key order, as runs: runs whose key
  ranges do not overlap are read one at a time, in order; others are merged
  record by record, each read a chunk at a time (`record_runs.chunk_bytes`
  of `budget`, default `record_runs.MERGE_BUDGET`), so the merge holds a
  bounded part of the file, not all of it."""
  order = record_runs.disjoint([(e[2], e[3]) for e in entries])
  if order or not entries:
    for i in order:
      yield record_runs.from_bytes(storage.read_bytes(entries[i][1]))
    return
  chunk = record_runs.chunk_bytes(len(entries), budget)
  yield from record_runs.merged_records(
      [record_runs.chunked_records(range_reader(e[1]), run_bytes(e), chunk)
       for e in sorted(entries, key=lambda e: e[1])])


def run_bytes(entry: RunEntry) -> Callable[[int], int]:
  """A run object's bytes from its record count (`record_runs.chunked_records`):
  from its entry's data bytes where it knows them (a unit's run: no request),
  else its size asked of the store (a band run, planned before it is
  written: 0)."""
  path, data = entry[1], int(entry[4])
  if data > 0:
    return lambda count: record_runs.object_bytes(count, data)
  return lambda count: storage.size(path)


def range_reader(path: str):
  """`read_at(start, end)`: bytes [start, end) of the object at `path`, one
  ranged read each (no file kept open, no read-ahead cache)."""
  if storage.is_url(path):
    def read_at(start: int, end: int) -> bytes:
      if start >= end:
        return b""
      with storage.reaching(path):
        return storage.filesystem(path).cat_file(path, start=start, end=end)
    return read_at
  local = storage.local_path(path)

  def read_local(start: int, end: int) -> bytes:
    with open(local, "rb") as f:
      f.seek(start)
      return f.read(end - start)
  return read_local


def carry_path(parts_dir: str, name: str, unit_index: int) -> str:
  """Where pass `name`'s `protocol.Carry` state of a unit is staged."""
  return storage.join(parts_dir, "carry-%s-u%08d" % (name, unit_index))


def map_pass_staged(gen: protocol.Generator, name: str, unit: protocol.Unit,
                    values: Dict[str, Any], parts_dir: str) -> Any:
  """`map_pass`, its `Carry` state (if any) staged as one object for the
  unit's examples (`staged_state`), as the local engine's workers stage
  theirs in files: reading it back costs less than redoing the work (mt:
  a 1 MiB unit's parse 0.2 s, its state 1.5 MB)."""
  partial, state, _ = protocol.split_carry(map_pass_carry(gen, name, unit, values))
  if state is not None:
    storage.write_staged(carry_path(parts_dir, name, unit.index),
                         pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))
  return partial


def staged_state(gen: protocol.Generator, parts_dir: str, unit: protocol.Unit) -> Any:
  """The unit's state staged by the last pass's `map_pass_staged` (a later
  pass's state replaces an earlier one's, as on the local engine), or None."""
  if not gen.passes or not gen.passes[-1].carries:
    return None
  data = storage.read_bytes_if_any(carry_path(parts_dir, gen.passes[-1].name, unit.index))
  return None if data is None else pickle.loads(data)


# ---------------------------------------------------------------- finalize

def finalize_direct(gen: protocol.Generator, datasets: Sequence, values: Dict[str, Any],
                    totals: Any, infos: Sequence[Tuple[int, dict]]) -> None:
  """The last step of a run whose workers wrote in place (a `DirectDataset`
  per dataset of `gen.datasets()`): the small files (each in the dataset
  that lists it, else the first), every file in place, each dataset's
  metadata strictly last. `infos`: (dataset index, info) of the record
  files written."""
  declared = gen.datasets()
  by_dataset: List[List[dict]] = [[] for _ in declared]
  for d, info in infos:
    by_dataset[d].append(info)
  for path, data in gen.small_files(values).items():
    d = record_files.small_file_dataset(gen, path)
    if not datasets[d].is_finished(path):
      by_dataset[d].append(datasets[d].write_bytes(path, data))
  for (_, outputs), dataset, mine in zip(declared, datasets, by_dataset):
    dataset.finalize(outputs.paths, lambda file_infos: gen.metadata(values, totals, file_infos),
                     mine)
