"""End to end: sample corpus -> bert_data.create -> make_dataset -> keras fit.

Writes records from the bundled sample corpus, checks that the dataset's
(x, y, sample_weight) structure is exactly what the tiny Keras model in
scripts/train_bert_tiny.py takes, and that a few dozen steps of training make
the masked-LM loss fall.
"""

import importlib.util
import json
import math
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(REPO, "bert_data", "sample")
SCRIPT = os.path.join(REPO, "scripts", "train_bert_tiny.py")
MAX_SEQ_LENGTH = 64
MAX_PREDICTIONS = 10
BATCH_SIZE = 16


def _load_script():
  spec = importlib.util.spec_from_file_location("train_bert_tiny", SCRIPT)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


@pytest.fixture(scope="module")
def tiny():
  pytest.importorskip("tensorflow")
  pytest.importorskip("keras")
  return _load_script()


@pytest.fixture(scope="module")
def records(tmp_path_factory):
  out = str(tmp_path_factory.mktemp("bert_train") / "sample.tfrecord")
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO)
  proc = subprocess.run(
      [sys.executable, "-m", "bert_data.create",
       f"--input_file={os.path.join(SAMPLE, 'sample_corpus.txt')}",
       f"--output_file={out}", f"--vocab_file={os.path.join(SAMPLE, 'vocab.txt')}",
       "--dupe_factor=2", f"--max_seq_length={MAX_SEQ_LENGTH}",
       f"--max_predictions_per_seq={MAX_PREDICTIONS}", "--num_workers=1", "--quiet"],
      capture_output=True, text=True, timeout=120, env=env, cwd=REPO)
  assert proc.returncode == 0, f"bert_data.create failed:\n{proc.stderr[-3000:]}"
  return out


def test_sample_files_are_bundled():
  with open(os.path.join(SAMPLE, "sample_corpus.txt"), encoding="utf-8") as f:
    docs = [d for d in f.read().split("\n\n") if d.strip()]
  assert len(docs) >= 30
  for doc in docs:
    assert 4 <= len(doc.strip().splitlines()) <= 15, doc[:80]
  with open(os.path.join(SAMPLE, "vocab.txt"), encoding="utf-8") as f:
    assert sum(1 for _ in f) == 30522
  assert os.path.exists(os.path.join(SAMPLE, "SOURCES.md"))


def test_metadata(records, tiny):
  meta = tiny.read_metadata(records)
  assert meta["vocab_size"] == 30522
  assert meta["max_seq_length"] == MAX_SEQ_LENGTH
  assert meta["max_predictions_per_seq"] == MAX_PREDICTIONS
  assert meta["counts"]["records"] >= 5 * BATCH_SIZE
  with open(records + ".meta.json", encoding="utf-8") as f:
    assert json.load(f) == meta


