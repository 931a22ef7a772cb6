#!/usr/bin/env python3
"""Fits a tiny BERT-style Keras 3 model on `bert_data` records (a smoke test).

The point is to show that records written by `python -m bert_data.create` and
read back by `bert_data.make_dataset` plug straight into `keras.Model.fit`:
the dataset's `(x, y, sample_weight)` dicts match this model's input and
output names. The model is far too small to learn anything useful; its
masked-LM loss should still fall quickly from ln(vocab_size) as it picks up
word frequencies.

Model: token + position + segment embeddings -> LayerNorm -> N transformer
encoder blocks (keras.layers.MultiHeadAttention, padding masked with
input_mask) -> a masked-LM head (hidden states gathered at
masked_lm_positions, projected to vocabulary logits) and a next-sentence head
on the [CLS] position.

  python scripts/train_bert_tiny.py --input out/train.tfrecord --steps 50
"""

import functools
import os
import sys
import time
import types
from typing import List

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _path in (_ROOT, os.path.join(_ROOT, "scripts")):  # a checkout without installing;
  if _path not in sys.path:                 # script_inputs beside this script
    sys.path.insert(0, _path)

# Keras and TensorFlow are imported on first use (`_layers`), after the flags and
# the input are checked and their being installed is (`script_args.require_tensorflow`).
from textrecords.runs import cli, script_args  # pylint: disable=wrong-import-position
import script_inputs  # pylint: disable=wrong-import-position,import-error

MASKED_LM = "masked_lm"
NEXT_SENTENCE = "next_sentence"
INPUT_NAMES = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")
PACKED_INPUT_NAMES = ("instance_ids", "position_ids")  # packed rows' extra inputs


def read_metadata(records_path: str) -> dict:
  """The metadata bert_data.create wrote for `records_path` (any location
  `make_dataset` takes); another package's dataset is refused naming the
  script that trains on it."""
  return script_inputs.check(records_path, script_inputs.BERT, "--input")


def check_packed(meta: dict, packed: bool, where: str) -> int:
  """The records' pack_instances N, after checking that --packed is given
  exactly for packed rows (ValueError otherwise)."""
  n = int(meta.get("pack_instances", 1))
  if n > 1 and not packed:
    raise ValueError(f"--input={where}: packed rows (pack_instances={n}); add --packed")
  if packed and n == 1:
    raise ValueError(f"--packed: --input={where} holds one instance per row (made without "
                     "--pack_instances); drop --packed")
  return n


def has_sentence_task(meta: dict) -> bool:
  """False for packed records (--next_sentence=false): no label, no NSP head."""
  return meta.get("sentence_task", "nsp") != "none"


