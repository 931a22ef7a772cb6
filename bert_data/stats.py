r"""`python -m bert_data.stats`: what a bert_data dataset holds, in numbers and one plot.

    python -m bert_data.stats --input_file=out/train.tfrecord [--plot=stats.png]
        [--vocab_file=vocab.txt] [--max_records=N] [--compression=GZIP]

`--input_file` is an output path, a shard glob, a `.meta.json` or a plain
TFRecord file of BERT records (the reference's too). Prints a JSON summary:

* `tokens_per_instance`: real tokens (input_mask ones), [CLS] and [SEP]s included;
* `segment_a`, `segment_b`: positions with segment id 0 / 1 among them
  (segment A counts [CLS] and its [SEP], B its closing [SEP]);
* `masked_per_instance`: predictions (masked_lm_weights > 0);
* `labels`: count of each next_sentence_labels value (and the task the
  metadata names: nsp or sop); absent for records without the label;
* `rows`, `padding_share`: records, and the share of their positions that
  are padding; for packed rows (`create --pack_instances`) also
  `instances_per_row` (its histogram: how many rows hold 1, 2, ... instances),
  the instances counted one by one everywhere else;
* `unk_share` and `top_tokens`: over the original tokens (masked positions
  take their labels back), with names when the vocab is known (`--vocab_file`,
  which must be the records' vocab (sha256), else the vocab or SentencePiece
  model the metadata names, looked up beside the metadata, then from here,
  and used only if its sha256 is the records').

Each distribution gives count, mean, min, max and a histogram. `--plot` saves
them as one PNG (needs matplotlib: `pip install 'textrecords[plot]'`).
Reads records without TensorFlow.
"""

import collections
import json
import os
import sys
from typing import Dict, List, Optional

import numpy as np
from absl import flags

from bert_data import instance_packing
from bert_data import schema as S
from bert_data.inspect import (compression_from_flag, define_compression_flag,
                               load_vocab_tokens, record_files)
from textrecords.runs import cli
from textrecords.reading import locations as dataset_files
from textrecords.wire import example_decoder
from textrecords.datasets import metadata
from textrecords.files import tfrecord
from textrecords.datasets import vocab as vocab_lib
from textrecords.errors import UserError

FLAGS = flags.FLAGS

_UNK_PIECES = ("[UNK]", "<unk>")
_TOP = 20
_CANONICAL = S.canonical_names(True)  # v2-named records read as the others


class Tally:
  """Running counts over decoded records (`add` one feature dict at a time)."""

  def __init__(self):
    self.lengths: List[int] = []
    self.seg_a: List[int] = []
    self.seg_b: List[int] = []
    self.masked: List[int] = []
    self.labels: collections.Counter = collections.Counter()
    self.token_counts = np.zeros(0, np.int64)
    self.per_row: List[int] = []  # instances in each record (packed rows: 1..N)
    self.positions = 0  # positions of all records, padding included
    self.packed = False

  def add(self, features: dict):
    """Counts one decoded record: a packed row's instances one by one."""
    features = {_CANONICAL.get(k, k): v for k, v in features.items()}
    self.positions += len(features[S.INPUT_IDS])
    if S.INSTANCE_IDS in features:
      self.packed = True
      instances = instance_packing.unpack_row(features)
      self.per_row.append(len(instances))
      for inst in instances:
        self._add_instance(inst)
    else:
      self.per_row.append(1)
      self._add_instance(features)

  def _add_instance(self, features: dict):
    ids = np.asarray(features[S.INPUT_IDS], np.int64)
    n = int(np.count_nonzero(features[S.INPUT_MASK])) if S.INPUT_MASK in features else len(ids)
    ids = ids[:n].copy()
    self.lengths.append(n)
    segments = np.asarray(features.get(S.SEGMENT_IDS, [0] * n)[:n])
    b = int(np.count_nonzero(segments))
    self.seg_a.append(n - b)
    self.seg_b.append(b)
    if S.MASKED_LM_WEIGHTS in features:
      used = np.asarray(features[S.MASKED_LM_WEIGHTS]) > 0
      self.masked.append(int(used.sum()))
      positions = np.asarray(features[S.MASKED_LM_POSITIONS], np.int64)[used]
      keep = positions < n
      ids[positions[keep]] = np.asarray(features[S.MASKED_LM_IDS], np.int64)[used][keep]
    if S.NEXT_SENTENCE_LABELS in features:
      self.labels[int(features[S.NEXT_SENTENCE_LABELS][0])] += 1
    if ids.size:
      top = int(ids.max()) + 1
      if top > self.token_counts.size:
        self.token_counts = np.pad(self.token_counts, (0, top - self.token_counts.size))
      self.token_counts[:top] += np.bincount(ids, minlength=top)


