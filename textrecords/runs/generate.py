"""A declared generator (`engine.protocol`) run on the chosen engine.

`create` is every ported package's create: the `GeneratorRun` skeleton
(locks, destination checks, resume, finalize) around the engine that runs
the generator (`engine.local`, `engine.beam`, `engine.dask`).
"""

import sys
from typing import Callable, List, Optional

from textrecords.errors import UserError
from textrecords.runs import run as run_lib
from textrecords.engine import local


def _stderr(msg: str):
  print(msg, file=sys.stderr, flush=True)


def create(gen, options, engine, *, flag: str,
           log: Optional[Callable[[str], None]] = None) -> run_lib.RunResult:
  """Runs generator `gen` with `engine` (an `EngineOptions`); returns the run's result.

  Args:
    gen: a `protocol.Generator` of a validated config.
    options: the config (RunOptions: overwrite, resume, quiet, num_workers).
    flag: the output flag, for messages.
    log: where warnings go (stderr).
  Raises:
    UserError: bad input or output; nothing is left in the output on failure.
  """
  log = log or _stderr
  engine.validate(declared=True)
  gen.check_engine(engine.name)
  files = [run_lib.DatasetFiles(layout, out.records, out.small, out.compression)
           for layout, out in gen.datasets()]
  with run_lib.GeneratorRun(gen.package, files, gen.fingerprint(), options, flag=flag,
                            engine=engine) as run:
    if run.already_complete:
      if not options.quiet:
        log(f"{gen.package}: {run.datasets[0].layout.meta_path} is already complete for "
            "these inputs and flags")
      return run.result()
    gen.prepare()
    metas = _run_engine(gen, options, engine, run)
    for message in gen.messages(metas[0]):
      log(message)
    return run.result(metas)


def _run_engine(gen, options, engine, run) -> List[dict]:
  """The engine's run inside `run`; returns each dataset's metadata written."""
  if engine.name == "local":
    return local.run_generator(gen, run, options.num_workers, engine.segment_bytes)
  datasets = list(run.writers)
  try:
    if engine.name == "beam":
      # deferred: the beam extra
      from textrecords.engine import beam  # pylint: disable=import-outside-toplevel
      beam.run_generator(gen, datasets, engine.beam_pipeline_options, engine.segment_bytes)
    else:
      # deferred: the dask extra
      from textrecords.engine import dask as dask_engine  # pylint: disable=import-outside-toplevel
      dask_engine.run_generator(gen, datasets, engine.dask_scheduler,
                                options.num_workers, engine.segment_bytes)
  except UserError:
    for d, (_, out) in zip(datasets, gen.datasets()):
      d.discard(out.paths)
    raise
  return [d.read_meta(gen.package) for d in datasets]
