#!/usr/bin/env python3
"""Benchmark --engine=beam against --engine=local on the same corpus, same run.

For each generator given a corpus, runs `python -m <pkg>.create` three times
into the same output path:
  * local, --num_workers=1
  * local, --num_workers=2
  * beam, DirectRunner multi_processing with 2 workers (Beam's FnApiRunner,
    no Prism), --num_workers=2 so the flags (and so the metadata) match
and reports wall time and peak RSS summed over the process tree (psutil,
polled every 50 ms; Beam's worker processes included), and checks that the
Beam run wrote the same files as the local run with the same flags (2
workers; metadata included) and that all three wrote the same record files
(bert_data's metadata records --num_workers, so the 1-worker run's differs
there).

Usage (the corpora are not part of the repository):
  python scripts/bench/bench_beam.py --bert_source=../shared/data/ptb.train.txt --bert_mb=2 \\
      --w2v_corpus=../shared/data/ptb.train.txt --mt_corpus=../shared/data/fra.txt

`--portable_mb=25,100` instead: w2v_data (or `--portable_package=mt_data`:
source<TAB>target pairs; `--portable_package=bert_data`: documents of
sentences of the test vocab's words, `--dupe_factor=1`, more flags with
`--portable_flags`) on corpora of those sizes that the script
generates (Zipf-distributed words, seed 0), each run locally (2
workers) and on a portable-runner cluster on this machine (Beam's job
service and an EXTERNAL worker pool; its FnApiRunner asks the pool for one
SDK worker per environment: `direct_num_workers` does not reach it through
the job API, so the Beam run has 1 SDK worker against the local run's 2);
reports wall time, CPU seconds of all processes, peak RSS of each SDK
worker and of the job service, and input MB per CPU second, and checks the
Beam run wrote the local run's files:
  python scripts/bench/bench_beam.py --portable_mb=25,110
With `--bundle_log`, the SDK workers log every bundle
(scripts/bench/beam_probe/sitecustomize.py) and a second table gives, per Beam
run, the largest bundle the runner handed a worker (encoded MB, elements)
and the bundle whose worker RSS grew most: what the runner puts in one
bundle against what our steps hold.
"""

import hashlib
import itertools
import json
import os
import platform
import random
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import psutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_bert import VOCAB, build_corpus, run_measured  # pylint: disable=wrong-import-position
from textrecords.runs import script_args  # pylint: disable=wrong-import-position

BEAM = "runner=DirectRunner,direct_num_workers=2,direct_running_mode=multi_processing"
RUNS = (("local, 1 worker", ["--num_workers=1"]),
        ("local, 2 workers", ["--num_workers=2"]),
        ("beam DirectRunner multi_processing, 2 workers",
         ["--num_workers=2", "--engine=beam", f"--beam_pipeline_options={BEAM}"]))


def _digests(folder: str) -> dict:
  out = {}
  for name in sorted(os.listdir(folder)):
    with open(os.path.join(folder, name), "rb") as f:
      out[name] = hashlib.sha256(f.read()).hexdigest()
  return out


