"""RunOptions: the settings every generator shares (the shared CLI flags).

Each package's config dataclass inherits them (keyword-only), so a run's
workers, shards, compression, overwrite/resume and decode-error policy are
declared, validated and read from flags in one place.
"""

import dataclasses
from typing import Tuple

from textrecords.runs import cli
from textrecords.files import text_input
from textrecords.files import tfrecord
from textrecords.errors import UserError


# Settings of where and how a run goes, never of what it writes: kept out of
# fingerprints and of the metadata's flags, so 1 or 2 workers, or a resumed
# run, give the same bytes, metadata included.
RUN_ENVIRONMENT = ("num_workers", "overwrite", "resume", "quiet", "verbose", "summary_json",
                   "engine", "beam_pipeline_options", "dask_scheduler")


def identity_flags(flags: dict) -> dict:
  """`flags` without the run-environment settings (`RUN_ENVIRONMENT`).

  >>> identity_flags({"num_workers": 2, "quiet": True, "max_seq_length": 128})
  {'max_seq_length': 128}
  """
  return {k: v for k, v in flags.items() if k not in RUN_ENVIRONMENT}


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunOptions:
  """Shared settings (see `cli.define_common_flags` for the flags).

  Attributes:
    num_workers: worker processes; output bytes never depend on it.
    num_shards: output shards.
    compression: "" or "GZIP" (other spellings such as "gzip" or "none" are
      normalized on construction; unknown names fail `validate_run_options`).
    overwrite: replace an existing complete output.
    resume: continue an interrupted run.
    on_decode_error: "strict", "replace" or "skip_line".
    quiet: no progress lines.
  """
  num_workers: int = 1
  num_shards: int = 1
  compression: str = ""
  overwrite: bool = False
  resume: bool = False
  on_decode_error: str = "strict"
  quiet: bool = True

  def __post_init__(self):
    # Stored normalized ("gzip" -> "GZIP", "none" -> ""), so every reader of
    # the field (writers, metadata, fingerprints) sees the one spelling.
    object.__setattr__(self, "compression", tfrecord.normalize_compression(self.compression))

  def input_locations(self) -> Tuple[Tuple[str, str], ...]:
    """(flag, path) of every file the run reads (texts, vocab, model), which
    no output of the run may be (`GeneratorRun`): each package's config
    lists its own; none here."""
    return ()

  def identity_flags(self) -> dict:
    """Every field of the config except the run environment (for metadata)."""
    return identity_flags(dataclasses.asdict(self))

  def validate_run_options(self) -> None:
    """Range-checks the shared settings; raises UserError naming the flag."""
    cli.check_range("num_workers", self.num_workers, 1, 1024)
    cli.check_range("num_shards", self.num_shards, 1, 100000)
    tfrecord.check_compression(self.compression)
    text_input.check_decode_mode(self.on_decode_error)
    if self.overwrite and self.resume:
      raise UserError("--overwrite and --resume exclude each other: pick one")
