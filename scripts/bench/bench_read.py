r"""Times the three make_dataset readers against a baseline checkout, same run.

    git worktree add /tmp/base <base commit>     # or any copy of the older tree
    python scripts/bench/bench_read.py --baseline=/tmp/base [--rounds=3] [--epochs=3] [--scale=1]
        [--packages=bert_data,w2v_data,mt_data] [--w2v_negatives=stored] [--repeat]
        [--mode=evaluation] [--batch_size=w2v_data=512] [--w2v_data=DIR] [--bert_data=PATH]
        [--mt_data=DIR]

For each tree (this one and --baseline) a subprocess (PYTHONPATH = that tree)
writes one dataset per package from the bundled test corpora (repeated to a
few thousand examples, times --scale), then times, in training mode with a
seed and drop_remainder=True (issue 24: the read order against the one
before):
  seconds   `make_dataset(...)` (build, metadata; checksums were verified
            once before) and --epochs full passes over it;
  start_s   `make_dataset(...)` to its first batch (the fixed cost);
  pass_s    the fastest full pass after the first (a new iterator over the
            built dataset, as Keras makes each epoch): the feed rate,
            with its CPU seconds (all threads) as pass_cpu_s;
  fresh_s   start-up as a user sees it: from the `make_dataset(...)` call
            to the end of its first pass (fresh_cpu_s: its CPU seconds);
  examples_per_s  examples a second of the fastest later pass.
--mode=evaluation reads with training=False, verify="none" instead.
--w2v_data / --bert_data / --mt_data read a given dataset (e.g. PTB's w2v
records, made by this tree's create) in both trees instead of the generated
one (each tree's own create); --batch_size sets the batch per
package.
With --repeat, `make_dataset(..., repeat=True)` instead: --epochs epochs
through one iterator (start_s to its first batch, pass_s the fastest epoch
after the first: the later epochs' read path).
The trees alternate round by round, so both see the same machine load; the
report gives each tree's best figures and the ratios this/baseline per
package, the ratios of the medians over the rounds, and each round's pass_s
and fresh_s.
"""

import json
import os
import subprocess
import sys
import tempfile
from typing import Optional
from textrecords.runs import script_args

HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TESTDATA = os.path.join(HERE, "tests", "testdata")

