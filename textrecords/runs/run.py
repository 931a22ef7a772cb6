"""One generator run: the steps every create takes around its package's work.

Every package's create (both engines) goes through `GeneratorRun`:

  fp = run.fingerprint("w2v_data", config.identity_flags(), files)
  with run.GeneratorRun("w2v_data", [run.DatasetFiles(layout, records, others)], fp,
                        config, flag="--output_dir") as r:
    if r.already_complete:        # --resume on a complete output: nothing is touched
      return r.result()
    scratch = r.scratch_dir()     # removed when the block ends
    ... write every file through r.writers[i] (`DatasetWriter`) ...
    r.mark("write")               # (optional) a phase's seconds
    return r.result(r.finalize([build_meta]))

It owns, in this order: the output locks (`output_lock`), the destination
checks before any work (an output path that is a folder, an existing file
the run would replace without --overwrite, a foreign file named), resume /
already-complete / overwrite (`DatasetWriter`), the scratch folder, the
finalize (files in place, metadata last), and after a failure the removal of
the hidden files the run made (an interrupted or killed run keeps them for
--resume). `fingerprint` is the one definition of what determines a run's
bytes; `run_options.RUN_ENVIRONMENT` names the settings that never do.
Every create returns a `RunResult`, whichever package and engine.
"""

import dataclasses
import functools
import os
import shutil
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from textrecords import __version__
from textrecords.runs import cli
from textrecords.datasets import dataset_writer
from textrecords.datasets import direct_output
from textrecords.datasets import index
from textrecords.datasets import metadata
from textrecords.files import output_lock
from textrecords.datasets import publish
from textrecords.files import storage
from textrecords.errors import UserError
from textrecords.datasets.layout import DatasetLayout
from textrecords.runs.run_options import identity_flags
from textrecords import engine as engine_lib

def input_stats(files: Sequence[str]) -> List[list]:
  """[path, size, version] of every input: local paths absolute (a resume works
  from any working directory), URLs as given; the version is the mtime or the
  store's ETag (`storage.stat`)."""
  return [[storage.absolute(f), *storage.stat(f)] for f in files]


def fingerprint(package: str, flags: dict, inputs: Sequence[str], **extra) -> dict:
  """Everything that determines a run's bytes: package, version, the identity
  flags, the inputs' stats and `extra` (e.g. a vocab's sha256).

  `--resume` keeps finished files only when it is equal; it is stored in the
  metadata, which a complete output's `already_complete` compares with.
  """
  return {"package": package, "version": __version__, "flags": identity_flags(flags),
          "inputs": input_stats(inputs), **extra}


@dataclasses.dataclass(frozen=True)
class RunResult:
  """What every generator's create returns (each package, both engines).

  Attributes:
    metas: each output dataset's metadata as written, or as found when the
      output was already complete (bert_data: one per --output_file).
    already_complete: --resume found the output complete; nothing was written.
    files_kept: the run's files kept from the earlier run it resumed (already
      complete: every file the metadata lists, indexes too).
    seconds: seconds of the run's phases (as the package marked them) and
      "total"; left out of comparisons.
  """
  metas: Tuple[dict, ...]
  already_complete: bool = False
  files_kept: int = 0
  seconds: Dict[str, float] = dataclasses.field(default_factory=dict, compare=False)

  @property
  def meta(self) -> dict:
    """The (first) dataset's metadata."""
    return self.metas[0]

  @property
  def counts(self) -> dict:
    """The (first) dataset's counts (the metadata's `counts`)."""
    return self.meta["counts"]

  @property
  def files(self) -> List[dict]:
    """Every dataset's file entries (the metadata's `files`), in output order."""
    return [f for m in self.metas for f in m["files"]]


@dataclasses.dataclass(frozen=True)
class DatasetFiles:
  """The files one dataset of a run consists of.

  Attributes:
    layout: where the dataset lives.
    record_paths: its record files, in reading order.
    other_paths: its other files (vocabularies, tokenizers), listed first.
    compression: "" or "GZIP" (uncompressed record files get an offset index).
  """
  layout: DatasetLayout
  record_paths: Tuple[str, ...]
  other_paths: Tuple[str, ...] = ()
  compression: str = ""

  @property
  def paths(self) -> List[str]:
    """Every file, in metadata order (others, then records)."""
    return list(self.other_paths) + list(self.record_paths)

  @property
  def destinations(self) -> List[str]:
    """Every path the run writes: files, then the record files' indexes."""
    indexes = [] if self.compression else [index.index_path(p) for p in self.record_paths]
    return self.paths + indexes


