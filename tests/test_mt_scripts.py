"""mt_data.stats and the scripts: length statistics, plotting, seq2seq training."""

import json
import os
import subprocess
import sys

import pytest

from mt_data import config as mt_config
from mt_data import generator as mt_generator

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PAIRS = os.path.join(HERE, "testdata", "mt_pairs.txt")
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
NOISE = ("WARNING: All log messages", "I0000", "W0000", "E0000")


@pytest.fixture(scope="module")
def out(tmp_path_factory):
  d = str(tmp_path_factory.mktemp("mtscripts") / "out")
  mt_generator.create(mt_config.MTConfig(input_file=PAIRS, output_dir=d, num_train=40, num_val=10),
                      log=lambda m: None)
  return d


def run(args, env=ENV, timeout=300):
  p = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                     timeout=timeout, cwd=ROOT)
  return p.returncode, p.stdout, p.stderr


def test_stats_summary_and_plot(out, tmp_path):
  pytest.importorskip("matplotlib")
  png = tmp_path / "lengths.png"
  rc, stdout, err = run(["-m", "mt_data.stats", f"--output_dir={out}", f"--plot={png}",
                         "--num_steps=9"])
  assert rc == 0, err
  s = json.loads(stdout)
  assert s["source"]["sequences"] == 50 and s["target"]["sequences"] == 50
  assert s["source"]["max"] == 14 and s["source"]["longer_than_num_steps"] == 3
  assert sum(s["source"]["histogram"].values()) == 50
  assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
  rc, stdout, _ = run(["-m", "mt_data.stats", f"--output_dir={out}", "--split=valid"])
  assert rc == 0 and json.loads(stdout)["source"]["sequences"] == 10


def test_stats_without_matplotlib(out, tmp_path):
  fake = tmp_path / "fake"
  (fake / "matplotlib").mkdir(parents=True)
  (fake / "matplotlib" / "__init__.py").write_text("raise ImportError('no matplotlib here')\n")
  env = dict(ENV, PYTHONPATH=str(fake))
  rc, _, err = run(["-m", "mt_data.stats", f"--output_dir={out}", f"--plot={tmp_path}/x.png"],
                   env=env)
  lines = [l for l in err.splitlines() if l.strip() and not l.startswith(NOISE)]
  assert rc != 0 and len(lines) == 1 and "Traceback" not in err
  assert lines[0].startswith("error:") and "textrecords[plot]" in lines[0]
  assert not (tmp_path / "x.png").exists()
  rc, stdout, _ = run(["-m", "mt_data.stats", f"--output_dir={out}"], env=env)
  assert rc == 0 and json.loads(stdout)["target"]["sequences"] == 50   # no --plot: fine


def test_stats_refuses_bad_input(tmp_path):
  rc, _, err = run(["-m", "mt_data.stats", f"--output_dir={tmp_path}"])
  assert rc == 2 and err.strip().splitlines()[-1].startswith("error:") and "meta.json" in err
  rc, _, err = run(["-m", "mt_data.stats", f"--output_dir={tmp_path}", "--num_steps=0"])
  assert rc == 2 and "--num_steps=0" in err


def test_train_seq2seq_loss_falls(out):
  pytest.importorskip("tensorflow")
  rc, stdout, err = run([os.path.join("scripts", "train_seq2seq.py"), f"--data_dir={out}",
                         "--epochs=8", "--batch_size=8", "--lr=0.01", "--no_validation",
                         "--translate=The cat is black."])
  assert rc == 0, err
  result = json.loads(stdout)
  loss = result["loss"]
  assert len(loss) == 8 and loss[-1] < 0.8 * loss[0], loss
  assert result["val_loss"] == []
  assert isinstance(result["translations"]["The cat is black."], str)


def test_check_script_rejects_bad_args(tmp_path):
  rc, _, err = run([os.path.join("scripts", "bench", "check_mt_d2l.py"),
                    f"--input_file={tmp_path}/missing.txt"])
  assert rc == 2 and err.startswith("error:")
