r"""Trains a GRU encoder-decoder (d2l's Seq2Seq) in Keras on mt_data records.

    python -m mt_data.create --input_file=fra.txt --output_dir=/tmp/mt
    python scripts/train_seq2seq.py --data_dir=/tmp/mt --epochs=30

The encoder embeds the source and runs a GRU, masked by `source_valid_len`;
the decoder embeds `decoder_input`, appends the encoder's final state to each
step (as d2l's Seq2SeqDecoder does) and runs a GRU started from that state;
a dense layer gives next-token logits. The loss is cross-entropy weighted by
the dataset's `sample_weight` (0 on padding). After training, a few source
sentences are translated greedily (one token at a time, stopping at <eos>).

Prints one JSON object: per-epoch losses and the translations.
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _path in (_ROOT, os.path.join(_ROOT, "scripts")):  # a checkout without installing;
  if _path not in sys.path:                 # script_inputs beside this script
    sys.path.insert(0, _path)

from textrecords.runs import cli, script_args  # pylint: disable=wrong-import-position
import script_inputs  # pylint: disable=wrong-import-position,import-error

DEFAULT_SENTENCES = ("go .", "i lost .", "he's calm .", "i'm home .")


def build_model(src_vocab_size, tgt_vocab_size, embed_size=32, num_hiddens=64, dropout=0.0):
  """The Keras model: {"source", "decoder_input", "source_valid_len"} -> logits (B, T, V)."""
  import keras  # pylint: disable=import-outside-toplevel
  from keras import layers, ops  # pylint: disable=import-outside-toplevel

  class ValidMask(layers.Layer):
    """(source, valid_len) -> boolean mask of the first valid_len steps."""

    def call(self, source, valid_len):
      steps = ops.arange(ops.shape(source)[1], dtype="int32")
      return ops.expand_dims(steps, 0) < ops.expand_dims(ops.cast(valid_len, "int32"), 1)

  class AppendContext(layers.Layer):
    """Concatenates a (B, H) context vector to every step of a (B, T, E) sequence."""

    def call(self, seq, context):
      shape = ops.shape(seq)
      ctx = ops.broadcast_to(ops.expand_dims(context, 1),
                             (shape[0], shape[1], ops.shape(context)[-1]))
      return ops.concatenate([seq, ops.cast(ctx, seq.dtype)], axis=-1)

  source = keras.Input((None,), dtype="int32", name="source")
  decoder_input = keras.Input((None,), dtype="int32", name="decoder_input")
  valid_len = keras.Input((), dtype="int32", name="source_valid_len")

  mask = ValidMask()(source, valid_len)
  enc = layers.Embedding(src_vocab_size, embed_size)(source)
  _, state = layers.GRU(num_hiddens, return_state=True, dropout=dropout)(enc, mask=mask)
  dec = layers.Embedding(tgt_vocab_size, embed_size)(decoder_input)
  dec = AppendContext()(dec, state)
  dec = layers.GRU(num_hiddens, return_sequences=True, dropout=dropout)(dec, initial_state=state)
  logits = layers.Dense(tgt_vocab_size)(dec)
  return keras.Model({"source": source, "decoder_input": decoder_input,
                      "source_valid_len": valid_len}, logits)


def greedy_translate(model, src_codec, tgt_codec, sentence, num_steps):
  """Greedy decoding: feed the best token back in until <eos> or num_steps tokens."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  from mt_data import preprocess  # pylint: disable=import-outside-toplevel
  ids = src_codec.encode(sentence)[:num_steps]
  source = np.full((1, num_steps), preprocess.PAD_ID, np.int32)
  source[0, :len(ids)] = ids
  dec = np.full((1, num_steps), preprocess.PAD_ID, np.int32)
  dec[0, 0] = preprocess.BOS_ID
  out = []
  for t in range(num_steps):
    logits = model({"source": source, "decoder_input": dec,
                    "source_valid_len": np.array([len(ids)], np.int32)}, training=False)
    nxt = int(np.argmax(np.asarray(logits)[0, t]))
    if nxt == preprocess.EOS_ID:
      break
    out.append(nxt)
    if t + 1 < num_steps:
      dec[0, t + 1] = nxt
  return tgt_codec.decode(out)