@functools.lru_cache(maxsize=None)
def _layers() -> types.SimpleNamespace:
  """The model's Keras layers and the step logger (Keras and TensorFlow imported here)."""
  import keras  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel

  class BertEmbeddings(keras.layers.Layer):
    """Sum of token, position and segment embeddings, then LayerNorm + dropout."""

    def __init__(self, vocab_size, max_seq_length, hidden, type_vocab_size=2, dropout=0.1,
                 **kwargs):
      super().__init__(**kwargs)
      self.vocab_size, self.max_seq_length, self.hidden = vocab_size, max_seq_length, hidden
      self.type_vocab_size, self.dropout_rate = type_vocab_size, dropout
      init = keras.initializers.TruncatedNormal(stddev=0.02)
      self.token = keras.layers.Embedding(vocab_size, hidden, embeddings_initializer=init,
                                          name="token")
      self.position = keras.layers.Embedding(max_seq_length, hidden,
                                             embeddings_initializer=init, name="position")
      self.segment = keras.layers.Embedding(type_vocab_size, hidden,
                                            embeddings_initializer=init, name="segment")
      self.norm = keras.layers.LayerNormalization(epsilon=1e-12, name="norm")
      self.dropout = keras.layers.Dropout(dropout)

    def call(self, input_ids, segment_ids, position_ids=None, training=None):
      # Packed rows give each token its position within its instance.
      positions = (tf.range(tf.shape(input_ids)[1])[tf.newaxis] if position_ids is None
                   else position_ids)
      x = (self.token(input_ids) + self.position(positions)
           + self.segment(segment_ids))
      return self.dropout(self.norm(x), training=training)

    def get_config(self):
      return {**super().get_config(), "vocab_size": self.vocab_size,
              "max_seq_length": self.max_seq_length, "hidden": self.hidden,
              "type_vocab_size": self.type_vocab_size, "dropout": self.dropout_rate}


  class EncoderBlock(keras.layers.Layer):
    """Post-LayerNorm transformer encoder block (self-attention + GELU MLP)."""

    def __init__(self, hidden, num_heads, intermediate, dropout=0.1, **kwargs):
      super().__init__(**kwargs)
      self.hidden, self.num_heads, self.intermediate = hidden, num_heads, intermediate
      self.dropout_rate = dropout
      init = keras.initializers.TruncatedNormal(stddev=0.02)
      self.attention = keras.layers.MultiHeadAttention(
          num_heads=num_heads, key_dim=hidden // num_heads, dropout=dropout,
          kernel_initializer=init, name="attention")
      self.attention_norm = keras.layers.LayerNormalization(epsilon=1e-12, name="attention_norm")
      self.up = keras.layers.Dense(intermediate, activation="gelu", kernel_initializer=init,
                                   name="intermediate")
      self.down = keras.layers.Dense(hidden, kernel_initializer=init, name="output")
      self.output_norm = keras.layers.LayerNormalization(epsilon=1e-12, name="output_norm")
      self.dropout = keras.layers.Dropout(dropout)

    def call(self, x, input_mask, attention_mask=None, training=None):
      # (B, L) padding mask -> (B, L_query, L_key): every query sees only real keys;
      # packed rows pass their block-diagonal (B, L, L) mask instead.
      if attention_mask is None:
        keys = tf.cast(input_mask, tf.bool)[:, tf.newaxis, :]
        attention_mask = tf.broadcast_to(keys,
                                         [tf.shape(x)[0], tf.shape(x)[1], tf.shape(x)[1]])
      attended = self.attention(x, x, attention_mask=attention_mask, training=training)
      x = self.attention_norm(x + self.dropout(attended, training=training))
      mlp = self.down(self.up(x))
      return self.output_norm(x + self.dropout(mlp, training=training))

    def get_config(self):
      return {**super().get_config(), "hidden": self.hidden, "num_heads": self.num_heads,
              "intermediate": self.intermediate, "dropout": self.dropout_rate}


  class MaskedLMHead(keras.layers.Layer):
    """Hidden states at masked_lm_positions -> transform -> logits over the vocabulary."""

    def __init__(self, vocab_size, hidden, **kwargs):
      super().__init__(**kwargs)
      self.vocab_size, self.hidden = vocab_size, hidden
      init = keras.initializers.TruncatedNormal(stddev=0.02)
      self.transform = keras.layers.Dense(hidden, activation="gelu", kernel_initializer=init,
                                          name="transform")
      self.norm = keras.layers.LayerNormalization(epsilon=1e-12, name="norm")
      self.logits = keras.layers.Dense(vocab_size, kernel_initializer=init, name="logits")

    def call(self, sequence, positions):
      gathered = tf.gather(sequence, positions, batch_dims=1)  # (B, P, H)
      return self.logits(self.norm(self.transform(gathered)))  # (B, P, V)

    def get_config(self):
      return {**super().get_config(), "vocab_size": self.vocab_size, "hidden": self.hidden}


  class ClsToken(keras.layers.Layer):
    """The hidden state of the first ([CLS]) position."""

    def call(self, sequence):
      return sequence[:, 0, :]

  class InstanceClsTokens(keras.layers.Layer):
    """Packed rows: the hidden state at each instance's [CLS] (its first token),
    (B, N, H); an empty slot takes position 0 (its weight is 0)."""

    def __init__(self, pack_instances, **kwargs):
      super().__init__(**kwargs)
      self.pack_instances = pack_instances

    def call(self, sequence, instance_ids):
      first = tf.stack([tf.argmax(tf.cast(tf.equal(instance_ids, k), tf.int32), axis=1,
                                  output_type=tf.int32)
                        for k in range(1, self.pack_instances + 1)], axis=1)  # (B, N)
      return tf.gather(sequence, first, batch_dims=1)

    def get_config(self):
      return {**super().get_config(), "pack_instances": self.pack_instances}

  class InstanceAttentionMask(keras.layers.Layer):
    """Packed rows: instance_ids (B, L) -> (B, L, L) bool, true within an instance."""

    def call(self, instance_ids):
      from bert_data import instance_packing  # pylint: disable=import-outside-toplevel
      return instance_packing.attention_mask(instance_ids)

  class _StepLogger(keras.callbacks.Callback):
    """Records each step's losses (one-step epochs, so the logs are per step)."""

    def __init__(self, every: int = 0):
      super().__init__()
      self.every, self.rows = every, []

    def on_epoch_end(self, epoch, logs=None):
      logs = dict(logs or {})
      self.rows.append(logs)
      if self.every and ((epoch + 1) % self.every == 0 or epoch == 0):
        nsp = logs.get(NEXT_SENTENCE + "_loss")
        print(f"step {epoch + 1:4d}  loss {logs.get('loss', float('nan')):.4f}  "
              f"masked_lm {logs.get(MASKED_LM + '_loss', logs.get('loss', float('nan'))):.4f}"
              + ("" if nsp is None else f"  next_sentence {nsp:.4f}"), flush=True)

  return types.SimpleNamespace(BertEmbeddings=BertEmbeddings, EncoderBlock=EncoderBlock,
                               MaskedLMHead=MaskedLMHead, ClsToken=ClsToken,
                               InstanceClsTokens=InstanceClsTokens,
                               InstanceAttentionMask=InstanceAttentionMask,
                               StepLogger=_StepLogger)


