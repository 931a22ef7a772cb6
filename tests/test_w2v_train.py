"""Training scripts train from make_dataset, and a seeded run is byte-reproducible."""

import argparse
import hashlib
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import load_script
from textrecords.errors import UserError
from w2v_data.train import models
from w2v_data import generator
from w2v_data.train import evaluation
from w2v_data.train import vectors
from w2v_data.config import W2vConfig

pytest.importorskip("tensorflow")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "tests", "testdata", "w2v_tiny.txt")


@pytest.fixture(autouse=True)
def _op_determinism_off_afterwards():
  """seed_everything turns TF op determinism on for the process; other tests expect it off."""
  yield
  from tensorflow.python.framework import config  # pylint: disable=import-outside-toplevel
  config.disable_op_determinism()


def _script(name="train_skipgram"):
  return load_script(name)


def _create(d, workers=1, **kw):
  args = dict(min_freq=2, subsample_t=5e-2, max_window_size=3, num_noise_words=3)
  args.update(kw)
  generator.create(W2vConfig(input_file=TINY, output_dir=str(d), num_workers=workers,
                            num_shards=2, **args))
  return str(d)


@pytest.mark.parametrize("negatives,pad_to", [("stored", None), ("fresh", 40)])
def test_training_loss_falls(tmp_path, negatives, pad_to):
  d = _create(tmp_path / "w2v")
  mod = _script()
  model, history, tokens = mod.train(d, embed_size=16, batch_size=32, epochs=4,
                                     learning_rate=0.02, negatives=negatives, pad_to=pad_to,
                                     seed=0, steps_per_epoch=15, verbose=0)
  loss = history.history["loss"]
  assert loss[-1] < 0.9 * loss[0], loss
  near = models.nearest(models.embedding_matrix(model), tokens, "w0", k=3)
  assert len(near) == 3 and all(t != "w0" for t, _ in near)


def _sha(path):
  with open(path, "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()


def test_seeded_training_is_byte_identical_across_runs_and_worker_counts(tmp_path):
  one = _create(tmp_path / "w1", workers=1)
  four = _create(tmp_path / "w4", workers=4)
  args = ["--trainer=keras", "--embed_size=8", "--batch_size=16", "--epochs=2",
          "--steps_per_epoch=6",
          "--learning_rate=0.05", "--negatives=fresh", "--seed=7", "--words="]
  mod = _script()
  # Two runs in this process (data from 1 and 4 workers) and one in a fresh process.
  for d, out in ((one, "a.vec"), (four, "b.vec")):
    assert mod.main([f"--data_dir={d}", f"--save_vectors={tmp_path / out}", *args]) == 0
  r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "train_skipgram.py"),
                      f"--data_dir={one}", f"--save_vectors={tmp_path / 'c.vec'}", *args],
                     capture_output=True, text=True, timeout=300,
                     env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  assert r.returncode == 0, r.stderr
  digests = {_sha(tmp_path / n) for n in ("a.vec", "b.vec", "c.vec")}
  assert len(digests) == 1, digests
  assert f"sha256 {digests.pop()}" in r.stdout
  names, matrix = vectors.load(str(tmp_path / "a.vec"))
  assert names == models.read_tokens(one)[1:] and matrix.shape == (len(names), 8)  # no <unk>
  # The check can fail: another seed gives other vectors.
  assert mod.main([f"--data_dir={one}", f"--save_vectors={tmp_path / 'd.vec'}",
                   *args[:-2], "--seed=8", "--words="]) == 0
  _, other = vectors.load(str(tmp_path / "d.vec"))
  assert not np.array_equal(matrix, other)


def test_vectors_round_trip_exactly(tmp_path):
  rng = np.random.default_rng(0)
  m = (rng.normal(size=(5, 3)) * 1e-3 ** rng.integers(0, 3, (5, 3))).astype(np.float32)
  names = ["<unk>", "a", "b", "ç", "d"]
  digest = vectors.save(str(tmp_path / "v.txt"), names, m)
  assert digest == _sha(tmp_path / "v.txt")
  got_names, got = vectors.load(str(tmp_path / "v.txt"))
  assert got_names == names and np.array_equal(got, m)
  with pytest.raises(ValueError):
    vectors.save(str(tmp_path / "w.txt"), ["a b", "c", "d", "e", "f"], m)
  assert not os.path.exists(tmp_path / "w.txt")


