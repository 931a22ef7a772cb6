#!/usr/bin/env python3
"""Benchmark bert_data's recipes against the default mode, in the same run.

    python scripts/bench/bench_recipes.py --source=../shared/data/ptb.train.txt --size_mb=26

Runs `bert_data.create` (default mode, 2 workers) on a corpus built as
`bench_bert.py` builds it (PTB lines grouped into seeded documents) with:
plain NSP (the baseline), --sentence_order, --next_sentence=false with each
--packing, and --spm_model_file (a SentencePiece model built first by
`build_vocab --kind=sentencepiece` on the same corpus, not timed). Reports
wall time, instances/s and peak RSS of the process tree, and checks that 1
and 2 workers write the same bytes for each recipe.
"""

import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_bert import REPO, VOCAB, build_corpus, count_records, report, run_measured  # pylint: disable=wrong-import-position
from textrecords.runs import script_args  # pylint: disable=wrong-import-position

RECIPES = (
    ("NSP (default mode)", []),
    ("--sentence_order", ["--sentence_order"]),
    ("--packing=full_sentences", ["--next_sentence=false", "--packing=full_sentences"]),
    ("--packing=doc_sentences", ["--next_sentence=false", "--packing=doc_sentences"]),
    ("--spm_model_file", None),
)


def main():
  ap = script_args.ScriptParser()
  ap.add_argument("--source", required=True)
  ap.add_argument("--size_mb", type=float, default=26.0)
  ap.add_argument("--dupe_factor", type=int, default=2)
  args = ap.parse_args()
  env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="3")
  with tempfile.TemporaryDirectory() as tmp:
    corpus = os.path.join(tmp, "corpus.txt")
    info = build_corpus(args.source, args.size_mb, corpus)
    mb = info["bytes"] / 1e6
    model = os.path.join(tmp, "spm.model")
    subprocess.run([sys.executable, "-m", "bert_data.build_vocab", f"--input_file={corpus}",
                    f"--output_file={model}", "--kind=sentencepiece", "--vocab_size=8000",
                    "--quiet"], check=True, env=env)
    print(f"corpus: {mb:.1f} MB, {info['documents']:,} documents; dupe_factor="
          f"{args.dupe_factor}; 2 workers")
    print("| run | instances | wall s | instances/s | input MB/s | peak RSS MB | vs NSP |")
    print("|---|---|---|---|---|---|---|")
    base = None
    same = {}
    for name, flags in RECIPES:
      tok = [f"--spm_model_file={model}"] if flags is None else [f"--vocab_file={VOCAB}"]
      outs = []
      for workers in (2, 1):
        out = os.path.join(tmp, f"{len(same)}-{workers}", "t.tfrecord")
        cmd = [sys.executable, "-m", "bert_data.create", f"--input_file={corpus}",
               f"--output_file={out}", f"--dupe_factor={args.dupe_factor}", "--quiet",
               f"--num_workers={workers}", *tok, *(flags or [])]
        r = run_measured(cmd, env)
        outs.append(out)
        if workers == 2:
          r["instances"] = count_records(out + ".meta.json")
          report(name, r, mb, base)
          base = base or r
      same[name] = open(outs[0], "rb").read() == open(outs[1], "rb").read()
      for out in outs:
        os.remove(out)
    print("1 vs 2 workers byte-identical: " + ", ".join(f"{k}: {v}" for k, v in same.items()))


if __name__ == "__main__":
  main()
