#!/usr/bin/env python3
"""Benchmarks w2v_data against a pure-Python baseline, on PTB, in one run.

The baseline implements the algorithm the way d2l's word2vec chapter does
(Python lists, `random`, a cached `random.choices` noise generator with
rejection, a per-example batchify into arrays); it is written here from the
algorithm's description, not copied.

Measures:
  - create, whole processes: `python -m w2v_data.create` (both layouts) vs the
    baseline's pipeline (read, vocab, subsample, centers/contexts, negatives);
  - one epoch of batches (batch 512): make_dataset vs the baseline's batching;
  - the PTB figures (sentences, vocab, 'the' before/after subsampling, centers,
    pairs, noise distribution) against d2l's.

  - with --scaling_repeats=R: 1 vs 2 workers (issue 13), R interleaved pairs
    of the command (`python -m w2v_data.create`), of whole `create` runs in
    this script's processes, and of the parallel read alone (read, clean,
    count, encode to ids: `corpus.load_corpus`) in fresh processes; reports
    every ratio and their range, the two phases of create (read and count;
    sample, encode and write) timed apart, and the most a perfect split of
    the run in two could give the whole process; with --scaling_scale=S
    also on PTB concatenated S times (where the fixed cost of starting
    Python weighs less);
  - with --memory_scale=S: peak RSS of the main process and of the largest
    worker (getrusage) for create on PTB concatenated S times, with 1, 2 and 4
    workers.

Usage:
  python scripts/bench/bench_w2v.py --ptb=/path/to/ptb.train.txt [--work_dir=/tmp/bench_w2v]
  python scripts/bench/bench_w2v.py --ptb=... --skip_main --scaling_repeats=5 --memory_scale=10

Before timing, the packages' modules are compiled to bytecode (as `pip
install` does): a checkout run with PYTHONDONTWRITEBYTECODE=1 would otherwise
compile them from source in every timed process (about 50 ms).
"""

import collections
import json
import math
import os
import platform
import random
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)
from textrecords.runs import script_args  # pylint: disable=wrong-import-position

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# Every create here writes d2l's one subsampled draw (the baseline's work and
# TARGETS' figures; w2v_data.create's default keeps every token).
D2L_FLAG = "--subsample_t=1e-4"
TARGETS = {"sentences": 42069, "vocab": 6719, "the": 50770, "the_after": 2040,
           "keep_the": 0.0402, "centers": 342700, "pairs": 1501200,
           "noise": {"the": 0.0197, "N": 0.0141, "of": 0.0114}}


# --- the pure-Python baseline ------------------------------------------------------------

def baseline_pipeline(path, min_freq=10, t=1e-4, max_window=5, k=5, seed=0):
  """Returns (tokens, centers, contexts, negatives, times) computed with plain Python."""
  rnd = random.Random(seed)
  times = {}
  t0 = time.perf_counter()
  with open(path, encoding="utf-8") as f:
    lines = f.read().split("\n")
  sentences = [line.split() for line in lines]
  counter = collections.Counter(tok for s in sentences for tok in s)
  ranked = sorted(counter.items(), key=lambda kv: kv[1], reverse=True)
  tokens = ["<unk>"] + [tok for tok, c in ranked if c >= min_freq and tok != "<unk>"]
  index = {tok: i for i, tok in enumerate(tokens)}
  corpus = [[index.get(tok, 0) for tok in s] for s in sentences]
  times["read+vocab"] = time.perf_counter() - t0

  t0 = time.perf_counter()
  corpus = [[i for i in s if i != 0] for s in corpus]
  counts = collections.Counter(i for s in corpus for i in s)
  n = sum(counts.values())
  subsampled = [[i for i in s if rnd.uniform(0, 1) < math.sqrt(t / counts[i] * n)]
                for s in corpus]
  times["subsample"] = time.perf_counter() - t0

  t0 = time.perf_counter()
  centers, contexts = [], []
  for s in subsampled:
    if len(s) < 2:
      continue
    centers += s
    for i in range(len(s)):
      w = rnd.randint(1, max_window)
      idx = list(range(max(0, i - w), min(len(s), i + 1 + w)))
      idx.remove(i)
      contexts.append([s[j] for j in idx])
  times["centers+contexts"] = time.perf_counter() - t0

  t0 = time.perf_counter()
  population = list(range(1, len(tokens)))
  weights = [counts[i] ** 0.75 for i in population]
  cache = []

  def draw():
    if not cache:
      cache.extend(rnd.choices(population, weights, k=10000))
    return cache.pop()

  negatives = []
  for ctx in contexts:
    negs = []
    while len(negs) < len(ctx) * k:
      x = draw()
      if x not in ctx:
        negs.append(x)
    negatives.append(negs)
  times["negatives"] = time.perf_counter() - t0
  return tokens, centers, contexts, negatives, times