def _topic_documents(path, topics=4, docs_per_topic=30, doc_len=30, seed=0):
  """A labelled corpus: each document mixes its topic's own 25 words with 30
  words shared by all topics, half and half; returns the labels."""
  import random  # pylint: disable=import-outside-toplevel
  rnd = random.Random(seed)
  shared = [f"s{i}" for i in range(30)]
  lines, labels = [], []
  for d in range(topics * docs_per_topic):
    t = d % topics
    own = [f"t{t}w{i}" for i in range(25)]
    words = [rnd.choice(own) if rnd.random() < 0.5 else rnd.choice(shared)
             for _ in range(doc_len)]
    lines.append(f"doc{d}\t" + " ".join(words))
    labels.append(t)
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")
  return labels


@pytest.mark.parametrize("model", ["pv_dbow", "pv_dm"])
def test_paragraph_vectors_put_same_topic_documents_nearest(tmp_path, model):
  """The nearest document (cosine of the learned vectors) shares the label.

  4 topics x 30 documents: by chance a nearest neighbour shares the label with
  probability 29/119 = 0.24; if the vectors carried no topic information the
  number of matches among 120 documents would be about Binomial(120, 0.24)
  (mean 29, sd 4.7), so 0.75 (90 matches) is 13 sd above chance. Seeded runs
  here reach 0.95-1.0, which leaves room for other TF versions' numbers.
  """
  labels = _topic_documents(tmp_path / "docs.tsv")
  d = str(tmp_path / model)
  generator.create(W2vConfig(input_file=str(tmp_path / "docs.tsv"), output_dir=d, model=model,
                            doc_id_column=True, min_freq=1, subsample_t=1.0,
                            max_window_size=3, num_noise_words=5, num_workers=1, quiet=True))
  _, history, names, m = models.train(d, embed_size=16, batch_size=256, epochs=8,
                                      steps_per_epoch=15, learning_rate=0.05, seed=1,
                                      verbose=0)
  assert names == [f"doc{i}" for i in range(len(labels))] and m.shape == (len(labels), 16)
  loss = history.history["loss"]
  assert loss[-1] < 0.8 * loss[0], loss
  unit = m / np.linalg.norm(m, axis=1, keepdims=True)
  sim = unit @ unit.T
  np.fill_diagonal(sim, -2.0)
  nearest_doc = sim.argmax(axis=1)
  accuracy = np.mean([labels[i] == labels[j] for i, j in enumerate(nearest_doc)])
  assert accuracy >= 0.75, accuracy


def test_cbow_trains_and_is_reproducible(tmp_path):
  d = _create(tmp_path / "cbow", model="cbow")
  mod = _script("train_cbow")
  args = [f"--data_dir={d}", "--trainer=keras", "--embed_size=8", "--batch_size=32",
          "--epochs=3",
          "--steps_per_epoch=8", "--learning_rate=0.05", "--seed=3", "--words=w0"]
  for out in ("a.vec", "b.vec"):
    assert mod.main([*args, f"--save_vectors={tmp_path / out}"]) == 0
  assert _sha(tmp_path / "a.vec") == _sha(tmp_path / "b.vec")
  names, matrix = vectors.load(str(tmp_path / "a.vec"))
  assert names == models.read_tokens(d)[1:] and matrix.shape == (len(names), 8)
  _, history, _, _ = models.train(d, embed_size=8, batch_size=32, epochs=3, steps_per_epoch=8,
                                  learning_rate=0.05, seed=3, verbose=0)
  loss = history.history["loss"]
  assert loss[-1] < 0.9 * loss[0], loss
  with pytest.raises(UserError, match="records are for --model=cbow"):
    models.train(d, expect=("pv_dbow", "pv_dm"))


# --- Fresh draws every epoch (w2v_data.train.draws) and the SGD trainer (w2v_data.train.sgd) ---

def _lines_of(path):
  with open(path, encoding="utf-8") as f:
    return [l for l in f.read().split("\n") if l.strip()]


