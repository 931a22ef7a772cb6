"""The generator protocol: what a package declares so that any engine runs it.

A package says *what* is computed; an engine (`local`, `beam`, `dask`) says
*where*. The package writes one `Generator` (no engine imports):

  * `units()`: the work items, input byte ranges cut from file sizes alone
    (`units_from_sizes`; nothing is read to list them). A unit reads the
    whole lines that start in its range (`Unit.chunk`).
  * `passes`: global statistics, in order, each a `Pass`: `map(unit,
    values) -> partial` (values: the earlier passes' results by name),
    `merge(partials) -> partial` (associative and order-free: a partial
    carries its own order, e.g. unit indexes), `finish(partial) -> value`.
    A value is small (vocabulary-sized, or a few bytes per unit), so engines
    broadcast it to every worker. A pass of token counts declares
    `shards`, `split` and `select`: the engines merge it per shard and
    only the selected entries meet (`engine.sharded_pass`). A pass over a
    corpus index declares `partitioned` (the last pass): merged and finished
    per `Unit.partition`, its value (bounded by a partition) reaches only
    that partition's units, never every worker.
  * `examples(unit, values, state) -> (records, totals)`: the unit's records
    as (file index, key, serialized example), or records it encodes in bulk
    as `RecordBlock`s (framed, consecutive keys), and a partial of the
    example statistics (`merge_totals`). Within an output file, records are written
    in key order: keys fix the order, so bytes never depend on the engine
    or the worker count.
  * A pass's map may return `Carry(partial, state, nbytes)`: besides its
    partial, the unit's work so far (e.g. its lines read and tokenized) for
    `examples` of the same unit. An engine may hand it on (the local engine
    does, within `CARRY_BUDGET` bytes) or drop it (state None): `examples`
    then redoes that work, and the bytes are the same either way.
  * `finish_file(file_index, values, runs) -> runs`: optional, a step over
    one record file's records after the sort, before they are written
    (default: none, the runs as given). `runs` are the file's framed
    records in key order (`record_runs.Run`s, consumed lazily); it returns
    the runs to write (their keys non-decreasing), e.g. bert_data's rows
    packed from each order bucket's instances. Every engine's file writer
    calls it once per file (`generator_steps.file_runs`), so the bytes are
    the same on every engine. Keep memory bounded: hold one slice of the
    ordered records at a time (bert: one order bucket), never the file.
    With `deals_records` it is called per group, before the dealing.
    A large file is written in segments (`engine.file_segments`): its
    records are cut at keys that `cut_keys(file_index, values)` allows
    and each slice goes through its own `finish_file` call, so
    `finish_file` must give, for slices cut there, the runs it gives for
    the whole file, slice by slice (bert: cut only between order
    buckets, as it packs a bucket at a time). Without `cut_keys` a
    generator that overrides `finish_file` is never cut.
  * `layout()`, `outputs()`, `fingerprint()`, `small_files(values)`,
    `metadata(values, totals, infos)`: the files of the run and the
    metadata written last. A run of several datasets (one metadata each)
    declares `datasets()`; record file indexes count over all of them.
  * `deals_records = True`: the examples' file index is a *group*: the
    groups in order, each sorted (and through `finish_file`), make one
    stream dealt over the record files in turn (the r-th record to file
    r % files; bert_data's several --output_file datasets). Engines deal
    a group at a time (`engine.record_files`).

The engine does the rest, once for every package: units to workers, the
passes, the records sorted into their files, the offset indexes, finalize.
"""

import dataclasses
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from textrecords.errors import UserError
from textrecords.files import storage
from textrecords.files import text_input

Record = Tuple[int, int, bytes]  # (output file index, order key, serialized example)


@dataclasses.dataclass(frozen=True)
class RecordBlock:
  """Records of one output file encoded in bulk: framed, in order, with the
  consecutive keys first_key, first_key + 1, ... (an `examples` item, like a
  `Record`, without an object per record).

  Attributes:
    file: the output file's index.
    first_key: the first record's order key.
    data: the framed records laid end to end.
    starts: each record's start offset in `data` (int64 array).
  """
  file: int
  first_key: int
  data: bytes
  starts: Any