def baseline_epoch(centers, contexts, negatives, batch_size=512, seed=0):
  """One shuffled epoch of padded batches as arrays; returns (seconds, batches)."""
  rnd = random.Random(seed)
  t0 = time.perf_counter()
  order = list(range(len(centers)))
  rnd.shuffle(order)
  batches = 0
  for s in range(0, len(order), batch_size):
    batch = order[s:s + batch_size]
    max_len = max(len(contexts[i]) + len(negatives[i]) for i in batch)
    cs, rows, masks, labels = [], [], [], []
    for i in batch:
      cur = len(contexts[i]) + len(negatives[i])
      cs.append([centers[i]])
      rows.append(contexts[i] + negatives[i] + [0] * (max_len - cur))
      masks.append([1] * cur + [0] * (max_len - cur))
      labels.append([1] * len(contexts[i]) + [0] * (max_len - len(contexts[i])))
    _ = (np.array(cs), np.array(rows), np.array(masks, np.float32),
         np.array(labels, np.float32))
    batches += 1
  return time.perf_counter() - t0, batches


# --- the benchmark -----------------------------------------------------------------------

def _timed(cmd, env=None, cpu=None):
  """Runs cmd; returns (wall s, stdout). `cpu`, a list, gets the CPU seconds of
  the process and its workers (getrusage CHILDREN, less distorted by other
  load on the machine than wall time)."""
  import resource  # pylint: disable=import-outside-toplevel
  before = resource.getrusage(resource.RUSAGE_CHILDREN)
  t0 = time.perf_counter()
  p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                     env=None if env is None else {**os.environ, **env})
  wall = time.perf_counter() - t0
  after = resource.getrusage(resource.RUSAGE_CHILDREN)
  if cpu is not None:
    cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
  if p.returncode != 0:
    sys.exit(f"failed: {' '.join(cmd)}\n{p.stderr}")
  return wall, p.stdout


def _epochs(ds, n=2):
  out = []
  for _ in range(n):
    t0 = time.perf_counter()
    centers = 0
    for _, y, _ in ds:
      centers += int(y.shape[0])
    out.append(time.perf_counter() - t0)
  return out, centers


def main():
  args = _parse_args()
  if args.measure:
    _measure(args.ptb, json.loads(args.measure))
    return
  if not args.baseline_only:
    _compile_bytecode()
  if args.baseline_only:
    tokens, centers, contexts, negatives, times = baseline_pipeline(args.ptb)
    print(json.dumps({"vocab": len(tokens), "centers": len(centers),
                      "pairs": sum(map(len, contexts)), "times": times}))
    return
  os.makedirs(args.work_dir, exist_ok=True)
  res = {"date": time.strftime("%Y-%m-%d"), "machine": {
      "cpus": os.cpu_count(), "python": platform.python_version(),
      "load_avg_start": os.getloadavg()}}
  if args.skip_main:
    _scaling_and_memory(args, res)
    return
  _time_creates(args, res)
  if not args.create_only:
    _ptb_figures(args, res)
    _time_epochs(args, res)
  res["machine"]["load_avg_end"] = os.getloadavg()
  with open(os.path.join(args.work_dir, "results.json"), "w") as f:
    json.dump(res, f, indent=2)
  _report(res)
  if not args.create_only and (args.scaling_repeats or args.memory_scale):
    _scaling_and_memory(args, res)


