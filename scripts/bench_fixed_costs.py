#!/usr/bin/env python3
"""Times the per-run fixed costs that issue 13's w2v work removed, A/B in one run.

Each is timed with and without the change, interleaved, `--repeats` times:

  - final sync: a 20 MB output written in 1 MB pieces with 10 ms of "work"
    between them through `atomic_file.AtomicWriter`, then committed; the time
    of the commit (its fsync) with the background writeback
    (`textrecords.files.writeback`, the default) and without it;
  - exit: a w2v_data create on `--ptb` in a fresh process, then the time from
    the run's end to the process's end, with the objects frozen
    (`textrecords.runs.cli.run` does so) and without;
  - numpy.ma: importing it in a fresh process that has numpy (what the first
    `np.unique` call in each sampling worker cost before).

Usage:
  python scripts/bench_fixed_costs.py --ptb=/path/to/ptb.train.txt [--repeats=7]
"""

import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)
from textrecords.runs import script_args  # pylint: disable=wrong-import-position


class _NoWriteback:
  """Stands in for `writeback.Writeback`: nothing synced before the commit."""

  def wrote(self, size):
    pass

  def wait(self):
    pass


def final_sync_s(directory: str, background: bool) -> float:
  from textrecords.files import atomic_file  # pylint: disable=import-outside-toplevel
  piece = os.urandom(1 << 20)
  w = atomic_file.AtomicWriter(os.path.join(directory, "out.bin"))
  if not background:
    w._writeback = _NoWriteback()  # pylint: disable=protected-access
  for _ in range(20):
    w.write(piece)
    time.sleep(0.01)
  start = time.perf_counter()
  w.commit()
  return time.perf_counter() - start


_EXIT_CHILD = """
import gc, sys, time
from w2v_data import generator
from w2v_data.config import W2vConfig
generator.create(W2vConfig(input_file=sys.argv[1], output_dir=sys.argv[2], overwrite=True,
                          quiet=True, num_workers=1))
if sys.argv[3] == "freeze":
  gc.freeze()
print(time.time(), flush=True)
"""


def exit_s(ptb: str, out_dir: str, freeze: bool) -> float:
  p = subprocess.Popen([sys.executable, "-c", _EXIT_CHILD, ptb, out_dir,
                        "freeze" if freeze else "plain"], stdout=subprocess.PIPE, text=True,
                       cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
  printed = p.stdout.read()
  p.wait()
  end = time.time()
  if p.returncode != 0:
    sys.exit(f"create failed (exit {p.returncode})")
  return end - float(printed)


def numpy_ma_import_s() -> float:
  code = ("import time, numpy; t = time.perf_counter(); import numpy.ma; "
          "print(time.perf_counter() - t)")
  return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=True).stdout)


def _row(name, a_label, a, b_label, b):
  print(f"| {name} | {a_label}: median {statistics.median(a) * 1e3:.1f} ms "
        f"({min(a) * 1e3:.1f}-{max(a) * 1e3:.1f}) | {b_label}: median "
        f"{statistics.median(b) * 1e3:.1f} ms ({min(b) * 1e3:.1f}-{max(b) * 1e3:.1f}) |")


def main():
  parser = script_args.ScriptParser(description=__doc__.split("\n")[0])
  parser.add_argument("--ptb", required=True, help="ptb.train.txt (for the exit timing)")
  parser.add_argument("--repeats", type=int, default=7)
  args = parser.parse_args()
  if not os.path.isfile(args.ptb):
    sys.exit(f"error: --ptb={args.ptb}: no such file")
  sync = {True: [], False: []}
  exits = {True: [], False: []}
  ma = []
  with tempfile.TemporaryDirectory() as tmp:
    for _ in range(args.repeats):
      for flag in (True, False):
        sync[flag].append(final_sync_s(tmp, flag))
        exits[flag].append(exit_s(args.ptb, os.path.join(tmp, "w2v"), flag))
      ma.append(numpy_ma_import_s())
  print(f"# fixed costs, {time.strftime('%Y-%m-%d %H:%M')} ({platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}; {args.repeats} interleaved repeats)")
  print("| what | now | before |\n|---|---|---|")
  _row("commit of a 20 MB file (its fsync)", "synced while written", sync[True],
       "not", sync[False])
  _row("process exit after a w2v_data create", "objects frozen", exits[True], "not",
       exits[False])
  print(f"| import numpy.ma (after numpy) | | median {statistics.median(ma) * 1e3:.1f} ms "
        f"({min(ma) * 1e3:.1f}-{max(ma) * 1e3:.1f}) |")


if __name__ == "__main__":
  main()
