"""The README's w2v path composes: create's defaults feed the trainers' defaults.

Records keep every token by default (the sgd trainers subsample afresh each
epoch); d2l's one draw is `--subsample_t=1e-4`, which the sgd trainers
refuse in one line; the bundled sample shows real neighbours, as the
README says (issue 36 items 1 and 13).
"""

import argparse
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import load_script
from w2v_data import generator
from w2v_data.train import cli as train_cli
from w2v_data.config import D2L_SUBSAMPLE_T
from w2v_data.config import W2vConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "tests", "testdata", "w2v_tiny.txt")
SAMPLE = os.path.join(ROOT, "w2v_data", "sample")
SCRIPTS = {"skipgram": "train_skipgram", "cbow": "train_cbow", "pv_dbow": "train_pv"}


def _module(name):
  return load_script(name)


def _readme():
  with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
    return f.read()


def _create(out, model="skipgram", **kw):
  src = TINY
  if model == "pv_dbow":  # documents: the tiny text's non-empty lines
    with open(TINY, encoding="utf-8") as f:
      docs = [line for line in f if line.strip()]
    src = os.path.join(os.path.dirname(str(out)), "docs.txt")
    with open(src, "w", encoding="utf-8") as f:
      f.writelines(docs)
  generator.create(W2vConfig(input_file=src, output_dir=str(out), model=model, min_freq=2,
                            quiet=True, **kw))
  with open(os.path.join(str(out), "meta.json"), encoding="utf-8") as f:
    return json.load(f)


def test_create_keeps_every_token_by_default_and_writes_d2ls_draw_on_request(tmp_path):
  meta = _create(tmp_path / "all")
  assert meta["flags"]["subsample_t"] == 1.0
  assert meta["counts"]["subsampled_tokens"] == meta["counts"]["tokens"]
  d2l = _create(tmp_path / "d2l", subsample_t=D2L_SUBSAMPLE_T)
  assert d2l["flags"]["subsample_t"] == D2L_SUBSAMPLE_T == 1e-4
  assert d2l["counts"]["subsampled_tokens"] < d2l["counts"]["tokens"]


@pytest.mark.parametrize("model", sorted(SCRIPTS))
def test_sgd_trainers_refuse_d2ls_draw_in_one_line_naming_the_fix(tmp_path, capsys, model):
  pytest.importorskip("tensorflow")
  d = tmp_path / "d2l"
  _create(d, model=model, subsample_t=D2L_SUBSAMPLE_T)
  query = "--docs=" if model == "pv_dbow" else "--words="
  assert _module(SCRIPTS[model]).main([f"--data_dir={d}", query]) == 2
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and err.startswith(f"error: --data_dir={d}: "), err
  assert "--subsample_t=0.0001" in err and "rerun w2v_data.create without --subsample_t" in err
  assert "--trainer=keras" in err


@pytest.mark.parametrize("model", sorted(SCRIPTS))
def test_default_records_train_with_the_scripts_fresh_subsampling(tmp_path, monkeypatch, model):
  """create's defaults, then the script's: the sgd trainer subsamples at its default t."""
  pytest.importorskip("tensorflow")
  from w2v_data.train import sgd  # pylint: disable=import-outside-toplevel
  d = tmp_path / "all"
  _create(d, model=model)
  seen = {}

  def fake_train(data_dir, *, settings, **kw):
    seen.update(settings=settings, epochs=kw["epochs"])
    raise SystemExit(0)

  monkeypatch.setattr(sgd, "train", fake_train)
  query = "--docs=" if model == "pv_dbow" else "--words="
  with pytest.raises(SystemExit):
    _module(SCRIPTS[model]).main([f"--data_dir={d}", query])
  script = "pv" if model == "pv_dbow" else model
  assert seen["settings"].subsample_t == train_cli.default_subsample_t(script)
  assert seen["epochs"] == train_cli.SGD_MODEL_DEFAULTS[script][0]


