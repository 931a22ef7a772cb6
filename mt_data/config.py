"""MTConfig: every setting of an `mt_data.create` run, built once from flags."""

import dataclasses
from typing import Tuple

from textrecords.runs import cli
from textrecords.files import text_input
from textrecords.files import tfrecord
from textrecords.errors import UserError
from textrecords.runs.run_options import RunOptions

TOKENIZERS = ("word", "bpe")
MAX_COUNT = 10 ** 9


@dataclasses.dataclass(frozen=True)
class MTConfig(RunOptions):
  """Settings of one run (defaults are d2l's `MTFra` ones).

  Attributes:
    input_file: comma-separated paths or globs of `src<TAB>tgt[<TAB>...]` files.
    output_dir: folder that receives records, vocabularies and meta.json.
    num_train: train pairs (the first ones); 0 = all but the last num_val.
    num_val: validation pairs (right after train); 0 = all the rest.
    min_freq: tokens seen fewer times map to `<unk>` (bpe: min merge count).
    tokenizer: "word" (d2l) or "bpe" (Hugging Face tokenizers, trained on
      the train pairs).
    vocab_size: bpe only: the size of each language's vocabulary.
  """
  input_file: str
  output_dir: str
  num_train: int = 512
  num_val: int = 128
  min_freq: int = 2
  tokenizer: str = "word"
  vocab_size: int = 8000

  def validate(self) -> "MTConfig":
    """Range-checks every setting before any work; raises UserError naming the flag."""
    if not self.input_file or not self.input_file.strip():
      raise UserError("--input_file is required (comma-separated file paths or globs)")
    if not self.output_dir or not self.output_dir.strip():
      raise UserError("--output_dir is required")
    cli.check_range("num_train", self.num_train, 0, MAX_COUNT)
    cli.check_range("num_val", self.num_val, 0, MAX_COUNT)
    cli.check_range("min_freq", self.min_freq, 1, MAX_COUNT)
    if self.tokenizer not in TOKENIZERS:
      raise UserError(f"--tokenizer={self.tokenizer!r}: must be one of {', '.join(TOKENIZERS)}")
    cli.check_range("vocab_size", self.vocab_size, 16, 10 ** 7)
    self.validate_run_options()
    return self

  def input_locations(self) -> Tuple[Tuple[str, str], ...]:
    """(flag, path) of every file the run reads."""
    return tuple(("--input_file", f)
                 for f in text_input.expand_patterns(self.input_file, "--input_file"))

  @property
  def compression_name(self) -> str:
    return tfrecord.check_compression(self.compression)

  def output_flags(self) -> dict:
    """The settings that determine the output bytes (for fingerprint and metadata)."""
    return {"num_train": self.num_train, "num_val": self.num_val,
            "min_freq": self.min_freq, "tokenizer": self.tokenizer,
            "vocab_size": self.vocab_size if self.tokenizer == "bpe" else None,
            "num_shards": self.num_shards, "compression": self.compression_name,
            "on_decode_error": self.on_decode_error}