@dataclasses.dataclass(frozen=True)
class Unit:
  """One work item: the lines that start in bytes [start, end) of an input file.

  Attributes:
    index: the unit's place in the global order (input files in order, each
      cut front to back).
    file: the input file's index.
    path: the input file (absolute, or a URL).
    start, end: the byte range (any offsets: lines belong to the range they
      start in).
    partition: the partition of a partitioned pass (`Pass.partitioned`) the
      unit belongs to; 0 for every unit of a generator without one.
  """
  index: int
  file: int
  path: str
  start: int
  end: int
  partition: int = 0

  def chunk(self) -> text_input.LineChunk:
    """The unit's whole lines as a chunk (`text_input.chunk_lines` reads it)."""
    return text_input.range_chunk(self.path, self.start, self.end)


def units_from_sizes(files: Sequence[str], unit_bytes: int) -> List[Unit]:
  """Files cut into ranges of `unit_bytes` from their sizes alone.

  >>> import tempfile, os
  >>> d = tempfile.mkdtemp(); p = os.path.join(d, "a.txt")
  >>> _ = open(p, "w").write("ab\\ncd\\nef")
  >>> [(u.index, u.start, u.end) for u in units_from_sizes([p], 4)]
  [(0, 0, 4), (1, 4, 8)]
  """
  units: List[Unit] = []
  for file_index, path in enumerate(files):
    path = storage.absolute(path)  # workers run in other folders (or machines)
    size = storage.size(path)
    for start in range(0, size, unit_bytes):
      units.append(Unit(len(units), file_index, path, start, min(size, start + unit_bytes)))
  return units


@dataclasses.dataclass(frozen=True)
class Pass:
  """A global statistic, computed as a combinable map over the units.

  Attributes:
    name: the value's name in `values`.
    map: (unit, values of the earlier passes) -> a partial, or None.
    merge: a non-empty list of partials -> one partial; associative and
      independent of the list's order.
    finish: the merged partial (None when no unit gave one) -> the value.
      It may raise `UserError` (no usable input).
    enough: optional: (merged partial of units 0..i) -> True when the later
      units cannot change the value. An engine that maps units in order may
      stop there (their partials are then treated as None).
    distributed: False when partials grow with the corpus (such a pass runs
      on the local engine only; the generator refuses other engines).
    shards: > 0 for a pass keyed by token (counts for a vocabulary): the
      Beam and Dask engines merge it per shard (`engine.sharded_pass`), so
      no worker holds every distinct token. With it:
    split: (partial, shards) -> `shards` partials (None: empty), cut by
      `sharded_pass.shard_of` of the token; small per-unit data and sums
      go to shard 0.
    select: a shard's merged partial -> the part that can reach the value
      (bounded by the vocabulary: tokens at the min count, top-k
      candidates; sums kept). `finish` gives the same value from the
      selected parts, merged, as from one merge of every partial.
    partitioned: True for a pass whose value is per partition (a corpus
      index bounded by a partition of the input): partials merge and finish
      per `Unit.partition` (in any worker), and the examples of a unit get
      its partition's value as `values[name]`; `finish_file`, `small_files`
      and `metadata` get the values without it (`generator_steps.
      global_values`). It must be the last pass.
    carries: False for a pass whose map never returns a `Carry`: the
      engines that stage a unit's state then do not look for it (a request
      a unit on an object store).
  """
  name: str
  map: Callable[[Unit, Dict[str, Any]], Any]
  merge: Callable[[List[Any]], Any]
  finish: Callable[[Any], Any]
  enough: Optional[Callable[[Any], bool]] = None
  distributed: bool = True
  shards: int = 0
  split: Optional[Callable[[Any, int], Sequence[Any]]] = None
  select: Optional[Callable[[Any], Any]] = None
  partitioned: bool = False
  carries: bool = True


CARRY_BUDGET = 256 << 20  # state bytes an engine keeps between a pass and the examples


@dataclasses.dataclass(frozen=True)
class Carry:
  """A pass map's result that also hands on the unit's work so far.

  Attributes:
    partial: the pass's partial (what is merged).
    state: the unit's work so far, for `Generator.examples` of the same unit
      (it must give the bytes `examples` gives without it).
    nbytes: about how much memory `state` takes (engines bound what they keep).
  """
  partial: Any
  state: Any
  nbytes: int


def split_carry(result: Any) -> Tuple[Any, Any, int]:
  """(partial, state or None, state bytes) of a pass map's result.

  >>> split_carry(Carry({1: 2}, "s", 1)), split_carry({1: 2})
  (({1: 2}, 's', 1), ({1: 2}, None, 0))
  """
  if isinstance(result, Carry):
    return result.partial, result.state, result.nbytes
  return result, None, 0