def bench(name: str, module: str, args, out: str, output_flag: str):
  rows, digests = [], []
  for label, extra in RUNS:
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    cmd = [sys.executable, "-m", module, *args, output_flag, *extra, "--quiet"]
    r = run_measured(cmd, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    digests.append(_digests(out))
    rows.append((label, r["wall_s"], r["peak_rss_mb"]))
    print(f"  {name}: {label}: {r['wall_s']:.1f} s, peak RSS {r['peak_rss_mb']:,.0f} MB",
          file=sys.stderr, flush=True)
  # Beam vs local with the same flags: every file, metadata included. The
  # 1-worker run's record files too (bert's metadata records --num_workers).
  same_beam = digests[2] == digests[1]
  records = [{n: h for n, h in d.items() if not n.endswith("meta.json")} for d in digests]
  same_records = all(r == records[0] for r in records)
  return rows, (same_beam, same_records), len(digests[0])


# ---------------------------------------------------------------- portable runner

def write_corpus(path: str, mb: float, seed: int = 0) -> int:
  """A w2v corpus of about `mb` MB: lines of 5-30 Zipf-distributed words."""
  rng = random.Random(seed)
  words = [f"w{i}" for i in range(30000)]
  cum, total = [], 0.0
  for i in range(len(words)):
    total += 1.0 / (i + 1)
    cum.append(total)
  size, want = 0, int(mb * 1e6)
  with open(path, "w", encoding="utf-8") as f:
    while size < want:
      lines = [" ".join(rng.choices(words, cum_weights=cum, k=rng.randint(5, 30)))
               for _ in range(2000)]
      text = "\n".join(lines) + "\n"
      f.write(text)
      size += len(text)
  return size


def write_pairs(path: str, mb: float, seed: int = 0) -> int:
  """An mt corpus of about `mb` MB: source<TAB>target lines of 3-15 Zipf words each."""
  rng = random.Random(seed)
  cum = list(itertools.accumulate(1.0 / (i + 1) for i in range(30000)))
  src, tgt = [f"s{i}" for i in range(30000)], [f"t{i}" for i in range(30000)]
  size, want = 0, int(mb * 1e6)
  with open(path, "w", encoding="utf-8") as f:
    while size < want:
      text = "".join(" ".join(rng.choices(src, cum_weights=cum, k=rng.randint(3, 15))) + " .\t"
                     + " ".join(rng.choices(tgt, cum_weights=cum, k=rng.randint(3, 15))) + " .\n"
                     for _ in range(2000))
      f.write(text)
      size += len(text)
  return size


def write_documents(path: str, mb: float, seed: int = 0) -> int:
  """A bert corpus of about `mb` MB: documents of 20-90 sentences of 5-30
  Zipf-distributed words of the test vocab, a blank line after each."""
  rng = random.Random(seed)
  with open(VOCAB, encoding="utf-8") as f:
    words = [w for w in (l.strip() for l in f) if w.isalpha() and w.isascii()][:20000]
  cum = list(itertools.accumulate(1.0 / (i + 1) for i in range(len(words))))
  size, want = 0, int(mb * 1e6)
  with open(path, "w", encoding="utf-8") as f:
    while size < want:
      text = "".join("".join(" ".join(rng.choices(words, cum_weights=cum,
                                                   k=rng.randint(5, 30))) + " .\n"
                             for _ in range(rng.randint(20, 90))) + "\n"
                     for _ in range(50))
      f.write(text)
      size += len(text)
  return size


CORPORA = {"w2v_data": write_corpus, "mt_data": write_pairs, "bert_data": write_documents}


def _package_flags(package: str, out: str) -> list:
  """The output and package-specific flags of one portable-bench run."""
  if package == "bert_data":
    return [f"--output_file={os.path.join(out, 't.tfrecord')}", f"--vocab_file={VOCAB}",
            "--dupe_factor=1"]
  extra = ["--num_train=0", "--num_val=5000"] if package == "mt_data" else []
  return [f"--output_dir={out}", *extra]


def _bundles(probe_dir: str):
  """(largest bundle (MB, elements), bundle of most RSS growth (MB, first
  transform)) of the SDK workers' logs in probe_dir; the logs are removed."""
  recs = []
  for name in os.listdir(probe_dir):
    with open(os.path.join(probe_dir, name), encoding="utf-8") as f:
      recs.extend(json.loads(line) for line in f if line.strip())
    os.remove(os.path.join(probe_dir, name))
  if not recs:
    return None
  big = max(recs, key=lambda r: r["in_mb"])
  grew = max(recs, key=lambda r: r["peak_mb"] - r["start_mb"])
  return ((big["in_mb"], big["elements"]),
          (grew["peak_mb"] - grew["start_mb"], grew["transforms"][0] if grew["transforms"] else "?"))


class _Tree:
  """Peak RSS per process and CPU seconds of process trees, polled."""

  def __init__(self, roots):
    self.roots = roots
    self.server_roots = {r.pid for r in roots}
    self.rss, self.cpu, self.names, self.server = {}, {}, {}, set()

  def poll(self):
    for root in self.roots:
      try:
        procs = [root] + root.children(recursive=True)
      except psutil.Error:
        continue
      for p in procs:
        try:
          with p.oneshot():
            t = p.cpu_times()
            self.cpu[p.pid] = t.user + t.system
            if root.pid in self.server_roots:
              self.server.add(p.pid)
            self.rss[p.pid] = max(self.rss.get(p.pid, 0), p.memory_info().rss)
            if p.pid not in self.names:
              self.names[p.pid] = " ".join(p.cmdline())[:200]
        except psutil.Error:
          pass


def _measure(cmd, env, servers):
  """Runs cmd: (wall s, CPU s of its process tree (getrusage of waited
  children) plus the servers' trees (polled), the polled tree)."""
  tree = _Tree(servers)
  tree.poll()
  base = dict(tree.cpu)  # the servers' CPU before this run
  before = resource.getrusage(resource.RUSAGE_CHILDREN)
  start = time.perf_counter()
  proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
  tree.roots = [psutil.Process(proc.pid)] + servers
  while proc.poll() is None:
    tree.poll()
    time.sleep(0.1)
  _, err = proc.communicate()
  wall = time.perf_counter() - start
  if proc.returncode != 0:
    raise SystemExit(f"command failed: {' '.join(cmd)}\n{err[-2000:]}")
  after = resource.getrusage(resource.RUSAGE_CHILDREN)
  waited = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
  # the launcher's tree: what the kernel reports for waited children, or the
  # polled sum where processes were not waited (a pool's workers)
  cpu = max(waited, sum(v for pid, v in tree.cpu.items() if pid not in tree.server))
  cpu += sum(v - base.get(pid, 0) for pid, v in tree.cpu.items() if pid in tree.server)
  return wall, cpu, tree


PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "beam_probe")


