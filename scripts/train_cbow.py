#!/usr/bin/env python3
"""Trains CBOW word vectors on w2v_data records (`--model=cbow`) with Keras.

The mean of the context words' vectors scores the center (label 1) and K
noise words (label 0); binary cross-entropy on the scores. With --seed the
run is deterministic on CPU (byte-identical --save_vectors).

Example:
  python -m w2v_data.create --model=cbow --input_file=ptb.train.txt --output_dir=out/ptb_cbow
  python scripts/train_cbow.py --data_dir=out/ptb_cbow --epochs=5 --seed=1 \\
      --save_vectors=out/cbow.vec --words=chip,baby,intel
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
  p.add_argument("--data_dir", required=True, help="a w2v_data.create --model=cbow output")
  p.add_argument("--embed_size", type=int, default=100)
  p.add_argument("--batch_size", type=int, default=512)
  p.add_argument("--epochs", type=int, default=5)
  p.add_argument("--steps_per_epoch", type=int, default=None)
  p.add_argument("--learning_rate", type=float, default=0.002)
  p.add_argument("--seed", type=int, default=None,
                 help="seed everything (deterministic on CPU); default: not seeded")
  p.add_argument("--save_vectors", default=None,
                 help="write the word vectors here (word2vec text format)")
  p.add_argument("--words", default="chip,baby,intel")
  args = p.parse_args(argv)
  from textrecords.errors import UserError  # pylint: disable=import-outside-toplevel
  from w2v_data import models, vectors  # pylint: disable=import-outside-toplevel
  try:
    start = time.time()
    _, _, names, matrix = models.train(
        args.data_dir, embed_size=args.embed_size, batch_size=args.batch_size,
        epochs=args.epochs, learning_rate=args.learning_rate, seed=args.seed,
        steps_per_epoch=args.steps_per_epoch, expect=("cbow",))
    if args.save_vectors:
      digest = vectors.save(args.save_vectors, names, matrix)
      print(f"saved {len(names)} vectors to {args.save_vectors} (sha256 {digest})")
  except UserError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  print(f"trained in {time.time() - start:.1f} s")
  for word in filter(None, (w.strip() for w in args.words.split(","))):
    near = models.nearest(matrix, names, word)
    shown = ", ".join(f"{t} ({c:.3f})" for t, c in near) if near else "(not in vocab)"
    print(f"nearest to {word!r}: {shown}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
