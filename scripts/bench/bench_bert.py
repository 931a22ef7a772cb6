#!/usr/bin/env python3
"""Benchmark bert_data.create: both modes vs a plain-Python baseline, same run.

Measures wall time, instances/s, input MB/s and peak RSS summed over the
process tree (polled every 50 ms with psutil) for:
  * baseline: the reference algorithm as the reference runs it: pure-Python
    tokenizer (tests/reference_tokenizer.py), one random.Random, protobuf
    tf.train.Example per instance, tf.io.TFRecordWriter, one process;
  * reference-compatible mode (--reference_compatible);
  * default mode (per-document RNGs, hash order), with --num_workers.

Usage:
  python scripts/bench/bench_bert.py --source=../shared/data/ptb.train.txt --size_mb=6.5
  python scripts/bench/bench_bert.py --corpus=my_corpus.txt --skip_baseline
  python scripts/bench/bench_bert.py --source=... --memory   # RSS at 26 MB and 4x that
  python scripts/bench/bench_bert.py --dynamic --source=...  # static vs dynamic masking:
      # size on disk (dupe 1 vs 10), make_dataset feed rate, mask statistics
  python scripts/bench/bench_bert.py --seq_memory  # peak RSS vs --max_seq_length on the
      # bundled 32 KB sample (dupe_factor 1): should grow linearly, not quadratically

The corpus is built from --source lines (blank lines ignored) grouped into
documents of 20-90 lines by a seeded RNG, until --size_mb; or taken as is
with --corpus.
"""

import json
import os
import random
import subprocess
import sys
import tempfile
import time

import psutil
from textrecords.runs import script_args

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VOCAB = os.path.join(REPO, "tests", "testdata", "vocab_uncased.txt")


def build_corpus(source: str, size_mb: float, path: str, seed: int = 0) -> dict:
  lines = [l.strip() for l in open(source, encoding="utf-8") if l.strip()]
  rng = random.Random(seed)
  size, i, docs = 0, 0, 0
  with open(path, "w", encoding="utf-8") as f:
    while size < size_mb * 1e6:
      n = rng.randint(20, 90)
      doc = "\n".join(lines[(i + k) % len(lines)] for k in range(n)) + "\n\n"
      i += n
      f.write(doc)
      size += len(doc.encode("utf-8"))
      docs += 1
  return {"bytes": size, "documents": docs}


def run_measured(cmd, env=None, pss: bool = False) -> dict:
  """Runs cmd; returns wall seconds and peak summed RSS of the process tree
  (and with `pss`, the peak summed PSS: shared pages counted once, sampled
  every 0.2 s since reading smaps is slower)."""
  start = time.perf_counter()
  proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  root = psutil.Process(proc.pid)
  peak = peak_pss = 0
  while proc.poll() is None:
    try:
      procs = [root] + root.children(recursive=True)
      rss = tree_pss = 0
      for p in procs:
        try:
          if pss:
            info = p.memory_full_info()
            tree_pss += info.pss
            rss += info.rss
          else:
            rss += p.memory_info().rss
        except psutil.Error:
          pass
      peak = max(peak, rss)
      peak_pss = max(peak_pss, tree_pss)
    except psutil.Error:
      pass
    time.sleep(0.2 if pss else 0.05)
  out, err = proc.communicate()
  wall = time.perf_counter() - start
  if proc.returncode != 0:
    raise SystemExit(f"command failed: {' '.join(cmd)}\n{err[-2000:]}")
  r = {"wall_s": wall, "peak_rss_mb": peak / 2**20, "stdout": out, "stderr": err}
  if pss:
    r["peak_pss_mb"] = peak_pss / 2**20
  return r


_SPIN = "import time\nt=time.perf_counter()\nx=0\nfor i in range(10_000_000): x += i*i\nprint(time.perf_counter()-t)"