def _create_all_tokens(d, model, workers=1):
  """Records of every token (--subsample_t=1), for fresh subsampling."""
  src = os.path.join(os.path.dirname(str(d)), "all_lines.txt")
  with open(src, "w", encoding="utf-8") as f:  # PV: no empty documents
    f.write("\n".join(_lines_of(TINY)) + "\n")
  generator.create(W2vConfig(input_file=src, output_dir=str(d), model=model, min_freq=2,
                            subsample_t=1.0, max_window_size=3, num_noise_words=3,
                            num_workers=workers, num_shards=2, quiet=True))
  return str(d)


def _epoch_arrays(draws, epoch, epochs=2, parallel=2):
  out = []
  for x, y, w in draws.dataset(epoch, epochs, parallel=parallel):
    out.append({**{k: v.numpy() for k, v in x.items()}, "y": y.numpy(), "w": w.numpy()})
  return out


def _same(a, b):
  return len(a) == len(b) and all(
      x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x) for x, y in zip(a, b))


@pytest.mark.parametrize("model", ["skipgram", "cbow", "pv_dbow", "pv_dm"])
def test_fresh_draws_differ_by_epoch_and_repeat_for_runs_workers_and_parallelism(tmp_path,
                                                                                 model):
  from w2v_data.train import draws as draws_lib  # pylint: disable=import-outside-toplevel
  one = _create_all_tokens(tmp_path / "w1", model, workers=1)
  two = _create_all_tokens(tmp_path / "w2", model, workers=2)
  settings = draws_lib.DrawSettings(subsample_t=0.05)
  a = draws_lib.EpochDraws(one, 16, seed=3, settings=settings)
  e0, e1 = _epoch_arrays(a, 0), _epoch_arrays(a, 1)
  assert not _same(e0, e1)  # subsampling, windows and noise words are redrawn
  assert _same(e0, _epoch_arrays(a, 0))  # the same epoch again
  b = draws_lib.EpochDraws(two, 16, seed=3, settings=settings)
  assert _same(e0, _epoch_arrays(b, 0, parallel=1)) and _same(e1, _epoch_arrays(b, 1,
                                                                                 parallel=4))
  assert not _same(e0, _epoch_arrays(draws_lib.EpochDraws(one, 16, seed=4, settings=settings), 0))
  first = e0[0]
  words = first["contexts_negatives" if model == "skipgram" else "center_and_noise"]
  assert words.shape[1] == 4 and np.all(first["y"][:, 0] == 1) and np.all(first["y"][:, 1:] == 0)
  # Noise words equal to the positive word weigh nothing; the rest weigh 1.
  assert np.array_equal(first["w"][:, 1:], words[:, 1:] != words[:, :1])
  assert np.all(np.diff([blk["progress"][0] for blk in e0 + e1]) >= 0)
  assert e0[0]["progress"][0] == 0.0 and e1[0]["progress"][0] == 0.5


def test_fresh_subsampling_keeps_tokens_by_the_formula(tmp_path):
  from w2v_data.train import draws as draws_lib, models  # pylint: disable=import-outside-toplevel
  d = _create_all_tokens(tmp_path / "pv", "pv_dbow")
  meta = models.read_meta(d)
  all_tokens = sum(meta["vocab"]["counts"][1:])
  kept = []
  for e in range(4):
    draws = draws_lib.EpochDraws(d, 64, seed=1, settings=draws_lib.DrawSettings(subsample_t=0.02))
    kept.append(sum(len(b["y"]) for b in _epoch_arrays(draws, e, epochs=4)))
  from w2v_data import sampling  # pylint: disable=import-outside-toplevel
  counts = np.asarray(meta["vocab"]["counts"], np.float64)
  expected = float((sampling.keep_probabilities(counts, 0.02) * counts).sum())
  assert len(set(kept)) > 1 and all(abs(k - expected) < 0.1 * all_tokens for k in kept)
  assert all(k < all_tokens for k in kept)