def _parse_args():
  p = script_args.ScriptParser(description=__doc__.split("\n")[0])
  p.add_argument("--ptb", required=True, help="d2l's ptb.train.txt")
  p.add_argument("--work_dir", default="/tmp/bench_w2v")
  p.add_argument("--num_workers", type=int, default=None)
  p.add_argument("--repeats", type=int, default=3, help="timed runs; the best is reported")
  p.add_argument("--baseline_only", action="store_true", help=script_args.SUPPRESS)
  p.add_argument("--measure", default=None, help=script_args.SUPPRESS)
  p.add_argument("--create_only", action="store_true",
                 help="only the create timings (no PTB figures, no epochs)")
  p.add_argument("--skip_main", action="store_true",
                 help="skip the baseline comparison (only --scaling_repeats/--memory_scale)")
  p.add_argument("--scaling_repeats", type=int, default=0,
                 help="1 vs 2 worker pairs to time (0: skip)")
  p.add_argument("--memory_scale", type=int, default=0,
                 help="peak memory on PTB x this many copies (0: skip)")
  p.add_argument("--scaling_scale", type=int, default=1,
                 help="also time 1 vs 2 workers on PTB x this many copies (1: PTB only)")
  return p.parse_args()


def _time_creates(args, res):
  """Times the creates (and the baseline) into `res`."""
  py = sys.executable
  workers = [] if args.num_workers is None else [f"--num_workers={args.num_workers}"]
  # 1. create, whole processes; runs interleaved, best of --repeats (shared machine).
  # A first, untimed run fills numba's cache (the kernels compile once).
  _timed([py, "-m", "w2v_data.create", f"--input_file={args.ptb}",
          f"--output_dir={os.path.join(args.work_dir, 'warmup')}", "--overwrite", "--quiet",
          D2L_FLAG])
  runs = collections.defaultdict(list)
  cpus = collections.defaultdict(list)
  for _ in range(args.repeats):
    wall, out = _timed([py, os.path.abspath(__file__), "--baseline_only", f"--ptb={args.ptb}"],
                       cpu=cpus["baseline_create"])
    runs["baseline_create"].append(wall)
    res["baseline_create"] = json.loads(out)
    for layout in ("sentence", "center"):
      for extra in ([], ["--num_workers=1"]) if not workers else (workers,):
        d = os.path.join(args.work_dir, layout)
        key = f"create_{layout}" + ("_1worker" if extra == ["--num_workers=1"] else "")
        wall, _ = _timed([py, "-m", "w2v_data.create", f"--input_file={args.ptb}",
                          f"--output_dir={d}", f"--layout={layout}", "--overwrite", "--quiet",
                          D2L_FLAG, *extra], cpu=cpus[key])
        runs[key].append(wall)
        res[key] = {"bytes": sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))}
    # The numpy code path (numba kernels off; the same bytes).
    d = os.path.join(args.work_dir, "numpy")
    wall, _ = _timed([py, "-m", "w2v_data.create", f"--input_file={args.ptb}",
                      f"--output_dir={d}", "--overwrite", "--quiet", D2L_FLAG, *workers],
                     env={"TEXTRECORDS_NUMBA": "0"}, cpu=cpus["create_sentence_numpy"])
    runs["create_sentence_numpy"].append(wall)
    res["create_sentence_numpy"] = {"bytes": sum(os.path.getsize(os.path.join(d, f))
                                                 for f in os.listdir(d))}
  for key, walls in runs.items():
    res[key].update(wall_s=min(walls), runs_s=walls, cpu_s=min(cpus[key]), cpu_runs_s=cpus[key])