def parallel_capacity(n: int) -> float:
  """How many cores' worth of pure-Python work n processes get here at once."""
  one = float(subprocess.run([sys.executable, "-c", _SPIN], capture_output=True,
                             text=True).stdout)
  procs = [subprocess.Popen([sys.executable, "-c", _SPIN], stdout=subprocess.PIPE, text=True)
           for _ in range(n)]
  times = [float(p.communicate()[0]) for p in procs]
  return n * one / max(times)


def count_records(meta_path: str) -> int:
  with open(meta_path) as f:
    return json.load(f)["counts"]["records"]


def bench_ours(corpus, out_dir, flags, name):
  out = os.path.join(out_dir, name, "train.tfrecord")
  os.makedirs(os.path.dirname(out), exist_ok=True)
  cmd = [sys.executable, "-m", "bert_data.create", f"--input_file={corpus}",
         f"--output_file={out}", f"--vocab_file={VOCAB}", "--quiet", "--overwrite", *flags]
  env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="3")
  r = run_measured(cmd, env)
  r["instances"] = count_records(out + ".meta.json")
  return r


BASELINE = r'''
import random, sys, time
sys.path.insert(0, {repo!r}); sys.path.insert(0, {tests!r})
import tensorflow as tf
from reference_tokenizer import ReferenceTokenizer
from bert_data import masking, instances as I
from bert_data.documents import CorpusBuilder, encode_lines
tok = ReferenceTokenizer({vocab!r}, True)
rng = random.Random(12345)
lines = [l.replace("\r", "").strip() for l in open({corpus!r}, encoding="utf-8")]
b = CorpusBuilder(); b.add(*encode_lines(lines, lambda ls: [tok.encode(l) for l in ls]))
corpus = b.build()
order = list(range(corpus.num_docs)); rng.shuffle(order); corpus = corpus.reordered(order)
words = tok.vocab_words() if hasattr(tok, "vocab_words") else list(tok.vocab)
ids = lambda t: tok.vocab[t]
p = masking.MaskingParams(0.15, 20, False, ids("[CLS]"), ids("[SEP]"), ids("[MASK]"),
                          tuple(ids(w) for w in words), bytes(len(tok.vocab) + 1))
insts = []
for _ in range({dupe}):
  for d in range(corpus.num_docs):
    insts += I.instances_from_document(d, corpus.document(d), corpus, rng, 125, 0.1,
                                       p.cls_id, p.sep_id, p)
rng.shuffle(insts)
def f(v): return tf.train.Feature(int64_list=tf.train.Int64List(value=list(v)))
with tf.io.TFRecordWriter({out!r}) as w:
  for x in insts:
    n, m = len(x.tokens), len(x.positions)
    feats = {{"input_ids": f(x.tokens + [0] * (128 - n)), "input_mask": f([1] * n + [0] * (128 - n)),
             "segment_ids": f([0] * x.num_a + [1] * (n - x.num_a) + [0] * (128 - n)),
             "masked_lm_positions": f(x.positions + [0] * (20 - m)),
             "masked_lm_ids": f(x.labels + [0] * (20 - m)),
             "masked_lm_weights": tf.train.Feature(float_list=tf.train.FloatList(value=[1.0] * m + [0.0] * (20 - m))),
             "next_sentence_labels": f([int(x.is_random_next)])}}
    w.write(tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString())
print(len(insts))
'''


def bench_baseline(corpus, out_dir, dupe):
  script = BASELINE.format(repo=REPO, tests=os.path.join(REPO, "tests"), vocab=VOCAB,
                           corpus=corpus, dupe=dupe, out=os.path.join(out_dir, "baseline.tfrecord"))
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  r = run_measured([sys.executable, "-c", script], env)
  r["instances"] = int(r["stdout"].strip().splitlines()[-1])
  return r


def report(name, r, mb, base=None):
  ips = r["instances"] / r["wall_s"]
  line = (f"| {name} | {r['instances']:,} | {r['wall_s']:.1f} | {ips:,.0f} | {mb / r['wall_s']:.2f} "
          f"| {r['peak_rss_mb']:,.0f} |")
  if base:
    line += f" {ips / (base['instances'] / base['wall_s']):.1f}x |"
  else:
    line += " 1.0x |"
  print(line, flush=True)


