"""The kernel engine of the w2v SGD trainer: w2v_data.train.sgd_kernels and kernel_engine."""

import os

import numpy as np
import pytest

pytest.importorskip("numba")

from w2v_data import sampling  # noqa: E402  pylint: disable=wrong-import-position
from w2v_data.train import sgd_kernels  # noqa: E402  pylint: disable=wrong-import-position

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "tests", "testdata", "w2v_tiny.txt")
VOCAB, DIM = 12, 8


def _corpus(seed=0, sentences=40):
  rng = np.random.default_rng(seed)
  lengths = rng.integers(1, 12, sentences)
  tokens = rng.integers(1, VOCAB, int(lengths.sum())).astype(np.int64)
  return tokens, np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def _weights(seed=0, docs=40):
  rng = np.random.default_rng(seed)
  return {"words_in": rng.uniform(-0.1, 0.1, (VOCAB, DIM)).astype(np.float32),
          "words_out": rng.uniform(-0.1, 0.1, (VOCAB, DIM)).astype(np.float32),
          "docs": rng.uniform(-0.1, 0.1, (docs, DIM)).astype(np.float32)}


def _noise_table(vocab=VOCAB):
  table = sampling.AliasTable(sampling.noise_probabilities(np.arange(1, vocab + 1.0)))
  return np.asarray(table.prob, np.float64), np.asarray(table.alias, np.int64)


def _train(model, seed, weights=None, keep=None, tokens=None, row_splits=None, rate=0.05):
  """Runs train_chunk over the whole corpus; returns (weights after, result)."""
  if tokens is None:
    tokens, row_splits = _corpus()
  w = {k: v.copy() for k, v in (weights or _weights(docs=len(row_splits) - 1)).items()}
  doc_ids = (np.arange(len(row_splits) - 1, dtype=np.int64) if model.startswith("pv")
             else np.zeros(0, np.int64))
  prob, alias = _noise_table()
  keep = np.zeros(0) if keep is None else np.asarray(keep, np.float64)
  result = sgd_kernels.train_chunk(
      sgd_kernels.MODEL_CODES[model], tokens, row_splits, doc_ids, 0, len(row_splits) - 1,
      w["words_in"], w["words_out"], w["docs"], keep, prob, alias, 3, 4, seed, rate, 0.0,
      1.0 / len(tokens), 1e-4)
  return w, result


@pytest.mark.parametrize("model", ["skipgram", "cbow", "pv_dm", "pv_dbow"])
def test_a_chunk_depends_only_on_weights_corpus_and_seed(model):
  a, ra = _train(model, seed=11)
  b, rb = _train(model, seed=11)
  assert all(np.array_equal(a[k], b[k]) for k in a) and np.array_equal(ra, rb)
  c, _ = _train(model, seed=12)
  assert not np.array_equal(a["words_out"], c["words_out"])
  before = _weights()
  changed = {k: not np.array_equal(a[k], before[k]) for k in a}
  # What each model trains: input words (not PV-DBOW), documents (PV only), output words.
  assert changed == {"words_in": model != "pv_dbow", "docs": model.startswith("pv"),
                     "words_out": True}
  tokens, _ = _corpus()
  examples = {"pv_dbow": len(tokens)}.get(model)
  assert ra[3] == len(tokens) and ra[1] >= ra[2] > 0 and ra[0] > 0  # no subsampling
  if examples is not None:
    assert ra[2] == examples


def test_subsampling_keeps_tokens_by_their_probability():
  tokens, row_splits = _corpus(sentences=400)
  keep = np.full(VOCAB, 0.5)
  keep[1], keep[2] = 0.0, 1.0
  _, result = _train("pv_dbow", seed=3, keep=keep, tokens=tokens, row_splits=row_splits)
  always, halves = (tokens == 2).sum(), ((tokens != 1) & (tokens != 2)).sum()
  assert abs(result[3] - always - halves / 2) < 4 * np.sqrt(halves / 4)  # 4 sd
  _, every = _train("pv_dbow", seed=3, tokens=tokens, row_splits=row_splits)
  assert every[3] == len(tokens)  # no keep probabilities: every token