def _input_locations(options) -> tuple:
  """(flag, path) of every file a run reads, as its config lists them
  (`RunOptions.input_locations`; none for options without the method)."""
  listed = getattr(options, "input_locations", None)
  return tuple(listed()) if listed is not None else ()


def _listed_names(meta_path: str) -> set:
  """The file names an existing metadata lists (none if there is none)."""
  if not storage.exists(meta_path):
    return set()
  try:
    return {f["name"] for f in metadata.load(meta_path).get("files", [])}
  except UserError:
    return set()


class GeneratorRun:
  """A context manager around one run of a generator (see the module doc).

  Args:
    package: the generator's package name (metadata "package").
    datasets: the run's output datasets (bert: one per --output_file).
    fingerprint: from `fingerprint`.
    options: anything with `overwrite`, `resume` and `quiet` (RunOptions).
    flag: the output flag, for messages ("--output_file").
    engine: the run's engine; with Beam or Dask, `writers` are
      `direct_output.DirectDataset`s (workers write the outputs in place),
      else `dataset_writer.DatasetWriter`s.
  """

  def __init__(self, package: str, datasets: Sequence[DatasetFiles], fingerprint_: dict,
               options, *, flag: str, engine=None):
    self.direct = engine is not None and engine.writes_in_place
    self.package = package
    self.datasets = list(datasets)
    self.fingerprint = fingerprint_
    self.options = options
    self.flag = flag
    self.writers: List[dataset_writer.DatasetWriter] = []
    self._lock = None
    self._scratch: Optional[str] = None
    self._finalized = False
    self._started = self._last_mark = time.monotonic()
    self._seconds: Dict[str, float] = {}
    self.files_kept = 0

  def __enter__(self) -> "GeneratorRun":
    inputs = _input_locations(self.options)
    for d in self.datasets:
      self._check_not_inputs(d, inputs)
      self._check_location(d)
    self._lock = output_lock.hold([d.layout.meta_path for d in self.datasets])
    self._lock.__enter__()  # pylint: disable=unnecessary-dunder-call
    try:
      self.writers = [self._writer(d) for d in self.datasets]
      self.files_kept = sum(w.is_finished(p) for w, d in zip(self.writers, self.datasets)
                            for p in d.paths)
    except BaseException as e:
      self._lock.__exit__(type(e), e, e.__traceback__)
      raise
    return self

  def _writer(self, d: DatasetFiles):
    o = self.options
    if not self.direct:
      return dataset_writer.DatasetWriter(d.layout.meta_path, self.fingerprint,
                                          overwrite=o.overwrite, resume=o.resume,
                                          paths=d.destinations)
    w = direct_output.DirectDataset(d.layout.meta_path, self.fingerprint,
                                    overwrite=o.overwrite, resume=o.resume)
    if not o.overwrite:
      dataset_writer.check_replaceable(d.destinations, _listed_names(d.layout.meta_path),
                                       d.layout.meta_path)
    return w

  def _check_not_inputs(self, d: DatasetFiles, inputs):
    """No file the run writes (records, indexes, other files, metadata) is one
    it reads, with or without --overwrite; a staged URL output compares as
    its URL."""
    writes = [storage.origin(p) for p in d.destinations + [d.layout.meta_path]]
    storage.check_not_inputs(writes, inputs, self.flag, storage.origin(d.layout.location))

  def _check_location(self, d: DatasetFiles):
    """The output location is usable: checked before any work."""
    where = d.layout.location
    if storage.is_url(where):
      return  # checked by the storage when the run reaches it (`DirectDataset`)
    if d.layout.file_stem is not None and os.path.isdir(where):
      raise UserError(f"{self.flag}={where}: is a folder; give a file path (the records "
                      "go to that file, the metadata beside it)")
    if d.layout.file_stem is None and os.path.exists(where) and not os.path.isdir(where):
      raise UserError(f"{self.flag}={where}: exists and is not a folder")
    probe = os.path.abspath(d.layout.root)
    while not os.path.exists(probe):
      probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
      raise UserError(f"cannot create output folder {d.layout.root} ({self.flag}={where}): "
                      f"{probe} is not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
      raise UserError(f"output folder {probe} is not writable")

  @property
  def already_complete(self) -> bool:
    """True when --resume found every dataset complete for this fingerprint."""
    return all(w.already_complete for w in self.writers)

  def existing_meta(self, i: int = 0) -> dict:
    """The metadata of dataset i as it is on disk (an already complete run)."""
    return metadata.read(self.datasets[i].layout.meta_path, package=self.package)

  def scratch_dir(self) -> str:
    """The run's hidden scratch folder beside the first dataset (removed at the end)."""
    if self._scratch is None:
      self._scratch = self.writers[0].scratch_dir()
    return self._scratch

  def finalize(self, build_metas: Sequence[Callable[[List[dict]], dict]]) -> List[dict]:
    """Every dataset's files in place, its metadata last; returns the metadata."""
    metas = [w.finalize(d.paths, b)
             for w, d, b in zip(self.writers, self.datasets, build_metas)]
    self._finalized = True
    return metas

  def mark(self, phase: str):
    """Ends `phase` now: its seconds (since the previous mark or the run's
    start) go into the result's `seconds`."""
    now = time.monotonic()
    self._seconds[phase] = round(now - self._last_mark, 3)
    self._last_mark = now

  def result(self, metas: Optional[Sequence[dict]] = None) -> RunResult:
    """The run's `RunResult`: with `metas` (as `finalize` returned them),
    a run that wrote; without, an already complete one (its metadata read)."""
    seconds = dict(self._seconds, total=round(time.monotonic() - self._started, 3))
    if metas is None:
      metas = [self.existing_meta(i) for i in range(len(self.datasets))]
      return RunResult(tuple(metas), already_complete=True,
                       files_kept=sum(len(m["files"]) for m in metas), seconds=seconds)
    return RunResult(tuple(metas), files_kept=self.files_kept, seconds=seconds)

  def __exit__(self, exc_type, exc, tb):
    try:
      if self._scratch is not None:
        shutil.rmtree(self._scratch, ignore_errors=True)
      # An error (not an interrupt or a kill): remove the hidden files this run
      # made, so a failure leaves nothing; Ctrl-C keeps them for --resume.
      if exc_type is not None and issubclass(exc_type, Exception) and not self._finalized:
        for w in self.writers:
          if isinstance(w, dataset_writer.DatasetWriter):  # (Beam runs discard their own)
            w.discard()
    finally:
      self._lock.__exit__(exc_type, exc, tb)
    return False


# ------------------------------------------------------------- the generators' main

ENGINE_OPTIONS = ("engine", "beam_pipeline_options", "dask_scheduler")


def config_from_options(config_class, api: str, options: dict, **given):
  """A package's validated config from a Python create's keyword options.

  The options are the config's fields (the command line's flags, same names
  and defaults); `num_workers` left out means as many as the command line
  would use. `given` holds what the caller already converted (inputs,
  outputs).

  Raises:
    UserError: an unknown option (naming `api` and the known ones), or any
      setting the command line would refuse (the same message).
  """
  known = {f.name for f in dataclasses.fields(config_class)} - set(given)
  unknown = sorted(set(options) - known)
  if unknown:
    raise UserError(f"{api}: unknown option {unknown[0]!r} (options: {', '.join(sorted(known))})")
  options = dict(options, num_workers=cli.num_workers(options.get("num_workers")))
  return config_class(**given, **options).validate()


def options_from_flags(flag_values, config_class, *, given_only: Sequence[str] = ()) -> dict:
  """The parsed flags named like `config_class`'s fields, as the keyword
  options of the package's Python create (the command line is a layer over it).

  Args:
    given_only: fields passed only when given on the command line (their
      default depends on other options, or giving them has no effect with
      some, which the create refuses).
  """
  names = [f.name for f in dataclasses.fields(config_class) if f.name in flag_values]
  return {n: flag_values[n].value for n in names
          if n not in given_only or flag_values[n].present}


def joined_locations(locations) -> str:
  """One location (str or path) or several as the command line's
  comma-separated text.

  >>> joined_locations(["a.txt", "b/*.txt"]), joined_locations("a.txt")
  ('a.txt,b/*.txt', 'a.txt')
  """
  if isinstance(locations, (str, os.PathLike)):
    return os.fspath(locations)
  return ",".join(os.fspath(loc) for loc in locations)


def engine_options(engine: str = "local", beam_pipeline_options: str = "",
                   dask_scheduler: str = ""):
  """The validated `engine.EngineOptions` of a run (`--engine` and its flags)."""
  # declared=True: whether the package runs on Dask is checked by its create.
  return engine_lib.EngineOptions(engine, beam_pipeline_options or "",
                                  dask_scheduler or "").validate(declared=True)


def run_config(config, create: Callable, engine, *, output: str, output_flag: str,
               folder: bool) -> RunResult:
  """Runs a validated config on an engine: what both a create's command line
  and its Python function (`create_dataset`) do.

  Args:
    config: the package's validated config.
    create: (config, engine=EngineOptions) -> the run's `RunResult`.
    engine: `engine_options(...)`.
    output: the config field naming the output location(s), e.g. "output_dir";
      with the local engine, URL outputs are staged locally and published
      after the run (`publish.run_staged`); other engines' workers write them
      in place.
    output_flag: its flag, for messages ("--output_dir").
    folder: the output is a folder (else one or more files).
  """
  if engine.writes_in_place:  # workers write every output in place (`direct_output`)
    locations = getattr(config, output)
    for loc in [locations] if isinstance(locations, str) else locations:
      storage.check(loc, output_flag)
    return create(config, engine=engine)
  return publish.run_staged(config, output, functools.partial(create, engine=engine),
                            folder=folder, flag=output_flag)


def create_from_options(make_config: Callable, create: Callable, args: tuple, options: dict,
                        *, output: str, output_flag: str, folder: bool) -> RunResult:
  """The body of every package's `create_dataset(*args, **options)`.

  `options` holds the engine's (`ENGINE_OPTIONS`: engine="local",
  beam_pipeline_options, dask_scheduler) and the config's, which
  `make_config(*args, **options)` turns into the validated config; the rest
  is `run_config`'s.
  """
  engine = engine_options(**{k: options.pop(k) for k in ENGINE_OPTIONS if k in options})
  return run_config(make_config(*args, **options), create, engine, output=output,
                    output_flag=output_flag, folder=folder)


def generator_main(argv, flag_values, make_config: Callable, create: Callable,
                   summarize: Callable, *, output: str, output_flag: str, folder: bool):
  """The body of every generator's `main`: the same steps, the same output.

  Args:
    argv: absl's leftover arguments (none are allowed).
    flag_values: the parsed flags (--summary_json, checked before any work, and
      --engine / --beam_pipeline_options / --dask_scheduler).
    make_config: () -> the package's validated config (reads its flags).
    create, output, output_flag, folder: as `run_config`.
    summarize: (config, RunResult) -> (one summary line, full summary dict).
  """
  cli.check_no_positional(argv)
  summary_json = cli.check_summary_path(flag_values.summary_json)
  config = make_config()
  if summary_json:
    storage.check_not_inputs([summary_json], _input_locations(config), "--summary_json",
                             summary_json)
  engine = engine_options(*(getattr(flag_values, name) for name in ENGINE_OPTIONS))
  result = run_config(config, create, engine, output=output, output_flag=output_flag,
                      folder=folder)
  line, summary = summarize(config, result)
  cli.report(line, summary, quiet=config.quiet, summary_json=summary_json)


def generator(make_config: Callable, create: Callable, summarize: Callable, *,
              output: str, output_flag: str, folder: bool) -> Callable:
  """A generator's `main(argv)`: `generator_main` with these arguments and the
  parsed flags.

  The main counts as make_config's module's (its `--help` shows that module's
  doc and flags).
  """

  def main(argv):
    generator_main(argv, cli.FLAGS, make_config, create, summarize, output=output,
                   output_flag=output_flag, folder=folder)

  main.__module__ = make_config.__module__
  return main
