"""BertConfig: every setting of a bert_data run, built once from flags."""

import dataclasses
from typing import Tuple

from textrecords import cli
from textrecords.errors import UserError
from textrecords.run_options import RunOptions


MASKING_MODES = ("static", "dynamic")


@dataclasses.dataclass(frozen=True)
class BertConfig(RunOptions):
  """Settings of one `bert_data.create` run (defaults are the reference's).

  masking: "static" writes masked instances (the reference's records);
  "dynamic" writes unmasked ones that `make_dataset` masks every epoch.
  max_ngram_size: mask n-grams of 1..N whole words (needs whole-word masking).
  use_v2_feature_names: records carry Model Garden's input names.
  """
  input_files: Tuple[str, ...]
  output_files: Tuple[str, ...]
  vocab_file: str
  do_lower_case: bool = True
  do_whole_word_mask: bool = False
  max_seq_length: int = 128
  max_predictions_per_seq: int = 20
  random_seed: int = 12345
  dupe_factor: int = 10
  masked_lm_prob: float = 0.15
  short_seq_prob: float = 0.1
  reference_compatible: bool = False
  masking: str = "static"
  max_ngram_size: int = 1
  use_v2_feature_names: bool = False

  def validate(self) -> "BertConfig":
    """Range-checks every setting; raises UserError naming the flag."""
    if not self.output_files or not all(f.strip() for f in self.output_files):
      raise UserError("--output_file is required (comma-separated list of paths)")
    if len(set(self.output_files)) != len(self.output_files):
      raise UserError("--output_file lists the same path twice")
    cli.check_range("max_seq_length", self.max_seq_length, 5, 1 << 16)
    cli.check_range("max_predictions_per_seq", self.max_predictions_per_seq, 0,
                    self.max_seq_length)
    cli.check_range("dupe_factor", self.dupe_factor, 1, 10000)
    cli.check_range("random_seed", self.random_seed, 0, (1 << 63) - 1)
    for name in ("masked_lm_prob", "short_seq_prob"):
      value = getattr(self, name)
      if not 0.0 <= value <= 1.0:
        raise UserError(f"--{name}={value}: must be a probability in [0, 1]")
    if self.masking not in MASKING_MODES:
      raise UserError(f"--masking={self.masking}: must be one of {', '.join(MASKING_MODES)}")
    if self.masking == "dynamic" and self.reference_compatible:
      raise UserError("--masking=dynamic with --reference_compatible: the reference masks "
                      "at create time; drop one of them")
    cli.check_range("max_ngram_size", self.max_ngram_size, 1, 32)
    if self.max_ngram_size > 1 and not self.do_whole_word_mask:
      raise UserError(f"--max_ngram_size={self.max_ngram_size} masks n-grams of whole "
                      "words: add --do_whole_word_mask")
    if self.max_ngram_size > 1 and self.reference_compatible:
      raise UserError(f"--max_ngram_size={self.max_ngram_size} with --reference_compatible: "
                      "the reference has no n-gram masking")
    self.validate_run_options()
    if len(self.output_files) > 1 and self.num_shards > 1:
      raise UserError(f"--output_file lists {len(self.output_files)} files and "
                      f"--num_shards={self.num_shards}: use one or the other")
    if self.reference_compatible and self.num_shards > 1:
      raise UserError("--reference_compatible writes the reference's files; give several "
                      "--output_file paths instead of --num_shards")
    return self

  @property
  def max_num_tokens(self) -> int:
    return self.max_seq_length - 3