def train(data_dir, epochs=30, batch_size=64, num_steps=9, lr=0.005, embed_size=32,
          num_hiddens=64, dropout=0.0, seed=0, sentences=DEFAULT_SENTENCES, verbose=0,
          validate=True):
  """Trains on the "train" split (validating on "valid" when asked and it has pairs).

  Raises:
    UserError: records another script trains on, a train split smaller than a
      batch, or TensorFlow not installed (one line each, before any training).
  """
  meta = script_inputs.check(data_dir, script_inputs.SEQ2SEQ, "--data_dir")  # other kinds
  script_args.check_batch_fits(batch_size, meta["splits"]["train"]["pairs"],
                               f"pairs of the train split at --data_dir={data_dir}")
  script_args.require_tensorflow()
  import keras  # pylint: disable=import-outside-toplevel
  import mt_data  # pylint: disable=import-outside-toplevel

  keras.utils.set_random_seed(seed)
  src_codec, tgt_codec = mt_data.load_codecs(data_dir)
  train_ds = mt_data.make_dataset(data_dir, batch_size, split="train", num_steps=num_steps,
                                  seed=seed)
  valid_ds = None
  if validate and meta["splits"]["valid"]["pairs"] > 0:
    valid_ds = mt_data.make_dataset(data_dir, batch_size, split="valid", num_steps=num_steps)
  model = build_model(len(src_codec), len(tgt_codec), embed_size, num_hiddens, dropout)
  model.compile(optimizer=keras.optimizers.Adam(lr, clipnorm=1.0),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  hist = model.fit(train_ds, validation_data=valid_ds, epochs=epochs, verbose=verbose)
  translations = {s: greedy_translate(model, src_codec, tgt_codec, s, num_steps)
                  for s in sentences}
  return {"loss": [round(float(v), 5) for v in hist.history["loss"]],
          "val_loss": [round(float(v), 5) for v in hist.history.get("val_loss", [])],
          "translations": translations}


def main(argv=None) -> int:
  p = script_args.ScriptParser(description=__doc__.split("\n")[0])
  p.add_argument("--data_dir", required=True, help="an --output_dir of mt_data.create")
  p.add_argument("--epochs", type=int, default=30, check=script_args.POSITIVE)
  p.add_argument("--batch_size", type=int, default=64, check=script_args.POSITIVE)
  p.add_argument("--num_steps", type=int, default=9, check=script_args.POSITIVE)
  p.add_argument("--lr", type=float, default=0.005, check=script_args.RATE)
  p.add_argument("--embed_size", type=int, default=32, check=script_args.POSITIVE)
  p.add_argument("--num_hiddens", type=int, default=64, check=script_args.POSITIVE)
  p.add_argument("--dropout", type=float, default=0.0, check=script_args.DROPOUT)
  p.add_argument("--seed", type=int, default=0, check=script_args.SEED)
  p.add_argument("--translate", action="append",
                 help="a source sentence to translate (repeatable)")
  p.add_argument("--no_validation", action="store_true",
                 help="skip the per-epoch validation loss")
  p.add_argument("--verbose", type=int, default=0, choices=(0, 1, 2),
                 help="Keras fit verbosity")
  a = p.parse_args(argv)
  result = train(a.data_dir, a.epochs, a.batch_size, a.num_steps, a.lr, a.embed_size,
                 a.num_hiddens, a.dropout, a.seed,
                 tuple(a.translate) if a.translate else DEFAULT_SENTENCES, a.verbose,
                 not a.no_validation)
  print(json.dumps(result, indent=1, ensure_ascii=False))
  return 0


if __name__ == "__main__":
  sys.exit(cli.run_script(main))
