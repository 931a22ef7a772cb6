#!/usr/bin/env python3
"""Graph size and epoch times of w2v_data.make_dataset, rows held in memory vs streamed.

For a w2v_data dataset (e.g. PTB): the size of the dataset's serialized graph
(what tf.data service ships to each worker, capped by protobuf at 2 GiB), the
size of an iterator checkpoint after 5 batches (tf.train.Checkpoint), the
time make_dataset takes, and the time of epochs 1..N, with in_memory=True and
in_memory=False, interleaved in one process (2 shared cores are noisy: compare
the two in the same run).

Example:
  python -m w2v_data.create --input_file=ptb.train.txt --output_dir=/tmp/ptb_w2v \\
      --subsample_t=1e-4        # d2l's draw: 342,466 centers
  python scripts/bench/bench_w2v_graph.py --data_dir=/tmp/ptb_w2v --epochs=4 --rounds=2
"""

import json
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)
from textrecords.runs import script_args  # pylint: disable=wrong-import-position

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def measure(data_dir: str, in_memory: bool, epochs: int, batch_size: int) -> dict:
  """{graph_bytes, make_s, epoch_s: [...]} of one make_dataset."""
  import w2v_data  # pylint: disable=import-outside-toplevel
  t = time.perf_counter()
  ds = w2v_data.make_dataset(data_dir, batch_size, seed=1, in_memory=in_memory)
  make_s = time.perf_counter() - t
  graph = len(ds._as_serialized_graph().numpy())  # pylint: disable=protected-access
  times = []
  for _ in range(epochs):
    t = time.perf_counter()
    for _ in ds:
      pass
    times.append(time.perf_counter() - t)
  return {"graph_bytes": graph, "checkpoint_bytes": checkpoint_bytes(ds),
          "make_s": round(make_s, 3), "epoch_s": [round(x, 3) for x in times]}


def checkpoint_bytes(ds, batches: int = 5) -> int:
  """Bytes of a tf.train.Checkpoint of an iterator of `ds` after `batches` batches."""
  from textrecords.tf_import import require_tf  # pylint: disable=import-outside-toplevel
  tf = require_tf()
  it = iter(ds)
  for _ in range(batches):
    next(it)
  with tempfile.TemporaryDirectory() as d:
    tf.train.Checkpoint(it=it).write(os.path.join(d, "ckpt"))
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))


def main(argv=None):
  p = script_args.ScriptParser(description=__doc__.split("\n")[0])
  p.add_argument("--data_dir", required=True)
  p.add_argument("--epochs", type=int, default=4)
  p.add_argument("--rounds", type=int, default=2, help="held/streamed pairs, interleaved")
  p.add_argument("--batch_size", type=int, default=512)
  args = p.parse_args(argv)
  import w2v_data  # pylint: disable=import-outside-toplevel,unused-import
  from textrecords.tf_import import require_tf  # pylint: disable=import-outside-toplevel
  require_tf()  # TF's import is not timed
  runs = {"held": [], "streamed": []}
  for _ in range(args.rounds):
    for name, held in (("held", True), ("streamed", False)):
      runs[name].append(measure(args.data_dir, held, args.epochs, args.batch_size))
  summary = {}
  for name, rs in runs.items():
    later = [t for r in rs for t in r["epoch_s"][1:]]
    summary[name] = {"graph_bytes": rs[0]["graph_bytes"],
                     "checkpoint_bytes": rs[0]["checkpoint_bytes"],
                     "make_s": min(r["make_s"] for r in rs),
                     "first_epoch_s": min(r["epoch_s"][0] for r in rs),
                     "later_epoch_best_s": min(later) if later else None,
                     "later_epoch_median_s": statistics.median(later) if later else None}
  print(json.dumps({"runs": runs, "summary": summary}, indent=1))
  return 0


if __name__ == "__main__":
  sys.exit(main())
