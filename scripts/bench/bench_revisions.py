#!/usr/bin/env python3
"""Times the three generators at a base revision and at the working tree, same run.

For changes that must not slow anything down: `python -m <pkg>.create` runs
from a temporary `git worktree` of BASE and from this working tree,
alternately (base, tree, base, tree, ...), on the same inputs and flags. It
reports the best and median wall time and peak RSS (process tree) of each,
the ratio tree / base of the best times, and whether the record files are
byte-identical; and the CPU seconds of each run's process tree (the
workers it waited for), steadier than wall time on a loaded machine. The
temporary worktree is removed at the end.

Inputs are built here from the sources given (nothing is downloaded):
  bert_data: --bert_source lines grouped into documents of 20-90 lines
    (`bench_bert.build_corpus`) to --bert_mb, the test vocab;
  w2v_data: --w2v_source lines repeated to --w2v_mb;
  mt_data: the first two columns of --mt_source lines repeated to --mt_pairs.

--memory: peak PSS (shared pages counted once) of the process tree instead
of speed, bert_data only unless --tools says otherwise, e.g. issue 23's
figure (52 MB corpus, dupe 10, 2 workers, against the commit before the
offset index):
  python scripts/bench/bench_revisions.py c7280dc^ --memory --repeats=1 --bert_mb=52 \\
      --bert_dupe=10 --num_shards=1

--readme: the README's create commands as written there (flags and
defaults, no --num_workers or --quiet) instead of this script's, e.g. the
creates of a whole issue against the commit before it:
  python scripts/bench/bench_revisions.py 09d43f7 --readme --repeats=5 \\
      --bert_source=../shared/data/ptb.train.txt --w2v_source=../shared/data/ptb.train.txt \\
      --mt_source=../shared/data/fra.txt

Usage:
  python scripts/bench/bench_revisions.py 8519c6b4 --repeats=3 \\
      --bert_source=../shared/data/ptb.train.txt --w2v_source=../shared/data/ptb.train.txt \\
      --mt_source=../shared/data/fra.txt
"""

import hashlib
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_bert import REPO, VOCAB, build_corpus, run_measured  # pylint: disable=wrong-import-position
from textrecords.runs import script_args  # pylint: disable=wrong-import-position

TESTDATA = os.path.join(REPO, "tests", "testdata")


def repeat_lines(source: str, path: str, size_mb: float = 0.0, count: int = 0,
                 columns: int = 0) -> int:
  """Writes `source`'s non-blank lines over and over (the first `columns`
  tab-separated columns, if given) until size_mb MB or `count` lines."""
  lines = [l.rstrip("\n") for l in open(source, encoding="utf-8") if l.strip()]
  if columns:
    lines = ["\t".join(l.split("\t")[:columns]) for l in lines]
  n = size = 0
  with open(path, "w", encoding="utf-8") as f:
    while (count and n < count) or (size_mb and size < size_mb * 1e6):
      line = lines[n % len(lines)] + "\n"
      f.write(line)
      size += len(line.encode("utf-8"))
      n += 1
  return n


def make_inputs(work: str, a) -> dict:
  os.makedirs(work, exist_ok=True)
  inputs = {"bert": os.path.join(work, "bert.txt"), "w2v": os.path.join(work, "w2v.txt"),
            "mt": os.path.join(work, "mt.txt")}
  build_corpus(a.bert_source, a.bert_mb, inputs["bert"])
  repeat_lines(a.w2v_source, inputs["w2v"], size_mb=a.w2v_mb)
  repeat_lines(a.mt_source, inputs["mt"], count=a.mt_pairs, columns=2)
  return inputs


def readme_commands(inputs: dict, out: str) -> dict:
  """tool -> (python arguments, output folder): the README's create commands
  as written there (their flags and defaults, the worker count included) on
  this run's inputs."""
  return {
      "bert_data": (["-m", "bert_data.create", f"--input_file={inputs['bert']}",
                     f"--output_file={out}/bert/train.tfrecord", f"--vocab_file={VOCAB}",
                     "--num_shards=8"], f"{out}/bert"),
      "w2v_data": (["-m", "w2v_data.create", f"--input_file={inputs['w2v']}",
                    f"--output_dir={out}/w2v"], f"{out}/w2v"),
      "mt_data": (["-m", "mt_data.create", f"--input_file={inputs['mt']}",
                   f"--output_dir={out}/mt", "--num_train=512", "--num_val=128",
                   "--min_freq=2"], f"{out}/mt"),
  }