def build_model(vocab_size: int, max_seq_length: int, max_predictions_per_seq: int,
                hidden: int = 64, num_layers: int = 2, num_heads: int = 2,
                dropout: float = 0.1, next_sentence: bool = True, pack_instances: int = 0):
  """A tiny BERT (a keras.Model): dict inputs named like `make_dataset`'s x, outputs
  named like its y (without the next-sentence head for packed records: `next_sentence`
  False).

  pack_instances=N > 0: a model of packed rows (`create --pack_instances=N`):
  inputs also instance_ids and position_ids, attention only within each
  instance, positions per instance, next-sentence logits (B, N, 2) at each
  instance's [CLS]; max_predictions_per_seq is then the row's bound. Its
  weights are the unpacked model's, layer for layer.
  """
  import keras  # pylint: disable=import-outside-toplevel
  layers = _layers()
  if hidden % num_heads:
    raise ValueError(f"hidden={hidden} must be a multiple of num_heads={num_heads}")
  inputs = {
      "input_ids": keras.Input((max_seq_length,), dtype="int32", name="input_ids"),
      "input_mask": keras.Input((max_seq_length,), dtype="int32", name="input_mask"),
      "segment_ids": keras.Input((max_seq_length,), dtype="int32", name="segment_ids"),
      "masked_lm_positions": keras.Input((max_predictions_per_seq,), dtype="int32",
                                         name="masked_lm_positions"),
  }
  packed = {}
  if pack_instances:
    for name in PACKED_INPUT_NAMES:
      inputs[name] = keras.Input((max_seq_length,), dtype="int32", name=name)
    packed = {"attention_mask": layers.InstanceAttentionMask(name="instance_attention")(
        inputs[PACKED_INPUT_NAMES[0]])}
  x = layers.BertEmbeddings(vocab_size, max_seq_length, hidden, dropout=dropout,
                     name="embeddings")(inputs["input_ids"], inputs["segment_ids"],
                                        inputs.get(PACKED_INPUT_NAMES[1]))
  for i in range(num_layers):
    x = layers.EncoderBlock(hidden, num_heads, 4 * hidden, dropout=dropout,
                     name=f"encoder_{i}")(x, inputs["input_mask"], **packed)
  mlm_logits = layers.MaskedLMHead(vocab_size, hidden, name="mlm_head")(
      x, inputs["masked_lm_positions"])
  # Identity layers so that the outputs carry exactly the names in the dataset's y.
  outputs = {MASKED_LM: keras.layers.Identity(name=MASKED_LM)(mlm_logits)}
  if next_sentence:
    cls = (layers.InstanceClsTokens(pack_instances, name="cls")(
        x, inputs[PACKED_INPUT_NAMES[0]]) if pack_instances else layers.ClsToken(name="cls")(x))
    pooled = keras.layers.Dense(hidden, activation="tanh", name="pooler")(cls)
    nsp_logits = keras.layers.Dense(2, name="nsp_head")(pooled)
    outputs[NEXT_SENTENCE] = keras.layers.Identity(name=NEXT_SENTENCE)(nsp_logits)
  return keras.Model(inputs, outputs, name="tiny_bert")


