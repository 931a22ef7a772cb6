"""The generators run without TensorFlow; the parsers say how to install it."""

import os
import subprocess
import sys

import pytest

from conftest import REPO, SAMPLE_TEXT, TESTDATA, VOCAB



@pytest.fixture
def no_tf_path(tmp_path):
  """A PYTHONPATH entry whose `tensorflow` package fails to import."""
  shadow = tmp_path / "shadow" / "tensorflow"
  shadow.mkdir(parents=True)
  (shadow / "__init__.py").write_text("raise ImportError('No module named tensorflow')\n")
  return str(shadow.parent)


def _run(args, no_tf_path):
  env = dict(os.environ, PYTHONPATH=os.pathsep.join([no_tf_path, REPO]))
  return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                        cwd=REPO, timeout=300)


@pytest.mark.parametrize("module,args", [
    ("bert_data.create", ["--input_file={sample}", "--output_file={out}/b.tfrecord",
                          "--vocab_file={vocab}", "--dupe_factor=1", "--num_workers=2"]),
    ("w2v_data.create", ["--input_file={w2v}", "--output_dir={out}/w", "--min_freq=1",
                         "--num_workers=2"]),
    ("mt_data.create", ["--input_file={mt}", "--output_dir={out}/m", "--num_train=20",
                        "--num_val=5", "--num_workers=2"]),
])
def test_generators_never_import_tensorflow(tmp_path, no_tf_path, module, args):
  values = dict(sample=SAMPLE_TEXT, vocab=VOCAB, out=tmp_path,
                w2v=os.path.join(TESTDATA, "w2v_tiny.txt"),
                mt=os.path.join(TESTDATA, "mt_pairs.txt"))
  r = _run(["-m", module] + [a.format(**values) for a in args] + ["--quiet"], no_tf_path)
  assert r.returncode == 0, r.stderr
  assert any(n.endswith("meta.json") for _, _, fs in os.walk(tmp_path) for n in fs)


def test_parser_without_tensorflow_says_how_to_install(no_tf_path):
  r = _run(["-c", "import bert_data\ntry:\n  bert_data.make_dataset('x', 2)\n"
                  "except ImportError as e:\n  print(e)\n"], no_tf_path)
  assert r.returncode == 0, r.stderr
  assert "pip install 'textrecords[cpu]'" in r.stdout and "[gpu]" in r.stdout


_READ_WITHOUT_TF = """
import importlib.abc, sys
attempts = []

class Block(importlib.abc.MetaPathFinder):
  def find_spec(self, name, path, target=None):
    if name.split(".")[0] == "tensorflow":
      attempts.append(name)
      raise ImportError("tensorflow blocked")

sys.meta_path.insert(0, Block())
import bert_data, mt_data, w2v_data
from bert_data import reader as bert_reader
bert, mt, w2v = sys.argv[1:4]
n = sum(len(y["masked_lm"]) for _, y, _ in bert_data.numpy_batches(bert, 4, training=True, seed=1))
n += sum(len(y) for _, y, _ in mt_data.numpy_batches(mt, 4, training=False))
n += sum(len(y) for _, y, _ in w2v_data.numpy_batches(w2v, 4, training=False))
src = bert_data.grain_source(bert)
for b in bert_reader.grain_dataset(bert, 4, training=True, seed=0, loader=True, worker_count=1):
  n += len(b[0]["input_ids"])
try:
  import torch
except ImportError:
  torch = None
if torch is not None:
  ds = bert_data.torch_dataset(bert)
  for b in torch.utils.data.DataLoader(ds, batch_size=4, collate_fn=ds.collate_fn):
    n += len(b[0]["input_ids"])
  for b in torch.utils.data.DataLoader(bert_data.torch_dataset(bert, 4), batch_size=None,
                                       num_workers=2):
    n += len(b[0]["input_ids"])
assert not attempts and "tensorflow" not in sys.modules, attempts
print("read", n, "torch" if torch is not None else "no-torch")
"""


def test_readers_never_import_tensorflow(tmp_path, no_tf_path):
  pytest.importorskip("grain")
  from bert_data import generator as bert_generator  # pylint: disable=import-outside-toplevel
  from bert_data.config import BertConfig  # pylint: disable=import-outside-toplevel
  bert = str(tmp_path / "b" / "train.tfrecord")
  bert_generator.create(BertConfig(input_files=(SAMPLE_TEXT,), output_files=(bert,),
                                  vocab_file=VOCAB, max_seq_length=32,
                                  max_predictions_per_seq=5, dupe_factor=1))
  for module, args in (("w2v_data.create", ["--input_file=" + os.path.join(
      TESTDATA, "w2v_tiny.txt"), f"--output_dir={tmp_path}/w", "--min_freq=1"]),
                       ("mt_data.create", ["--input_file=" + os.path.join(
                           TESTDATA, "mt_pairs.txt"), f"--output_dir={tmp_path}/m",
                           "--num_train=20", "--num_val=5"])):
    r = _run(["-m", module, *args, "--quiet"], no_tf_path)
    assert r.returncode == 0, r.stderr
  r = _run(["-c", _READ_WITHOUT_TF, bert, f"{tmp_path}/m", f"{tmp_path}/w"], no_tf_path)
  assert r.returncode == 0, r.stderr
  assert r.stdout.startswith("read ")