def _ptb_figures(args, res):
  """PTB's figures (subsampling, centers, pairs, noise) into `res`."""
  from w2v_data import corpus as corpus_lib  # pylint: disable=import-outside-toplevel
  from w2v_data import sampling  # pylint: disable=import-outside-toplevel
  meta = json.load(open(os.path.join(args.work_dir, "sentence", "meta.json")))
  c = corpus_lib.load_corpus([args.ptb], 10)
  sampler = sampling.SkipGramSampler.build(c.counts, subsample_t=1e-4, max_window_size=5,
                                           num_noise_words=5, seed=meta.get("random_seed", meta.get("seed")))
  starts = np.r_[0, np.cumsum(c.lengths)]
  the = c.tokens.index("the")
  kept = np.zeros(len(c.tokens), np.int64)
  neg_hist = np.zeros(len(c.tokens), np.int64)
  for lo in range(0, c.num_sentences, 4096):
    hi = min(lo + 4096, c.num_sentences)
    b = sampler.sample(c.ids[starts[lo]:starts[hi]], c.lengths[lo:hi], np.arange(lo, hi))
    kept += np.bincount(b.centers, minlength=len(c.tokens))
    neg_hist += np.bincount(b.negatives, minlength=len(c.tokens))
  probs = sampling.noise_probabilities(c.counts)
  top = np.argsort(-probs)[:3]
  res["ptb"] = {
      "sentences": meta["counts"]["sentences"], "vocab": meta["vocab"]["size"],
      "the": int(c.counts[the]), "keep_the": float(sampler.keep_prob[the]),
      "the_after_expected": float(sampler.keep_prob[the] * c.counts[the]),
      "the_as_center": int(kept[the]),
      "centers": meta["counts"]["centers"], "pairs": meta["counts"]["pairs"],
      "max_row_length": meta["counts"]["max_row_length"],
      "noise_top": [(c.tokens[i], float(probs[i]), float(neg_hist[i] / neg_hist.sum()))
                    for i in top],
      "baseline_centers": res["baseline_create"]["centers"],
      "baseline_pairs": res["baseline_create"]["pairs"]}



def _time_epochs(args, res):
  """One epoch of batches of 512: best of --repeats epochs (after a first one)."""
  tokens, centers, contexts, negatives, _ = baseline_pipeline(args.ptb)
  base = [baseline_epoch(centers, contexts, negatives, seed=r)[0] for r in range(args.repeats)]
  res["baseline_epoch_s"], res["baseline_epoch_runs_s"] = min(base), base
  del tokens, centers, contexts, negatives
  import w2v_data  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  _ = tf.constant(1) + 1  # TensorFlow's start is not a make_dataset time
  for layout in ("sentence", "center"):
    d = os.path.join(args.work_dir, layout)
    for name, kw in (("", {}), ("_streamed", {"in_memory": False}),
                     ("_autotune", {"in_memory": False}), ("_pad60", {"pad_to": 60}),
                     ("_fresh", {"negatives": "fresh"})):
      if layout == "center" and name not in ("", "_streamed"):
        continue
      t0 = time.perf_counter()
      ds = w2v_data.make_dataset(d, 512, seed=0, **kw)
      build_s = time.perf_counter() - t0
      if name == "_autotune":  # tf.data's autotuning back on (make_dataset turns it off)
        options = tf.data.Options()
        options.autotune.enabled = True
        ds = ds.with_options(options)
      times, n = _epochs(ds, 1 + args.repeats)
      res[f"epoch_{layout}{name}"] = {"first_s": times[0], "second_s": min(times[1:]),
                                      "runs_s": times, "centers": n, "build_s": build_s}


