#!/usr/bin/env python3
"""Where bert_data's default mode spends its time (the figures in BENCHMARKS.md).

1. Wall time of each phase of one `bert_data.create` run (passes: tokenize;
   examples: build, mask, encode, sort per unit; write: merge and write), and
   the main process's CPU in the whole run.
2. Worker CPU per instance: one dupe round of the default-mode task run in
   this process (`time.process_time`), then sorting and framing its buckets.
3. Tokenizer throughput per core for both basic-pass modes.

4. `--cpu_share`: the main process's share of all CPU seconds of whole
   `bert_data.create` runs (`resource.getrusage` RUSAGE_SELF vs
   RUSAGE_CHILDREN, measured inside a fresh process per run, with and without
   interpreter start and imports), wall time, and the peak RSS of the main
   process and of the largest worker, for each of --workers and --modes
   (default, reference, reference_python = the reference walk in Python
   even with numba installed; modes alternate, so compared runs are
   neighbours), the CPU seconds of hashing the outputs once more (about
   what the writer processes do, one per output file, copying being in the
   kernel), and per mode the Amdahl projection from the largest main share.
   Without --corpus it builds a 26 MB corpus itself (--size_mb)
   from --source lines grouped into documents of 20-90 lines (seeded), or,
   without --source, from Python's own pydoc help text.

Usage:
  python scripts/bench/profile_bert.py --corpus=corpus.txt [--num_workers=2]
  python scripts/bench/profile_bert.py --cpu_share [--source=ptb.train.txt] [--workers=1,2,4]
  python scripts/bench/profile_bert.py --cpu_share --size_mb=6.5 --modes=reference,reference_python
(build a corpus with scripts/bench/bench_bert.py's --source/--size_mb, or pass any).
"""

import json
import os
import pydoc
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "scripts", "bench"))

from bert_data import generator as P  # pylint: disable=wrong-import-position
from bert_data import ordered_run  # pylint: disable=wrong-import-position
from bert_data import units  # pylint: disable=wrong-import-position
from bert_data.config import BertConfig  # pylint: disable=wrong-import-position
from textrecords.runs import script_args  # pylint: disable=wrong-import-position

VOCAB = os.path.join(REPO, "tests", "testdata", "vocab_uncased.txt")
def timed_phases(config: BertConfig) -> dict:
  """Runs `generator.create`; returns {phase: (wall, main cpu)}: the run's
  phases (`RunResult.seconds`: passes, examples, write; main cpu not
  measured) and the whole run's main-process CPU."""
  t, c = time.perf_counter(), time.process_time()
  result = P.create(config)
  times = {phase: (s, None) for phase, s in result.seconds.items() if phase != "total"}
  times["total"] = (time.perf_counter() - t, time.process_time() - c)
  return result.counts, times


def worker_cpu_per_instance(config: BertConfig) -> dict:
  """Default-mode task CPU per instance, in this process, for one dupe round
  (the generator's tasks spilled to order buckets as `ordered_run` does)."""
  cfg = BertConfig(**{**config.__dict__, "dupe_factor": 1, "num_workers": 1})
  gen = P.BertGenerator(cfg, units.load_tokenizer(cfg), "")
  value = ordered_run._corpus_value(gen, gen.units(), 1)  # pylint: disable=protected-access
  tmp = tempfile.mkdtemp()
  state = ordered_run._STATE  # pylint: disable=protected-access
  state.update(gen=gen, value=value, spill_dir=tmp, num_buckets=4)
  c = time.process_time()
  n = sum(sum(ordered_run._spill_task(t))  # pylint: disable=protected-access
          for t in gen.all_tasks(value))
  build = time.process_time() - c
  c = time.process_time()
  for b in range(4):
    ordered_run._frame_bucket((b, 0, 0, 4))  # pylint: disable=protected-access
  frame = time.process_time() - c
  state.clear()
  return {"instances": n, "build_mask_encode_spill_us": build / n * 1e6,
          "sort_frame_us": frame / n * 1e6}