def finishes_files(gen: "Generator") -> bool:
  """Whether `gen` overrides `Generator.finish_file` (a step over each
  sorted file: the file is written only once all its records are sorted)."""
  return type(gen).finish_file is not Generator.finish_file


def merge_all(p: Pass, partials: Iterable[Any]) -> Any:
  """`p.merge` of the partials that are not None (None if none is)."""
  present = [x for x in partials if x is not None]
  if not present:
    return None
  return present[0] if len(present) == 1 else p.merge(present)


@dataclasses.dataclass(frozen=True)
class Outputs:
  """The files of one run (one dataset).

  Attributes:
    records: the record files, by file index (metadata order).
    small: the other files (vocabularies, ...), written by `small_files`.
    compression: "" or "GZIP" (record files).
  """
  records: Tuple[str, ...]
  small: Tuple[str, ...]
  compression: str

  @property
  def paths(self) -> List[str]:
    """Every file, small files first (the metadata's order)."""
    return list(self.small) + list(self.records)


class Generator:
  """What a package declares (see the module doc); subclasses fill it in.

  Instances are pickled to workers: keep plain fields (the config, the input
  files).
  """

  package: str = ""
  passes: Sequence[Pass] = ()
  # True when, within each record file, every record of a unit has a smaller
  # key than every record of a later unit (keys numbered in unit order): the
  # local engine then appends each unit's records as it comes (checked).
  keys_follow_units: bool = False
  # True when the examples' file index is a group whose records are dealt
  # over the record files in turn (see the module doc, `engine.record_files`).
  deals_records: bool = False

  def layout(self):
    """The output dataset's `DatasetLayout`."""
    raise NotImplementedError

  def outputs(self) -> Outputs:
    raise NotImplementedError

  def datasets(self) -> List[Tuple[Any, Outputs]]:
    """Every dataset of the run as (its `DatasetLayout`, its `Outputs`): by
    default the one of `layout()` and `outputs()`. Record file indexes count
    every dataset's records, in this order; each dataset gets its own
    metadata (`metadata` of its files' infos)."""
    return [(self.layout(), self.outputs())]

  def fingerprint(self) -> dict:
    """Everything that determines the bytes (`runs.run.fingerprint`)."""
    raise NotImplementedError

  def prepare(self) -> None:
    """Launcher-side work before a run that writes (not on an already
    complete output), e.g. the inputs' checksums for the metadata."""

  def units(self) -> List[Unit]:
    raise NotImplementedError

  def examples(self, unit: Unit, values: Dict[str, Any],
               state: Any = None) -> Tuple[List[Any], Any]:
    """The unit's records (`Record`s and `RecordBlock`s) and totals;
    `state`: a pass's `Carry.state` for this unit, or None (the engine kept
    none)."""
    raise NotImplementedError

  def merge_totals(self, partials: List[Any]) -> Any:
    raise NotImplementedError

  def finish_file(self, file_index: int, values: Dict[str, Any],  # pylint: disable=unused-argument
                  runs: Iterable[Any]) -> Iterable[Any]:
    """Record file `file_index`'s sorted records -> the records written
    (see the module doc): `record_runs.Run`s of framed records in key order
    in, runs out; by default the runs as given."""
    return runs

  def cut_keys(self, file_index: int,  # pylint: disable=unused-argument
               values: Dict[str, Any]) -> Optional[Sequence[int]]:
    """The keys at which record file `file_index`'s sorted records may be
    cut into segments written apart (`engine.file_segments`), each slice
    through its own `finish_file` call: None for any key (the default
    without a `finish_file`), else the allowed keys, sorted (the default
    with one: [], never cut)."""
    return None if not finishes_files(self) else []

  def small_files(self, values: Dict[str, Any]) -> Dict[str, bytes]:
    """Path -> bytes of the files that are not records."""
    raise NotImplementedError

  def metadata(self, values: Dict[str, Any], totals: Any, infos: List[dict]) -> dict:
    raise NotImplementedError

  def messages(self, meta: dict) -> List[str]:  # pylint: disable=unused-argument
    """Warnings to print after a run, from its metadata."""
    return []

  def check_engine(self, engine_name: str) -> None:
    """Raises a one-line UserError when a pass cannot run on that engine."""
    if engine_name == "local":
      return
    for p in self.passes:
      if not p.distributed:
        raise UserError(f"{self.package}: the {p.name} step needs every input in one "
                        f"process; use --engine=local instead of --engine={engine_name}")