def main():
  ap = script_args.ScriptParser(description=__doc__)
  ap.add_argument("--corpus")
  ap.add_argument("--source", default=os.path.join(REPO, "tests", "testdata", "bert_sample_text.txt"))
  ap.add_argument("--size_mb", type=float, default=6.5)
  ap.add_argument("--dupe_factor", type=int, default=10)
  ap.add_argument("--num_workers", type=int, default=2)
  ap.add_argument("--skip_baseline", action="store_true")
  ap.add_argument("--whole_word_mask", action="store_true",
                  help="also time default mode with --do_whole_word_mask")
  ap.add_argument("--memory", action="store_true",
                  help="peak RSS of default mode at --size_mb=26 and 4x that")
  args = ap.parse_args()
  tmp = tempfile.mkdtemp(prefix="bench_bert_")
  sizes = [26.0, 104.0] if args.memory else [args.size_mb]
  for size in sizes:
    corpus = args.corpus
    if not corpus:
      corpus = os.path.join(tmp, f"corpus_{size:g}mb.txt")
      info = build_corpus(args.source, size, corpus)
      print(f"corpus: {info['bytes'] / 1e6:.1f} MB, {info['documents']:,} documents, "
            f"from {args.source}")
    mb = os.path.getsize(corpus) / 1e6
    print(f"\ndupe_factor={args.dupe_factor}, workers={args.num_workers}, "
          f"cores={psutil.cpu_count()}, parallel capacity of {args.num_workers} processes: "
          f"{parallel_capacity(args.num_workers):.2f} cores")
    print("| run | instances | wall s | instances/s | input MB/s | peak RSS MB | vs baseline |")
    print("|---|---|---|---|---|---|---|")
    base = None
    common = [f"--dupe_factor={args.dupe_factor}", f"--num_workers={args.num_workers}"]
    if not args.skip_baseline and not args.memory:
      base = bench_baseline(corpus, tmp, args.dupe_factor)
      report("baseline (reference algorithm, plain Python + protobuf)", base, mb)
    if not args.memory:
      report("reference-compatible", bench_ours(corpus, tmp, common + ["--reference_compatible"],
                                                "ref"), mb, base)
    report(f"default, {args.num_workers} workers", bench_ours(corpus, tmp, common, "default"),
           mb, base)
    if args.whole_word_mask:
      report(f"default, whole-word masking, {args.num_workers} workers",
             bench_ours(corpus, tmp, common + ["--do_whole_word_mask"], "wwm"), mb, base)
    if not args.memory:
      report("default, 1 worker", bench_ours(corpus, tmp, [f"--dupe_factor={args.dupe_factor}",
                                                          "--num_workers=1"], "default1"), mb, base)


# ---------------------------------------------------------------- dynamic masking

def _dataset_bytes(out):
  with open(out + ".meta.json") as f:
    return sum(x["bytes"] for x in json.load(f)["files"])