def _compile_bytecode():
  """Writes the .pyc files of the packages the timed processes import."""
  import compileall  # pylint: disable=import-outside-toplevel
  for package in ("textrecords", "w2v_data"):
    compileall.compile_dir(os.path.join(ROOT, package), quiet=1)


def _measure(path, spec):
  """Runs in a fresh process: times load_corpus or create; prints JSON with peak RSS."""
  import resource  # pylint: disable=import-outside-toplevel
  from w2v_data import corpus as corpus_lib  # pylint: disable=import-outside-toplevel
  from w2v_data import generator  # pylint: disable=import-outside-toplevel
  from w2v_data.config import W2vConfig  # pylint: disable=import-outside-toplevel
  from w2v_data.config import D2L_SUBSAMPLE_T  # pylint: disable=import-outside-toplevel
  t0 = time.perf_counter()
  cpu0 = time.process_time()
  if spec["what"] == "read":
    c = corpus_lib.load_corpus(path.split(","), 10, num_workers=spec["workers"])
    out = {"tokens": int(c.raw_tokens)}
  else:
    if spec.get("release_memory"):  # workers give freed memory back (glibc's default)
      from textrecords.engine import parallel  # pylint: disable=import-outside-toplevel
      parallel.keep_freed_memory = lambda *a, **kw: False
    result = generator.create(W2vConfig(input_file=path, output_dir=spec["out"],
                                        overwrite=True, quiet=True,
                                        num_workers=spec["workers"],
                                        subsample_t=D2L_SUBSAMPLE_T))
    meta = result.meta
    # phase 1: read, clean and count (parallel): the generator's passes
    phases = {"count_s": result.seconds.get("passes", 0.0)}
    out = {"centers": meta["counts"]["centers"], **phases}
  out["wall_s"] = time.perf_counter() - t0
  if "count_s" in out:  # phase 2: vocab, then sample, encode and write (parallel)
    out["rest_s"] = out["wall_s"] - out["count_s"]
  out["cpu_main_in_run_s"] = time.process_time() - cpu0  # without interpreter start, imports
  # VmHWM: this process's peak RSS since exec (getrusage's SELF maxrss would
  # carry over the peak of the process that started us, across exec).
  with open("/proc/self/status", encoding="ascii") as f:
    hwm = [l for l in f if l.startswith("VmHWM:")][0].split()[1]
  out["maxrss_main_mb"] = int(hwm) / 1024.0
  # Workers: the largest peak of any child; it counts the pages they share
  # with this process at fork, so it is an upper bound of a worker's own use.
  children = resource.getrusage(resource.RUSAGE_CHILDREN)
  out["maxrss_worker_mb"] = children.ru_maxrss / 1024.0
  me = resource.getrusage(resource.RUSAGE_SELF)
  out["cpu_main_s"] = me.ru_utime + me.ru_stime
  out["cpu_workers_s"] = children.ru_utime + children.ru_stime
  out["minor_faults"] = me.ru_minflt + children.ru_minflt
  out["system_cpu_s"] = me.ru_stime + children.ru_stime
  print(json.dumps(out), flush=True)
  import gc  # pylint: disable=import-outside-toplevel
  gc.freeze()  # exits as the command does (textrecords.runs.cli.run)


def _run_measure(args, path, **spec):
  wall, out = _timed([sys.executable, os.path.abspath(__file__), f"--ptb={path}",
                      "--measure=" + json.dumps(spec)])
  r = json.loads(out.strip().splitlines()[-1])
  r["process_wall_s"] = wall
  return r


