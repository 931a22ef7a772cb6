r"""Writes English-French (or any tab-separated) translation pairs as TFRecords.

    python -m mt_data.create --input_file=fra.txt --output_dir=out/mt \
        [--num_train=512 --num_val=128 --min_freq=2 --tokenizer=word|bpe]

Output in --output_dir: train.tfrecord and valid.tfrecord (or shards
`train.tfrecord-00000-of-0000N`), src_vocab.txt, tgt_vocab.txt (and
src_tokenizer.json / tgt_tokenizer.json for bpe), and meta.json, written last.
Read it with `mt_data.make_dataset`. The run itself is `generator.create`.
"""

from typing import Sequence, Union

from absl import flags

from mt_data import config as config_lib
from mt_data import generator
from mt_data import units
from textrecords.runs import cli
from textrecords.runs import run as run_lib
from textrecords.errors import UserError

FLAGS = flags.FLAGS


def define_flags():
  """Defines this tool's flags (call only when running as the main program)."""
  cli.define_common_flags()
  flags.DEFINE_string("input_file", None, "Comma-separated paths or globs of "
                      "'source<TAB>target[<TAB>...]' UTF-8 files, read in order.")
  flags.DEFINE_string("output_dir", None, "Folder for the records, vocabularies and meta.json.")
  flags.DEFINE_integer("num_train", 512, "Train pairs: the first N pairs. 0 = all pairs "
                       "except the last --num_val.")
  flags.DEFINE_integer("num_val", 128, "Validation pairs, right after the train pairs. "
                       "0 = all the rest.")
  flags.DEFINE_integer("min_freq", 2, "Word tokens seen fewer times (over the pairs "
                       "written) map to <unk>; bpe: minimum merge frequency.")
  flags.DEFINE_enum("tokenizer", "word", list(config_lib.TOKENIZERS),
                    "word: d2l's space-split words; bpe: subwords trained with Hugging "
                    "Face tokenizers on the train pairs.")
  flags.DEFINE_integer("vocab_size", 8000, "bpe only: vocabulary size per language.")


def config_from_options(input_files: Union[str, Sequence[str]], output_dir: str,
                        **options) -> config_lib.MTConfig:
  """The run's validated config: `create_dataset`'s and the command line's."""
  if options.get("tokenizer", "word") == "word" and "vocab_size" in options:
    raise UserError(f"--vocab_size={options['vocab_size']}: has no effect with "
                    "--tokenizer=word (bpe only); drop it")
  return run_lib.config_from_options(config_lib.MTConfig, "mt_data.create_dataset", options,
                                     input_file=run_lib.joined_locations(input_files or ""),
                                     output_dir=run_lib.joined_locations(output_dir or ""))


def config_from_flags() -> config_lib.MTConfig:
  """The run's MTConfig from the parsed flags."""
  options = run_lib.options_from_flags(FLAGS, config_lib.MTConfig, given_only=["vocab_size"])
  return config_from_options(options.pop("input_file"), options.pop("output_dir"), **options)


def create_dataset(input_files: Union[str, Sequence[str]], output_dir: str,
                   **options) -> run_lib.RunResult:
  """Writes translation records: `python -m mt_data.create` as a function
  (as `bert_data.create_dataset`: options are the flags, e.g. `num_train=0`,
  `tokenizer="bpe"`; bad ones raise the command line's `UserError`).

  `input_files` are tab-separated pair files or globs (a list, or
  comma-separated); `output_dir` gets the records, vocabularies and
  meta.json. Returns the run's `RunResult`.
  """
  return run_lib.create_from_options(config_from_options, generator.create,
                                     (input_files, output_dir), options, **_OUTPUT)


def _summary(cfg: config_lib.MTConfig, result: run_lib.RunResult):
  summary = units.summary_of(result.meta, cfg.output_dir)  # as given (not a staging folder)
  summary["files_kept_from_earlier_run"] = result.files_kept
  summary["seconds"] = result.seconds
  train, valid = summary["splits"]["train"], summary["splits"]["valid"]
  vocab = summary["vocab"]
  line = (f"mt_data: {summary['counts']['lines_read']:,} lines, {train['pairs']:,} train + "
          f"{valid['pairs']:,} valid pairs, vocab {vocab['source']['size']:,} source / "
          f"{vocab['target']['size']:,} target{cli.decode_note(summary['decode_errors'])}"
          f" -> {summary['outputs'][0]}")
  return line, summary


_OUTPUT = dict(output="output_dir", output_flag="--output_dir", folder=True)
main = run_lib.generator(config_from_flags, generator.create, _summary, **_OUTPUT)
entry_point = cli.entry_point(define_flags, main)  # the `mt-data-create` console script


if __name__ == "__main__":
  entry_point()
