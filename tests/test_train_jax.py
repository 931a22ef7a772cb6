"""scripts/train_bert_tiny_jax.py: Keras 3 on JAX fed by grain, no TensorFlow.

Skips where jax is not importable (scripts/check_jax.sh makes a venv with it).
"""

import os
import re
import subprocess
import sys

import pytest

from conftest import REPO, SAMPLE_TEXT, VOCAB

pytest.importorskip("jax")
pytest.importorskip("grain")


def test_tiny_bert_trains_on_jax_from_grain_without_tensorflow(tmp_path):
  from bert_data import generator  # pylint: disable=import-outside-toplevel
  from bert_data.config import BertConfig  # pylint: disable=import-outside-toplevel
  out = str(tmp_path / "train.tfrecord")
  generator.create(BertConfig(input_files=(SAMPLE_TEXT,), output_files=(out,), vocab_file=VOCAB,
                             max_seq_length=32, max_predictions_per_seq=5, dupe_factor=4))
  shadow = tmp_path / "shadow" / "tensorflow"
  shadow.mkdir(parents=True)
  (shadow / "__init__.py").write_text("raise ImportError('No module named tensorflow')\n")
  env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(shadow.parent), REPO]))
  r = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "train_bert_tiny_jax.py"),
                      "--input", out, "--steps", "40", "--workers", "1"],
                     capture_output=True, text=True, env=env, timeout=600)
  assert r.returncode == 0, r.stderr[-2000:]
  m = re.search(r"backend=jax .*eval_loss_before=([\d.]+) eval_loss_after=([\d.]+)", r.stdout)
  assert m, r.stdout
  assert float(m.group(2)) < float(m.group(1))  # it learned something