def test_dataset_structure_matches_model(records, tiny):
  import bert_data  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel

  ds = bert_data.make_dataset(records, BATCH_SIZE, training=True, seed=1, drop_remainder=True)
  x_spec, y_spec, w_spec = ds.element_spec
  L, P, B = MAX_SEQ_LENGTH, MAX_PREDICTIONS, BATCH_SIZE
  assert {k: (tuple(v.shape), v.dtype) for k, v in x_spec.items()} == {
      "input_ids": ((B, L), tf.int32), "input_mask": ((B, L), tf.int32),
      "segment_ids": ((B, L), tf.int32), "masked_lm_positions": ((B, P), tf.int32)}
  assert {k: (tuple(v.shape), v.dtype) for k, v in y_spec.items()} == {
      "masked_lm": ((B, P), tf.int32), "next_sentence": ((B, 1), tf.int32)}
  assert {k: (tuple(v.shape), v.dtype) for k, v in w_spec.items()} == {
      "masked_lm": ((B, P), tf.float32), "next_sentence": ((B,), tf.float32)}

  meta = tiny.read_metadata(records)
  model = tiny.build_model(meta["vocab_size"], L, P, hidden=32, num_layers=1)
  # Model inputs: same names, per-example shapes and dtypes as the dataset's x.
  model_inputs = {t.name: t for t in model.inputs}
  assert set(model_inputs) == set(x_spec)
  for name, spec in x_spec.items():
    assert tuple(model_inputs[name].shape) == (None,) + tuple(spec.shape[1:]), name
    assert model_inputs[name].dtype == spec.dtype.name, name
  # Model outputs: named like y (and sample_weight), logits for each label.
  assert set(model.output_names) == set(y_spec) == set(w_spec)

  x, y, w = next(iter(ds))
  out = model(x, training=False)
  assert tuple(out["masked_lm"].shape) == (B, P, meta["vocab_size"])
  assert tuple(out["next_sentence"].shape) == (B, 2)
  # Labels are valid targets for those logits; positions index the sequence.
  assert int(tf.reduce_max(y["masked_lm"])) < meta["vocab_size"]
  assert set(y["next_sentence"].numpy().ravel()) <= {0, 1}
  assert int(tf.reduce_max(x["masked_lm_positions"])) < L
  assert float(tf.reduce_sum(w["masked_lm"])) > 0
  # Padded prediction slots carry zero weight.
  padded = tf.equal(x["masked_lm_positions"], 0)
  assert float(tf.reduce_sum(tf.where(padded, w["masked_lm"], 0.0))) == 0.0
  # And Keras accepts the triple as-is.
  tiny.compile_model(model)
  logs = model.evaluate(ds.repeat(), steps=2, verbose=0, return_dict=True)
  assert math.isfinite(logs["masked_lm_loss"]) and math.isfinite(logs["next_sentence_loss"])


def test_mlm_loss_falls(records, tiny):
  steps = 30
  losses = tiny.train(records, steps, batch_size=BATCH_SIZE, seed=3, hidden=64)
  assert len(losses) == steps
  assert all(math.isfinite(v) for v in losses)
  # Untrained, the loss is about ln(vocab_size) ~ 10.3.
  assert abs(losses[0] - math.log(30522)) < 1.0, losses[:5]
  first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
  assert last < first - 2.0, (first, last, losses)



def test_packed_records_train_without_a_next_sentence_head(tmp_path, tiny):
  """Issue 21 item 10: the README's RoBERTa recipe (was a Keras structure error)."""
  out = str(tmp_path / "packed.tfrecord")
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO)
  proc = subprocess.run(
      [sys.executable, "-m", "bert_data.create",
       f"--input_file={os.path.join(SAMPLE, 'sample_corpus.txt')}",
       f"--output_file={out}", f"--vocab_file={os.path.join(SAMPLE, 'vocab.txt')}",
       "--next_sentence=false", "--packing=full_sentences", "--dupe_factor=1",
       f"--max_seq_length={MAX_SEQ_LENGTH}", f"--max_predictions_per_seq={MAX_PREDICTIONS}",
       "--num_workers=1", "--quiet"], capture_output=True, text=True, timeout=120, env=env,
      cwd=REPO)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert not tiny.has_sentence_task(tiny.read_metadata(out))
  losses, model = tiny.train(out, 12, batch_size=BATCH_SIZE, seed=3, return_model=True)
  assert sorted(model.output) == [tiny.MASKED_LM]
  assert len(losses) == 12 and all(math.isfinite(v) for v in losses)
  assert abs(losses[0] - math.log(30522)) < 1.0, losses[:5]
  assert sum(losses[-3:]) < sum(losses[:3]), losses
  r = subprocess.run([sys.executable, SCRIPT, "--input", out, "--steps", "2", "--log_every",
                      "1"], capture_output=True, text=True, timeout=300, env=env)
  assert r.returncode == 0, r.stderr[-3000:]
  assert "masked_lm loss: first 2 steps" in r.stdout and "next_sentence" not in r.stdout