def distribution(values: List[int]) -> dict:
  """count, mean, min, max and histogram (value -> count) of integers.

  >>> distribution([3, 1, 3])
  {'count': 3, 'mean': 2.333, 'min': 1, 'max': 3, 'histogram': {1: 1, 3: 2}}
  """
  if not values:
    return {"count": 0, "mean": 0.0, "min": 0, "max": 0, "histogram": {}}
  return {"count": len(values), "mean": round(sum(values) / len(values), 3),
          "min": min(values), "max": max(values),
          "histogram": dict(sorted(collections.Counter(values).items()))}


def summarize(tally: Tally, tokens: Optional[List[str]] = None, task: Optional[str] = None,
              top: int = _TOP) -> dict:
  """The summary dict of a tally (see the module docstring)."""
  out = {"instances": len(tally.lengths), "rows": len(tally.per_row),
         "padding_share": round(1 - sum(tally.lengths) / tally.positions, 6)
                          if tally.positions else 0.0}
  if tally.packed:
    out["instances_per_row"] = distribution(tally.per_row)
  out.update({"tokens_per_instance": distribution(tally.lengths),
         "segment_a": distribution(tally.seg_a),
         "segment_b": distribution(tally.seg_b)})
  if tally.masked:
    out["masked_per_instance"] = distribution(tally.masked)
  if tally.labels:
    out["labels"] = {"task": task or "unknown",
                     **{str(k): v for k, v in sorted(tally.labels.items())}}
  counts = tally.token_counts
  total = int(counts.sum())
  name = (lambda i: tokens[i] if i < len(tokens) else f"<{i}>") if tokens else str
  if tokens is not None:
    unk = [i for i, t in enumerate(tokens) if t in _UNK_PIECES]
    out["unk_share"] = (round(float(sum(int(counts[i]) for i in unk if i < counts.size))
                              / total, 6) if total and unk else 0.0)
  order = sorted(np.flatnonzero(counts).tolist(), key=lambda i: (-int(counts[i]), i))[:top]
  out["top_tokens"] = [[name(i), int(counts[i])] for i in order]
  return out


def to_json(summary: dict) -> str:
  """JSON with one top-level key per line (histograms stay on their line).

  >>> print(to_json({"a": 1, "b": {"c": 2}}))
  {
   "a": 1,
   "b": {"c": 2}
  }
  """
  body = ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in summary.items())
  return "{\n" + body + "\n}"


def _meta_of(pattern: str):
  """(metadata, its path) of the first dataset, or (None, None) for plain files."""
  for found in dataset_files.find(pattern, allow_list=True):
    if found.meta is not None:
      if found.meta.get("package") != "bert_data":
        raise UserError(metadata.foreign_message(found.given, found.meta))
      return found.meta, found.layout.meta_path
  return None, None


def _meta_vocab(meta: Optional[dict], meta_path: Optional[str]) -> Optional[str]:
  """The vocab (or SentencePiece model) the metadata names, if it is still there
  and unchanged: a relative path is looked up beside the metadata, then where
  create found it (the fingerprint's absolute path), then from here; a file
  whose sha256 differs is not used, and a warning says when none is."""
  if not meta:
    return None
  given_flags = meta.get("flags") or {}
  absolute_flags = (meta.get("fingerprint") or {}).get("flags") or {}
  for key in ("spm_model_file", "vocab_file"):
    given = given_flags.get(key)
    if not given:
      continue
    candidates = [given] if os.path.isabs(given) else [
        os.path.join(os.path.dirname(os.path.abspath(meta_path)), given),
        absolute_flags.get(key) or given, given]
    found = [p for p in dict.fromkeys(candidates) if os.path.isfile(p)]
    for path in found:
      if vocab_lib.file_sha256(path) == meta.get("vocab_sha256"):
        return path
    problem = (f"{found[0]} (named by {meta_path}) is not the vocab the records were made "
               "with (sha256 differs)" if found else
               f"{given}, the vocab {meta_path} names, is not found")
    print(f"warning: {problem}: token ids shown; pass --vocab_file", file=sys.stderr)
  return None