def test_fresh_draw_errors_are_one_line(tmp_path):
  from w2v_data.train import draws as draws_lib  # pylint: disable=import-outside-toplevel
  sub = _create(tmp_path / "sub")  # subsampled records
  with pytest.raises(UserError, match="--subsample_t=1"):
    draws_lib.EpochDraws(sub, 16, seed=1, settings=draws_lib.DrawSettings(subsample_t=1e-3))
  draws_lib.EpochDraws(sub, 16, seed=1)  # the stored tokens: fine
  center = _create(tmp_path / "center", layout="center")
  with pytest.raises(UserError, match="sentence layout"):
    draws_lib.EpochDraws(center, 16, seed=1)
  for kw, match in (({"batch_size": 0}, "batch_size"), ({"seed": -1}, "seed")):
    args = {"batch_size": 16, "seed": 1, **kw}
    with pytest.raises(UserError, match=match):
      draws_lib.EpochDraws(sub, args.pop("batch_size"), **args)
  with pytest.raises(UserError, match="window"):
    draws_lib.EpochDraws(sub, 16, seed=1, settings=draws_lib.DrawSettings(max_window_size=0))


def _train_script(name, d, out, *extra):
  """Runs scripts/<name>.py in a fresh process (PYTHONPATH kept); returns its stdout."""
  r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", f"{name}.py"),
                      f"--data_dir={d}", f"--save_vectors={out}", "--embed_size=8",
                      "--batch_size=64", "--epochs=3", *extra],
                     capture_output=True, text=True, timeout=300,
                     env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  assert r.returncode == 0, r.stderr
  return r.stdout


@pytest.mark.parametrize("name,model", [("train_skipgram", "skipgram"),
                                        ("train_cbow", "cbow"), ("train_pv", "pv_dm")])
def test_sgd_trainer_is_byte_identical_across_runs_threads_and_workers(tmp_path, name, model):
  one = _create_all_tokens(tmp_path / "w1", model, workers=1)
  four = _create_all_tokens(tmp_path / "w4", model, workers=4)
  query = "--docs=" if model.startswith("pv") else "--words="
  _train_script(name, one, tmp_path / "a.vec", "--threads=1", "--seed=5", query)
  _train_script(name, four, tmp_path / "b.vec", "--threads=2", "--seed=5", query)
  assert _sha(tmp_path / "a.vec") == _sha(tmp_path / "b.vec")
  if model != "skipgram":
    return  # the rest holds for every model; checked once (each run starts TF)
  assert _script(name).main([f"--data_dir={one}", f"--save_vectors={tmp_path / 'c.vec'}",
                             "--embed_size=8", "--batch_size=64", "--epochs=3", "--seed=5",
                             query]) == 0
  assert _sha(tmp_path / "a.vec") == _sha(tmp_path / "c.vec")
  names, m = vectors.load(str(tmp_path / "a.vec"))
  if model.startswith("pv"):
    assert names == models.read_doc_names(one)
  else:
    assert names == models.read_tokens(one)[1:] and "<unk>" not in names  # untrained row
  _train_script(name, one, tmp_path / "d.vec", "--seed=6", query)
  assert not np.array_equal(m, vectors.load(str(tmp_path / "d.vec"))[1])
  # Skip-gram's default of 10 noise words per pair, not the records' K.
  _train_script(name, one, tmp_path / "k10.vec", "--threads=1", "--seed=5", query,
                "--noise_words=10")
  assert _sha(tmp_path / "a.vec") == _sha(tmp_path / "k10.vec")
  records_k = models.read_meta(one)["noise"]["num_noise_words"]
  assert records_k != 10
  _train_script(name, one, tmp_path / "kr.vec", "--threads=1", "--seed=5", query,
                f"--noise_words={records_k}")
  assert _sha(tmp_path / "a.vec") != _sha(tmp_path / "kr.vec")


