"""keras-hub consumes bert_data records directly (feature_names="keras_hub").

Runs where keras_hub is importable (`scripts/check_keras_hub.sh` sets up such
a venv); skipped elsewhere.
"""

import numpy as np
import pytest

keras_hub = pytest.importorskip("keras_hub")

import keras  # noqa: E402  pylint: disable=wrong-import-position

import bert_data  # noqa: E402  pylint: disable=wrong-import-position
from bert_data import generator  # noqa: E402  pylint: disable=wrong-import-position
from bert_data.config import BertConfig  # noqa: E402  pylint: disable=wrong-import-position
from conftest import SAMPLE_TEXT, VOCAB  # noqa: E402  pylint: disable=wrong-import-position


@pytest.mark.parametrize("masking", ["static", "dynamic"])
def test_bert_masked_lm_fits_our_records(tmp_path, masking):
  out = str(tmp_path / "train.tfrecord")
  generator.create(BertConfig(input_files=(SAMPLE_TEXT,), output_files=(out,), vocab_file=VOCAB,
                             max_seq_length=64, max_predictions_per_seq=10, dupe_factor=2,
                             masking=masking, do_whole_word_mask=masking == "dynamic"))
  ds = bert_data.make_dataset(out, 4, seed=0, repeat=True, feature_names="keras_hub")
  keras.utils.set_random_seed(0)
  backbone = keras_hub.models.BertBackbone(
      vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32,
      max_sequence_length=64)
  model = keras_hub.models.BertMaskedLM(backbone=backbone, preprocessor=None)
  model.compile(optimizer=keras.optimizers.Adam(1e-3),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                weighted_metrics=["sparse_categorical_accuracy"])
  before = [w.copy() for w in model.get_weights()]
  hist = model.fit(ds, steps_per_epoch=3, epochs=2, verbose=0)
  losses = hist.history["loss"]
  assert len(losses) == 2 and all(np.isfinite(losses))
  assert any(not np.array_equal(a, b) for a, b in zip(before, model.get_weights()))
  # The task's own output matches our mask layout.
  x, y, w = next(iter(ds))
  logits = model.predict(x, verbose=0)
  assert logits.shape == (4, 10, 30522) and y.shape == (4, 10) and w.shape == (4, 10)
