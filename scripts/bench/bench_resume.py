r"""Times resuming a bert_data epoch with `start_step` against reading it.

    python scripts/bench/bench_resume.py [--records=200000] [--shards=32] [--rounds=3] \
        [--skip=0.9] [--shuffle_buffer=256] [--work=DIR]

Writes bert_data records (the bundled sample text repeated to about
--records records of 128 tokens, in --shards files; kept in --work if given,
and reused there), then, in one process and alternating round by round:
  full    make_dataset(..., seed=0) to its first batch (`first_batch_s`:
          the fixed cost of building a pipeline and filling its first
          shuffle window) and on through the whole epoch (`full_epoch_s`);
  resume  make_dataset(..., seed=0, start_step=k), k = skip * steps, to its
          first batch (`resume_first_batch_s`: what skipping costs) and on
          to the epoch's end.
Reports the best of each round and two ratios, the issue's target being
under 0.2 (skipping 90% of an epoch costs under 20% of reading it):
  gross   resume_first_batch_s / (skip * full_epoch_s);
  net     the same without the fixed cost both pay:
          (resume_first_batch_s - first_batch_s)
          / (skip * (full_epoch_s - first_batch_s)).
The gross ratio only means something when reading the epoch takes well over
the fixed cost (about a second): hence the default of 200,000 records. A
resume reads at most one file's record headers plus one shuffle window
(`shuffle_buffer` records) before its first batch. Checksums are verified
once per process, before timing.
"""

import json
import os
import shutil
import sys
import tempfile
import time
from textrecords.runs import script_args

HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, HERE)
TESTDATA = os.path.join(HERE, "tests", "testdata")
RECORDS_PER_REPEAT = 123  # bert records per copy of the sample text at dupe 10


def write(work: str, records: int, shards: int) -> str:
  """bert_data records in `work` (reused when a previous run wrote the same)."""
  out = os.path.join(work, f"bert-{records}-{shards}", "train.tfrecord")
  if os.path.exists(out + ".meta.json"):
    return out
  from bert_data import generator  # pylint: disable=import-outside-toplevel
  from bert_data.config import BertConfig  # pylint: disable=import-outside-toplevel
  text = open(os.path.join(TESTDATA, "bert_sample_text.txt"), encoding="utf-8").read().strip()
  os.makedirs(work, exist_ok=True)
  corpus = os.path.join(work, "corpus.txt")
  with open(corpus, "w", encoding="utf-8") as f:
    f.write("\n\n".join([text] * max(1, -(-records // RECORDS_PER_REPEAT))) + "\n")
  generator.create(BertConfig(input_files=(corpus,), output_files=(out,),
                             vocab_file=os.path.join(TESTDATA, "vocab_uncased.txt"),
                             max_seq_length=128, max_predictions_per_seq=20, dupe_factor=10,
                             num_shards=shards, num_workers=2, quiet=True))
  os.remove(corpus)
  return out


def time_rounds(out: str, batch: int, k: int, steps: int, rounds: int, kw: dict) -> dict:
  """Best seconds of each measurement over `rounds` (fresh run, then resume)."""
  import bert_data  # pylint: disable=import-outside-toplevel
  times = {"first_batch_s": [], "full_epoch_s": [], "resume_first_batch_s": [],
           "resume_to_end_s": []}
  for _ in range(rounds):
    for start, first, whole in ((0, "first_batch_s", "full_epoch_s"),
                                (k, "resume_first_batch_s", "resume_to_end_s")):
      t0 = time.perf_counter()
      it = iter(bert_data.make_dataset(out, batch, start_step=start, **kw))
      next(it)
      times[first].append(time.perf_counter() - t0)
      n = 1 + sum(1 for _ in it)
      times[whole].append(time.perf_counter() - t0)
      assert n == steps - start, (n, steps, start)
  return {name: min(v) for name, v in times.items()}


def main():
  ap = script_args.ScriptParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--records", type=int, default=200000, help="about this many records")
  ap.add_argument("--shards", type=int, default=32)
  ap.add_argument("--shuffle_buffer", type=int, default=256)
  ap.add_argument("--rounds", type=int, default=3)
  ap.add_argument("--skip", type=float, default=0.9)
  ap.add_argument("--batch_size", type=int, default=32)
  ap.add_argument("--work", help="a folder to keep (and reuse) the records in")
  args = ap.parse_args()
  import bert_data  # pylint: disable=import-outside-toplevel
  work = args.work or tempfile.mkdtemp(prefix="bench_resume")
  try:
    out = write(work, args.records, args.shards)
    b = args.batch_size
    kw = dict(seed=0, shuffle_buffer=args.shuffle_buffer)
    steps = len(bert_data.make_dataset(out, b, **kw))  # also verifies the checksums
    k = int(args.skip * steps)
    t = time_rounds(out, b, k, steps, args.rounds, kw)
  finally:
    if not args.work:
      shutil.rmtree(work, ignore_errors=True)
  read_skipped = args.skip * t["full_epoch_s"]
  read_skipped_net = args.skip * (t["full_epoch_s"] - t["first_batch_s"])
  report = {"records": steps * b, "steps": steps, "shards": args.shards, "start_step": k,
            "shuffle_buffer": args.shuffle_buffer, **{n: round(v, 3) for n, v in t.items()},
            "skip_cost_vs_reading_skipped": round(t["resume_first_batch_s"] / read_skipped, 3),
            "skip_cost_vs_reading_skipped_net": round(
                max(0.0, t["resume_first_batch_s"] - t["first_batch_s"]) / read_skipped_net, 3),
            "load": os.getloadavg()}
  print(json.dumps(report, indent=1))


if __name__ == "__main__":
  main()