def _scaling_and_memory(args, res):
  """1 vs 2 workers (interleaved pairs) and peak memory on a scaled corpus."""
  out_dir = os.path.join(args.work_dir, "scaling")
  if args.scaling_repeats:
    corpora = [("PTB", args.ptb)]
    if args.scaling_scale > 1:
      corpora.append((f"PTB x{args.scaling_scale}",
                      _concatenated(args.ptb, args.scaling_scale, args.work_dir)))
    res["scaling_corpora"] = {}
    for name, path in corpora:
      pairs = collections.defaultdict(list)
      shares = []  # (main CPU s, workers' CPU s) of each 2-worker create
      for _ in range(args.scaling_repeats):
        pairs["create_cli"].append(tuple(_cli_create(path, w, out_dir) for w in (1, 2)))
        for what in ("read", "create"):
          one = _run_measure(args, path, what=what, workers=1, out=out_dir)
          two = _run_measure(args, path, what=what, workers=2, out=out_dir)
          pairs[what].append((one["wall_s"], two["wall_s"]))
          if what == "create":
            pairs["create_process"].append((one["process_wall_s"], two["process_wall_s"]))
            for phase in ("count_s", "rest_s", "minor_faults", "system_cpu_s"):
              pairs["create_" + phase].append((one[phase], two[phase]))
            shares.append((two["cpu_main_s"], two["cpu_workers_s"], two["cpu_main_in_run_s"]))
      if path == args.ptb:  # 2 workers, with and without keep_freed_memory
        for _ in range(args.scaling_repeats):
          kept = _run_measure(args, path, what="create", workers=2, out=out_dir)
          released = _run_measure(args, path, what="create", workers=2, out=out_dir,
                                  release_memory=True)
          for key in ("wall_s", "minor_faults", "system_cpu_s"):
            pairs["memory_kept_vs_released_" + key].append((released[key], kept[key]))
      res["scaling_corpora"][name] = {
          "scaling": {k: {"pairs_s": v, "speedups": [a / b for a, b in v]}
                      for k, v in pairs.items()},
          "cpu_shares": shares}
      if path != args.ptb:
        os.remove(path)
    res.update(res["scaling_corpora"]["PTB"])
  if args.memory_scale:
    big = _concatenated(args.ptb, args.memory_scale, args.work_dir)
    res["memory"] = {"corpus_mb": os.path.getsize(big) / 1e6, "runs": {}}
    for w in (1, 2, 4):
      res["memory"]["runs"][w] = _run_measure(args, big, what="create", workers=w,
                                              out=out_dir + "_big")
    os.remove(big)
  res["machine"]["load_avg_end_scaling"] = os.getloadavg()
  with open(os.path.join(args.work_dir, "results_scaling.json"), "w") as f:
    json.dump(res, f, indent=2)
  for name, scaled in res.get("scaling_corpora", {}).items():
    _report_scaling(name, scaled, res["machine"]["load_avg_start"][0])
  if "memory" in res:
    print(f"\n# peak RSS, create on PTB x{args.memory_scale} "
          f"({res['memory']['corpus_mb']:.0f} MB)")
    for w, r in res["memory"]["runs"].items():
      print(f"| {w} workers | main {r['maxrss_main_mb']:.0f} MB | largest worker "
            f"<= {r['maxrss_worker_mb']:.0f} MB (incl. pages shared at fork) | "
            f"{r['wall_s']:.1f} s |")


def _cli_create(path: str, workers: int, out_dir: str) -> float:
  """Wall seconds of the command a user runs: `python -m w2v_data.create`."""
  wall, _ = _timed([sys.executable, "-m", "w2v_data.create", f"--input_file={path}",
                    f"--output_dir={out_dir}", "--overwrite", "--quiet", D2L_FLAG,
                    f"--num_workers={workers}"])
  return wall


def _concatenated(path: str, copies: int, work_dir: str) -> str:
  """A file holding `copies` copies of `path` (in work_dir)."""
  out = os.path.join(work_dir, f"{os.path.basename(path)}_x{copies}")
  with open(path, "rb") as f:
    data = f.read()
  with open(out, "wb") as f:
    for _ in range(copies):
      f.write(data)
  return out


def _median(values):
  v = sorted(values)
  return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2


