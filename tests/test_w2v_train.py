"""scripts/train_skipgram.py trains from make_dataset and the loss falls."""

import importlib.util
import os

import pytest

from w2v_data import pipeline
from w2v_data.config import W2vConfig

pytest.importorskip("tensorflow")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "tests", "testdata", "w2v_tiny.txt")


def _script():
  spec = importlib.util.spec_from_file_location(
      "train_skipgram", os.path.join(ROOT, "scripts", "train_skipgram.py"))
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  return mod


@pytest.mark.parametrize("negatives,pad_to", [("stored", None), ("fresh", 40)])
def test_training_loss_falls(tmp_path, negatives, pad_to):
  d = str(tmp_path / "w2v")
  pipeline.create(W2vConfig(input_file=TINY, output_dir=d, min_freq=2, subsample_t=5e-2,
                            max_window_size=3, num_noise_words=3, num_workers=1))
  mod = _script()
  model, history, tokens = mod.train(d, embed_size=16, batch_size=32, epochs=4,
                                     learning_rate=0.02, negatives=negatives, pad_to=pad_to,
                                     seed=0, steps_per_epoch=15, verbose=0)
  loss = history.history["loss"]
  assert loss[-1] < 0.9 * loss[0], loss
  near = mod.nearest(model, tokens, "w0", k=3)
  assert len(near) == 3 and all(t != "w0" for t, _ in near)
