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
  python scripts/bench_beam.py --bert_source=../shared/data/ptb.train.txt --bert_mb=2 \\
      --w2v_corpus=../shared/data/ptb.train.txt --mt_corpus=../shared/data/fra.txt
"""

import argparse
import hashlib
import os
import platform
import shutil
import sys
import tempfile

import psutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_bert import VOCAB, build_corpus, run_measured  # pylint: disable=wrong-import-position

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


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--bert_source", help="text whose lines make the bert corpus (documents "
                  "of 20-90 lines, as scripts/bench_bert.py builds it)")
  ap.add_argument("--bert_mb", type=float, default=2.0, help="bert corpus size")
  ap.add_argument("--bert_dupe_factor", type=int, default=2)
  ap.add_argument("--bert_num_shards", type=int, default=4)
  ap.add_argument("--w2v_corpus", help="one sentence per line (e.g. ptb.train.txt)")
  ap.add_argument("--mt_corpus", help="source<TAB>target lines (e.g. fra.txt)")
  args = ap.parse_args()
  tmp = tempfile.mkdtemp(prefix="bench_beam_")
  results = []
  try:
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
  finally:
    shutil.rmtree(tmp, ignore_errors=True)
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


if __name__ == "__main__":
  main()
