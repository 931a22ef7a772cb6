"""The README's Keras snippets run as written (issue 24 item 8).

Every fenced python block after a `<!-- runnable: ... -->` line is executed,
in a fresh namespace, in a folder whose out/ holds tiny datasets at the
README's paths (out/train.tfrecord, out/ptb_w2v, out/mt). Each block that
calls `model.fit` must be marked runnable.
"""

import os
import re

import pytest

from conftest import REPO, write_three_datasets

pytest.importorskip("tensorflow")
pytest.importorskip("keras")

MARK = "<!-- runnable:"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def readme_blocks():
  """[(line number, code, runnable)] of the README's python blocks."""
  text = open(os.path.join(REPO, "README.md"), encoding="utf-8").read()
  blocks = []
  for m in _BLOCK.finditer(text):
    before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
    blocks.append((text.count("\n", 0, m.start()) + 1, m.group(1), before.startswith(MARK)))
  return blocks


def test_every_fit_snippet_is_marked_runnable():
  blocks = readme_blocks()
  fits = [line for line, code, runnable in blocks if "model.fit(" in code and not runnable]
  assert not fits, f"README.md lines {fits}: model.fit snippets not marked runnable"
  assert sum(runnable for _, _, runnable in blocks) >= 4


def test_runnable_snippets_run_as_written(tmp_path, monkeypatch):
  write_three_datasets(tmp_path / "out", ("train.tfrecord", "ptb_w2v", "mt"))
  monkeypatch.chdir(tmp_path)
  for line, code, runnable in readme_blocks():
    if runnable:
      exec(compile(code, f"README.md:{line}", "exec"), {"__name__": "readme"})  # pylint: disable=exec-used
