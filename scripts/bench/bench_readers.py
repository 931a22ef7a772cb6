"""Feed rate of the readers on the same bert_data records: tf.data vs grain, PyTorch, numpy.

Writes bert_data records (max_seq_length 128) from the bundled sample corpus,
then times one training epoch (shuffled, batch 64, decoded to the
`(x, y, sample_weight)` arrays; the first 32 batches, while workers start,
not timed) per reader, each in a fresh process, the
readers interleaved round after round so machine noise hits all of them
alike; prints records/s (median of the rounds) and each one's ratio to
tf.data's in the same run.

  python scripts/bench/bench_readers.py --rounds 3
  python scripts/bench/bench_readers.py --torch_python .venv-torch/bin/python   # torch from its venv

Readers: tf (`make_dataset`), numpy (`numpy_batches`), grain0/grain2
(`grain_dataset(loader=True)`, worker_count 0 and 2), torch0/torch2
(IterableDataset with DataLoader num_workers 0 and 2).
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from textrecords.runs import script_args  # pylint: disable=wrong-import-position

READERS = ("tf", "numpy", "grain0", "grain2", "torch0", "torch2")
BATCH = 64
WARMUP = 32  # batches read before the clock starts, for every reader alike (workers start)


def make_records(out_dir: str, repeats: int) -> str:
  from bert_data import generator  # pylint: disable=import-outside-toplevel
  from bert_data.config import BertConfig  # pylint: disable=import-outside-toplevel
  sample = os.path.join(ROOT, "bert_data", "sample")
  docs = open(os.path.join(sample, "sample_corpus.txt"), encoding="utf-8").read().strip()
  docs = docs.split("\n\n")
  corpus = os.path.join(out_dir, "corpus.txt")
  with open(corpus, "w", encoding="utf-8") as f:
    for i in range(repeats):
      for d in docs:
        lines = d.split("\n")
        k = i % len(lines)
        f.write("\n".join(lines[k:] + lines[:k]) + "\n\n")
  out = os.path.join(out_dir, "train.tfrecord")
  generator.create(BertConfig(input_files=(corpus,), output_files=(out,),
                             vocab_file=os.path.join(sample, "vocab.txt"), dupe_factor=2,
                             num_shards=4, max_seq_length=128, max_predictions_per_seq=20))
  return out


def run_one(reader: str, records: str) -> dict:
  """Times one shuffled epoch in this process; returns {records, seconds}."""
  if reader == "tf":
    import bert_data  # pylint: disable=import-outside-toplevel
    it = iter(bert_data.make_dataset(records, BATCH, training=True, seed=0))
    rows = lambda b: int(b[1]["masked_lm"].shape[0])  # noqa: E731
  elif reader == "numpy":
    import bert_data  # pylint: disable=import-outside-toplevel
    it = iter(bert_data.numpy_batches(records, BATCH, training=True, seed=0))
    rows = lambda b: len(b[1]["masked_lm"])  # noqa: E731
  elif reader.startswith("grain"):
    from bert_data import reader as r  # pylint: disable=import-outside-toplevel
    it = iter(r.grain_dataset(records, BATCH, training=True, seed=0, loader=True,
                              worker_count=int(reader[-1])))
    rows = lambda b: len(b[1]["masked_lm"])  # noqa: E731
  else:
    import torch  # pylint: disable=import-outside-toplevel
    import bert_data  # pylint: disable=import-outside-toplevel
    ds = bert_data.torch_dataset(records, BATCH, training=True, seed=0)
    workers = int(reader[-1])
    it = iter(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers))
    rows = lambda b: int(b[1]["masked_lm"].shape[0])  # noqa: E731
  for _ in range(WARMUP):  # start-up (workers, first reads) not timed
    next(it)
  n = 0
  start = last = time.perf_counter()
  for b in it:
    n += rows(b)
    last = time.perf_counter()  # the clock stops at the last batch, not at worker shutdown
  return {"records": n, "seconds": last - start}


def main():
  p = script_args.ScriptParser(description=__doc__.split("\n")[0])
  p.add_argument("--rounds", type=int, default=3)
  p.add_argument("--repeats", type=int, default=12, help="copies of the sample corpus")
  p.add_argument("--readers", default=",".join(READERS))
  p.add_argument("--torch_python", default=sys.executable,
                 help="python with torch installed (e.g. .venv-torch/bin/python)")
  p.add_argument("--records", default=None, help="existing bert_data records to read")
  p.add_argument("--_run", default=None, help=script_args.SUPPRESS)
  args = p.parse_args()
  if args._run:
    print(json.dumps(run_one(args._run, args.records)))
    return
  tmp = tempfile.mkdtemp(prefix="bench_readers_")
  records = args.records or make_records(tmp, args.repeats)
  readers = [r for r in args.readers.split(",") if r]
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
  times = {r: [] for r in readers}
  counts = {}
  for _ in range(args.rounds):
    for r in readers:
      py = os.path.abspath(args.torch_python) if r.startswith("torch") else sys.executable
      proc = subprocess.run([py, os.path.abspath(__file__), "--_run", r, "--records", records],
                            capture_output=True, text=True, env=env, cwd=ROOT, check=False)
      if proc.returncode != 0:
        print(f"{r}: failed: {proc.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
        continue
      res = json.loads(proc.stdout.strip().splitlines()[-1])
      times[r].append(res["records"] / res["seconds"])
      print(f"  ({r}: {times[r][-1]:,.0f} records/s)", file=sys.stderr, flush=True)
      counts[r] = res["records"]
  base = statistics.median(times["tf"]) if times.get("tf") else None
  print(f"records: {records} ({max(counts.values())} per epoch), batch {BATCH}, "
        f"{args.rounds} rounds, median records/s")
  for r in readers:
    if not times[r]:
      continue
    med = statistics.median(times[r])
    ratio = f"  {med / base:.2f}x tf.data" if base else ""
    spread = f"[{min(times[r]):,.0f}-{max(times[r]):,.0f}]"
    print(f"  {r:7s} {med:10,.0f}/s {spread:>22s}{ratio}")


if __name__ == "__main__":
  main()