def collect(pattern: str, max_records: Optional[int] = None, *,
            vocab_file: Optional[str] = None, compression: Optional[str] = None) -> Tally:
  """The tally of the records (`inspect.record_files`: a --vocab_file other
  than the records' is refused, `compression` is for plain files)."""
  tally = Tally()
  for f in record_files(pattern, vocab_file, compression=compression):
    for rec in tfrecord.read_records(f.path, f.compression):
      if max_records is not None and len(tally.per_row) >= max_records:
        return tally
      tally.add(example_decoder.decode_example(rec))
  return tally


def plot(tally: Tally, summary: dict, path: str, plt=None):
  """One PNG: lengths, segments, masked counts, labels and top tokens."""
  plt = plt or cli.pyplot()
  fig, axes = plt.subplots(2, 2, figsize=(10, 7))
  ax = axes[0][0]
  ax.hist(tally.lengths, bins=30)
  ax.set_title(f"tokens per instance (mean {summary['tokens_per_instance']['mean']})")
  ax = axes[0][1]
  ax.hist([tally.seg_a, tally.seg_b], bins=30, label=["segment A", "segment B"])
  ax.set_title("segment lengths")
  ax.legend()
  ax = axes[1][0]
  if tally.masked:
    ax.hist(tally.masked, bins=max(1, max(tally.masked) - min(tally.masked) + 1))
  ax.set_title("masked positions per instance")
  ax = axes[1][1]
  top = summary["top_tokens"][:10]
  ax.barh([str(t) for t, _ in reversed(top)], [c for _, c in reversed(top)])
  title = "top tokens"
  if "unk_share" in summary:
    title += f" ([UNK] share {summary['unk_share']:.4%})"
  if "labels" in summary:
    labels = {k: v for k, v in summary["labels"].items() if k != "task"}
    title += f"\n{summary['labels']['task']} labels {labels}"
  ax.set_title(title, fontsize=9)
  cli.save_figure(plt, fig, path)


def define_flags():
  flags.DEFINE_string("input_file", None, "bert_data records: output path, shard glob, "
                      ".meta.json or plain TFRecord files.")
  flags.DEFINE_string("vocab_file", None, "Vocab or SentencePiece .model for token names "
                      "and the [UNK] share (default: the one the metadata names).")
  flags.DEFINE_integer("max_records", None, "Read at most this many records.")
  flags.DEFINE_string("plot", None, "Save the distributions as one PNG here.")
  cli.define_tool_flags()
  define_compression_flag()


def main(argv):
  if len(argv) > 1:
    raise UserError(f"unexpected arguments: {' '.join(argv[1:])}")
  if not FLAGS.input_file:
    raise UserError("--input_file is required")
  if FLAGS.max_records is not None:
    cli.check_range("max_records", FLAGS.max_records, 1, None)
  plt = cli.pyplot() if FLAGS.plot else None
  meta, meta_path = _meta_of(FLAGS.input_file)
  vocab_path = FLAGS.vocab_file or _meta_vocab(meta, meta_path)
  tokens = load_vocab_tokens(vocab_path) if vocab_path else None
  tally = collect(FLAGS.input_file, FLAGS.max_records, vocab_file=vocab_path,
                  compression=compression_from_flag())
  if not tally.lengths:
    raise UserError(f"--input_file: {FLAGS.input_file} holds no records")
  task = meta.get("sentence_task", "nsp") if meta else None
  summary: Dict[str, object] = summarize(tally, tokens, task)
  if vocab_path:
    summary["vocab"] = vocab_path
  if FLAGS.plot:
    plot(tally, summary, FLAGS.plot, plt)
    summary["plot"] = FLAGS.plot
  print(to_json(summary))


entry_point = cli.entry_point(define_flags, main)  # the `bert-data-stats` console script


if __name__ == "__main__":
  entry_point()