def test_sgd_skipgram_learns_cooccurrence(tmp_path):
  """Two word groups that never share a sentence end up apart."""
  from w2v_data.train import draws as draws_lib, sgd  # pylint: disable=import-outside-toplevel
  import random  # pylint: disable=import-outside-toplevel
  rnd = random.Random(0)
  lines = [" ".join(rnd.choice([f"{g}{i}" for i in range(8)]) for _ in range(12))
           for g in "ab" for _ in range(150)]
  (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
  d = str(tmp_path / "out")
  generator.create(W2vConfig(input_file=str(tmp_path / "in.txt"), output_dir=d, min_freq=1,
                            subsample_t=1.0, max_window_size=3, num_noise_words=5, quiet=True))
  model, names, m, _ = sgd.train(d, seed=1, settings=draws_lib.DrawSettings(), dim=16,
                                 batch_size=64, epochs=5, verbose=0)
  # in+out: the input plus the output vectors (<unk>'s row 0 left out as for "in")
  both = model.words_in.numpy() + model.words_out.numpy()
  assert np.array_equal(sgd.vectors(model, "in+out")[1], both)
  assert np.array_equal(sgd.vectors(model)[1][1:], m) and len(names) == len(both) - 1
  with pytest.raises(ValueError, match="word_vectors"):
    sgd.vectors(model, "out")
  unit = m / np.linalg.norm(m, axis=1, keepdims=True)
  group = np.array([n[0] for n in names])
  sim = unit @ unit.T
  same = sim[group[:, None] == group[None, :]].mean()
  other = sim[group[:, None] != group[None, :]].mean()
  assert same > other + 0.3, (same, other)
  # The xla engine sums a batch's updates: far too big a batch for 16 words diverges,
  # and says so in one line.
  with pytest.raises(UserError, match="diverged"):
    sgd.train(d, seed=1, settings=draws_lib.DrawSettings(), dim=16, batch_size=256, epochs=5,
              learning_rate=0.05, verbose=0, engine="xla")


def test_a_slow_first_kernel_compile_is_announced(tmp_path, monkeypatch, capsys):
  """numba compiles the kernel on a machine's first run (about a minute): the trainer says
  so (`cli.BUILD_NOTICE`, as w2v_data.create does) instead of a silent first step (issue 36
  item 14); a quick load (numba's cache) says nothing."""
  import time  # pylint: disable=import-outside-toplevel
  from textrecords.runs import cli  # pylint: disable=import-outside-toplevel
  from w2v_data.train import draws as draws_lib, kernel_engine, sgd  # pylint: disable=import-outside-toplevel
  if not kernel_engine.available():
    pytest.skip("numba is not installed")
  d = _create(tmp_path / "d", subsample_t=1.0)
  train = lambda verbose: sgd.train(  # noqa: E731
      d, seed=1, settings=draws_lib.DrawSettings(), dim=8, epochs=1, verbose=verbose,
      engine="kernel")
  train(0)  # compiled (or loaded from numba's cache) now
  assert cli.BUILD_NOTICE not in capsys.readouterr().err
  compile_kernel = kernel_engine.KernelRun.compile

  def slow_compile(run):
    time.sleep(3.5)  # as long as a first compile seems to the notice (3 s)
    compile_kernel(run)

  monkeypatch.setattr(kernel_engine.KernelRun, "compile", slow_compile)
  train(2)
  assert f"w2v_data: {cli.BUILD_NOTICE}" in capsys.readouterr().err
  train(0)  # quiet: no notice
  assert cli.BUILD_NOTICE not in capsys.readouterr().err


@pytest.mark.parametrize("model", ["pv_dbow", "pv_dm"])
def test_sgd_paragraph_vectors_and_deterministic_inference(tmp_path, model):
  from w2v_data.train import draws as draws_lib, sgd  # pylint: disable=import-outside-toplevel
  labels = _topic_documents(tmp_path / "docs.tsv")
  d = str(tmp_path / model)
  generator.create(W2vConfig(input_file=str(tmp_path / "docs.tsv"), output_dir=d, model=model,
                            doc_id_column=True, min_freq=1, subsample_t=1.0,
                            max_window_size=3, num_noise_words=5, num_workers=1, quiet=True))
  trained, names, m, _ = sgd.train(d, seed=1, settings=draws_lib.DrawSettings(), dim=16,
                                   batch_size=256, epochs=15, learning_rate=0.05, verbose=0)
  unit = m / np.linalg.norm(m, axis=1, keepdims=True)
  sim = unit @ unit.T
  np.fill_diagonal(sim, -2.0)
  accuracy = np.mean([labels[i] == labels[j] for i, j in enumerate(sim.argmax(axis=1))])
  assert accuracy >= 0.75, accuracy  # chance: 0.24 (see the keras test above)
  # Inference: the same text and seed give the same vector on every call, close to its
  # topic's documents; another seed gives another vector.
  tokens = models.read_tokens(d)
  counts = models.read_meta(d)["vocab"]["counts"]
  text = [tokens.index(w) for w in ["t2w1", "t2w5", "s3", "t2w7", "t2w9", "s4", "t2w2"] * 3]
  v1 = sgd.infer_vector(trained, text, counts, seed=9)
  v2 = sgd.infer_vector(trained, text, counts, seed=9)
  assert np.array_equal(v1, v2) and v1.dtype == np.float32
  assert not np.array_equal(v1, sgd.infer_vector(trained, text, counts, seed=10))
  cos = unit @ (v1 / np.linalg.norm(v1))
  best = np.argsort(-cos)[:5]
  assert sum(labels[i] == 2 for i in best) >= 4, [labels[i] for i in best]


def test_eval_vectors_script_on_hand_made_files(tmp_path):
  names = ["<unk>", "king", "queen", "man", "woman", "cat", "dog"]
  m = np.array([[9, 9, 9], [1, 1, 0], [1, 1, 1], [1, 0, 0], [1, 0, 1], [0, 5, 0.1],
                [0, 5, 0.2]], np.float32)
  vectors.save(str(tmp_path / "v.vec"), names, m)
  (tmp_path / "pairs.tsv").write_text(
      "# comment\nWord 1\tWord 2\tHuman\nKing\tqueen\t8\ncat\tdog\t9.5\nking\tcat\t1\n"
      "man\tunicorn\t5\n", encoding="utf-8")
  (tmp_path / "an.txt").write_text(": family\nman king woman queen\nman woman king queen\n"
                                   ": x\ncat dog man unicorn\n", encoding="utf-8")
  spec = importlib.util.spec_from_file_location(
      "eval_vectors", os.path.join(ROOT, "scripts", "eval_vectors.py"))
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  res = mod.evaluate(str(tmp_path / "v.vec"), [str(tmp_path / "pairs.tsv")],
                     [str(tmp_path / "an.txt")])
  pairs = res["pairs"][str(tmp_path / "pairs.tsv")]
  assert (pairs["covered"], pairs["total"]) == (3, 4) and pairs["spearman"] == 1.0
  an = res["analogies"][str(tmp_path / "an.txt")]
  assert (an["correct"], an["covered"], an["total"]) == (2, 2, 3) and res["vectors"] == 6
  r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "eval_vectors.py"),
                      f"--vectors={tmp_path / 'v.vec'}", f"--pairs={tmp_path / 'pairs.tsv'}"],
                     capture_output=True, text=True, timeout=60)
  assert r.returncode == 0 and "on 3 of 4 pairs" in r.stdout, r.stderr
  (tmp_path / "bad.tsv").write_text("a\tb\t1\nc d\n", encoding="utf-8")
  r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "eval_vectors.py"),
                      f"--vectors={tmp_path / 'v.vec'}", f"--pairs={tmp_path / 'bad.tsv'}"],
                     capture_output=True, text=True, timeout=60)
  assert r.returncode == 2 and r.stderr.strip() == f"error: {tmp_path / 'bad.tsv'}:2: " \
      "expected 'word1 word2 score'"
  r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "eval_vectors.py"),
                      f"--vectors={tmp_path / 'v.vec'}", "--geometry", "--json"],
                     capture_output=True, text=True, timeout=60)
  geo = json.loads(r.stdout)["geometry"]  # <unk> left out: the 6 rows from king on
  assert r.returncode == 0 and len(geo["band_norms"]) == 6, r.stderr
  assert np.allclose(geo["band_norms"], np.linalg.norm(m[1:].astype(np.float64), axis=1))
  vectors.save(str(tmp_path / "one.vec"), ["<unk>", "king"], m[:2])
  r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "eval_vectors.py"),
                      f"--vectors={tmp_path / 'one.vec'}", "--geometry"],
                     capture_output=True, text=True, timeout=60)
  assert r.returncode == 2 and r.stderr.strip() == (
      f"error: {tmp_path / 'one.vec'}: --geometry needs 2 or more vectors besides <unk>")


