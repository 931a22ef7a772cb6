#!/usr/bin/env python3
"""Packed BERT rows (`bert_data.create --pack_instances=N`) against unpacked ones.

One run, default mode at --max_seq_length=512 on a corpus of short documents
(PTB's sentences grouped into documents of --doc_sentences sentences):

* create unpacked and packed (same instances), timed; the pack step alone
  (`RowPacker.pack_records` on the run's instances: packing, row assembly
  and row encoding) timed too, as a share of the packed create (best of
  --create_repeats runs each, and their medians);
* rows, padding share and instances per row (`bert_data.stats`);
* `scripts/train_bert_tiny.py`'s model trained for --steps steps per seed,
  unpacked with --batch_size rows, packed with the rows that hold about as
  many instances (so both see about the same instances per step): instances
  per second after a warm-up, and the masked-LM loss per prediction on
  held-out unpacked instances afterwards (the packed model's weights in the
  unpacked model), over --seeds seeds.

    python scripts/bench/bench_packing.py --ptb /work/shared/data/ptb.train.txt --out_dir /tmp/bp

(`--skip_training`: the create figures only; `--pack_instances=4`: the
README's create command.)

Prints one JSON object; the figures go to BENCHMARKS.md.
"""

import json
import os
import random
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
for _path in (_ROOT, os.path.join(_ROOT, "scripts")):  # the checkout; train_bert_tiny.py
  if _path not in sys.path:
    sys.path.insert(0, _path)

import numpy as np  # pylint: disable=wrong-import-position

from bert_data import instance_packing  # pylint: disable=wrong-import-position
from bert_data import generator  # pylint: disable=wrong-import-position
from bert_data import schema as S  # pylint: disable=wrong-import-position
from bert_data import stats  # pylint: disable=wrong-import-position
from bert_data.config import BertConfig  # pylint: disable=wrong-import-position
from textrecords.files import tfrecord  # pylint: disable=wrong-import-position
from textrecords.wire import example_decoder  # pylint: disable=wrong-import-position
from textrecords.runs import script_args  # pylint: disable=wrong-import-position

VOCAB = os.path.join(_ROOT, "bert_data", "sample", "vocab.txt")
SEQ, PRED = 512, 76


def short_documents(ptb: str, first: int, count: int, sizes, path: str, seed: int = 0) -> str:
  """Lines [first, first + count) of PTB as documents of sizes drawn from `sizes`
  (inclusive range) with a seeded RNG, one sentence per line, blank between."""
  with open(ptb, encoding="utf-8") as f:
    lines = [l.strip() for l in f][first:first + count]
  rng, docs, at = random.Random(seed), [], 0
  while at < len(lines):
    n = rng.randint(*sizes)
    docs.append("\n".join(l for l in lines[at:at + n] if l))
    at += n
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n\n".join(d for d in docs if d) + "\n")
  return path


def create(corpus: str, out: str, pack: int, seed: int = 12345, workers: int = 2) -> float:
  """Seconds of one `bert_data.create` run (dupe 1, default mode, 512)."""
  cfg = BertConfig(input_files=(corpus,), output_files=(out,), vocab_file=VOCAB,
                   max_seq_length=SEQ, max_predictions_per_seq=PRED, dupe_factor=1,
                   random_seed=seed, pack_instances=pack, num_workers=workers, quiet=True,
                   overwrite=True)
  start = time.perf_counter()
  generator.create(cfg)
  return time.perf_counter() - start


def pack_step_seconds(unpacked: str, pack: int, repeats: int) -> list:
  """Seconds of each of `repeats` runs of `RowPacker.pack_records` on the
  run's instances (as compact ones)."""
  compact = []
  for rec in tfrecord.read_records(unpacked):
    f = example_decoder.decode_example(rec)
    n, m = sum(f[S.INPUT_MASK]), int(sum(f[S.MASKED_LM_WEIGHTS]))
    compact.append(instance_packing.compact_instance(
        f[S.INPUT_IDS][:n], n - sum(f[S.SEGMENT_IDS]), f[S.NEXT_SENTENCE_LABELS][0],
        f[S.MASKED_LM_POSITIONS][:m], f[S.MASKED_LM_IDS][:m]))
  packer = instance_packing.RowPacker(
      SEQ, instance_packing.predictions_per_row(SEQ, PRED, pack, 0.15), pack)
  seconds = []
  for _ in range(repeats):
    start = time.perf_counter()
    packer.pack_records(compact)
    seconds.append(time.perf_counter() - start)
  return seconds