def _report_scaling(name, res, load_start):
  print(f"\n# 1 vs 2 workers on {name} (load {load_start:.1f} -> {os.getloadavg()[0]:.1f}; "
        "2-core shared machine; interleaved pairs)")
  print("| what | 1w/2w s per pair | speed-up per pair | median 1w / median 2w |\n"
        "|---|---|---|---|")
  for key, label in (("create_cli", "create, the command (`python -m w2v_data.create`)"),
                     ("create_process", "create, whole process (this script's process)"),
                     ("create", "create (in a fresh process, without interpreter start)"),
                     ("create_count_s", "create phase 1: read, clean, count"),
                     ("create_rest_s", "create phase 2: vocab, sample, encode, write"),
                     ("read", "read+clean+count+ids (load_corpus)")):
    if key in res["scaling"]:
      pairs = res["scaling"][key]["pairs_s"]
      sp = res["scaling"][key]["speedups"]
      walls = ", ".join(f"{a:.2f}/{b:.2f}" for a, b in pairs)
      print(f"| {label} | {walls} | {min(sp):.2f}x-{max(sp):.2f}x (median "
            f"{_median(sp):.2f}x) | {_median([a for a, _ in pairs]) / _median([b for _, b in pairs]):.2f}x |")
  if "create" in res["scaling"]:
    # The best any 2-worker run could do: everything in the run split
    # perfectly in two, the rest of the process (interpreter start, imports,
    # exit) as it is, from each 1-worker process (the command's runs are
    # other processes: on this shared machine their differences are noise).
    runs = [run for run, _ in res["scaling"]["create"]["pairs_s"]]
    if "create_process" in res["scaling"]:
      rounds = list(zip([w for w, _ in res["scaling"]["create_process"]["pairs_s"]], runs))
      bounds = [whole / (whole - run + run / 2) for whole, run in rounds]
      fixed = [whole - run for whole, run in rounds]
      print(f"| create, this script's process: upper bound if the run split perfectly in two "
            f"(the {min(fixed):.2f}-{max(fixed):.2f} s outside the run unchanged) | "
            f"| {min(bounds):.2f}x-{max(bounds):.2f}x (median {_median(bounds):.2f}x) | |")
  for key, label, first, second in (
      ("create_minor_faults", "minor page faults", "1 worker", "2 workers"),
      ("create_system_cpu_s", "system CPU s", "1 worker", "2 workers"),
      ("memory_kept_vs_released_wall_s", "2 workers, wall s", "workers release freed memory",
       "keep it (default)"),
      ("memory_kept_vs_released_minor_faults", "2 workers, minor page faults",
       "workers release freed memory", "keep it (default)"),
      ("memory_kept_vs_released_system_cpu_s", "2 workers, system CPU s",
       "workers release freed memory", "keep it (default)")):
    if key in res["scaling"]:
      pairs = res["scaling"][key]["pairs_s"]
      fmt = ",.0f" if "faults" in key else ".2f"
      print(f"| create, {label} (main process and workers) | median: {first} "
            f"{_median([a for a, _ in pairs]):{fmt}}, {second} "
            f"{_median([b for _, b in pairs]):{fmt}} |")
  # Amdahl: the main process's CPU seconds stay serial, the workers' divide.
  for label, fr in (
      ("incl. interpreter start and imports", [m / (m + w) for m, w, _ in res["cpu_shares"]]),
      ("in the run (without interpreter start)",
       [r / (r + w) for _, w, r in res["cpu_shares"]])):
    proj = {n: [1.0 / (f + (1 - f) / n) for f in fr] for n in (2, 4, 16)}
    print(f"| main process share of CPU seconds, create with 2 workers, {label} | "
          f"{min(fr):.1%}-{max(fr):.1%} | Amdahl speed-up at 2/4/16 workers: "
          + " / ".join(f"{min(v):.1f}-{max(v):.1f}x" for v in proj.values()) + " |")


