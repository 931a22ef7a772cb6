"""The user docs' Keras snippets run as written (issue 24 item 8).

Every fenced python block after a `<!-- runnable: ... -->` line in README.md
or a user guide under docs/ is executed, in a fresh namespace, in a folder
whose out/ holds tiny datasets at the README's paths (out/train.tfrecord,
out/ptb_w2v, out/mt), beside its stand-ins corpus/*.txt and vocab.txt. Each block that calls `model.fit` must be marked
runnable.
"""

import glob
import os
import re
import shutil

import pytest

from conftest import REPO, write_three_datasets
from test_readme_path import STAND_INS

pytest.importorskip("tensorflow")
pytest.importorskip("keras")

MARK = "<!-- runnable:"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def user_docs():
  """README.md and the user guides under docs/, relative to the repo."""
  guides = sorted(glob.glob(os.path.join(REPO, "docs", "*.md")))
  return ["README.md"] + [os.path.relpath(g, REPO) for g in guides]


def readme_blocks():
  """[(where, code, runnable)] of the python blocks of README.md and docs/*.md."""
  blocks = []
  for name in user_docs():
    text = open(os.path.join(REPO, name), encoding="utf-8").read()
    for m in _BLOCK.finditer(text):
      before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
      where = f"{name}:{text.count(chr(10), 0, m.start()) + 1}"
      blocks.append((where, m.group(1), before.startswith(MARK)))
  return blocks


def test_every_fit_snippet_is_marked_runnable():
  blocks = readme_blocks()
  fits = [where for where, code, runnable in blocks if "model.fit(" in code and not runnable]
  assert not fits, f"{fits}: model.fit snippets not marked runnable"
  assert sum(runnable for _, _, runnable in blocks) >= 4
  readme = [code for where, code, runnable in blocks if where.startswith("README.md:")]
  assert sum("model.fit(" in code for code in readme) >= 4, "README lost a Keras example"


def test_runnable_snippets_run_as_written(tmp_path, monkeypatch):
  write_three_datasets(tmp_path / "out", ("train.tfrecord", "ptb_w2v", "mt"))
  for stand_in, sample in STAND_INS.items():  # the README's corpus/*.txt and vocab.txt
    os.makedirs(tmp_path / os.path.dirname(stand_in), exist_ok=True)
    shutil.copy(os.path.join(REPO, sample), tmp_path / stand_in)
  monkeypatch.chdir(tmp_path)
  for where, code, runnable in readme_blocks():
    if runnable:
      exec(compile(code, where, "exec"), {"__name__": "readme"})  # pylint: disable=exec-used