def commands(inputs: dict, out: str, workers: int, bert_dupe: int = 5,
             num_shards: int = 2) -> dict:
  """tool -> (python arguments, output folder); flags every revision accepts."""
  common = ["--quiet", f"--num_workers={workers}", f"--num_shards={num_shards}"]
  return {
      "bert_data": (["-m", "bert_data.create", f"--input_file={inputs['bert']}",
                     f"--output_file={out}/bert/t.tfrecord", f"--vocab_file={VOCAB}",
                     f"--dupe_factor={bert_dupe}", *common], f"{out}/bert"),
      "w2v_data": (["-m", "w2v_data.create", f"--input_file={inputs['w2v']}",
                    f"--output_dir={out}/w2v", "--min_freq=5", "--subsample_t=1e-4", *common],
                   f"{out}/w2v"),
      "mt_data": (["-m", "mt_data.create", f"--input_file={inputs['mt']}",
                   f"--output_dir={out}/mt", "--num_train=0", "--num_val=1000", *common],
                  f"{out}/mt"),
  }


def records_digest(folder: str) -> str:
  """One digest of the record files (not metadata, vocab or index files)."""
  h = hashlib.sha256()
  for name in sorted(os.listdir(folder)):
    if ".tfrecord" in name and not name.endswith((".json", ".index")) \
        and not name.startswith("."):
      with open(os.path.join(folder, name), "rb") as f:
        h.update(name.encode() + b"\0" + hashlib.sha256(f.read()).digest())
  return h.hexdigest()


def _env(tree: str) -> dict:
  return dict(os.environ, PYTHONPATH=tree, TF_CPP_MIN_LOG_LEVEL="3")


def check_imports_from(tree: str):
  """Fails unless `python` run in `tree` imports the packages from `tree`."""
  code = "import textrecords, bert_data; print(textrecords.__file__); print(bert_data.__file__)"
  out = subprocess.run([sys.executable, "-c", code], cwd=tree, env=_env(tree),
                       capture_output=True, text=True, check=True).stdout.split()
  if not all(os.path.realpath(p).startswith(os.path.realpath(tree) + os.sep) for p in out):
    raise SystemExit(f"error: python in {tree} imports {out}, not that tree's packages")