def _start_cluster(tmp, probe_dir=None):
  job, pool = _free_port(), _free_port()
  env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep
             + os.environ.get("PATH", ""))
  procs = []
  for name, argv, port in (
      ("jobs", ["apache_beam.runners.portability.local_job_service_main", f"--port={job}"], job),
      ("pool", ["apache_beam.runners.worker.worker_pool_main", f"--service_port={pool}"], pool)):
    d = os.path.join(tmp, name)
    os.makedirs(d)
    pool_env = env
    if name == "pool" and probe_dir:
      pool_env = dict(env, BEAM_PROBE_DIR=probe_dir, PYTHONPATH=os.pathsep.join(
          x for x in (PROBE, env.get("PYTHONPATH")) if x))
    procs.append(subprocess.Popen([sys.executable, "-m", *argv], cwd=d, env=pool_env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  start_new_session=True))
    deadline = time.monotonic() + 120
    while True:
      try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        break
      except OSError:
        if time.monotonic() > deadline:
          raise SystemExit(f"{name} did not start")
        time.sleep(0.2)
  options = (f"runner=PortableRunner,job_endpoint=localhost:{job},environment_type=EXTERNAL,"
             f"environment_config=localhost:{pool},"
             "experiments=disable_logging_submission_environment")
  return procs, options


def _free_port():
  s = socket.socket()
  s.bind(("127.0.0.1", 0))
  port = s.getsockname()[1]
  s.close()
  return port


