#!/usr/bin/env python3
"""What a sharded vocabulary pass sends to its one global merge (w2v_data, mt_data).

The Beam and Dask engines merge w2v's pass "counts" and mt's pass "counts"
per token shard and keep, per shard, only what can reach the vocabulary
(`textrecords.engine.sharded_pass`). This maps every unit of a corpus in
this process, then merges its partials both ways and prints: the corpus's
distinct tokens (what one global merge held before), the entries that reach
the global merge now, the largest shard's distinct tokens (the most one
per-shard merge holds), the CPU seconds of each way, and whether the values
are equal.

Usage:
  python scripts/bench/bench_sharded_vocab.py --package=w2v_data --input_file=ptb.train.txt
  python scripts/bench/bench_sharded_vocab.py --package=mt_data --input_file=fra.txt
"""

import copy
import json
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:  # a checkout without installing
  sys.path.insert(0, ROOT)

from mt_data import config as mt_config  # pylint: disable=wrong-import-position
from mt_data import generator as mt_generator  # pylint: disable=wrong-import-position
from textrecords.engine import protocol, sharded_pass  # pylint: disable=wrong-import-position
from textrecords.runs import cli, script_args  # pylint: disable=wrong-import-position
from w2v_data import generator as w2v_generator  # pylint: disable=wrong-import-position
from w2v_data.config import W2vConfig  # pylint: disable=wrong-import-position


def generator(package: str, path: str, min_freq: int, out: str):
  """The package's generator for one input file (mt: every pair kept)."""
  if package == "w2v_data":
    return w2v_generator.W2vGenerator(W2vConfig(input_file=path, output_dir=out,
                                                min_freq=min_freq), [path])
  return mt_generator.MTGenerator(mt_config.MTConfig(input_file=path, output_dir=out,
                                                     num_train=0, num_val=1000,
                                                     min_freq=min_freq), [path])


def entries(partial) -> int:
  """Token entries a merged partial holds (mt: both sides)."""
  if partial is None:
    return 0
  if isinstance(partial, w2v_generator.TokenCounts):
    return len(partial.slot)
  sides = partial[1]
  return 0 if sides is None else sum(len(side) for side in sides)


def comparable(value) -> str:
  """What the bytes depend on, as text (w2v's sampler is built from its counts)."""
  if "raw_tokens" in value:  # w2v_data
    return repr([value[k].tolist() if hasattr(value[k], "tolist") else value[k]
                 for k in ("tokens", "counts", "raw_tokens", "first", "line0", "decode")])
  return repr(value)


def measure(p: protocol.Pass, partials) -> dict:
  """Both ways of merging the pass's partials: sizes, CPU seconds, equality."""
  t0 = time.process_time()
  whole = protocol.merge_all(p, copy.deepcopy(partials))
  t1 = time.process_time()
  by_shard = [[] for _ in range(p.shards)]
  for partial in copy.deepcopy(partials):
    for s, piece in sharded_pass.keyed_pieces(p, partial):
      by_shard[s].append(piece)
  merged = [protocol.merge_all(p, pieces) for pieces in by_shard]
  largest = max(entries(m) for m in merged)
  selected = [sharded_pass.select_pass(p, m) for m in merged]
  reaching = sum(entries(x) for x in selected)
  t2 = time.process_time()
  equal = comparable(p.finish(protocol.merge_all(p, selected))) == comparable(p.finish(whole))
  return {"distinct_tokens": entries(whole), "global_merge_entries": reaching,
          "largest_shard_tokens": largest, "shards": p.shards,
          "one_merge_cpu_s": round(t1 - t0, 2), "sharded_cpu_s": round(t2 - t1, 2),
          "values_equal": equal}


def main(argv=None) -> int:
  ap = script_args.ScriptParser(description=__doc__.split("\n", maxsplit=1)[0])
  ap.add_argument("--package", required=True, choices=("w2v_data", "mt_data"))
  ap.add_argument("--input_file", required=True, check=script_args.existing_files)
  ap.add_argument("--min_freq", type=int, default=None, check=script_args.POSITIVE,
                  help="default: the package's")
  a = ap.parse_args(argv)
  min_freq = a.min_freq or (10 if a.package == "w2v_data" else 2)
  with tempfile.TemporaryDirectory() as out:
    gen = generator(a.package, os.path.abspath(a.input_file), min_freq, out)
    gen.prepare()
    p = gen.passes[-1]
    t0 = time.process_time()
    partials = [protocol.split_carry(p.map(u, {}))[0] for u in gen.units()]
    map_s = time.process_time() - t0
  print(json.dumps({"package": a.package, "input": os.path.basename(a.input_file),
                    "min_freq": min_freq, "units": len(partials), "map_cpu_s": round(map_s, 2),
                    **measure(p, partials)}))
  return 0


if __name__ == "__main__":
  sys.exit(cli.run_script(main))