def timed(tree: str, args: list, out_dir: str, pss: bool = False) -> dict:
  shutil.rmtree(out_dir, ignore_errors=True)
  os.makedirs(os.path.dirname(out_dir), exist_ok=True)
  old = os.getcwd()
  os.chdir(tree)  # `python -m` imports from the working directory first
  before = resource.getrusage(resource.RUSAGE_CHILDREN)
  try:
    r = run_measured([sys.executable, *args], env=_env(tree), pss=pss)
  finally:
    os.chdir(old)
  after = resource.getrusage(resource.RUSAGE_CHILDREN)
  # CPU of the command and the workers it waited for (user + system)
  r["cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
  return {k: r[k] for k in ("wall_s", "cpu_s", "peak_rss_mb", "peak_pss_mb") if k in r}


def summarize(runs: list) -> dict:
  walls = [r["wall_s"] for r in runs]
  cpus = [r["cpu_s"] for r in runs]
  out = {"best_s": round(min(walls), 2), "median_s": round(statistics.median(walls), 2),
         "cpu_best_s": round(min(cpus), 2), "cpu_median_s": round(statistics.median(cpus), 2),
         "peak_rss_mb": round(max(r["peak_rss_mb"] for r in runs))}
  if "peak_pss_mb" in runs[0]:
    out["peak_pss_mb"] = round(max(r["peak_pss_mb"] for r in runs))
  return out


def main() -> int:
  a = _parse_args()
  rev = subprocess.run(["git", "-C", REPO, "rev-parse", "--verify", a.base + "^{commit}"],
                       capture_output=True, text=True, check=False)
  if rev.returncode != 0:
    raise SystemExit(f"error: {a.base}: not a revision of {REPO}")
  rev = rev.stdout.strip()
  work = a.work_dir or tempfile.mkdtemp(prefix="bench_revisions-")
  base_tree = os.path.join(work, "base")
  subprocess.run(["git", "-C", REPO, "worktree", "add", "--detach", "-q", base_tree, rev],
                 check=True)
  try:
    check_imports_from(base_tree)
    check_imports_from(REPO)
    inputs = make_inputs(os.path.join(work, "inputs"), a)
    report = {"base": rev, "head": "working tree of " + subprocess.run(
                  ["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                  text=True, check=True).stdout.strip(),
              "machine": f"{platform.system()} {os.cpu_count()} cpus, Python "
                         f"{platform.python_version()}",
              "inputs_mb": {k: round(os.path.getsize(p) / 1e6, 2) for k, p in inputs.items()},
              "num_workers": a.num_workers, "repeats": a.repeats, "bert_dupe": a.bert_dupe,
              "num_shards": a.num_shards, "readme_commands": a.readme, "tools": {}}
    tools = a.tools or ("bert_data" if a.memory else "bert_data,w2v_data,mt_data")
    for tool in tools.split(","):
      report["tools"][tool] = compare_tool(tool, a, inputs, work, base_tree)
      print(json.dumps({tool: report["tools"][tool]}), file=sys.stderr, flush=True)
    print(json.dumps(report, indent=1))
  finally:
    subprocess.run(["git", "-C", REPO, "worktree", "remove", "--force", base_tree], check=False)
    if not a.work_dir:
      shutil.rmtree(work, ignore_errors=True)
  return 0


def _parse_args():
  ap = script_args.ScriptParser(description=__doc__.split("\n\n", maxsplit=1)[0])
  ap.add_argument("base", help="git revision to compare the working tree against")
  ap.add_argument("--repeats", type=int, default=3, help="runs per tool and side")
  ap.add_argument("--num_workers", type=int, default=2)
  ap.add_argument("--bert_source", default=os.path.join(TESTDATA, "bert_sample_text.txt"))
  ap.add_argument("--bert_mb", type=float, default=1.0)
  ap.add_argument("--w2v_source", default=os.path.join(TESTDATA, "w2v_tiny.txt"))
  ap.add_argument("--w2v_mb", type=float, default=5.0)
  ap.add_argument("--mt_source", default=os.path.join(TESTDATA, "mt_pairs.txt"))
  ap.add_argument("--mt_pairs", type=int, default=100000)
  ap.add_argument("--tools", default=None,
                  help="comma-separated (default: all three; bert_data with --memory)")
  ap.add_argument("--bert_dupe", type=int, default=5, help="bert_data --dupe_factor")
  ap.add_argument("--num_shards", type=int, default=2)
  ap.add_argument("--memory", action="store_true",
                  help="report peak PSS of the process tree and its ratio tree / base")
  ap.add_argument("--work_dir", default=None, help="scratch folder (default: a new temp one)")
  ap.add_argument("--readme", action="store_true",
                  help="the README's create commands (their flags and defaults) instead of "
                  "--num_workers, --num_shards and --bert_dupe")
  return ap.parse_args()


def compare_tool(tool: str, a, inputs: dict, work: str, base_tree: str) -> dict:
  """One tool's runs on both sides, interleaved: their summaries, the ratio of
  the best times (and of the peak PSS with --memory), and whether the record
  bytes agree."""
  runs = {"base": [], "tree": []}
  digests = {}
  for _ in range(a.repeats):
    for side, tree in (("base", base_tree), ("tree", REPO)):
      out = os.path.join(work, f"out_{side}")
      args, out_dir = (readme_commands(inputs, out) if a.readme else
                       commands(inputs, out, a.num_workers, a.bert_dupe, a.num_shards))[tool]
      runs[side].append(timed(tree, args, out_dir, pss=a.memory))
      digests[side] = records_digest(out_dir)
  base, head = summarize(runs["base"]), summarize(runs["tree"])
  return {"base": base, "tree": head, "ratio_best": round(head["best_s"] / base["best_s"], 3),
          "ratio_median": round(head["median_s"] / base["median_s"], 3),
          "ratio_cpu_median": round(head["cpu_median_s"] / base["cpu_median_s"], 3),
          **({"ratio_peak_pss": round(head["peak_pss_mb"] / base["peak_pss_mb"], 3)}
             if a.memory else {}),
          "same_record_bytes": digests["base"] == digests["tree"]}

if __name__ == "__main__":
  sys.exit(main())
