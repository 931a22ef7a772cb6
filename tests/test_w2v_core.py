"""w2v_data's pure core (no TensorFlow): vocab, subsampling, windows, noise words,
record encoding and the create run."""

import collections
import json
import math
import os

import numpy as np
import pytest

from textrecords.wire import example_decoder
from textrecords.files import tfrecord
from textrecords.errors import UserError
from w2v_data import corpus as corpus_lib
from w2v_data import kernel_loader
from w2v_data import generator
from w2v_data import sampling
from w2v_data import schema
from w2v_data.config import W2vConfig

TINY = os.path.join(os.path.dirname(__file__), "testdata", "w2v_tiny.txt")


@pytest.fixture(params=["compiled", "numpy"])
def kernels_on_off(request, monkeypatch):
  """Runs a sampler test with w2v_data's compiled kernels and with the numpy
  code (the fallback without numba, or under TEXTRECORDS_NUMBA=0)."""
  on = request.param == "compiled"
  if on and not kernel_loader.AVAILABLE:
    pytest.skip("numba (the `fast` extra) is not installed")
  monkeypatch.setattr(kernel_loader, "ENABLED", on)
  assert (kernel_loader.kernels() is not None) == on
  return request.param


def _sampler(counts, **kw):
  args = dict(subsample_t=1e-2, max_window_size=3, num_noise_words=4, seed=7)
  args.update(kw)
  return sampling.SkipGramSampler.build(np.asarray(counts), **args)


def _sample_all(c, sampler, chunk=None):
  starts = np.r_[0, np.cumsum(c.lengths)]
  chunk = chunk or c.num_sentences
  out = []
  for lo in range(0, c.num_sentences, chunk):
    hi = min(lo + chunk, c.num_sentences)
    out.append(sampler.sample(c.ids[starts[lo]:starts[hi]], c.lengths[lo:hi], np.arange(lo, hi)))
  return out


def _per_center(batch, k):
  """[(sentence, center, contexts, negatives)] of a batch."""
  cs = np.r_[0, np.cumsum(batch.num_contexts)]
  return [(int(batch.sentence[i]), int(batch.centers[i]), batch.contexts[cs[i]:cs[i + 1]].tolist(),
           batch.negatives[k * cs[i]:k * cs[i + 1]].tolist()) for i in range(len(batch.centers))]


# --- vocab and corpus ------------------------------------------------------------------

def test_vocab_order_ties_and_unk():
  counter = collections.Counter("c b a b <unk> a d <unk> <unk> c e".split())
  assert corpus_lib.build_vocab(counter, 2) == ["<unk>", "c", "b", "a"]
  assert corpus_lib.build_vocab(counter, 1) == ["<unk>", "c", "b", "a", "d", "e"]


def test_corpus_reads_like_d2l(tmp_path):
  p = tmp_path / "a.txt"
  p.write_text("x y <unk> z\n\nx  y\tx q\n")
  c = corpus_lib.load_corpus([str(p)], 2)
  # 3 lines + the empty sentence after the final newline, as split('\n') gives.
  assert c.num_sentences == 4
  assert c.tokens == ["<unk>", "x", "y"]
  assert c.counts.tolist() == [3, 3, 2]
  assert c.lengths.tolist() == [2, 0, 3, 0]
  assert c.ids.tolist() == [1, 2, 1, 2, 1]
  assert c.raw_tokens == 8 and c.num_tokens == 5
  assert c.line_of[2] == (str(p), 3)


def test_corpus_skip_line_keeps_line_numbers(tmp_path):
  p = tmp_path / "a.txt"
  p.write_bytes(b"x y\nbad \xff\nx y x\n")
  c = corpus_lib.load_corpus([str(p)], 1, on_decode_error="skip_line")
  assert c.num_sentences == 3 and c.lengths.tolist() == [2, 3, 0]
  assert [c.line_of[i] for i in range(3)] == [(str(p), 1), (str(p), 3), (str(p), 4)]
  fast = corpus_lib.load_corpus([str(p)], 1, on_decode_error="replace")
  assert fast.num_sentences == 4 and fast.tokens[:3] == ["<unk>", "x", "y"]


