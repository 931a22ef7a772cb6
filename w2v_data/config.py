"""W2vConfig: every setting of a w2v_data run, built once from flags."""

import dataclasses
from typing import Tuple

from textrecords.runs import cli
from textrecords.files import text_input
from textrecords.errors import UserError
from textrecords.runs.run_options import RunOptions
from w2v_data import schema

SUBSAMPLE_FORMULAS = ("sqrt", "word2vec")
# --subsample_t's default: keep every token. The sgd trainers (scripts/train_*.py)
# subsample afresh every epoch, as word2vec.c and gensim do; one draw fixed in the
# records loses quality (docs/w2v_data.md, "Why records keep every token").
KEEP_EVERY_TOKEN = 1.0
# d2l's word2vec chapter: --subsample_t=1e-4 writes its one subsampled draw.
D2L_SUBSAMPLE_T = 1e-4


@dataclasses.dataclass(frozen=True)
class W2vConfig(RunOptions):
  """Settings of one `w2v_data.create` run (defaults are d2l's but subsample_t's).

  Attributes:
    input_file: comma-separated text files or globs, one sentence per line.
    output_dir: folder for train.tfrecord*, vocab.txt and meta.json.
    min_freq: tokens seen fewer times map to <unk> (id 0).
    subsample_t: the subsampling threshold t; the default KEEP_EVERY_TOKEN (1)
      keeps every token, D2L_SUBSAMPLE_T (1e-4) writes d2l's one draw.
    subsample_formula: "sqrt" keeps w with min(1, sqrt(t/f)) (d2l);
      "word2vec" with min(1, sqrt(t/f) + t/f) (word2vec.c).
    max_window_size: windows are uniform on 1..max_window_size.
    num_noise_words: K noise words per context word.
    random_seed: seeds every per-sentence random stream.
    layout: "sentence" (one record per sentence) or "center" (one per center;
      skip-gram only).
    model: "skipgram", "cbow", "pv_dbow" or "pv_dm".
    doc_id_column: paragraph vectors: lines are "id<TAB>text" (else the
      document id is the line's 0-based index in the input).
  """
  input_file: str
  output_dir: str
  min_freq: int = 10
  subsample_t: float = KEEP_EVERY_TOKEN
  subsample_formula: str = "sqrt"
  max_window_size: int = 5
  num_noise_words: int = 5
  random_seed: int = 12345
  layout: str = "sentence"
  model: str = "skipgram"
  doc_id_column: bool = False

  def validate(self) -> "W2vConfig":
    """Range-checks every setting before any work; raises UserError naming the flag."""
    if not self.output_dir or not self.output_dir.strip():
      raise UserError("--output_dir is required")
    if not self.input_file or not self.input_file.strip():
      raise UserError("--input_file is required (comma-separated file paths or globs)")
    cli.check_range("min_freq", self.min_freq, 1, (1 << 62))
    if not 0.0 < self.subsample_t <= 1.0:
      raise UserError(f"--subsample_t={self.subsample_t}: must be in (0, 1]")
    if self.subsample_formula not in SUBSAMPLE_FORMULAS:
      raise UserError(f"--subsample_formula={self.subsample_formula!r}: must be one of "
                      f"{', '.join(SUBSAMPLE_FORMULAS)}")
    cli.check_range("max_window_size", self.max_window_size, 1, 1000)
    cli.check_range("num_noise_words", self.num_noise_words, 0, 1000)
    cli.check_range("random_seed", self.random_seed, 0, (1 << 63) - 1)
    if self.layout not in schema.LAYOUTS:
      raise UserError(f"--layout={self.layout!r}: must be one of {', '.join(schema.LAYOUTS)}")
    if self.model not in schema.MODELS:
      raise UserError(f"--model={self.model!r}: must be one of {', '.join(schema.MODELS)}")
    if (self.model, self.layout) not in schema.SCHEMAS:
      raise UserError(f"--layout={self.layout!r} is for --model=skipgram only; "
                      f"--model={self.model} writes the sentence layout")
    if self.doc_id_column and self.model not in schema.PV_MODELS:
      raise UserError(f"--doc_id_column is for --model=pv_dbow or pv_dm, not {self.model}")
    self.validate_run_options()
    return self

  def input_files(self) -> Tuple[str, ...]:
    """The expanded input files (UserError if a pattern matches nothing)."""
    return tuple(text_input.expand_patterns(self.input_file, "--input_file"))

  def input_locations(self) -> Tuple[Tuple[str, str], ...]:
    """(flag, path) of every file the run reads."""
    return tuple(("--input_file", f) for f in self.input_files())

  def output_flags(self) -> dict:
    """The flags that determine the output bytes (stored in the metadata)."""
    return {"min_freq": self.min_freq, "subsample_t": self.subsample_t,
            "subsample_formula": self.subsample_formula,
            "max_window_size": self.max_window_size,
            "num_noise_words": self.num_noise_words, "random_seed": self.random_seed,
            "layout": self.layout, "model": self.model,
            "doc_id_column": self.doc_id_column,
            "num_shards": self.num_shards, "compression": self.compression,
            "on_decode_error": self.on_decode_error}
