"""Engines: where a generator's pure per-unit functions run.

`local` runs them over worker processes on this machine
(`textrecords.engine.parallel`); `beam` runs the same functions as an Apache Beam
pipeline (`textrecords.engine.beam`), on any runner Beam has. Both give the
same bytes. The engine is not part of a dataset's flags or fingerprint: it
changes where the work runs, never what is written.
"""

import dataclasses
import logging
from typing import List, Sequence

from textrecords.errors import UserError

ENGINES = ("local", "beam")
INSTALL_HINT = "pip install 'textrecords[beam]'"


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
  """Which engine runs a generator, and Beam's pipeline options.

  Attributes:
    name: "local" or "beam".
    beam_pipeline_options: comma-separated key=value (Beam only).
  """
  name: str = "local"
  beam_pipeline_options: str = ""

  @property
  def is_beam(self) -> bool:
    return self.name == "beam"

  @property
  def runner(self) -> str:
    """The Beam runner named in the options ('' if none)."""
    runners = [a.split("=", 1)[1] for a in parse_pipeline_options(self.beam_pipeline_options)
               if a.startswith("--runner=")]
    return runners[-1] if runners else ""

  def validate(self, outputs: Sequence[str] = ()) -> "EngineOptions":  # pylint: disable=unused-argument
    """Checks the flags; for beam, that apache_beam imports (one-line hint if
    not). Any runner can write any output (`outputs`): workers write URLs and
    shared mounts in place (`textrecords.datasets.direct_output`)."""
    if self.name not in ENGINES:
      raise UserError(f"--engine={self.name!r}: must be one of {', '.join(ENGINES)}")
    argv = parse_pipeline_options(self.beam_pipeline_options)
    if argv and not self.is_beam:
      raise UserError("--beam_pipeline_options needs --engine=beam")
    if self.is_beam:
      require_beam()
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


LOCAL = EngineOptions()
