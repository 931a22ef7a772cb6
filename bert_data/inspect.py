"""`python -m bert_data.inspect`: print bert_data records as tokens.

Like the reference's log of its first instances: tokens with masked positions
marked, segment ids, masked positions and labels, next-sentence label. Reads
records without TensorFlow.

Example:
  python -m bert_data.inspect --input_file=out/train.tfrecord \\
      --vocab_file=vocab.txt --max_records=3
"""

import dataclasses
from typing import Optional

from absl import flags

from bert_data import instance_packing
from bert_data import schema as S
from textrecords.runs import cli
from textrecords.reading import locations as dataset_files
from textrecords.wire import example_decoder
from textrecords.datasets import index as index_lib
from textrecords.datasets import metadata
from textrecords.files import storage
from textrecords.files import tfrecord
from textrecords.datasets import vocab as vocab_lib
from textrecords.errors import UserError
from textrecords.datasets.layout import DEFAULT_SPLIT
from bert_data.sentencepiece_tokenizer import SentencePieceTokenizer

FLAGS = flags.FLAGS


def define_flags():
  flags.DEFINE_string("input_file", None, "A bert_data output file (or shard glob).")
  flags.DEFINE_string("vocab_file", None, "The vocab (or SentencePiece .model) the records "
                      "were made with.")
  flags.DEFINE_integer("max_records", 5, "How many records to print.")
  cli.define_tool_flags()
  define_compression_flag()


def define_compression_flag():
  """--compression, of plain TFRecord files (inspect, stats; idempotent)."""
  if "compression" not in FLAGS:
    flags.DEFINE_string("compression", "", "Compression of plain TFRecord files (no "
                        "metadata): '' (none) or GZIP. Datasets with metadata say theirs.")


def compression_from_flag() -> Optional[str]:
  """--compression, checked, if given (else None: the metadata's, or none)."""
  return (tfrecord.check_compression(FLAGS.compression)
          if FLAGS["compression"].present else None)


# What label 1 of next_sentence_labels means, by the metadata's sentence_task.
_LABEL_MEANING = {"sop": ("in order", "swapped"), "nsp": ("actual next", "random next")}


def format_record(features: dict, tokens, task: Optional[str] = None) -> str:
  """Readable text of one decoded record.

  Masked positions show as `[MASK]->label` style: `shown(label)`. `task`
  (the metadata's sentence_task; None for plain files: NSP, the reference's)
  names what the label means.
  """
  features = {S.canonical_names(True).get(k, k): v for k, v in features.items()}
  name = lambda i: tokens[i] if 0 <= i < len(tokens) else f"<{i}>"  # noqa: E731
  ids = features[S.INPUT_IDS]
  n = sum(features[S.INPUT_MASK])
  weights = features.get(S.MASKED_LM_WEIGHTS, [])  # none in dynamic-masking records
  positions = [p for p, w in zip(features.get(S.MASKED_LM_POSITIONS, []), weights) if w > 0]
  labels = [t for t, w in zip(features.get(S.MASKED_LM_IDS, []), weights) if w > 0]
  label_at = dict(zip(positions, labels))
  shown = []
  for i in range(n):
    tok = name(ids[i])
    if i in label_at:
      tok = f"{tok}({name(label_at[i])})"
    shown.append(tok)
  lines = [
      "tokens: " + " ".join(shown),
      "segment_ids: " + " ".join(str(s) for s in features[S.SEGMENT_IDS][:n]),
      "masked_lm_positions: " + " ".join(str(p) for p in positions),
      "masked_lm_labels: " + " ".join(name(t) for t in labels),
  ]
  if S.NEXT_SENTENCE_LABELS in features:  # packed records have no label
    label = features[S.NEXT_SENTENCE_LABELS][0]
    meaning = _LABEL_MEANING.get(task or "nsp", _LABEL_MEANING["nsp"])[1 if label else 0]
    lines.append(f"next_sentence_label: {label} ({meaning})")
  return "\n".join(lines)


def format_row(features: dict, tokens, task: Optional[str] = None) -> str:
  """`format_record` of a record; a packed row (`--pack_instances`) shows
  each of its instances in turn, as it would be unpacked."""
  if S.INSTANCE_IDS not in features:
    return format_record(features, tokens, task)
  instances = instance_packing.unpack_row(features)
  n = len(features[S.INSTANCE_IDS])
  used = sum(sum(i[S.INPUT_MASK]) for i in instances)
  parts = [f"packed row: {len(instances)} instances, {used} of {n} positions used"]
  start = 0
  for k, inst in enumerate(instances, 1):
    length = sum(inst[S.INPUT_MASK])
    parts.append(f"- instance {k} (positions {start}-{start + length - 1}):\n"
                 + format_record(inst, tokens, task))
    start += length
  return "\n".join(parts)


