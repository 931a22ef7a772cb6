"""A bundle log for Beam SDK workers (scripts/bench/bench_beam.py --bundle_log).

Python imports this module at start-up in every process whose PYTHONPATH
holds this folder; bench_beam.py puts it only on the worker pool's, so it
reaches the SDK workers the pool starts. Where `BEAM_PROBE_DIR` is set and
the process runs Beam bundles, each bundle appends one JSON line to
`$BEAM_PROBE_DIR/bundles-<pid>.jsonl`: its transforms, the elements and
encoded MB it received from the runner, and the worker's RSS at its start
and peak (sampled every 50 ms). Nothing changes what the pipeline computes.
"""

import json
import os
import sys
import threading
import time

_DIR = os.environ.get("BEAM_PROBE_DIR")
_PAGE = os.sysconf("SC_PAGE_SIZE")
_MODULE = "apache_beam.runners.worker.bundle_processor"
_state = {"peak": 0, "in_bytes": 0}


def _rss() -> int:
  with open("/proc/self/statm", encoding="ascii") as f:
    return int(f.read().split()[1]) * _PAGE


def _sample():
  while True:
    _state["peak"] = max(_state["peak"], _rss())
    time.sleep(0.05)


def _record(processor, bp, start_rss, t0):
  inputs = [op.index + 1 for op in processor.ops.values() if isinstance(op, bp.DataInputOperation)]
  names = sorted(t.unique_name for t in processor.process_bundle_descriptor.transforms.values()
                 if not t.unique_name.startswith(("ref_", "fn/")))
  rec = {"seconds": round(time.time() - t0, 2), "start_mb": start_rss >> 20,
         "peak_mb": _state["peak"] >> 20, "in_mb": round(_state["in_bytes"] / 2**20, 2),
         "elements": sum(inputs), "transforms": names}
  with open(os.path.join(_DIR, f"bundles-{os.getpid()}.jsonl"), "a", encoding="utf-8") as f:
    f.write(json.dumps(rec) + "\n")


def _patch():
  while _MODULE not in sys.modules:
    time.sleep(0.01)
  bp = sys.modules[_MODULE]
  while not hasattr(bp, "BundleProcessor") or not hasattr(bp, "DataInputOperation"):
    time.sleep(0.01)
  process_bundle, process_encoded = bp.BundleProcessor.process_bundle, \
      bp.DataInputOperation.process_encoded

  def counted(self, data):
    _state["in_bytes"] += len(data)
    return process_encoded(self, data)

  def logged(self, instruction_id, data_stream_id=None):
    start = _rss()
    _state["peak"], _state["in_bytes"] = start, 0
    t0 = time.time()
    try:
      return process_bundle(self, instruction_id, data_stream_id)
    finally:
      _record(self, bp, start, t0)

  bp.DataInputOperation.process_encoded = counted
  bp.BundleProcessor.process_bundle = logged


if _DIR:
  threading.Thread(target=_sample, daemon=True).start()
  threading.Thread(target=_patch, daemon=True).start()
