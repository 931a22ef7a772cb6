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