def test_vector_geometry_mean_cosine_is_the_mean_over_all_pairs():
  for seed in range(5):
    m = np.random.default_rng(seed).normal(size=(30, 4)) + np.array([1.0, 0, 0, 0])
    unit = m / np.linalg.norm(m, axis=1, keepdims=True)
    cos = unit @ unit.T
    want = (cos.sum() - np.trace(cos)) / (30 * 29)
    geo = evaluation.geometry(m, bands=3)
    assert np.isclose(geo["mean_cosine"], want)
    assert np.isclose(geo["mean_direction"], np.linalg.norm(unit.mean(axis=0)))
    assert np.allclose(geo["band_norms"],
                       [np.linalg.norm(m[i:i + 10], axis=1).mean() for i in (0, 10, 20)])
  with pytest.raises(ValueError, match="2\\+ rows"):
    evaluation.geometry(np.ones((1, 3)))


@pytest.mark.parametrize("name", ["train_skipgram", "train_cbow", "train_pv"])
def test_a_bad_engine_is_one_line_naming_the_flag(tmp_path, capsys, name):
  with pytest.raises(SystemExit) as e:
    _script(name).main([f"--data_dir={tmp_path}", "--engine=bogus"])
  assert e.value.code == 2
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and err.startswith("error: argument --engine: invalid choice: "
                                                 "'bogus'"), err
  assert os.listdir(tmp_path) == []