def _tiny():
  """scripts/train_bert_tiny.py as a module (scripts/ is on sys.path)."""
  import train_bert_tiny  # pylint: disable=import-outside-toplevel
  return train_bert_tiny


def train_one(tiny, path: str, pack: int, batch: int, steps: int, seed: int, warmup: int):
  """(model trained `warmup + steps` steps, seconds of the last `steps`) of one seed."""
  import bert_data  # pylint: disable=import-outside-toplevel
  import keras  # pylint: disable=import-outside-toplevel
  keras.utils.set_random_seed(seed)
  model = tiny.compile_model(tiny.build_model(
      30522, SEQ, PRED if pack == 1 else instance_packing.predictions_per_row(
          SEQ, PRED, pack, 0.15), pack_instances=pack if pack > 1 else 0))
  ds = bert_data.make_dataset(path, batch, training=True, seed=seed, repeat=True,
                              drop_remainder=True)
  marks = {}

  class Clock(keras.callbacks.Callback):
    """Time at the end of the warm-up and at the last step."""

    def on_train_batch_end(self, batch, logs=None):
      marks[batch] = time.perf_counter()

  model.fit(ds, epochs=1, steps_per_epoch=warmup + steps, verbose=0, callbacks=[Clock()])
  return model, marks[warmup + steps - 1] - marks[warmup - 1]


