"""`python -m w2v_data.create`: skip-gram, CBOW or paragraph-vector records from text.

Example:
  python -m w2v_data.create --input_file=ptb.train.txt --output_dir=out/ptb_w2v \\
      --min_freq=10 --max_window_size=5 --num_noise_words=5 --num_shards=4
  python -m w2v_data.create --model=pv_dbow --doc_id_column --input_file=docs.tsv \\
      --output_dir=out/pv
"""


from typing import Sequence, Union

from absl import flags

from w2v_data import generator
from textrecords.runs import cli
from textrecords.runs import run as run_lib
from w2v_data import schema
from w2v_data import units
from w2v_data.config import D2L_SUBSAMPLE_T
from w2v_data.config import KEEP_EVERY_TOKEN
from w2v_data.config import SUBSAMPLE_FORMULAS
from w2v_data.config import W2vConfig

FLAGS = flags.FLAGS


def define_flags():
  """Defines the flags (called only when run as a program)."""
  flags.DEFINE_string("input_file", None, "Comma-separated text files or globs; one "
                      "sentence per line, tokens split on whitespace.")
  flags.DEFINE_string("output_dir", None, "Folder for train.tfrecord*, vocab.txt, meta.json.")
  flags.DEFINE_integer("min_freq", 10, "Tokens seen fewer times map to <unk> (id 0).")
  flags.DEFINE_float("subsample_t", KEEP_EVERY_TOKEN, "Subsampling threshold t. The "
                     "default 1 keeps every token (the trainers subsample afresh every "
                     f"epoch); {D2L_SUBSAMPLE_T:g} writes d2l's one subsampled draw.")
  # DEFINE_string, not DEFINE_enum: config.validate() gives the one-line error.
  flags.DEFINE_string("subsample_formula", "sqrt", "Keep probability: 'sqrt' = "
                      "min(1, sqrt(t/f)) (d2l) or 'word2vec' = min(1, sqrt(t/f) + t/f) "
                      f"(word2vec.c). One of {', '.join(SUBSAMPLE_FORMULAS)}.")
  flags.DEFINE_integer("max_window_size", 5, "Context windows are uniform on 1..this.")
  flags.DEFINE_integer("num_noise_words", 5, "K: noise words per context word.")
  flags.DEFINE_integer("random_seed", 12345, "Seed of every per-sentence random stream.")
  flags.DEFINE_string("layout", schema.DEFAULT_LAYOUT, "Record layout: 'sentence' (one "
                      "record per sentence, ragged features; fastest) or 'center' (one "
                      "record per center).")
  flags.DEFINE_string("model", schema.DEFAULT_MODEL, "What the records train: "
                      f"{', '.join(schema.MODELS)} (pv_*: paragraph vectors, one document "
                      "per line).")
  flags.DEFINE_bool("doc_id_column", False, "pv_dbow/pv_dm: lines are 'id<TAB>text' "
                    "(ids unique, no spaces); otherwise a document's id is its 0-based "
                    "line index in the input.")
  cli.define_common_flags()


def config_from_options(input_files: Union[str, Sequence[str]], output_dir: str,
                        **options) -> W2vConfig:
  """The run's validated config: `create_dataset`'s and the command line's."""
  return run_lib.config_from_options(W2vConfig, "w2v_data.create_dataset", options,
                                     input_file=run_lib.joined_locations(input_files or ""),
                                     output_dir=run_lib.joined_locations(output_dir or ""))


def config_from_flags() -> W2vConfig:
  options = run_lib.options_from_flags(FLAGS, W2vConfig)
  return config_from_options(options.pop("input_file"), options.pop("output_dir"), **options)


def create_dataset(input_files: Union[str, Sequence[str]], output_dir: str,
                   **options) -> run_lib.RunResult:
  """Writes word2vec records: `python -m w2v_data.create` as a function (as
  `bert_data.create_dataset`: options are the flags, e.g. `min_freq=5`,
  `model="cbow"`; bad ones raise the command line's `UserError`).

  `input_files` are text files or globs (a list, or comma-separated);
  `output_dir` gets the records, vocab.txt and meta.json. Returns the run's
  `RunResult`.
  """
  return run_lib.create_from_options(config_from_options, generator.create,
                                     (input_files, output_dir), options, **_OUTPUT)


def _summary(config: W2vConfig, result: run_lib.RunResult):
  meta = result.meta
  c = meta["counts"]
  line = (f"w2v_data: {units.counts_text(config.model, c, meta['vocab']['size'])}"
          f"{cli.decode_note(c)} -> {config.output_dir}")
  return line, cli.summary("w2v_data", config.output_dir, c, meta["files"],
                           vocab_size=meta["vocab"]["size"])


_OUTPUT = dict(output="output_dir", output_flag="--output_dir", folder=True)
main = run_lib.generator(config_from_flags, generator.create, _summary, **_OUTPUT)
entry_point = cli.entry_point(define_flags, main)  # the `w2v-data-create` console script


if __name__ == "__main__":
  entry_point()