def _run_both(package, corpus, tmp, options, servers, probe_dir, flags=()):
  """The local and the Beam run of one corpus: (row per run, same files?, bundle log)."""
  jobs = servers[0]
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  rows, digests, bundles = [], [], None
  size_mb = os.path.getsize(corpus) / 1e6
  for label, extra in (("local, 2 workers", []),
                       ("beam portable runner",
                        ["--engine=beam", f"--beam_pipeline_options={options}"])):
    out = os.path.join(tmp, "out")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    cmd = [sys.executable, "-m", f"{package}.create", f"--input_file={corpus}",
           *_package_flags(package, out), "--num_shards=4", "--num_workers=2", "--quiet",
           *flags, *extra]
    wall, cpu, tree = _measure(cmd, env, servers if extra else [])
    workers = [r for pid, r in tree.rss.items() if "SdkHarness" in tree.names.get(pid, "")]
    launcher = max(r for pid, r in tree.rss.items()
                   if f"{package}.create" in tree.names.get(pid, ""))
    if extra and probe_dir:
      bundles = (size_mb, _bundles(probe_dir))
    digests.append(_digests(out))
    rows.append((size_mb, label, wall, cpu, launcher / 2**20, [w / 2**20 for w in workers],
                 tree.rss.get(jobs.pid, 0) / 2**20 if extra else None))
    print(f"  {size_mb:.0f} MB {label}: {wall:.1f} s, {cpu:.1f} CPU s, workers "
          f"{[round(w / 2**20) for w in workers]} MB", file=sys.stderr, flush=True)
  rows.append((size_mb, "same files", digests[0] == digests[1]))
  return rows, bundles


def portable(sizes, tmp, package="w2v_data", bundle_log=False, flags=()):
  """Local (2 workers) vs the portable runner per corpus size; prints the tables."""
  probe_dir = os.path.join(tmp, "bundles") if bundle_log else None
  if probe_dir:
    os.makedirs(probe_dir)
  procs, options = _start_cluster(tmp, probe_dir)
  rows, bundles = [], []
  try:
    servers = [psutil.Process(p.pid) for p in procs]
    for mb in sizes:
      corpus = os.path.join(tmp, f"corpus{mb}.txt")
      CORPORA[package](corpus, mb)
      got, log = _run_both(package, corpus, tmp, options, servers, probe_dir, flags)
      rows += got
      bundles += [log] if log else []
      os.remove(corpus)
  finally:
    for p in procs:
      try:
        os.killpg(p.pid, signal.SIGKILL)
      except ProcessLookupError:
        pass
      p.wait()
  _print_portable(" ".join([package, *flags]), rows, bundles)


def _print_portable(package, rows, bundles):
  print(f"{package}; machine: {psutil.cpu_count()} cores, Python {platform.python_version()}")
  print("| corpus MB | engine | wall s | CPU s | input MB per CPU s | launcher peak RSS MB "
        "| SDK workers' peak RSS MB | job service peak RSS MB |")
  print("|---|---|---|---|---|---|---|---|")
  for row in rows:
    if row[1] == "same files":
      print(f"| {row[0]:.0f} | beam wrote the local run's files (metadata included): "
            f"{'yes' if row[2] else 'NO'} | | | | | | |")
      continue
    mb, label, wall, cpu, launcher, workers, job_rss = row
    print(f"| {mb:.0f} | {label} | {wall:.1f} | {cpu:.1f} | {mb / cpu:.2f} | {launcher:,.0f} "
          f"| {', '.join(f'{w:,.0f}' for w in workers) or '-'} "
          f"| {'-' if job_rss is None else f'{job_rss:,.0f}'} |")
  if bundles:
    print("\n| corpus MB | largest bundle from the runner: MB, elements "
          "| most SDK worker RSS growth in one bundle: MB, its first transform by name |")
    print("|---|---|---|")
    for mb, b in bundles:
      if b is None:
        print(f"| {mb:.0f} | no bundle log | |")
        continue
      (in_mb, elements), (growth, transform) = b
      print(f"| {mb:.0f} | {in_mb:,.2f} MB, {elements:,} | {growth:,} MB, {transform} |")


