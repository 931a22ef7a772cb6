r"""Times mt_data on a whole corpus (d2l's fra.txt: 167,130 pairs).

    python scripts/bench/bench_mt.py --input_file=/path/to/fra.txt [--repeats=3]

Runs `python -m mt_data.create --num_train=0` (all pairs but the last 128 as
train, the last 128 as validation) as a subprocess, wall-clock timed, for
--num_workers=1 and 2 (word tokenizer), alternating 1 and 2 workers
--repeats times so each speedup is a ratio of two runs made back to back,
and once with --tokenizer=bpe; checks the outputs of the worker counts are
byte-identical; then reads the whole train split once through
`mt_data.make_dataset` (batch 128, num_steps 9). Prints a JSON report: best
of --repeats for each create timing, and every repeat's 1-vs-2-worker
speedup, for the whole process and for `create()` alone (without
interpreter start and imports), and the CPU seconds of the main process
and its workers (`resource.getrusage`, robust to other load on the machine)
with the speedup they project for 2 workers on 2 free cores.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from textrecords.runs import script_args

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")


def tree_digest(d):
  h = hashlib.sha256()
  for name in sorted(os.listdir(d)):
    with open(os.path.join(d, name), "rb") as f:
      h.update(name.encode() + b"\0" + hashlib.sha256(f.read()).digest())
  return h.hexdigest()


def timed_create(input_file, out, extra, repeats):
  best, summary = None, None
  for _ in range(repeats):
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.monotonic()
    summary_path = out.rstrip("/") + ".summary.json"
    p = subprocess.run([sys.executable, "-m", "mt_data.create", f"--input_file={input_file}",
                        f"--output_dir={out}", "--num_train=0", "--quiet",
                        f"--summary_json={summary_path}", *extra],
                       capture_output=True, text=True, env=ENV, check=False)
    wall = time.monotonic() - t0
    if p.returncode != 0:
      raise SystemExit(f"error: mt_data.create failed: {p.stderr.strip().splitlines()[-1]}")
    if best is None or wall < best:
      with open(summary_path, encoding="utf-8") as f:
        best, summary = wall, json.load(f)
  return {"wall_s": round(best, 2), "phases_s": summary["seconds"],
          "train_pairs": summary["splits"]["train"]["pairs"],
          "valid_pairs": summary["splits"]["valid"]["pairs"],
          "vocab_sizes": [summary["vocab"]["source"]["size"], summary["vocab"]["target"]["size"]],
          "digest": tree_digest(out)}


_CPU_RUN = r"""
import json, resource, sys
from mt_data import config, generator
cfg = config.MTConfig(input_file=sys.argv[1], output_dir=sys.argv[2], num_train=0, quiet=True,
                      num_workers=int(sys.argv[3]))
generator.create(cfg, log=lambda m: None)
s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"main_cpu_s": s.ru_utime + s.ru_stime, "workers_cpu_s": c.ru_utime + c.ru_stime}))
"""


def cpu_split(input_file, out, workers):
  """CPU seconds of the main process (with interpreter start) and of its workers."""
  shutil.rmtree(out, ignore_errors=True)
  p = subprocess.run([sys.executable, "-c", _CPU_RUN, input_file, out, str(workers)],
                     capture_output=True, text=True, env=ENV, check=True)
  return json.loads(p.stdout.strip().splitlines()[-1])


def read_throughput(out):
  import mt_data  # pylint: disable=import-outside-toplevel
  ds = mt_data.make_dataset(out, 128, split="train", num_steps=9, seed=0)
  t0 = time.monotonic()
  n = 0
  for _, y, _ in ds:
    n += int(y.shape[0])
  dt = time.monotonic() - t0
  return {"pairs": n, "seconds": round(dt, 2), "pairs_per_s": int(n / dt)}


def main():
  p = script_args.ScriptParser(description=__doc__.split("\n")[0])
  p.add_argument("--input_file", required=True)
  p.add_argument("--repeats", type=int, default=3)
  a = p.parse_args()
  if not os.path.isfile(a.input_file):
    print(f"error: --input_file={a.input_file}: no such file", file=sys.stderr)
    return 2
  report = {"input_file": a.input_file, "cpus": os.cpu_count()}
  with tempfile.TemporaryDirectory() as tmp:
    runs = {1: [], 2: []}
    for _ in range(a.repeats):
      for workers in (1, 2):
        runs[workers].append(timed_create(
            a.input_file, os.path.join(tmp, f"w{workers}"), [f"--num_workers={workers}"], 1))
    for workers in (1, 2):
      report[f"word_workers_{workers}"] = min(runs[workers], key=lambda r: r["wall_s"])
    report["speedup_1_to_2_workers"] = {
        "whole_process": [round(r1["wall_s"] / r2["wall_s"], 2)
                          for r1, r2 in zip(runs[1], runs[2])],
        "create_call": [round(r1["phases_s"]["total"] / r2["phases_s"]["total"], 2)
                        for r1, r2 in zip(runs[1], runs[2])]}
    # CPU seconds are robust to other load on the machine: the 1-worker run's
    # total against the 2-worker run's main process plus half its workers'.
    one = cpu_split(a.input_file, os.path.join(tmp, "c1"), 1)
    two = cpu_split(a.input_file, os.path.join(tmp, "c2"), 2)
    report["cpu_seconds"] = {
        "workers_1": one, "workers_2": two,
        "main_share_2_workers": round(two["main_cpu_s"] / (two["main_cpu_s"] + two["workers_cpu_s"]), 3),
        "projected_speedup_1_to_2_workers": round(
            (one["main_cpu_s"] + one["workers_cpu_s"])
            / (two["main_cpu_s"] + two["workers_cpu_s"] / 2), 2)}
    report["identical_for_any_num_workers"] = (
        report["word_workers_1"]["digest"] == report["word_workers_2"]["digest"])
    report["bpe_8000_workers_1"] = timed_create(
        a.input_file, os.path.join(tmp, "bpe"), ["--tokenizer=bpe", "--vocab_size=8000",
                                                 "--num_workers=1"], 1)
    report["make_dataset_read"] = read_throughput(os.path.join(tmp, "w1"))
  print(json.dumps(report, indent=1))
  return 0 if report["identical_for_any_num_workers"] else 1


if __name__ == "__main__":
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  sys.exit(main())
