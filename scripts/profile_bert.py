#!/usr/bin/env python3
"""Where bert_data's default mode spends its time (the figures in BENCHMARKS.md).

1. Wall time of each phase of one `bert_data.create` run (tokenize, build and
   spill instances, sort/frame/write), and the main process's CPU in each.
2. Worker CPU per instance: one dupe round of the default-mode task run in
   this process (`time.process_time`), then sorting and framing its buckets.
3. Tokenizer throughput per core for both basic-pass modes.

Usage:
  python scripts/profile_bert.py --corpus=corpus.txt [--num_workers=2]
(build a corpus with scripts/bench_bert.py's --source/--size_mb, or pass any).
"""

import argparse
import os
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from bert_data import pipeline as P  # pylint: disable=wrong-import-position
from bert_data import records  # pylint: disable=wrong-import-position
from bert_data.config import BertConfig  # pylint: disable=wrong-import-position
from textrecords import cli  # pylint: disable=wrong-import-position

VOCAB = os.path.join(REPO, "tests", "testdata", "vocab_uncased.txt")
PHASES = ("load_tokenizer", "build_corpus", "spill_default_mode", "write_default_mode_shards")


def timed_phases(config: BertConfig) -> dict:
  """Runs `pipeline.create`, timing each phase; returns {phase: (wall, main cpu)}."""
  times = {}
  originals = {name: getattr(P, name) for name in PHASES}

  def wrap(name):
    def timed(*args):
      t, c = time.perf_counter(), time.process_time()
      result = originals[name](*args)
      times[name] = (time.perf_counter() - t, time.process_time() - c)
      return result
    return timed

  for name in PHASES:
    setattr(P, name, wrap(name))
  try:
    t = time.perf_counter()
    summary = P.create(config)
    times["total"] = (time.perf_counter() - t, None)
  finally:
    for name, fn in originals.items():
      setattr(P, name, fn)
  return summary, times


def worker_cpu_per_instance(config: BertConfig) -> dict:
  """Default-mode task CPU per instance, in this process, for one dupe round."""
  cfg = BertConfig(**{**config.__dict__, "dupe_factor": 1, "num_workers": 1})
  tok = P.load_tokenizer(cfg)
  corpus = P.build_corpus(cfg, tok, cli.Progress(True))
  mask = P.masking_params(cfg, tok)
  enc = records.BertRecordEncoder(cfg.max_seq_length, cfg.max_predictions_per_seq,
                                  tok.vocab_size)
  tmp = tempfile.mkdtemp()
  ctx = P._Context(cfg, corpus, mask, enc, spill_dir=tmp, num_buckets=4, clean=True)  # pylint: disable=protected-access
  P._STATE["ctx"] = ctx  # pylint: disable=protected-access
  c = time.process_time()
  n = sum(P._default_task(t) for t in P._tasks(cfg, corpus.num_docs))  # pylint: disable=protected-access
  build = time.process_time() - c
  c = time.process_time()
  for b in range(4):
    P._frame_bucket(b)  # pylint: disable=protected-access
  frame = time.process_time() - c
  return {"instances": n, "build_mask_encode_spill_us": build / n * 1e6,
          "sort_frame_us": frame / n * 1e6}


def tokenizer_speed(corpus: str, max_lines: int = 30000) -> dict:
  """encode_batch MB/s per core (process CPU) for both basic-pass modes."""
  from bert_data.tokenizer import WordPieceTokenizer  # pylint: disable=import-outside-toplevel
  os.environ["TOKENIZERS_PARALLELISM"] = "false"
  lines = []
  with open(corpus, encoding="utf-8") as f:
    for line in f:
      if line.strip():
        lines.append(line.strip())
      if len(lines) >= max_lines:
        break
  mb = sum(len(l.encode("utf-8")) for l in lines) / 1e6
  out = {}
  for mode in ("python", "hf"):
    tok = WordPieceTokenizer(VOCAB, basic_pass=mode)
    c = time.process_time()
    for i in range(0, len(lines), 4096):
      tok.encode_batch(lines[i:i + 4096])
    out[mode] = mb / (time.process_time() - c)
  return out


def main():
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--corpus", required=True)
  ap.add_argument("--num_workers", type=int, default=2)
  ap.add_argument("--dupe_factor", type=int, default=10)
  args = ap.parse_args()
  out = os.path.join(tempfile.mkdtemp(prefix="profile_bert_"), "x.tfrecord")
  config = BertConfig(input_files=(args.corpus,), output_files=(out,), vocab_file=VOCAB,
                      dupe_factor=args.dupe_factor, num_workers=args.num_workers).validate()
  summary, times = timed_phases(config)
  print(f"{summary['instances']:,} instances, {args.num_workers} workers")
  for name, (wall, cpu) in times.items():
    print(f"  {name:28s} {wall:6.2f} s wall" + (f", main-process cpu {cpu:5.2f} s" if cpu is not None else ""))
  w = worker_cpu_per_instance(config)
  print(f"worker cpu per instance (one round, {w['instances']:,} instances): "
        f"build+mask+encode+spill {w['build_mask_encode_spill_us']:.1f} us, "
        f"sort+frame {w['sort_frame_us']:.1f} us")
  t = tokenizer_speed(args.corpus)
  print(f"tokenizer encode_batch, one core: basic_pass=python {t['python']:.1f} MB/s, "
        f"basic_pass=hf {t['hf']:.1f} MB/s")


if __name__ == "__main__":
  main()
