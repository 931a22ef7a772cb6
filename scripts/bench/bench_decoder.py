#!/usr/bin/env python3
"""Times the two paths of the example decoder on a dataset's records (CPU us a record).

`textrecords.wire.example_decoder.ExampleDecoder` decodes a batch by the
numba walk (`decode_compiled`, numba installed: every reader's extra brings
it) or record by record in Python (`decode_general`: the reference, any
valid encoding, the fallback of the walk and the path of a core install
without numba). This times both on the same batches of the same records,
read once into memory (docs/architecture.md, "Reference and fast forms").

Usage:
  python -m bert_data.create --input_file=bert_data/sample/sample_corpus.txt \\
      --output_file=out/b/t.tfrecord --vocab_file=bert_data/sample/vocab.txt
  python scripts/bench/bench_decoder.py --package=bert_data --location=out/b/t.tfrecord
"""

import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:  # a checkout without installing
  sys.path.insert(0, ROOT)

from textrecords.files import tfrecord  # pylint: disable=wrong-import-position
from textrecords.reading import locations  # pylint: disable=wrong-import-position
from textrecords.runs import cli, script_args  # pylint: disable=wrong-import-position
from textrecords.wire import example_decoder, example_kernels, features  # pylint: disable=wrong-import-position

PATHS = ("numba", "general")


def load(package: str, location: str, records: int):
  """(schema, serialized records): the dataset's records repeated or cut to `records`."""
  found = locations.open_datasets(location, package)
  schema = features.schema_from_json(found[0].meta["schema"])
  data = []
  for entry in locations.record_files(found, verify="none"):
    data.extend(tfrecord.read_records(entry.path, found[0].meta.get("compression", "")))
    if len(data) >= records:
      break
  if not data:
    raise SystemExit(f"error: --location={location}: no records")
  return schema, (data * (records // len(data) + 1))[:records]


def time_path(path: str, schema, batches, rounds: int) -> float:
  """The least CPU seconds of `rounds` passes of one path over every batch."""
  dec = example_decoder.ExampleDecoder(schema, compiled=path == "numba")
  decode = dec.decode  # compiled=False: every batch through decode_general
  decode(batches[0])  # layouts learned, kernels compiled
  best = float("inf")
  for _ in range(rounds):
    start = time.process_time()
    for b in batches:
      decode(b)
    best = min(best, time.process_time() - start)
  return best


def main(argv=None) -> int:
  p = script_args.ScriptParser(description=__doc__.split("\n", maxsplit=1)[0])
  p.add_argument("--package", required=True, choices=("bert_data", "w2v_data", "mt_data"))
  p.add_argument("--location", required=True, help="a create's output (as make_dataset takes)")
  p.add_argument("--records", type=int, default=20000, check=script_args.POSITIVE)
  p.add_argument("--batch_size", type=int, default=256, check=script_args.POSITIVE)
  p.add_argument("--rounds", type=int, default=5, check=script_args.POSITIVE)
  a = p.parse_args(argv)
  schema, data = load(a.package, a.location, a.records)
  batches = [example_decoder.RecordBatch.from_records(data[i:i + a.batch_size])
             for i in range(0, len(data), a.batch_size)]
  if not example_kernels.available():
    raise SystemExit("error: bench_decoder.py times the numba walk: pip install numba")
  us = {path: round(1e6 * time_path(path, schema, batches, a.rounds) / len(data), 2)
        for path in PATHS}
  print(json.dumps({"package": a.package, "records": len(data), "batch_size": a.batch_size,
                    "cpu_us_per_record": us,
                    "general_vs_numba": round(us["general"] / us["numba"], 2)}))
  return 0


if __name__ == "__main__":
  sys.exit(cli.run_script(main))