# Runs inside each tree: writes the datasets once, then times reading.
CHILD = r"""
import json, os, sys, time
work, testdata, epochs, scale = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
packages, w2v_negatives = sys.argv[5].split(","), sys.argv[6]
repeat = sys.argv[7] == "1"
extra = json.loads(sys.argv[8])  # mode, batch sizes, given datasets
training = extra["mode"] == "training"

def repeated(src, dst, times, sep="\n"):
  text = open(src, encoding="utf-8").read().strip()
  with open(dst, "w", encoding="utf-8") as f:
    f.write(sep.join([text] * times) + "\n")
  return dst

out = {}
bert_out = extra.get("bert_data") or os.path.join(work, "bert", "train.tfrecord")
w2v_dir = extra.get("w2v_data") or os.path.join(work, "w2v")
mt_dir = extra.get("mt_data") or os.path.join(work, "mt")
if not os.path.exists(os.path.join(work, "done")):
  # Only the creates of the datasets made here are imported (a tree's
  # modules may not exist in another; given datasets need none).
  os.makedirs(os.path.join(work, "bert"))
  if "bert_data" in packages and not extra.get("bert_data"):
    try:
      from bert_data import generator
    except ImportError:  # a tree before bert_data/generator.py
      from bert_data import pipeline as generator
    from bert_data.config import BertConfig
    corpus = repeated(os.path.join(testdata, "bert_sample_text.txt"),
                      os.path.join(work, "bert.txt"), 40 * scale, "\n\n")
    generator.create(BertConfig(input_files=(corpus,), output_files=(bert_out,),
                               vocab_file=os.path.join(testdata, "vocab_uncased.txt"),
                               max_seq_length=128, max_predictions_per_seq=20, dupe_factor=2,
                               num_shards=4, num_workers=1, quiet=True))
  if "w2v_data" in packages and not extra.get("w2v_data"):
    from w2v_data.config import W2vConfig
    try:
      from w2v_data import generator as w2v_make
    except ImportError:  # a tree before w2v_data/generator.py
      from w2v_data import pipeline as w2v_make
    w2v_make.create(W2vConfig(
        input_file=repeated(os.path.join(testdata, "w2v_tiny.txt"),
                            os.path.join(work, "w.txt"), 20 * scale),
        output_dir=os.path.join(work, "w2v"), min_freq=2,
        subsample_t=1e-4,  # d2l's draw, every revision's old default (a literal: old trees)
        num_workers=1, num_shards=4, quiet=True))
  if "mt_data" in packages and not extra.get("mt_data"):
    from mt_data import config as mt_config
    try:
      from mt_data import generator as mt_make
    except ImportError:  # a tree before mt_data/generator.py
      try:
        from mt_data import pipeline as mt_make
      except ImportError:  # a tree before mt_data/pipeline.py
        from mt_data import create as mt_make
    mt_make.create(mt_config.MTConfig(
        input_file=repeated(os.path.join(testdata, "mt_pairs.txt"),
                            os.path.join(work, "m.txt"), 200 * scale),
        output_dir=os.path.join(work, "mt"), num_train=0, num_val=100, num_shards=4,
        num_workers=1), log=lambda m: None)
  open(os.path.join(work, "done"), "w").close()

import bert_data, mt_data, w2v_data

# training: seed 0, drop_remainder; evaluation: training=False, verify="none", the defaults
KW = (dict(training=True, seed=0, drop_remainder=True) if training
      else dict(training=False, verify="none"))
bs = extra["batch_size"]

def mt_reader(repeat=False):
  kw = dict(KW, repeat=repeat)
  try:
    return mt_data.make_dataset(mt_dir, bs.get("mt_data", 64),
                                split="train", **kw)
  except TypeError:  # a tree before issue 24: make_dataset(location, split, batch_size)
    return getattr(mt_data, "make_dataset")(mt_dir, "train",
                                            bs.get("mt_data", 64), **kw)

readers = {
    "bert_data": lambda repeat=False: bert_data.make_dataset(
        bert_out, bs.get("bert_data", 32), repeat=repeat, **KW),
    "w2v_data": lambda repeat=False: w2v_data.make_dataset(
        w2v_dir, bs.get("w2v_data", 256), negatives=w2v_negatives, repeat=repeat, **KW),
    "mt_data": mt_reader,
}
readers = {name: make for name, make in readers.items() if name in packages}

def rows(batch):  # examples in a batch (its first tensor's first dimension)
  import tensorflow as tf
  return int(tf.shape(tf.nest.flatten(batch)[0])[0])

def timed_passes(make):  # (seconds, batches, start_s, passes, fresh): new iterators, one dataset
  t0, c0 = time.perf_counter(), time.process_time()
  ds = make()
  it = iter(ds)
  first = next(it)
  start = time.perf_counter() - t0
  batches = 1 + sum(1 for _ in it)
  fresh = (time.perf_counter() - t0, time.process_time() - c0)
  out["_rows"] = rows(first)
  passes = []
  for _ in range(epochs - 1):
    t1, c1 = time.perf_counter(), time.process_time()
    batches += sum(1 for _ in ds)
    passes.append((time.perf_counter() - t1, time.process_time() - c1))
  return time.perf_counter() - t0, batches, start, passes, fresh

def timed_repeat(make, per_epoch):  # as timed_passes, epochs of one repeat=True iterator
  t0 = time.perf_counter()
  it = iter(make(repeat=True))
  next(it)
  start = time.perf_counter() - t0
  for _ in range(per_epoch - 1):
    next(it)
  passes = []
  for _ in range(epochs - 1):
    t1, c1 = time.perf_counter(), time.process_time()
    for _ in range(per_epoch):
      next(it)
    passes.append((time.perf_counter() - t1, time.process_time() - c1))
  return time.perf_counter() - t0, epochs * per_epoch, start, passes, (None, None)

for name, make in readers.items():
  ds = make()  # verifies the checksums (once per process), outside the timing
  seconds, batches, start, passes, fresh = (timed_repeat(make, sum(1 for _ in ds)) if repeat
                                     else timed_passes(make))
  out[name] = {"seconds": seconds, "batches": batches, "start_s": start,
               "pass_s": min(passes)[0] if passes else None,
               "pass_cpu_s": min(passes)[1] if passes else None,
               "fresh_s": fresh[0], "fresh_cpu_s": fresh[1],
               "examples_per_s": (out.pop("_rows", 0) * batches / epochs / min(passes)[0]
                                  if passes and not repeat else None)}
print(json.dumps(out))
"""


def run_tree(tree: str, work: str, epochs: int, scale: int, packages: str,
             w2v_negatives: str, repeat: bool = False, extra: Optional[dict] = None) -> dict:
  env = dict(os.environ, PYTHONPATH=tree, TF_CPP_MIN_LOG_LEVEL="3")
  p = subprocess.run([sys.executable, "-c", CHILD, work, TESTDATA, str(epochs), str(scale),
                      packages, w2v_negatives, "1" if repeat else "0",
                      json.dumps(extra or {"mode": "training", "batch_size": {}})],
                     cwd=tree, env=env, capture_output=True, text=True, check=False)
  if p.returncode != 0:
    sys.exit(f"error: {tree}: {p.stderr.strip().splitlines()[-1:]}")
  return json.loads(p.stdout.strip().splitlines()[-1])