def test_sgd_defaults_per_script():
  from w2v_data.train import cli as train_cli  # pylint: disable=import-outside-toplevel
  got = {}
  for script in ("skipgram", "cbow", "pv"):
    p = train_cli.parser("x")
    train_cli.add_flags(p, sgd_model=script)
    a = train_cli.resolve(p.parse_args(["--data_dir=d"]))
    got[script] = (a.epochs, a.learning_rate, a._sgd_window, a._sgd_subsample_t,  # pylint: disable=protected-access
                   a._sgd_noise_words)  # pylint: disable=protected-access
  assert got == {name: (*train_cli.SGD_MODEL_DEFAULTS[name], train_cli.default_subsample_t(name),
                        train_cli.default_noise_words(name)) for name in got}
  assert got["skipgram"][0] == 30 and train_cli.default_noise_words("skipgram") == 10
  assert train_cli.default_noise_words("cbow") is None  # the records'
  assert train_cli.default_noise_words("pv") is None
  assert train_cli.default_subsample_t("skipgram") == train_cli.SGD_DEFAULTS["subsample_t"]
  assert train_cli.default_subsample_t("cbow") > train_cli.SGD_DEFAULTS["subsample_t"]
  assert train_cli.default_subsample_t("pv") < train_cli.SGD_DEFAULTS["subsample_t"]
  vectors = {}
  for script in ("skipgram", "cbow"):
    p = train_cli.parser("x")
    train_cli.add_flags(p, sgd_model=script)
    vectors[script] = p.parse_args(["--data_dir=d"]).word_vectors
  assert vectors == {"skipgram": "in", "cbow": "in+out"}
  assert vectors == {name: train_cli.default_word_vectors(name) for name in vectors}


def test_sgd_flag_errors_are_one_line(tmp_path, capsys):
  sub = _create(tmp_path / "sub")  # subsampled records: no fresh subsampling
  mod = _script()
  assert mod.main([f"--data_dir={sub}", "--subsample_t=1e-3", "--words="]) == 2
  err = capsys.readouterr().err.strip()
  assert err.startswith("error: ") and "--subsample_t=1" in err and "\n" not in err
  with pytest.raises(SystemExit) as e:  # a flag's range: refused as the flags are parsed
    mod.main([f"--data_dir={sub}", "--threads=-1", "--words="])
  assert e.value.code == 2
  err = capsys.readouterr().err.strip()
  assert err == "error: --threads=-1: must be >= 0"
  cbow = _create(tmp_path / "cbow", model="cbow")
  assert mod.main([f"--data_dir={cbow}", "--words="]) == 2
  assert capsys.readouterr().err == (  # the script for those records named (issue 21 item 10)
      f"error: --data_dir={cbow}: a w2v_data dataset of --model=cbow records; train on it "
      "with scripts/train_cbow.py\n")