def test_noise_words_follow_the_alias_table():
  prob, alias = _noise_table()
  state = np.array([7], np.uint64)
  draws = np.array([sgd_kernels._noise(state, prob, alias) for _ in range(40000)])  # pylint: disable=protected-access
  expected = sampling.noise_probabilities(np.arange(1, VOCAB + 1.0))
  freq = np.bincount(draws, minlength=VOCAB) / len(draws)
  assert np.abs(freq - expected).max() < 0.01, (freq, expected)


def test_a_positive_pair_trained_alone_scores_higher():
  """One sentence "1 2" repeated: the pair's score rises, noise words' scores fall."""
  tokens = np.array([1, 2] * 200, np.int64)
  row_splits = np.arange(0, 401, 2, dtype=np.int64)
  w0 = _weights()
  w, result = _train("skipgram", 5, weights=w0, tokens=tokens, row_splits=row_splits, rate=0.1)
  score = lambda m, a, b: float(m["words_in"][a] @ m["words_out"][b])  # noqa: E731
  assert score(w, 1, 2) > score(w0, 1, 2) + 1.0 and score(w, 1, 2) > 2.0
  assert result[0] / result[1] < 0.5  # the mean loss per term


def test_loss_stays_finite_with_many_saturated_noise_words():
  """K up to the allowed 1000 noise words, every one at the logit clip
  (likelihood ~4.5e-5 each, a product far below float64's range): the
  example's loss is the sum of the terms' -log, not inf."""
  h = np.full(DIM, 2.0, np.float32)
  out = np.full((2, DIM), 2.0, np.float32)  # logit 32 for every word: clipped to +10
  prob, alias = np.array([0.0, 1.0]), np.array([1, 1], np.int64)  # noise: always word 1
  per_noise = -np.log(1.0 - 1.0 / (1.0 + np.exp(-10.0)))
  for k in (5, 100, 1000):
    grad = np.zeros(DIM, np.float32)
    loss, terms = sgd_kernels._targets(h, out, 0, k, prob, alias, np.zeros(1, np.uint64),  # pylint: disable=protected-access
                                       0.0, grad)
    assert terms == k + 1 and loss == pytest.approx(k * per_noise, rel=1e-4), k


@pytest.mark.parametrize("model", ["skipgram", "cbow", "pv_dbow", "pv_dm"])
def test_kernel_runs_draw_anew_each_epoch_and_repeat_for_any_worker_count(tmp_path, model):
  pytest.importorskip("tensorflow")
  from w2v_data import generator  # pylint: disable=import-outside-toplevel
  from w2v_data.train import draws as draws_lib, kernel_engine  # pylint: disable=import-outside-toplevel
  from w2v_data.config import W2vConfig  # pylint: disable=import-outside-toplevel
  src = tmp_path / "lines.txt"
  with open(TINY, encoding="utf-8") as f:
    src.write_text("\n".join(l for l in f.read().split("\n") if l.strip()) + "\n",
                   encoding="utf-8")
  runs = {}
  for workers in (1, 4):
    d = str(tmp_path / f"w{workers}")
    generator.create(W2vConfig(input_file=str(src), output_dir=d, model=model, min_freq=2,
                              subsample_t=1.0, max_window_size=3, num_noise_words=3,
                              num_workers=workers, num_shards=2, quiet=True))
    draws = draws_lib.EpochDraws(d, 16, seed=1, settings=draws_lib.DrawSettings(subsample_t=0.05))
    rows = {"words_in": len(draws.meta["vocab"]["counts"]), "docs": 1 if draws.doc is None
            else int(draws.doc.numpy().max()) + 1}
    rows["words_out"] = rows["words_in"]
    for epoch in (0, 1, 0):
      w = {k: np.full((n, 4), 0.1, np.float32) for k, n in rows.items()}
      run = kernel_engine.KernelRun(draws, w, seed=3, epochs=2, learning_rate=0.05,
                                 min_ratio=1e-4)
      run.epoch = epoch
      loss = run.step(np.arange(run.num_chunks))
      runs.setdefault((workers, epoch), []).append((w, loss))
  same = lambda a, b: all(np.array_equal(a[0][k], b[0][k]) for k in a[0]) and a[1] == b[1]  # noqa: E731
  first = runs[(1, 0)][0]
  assert same(first, runs[(1, 0)][1]) and same(first, runs[(4, 0)][0])  # reruns, workers
  assert same(runs[(1, 1)][0], runs[(4, 1)][0])
  assert not same(first, runs[(1, 1)][0])  # epoch 1 draws anew
