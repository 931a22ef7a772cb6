#!/usr/bin/env python3
"""Trains a tiny BERT-style model with Keras 3 on JAX, fed by grain: no TensorFlow.

bert_data records -> `bert_data.reader.grain_dataset(..., loader=True)` (a
grain DataLoader: seeded global shuffle, `--workers` processes, numpy
batches) -> `keras.Model.fit` on the JAX backend. The process never imports
TensorFlow (checked at the end; exit 1 if it did).

Model (keras.ops only, so any backend runs it): token + position + segment
embeddings -> LayerNorm -> one self-attention block (padding masked) -> a
masked-LM head at masked_lm_positions and a next-sentence head on [CLS].

  pip install -e '.[jax]'      # grain, jax and keras
  python scripts/train_bert_tiny_jax.py --input out/train.tfrecord --steps 30
"""

import functools
import os
import sys
import types

os.environ["KERAS_BACKEND"] = "jax"

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _path in (_ROOT, os.path.join(_ROOT, "scripts")):  # a checkout without installing;
  if _path not in sys.path:                 # script_inputs beside this script
    sys.path.insert(0, _path)

# jax, keras and grain are imported after the flags are checked and their being
# installed is (`script_args.require`).
from bert_data import schema as S  # pylint: disable=wrong-import-position
from textrecords.runs import cli, script_args  # pylint: disable=wrong-import-position
import script_inputs  # pylint: disable=wrong-import-position,import-error