def main(argv):
  del argv
  if not FLAGS.input_file or not FLAGS.vocab_file:
    raise UserError("--input_file and --vocab_file are required")
  cli.check_range("max_records", FLAGS.max_records, 0, None)
  tokens = load_vocab_tokens(FLAGS.vocab_file)
  shown = 0
  for f in record_files(FLAGS.input_file, FLAGS.vocab_file,
                        compression=compression_from_flag()):
    for index, rec in enumerate(tfrecord.read_records(f.path, f.compression)):
      if shown >= FLAGS.max_records:
        return
      features = _checked(example_decoder.decode_example(rec), f.v2_names, tokens, f.path,
                          index)
      print(f"*** record {shown} ({f.path}) ***")
      print(format_row(features, tokens, f.task))
      print()
      shown += 1


def _checked(features: dict, v2: bool, tokens, path: str, index: int) -> dict:
  """The record's features under the bert names, after checks that name the file.

  Raises:
    UserError: not a bert_data record, or token ids beyond the vocab.
  """
  renamed = S.canonical_names(v2 or S.V2_NAMES[S.INPUT_IDS] in features)
  features = {renamed.get(k, k): v for k, v in features.items()}
  missing = [k for k in (S.INPUT_IDS, S.INPUT_MASK, S.SEGMENT_IDS) if k not in features]
  if missing:
    raise UserError(f"{path}: record {index} is not a BERT pretraining record (no "
                    f"{', '.join(missing)}); bert_data.inspect shows bert_data records")
  ids = list(features[S.INPUT_IDS]) + list(features.get(S.MASKED_LM_IDS, []))
  if ids and max(ids) >= len(tokens):
    raise UserError(f"{path}: record {index} has token id {max(ids)} but --vocab_file has "
                    f"{len(tokens)} tokens: not the vocab the records were made with")
  return features


def load_vocab_tokens(path: str):
  """Token strings by id from a vocab file or a SentencePiece `.model`."""
  if path.endswith(".model"):
    return SentencePieceTokenizer(path).vocab_words()
  return vocab_lib.load_tokens(path)


@dataclasses.dataclass(frozen=True)
class BertFile:
  """One record file to read, with what its metadata says about it.

  Attributes:
    compression: "" or "GZIP".
    v2_names: the records use Model Garden's feature names.
    task: the metadata's sentence_task ("nsp", "sop", "none"); None for a
      plain file without metadata.
  """
  path: str
  compression: str
  v2_names: bool = False
  task: Optional[str] = None


def record_files(pattern: str, vocab_file: Optional[str] = None, *,
                 compression: Optional[str] = None):
  """The `BertFile`s to read (inspect, stats).

  Files with bert_data metadata are checked against it; a plain TFRecord
  file without metadata (e.g. written by google-research/bert) is read as is.

  Args:
    vocab_file: must be the vocab the metadata names (its sha256), if given.
    compression: of plain files (default none; a GZIP file without it is
      refused with a hint); for files with metadata it must agree with the
      metadata when given.
  Raises:
    UserError: another package's dataset, a contradicting compression,
      another vocab, a GZIP plain file read as uncompressed.
  """
  for found in dataset_files.find(pattern, allow_list=True):
    if found.meta is None:
      for path in found.names:
        if compression is None and storage.size(path) and index_lib.is_gzip(path):
          raise UserError(f"{path}: looks GZIP-compressed: pass --compression=GZIP")
        yield BertFile(path, compression or "")
      continue
    if found.meta.get("package") != "bert_data":
      raise UserError(metadata.foreign_message(found.given, found.meta))
    meta, where = found.meta, found.layout.meta_path
    if compression is not None and compression != meta["compression"]:
      raise UserError(f"--compression={compression or 'none'}: {where} says the records "
                      f"have compression {meta['compression'] or 'none'}; drop --compression "
                      "(it is for plain TFRecord files)")
    if vocab_file:
      check_vocab(vocab_file, meta, where)
    v2 = bool(meta.get("flags", {}).get("use_v2_feature_names", False))
    names = found.names or metadata.split_record_names(meta, DEFAULT_SPLIT, where)
    # The vocab is checked above (--vocab_file) or, for names, by the caller
    # (stats/inspect show ids with a warning for a changed one): not refused here.
    for path in metadata.verified_files(meta, found.layout, names, "size", companions=False):
      yield BertFile(path, meta["compression"], v2, meta.get("sentence_task", "nsp"))


def check_vocab(vocab_file: str, meta: dict, where: str):
  """Refuses a --vocab_file other than the one the records were made with.

  Raises:
    UserError: its sha256 is not the metadata's vocab_sha256.
  """
  if meta.get("vocab_sha256") != vocab_lib.file_sha256(vocab_file):
    raise UserError(f"--vocab_file={vocab_file} is not the vocab the records were made "
                    f"with (sha256 differs from {where}); pass the one given to "
                    "bert_data.create")


entry_point = cli.entry_point(define_flags, main)  # the `bert-data-inspect` console script


if __name__ == "__main__":
  entry_point()