def test_corpus_errors(tmp_path):
  empty = tmp_path / "e.txt"
  empty.write_bytes(b"")
  with pytest.raises(UserError, match="empty file"):
    corpus_lib.load_corpus([str(empty)], 1)
  blank = tmp_path / "b.txt"
  blank.write_text("\n  \n")
  with pytest.raises(UserError, match="no tokens"):
    corpus_lib.load_corpus([str(blank)], 1)
  with pytest.raises(UserError, match="--min_freq=1000 leaves an empty vocabulary"):
    corpus_lib.load_corpus([TINY], 1000)


# --- subsampling, windows, negatives --------------------------------------------------

def test_keep_probabilities_formulas():
  counts = np.array([50, 900, 90, 10])
  n = 1000
  keep = sampling.keep_probabilities(counts, 1e-3)
  assert keep[0] == 0
  assert keep[1] == pytest.approx(math.sqrt(1e-3 / (900 / n)))
  assert keep[3] == pytest.approx(math.sqrt(0.1))
  assert sampling.keep_probabilities(counts, 0.5)[3] == 1.0
  w2v = sampling.keep_probabilities(counts, 1e-3, "word2vec")
  r = 1e-3 / (900 / n)
  assert w2v[1] == pytest.approx(math.sqrt(r) + r)


@pytest.mark.usefixtures("kernels_on_off")
@pytest.mark.parametrize("seed", range(12))
def test_sampler_invariants_many_seeds(seed):
  c = corpus_lib.load_corpus([TINY], 2)
  k, width = 3, 1 + seed % 4
  s = _sampler(c.counts, seed=seed, max_window_size=width, num_noise_words=k,
               subsample_t=[1e-2, 1e-1, 1.0][seed % 3])
  (batch,) = _sample_all(c, s)
  starts = np.r_[0, np.cumsum(c.lengths)]
  by_sentence = collections.defaultdict(list)
  for row in _per_center(batch, k):
    by_sentence[row[0]].append(row)
  for sent, rows in by_sentence.items():
    original = c.ids[starts[sent]:starts[sent + 1]].tolist()
    toks = [r[1] for r in rows]  # every subsampled position is a center
    assert len(toks) >= 2
    it = iter(original)
    assert all(t in it for t in toks), "subsampled sentence is not a subsequence"
    for i, (_, center, ctx, neg) in enumerate(rows):
      windows = [w for w in range(1, width + 1)
                 if ctx == toks[max(0, i - w):i] + toks[i + 1:i + w + 1]]
      assert windows, (toks, i, ctx)
      assert len(neg) == k * len(ctx)
      assert all(1 <= x < len(c.tokens) for x in neg)
      assert not set(neg) & set(ctx)
  assert batch.num_pairs == int(batch.num_contexts.sum())


@pytest.mark.usefixtures("kernels_on_off")
def test_sampling_independent_of_grouping():
  c = corpus_lib.load_corpus([TINY], 2)
  s = _sampler(c.counts)
  whole = _sample_all(c, s)
  pieces = _sample_all(c, s, chunk=17)
  flat = lambda bs: [r for b in bs for r in _per_center(b, 4)]  # noqa: E731
  assert flat(whole) == flat(pieces)
  other_seed = _sample_all(c, _sampler(c.counts, seed=8))
  assert flat(other_seed) != flat(whole)


