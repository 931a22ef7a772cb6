"""`python -m bert_data.create`: BERT pretraining records from text.

Same flags and defaults as google-research/bert's create_pretraining_data.py,
plus --reference_compatible and the shared textrecords flags (workers, shards,
compression, resume/overwrite, decode errors).

Example:
  python -m bert_data.create --input_file=corpus/*.txt \\
      --output_file=out/train.tfrecord --vocab_file=vocab.txt --num_shards=8
"""


from typing import Optional, Sequence, Union

from absl import flags

from bert_data.config import BertConfig
from bert_data import generator
from bert_data import units
from textrecords.runs import cli
from textrecords.runs import run as run_lib
from textrecords.files import text_input

FLAGS = flags.FLAGS


def define_flags():
  """Defines the flags (called only when run as a program)."""
  flags.DEFINE_string("input_file", None, "Comma-separated input text files or globs.")
  flags.DEFINE_string("output_file", None, "Comma-separated output TFRecord files "
                      "(instances go round-robin over them).")
  flags.DEFINE_string("vocab_file", None, "WordPiece vocab file (one token per line).")
  flags.DEFINE_bool("do_lower_case", True, "Lowercase and strip accents.")
  flags.DEFINE_bool("do_whole_word_mask", False, "Mask whole words, not single wordpieces.")
  flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length.")
  flags.DEFINE_integer("max_predictions_per_seq", 20, "Maximum masked LM predictions.")
  flags.DEFINE_integer("random_seed", 12345, "Random seed.")
  flags.DEFINE_integer("dupe_factor", 10, "Passes over the corpus, each masked differently.")
  flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.")
  flags.DEFINE_float("short_seq_prob", 0.1, "Probability of a shorter target length.")
  flags.DEFINE_bool("reference_compatible", False,
                    "Output equal to google-research/bert, record for record "
                    "(one RNG; tokenizing is still parallel).")
  flags.DEFINE_enum("masking", "static", ["static", "dynamic"],
                    "static: masks drawn here, as the reference; dynamic: unmasked "
                    "instances, masked afresh every epoch by make_dataset "
                    "(--dupe_factor then defaults to 1).")
  flags.DEFINE_integer("max_ngram_size", 1, "Mask n-grams of 1..N whole words, shorter "
                       "ones favoured (weight 1/n), as ALBERT; needs --do_whole_word_mask.")
  flags.DEFINE_bool("use_v2_feature_names", False, "Write Model Garden's v2 names "
                    "(input_word_ids, input_type_ids).")
  flags.DEFINE_bool("sentence_order", False, "ALBERT's sentence-order prediction: B always "
                    "follows A; swapped (label 1) with probability 0.5.")
  flags.DEFINE_bool("next_sentence", True, "false: no sentence-pair task and no label "
                    "feature; needs --packing.")
  flags.DEFINE_enum("packing", None, ["full_sentences", "doc_sentences"],
                    "RoBERTa's packing (with --next_sentence=false): one segment of "
                    "contiguous sentences filled to max_seq_length, across documents "
                    "(full_sentences, [SEP] between them) or within one (doc_sentences).")
  flags.DEFINE_string("spm_model_file", None, "SentencePiece model to tokenize with "
                      "(ALBERT's way) instead of --vocab_file.")
  flags.DEFINE_integer("pack_instances", 1, "Pack up to N finished instances into each "
                       "row (1..8; 1: one per row), each with its own [CLS] A [SEP] B [SEP], "
                       "masks and label; rows carry instance_ids and position_ids.")
  cli.define_common_flags()


def config_from_options(input_files: Union[str, Sequence[str]],
                        output: Union[str, Sequence[str]], vocab_file: Optional[str] = None,
                        **options) -> BertConfig:
  """The run's validated config: `create_dataset`'s and the command line's.

  --dupe_factor left out is 1 with masking="dynamic" (masks are drawn every
  epoch), else the reference's 10.
  """
  files = tuple(text_input.expand_patterns(run_lib.joined_locations(input_files),
                                           "--input_file"))
  outputs = tuple(p.strip() for p in run_lib.joined_locations(output).split(",") if p.strip())
  if options.get("masking") == "dynamic" and "dupe_factor" not in options:
    options["dupe_factor"] = 1
  for name in ("packing", "spm_model_file"):  # the flags' None is the config's ""
    if name in options:
      options[name] = options[name] or ""
  return run_lib.config_from_options(BertConfig, "bert_data.create_dataset", options,
                                     input_files=files, output_files=outputs,
                                     vocab_file=vocab_file or "")


def config_from_flags() -> BertConfig:
  options = run_lib.options_from_flags(FLAGS, BertConfig, given_only=["dupe_factor"])
  return config_from_options(FLAGS.input_file or "", FLAGS.output_file or "", **options)


def create_dataset(input_files: Union[str, Sequence[str]], output: Union[str, Sequence[str]],
                   vocab_file: Optional[str] = None, **options) -> run_lib.RunResult:
  """Writes BERT pretraining records: `python -m bert_data.create` as a function.

  The writing twin of `make_dataset`. `options` are the command line's flags
  (same names, defaults and checks: `max_seq_length=512`, `dupe_factor=5`,
  `masking="dynamic"`, `num_shards=8`, `overwrite=True`, `engine="beam"`, ...);
  `num_workers` left out uses every core, as the command line does.

  Args:
    input_files: text files or globs (a list, or comma-separated).
    output: the output file(s) (with `num_shards`, shards of it).
    vocab_file: the WordPiece vocab (or give `spm_model_file=`).

  Returns:
    The run's `RunResult` (`.meta`: the metadata written beside the records).

  Raises:
    UserError: bad settings or input, with the command line's one-line message.
  """
  return run_lib.create_from_options(config_from_options, generator.create,
                                     (input_files, output, vocab_file), options, **_OUTPUT)


def _rows_note(config: BertConfig, result: run_lib.RunResult) -> str:
  """' in N rows' for packed rows (--pack_instances > 1), else ''."""
  if config.pack_instances == 1:
    return ""
  return f" in {result.meta['counts']['records']:,} rows"


def _summary(config: BertConfig, result: run_lib.RunResult):
  summary = units.summary_of(result.meta)
  line = (f"bert_data: {summary['documents']:,} documents, {summary['tokens']:,} tokens, "
          f"{summary['instances']:,} instances{_rows_note(config, result)}"
          f"{cli.decode_note(summary)} -> "
          f"{','.join(config.output_files)}")
  return line, cli.summary("bert_data", list(config.output_files), summary, result.files)


_OUTPUT = dict(output="output_files", output_flag="--output_file", folder=False)
main = run_lib.generator(config_from_flags, generator.create, _summary, **_OUTPUT)
entry_point = cli.entry_point(define_flags, main)  # the `bert-data-create` console script


if __name__ == "__main__":
  entry_point()
