"""BertConfig: every setting of a bert_data run, built once from flags."""

import dataclasses
from typing import Tuple

from bert_data.masks import registry
from textrecords.runs import cli
from textrecords.errors import UserError
from textrecords.runs.run_options import RunOptions
from bert_data.instance_packing import MAX_PACK_INSTANCES


MASKING_MODES = ("static", "dynamic")
PACKING_MODES = ("full_sentences", "doc_sentences")


@dataclasses.dataclass(frozen=True)
class BertConfig(RunOptions):
  """Settings of one `bert_data.create` run (defaults are the reference's).

  masking: "static" writes masked instances (the reference's records);
  "dynamic" writes unmasked ones that `make_dataset` masks every epoch.
  max_ngram_size: mask n-grams of 1..N whole words (needs whole-word masking).
  use_v2_feature_names: records carry Model Garden's input names.
  sentence_order: ALBERT's sentence-order prediction instead of NSP.
  next_sentence: False drops the sentence-pair task (no label feature);
    needs `packing` ("full_sentences" or "doc_sentences", RoBERTa's).
  spm_model_file: a SentencePiece model to tokenize with instead of
    `vocab_file` (ALBERT's way).
  pack_instances: up to this many finished instances share a row
    (`bert_data.instance_packing`); 1 writes one instance per row.
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
  sentence_order: bool = False
  next_sentence: bool = True
  packing: str = ""
  spm_model_file: str = ""
  pack_instances: int = 1

  def validate(self) -> "BertConfig":
    """Range-checks every setting; raises UserError naming the flag."""
    if not self.output_files or not all(f.strip() for f in self.output_files):
      raise UserError("--output_file is required (comma-separated list of paths)")
    if len(set(self.output_files)) != len(self.output_files):
      raise UserError("--output_file lists the same path twice")
    cli.check_range("max_seq_length", self.max_seq_length, 5, 1 << 16)
    cli.check_range("max_predictions_per_seq", self.max_predictions_per_seq, 0,
                    self.max_seq_length, hi_flag="max_seq_length")
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
    registry.validate(self)  # each masking rule's flags
    self._validate_recipes()
    self._validate_pack_instances()
    self.validate_run_options()
    if len(self.output_files) > 1 and self.num_shards > 1:
      raise UserError(f"--output_file lists {len(self.output_files)} files and "
                      f"--num_shards={self.num_shards}: use one or the other")
    if self.reference_compatible and self.num_shards > 1:
      raise UserError("--reference_compatible writes the reference's files; give several "
                      "--output_file paths instead of --num_shards")
    return self

  def _validate_recipes(self) -> None:
    """The post-2018 recipes: SOP, packing without NSP, SentencePiece."""
    if self.spm_model_file and self.vocab_file:
      raise UserError("--spm_model_file and --vocab_file: give one (the model holds the "
                      "vocabulary)")
    if not self.spm_model_file and not self.vocab_file:
      raise UserError("--vocab_file (or --spm_model_file) is required")
    if self.packing and self.packing not in PACKING_MODES:
      raise UserError(f"--packing={self.packing}: must be one of {', '.join(PACKING_MODES)}")
    if self.sentence_order and not self.next_sentence:
      raise UserError("--sentence_order with --next_sentence=false: sentence-order "
                      "prediction needs segment pairs; drop one of them")
    if self.packing and self.next_sentence:
      raise UserError(f"--packing={self.packing} packs one segment without a sentence-pair "
                      "label: add --next_sentence=false")
    if not self.next_sentence and not self.packing:
      raise UserError("--next_sentence=false needs --packing=full_sentences or "
                      "--packing=doc_sentences")
    used = [flag for flag, on in (("--sentence_order", self.sentence_order),
                                  ("--next_sentence=false", not self.next_sentence),
                                  ("--spm_model_file", bool(self.spm_model_file))) if on]
    if used and self.reference_compatible:
      raise UserError(f"{', '.join(used)} with --reference_compatible: the reference has no "
                      "such recipe; drop --reference_compatible")

  def _validate_pack_instances(self) -> None:
    """--pack_instances: 1..MAX_PACK_INSTANCES, and only where rows can be packed."""
    cli.check_range("pack_instances", self.pack_instances, 1, MAX_PACK_INSTANCES)
    if self.pack_instances == 1:
      return
    given = f"--pack_instances={self.pack_instances}"
    if self.reference_compatible:
      raise UserError(f"{given} with --reference_compatible: the reference writes one "
                      "instance per row; drop one of them")
    if self.packing:
      raise UserError(f"{given} with --packing={self.packing}: RoBERTa's packing already "
                      "fills each row with one segment; drop one of them")
    if self.masking == "dynamic":
      raise UserError(f"{given} with --masking=dynamic: packed rows are masked at create "
                      "time; use --masking=static")
    if len(self.output_files) > 1:
      raise UserError(f"{given} with {len(self.output_files)} --output_file paths: packed "
                      "rows go to one dataset; give one path and --num_shards")

  @property
  def sentence_task(self) -> str:
    """"nsp", "sop" or "none": what the next_sentence_labels feature holds."""
    if not self.next_sentence:
      return "none"
    return "sop" if self.sentence_order else "nsp"

  def input_locations(self) -> Tuple[Tuple[str, str], ...]:
    """(flag, path) of every file the run reads: the texts and the vocab or model."""
    tokenizer = ("--spm_model_file" if self.spm_model_file else "--vocab_file",
                 self.tokenizer_file)
    return tuple(("--input_file", f) for f in self.input_files) + (tokenizer,)

  @property
  def tokenizer_file(self) -> str:
    """The vocab file or SentencePiece model the run tokenizes with."""
    return self.spm_model_file or self.vocab_file

  @property
  def max_num_tokens(self) -> int:
    return self.max_seq_length - 3