def build_model(vocab_size: int, seq_len: int, num_predictions: int, hidden: int = 64,
                heads: int = 2, next_sentence: bool = True):
  """The tiny model (a keras.Model); inputs and outputs named as `numpy_batches`
  names them (no next-sentence head for packed records: `next_sentence` False)."""
  import keras  # pylint: disable=import-outside-toplevel
  layers = _layers()
  ids = keras.Input((seq_len,), dtype="int32", name=S.INPUT_IDS)
  mask = keras.Input((seq_len,), dtype="int32", name=S.INPUT_MASK)
  segments = keras.Input((seq_len,), dtype="int32", name=S.SEGMENT_IDS)
  positions = keras.Input((num_predictions,), dtype="int32", name=S.MASKED_LM_POSITIONS)
  tokens = keras.layers.Embedding(vocab_size, hidden, name="token")
  x = (tokens(ids) + keras.layers.Embedding(2, hidden, name="segment")(segments)
       + layers.PositionEmbedding(seq_len, hidden, name="position")(ids))
  x = keras.layers.LayerNormalization(epsilon=1e-12)(x)
  keys = layers.PairMask(name="pair_mask")(mask)
  attended = keras.layers.MultiHeadAttention(heads, hidden // heads)(x, x, attention_mask=keys)
  x = keras.layers.LayerNormalization(epsilon=1e-12)(x + attended)
  x = keras.layers.LayerNormalization(epsilon=1e-12)(
      x + keras.layers.Dense(hidden)(keras.layers.Dense(4 * hidden, activation="gelu")(x)))
  picked = layers.Gather(name="gather")(x, positions)
  mlm = keras.layers.Dense(vocab_size, name=S.MASKED_LM)(
      keras.layers.Dense(hidden, activation="gelu")(picked))
  outputs = {S.MASKED_LM: mlm}
  if next_sentence:
    outputs[S.NEXT_SENTENCE] = keras.layers.Dense(2, name=S.NEXT_SENTENCE)(layers.First()(x))
  return keras.Model({S.INPUT_IDS: ids, S.INPUT_MASK: mask, S.SEGMENT_IDS: segments,
                      S.MASKED_LM_POSITIONS: positions}, outputs)


@functools.lru_cache(maxsize=None)
def _layers() -> types.SimpleNamespace:
  """The model's own Keras layers (Keras imported here)."""
  import keras  # pylint: disable=import-outside-toplevel
  from keras import ops  # pylint: disable=import-outside-toplevel

  class PositionEmbedding(keras.layers.Layer):
    """Learned position embeddings, (1, L, H), broadcast over the batch."""

    def __init__(self, length, hidden, **kwargs):
      super().__init__(**kwargs)
      self.table = self.add_weight(shape=(length, hidden), initializer="glorot_uniform",
                                   name="table")

    def call(self, ids):
      return ops.expand_dims(self.table[:ops.shape(ids)[1]], 0)


  class PairMask(keras.layers.Layer):
    """(B, L) padding mask -> (B, L, L): queries attend to real keys only."""

    def call(self, mask):
      keys = ops.cast(ops.expand_dims(mask, 1), "bool")
      return ops.repeat(keys, ops.shape(mask)[1], axis=1)


  class Gather(keras.layers.Layer):
    """Hidden states at the masked positions: (B, L, H), (B, P) -> (B, P, H)."""

    def call(self, x, positions):
      return ops.take_along_axis(x, ops.expand_dims(positions, -1), axis=1)


  class First(keras.layers.Layer):
    """The [CLS] position's hidden state."""

    def call(self, x):
      return x[:, 0]

  return types.SimpleNamespace(PositionEmbedding=PositionEmbedding, PairMask=PairMask,
                               Gather=Gather, First=First)


def batches(loader):
  """An endless stream of `(x, y, sample_weight)` from a grain DataLoader."""
  while True:
    yield from loader


def main(argv=None) -> int:
  p = script_args.ScriptParser(description=__doc__.split("\n")[0])
  p.add_argument("--input", required=True, help="bert_data records (path, glob or meta)")
  p.add_argument("--steps", type=int, default=30, check=script_args.POSITIVE)
  p.add_argument("--batch_size", type=int, default=16, check=script_args.POSITIVE)
  p.add_argument("--workers", type=int, default=0, check=script_args.NON_NEGATIVE,
                 help="grain worker processes")
  p.add_argument("--seed", type=int, default=0, check=script_args.SEED)
  args = p.parse_args(argv)
  meta = script_inputs.check(args.input, script_inputs.BERT, "--input")  # other kinds: one line
  script_args.check_batch_fits(args.batch_size, meta["counts"]["records"],
                               f"records at --input={args.input}")
  script_args.require(("jax", "keras", "grain"), script_args.JAX_INSTALL)
  import keras  # pylint: disable=import-outside-toplevel
  from bert_data import reader  # pylint: disable=import-outside-toplevel
  opened = reader.open_dataset(args.input)
  meta = opened.entries[0].found.meta
  keras.utils.set_random_seed(args.seed)
  pairs = meta.get("sentence_task", "nsp") != "none"  # packed records: no label
  model = build_model(meta["vocab_size"], meta["max_seq_length"],
                      meta["max_predictions_per_seq"], next_sentence=pairs)
  loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
  model.compile(optimizer=keras.optimizers.Adam(1e-3),
                loss={S.MASKED_LM: loss, **({S.NEXT_SENTENCE: loss} if pairs else {})},
                weighted_metrics=[])
  loader = opened.grain(args.batch_size, loader=True, worker_count=args.workers,
                        training=True, seed=args.seed, num_epochs=None)
  evaluate = lambda: model.evaluate(  # noqa: E731  the first 4 eval batches
      batches(opened.grain(args.batch_size, loader=True)), steps=4, verbose=0,
      return_dict=True)["loss"]
  before = evaluate()
  model.fit(batches(loader), steps_per_epoch=args.steps, epochs=1, verbose=0)
  after = evaluate()
  print(f"backend={keras.backend.backend()} steps={args.steps} "
        f"eval_loss_before={before:.3f} eval_loss_after={after:.3f}")
  if "tensorflow" in sys.modules:
    print("error: TensorFlow was imported", file=sys.stderr)
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(cli.run_script(main))
