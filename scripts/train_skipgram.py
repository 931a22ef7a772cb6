#!/usr/bin/env python3
"""Trains skip-gram word vectors (word2vec) on w2v_data records with Keras.

Two embeddings (centers, contexts/noise words); the score of a (center, word)
pair is their dot product. --trainer=sgd (default): word2vec's SGD with a
linearly falling rate on subsampling, windows and noise words drawn anew
every epoch (`w2v_data.train.sgd`; by default in the numba kernel of
`w2v_data.train.kernel_engine`, defaults in `w2v_data.train.cli`);
--trainer=keras: d2l's model with Adam on the records' one draw (binary
cross-entropy masked by make_dataset's sample weights).

The run is deterministic on CPU (sgd: always, seed 0 by default; keras: with
--seed): two runs on the same records (written with any --num_workers), with
any --threads, save byte-identical vectors. The saved vectors leave out
<unk> (never trained).

Example:
  python -m w2v_data.create --input_file=ptb.train.txt --output_dir=out/ptb_all
  python scripts/train_skipgram.py --data_dir=out/ptb_all --seed=1 \\
      --save_vectors=out/ptb.vec --words=chip,baby,intel
  sha256sum out/ptb.vec
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _path in (ROOT, os.path.join(ROOT, "scripts")):  # a checkout without installing;
  if _path not in sys.path:                 # script_inputs beside this script
    sys.path.insert(0, _path)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from textrecords.runs import cli, script_args  # pylint: disable=wrong-import-position
from w2v_data.train import cli as train_cli  # pylint: disable=wrong-import-position
import script_inputs  # pylint: disable=wrong-import-position,import-error


def train(data_dir: str, *, embed_size: int = 100, batch_size: int = 512, epochs: int = 5,
          learning_rate: float = 0.002, pad_to=None, negatives: str = "stored", seed=None,
          steps_per_epoch=None, verbose: int = 2):
  """Trains on `data_dir` (a w2v_data.create output); returns (model, history, tokens)."""
  import w2v_data  # pylint: disable=import-outside-toplevel
  from w2v_data.train import models  # pylint: disable=import-outside-toplevel
  if seed is not None:
    models.seed_everything(seed)
  # One infinite pass (repeat=True) cut into epochs by steps_per_epoch (a
  # dataset without repeat would give the next epoch on each pass too).
  ds = w2v_data.make_dataset(data_dir, batch_size, pad_to=pad_to, negatives=negatives,
                             seed=seed, repeat=True)
  steps_per_epoch = steps_per_epoch or len(w2v_data.make_dataset(data_dir, batch_size))
  tokens = models.read_tokens(data_dir)
  model = models.skipgram(len(tokens), embed_size, learning_rate)
  history = model.fit(ds, epochs=epochs, steps_per_epoch=steps_per_epoch, verbose=verbose,
                      shuffle=False)
  return model, history, tokens


def main(argv=None):
  p = train_cli.parser(__doc__)
  train_cli.add_flags(p, vectors_help="the center embeddings")
  p.add_argument("--pad_to", type=int, default=None, check=script_args.POSITIVE,
                 help="keras trainer only")
  p.add_argument("--negatives", choices=["stored", "fresh"], default="stored",
                 help="keras trainer only (sgd always draws fresh ones)")
  p.add_argument("--words", default="chip,baby,intel", help="show neighbours of these")
  args = train_cli.resolve(p.parse_args(argv))

  def _train(a):
    from w2v_data.train import models  # pylint: disable=import-outside-toplevel
    from w2v_data.train import vectors  # pylint: disable=import-outside-toplevel
    check_dataset = script_inputs.checker(script_inputs.SKIPGRAM, "--data_dir")
    train_cli.check_inputs(a.data_dir, check_dataset)  # other kinds, no TensorFlow: one line
    if a.trainer == "sgd":
      return train_cli.sgd_train(a, ("skipgram",))
    model, _, tokens = train(a.data_dir, embed_size=a.embed_size, batch_size=a.batch_size,
                             epochs=a.epochs, learning_rate=a.learning_rate, pad_to=a.pad_to,
                             negatives=a.negatives, seed=a.seed,
                             steps_per_epoch=a.steps_per_epoch)
    return vectors.without_unk(tokens, models.embedding_matrix(model))

  return train_cli.run(args, _train, args.words.split(","))


if __name__ == "__main__":
  sys.exit(cli.run_script(main))