def tokenizer_speed(corpus: str, max_lines: int = 30000) -> dict:
  """encode_batch MB/s per core (process CPU) for both basic-pass modes."""
  from bert_data.tokenizer import WordPieceTokenizer  # pylint: disable=import-outside-toplevel
  os.environ["TOKENIZERS_PARALLELISM"] = "false"
  lines = []
  with open(corpus, encoding="utf-8") as f:
    for line in f:
      if line.strip():
        lines.append(line.strip())
      if len(lines) >= max_lines:
        break
  mb = sum(len(l.encode("utf-8")) for l in lines) / 1e6
  out = {}
  for mode in ("python", "hf"):
    tok = WordPieceTokenizer(VOCAB, basic_pass=mode)
    c = time.process_time()
    for i in range(0, len(lines), 4096):
      tok.encode_batch(lines[i:i + 4096])
    out[mode] = mb / (time.process_time() - c)
  return out


_SHARE_RUN = r"""
import json, resource, sys, time
t_start = time.process_time()
sys.path.insert(0, {repo!r})
from bert_data import generator
from bert_data.config import BertConfig
cfg = BertConfig(**json.loads(sys.argv[1])).validate()
if sys.argv[2] == "python":  # the reference walk in Python even if numba is installed
  from bert_data import reference_walk
  reference_walk.available = lambda: False
def usage():
  s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
  return s.ru_utime + s.ru_stime, c.ru_utime + c.ru_stime
self0, child0 = usage()
t = time.perf_counter()
summary = generator.create(cfg).counts
wall = time.perf_counter() - t
self1, child1 = usage()
peaks = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
         resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)
import glob, hashlib
c = time.process_time()
for path in glob.glob(cfg.output_files[0] + "*"):
  if not path.endswith(".json"):
    h = hashlib.sha256()
    with open(path, "rb") as f:
      for block in iter(lambda: f.read(1 << 22), b""):
        h.update(block)
hash_s = time.process_time() - c
print(json.dumps({{"instances": summary["instances"], "wall_s": wall, "hash_s": hash_s,
                  "main_cpu_s": self1 - self0, "workers_cpu_s": child1 - child0,
                  "startup_cpu_s": self0, "main_peak_rss_mb": peaks[0],
                  "worker_peak_rss_mb": peaks[1]}}))
"""


def pydoc_source(path: str) -> str:
  """Writes the plain-text pydoc help of some standard modules to `path`."""
  import importlib  # pylint: disable=import-outside-toplevel
  names = ("argparse", "collections", "email.message", "json", "os", "pathlib", "re",
           "socket", "string", "subprocess", "threading", "typing", "unittest", "zipfile")
  with open(path, "w", encoding="utf-8") as f:
    for name in names:
      text = pydoc.plain(pydoc.render_doc(importlib.import_module(name), renderer=pydoc.plaintext))
      f.write(text + "\n")
  return path


