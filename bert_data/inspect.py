"""`python -m bert_data.inspect`: print bert_data records as tokens.

Like the reference's log of its first instances: tokens with masked positions
marked, segment ids, masked positions and labels, next-sentence label. Reads
records without TensorFlow.

Example:
  python -m bert_data.inspect --input_file=out/train.tfrecord \\
      --vocab_file=vocab.txt --max_records=3
"""

import sys
from typing import Optional

from absl import flags

from bert_data import schema as S
from textrecords import cli
from textrecords import dataset_files
from textrecords import example_codec
from textrecords import metadata
from textrecords import tfrecord
from textrecords import vocab as vocab_lib
from textrecords.errors import UserError
from textrecords.layout import DEFAULT_SPLIT

FLAGS = flags.FLAGS


def define_flags():
  flags.DEFINE_string("input_file", None, "A bert_data output file (or shard glob).")
  flags.DEFINE_string("vocab_file", None, "The vocab (or SentencePiece .model) the records "
                      "were made with.")
  flags.DEFINE_integer("max_records", 5, "How many records to print.")
  cli.define_common_flags()


def format_record(features: dict, tokens) -> str:
  """Readable text of one decoded record.

  Masked positions show as `[MASK]->label` style: `shown(label)`.
  """
  ids = features[S.INPUT_IDS]
  n = sum(features[S.INPUT_MASK])
  weights = features[S.MASKED_LM_WEIGHTS]
  positions = [p for p, w in zip(features[S.MASKED_LM_POSITIONS], weights) if w > 0]
  labels = [t for t, w in zip(features[S.MASKED_LM_IDS], weights) if w > 0]
  label_at = dict(zip(positions, labels))
  shown = []
  for i in range(n):
    tok = tokens[ids[i]] if ids[i] < len(tokens) else f"<{ids[i]}>"
    if i in label_at:
      tok = f"{tok}({tokens[label_at[i]]})"
    shown.append(tok)
  lines = [
      "tokens: " + " ".join(shown),
      "segment_ids: " + " ".join(str(s) for s in features[S.SEGMENT_IDS][:n]),
      "masked_lm_positions: " + " ".join(str(p) for p in positions),
      "masked_lm_labels: " + " ".join(tokens[t] for t in labels),
  ]
  if S.NEXT_SENTENCE_LABELS in features:  # packed records have no label
    label = features[S.NEXT_SENTENCE_LABELS][0]
    lines.append(f"next_sentence_label: {label} ({'random' if label else 'actual'} next)")
  return "\n".join(lines)


def main(argv):
  del argv
  if not FLAGS.input_file or not FLAGS.vocab_file:
    raise UserError("--input_file and --vocab_file are required")
  cli.check_range("max_records", FLAGS.max_records, 0, None)
  tokens = load_vocab_tokens(FLAGS.vocab_file)
  shown = 0
  for path, compression in record_files(FLAGS.input_file, FLAGS.vocab_file):
    for rec in tfrecord.read_records(path, compression):
      if shown >= FLAGS.max_records:
        return
      print(f"*** record {shown} ({path}) ***")
      print(format_record(example_codec.decode_example(rec), tokens))
      print()
      shown += 1


def load_vocab_tokens(path: str):
  """Token strings by id from a vocab file or a SentencePiece `.model`."""
  if path.endswith(".model"):
    from bert_data.sentencepiece_tokenizer import SentencePieceTokenizer  # pylint: disable=import-outside-toplevel
    return SentencePieceTokenizer(path).vocab_words()
  return vocab_lib.load_tokens(path)


def record_files(pattern: str, vocab_file: Optional[str] = None):
  """(path, compression) of the files to read (inspect, stats).

  Files with bert_data metadata are checked against it; a plain TFRecord
  file without metadata (e.g. written by google-research/bert) is read as is.
  """
  for found in dataset_files.find(pattern, allow_list=True):
    if found.meta is None:
      for path in found.names:
        yield path, ""
      continue
    if found.meta.get("package") != "bert_data":
      raise UserError(metadata.foreign_message(found.given, found.meta))
    meta = found.meta
    if vocab_file and meta.get("vocab_sha256") != vocab_lib.file_sha256(vocab_file):
      print(f"warning: {vocab_file} is not the vocab the records were made with",
            file=sys.stderr)
    names = found.names or metadata.split_record_names(meta, DEFAULT_SPLIT,
                                                       found.layout.meta_path)
    for path in metadata.verified_files(meta, found.layout, names, "size"):
      yield path, meta["compression"]


if __name__ == "__main__":
  define_flags()
  cli.run(main)