def _mlm_loss():
  import keras  # pylint: disable=import-outside-toplevel
  # Mean over real predictions (sum(loss * w) / sum(w)), as BERT reports it; older
  # Keras 3 releases lack this reduction and average over all P slots instead.
  try:
    return keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction="mean_with_sample_weight")
  except ValueError:
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def compile_model(model, learning_rate: float = 2e-3, jit_compile: bool = False):
  """Compiles the keras.Model `model` with Adam and the masked-LM (+ NSP) losses; returns it."""
  import keras  # pylint: disable=import-outside-toplevel
  # XLA ("auto" in Keras 3) costs more in compile time than a few dozen tiny CPU steps gain.
  loss = {MASKED_LM: _mlm_loss()}
  metrics = {}
  if NEXT_SENTENCE in model.output:  # not for packed records
    # Packed rows: one label per instance slot, the mean over real instances.
    loss[NEXT_SENTENCE] = (_mlm_loss() if len(model.output[NEXT_SENTENCE].shape) == 3
                           else keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    metrics[NEXT_SENTENCE] = [keras.metrics.SparseCategoricalAccuracy(name="acc")]
  model.compile(optimizer=keras.optimizers.Adam(learning_rate), loss=loss,
                weighted_metrics=metrics or None, jit_compile=jit_compile)
  return model


def _mlm_losses(rows: List[dict]) -> List[float]:
  key = MASKED_LM + "_loss"
  if rows and key not in rows[0] and NEXT_SENTENCE + "_loss" not in rows[0]:
    key = "loss"  # the only output (packed records): Keras may log it as "loss" alone
  if rows and key not in rows[0]:
    raise KeyError(f"Keras logs have no {key!r} (keys: {sorted(rows[0])})")
  return [float(r[key]) for r in rows]


def train(records_path: str, steps: int, batch_size: int = 16, seed: int = 0,
          hidden: int = 64, num_layers: int = 2, num_heads: int = 2,
          learning_rate: float = 2e-3, dropout: float = 0.1, log_every: int = 0,
          return_model: bool = False, packed: bool = False):
  """Fits a tiny BERT on `records_path` for `steps` steps.

  Args:
    records_path: an output path given to `bert_data.create` (its `.meta.json`
      sidecar supplies vocab_size and the sequence lengths).
    steps: optimizer steps (batches); each is one Keras epoch, so the
      returned losses are per step, not running averages.
    batch_size, seed, hidden, num_layers, num_heads, learning_rate, dropout:
      the obvious; `seed` fixes weights, dropout and the record order.
    log_every: print losses every this many steps (0: silent).
    return_model: also return the fitted model.
    packed: the records are packed rows (`create --pack_instances=N`): train
      the packed model (`build_model(pack_instances=N)`); required for them,
      refused for unpacked records.
  Returns:
    The masked-LM loss of each step (a list of `steps` floats), or
    `(losses, model)` with `return_model`.
  """
  if steps < 1:
    raise ValueError(f"steps={steps}: must be >= 1")
  import keras  # pylint: disable=import-outside-toplevel
  import bert_data  # pylint: disable=import-outside-toplevel
  meta = read_metadata(records_path)
  n = check_packed(meta, packed, records_path)
  keras.utils.set_random_seed(seed)
  ds = bert_data.make_dataset(records_path, batch_size, training=True, seed=seed, repeat=True,
                              drop_remainder=True)
  model = compile_model(build_model(meta["vocab_size"], meta["max_seq_length"],
                                    meta.get("predictions_per_row",
                                             meta["max_predictions_per_seq"]), hidden=hidden,
                                    num_layers=num_layers, num_heads=num_heads,
                                    dropout=dropout, next_sentence=has_sentence_task(meta),
                                    pack_instances=n if packed else 0), learning_rate)
  logger = _layers().StepLogger(log_every)
  model.fit(ds, epochs=steps, steps_per_epoch=1, callbacks=[logger], shuffle=False, verbose=0)
  losses = _mlm_losses(logger.rows)
  return (losses, model) if return_model else losses


def _parser() -> script_args.ScriptParser:
  p = script_args.ScriptParser(description=__doc__.split("\n\n", maxsplit=1)[0])
  p.add_argument("--input", required=True,
                 help="records path given to bert_data.create as --output_file")
  p.add_argument("--steps", type=int, default=50, check=script_args.POSITIVE,
                 help="training steps (batches)")
  p.add_argument("--batch_size", type=int, default=16, check=script_args.POSITIVE)
  p.add_argument("--hidden", type=int, default=64, check=script_args.POSITIVE,
                 help="hidden size (a multiple of --heads)")
  p.add_argument("--layers", type=int, default=2, check=script_args.POSITIVE,
                 help="encoder blocks")
  p.add_argument("--heads", type=int, default=2, check=script_args.POSITIVE,
                 help="attention heads")
  p.add_argument("--seed", type=int, default=0, check=script_args.SEED)
  p.add_argument("--learning_rate", type=float, default=2e-3, check=script_args.RATE)
  p.add_argument("--log_every", type=int, default=5, check=script_args.NON_NEGATIVE,
                 help="print every N steps (0: only the summary)")
  p.add_argument("--packed", action="store_true",
                 help="records made with --pack_instances: attention within each "
                      "instance, positions per instance, NSP at each instance's [CLS]")
  return p


def main(argv=None) -> int:
  p = _parser()
  args = p.parse_args(argv)
  if args.hidden % args.heads:
    p.refuse(f"--hidden={args.hidden}: must be a multiple of --heads={args.heads}")
  meta = read_metadata(args.input)
  try:
    check_packed(meta, args.packed, args.input)
  except ValueError as e:
    p.refuse(str(e))
  script_args.check_batch_fits(args.batch_size, meta["counts"]["records"],
                               f"records at --input={args.input}")
  print(f"records: {args.input}  ({meta['counts']['records']:,} records, "
        f"max_seq_length={meta['max_seq_length']}, "
        f"max_predictions_per_seq={meta['max_predictions_per_seq']}, "
        f"vocab_size={meta['vocab_size']:,})", flush=True)
  print(f"training {args.steps} steps; before step 1 TensorFlow loads, builds and traces "
        "the model (10-30 s)", flush=True)
  script_args.require_tensorflow()
  start = time.time()
  losses, model = train(args.input, args.steps, batch_size=args.batch_size, seed=args.seed,
                        hidden=args.hidden, num_layers=args.layers, num_heads=args.heads,
                        learning_rate=args.learning_rate, log_every=args.log_every,
                        return_model=True, packed=args.packed)
  k = min(5, len(losses))
  first, last = sum(losses[:k]) / k, sum(losses[-k:]) / k
  print(f"model: {model.count_params():,} parameters; {args.steps} steps in "
        f"{time.time() - start:.1f}s")
  print(f"masked_lm loss: first {k} steps {first:.3f} -> last {k} steps {last:.3f}")
  return 0


if __name__ == "__main__":
  sys.exit(cli.run_script(main))