@pytest.mark.usefixtures("kernels_on_off")
def test_window_and_keep_statistics():
  rng = np.random.default_rng(0)
  counts = np.r_[0, rng.integers(50, 500, size=30)]
  ids = rng.integers(1, 31, size=40000).astype(np.int32)
  lengths = np.full(2000, 20)
  t = 2e-2
  s = _sampler(counts, subsample_t=t, max_window_size=4, num_noise_words=0)
  b = s.sample(ids, lengths, np.arange(2000))
  keep = s.keep_prob
  expected_kept = keep[ids].sum()
  sd = math.sqrt((keep[ids] * (1 - keep[ids])).sum())
  assert abs(b.subsampled_tokens - expected_kept) < 5 * sd
  # Centers far from sentence ends have 2w contexts: w uniform on 1..4.
  s1 = _sampler(counts, subsample_t=1.0, max_window_size=4, num_noise_words=0)
  b1 = s1.sample(ids, lengths, np.arange(2000))
  pos = np.tile(np.arange(20), 2000)
  inner = (pos >= 4) & (pos < 16)
  hist = np.bincount(b1.num_contexts[inner] // 2, minlength=5)[1:]
  assert hist.min() > 0.9 * inner.sum() / 4 and hist.max() < 1.1 * inner.sum() / 4


@pytest.mark.usefixtures("kernels_on_off")
def test_noise_distribution_chi_square():
  counts = np.array([0, 1000, 400, 150, 60, 20, 7, 2])
  probs = sampling.noise_probabilities(counts)
  table = sampling.AliasTable(probs[1:])
  bits = sampling.mix64(np.arange(1, 200001, dtype=np.uint64))
  observed = np.bincount(table.sample(bits), minlength=7)
  expected = probs[1:] * 200000
  chi2 = float(((observed - expected) ** 2 / expected).sum())
  assert chi2 < 22.5  # 6 degrees of freedom, p ~ 0.001


@pytest.mark.usefixtures("kernels_on_off")
def test_negatives_follow_count_power_excluding_contexts():
  """The noise words of a center are count**0.75 renormalised without its contexts."""
  counts = np.array([0, 300, 200, 100, 50])
  p = sampling.noise_probabilities(counts)
  s = _sampler(counts, subsample_t=1.0, max_window_size=1, num_noise_words=50)
  ids = np.tile(np.array([1, 2], np.int32), 2000)  # sentences "1 2": contexts {2} / {1}
  b = s.sample(ids, np.full(2000, 2), np.arange(2000))
  negs = b.negatives.reshape(-1, 50)
  for center, other in ((1, 2), (2, 1)):
    drawn = negs[b.centers == center].ravel()
    assert other not in drawn
    allowed = [i for i in range(1, 5) if i != other]
    q = p[allowed] / p[allowed].sum()
    observed = np.array([(drawn == i).sum() for i in allowed])
    expected = q * len(drawn)
    assert float(((observed - expected) ** 2 / expected).sum()) < 13.8  # 2 dof, p ~ 0.001


@pytest.mark.usefixtures("kernels_on_off")
@pytest.mark.parametrize("model", ["skipgram", "cbow", "pv_dm", "pv_dbow"])
def test_noise_words_are_never_an_excluded_word(model):
  # One word holds ~90% of the noise mass and most windows: most first draws
  # are excluded and redrawn, some many times.
  rng = np.random.default_rng(20)
  counts = np.array([0, 5000, 400, 300, 200, 100])
  lengths = rng.integers(1, 9, 300)
  ids = rng.choice(np.arange(1, 6), p=counts[1:] / counts.sum(),
                   size=int(lengths.sum())).astype(np.int32)
  k = 6
  b = _sampler(counts, subsample_t=1.0, max_window_size=2, num_noise_words=k,
               model=model).sample(ids, lengths, np.arange(300))
  assert len(b.centers) > 100 and b.negatives.min() >= 1 and b.negatives.max() <= 5
  if model == "skipgram":
    rows = [(ctx, neg) for _, _, ctx, neg in _per_center(b, k)]
    assert sum(len(n) for _, n in rows) == len(b.negatives) == k * len(b.contexts)
  else:
    cs = np.r_[0, np.cumsum(b.num_contexts)]
    negs = b.negatives.reshape(len(b.centers), k).tolist()
    rows = [([int(c)] + b.contexts[cs[i]:cs[i + 1]].tolist(), negs[i])
            for i, c in enumerate(b.centers)]
  assert sum(1 in excluded for excluded, _ in rows) > len(rows) / 2
  for excluded, neg in rows:
    assert not set(neg) & set(excluded), (excluded, neg)


@pytest.mark.usefixtures("kernels_on_off")
def test_no_noise_word_left_raises():
  counts = np.array([0, 5, 5])
  s = _sampler(counts, subsample_t=1.0, max_window_size=2, num_noise_words=1)
  with pytest.raises(sampling.NoNoiseWordError):
    s.sample(np.array([1, 2, 1], np.int32), np.array([3]), np.array([0]))


# --- the create run --------------------------------------------------------------------

def _config(tmp_path, name="out", **kw):
  args = dict(input_file=TINY, output_dir=str(tmp_path / name), min_freq=2, subsample_t=1e-2,
              max_window_size=3, num_noise_words=4, random_seed=5, num_workers=1)
  args.update(kw)
  return W2vConfig(**args)


def _tree(d):
  return {n: open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d))}