def mlm_loss_per_prediction(tiny, model, eval_path: str) -> float:
  """Masked-LM cross-entropy per prediction of `model`'s weights on unpacked records."""
  import bert_data  # pylint: disable=import-outside-toplevel
  plain = tiny.build_model(30522, SEQ, PRED)
  plain.set_weights(model.get_weights())
  total = count = 0.0
  for x, y, w in bert_data.make_dataset(eval_path, 32, training=False):
    logits = np.asarray(plain(x, training=False)["masked_lm"], np.float64)
    logits -= logits.max(axis=-1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
    nll = -np.take_along_axis(logp, y["masked_lm"].numpy()[..., None], axis=-1)[..., 0]
    weights = w["masked_lm"].numpy()
    total += float((nll * weights).sum())
    count += float(weights.sum())
  return total / count


def _training_figures(runs: dict, args, packed_batch: int) -> dict:
  """Speed and masked-LM loss figures of the training runs."""
  speed = {k: statistics.mean(r["instances_per_s"] for r in v) for k, v in runs.items()}
  loss = {k: _mean_se([r["mlm_loss"] for r in v]) for k, v in runs.items()}
  return {
      "batch_rows": {"plain": args.batch_size, "packed": packed_batch},
      "train_instances_per_s": {k: round(v, 2) for k, v in speed.items()},
      "train_speedup": round(speed["packed"] / speed["plain"], 3),
      "mlm_loss_mean_se": {k: [round(m, 4), round(se, 4)] for k, (m, se) in loss.items()},
      "mlm_loss_within_one_se": abs(loss["packed"][0] - loss["plain"][0]) <= loss["plain"][1],
      "steps": args.steps, "seeds": args.seeds,
  }


def _mean_se(values):
  return statistics.mean(values), statistics.stdev(values) / len(values) ** 0.5


def main(argv=None) -> int:
  p = script_args.ScriptParser(description=__doc__.split("\n\n", maxsplit=1)[0])
  p.add_argument("--ptb", required=True, help="ptb.train.txt (one sentence per line)")
  p.add_argument("--out_dir", required=True)
  p.add_argument("--lines", type=int, default=12000, help="PTB lines to train on")
  p.add_argument("--eval_lines", type=int, default=1500, help="held-out lines after them")
  p.add_argument("--doc_sentences", default="3,20", help="document sizes drawn in this range")
  p.add_argument("--pack_instances", type=int, default=8)
  p.add_argument("--batch_size", type=int, default=16, help="unpacked rows per step")
  p.add_argument("--steps", type=int, default=30)
  p.add_argument("--warmup", type=int, default=3)
  p.add_argument("--seeds", type=int, default=3)
  p.add_argument("--create_repeats", type=int, default=3,
                 help="creates (and pack steps) timed: best of, and median")
  p.add_argument("--skip_training", action="store_true", help="create figures only")
  args = p.parse_args(argv)
  os.makedirs(args.out_dir, exist_ok=True)
  sizes = tuple(int(v) for v in args.doc_sentences.split(","))
  corpus = short_documents(args.ptb, 0, args.lines, sizes,
                           os.path.join(args.out_dir, "short_docs.txt"))
  held_out = short_documents(args.ptb, args.lines, args.eval_lines, sizes,
                             os.path.join(args.out_dir, "held_out.txt"), seed=1)
  paths = {k: os.path.join(args.out_dir, f"{k}.tfrecord") for k in ("plain", "packed", "eval")}
  seconds = {"plain": [], "packed": []}
  for _ in range(args.create_repeats):  # alternated; the best of each
    seconds["plain"].append(create(corpus, paths["plain"], 1))
    seconds["packed"].append(create(corpus, paths["packed"], args.pack_instances))
  medians = {k: statistics.median(v) for k, v in seconds.items()}
  seconds = {k: min(v) for k, v in seconds.items()}
  create(held_out, paths["eval"], 1, seed=7)
  pack_runs = pack_step_seconds(paths["plain"], args.pack_instances, args.create_repeats)
  pack_s = min(pack_runs)
  summary = {k: stats.summarize(stats.collect(paths[k])) for k in ("plain", "packed")}
  per_row = summary["packed"]["instances"] / summary["packed"]["rows"]
  packed_batch = max(1, round(args.batch_size / per_row))
  tiny = _tiny()
  runs = {"plain": [], "packed": []}
  for seed in range(0 if args.skip_training else args.seeds):
    for kind, pack, batch, instances in (
        ("plain", 1, args.batch_size, args.batch_size),
        ("packed", args.pack_instances, packed_batch, packed_batch * per_row)):
      model, secs = train_one(tiny, paths[kind], pack, batch, args.steps, seed, args.warmup)
      runs[kind].append({"instances_per_s": instances * args.steps / secs,
                         "mlm_loss": mlm_loss_per_prediction(tiny, model, paths["eval"])})
      print(kind, seed, runs[kind][-1], file=sys.stderr, flush=True)
  figures = {
      "instances": summary["plain"]["instances"],
      "rows": {k: summary[k]["rows"] for k in summary},
      "rows_reduced": round(summary["plain"]["rows"] / summary["packed"]["rows"], 3),
      "padding_share": {k: summary[k]["padding_share"] for k in summary},
      "instances_per_row": summary["packed"]["instances_per_row"],
      "create_s": {k: round(v, 2) for k, v in seconds.items()},
      "pack_step_s": round(pack_s, 3),
      "pack_step_share_of_create": round(pack_s / seconds["packed"], 4),
      "create_s_median": {k: round(v, 2) for k, v in medians.items()},
      "pack_step_s_median": round(statistics.median(pack_runs), 3),
      "pack_step_share_of_create_median": round(statistics.median(pack_runs)
                                                / medians["packed"], 4),
      "create_overhead_share": round((seconds["packed"] - seconds["plain"])
                                     / seconds["packed"], 4),
  }
  if not args.skip_training:
    figures.update(_training_figures(runs, args, packed_batch))
  print(json.dumps(figures, indent=1))
  return 0


if __name__ == "__main__":
  sys.exit(main())