def cpu_share(args) -> None:
  """Main process vs workers CPU seconds of whole create runs (see the docstring)."""
  import bench_bert  # pylint: disable=import-outside-toplevel,import-error
  tmp = tempfile.mkdtemp(prefix="profile_bert_share_")
  corpus = args.corpus
  if not corpus:
    source = args.source or pydoc_source(os.path.join(tmp, "pydoc.txt"))
    corpus = os.path.join(tmp, "corpus.txt")
    info = bench_bert.build_corpus(source, args.size_mb, corpus)
    print(f"corpus: {info['bytes'] / 1e6:.1f} MB, {info['documents']:,} documents, "
          f"from {args.source or 'pydoc help text'}")
  print(f"dupe_factor={args.dupe_factor}, num_shards={args.num_shards}, cores={os.cpu_count()}")
  print("| mode | workers | instances | wall s | instances/s | main CPU s | workers CPU s "
        "| main share | main share incl. start | writer's sha256 s | main peak RSS MB "
        "| largest worker peak RSS MB |")
  print("|---|---|---|---|---|---|---|---|---|---|---|---|")
  modes = args.modes.split(",")
  unknown = set(modes) - {"default", "reference", "reference_python"}
  if unknown:
    raise SystemExit(f"--modes: unknown {', '.join(sorted(unknown))}")
  # Modes alternate within each repeat and worker count, so compared runs are neighbours.
  runs = [(mode, int(w), rep) for rep in range(args.repeats)
          for w in args.workers.split(",") for mode in modes]
  shares = {}
  for mode, workers, rep in runs:
    reference = mode != "default"
    out = os.path.join(tmp, f"{mode}{workers}_{rep}", "x.tfrecord")
    cfg = {"input_files": [corpus], "output_files": [out], "vocab_file": VOCAB,
           "dupe_factor": args.dupe_factor, "num_workers": workers, "quiet": True,
           "num_shards": 1 if reference else args.num_shards,
           "reference_compatible": reference}
    p = subprocess.run([sys.executable, "-c", _SHARE_RUN.format(repo=REPO), json.dumps(cfg),
                        "python" if mode == "reference_python" else "any"],
                       capture_output=True, text=True, check=False)
    if p.returncode != 0:
      raise SystemExit(f"run failed: {p.stderr[-2000:]}")
    r = json.loads(p.stdout.strip().splitlines()[-1])
    total = r["main_cpu_s"] + r["workers_cpu_s"]
    share = r["main_cpu_s"] / total
    share_all = (r["main_cpu_s"] + r["startup_cpu_s"]) / (total + r["startup_cpu_s"])
    if workers >= 2:
      shares.setdefault(mode, []).append(share_all)
    print(f"| {mode} | {workers} | {r['instances']:,} | {r['wall_s']:.2f} | "
          f"{r['instances'] / r['wall_s']:,.0f} | "
          f"{r['main_cpu_s']:.2f} | {r['workers_cpu_s']:.2f} | {share:.1%} | {share_all:.1%} | "
          f"{r['hash_s']:.2f} | "
          f"{r['main_peak_rss_mb']:.0f} | {r['worker_peak_rss_mb']:.0f} |", flush=True)
    shutil.rmtree(os.path.dirname(out), ignore_errors=True)
  # Amdahl's law with the main process as the serial part (incl. interpreter
  # start): T(W) ~ s + (1 - s) / W of the one-core time.
  for mode, ss in shares.items():
    s = max(ss)
    t = lambda w, s=s: s + (1 - s) / w
    print(f"{mode}: main share <= {s:.1%} (runs with 2+ workers); Amdahl over 2 workers: "
          + ", ".join(f"{w} workers {t(2) / t(w):.2f}x" for w in (4, 8, 16))
          + f"; over 1 worker at 16: {1 / t(16):.1f}x")
  shutil.rmtree(tmp, ignore_errors=True)


def main():
  ap = script_args.ScriptParser(description=__doc__)
  ap.add_argument("--corpus")
  ap.add_argument("--num_workers", type=int, default=2)
  ap.add_argument("--dupe_factor", type=int, default=10)
  ap.add_argument("--cpu_share", action="store_true",
                  help="main-process share of CPU seconds of whole runs (see above)")
  ap.add_argument("--source", help="--cpu_share without --corpus: lines to build it from")
  ap.add_argument("--size_mb", type=float, default=26.0)
  ap.add_argument("--workers", default="2,4", help="--cpu_share: worker counts")
  ap.add_argument("--modes", default="default",
                  help="--cpu_share: default,reference,reference_python (the last: the "
                  "reference walk in Python even with numba installed)")
  ap.add_argument("--num_shards", type=int, default=4)
  ap.add_argument("--repeats", type=int, default=1)
  args = ap.parse_args()
  if args.cpu_share:
    cpu_share(args)
    return
  if not args.corpus:
    ap.error("--corpus is required (unless --cpu_share)")
  out = os.path.join(tempfile.mkdtemp(prefix="profile_bert_"), "x.tfrecord")
  config = BertConfig(input_files=(args.corpus,), output_files=(out,), vocab_file=VOCAB,
                      dupe_factor=args.dupe_factor, num_workers=args.num_workers).validate()
  summary, times = timed_phases(config)
  print(f"{summary['instances']:,} instances, {args.num_workers} workers")
  for name, (wall, cpu) in times.items():
    print(f"  {name:28s} {wall:6.2f} s wall" + (f", main-process cpu {cpu:5.2f} s" if cpu is not None else ""))
  w = worker_cpu_per_instance(config)
  print(f"worker cpu per instance (one round, {w['instances']:,} instances): "
        f"build+mask+encode+spill {w['build_mask_encode_spill_us']:.1f} us, "
        f"sort+frame {w['sort_frame_us']:.1f} us")
  t = tokenizer_speed(args.corpus)
  print(f"tokenizer encode_batch, one core: basic_pass=python {t['python']:.1f} MB/s, "
        f"basic_pass=hf {t['hf']:.1f} MB/s")


if __name__ == "__main__":
  main()
