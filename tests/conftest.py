"""Shared fixtures: paths to bundled test data, a CLI runner."""

import os
import subprocess
import sys

import pytest

TESTDATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "testdata")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB = os.path.join(TESTDATA, "vocab_uncased.txt")
SAMPLE_TEXT = os.path.join(TESTDATA, "bert_sample_text.txt")
GOLDEN = os.path.join(TESTDATA, "bert_golden")


def run_cli(module, *args, timeout=300, env_extra=None):
  """Runs `python -m module args...`; returns CompletedProcess (text)."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO)
  env.update(env_extra or {})
  return subprocess.run([sys.executable, "-m", module, *args], capture_output=True,
                        text=True, timeout=timeout, env=env, cwd=REPO)


def error_lines(stderr: str):
  """stderr lines that are not TensorFlow/absl log noise."""
  noise = ("WARNING: All log messages", "I0000", "W0000", "E0000")
  return [l for l in stderr.splitlines() if l.strip() and not l.startswith(noise)]


@pytest.fixture
def cli():
  return run_cli