def test_the_bench_runs_create_with_the_documented_flags():
  bench = _module("bench/bench_w2v_train")
  a = argparse.Namespace(min_freq=10, window=5, negative=5, pv_min_freq=2)
  assert bench.create_flags("skipgram", a) == ["--model=skipgram"]
  assert bench.create_flags("cbow", a) == ["--model=cbow"]
  assert bench.create_flags("pv_dbow", a) == ["--model=pv_dbow", "--doc_id_column",
                                              "--min_freq=2"]
  a.window, a.min_freq = 8, 5  # flags a user changed are passed
  assert bench.create_flags("skipgram", a) == ["--model=skipgram", "--min_freq=5",
                                               "--max_window_size=8"]


def test_the_sample_is_what_its_generator_writes_and_the_readme_counts_its_lines():
  gen = _module("dev/make_w2v_sample")
  with open(os.path.join(SAMPLE, "word_classes.txt"), encoding="utf-8") as f:
    text = f.read()
  assert text == gen.text()
  readme = _readme()
  lines = text.count("\n")
  assert lines == gen.NUM_SENTENCES and f"({lines:,} generated lines)" in readme
  with open(os.path.join(SAMPLE, "sample_text.txt"), encoding="utf-8") as f:
    english = f.read()
  assert f"({english.count(chr(10))} lines of English, {len(english.split()):,}" in readme


def _class_of():
  gen = _module("dev/make_w2v_sample")
  return {w: c for c in gen.CLASSES for w in gen.CLASSES[c] + gen.CUES[c]}, gen.CLASSES


def test_the_readmes_sample_commands_show_each_words_class_as_its_neighbours(tmp_path):
  """The README's two sample commands, as written (run from a folder that has the
  repository's w2v_data/ and scripts/), print neighbours of the word's class."""
  pytest.importorskip("tensorflow")
  readme = _readme()
  create = re.search(r"python -m w2v_data\.create --input_file=w2v_data/sample/word_classes\.txt"
                     r" \\\n +--output_dir=\S+ --min_freq=\d+", readme).group(0)
  train = re.search(r"python scripts/train_skipgram\.py --data_dir=out/sample_w2v --words=\S+",
                    readme).group(0)
  for name in ("w2v_data", "scripts"):
    os.symlink(os.path.join(ROOT, name), tmp_path / name)
  env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
  vec = tmp_path / "v.vec"
  outs = []
  for cmd in (create.replace("\\\n", " "), f"{train} --save_vectors={vec}"):
    argv = cmd.split()
    r = subprocess.run([sys.executable, *argv[1:]], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    outs.append(r.stdout)
  class_of, classes = _class_of()
  queries = train.split("--words=")[1].split(",")
  for q in queries:
    shown = re.search(rf"nearest to '{q}': (.*)", outs[1]).group(1)
    near = re.findall(r"(\S+) \(\d\.\d{3}\)", shown)
    assert len(near) == 3 and all(class_of.get(w) == class_of[q] for w in near), (q, shown)
  from w2v_data.train import vectors  # pylint: disable=import-outside-toplevel
  names, m = vectors.load(str(vec))
  m = m / np.linalg.norm(m, axis=1, keepdims=True)
  sim = m @ m.T
  np.fill_diagonal(sim, -2.0)
  at = {n: i for i, n in enumerate(names)}
  for c, words in classes.items():  # every class word: its 3 nearest are of its class
    for w in words:
      near = [names[j] for j in np.argsort(-sim[at[w]])[:3]]
      assert all(class_of.get(n) == c for n in near), (w, near)
  same = [sim[at[a], at[b]] for a in class_of for b in class_of
          if a < b and class_of[a] == class_of[b]]
  other = [sim[at[a], at[b]] for a in class_of for b in class_of
           if a < b and class_of[a] != class_of[b]]
  assert np.mean(same) > np.mean(other) + 0.2, (np.mean(same), np.mean(other))
