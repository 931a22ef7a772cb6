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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from w2v_data import training  # pylint: disable=wrong-import-position


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
  training.add_flags(p, vectors_help="the center embeddings")
  p.add_argument("--pad_to", type=int, default=None)
  p.add_argument("--negatives", choices=["stored", "fresh"], default="stored")
  p.add_argument("--words", default="chip,baby,intel", help="show neighbours of these")
  args = p.parse_args(argv)

  def _train(a):
    from w2v_data import models  # pylint: disable=import-outside-toplevel
    model, _, tokens = train(a.data_dir, embed_size=a.embed_size, batch_size=a.batch_size,
                             epochs=a.epochs, learning_rate=a.learning_rate, pad_to=a.pad_to,
                             negatives=a.negatives, seed=a.seed,
                             steps_per_epoch=a.steps_per_epoch)
    return tokens, models.embedding_matrix(model)

  return training.run(args, _train, args.words.split(","))


if __name__ == "__main__":
  sys.exit(main())
