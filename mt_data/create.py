r"""Writes English-French (or any tab-separated) translation pairs as TFRecords.

    python -m mt_data.create --input_file=fra.txt --output_dir=out/mt \
        [--num_train=512 --num_val=128 --min_freq=2 --tokenizer=word|bpe]

Output in --output_dir: train.tfrecord and valid.tfrecord (or shards
`train.tfrecord-00000-of-0000N`), src_vocab.txt, tgt_vocab.txt (and
src_tokenizer.json / tgt_tokenizer.json for bpe), and meta.json, written last.
Read it with `mt_data.make_dataset`. The run itself is `generator.create`.
"""

from absl import flags

from mt_data import config as config_lib
from mt_data import generator
from mt_data import units
from textrecords.runs import cli
from textrecords.runs import run as run_lib

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


def config_from_flags() -> config_lib.MTConfig:
  """The run's MTConfig from the parsed flags."""
  return config_lib.from_flags(FLAGS, cli.num_workers(FLAGS.num_workers))


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


main = run_lib.generator(config_from_flags, generator.create, _summary, output="output_dir",
                         output_flag="--output_dir", folder=True)
entry_point = cli.entry_point(define_flags, main)  # the `mt-data-create` console script


if __name__ == "__main__":
  entry_point()