def _mask_stats(ds, batches, is_subword, mask_id=103):
  """Masked fraction vs target, 80/10/10 shares and whole-word integrity."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  tot = dict(n=0, k=0, target=0, mask=0, keep=0, pieces=0, whole=0, rows=0)
  for b, (x, y, w) in enumerate(ds):
    if b >= batches:
      break
    ids, pos = x["input_ids"].numpy(), x["masked_lm_positions"].numpy()
    lab, wt = y["masked_lm"].numpy(), w["masked_lm"].numpy()
    n = x["input_mask"].numpy().sum(axis=1)
    k = wt.sum(axis=1).astype(int)
    tot["rows"] += len(n)
    tot["n"] += int(n.sum())
    tot["k"] += int(k.sum())
    tot["target"] += int(np.minimum(wt.shape[1], np.maximum(1, np.round(n * 0.15))).sum())
    used = wt > 0
    out = np.take_along_axis(ids, pos, axis=1)
    tot["mask"] += int(((out == mask_id) & used).sum())
    tot["keep"] += int(((out == lab) & used).sum())
    # Whole words: every masked "##" piece has the piece before it masked too.
    sub = is_subword[lab] & used
    prev_masked = np.zeros_like(used)
    for i in range(len(n)):
      s = set(pos[i, :k[i]].tolist())
      prev_masked[i, :k[i]] = [p - 1 in s or ids[i, p - 1] == 102 for p in pos[i, :k[i]]]
    tot["pieces"] += int(sub.sum())
    tot["whole"] += int((sub & prev_masked).sum())
  k = max(tot["k"], 1)
  return {"rows": tot["rows"], "masked_per_token": tot["k"] / tot["n"],
          "target_per_token": tot["target"] / tot["n"], "mask": tot["mask"] / k,
          "keep": tot["keep"] / k, "random": 1 - (tot["mask"] + tot["keep"]) / k,
          "whole_word": tot["whole"] / max(tot["pieces"], 1), "pieces": tot["pieces"]}


def _feed_rate(path, batch, batches, feature_names="bert"):
  """(instances per wall second, CPU ms per batch: all threads of this process)."""
  import bert_data  # pylint: disable=import-outside-toplevel
  ds = bert_data.make_dataset(path, batch, seed=0, repeat=True, verify="size",
                              feature_names=feature_names)
  it = iter(ds)
  for _ in range(10):  # warm-up: tracing, XLA compiling, buffers
    next(it)
  start, cpu = time.perf_counter(), time.process_time()
  for _ in range(batches):
    next(it)
  return (batch * batches / (time.perf_counter() - start),
          (time.process_time() - cpu) / batches * 1e3)


def bench_dynamic(args, corpus, tmp):
  """Static (dupe 10) vs dynamic (dupe 1) records: size, feed rate, mask statistics."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  import bert_data  # pylint: disable=import-outside-toplevel
  common = [f"--num_workers={args.num_workers}", "--num_shards=4"]
  runs = {}
  for name, flags in (("static", ["--dupe_factor=10"]),
                      ("dynamic", ["--masking=dynamic"]),
                      ("static_wwm", ["--dupe_factor=10", "--do_whole_word_mask"]),
                      ("dynamic_wwm", ["--masking=dynamic", "--do_whole_word_mask"]),
                      ("dynamic_ngram3", ["--masking=dynamic", "--do_whole_word_mask",
                                          "--max_ngram_size=3"])):
    r = bench_ours(corpus, tmp, common + flags, name)
    r["path"] = os.path.join(tmp, name, "train.tfrecord")
    r["bytes"] = _dataset_bytes(r["path"])
    runs[name] = r
  print("\n| records | instances | create s | MB on disk | size vs static dupe 10 |")
  print("|---|---|---|---|---|")
  for name, r in runs.items():
    base = runs["static_wwm" if "wwm" in name or "ngram" in name else "static"]
    print(f"| {name} | {r['instances']:,} | {r['wall_s']:.1f} | {r['bytes'] / 1e6:.1f} | "
          f"{r['bytes'] / base['bytes']:.3f} |")
  print(f"\nmake_dataset feed rate, batch {args.feed_batch}, {args.feed_batches} batches after "
        f"10 warm-up, one process, same run, {args.feed_repeats} interleaved passes (wall: "
        "best pass; CPU: process CPU time per batch, least pass; CPU ratio = static CPU / "
        "this CPU, the throughput ratio when CPU-bound):")
  print("| records | instances/s | vs static | CPU ms / batch | CPU vs static | "
        "instances per CPU-second |")
  print("|---|---|---|---|---|---|")
  rates, cpus = {}, {}
  for rep in range(args.feed_repeats):  # interleaved: the machine is noisy
    for name in runs:
      r, c = _feed_rate(runs[name]["path"], args.feed_batch, args.feed_batches)
      rates.setdefault(name, []).append(r)
      cpus.setdefault(name, []).append(c)
  for name in runs:
    base = "static_wwm" if "wwm" in name or "ngram" in name else "static"
    best, cpu = max(rates[name]), min(cpus[name])
    print(f"| {name} | {best:,.0f} | {best / max(rates[base]):.2f}x | {cpu:.2f} | "
          f"{min(cpus[base]) / cpu:.2f}x | {args.feed_batch / cpu * 1e3:,.0f} |")
  print("all passes, instances/s: " + "; ".join(
      f"{n} " + ", ".join(f"{r:,.0f}" for r in rates[n]) for n in runs))
  if args.skip_stats:
    return
  vocab = [l.rstrip("\n") for l in open(VOCAB, encoding="utf-8")]
  is_sub = np.array([w.startswith("##") for w in vocab])
  print(f"\nmask statistics ({args.stat_rows:,} instances each; target = "
        "min(20, max(1, round(0.15 n))) per instance):")
  print("| records | instances | masked/token | target | [MASK] | kept | random | "
        "'##' pieces with the piece before masked |")
  print("|---|---|---|---|---|---|---|---|")
  for name in ("static", "dynamic", "static_wwm", "dynamic_wwm"):
    ds = bert_data.make_dataset(runs[name]["path"], 1000, seed=1, repeat=True, verify="size")
    st = _mask_stats(ds, args.stat_rows // 1000, is_sub)
    print(f"| {name} | {st['rows']:,} | {st['masked_per_token']:.4f} | "
          f"{st['target_per_token']:.4f} | {st['mask']:.4f} | {st['keep']:.4f} | "
          f"{st['random']:.4f} | {st['whole_word']:.4f} of {st['pieces']:,} |")


def main_dynamic():
  ap = script_args.ScriptParser(description="static vs dynamic masking figures")
  ap.add_argument("--dynamic", action="store_true")
  ap.add_argument("--source", default=os.path.join(REPO, "tests", "testdata",
                                                   "bert_sample_text.txt"))
  ap.add_argument("--corpus")
  ap.add_argument("--size_mb", type=float, default=6.5)
  ap.add_argument("--num_workers", type=int, default=2)
  ap.add_argument("--feed_batch", type=int, default=256)
  ap.add_argument("--feed_batches", type=int, default=150)
  ap.add_argument("--feed_repeats", type=int, default=3)
  ap.add_argument("--skip_stats", action="store_true", help="feed rates only")
  ap.add_argument("--stat_rows", type=int, default=100000)
  args = ap.parse_args()
  tmp = tempfile.mkdtemp(prefix="bench_bert_dyn_")
  corpus = args.corpus
  if not corpus:
    corpus = os.path.join(tmp, "corpus.txt")
    info = build_corpus(args.source, args.size_mb, corpus)
    print(f"corpus: {info['bytes'] / 1e6:.1f} MB, {info['documents']:,} documents, "
          f"from {args.source}")
  bench_dynamic(args, corpus, tmp)


def main_seq_memory(lengths=(4096, 16384, 65536)):
  """Peak RSS of create at growing --max_seq_length (issue 21 item 3)."""
  corpus = os.path.join(REPO, "bert_data", "sample", "sample_corpus.txt")
  tmp = tempfile.mkdtemp(prefix="bench_bert_seq_")
  print("| --max_seq_length | wall s | peak RSS MB | RSS / previous |\n|---|---|---|---|")
  prev = None
  for n in lengths:
    r = bench_ours(corpus, tmp, [f"--max_seq_length={n}", "--dupe_factor=1",
                                 "--num_workers=1"], f"seq{n}")
    ratio = f"{r['peak_rss_mb'] / prev:.2f}x" if prev else ""
    print(f"| {n} | {r['wall_s']:.1f} | {r['peak_rss_mb']:,.0f} | {ratio} |", flush=True)
    prev = r["peak_rss_mb"]


if __name__ == "__main__":
  if "--dynamic" in sys.argv:
    main_dynamic()
  elif "--seq_memory" in sys.argv:
    main_seq_memory()
  else:
    main()