PACKAGES = ("bert_data", "w2v_data", "mt_data")
FIGURES = ("seconds", "start_s", "pass_s", "pass_cpu_s", "fresh_s", "fresh_cpu_s",
           "examples_per_s")
HIGHER_IS_BETTER = ("examples_per_s",)


def _best(runs):
  """The lowest of each figure over the rounds (None where not measured)."""
  return {k: (max if k in HIGHER_IS_BETTER else min)(
      (r.get(k) for r in runs if r.get(k) is not None), default=None) for k in FIGURES}


def _median(runs):
  """The median of each figure over the rounds (None where not measured)."""
  out = {}
  for k in FIGURES:
    v = sorted(r.get(k) for r in runs if r.get(k) is not None)
    out[k] = None if not v else (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2
  return out


def _ratio(a, b):
  return None if a is None or b is None else round(a / b, 3)


def main():
  ap = script_args.ScriptParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--baseline", required=True, help="an older checkout of this repository")
  ap.add_argument("--rounds", type=int, default=3)
  ap.add_argument("--epochs", type=int, default=3, help="passes per run (>= 2 for pass_s)")
  ap.add_argument("--scale", type=int, default=1, help="times the default corpora")
  ap.add_argument("--packages", default=",".join(PACKAGES),
                  help="comma-separated packages to time (default all three)")
  ap.add_argument("--repeat", action="store_true",
                  help="time make_dataset(repeat=True): --epochs epochs through one iterator "
                  "(pass_s: the fastest epoch after the first)")
  ap.add_argument("--mode", default="training", choices=("training", "evaluation"),
                  help="training: seed 0, drop_remainder=True; evaluation: training=False, "
                  "verify='none' (examples_per_s: a pass's read rate)")
  ap.add_argument("--batch_size", default="",
                  help="per package, e.g. w2v_data=512,bert_data=256 (default 32/256/64)")
  ap.add_argument("--bert_data", default="", help="read this bert_data dataset (a records "
                  "path) instead of the generated one, in both trees")
  ap.add_argument("--w2v_data", default="", help="read this w2v_data folder (e.g. PTB's "
                  "records) instead of the generated one, in both trees")
  ap.add_argument("--mt_data", default="", help="read this mt_data folder instead of the "
                  "generated one, in both trees")
  ap.add_argument("--w2v_negatives", default="stored", choices=("stored", "fresh"),
                  help="w2v_data's negatives= (fresh: new noise words every epoch)")
  args = ap.parse_args()
  unknown = set(args.packages.split(",")) - set(PACKAGES)
  if unknown:
    sys.exit(f"error: --packages: unknown {', '.join(sorted(unknown))}; "
             f"choose from {', '.join(PACKAGES)}")
  trees = {"this": HERE, "baseline": os.path.abspath(args.baseline)}
  sizes = dict(kv.split("=") for kv in args.batch_size.split(",") if kv)
  extra = {"mode": args.mode, "batch_size": {k: int(v) for k, v in sizes.items()},
           "bert_data": os.path.abspath(args.bert_data) if args.bert_data else "",
           "w2v_data": os.path.abspath(args.w2v_data) if args.w2v_data else "",
           "mt_data": os.path.abspath(args.mt_data) if args.mt_data else ""}
  runs = {t: {} for t in trees}
  with tempfile.TemporaryDirectory() as tmp:
    for _ in range(args.rounds):
      for t, tree in trees.items():
        for pkg, r in run_tree(tree, os.path.join(tmp, t), args.epochs, args.scale,
                                    args.packages, args.w2v_negatives, args.repeat,
                                    extra).items():
          runs[t].setdefault(pkg, []).append(r)
  report = {}
  for pkg in runs["this"]:
    this, base = _best(runs["this"][pkg]), _best(runs["baseline"][pkg])
    report[pkg] = {
        "this": {k: None if v is None else round(v, 3) for k, v in this.items()},
        "baseline": {k: None if v is None else round(v, 3) for k, v in base.items()},
        "ratio": {k: _ratio(this[k], base[k]) for k in FIGURES},
        "ratio_of_medians": {k: _ratio(_median(runs["this"][pkg])[k],
                                       _median(runs["baseline"][pkg])[k]) for k in FIGURES},
        "pass_s_rounds": [[round(r["pass_s"], 3) for r in runs[t][pkg]] for t in trees],
        "fresh_s_rounds": [[None if r["fresh_s"] is None else round(r["fresh_s"], 3)
                            for r in runs[t][pkg]] for t in trees],
        "batches": [runs["this"][pkg][-1]["batches"], runs["baseline"][pkg][-1]["batches"]]}
  print(json.dumps({"rounds": args.rounds, "epochs": args.epochs, "scale": args.scale,
                    "repeat": args.repeat, **extra,
                    "w2v_negatives": args.w2v_negatives,
                    "load": os.getloadavg(), **report}, indent=1))


if __name__ == "__main__":
  main()