def _report(r):
  b = r["baseline_create"]
  ptb = r.get("ptb")
  print(f"# w2v_data benchmark {r['date']} (cpus {r['machine']['cpus']}, load "
        f"{r['machine']['load_avg_start'][0]:.1f} -> {r['machine']['load_avg_end'][0]:.1f}; "
        "best of the timed runs, and their medians; epochs after a first, warm-up epoch)")
  print("\n| step | w2v_data | baseline | speed-up | CPU s (w2v_data / baseline) | CPU ratio |"
        "\n|---|---|---|---|---|---|")
  for key, label in (("create_sentence", "create, sentence layout (default)"),
                     ("create_sentence_1worker", "create, sentence layout, 1 worker"),
                     ("create_sentence_numpy", "create, sentence layout, numpy path "
                      "(TEXTRECORDS_NUMBA=0)"),
                     ("create_center", "create, center layout"),
                     ("create_center_1worker", "create, center layout, 1 worker")):
    if key in r:
      med, base_med = _median(r[key]["runs_s"]), _median(b["runs_s"])
      print(f"| {label} | {r[key]['wall_s']:.2f} s (median {med:.2f}) | {b['wall_s']:.2f} s "
            f"(median {base_med:.2f}) | {b['wall_s'] / r[key]['wall_s']:.1f}x (medians "
            f"{base_med / med:.1f}x) | {r[key]['cpu_s']:.2f} / {b['cpu_s']:.2f} | "
            f"{b['cpu_s'] / r[key]['cpu_s']:.1f}x |")
  if "epoch_sentence" not in r:
    return
  for key, label in (("epoch_sentence", "epoch, batch 512, sentence layout (default: "
                      "records held in memory)"),
                     ("epoch_sentence_streamed", "epoch, sentence layout, in_memory=False"),
                     ("epoch_sentence_autotune", "epoch, sentence layout, in_memory=False, "
                      "tf.data autotuning on"),
                     ("epoch_sentence_pad60", "epoch, sentence layout, pad_to=60"),
                     ("epoch_sentence_fresh", "epoch, sentence layout, fresh negatives"),
                     ("epoch_center", "epoch, batch 512, center layout (held in memory)"),
                     ("epoch_center_streamed", "epoch, center layout, in_memory=False")):
    e = r[key]
    print(f"| {label} | {e['second_s']:.2f} s (median {_median(e['runs_s'][1:]):.2f} s; 1st "
          f"epoch {e['first_s']:.2f} s; make_dataset {e['build_s']:.2f} s) | "
          f"{r['baseline_epoch_s']:.2f} s | {r['baseline_epoch_s'] / e['second_s']:.1f}x |")
  print("\nbaseline phases: " + ", ".join(f"{k} {v:.2f} s" for k, v in b["times"].items()))
  print("\n| PTB figure | w2v_data | d2l target |\n|---|---|---|")
  for key in ("sentences", "vocab", "the", "keep_the"):
    print(f"| {key} | {ptb[key]:,} | {TARGETS[key]:,} |" if isinstance(ptb[key], int)
          else f"| {key} | {ptb[key]:.4f} | {TARGETS[key]} |")
  print(f"| 'the' after subsampling (expected) | {ptb['the_after_expected']:.0f} "
        f"(drawn: {ptb['the_as_center']:,} as centers) | ~{TARGETS['the_after']:,} |")
  for key in ("centers", "pairs"):
    print(f"| {key} | {ptb[key]:,} ({100 * (ptb[key] / TARGETS[key] - 1):+.2f}%; baseline "
          f"{ptb['baseline_' + key]:,}) | ~{TARGETS[key]:,} |")
  for tok, prob, seen in ptb["noise_top"]:
    print(f"| noise P({tok}) | {prob:.4f} (drawn, contexts excluded: {seen:.4f}) | "
          f"{TARGETS['noise'].get(tok, '')} |")


if __name__ == "__main__":
  main()
