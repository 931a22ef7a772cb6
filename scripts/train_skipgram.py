#!/usr/bin/env python3
"""Trains a skip-gram model (d2l's word2vec) on w2v_data records with Keras.

Two embeddings (centers, contexts/noise words); the score of a (center, word)
pair is their dot product; the loss is binary cross-entropy on the scores,
masked by make_dataset's sample weights (padding counts for nothing).

Example:
  python -m w2v_data.create --input_file=ptb.train.txt --output_dir=out/ptb_w2v
  python scripts/train_skipgram.py --data_dir=out/ptb_w2v --epochs=5 \\
      --words=chip,baby,intel
"""

import argparse
import json
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def build_model(vocab_size: int, embed_size: int, learning_rate: float = 0.002):
  """The skip-gram model: inputs {"center": (B,1), "contexts_negatives": (B,L)} -> logits (B,L)."""
  import keras  # pylint: disable=import-outside-toplevel
  from w2v_data import schema  # pylint: disable=import-outside-toplevel
  center = keras.Input((1,), dtype="int32", name=schema.X_CENTER)
  words = keras.Input((None,), dtype="int32", name=schema.X_CONTEXTS_NEGATIVES)
  v = keras.layers.Embedding(vocab_size, embed_size, name="center_embedding")(center)
  u = keras.layers.Embedding(vocab_size, embed_size, name="context_embedding")(words)
  scores = keras.ops.squeeze(keras.ops.matmul(v, keras.ops.transpose(u, (0, 2, 1))), 1)
  model = keras.Model({schema.X_CENTER: center, schema.X_CONTEXTS_NEGATIVES: words}, scores)

  def masked_bce(labels, logits):
    # Elementwise; Keras multiplies by the (B, L) sample weights (the mask).
    return keras.ops.binary_crossentropy(labels, logits, from_logits=True)

  model.compile(optimizer=keras.optimizers.Adam(learning_rate), loss=masked_bce)
  return model


def nearest(model, tokens, word: str, k: int = 3):
  """The k tokens whose center embeddings have the highest cosine similarity to `word`."""
  if word not in tokens:
    return []
  w = model.get_layer("center_embedding").get_weights()[0]
  x = w[tokens.index(word)]
  cos = w @ x / (np.linalg.norm(w, axis=1) * np.linalg.norm(x) + 1e-9)
  order = [i for i in np.argsort(-cos) if tokens[i] != word][:k]
  return [(tokens[i], float(cos[i])) for i in order]


def train(data_dir: str, *, embed_size: int = 100, batch_size: int = 512, epochs: int = 5,
          learning_rate: float = 0.002, pad_to=None, negatives: str = "stored", seed=None,
          steps_per_epoch=None, verbose: int = 2):
  """Trains on `data_dir` (a w2v_data.create output); returns (model, history, tokens)."""
  import w2v_data  # pylint: disable=import-outside-toplevel
  from w2v_data import schema  # pylint: disable=import-outside-toplevel
  with open(os.path.join(data_dir, schema.META_NAME), encoding="utf-8") as f:
    vocab_size = json.load(f)["vocab"]["size"]
  with open(os.path.join(data_dir, schema.VOCAB_NAME), encoding="utf-8") as f:
    tokens = f.read().split("\n")[:vocab_size]
  ds = w2v_data.make_dataset(data_dir, batch_size, pad_to=pad_to, negatives=negatives,
                             seed=seed)
  if steps_per_epoch:
    ds = ds.repeat()
  model = build_model(vocab_size, embed_size, learning_rate)
  history = model.fit(ds, epochs=epochs, steps_per_epoch=steps_per_epoch, verbose=verbose,
                      shuffle=False)
  return model, history, tokens


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--data_dir", required=True, help="a w2v_data.create --output_dir")
  p.add_argument("--embed_size", type=int, default=100)
  p.add_argument("--batch_size", type=int, default=512)
  p.add_argument("--epochs", type=int, default=5)
  p.add_argument("--learning_rate", type=float, default=0.002)
  p.add_argument("--pad_to", type=int, default=None)
  p.add_argument("--negatives", choices=["stored", "fresh"], default="stored")
  p.add_argument("--seed", type=int, default=None)
  p.add_argument("--words", default="chip,baby,intel")
  args = p.parse_args(argv)
  from textrecords.errors import UserError  # pylint: disable=import-outside-toplevel
  try:
    start = time.time()
    model, _, tokens = train(args.data_dir, embed_size=args.embed_size,
                             batch_size=args.batch_size, epochs=args.epochs,
                             learning_rate=args.learning_rate, pad_to=args.pad_to,
                             negatives=args.negatives, seed=args.seed)
  except UserError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  print(f"trained in {time.time() - start:.1f} s")
  for word in args.words.split(","):
    near = nearest(model, tokens, word.strip())
    shown = ", ".join(f"{t} ({c:.3f})" for t, c in near) if near else "(not in vocab)"
    print(f"nearest to {word.strip()!r}: {shown}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