@pytest.mark.parametrize("layout", ["sentence", "center"])
def test_create_round_trip(tmp_path, layout):
  meta = generator.create(_config(tmp_path, layout=layout, num_shards=3)).meta
  out = tmp_path / "out"
  assert sorted(os.listdir(out)) == ["meta.json"] + sorted(
      f"train.tfrecord-0000{i}-of-00003{ext}" for i in range(3) for ext in ("", ".index")
  ) + ["vocab.txt"]
  c = corpus_lib.load_corpus([TINY], 2)
  assert (out / "vocab.txt").read_text().split("\n")[:-1] == c.tokens
  assert meta["vocab"]["counts"] == c.counts.tolist()
  (batch,) = _sample_all(c, _sampler(c.counts, seed=5))
  expected = [r[1:] for r in _per_center(batch, 4)]
  got = []
  for name in meta["splits"]["train"]["files"]:
    for rec in tfrecord.read_records(str(out / name)):
      ex = example_decoder.decode_example(rec)
      if layout == "center":
        got.append((ex["center"][0], ex["contexts"], ex["negatives"]))
      else:
        cs = np.r_[0, np.cumsum(ex["num_contexts"])]
        for i, center in enumerate(ex["centers"]):
          got.append((center, ex["contexts"][cs[i]:cs[i + 1]],
                      ex["negatives"][4 * cs[i]:4 * cs[i + 1]]))
  assert got == expected
  counts = meta["counts"]
  assert counts["centers"] == len(expected) == len(batch.centers)
  assert counts["pairs"] == batch.num_pairs
  assert counts["sentences"] == 401
  assert counts["max_row_length"] == 5 * int(batch.num_contexts.max())
  on_disk = json.loads((out / "meta.json").read_text())
  assert on_disk["package"] == "w2v_data" and on_disk["layout"] == layout
  assert on_disk["flags"]["random_seed"] == 5 and on_disk["random_seed"] == 5


def test_workers_do_not_change_bytes(tmp_path, monkeypatch):
  monkeypatch.setattr(generator, "CHUNK_SENTENCES", 50)
  generator.create(_config(tmp_path, "one", num_shards=2, num_workers=1))
  generator.create(_config(tmp_path, "two", num_shards=2, num_workers=2))
  monkeypatch.setattr(generator, "CHUNK_SENTENCES", 7)
  generator.create(_config(tmp_path, "three", num_shards=2, num_workers=2))
  assert _tree(tmp_path / "one") == _tree(tmp_path / "two") == _tree(tmp_path / "three")


def test_gzip_output_reads_back(tmp_path):
  meta = generator.create(_config(tmp_path, compression="GZIP")).meta
  recs = list(tfrecord.read_records(str(tmp_path / "out" / "train.tfrecord"), "GZIP"))
  assert len(recs) == meta["counts"]["records"] > 0


def test_no_noise_word_is_a_user_error_naming_the_line(tmp_path):
  p = tmp_path / "two_words.txt"
  p.write_text("a b\n" * 5 + "a b a b a\n")
  with pytest.raises(UserError,
                     match=r"two_words.txt:\d+: a center.s contexts cover every one of the 2 "):
    generator.create(W2vConfig(input_file=str(p), output_dir=str(tmp_path / "o"), min_freq=1,
                              subsample_t=1.0, num_workers=1))
  assert not os.path.exists(tmp_path / "o")  # a failed run leaves nothing, hidden files neither


def test_schema_names_live_in_schema_module():
  assert {s.name for s in schema.SENTENCE_SCHEMA} == {"centers", "num_contexts", "contexts",
                                                       "negatives"}


def test_importing_the_package_and_cli_does_not_import_tensorflow():
  import subprocess  # pylint: disable=import-outside-toplevel
  import sys  # pylint: disable=import-outside-toplevel
  code = ("import sys, w2v_data, w2v_data.create, w2v_data.generator; "
          "assert 'tensorflow' not in sys.modules; "
          "from absl import flags; assert 'input_file' not in flags.FLAGS")
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  subprocess.run([sys.executable, "-c", code], check=True, cwd=root,
                 env=dict(os.environ, PYTHONPATH=root))
