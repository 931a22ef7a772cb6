#!/usr/bin/env python3
"""Trains a skip-gram model (d2l's word2vec) on w2v_data records with Keras.

Two embeddings (centers, contexts/noise words); the score of a (center, word)
pair is their dot product; the loss is binary cross-entropy on the scores,
masked by make_dataset's sample weights (padding counts for nothing).

With --seed the run is deterministic on CPU: two runs on the same records
(written with any --num_workers) save byte-identical vectors.

Example:
  python -m w2v_data.create --input_file=ptb.train.txt --output_dir=out/ptb_w2v
  python scripts/train_skipgram.py --data_dir=out/ptb_w2v --epochs=5 --seed=1 \\
      --save_vectors=out/ptb.vec --words=chip,baby,intel
  sha256sum out/ptb.vec
"""

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def train(data_dir: str, *, embed_size: int = 100, batch_size: int = 512, epochs: int = 5,
          learning_rate: float = 0.002, pad_to=None, negatives: str = "stored", seed=None,
          steps_per_epoch=None, verbose: int = 2):
  """Trains on `data_dir` (a w2v_data.create output); returns (model, history, tokens)."""
  import w2v_data  # pylint: disable=import-outside-toplevel
  from w2v_data import models  # pylint: disable=import-outside-toplevel
  if seed is not None:
    models.seed_everything(seed)
  ds = w2v_data.make_dataset(data_dir, batch_size, pad_to=pad_to, negatives=negatives,
                             seed=seed)
  tokens = models.read_tokens(data_dir)
  if steps_per_epoch:
    ds = ds.repeat()
  model = models.skipgram(len(tokens), embed_size, learning_rate)
  history = model.fit(ds, epochs=epochs, steps_per_epoch=steps_per_epoch, verbose=verbose,
                      shuffle=False)
  return model, history, tokens


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--data_dir", required=True, help="a w2v_data.create --output_dir")
  p.add_argument("--embed_size", type=int, default=100)
  p.add_argument("--batch_size", type=int, default=512)
  p.add_argument("--epochs", type=int, default=5)
  p.add_argument("--steps_per_epoch", type=int, default=None)
  p.add_argument("--learning_rate", type=float, default=0.002)
  p.add_argument("--pad_to", type=int, default=None)
  p.add_argument("--negatives", choices=["stored", "fresh"], default="stored")
  p.add_argument("--seed", type=int, default=None,
                 help="seed everything (deterministic on CPU); default: not seeded")
  p.add_argument("--save_vectors", default=None,
                 help="write the center embeddings here (word2vec text format)")
  p.add_argument("--words", default="chip,baby,intel")
  args = p.parse_args(argv)
  from textrecords.errors import UserError  # pylint: disable=import-outside-toplevel
  from w2v_data import models, vectors  # pylint: disable=import-outside-toplevel
  try:
    start = time.time()
    model, _, tokens = train(args.data_dir, embed_size=args.embed_size,
                             batch_size=args.batch_size, epochs=args.epochs,
                             learning_rate=args.learning_rate, pad_to=args.pad_to,
                             negatives=args.negatives, seed=args.seed,
                             steps_per_epoch=args.steps_per_epoch)
    matrix = models.embedding_matrix(model)
    if args.save_vectors:
      digest = vectors.save(args.save_vectors, tokens, matrix)
      print(f"saved {len(tokens)} vectors to {args.save_vectors} (sha256 {digest})")
  except UserError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  print(f"trained in {time.time() - start:.1f} s")
  for word in filter(None, (w.strip() for w in args.words.split(","))):
    near = models.nearest(matrix, tokens, word)
    shown = ", ".join(f"{t} ({c:.3f})" for t, c in near) if near else "(not in vocab)"
    print(f"nearest to {word!r}: {shown}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
