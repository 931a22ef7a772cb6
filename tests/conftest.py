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


def write_varied_corpus(path, repeats: int) -> str:
  """The sample text's documents repeated `repeats` times, each repeat with
  its lines rotated; returns the path."""
  text = open(SAMPLE_TEXT, encoding="utf-8").read().strip().split("\n\n")
  docs = []
  for i in range(repeats):
    for d in text:
      lines = d.split("\n")
      docs.append("\n".join(lines[i % len(lines):] + lines[:i % len(lines)]))
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n\n".join(docs) + "\n")
  return str(path)


def error_lines(stderr: str):
  """stderr lines that are not TensorFlow/absl log noise."""
  noise = ("WARNING: All log messages", "I0000", "W0000", "E0000")
  return [l for l in stderr.splitlines() if l.strip() and not l.startswith(noise)]


@pytest.fixture
def cli():
  return run_cli