def _named_benches(args, tmp):
  """bench() of each generator given a corpus: [(title, rows, checks, files)]."""
  results = []
  if args.bert_source:
    corpus = os.path.join(tmp, "bert_corpus.txt")
    info = build_corpus(args.bert_source, args.bert_mb, corpus)
    results.append((f"bert_data ({info['bytes'] / 1e6:.1f} MB, {info['documents']:,} docs, "
                    f"dupe_factor={args.bert_dupe_factor}, {args.bert_num_shards} shards)",
                    *bench("bert", "bert_data.create",
                           [f"--input_file={corpus}", f"--vocab_file={VOCAB}",
                            f"--dupe_factor={args.bert_dupe_factor}",
                            f"--num_shards={args.bert_num_shards}"],
                           os.path.join(tmp, "bert"),
                           f"--output_file={os.path.join(tmp, 'bert', 't.tfrecord')}")))
  if args.w2v_corpus:
    results.append((f"w2v_data ({os.path.basename(args.w2v_corpus)}, 2 shards)",
                    *bench("w2v", "w2v_data.create",
                           [f"--input_file={args.w2v_corpus}", "--num_shards=2"],
                           os.path.join(tmp, "w2v"),
                           f"--output_dir={os.path.join(tmp, 'w2v')}")))
  if args.mt_corpus:
    results.append((f"mt_data ({os.path.basename(args.mt_corpus)}, all pairs, 2 shards)",
                    *bench("mt", "mt_data.create",
                           [f"--input_file={args.mt_corpus}", "--num_train=0",
                            "--num_val=5000", "--num_shards=2"],
                           os.path.join(tmp, "mt"),
                           f"--output_dir={os.path.join(tmp, 'mt')}")))
  return results


def _print_named(results):
  print(f"machine: {psutil.cpu_count()} cores, Python {platform.python_version()}")
  print("| generator | engine | wall s | peak RSS MB | vs local 1 worker |")
  print("|---|---|---|---|---|")
  for title, rows, (same_beam, same_records), files in results:
    base = rows[0][1]
    for label, wall, rss in rows:
      print(f"| {title} | {label} | {wall:.1f} | {rss:,.0f} | {base / wall:.2f}x |")
    print(f"| {title} | beam = local 2 workers, all {files} files incl. metadata: "
          f"{'yes' if same_beam else 'NO'}; record files of all three equal: "
          f"{'yes' if same_records else 'NO'} | | | |")


def main():
  ap = script_args.ScriptParser(description=__doc__.split("\n")[0])
  ap.add_argument("--bert_source", help="text whose lines make the bert corpus (documents "
                  "of 20-90 lines, as scripts/bench/bench_bert.py builds it)")
  ap.add_argument("--bert_mb", type=float, default=2.0, help="bert corpus size")
  ap.add_argument("--bert_dupe_factor", type=int, default=2)
  ap.add_argument("--bert_num_shards", type=int, default=4)
  ap.add_argument("--w2v_corpus", help="one sentence per line (e.g. ptb.train.txt)")
  ap.add_argument("--mt_corpus", help="source<TAB>target lines (e.g. fra.txt)")
  ap.add_argument("--portable_mb", help="comma-separated w2v corpus sizes (MB) for the "
                  "local vs portable-runner comparison (the other flags are then ignored)")
  ap.add_argument("--portable_package", default="w2v_data", choices=sorted(CORPORA),
                  help="the generator --portable_mb runs")
  ap.add_argument("--portable_flags", default="",
                  help="with --portable_mb: space-separated flags added to both runs "
                  "(e.g. '--packing=full_sentences')")
  ap.add_argument("--bundle_log", action="store_true",
                  help="with --portable_mb: log the SDK workers' bundles (scripts/bench/beam_probe)")
  args = ap.parse_args()
  tmp = tempfile.mkdtemp(prefix="bench_beam_")
  try:
    if args.portable_mb:
      portable([float(x) for x in args.portable_mb.split(",")], tmp, args.portable_package,
               args.bundle_log, args.portable_flags.split())
      return
    results = _named_benches(args, tmp)
  finally:
    shutil.rmtree(tmp, ignore_errors=True)
  _print_named(results)


if __name__ == "__main__":
  main()