def test_bench_seeds_configs_and_summary():
  bench = _script("bench/bench_w2v_train")
  assert bench.seed_list("", 4) == [4]
  assert bench.seed_list("3", 4) == [4, 5, 6]
  assert bench.seed_list("9,2", 1) == [9, 2]
  for bad in ("0", "1,1", "x"):
    with pytest.raises(ValueError):
      bench.seed_list(bad, 1)
  a = argparse.Namespace(
      pv_epochs=100, epochs=50, window=5, negative=5, ours_epochs=0, gensim_workers="1,2",
      gensim_rerun=True,
      gensim_like_ours=1)
  ours = {"epochs": 25, "window": 10, "noise_words": 10}
  assert bench._gensim_configs(a, "skipgram", True, ours) == [  # pylint: disable=protected-access
      ("gensim workers=1", 1, 50, 5, 5), ("gensim workers=1 (rerun)", 1, 50, 5, 5),
      ("gensim workers=2", 2, 50, 5, 5), ("gensim workers=1 like ours", 1, 25, 10, 10)]
  assert bench._gensim_configs(a, "skipgram", False, ours) == [  # pylint: disable=protected-access
      ("gensim workers=1", 1, 50, 5, 5), ("gensim workers=1 like ours", 1, 25, 10, 10)]
  configs = bench._gensim_configs  # pylint: disable=protected-access
  # Our noise words alone differing is enough for a run like ours.
  assert configs(a, "skipgram", False, {"epochs": 50, "window": 5, "noise_words": 10})[1] == (
      "gensim workers=1 like ours", 1, 50, 5, 10)
  pv_ours = {"epochs": 100, "window": 5, "noise_words": 5}  # like ours would repeat workers=1
  assert configs(a, "pv_dbow", False, pv_ours) == [("gensim workers=1", 1, 100, 5, 5)]
  assert bench._ours_settings(a, "skipgram")["noise_words"] == 10  # pylint: disable=protected-access
  assert bench._ours_settings(a, "cbow")["noise_words"] == 5  # the records' (--negative)  # pylint: disable=protected-access
  rows = [{"model": "skipgram", "run": "ours", "epochs": 2, "window": 3, "seed": s,
           "train_cpu_s": c, "wall_s": 1.0, "wordsim_spearman": w, "analogy_accuracy": 0.5}
          for s, c, w in ((1, 10.0, 0.2), (2, 14.0, 0.4))]
  rows.append(dict(rows[0], run="gensim", seed=1))
  ours, gensim = bench.summarize(rows)
  assert ours["seeds"] == [1, 2] and gensim["seeds"] == [1]
  assert ours["train_cpu_s"] == {"mean": 12.0, "sd": pytest.approx(8 ** 0.5), "min": 10.0,
                                 "max": 14.0}
  assert ours["wordsim_spearman"]["mean"] == pytest.approx(0.3)
  assert gensim["wordsim_spearman"] == {"mean": 0.2, "sd": 0.0, "min": 0.2, "max": 0.2}
  assert "retrieval" not in ours


def test_bench_runs_every_seed_and_checks_identity_once(tmp_path, capsys):
  (tmp_path / "pairs.tsv").write_text("w1\tw2\t9\nw1\tw7\t5\nw3\tw9\t1\n", encoding="utf-8")
  (tmp_path / "an.txt").write_text(": x\nw1 w2 w3 w4\nw5 w6 w7 w8\n", encoding="utf-8")
  out = tmp_path / "out"
  bench = _script("bench/bench_w2v_train")
  assert bench.main([f"--text={TINY}", "--models=skipgram", "--seeds=2", "--seed=3",
                     "--ours_epochs=1", "--dim=8", "--min_freq=2", f"--out_dir={out}",
                     "--jobs=2", f"--pairs={tmp_path / 'pairs.tsv'}",
                     f"--analogies={tmp_path / 'an.txt'}",
                     f"--json_out={tmp_path / 'b.json'}"]) == 0
  text = capsys.readouterr().out
  assert "gensim is not installed" in text
  assert "skipgram seed 3: ours threads 1 / 1 worker == threads 2 / 4 workers: True" in text
  res = json.loads((tmp_path / "b.json").read_text(encoding="utf-8"))
  assert [(r["seed"], r["run"][:14]) for r in res["rows"]] == [
      (3, "ours threads=1"), (3, "ours threads=2"), (4, "ours threads=1")]
  assert res["rows"][0]["sha256"] == res["rows"][1]["sha256"] != res["rows"][2]["sha256"]
  first = [s for s in res["summary"] if s["run"].startswith("ours threads=1")][0]
  assert first["seeds"] == [3, 4] and first["wordsim_spearman"]["sd"] >= 0.0
  assert bench.main([f"--text={TINY}", "--models=skipgram", "--seeds=1,1"]) == 2
  assert capsys.readouterr().err.strip() == "error: --seeds=1,1: a seed is repeated"
