#!/usr/bin/env python3
"""Trains paragraph vectors (PV-DBOW or PV-DM, doc2vec) on w2v_data records with Keras.

`--model=pv_dbow` records: a document's vector scores each of its words
(label 1) and K noise words (label 0). `--model=pv_dm` records: the mean of
the document vector and the context words' vectors scores the center word.
The script trains what the records were written for, saves the document
vectors (word2vec text format, one line per document id) and prints the
nearest documents of a few ids. With --seed the run is deterministic on CPU.

Example:
  python -m w2v_data.create --model=pv_dbow --doc_id_column --input_file=docs.tsv \\
      --output_dir=out/pv --min_freq=2
  python scripts/train_pv.py --data_dir=out/pv --epochs=20 --seed=1 --save_vectors=out/docs.vec
"""

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--data_dir", required=True,
                 help="a w2v_data.create --model=pv_dbow or pv_dm output")
  p.add_argument("--embed_size", type=int, default=100)
  p.add_argument("--batch_size", type=int, default=512)
  p.add_argument("--epochs", type=int, default=10)
  p.add_argument("--steps_per_epoch", type=int, default=None)
  p.add_argument("--learning_rate", type=float, default=0.005)
  p.add_argument("--seed", type=int, default=None,
                 help="seed everything (deterministic on CPU); default: not seeded")
  p.add_argument("--save_vectors", default=None,
                 help="write the document vectors here (word2vec text format)")
  p.add_argument("--docs", default="", help="comma-separated document ids to show "
                 "neighbours of (default: the first three)")
  args = p.parse_args(argv)
  from textrecords.errors import UserError  # pylint: disable=import-outside-toplevel
  from w2v_data import models, vectors  # pylint: disable=import-outside-toplevel
  try:
    start = time.time()
    _, _, names, matrix = models.train(
        args.data_dir, embed_size=args.embed_size, batch_size=args.batch_size,
        epochs=args.epochs, learning_rate=args.learning_rate, seed=args.seed,
        steps_per_epoch=args.steps_per_epoch, expect=("pv_dbow", "pv_dm"))
    if args.save_vectors:
      digest = vectors.save(args.save_vectors, names, matrix)
      print(f"saved {len(names)} document vectors to {args.save_vectors} (sha256 {digest})")
  except UserError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  print(f"trained in {time.time() - start:.1f} s")
  shown_docs = [d.strip() for d in args.docs.split(",") if d.strip()] or names[:3]
  for doc in shown_docs:
    near = models.nearest(matrix, names, doc)
    shown = ", ".join(f"{t} ({c:.3f})" for t, c in near) if near else "(no such document)"
    print(f"nearest to document {doc!r}: {shown}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
