"""Engines: where a generator's pure per-unit functions run.

`local` runs them over worker processes on this machine
(`textrecords.engine.parallel`); `beam` runs the same functions as an Apache Beam
pipeline (`textrecords.engine.beam`), on any runner Beam has; `dask` on a
dask.distributed cluster (`textrecords.engine.dask`). All give the same
bytes. A package declares its generator once (`textrecords.engine.protocol`). The engine is not part of a dataset's flags or fingerprint: it
changes where the work runs, never what is written.
"""

import dataclasses
import logging
from typing import List, Sequence

from textrecords.errors import UserError

ENGINES = ("local", "beam", "dask")
INSTALL_HINT = "pip install 'textrecords[beam]'"
DASK_INSTALL_HINT = "pip install 'textrecords[dask]'"


def parse_pipeline_options(text: str) -> List[str]:
  """tensorflow_datasets' comma-separated key=value form -> Beam argv.

  >>> parse_pipeline_options("runner=DirectRunner,direct_num_workers=2")
  ['--runner=DirectRunner', '--direct_num_workers=2']
  >>> parse_pipeline_options("")
  []
  """
  argv = []
  for item in (text or "").split(","):
    item = item.strip()
    if not item:
      continue
    key, sep, value = item.partition("=")
    key = key.strip().lstrip("-")
    if not sep or not key:
      raise UserError(f"--beam_pipeline_options: {item!r} is not key=value "
                      "(e.g. runner=DirectRunner,direct_num_workers=2)")
    argv.append(f"--{key}={value.strip()}")
  return argv


@dataclasses.dataclass(frozen=True)
class EngineOptions:
  """Which engine runs a generator, Beam's pipeline options, Dask's scheduler.

  Attributes:
    name: "local", "beam" or "dask".
    beam_pipeline_options: comma-separated key=value (Beam only).
    dask_scheduler: HOST:PORT of a running Dask scheduler (Dask only; empty:
      a local cluster of --num_workers processes).
    segment_bytes: a record file over this many bytes of records is written
      in segments by parallel workers, then joined (`engine.file_segments`;
      its metadata lists them; its record bytes are the same). Every engine
      cuts at the same keys; tests set a small value.
  """
  name: str = "local"
  beam_pipeline_options: str = ""
  dask_scheduler: str = ""
  segment_bytes: int = 256 << 20

  @property
  def is_beam(self) -> bool:
    return self.name == "beam"

  @property
  def writes_in_place(self) -> bool:
    """Workers write the outputs straight into their location
    (`textrecords.datasets.direct_output`): every engine but local."""
    return self.name != "local"

  @property
  def runner(self) -> str:
    """The Beam runner named in the options ('' if none)."""
    runners = [a.split("=", 1)[1] for a in parse_pipeline_options(self.beam_pipeline_options)
               if a.startswith("--runner=")]
    return runners[-1] if runners else ""

  def validate(self, outputs: Sequence[str] = (),  # pylint: disable=unused-argument
               declared: bool = False) -> "EngineOptions":
    """Checks the flags; for beam and dask, that the engine imports (one-line
    hint naming the extra if not). Any runner can write any output
    (`outputs`): workers write URLs and shared mounts in place
    (`textrecords.datasets.direct_output`). `declared`: the generator is a
    `protocol.Generator` (Dask runs only those)."""
    if self.name not in ENGINES:
      raise UserError(f"--engine={self.name!r}: must be one of {', '.join(ENGINES)}")
    argv = parse_pipeline_options(self.beam_pipeline_options)
    if argv and not self.is_beam:
      raise UserError("--beam_pipeline_options needs --engine=beam")
    if self.dask_scheduler and self.name != "dask":
      raise UserError("--dask_scheduler needs --engine=dask")
    if self.is_beam:
      require_beam()
    if self.name == "dask":
      if not declared:
        raise UserError("--engine=dask runs only generators declared with "
                        "textrecords.engine.protocol (bert_data, w2v_data, mt_data); use "
                        "--engine=local or --engine=beam")
      check_scheduler(self.dask_scheduler)
      require_dask()
    return self


def require_beam():
  """Imports apache_beam, or raises a one-line UserError naming the extra."""
  # Beam logs a warning about optional Google Cloud clients at import.
  logging.disable(logging.WARNING)
  try:
    import apache_beam  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise UserError(f"--engine=beam needs Apache Beam ({e}); install it with "
                    f"{INSTALL_HINT}") from None
  finally:
    logging.disable(logging.NOTSET)
  return apache_beam


def check_scheduler(address: str) -> str:
  """'' or HOST:PORT (a tcp:// prefix allowed); a one-line UserError otherwise.

  >>> check_scheduler("127.0.0.1:8786")
  '127.0.0.1:8786'
  """
  if not address:
    return address
  host, sep, port = address.removeprefix("tcp://").rpartition(":")
  if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
    raise UserError(f"--dask_scheduler={address!r}: expected HOST:PORT, e.g. 10.0.0.5:8786")
  return address


def require_dask():
  """Imports dask.distributed, or raises a one-line UserError naming the extra."""
  try:
    import distributed  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise UserError(f"--engine=dask needs dask.distributed ({e}); install it with "
                    f"{DASK_INSTALL_HINT}") from None
  return distributed


LOCAL = EngineOptions()
