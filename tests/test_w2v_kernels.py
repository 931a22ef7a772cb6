"""The compiled (numba) kernels against the numpy code: the same arrays, the same bytes."""

import os
import random

import numpy as np
import pytest

from textrecords.datasets import index as index_lib
from textrecords.files import tfrecord
from textrecords.wire import example_encoder
from textrecords.wire import features as F
from w2v_data import kernel_loader
from w2v_data import corpus as corpus_lib
from w2v_data import generator
from w2v_data import records
from w2v_data import sampling
from w2v_data import units
from w2v_data.config import W2vConfig

pytest.importorskip("numba")  # the `fast` extra (in the test extra)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "tests", "testdata", "w2v_tiny.txt")
MODELS = ("skipgram", "cbow", "pv_dm", "pv_dbow")
_BATCH_FIELDS = ("centers", "sentence", "num_contexts", "contexts", "negatives")


@pytest.fixture(params=["default", "jit"])
def kernel_source(request, monkeypatch):
  """Runs a test with the kernels as loaded by default (compiled ahead of
  time where a C compiler is at hand) and with numba's JIT."""
  monkeypatch.setattr(kernel_loader, "ENABLED", True)  # even under TEXTRECORDS_NUMBA=0
  if request.param == "jit":
    monkeypatch.setattr(kernel_loader, "_LOADED", [kernel_loader.jit_kernels()])
  return request.param


def _both(monkeypatch, fn):
  """fn() with the kernels, then with numpy."""
  monkeypatch.setattr(kernel_loader, "ENABLED", True)  # even under TEXTRECORDS_NUMBA=0
  fast = fn()
  monkeypatch.setattr(kernel_loader, "ENABLED", False)
  assert kernel_loader.kernels() is None
  slow = fn()
  monkeypatch.setattr(kernel_loader, "ENABLED", True)
  return fast, slow


def _corpus(rng, num_sentences, vocab, max_len):
  lengths = rng.integers(0, max_len + 1, num_sentences)
  # Zipf-like ids so that noise draws often hit a context (exercises redraws).
  ids = np.minimum(rng.zipf(1.3, int(lengths.sum())), vocab - 1).astype(np.int32)
  counts = np.bincount(ids, minlength=vocab).astype(np.int64) + 1
  return ids, lengths, counts


def _record_starts(data):
  out, pos = [], 0
  while pos < len(data):
    out.append(pos)
    pos += 16 + int.from_bytes(data[pos:pos + 8], "little")
  return out


@pytest.mark.parametrize("model", MODELS)
def test_kernel_sampling_and_encoding_equal_numpy(monkeypatch, model, kernel_source):
  rng = np.random.default_rng(3)
  for vocab, width, k, t in ((40, 5, 5, 1e-2), (12, 3, 2, 1.0), (300, 2, 0, 1e-3)):
    ids, lengths, counts = _corpus(rng, 300, vocab, 30)
    sampler = sampling.SkipGramSampler.build(counts, subsample_t=t, max_window_size=width,
                                             num_noise_words=k, seed=11, model=model)
    first = 1000 * vocab

    def run(sampler=sampler, ids=ids, lengths=lengths, first=first):
      out = []
      for with_neg in (True, False):
        b = sampler.sample(ids, lengths, np.arange(first, first + len(lengths)), with_neg)
        out.append([getattr(b, f) for f in _BATCH_FIELDS] + [b.subsampled_tokens])
      b_full = sampler.sample(ids, lengths, np.arange(first, first + len(lengths)))
      for layout in ("sentence", "center") if model == "skipgram" else ("sentence",):
        out.append(units.encode_batch(b_full, sampler.num_noise_words, layout, model,
                                      with_starts=True))
      return out

    fast, slow = _both(monkeypatch, run)
    assert len(fast[0][3]) > 0 or model == "pv_dbow"
    for a, b in zip(fast[:2], slow[:2]):
      for x, y, name in zip(a, b, _BATCH_FIELDS + ("subsampled",)):
        if isinstance(x, np.ndarray):
          assert x.dtype == y.dtype and np.array_equal(x, y), (model, vocab, name)
        else:
          assert x == y
    for (data_f, starts_f), (data_s, starts_s) in zip(fast[2:], slow[2:]):
      assert data_f == data_s and np.array_equal(starts_f, starts_s)
      assert starts_f.tolist() == _record_starts(data_f)


def test_kernel_alias_table_equals_numpy(monkeypatch, kernel_source):
  rng = np.random.default_rng(5)
  for weights in (rng.random(1000) ** 8, np.r_[0.0, rng.zipf(1.5, 3000) ** 0.75],
                  np.array([0.0, 3.0, 1.0]), np.ones(64)):
    fast, slow = _both(monkeypatch, lambda w=weights: sampling.AliasTable(w))
    for name in ("prob", "threshold", "alias"):
      a, b = getattr(fast, name), getattr(slow, name)
      assert a.dtype == b.dtype and np.array_equal(a, b), name


def test_kernel_reports_the_same_undrawable_sentence(monkeypatch, kernel_source):
  # Two noise words; the middle 1 of "1 1 2" has both as contexts, so it
  # cannot get a skip-gram negative. Both paths name the same (global) sentence.
  counts = np.array([0, 5, 5])
  sampler = sampling.SkipGramSampler.build(counts, subsample_t=1.0, max_window_size=1,
                                           num_noise_words=2, seed=1)
  ids = np.array([1, 2, 1, 2, 1, 1, 2], dtype=np.int32)
  lengths = np.array([2, 2, 3])

  def run():
    with pytest.raises(sampling.NoNoiseWordError) as e:
      sampler.sample(ids, lengths, np.array([40, 41, 42]))
    return e.value.sentence_index

  fast, slow = _both(monkeypatch, run)
  assert fast == slow == 42


def test_kernel_encoder_matches_numpy_on_big_values_and_empty_lists(monkeypatch,
                                                                    kernel_source):
  rng = np.random.default_rng(0)
  lens = rng.integers(0, 4, 50)
  vals = rng.integers(0, 1 << 62, int(lens.sum()))
  feats = [("zz", vals, lens), ("a", np.arange(50), np.ones(50, np.int64)),
           ("é", np.zeros(0, np.int64), np.zeros(50, np.int64))]
  fast, slow = _both(monkeypatch, lambda: records.encode_int64_records(feats, with_starts=True))
  assert fast[0] == slow[0] and np.array_equal(fast[1], slow[1])
  for enabled in (True, False):
    monkeypatch.setattr(kernel_loader, "ENABLED", enabled)
    with pytest.raises(ValueError, match="negative"):
      records.encode_int64_records([("a", np.array([1, -1]), np.array([2]))])


def test_kernel_and_numpy_encoders_equal_example_encoder_on_long_lists(monkeypatch,
                                                                      kernel_source):
  # Lists of 64-200 values of 2-3 bytes each: 128+ payload bytes from fewer
  # than 128 values too, so a packed length sized from the value count fails.
  rng = np.random.default_rng(18)
  n = 40
  lens = rng.integers(64, 201, n)
  vals = rng.integers(128, 1 << 20, int(lens.sum()))
  short = rng.integers(0, 3, n)
  short_vals = rng.integers(0, 1 << 20, int(short.sum()))
  feats = [("long", vals, lens), ("b", short_vals, short)]
  enc = example_encoder.ExampleEncoder([F.FeatureSpec(f[0], "int64", None) for f in feats])
  lists = {name: np.split(v, np.cumsum(c)[:-1]) for name, v, c in feats}
  expected = b"".join(tfrecord.frame(enc.encode({k: v[i].tolist() for k, v in lists.items()}))
                      for i in range(n))
  fast, slow = _both(monkeypatch, lambda: records.encode_int64_records(feats))
  assert fast == expected, "compiled kernel"
  assert slow == expected, "numpy"


_WHITESPACE = [chr(c) for c in range(0x110000) if chr(c).isspace()]
_LETTERS = ["a", "b", "é", "ß", "漢", "😀", "\u200b", "\x7f", "Ā", "\u2060", "\x1b"]


def test_space_table_holds_every_whitespace_character():
  # str.split() splits at exactly these; the kernel's table must hold them all.
  table = corpus_lib.space_table()
  assert all(ord(w) < len(table) for w in _WHITESPACE)
  assert [chr(c) for c in np.flatnonzero(table)] == _WHITESPACE


def _random_text(rng, distinct):
  parts = []
  for _ in range(rng.randint(0, 120)):
    r = rng.random()
    if r < 0.3:
      parts.append(rng.choice(_WHITESPACE) * rng.randint(1, 2))  # "\n" among them
    elif r < 0.35:
      parts.append(rng.choice(["\n", "\r\n", "\n\n"]))
    else:
      parts.append("".join(rng.choice(_LETTERS) for _ in range(rng.randint(1, 3))))
  if distinct:  # more distinct tokens than the kernel's first hash table holds
    parts += [f" w{i} " for i in range(distinct)] + [" w7 "] * 5
    rng.shuffle(parts)
  return "".join(parts)


def _same_counts(a, b):
  assert a.tokens == b.tokens and a.num_lines == b.num_lines
  assert a.doc_names == b.doc_names and a.error == b.error and a.unclean == b.unclean
  for x, y in ((a.counts, b.counts), (a.local_ids, b.local_ids)):
    assert x.dtype == y.dtype and np.array_equal(x, y)


def test_kernel_counting_equals_python_split(monkeypatch, kernel_source):
  rng = random.Random(7)
  docs = corpus_lib.ReadMode("documents", True)
  for trial in range(150):
    text = _random_text(rng, 3000 if trial % 25 == 0 else 0)
    data = text.encode("utf-8")
    # Documents with ids: every line gets an id and some text.
    tsv = "".join(f"d{i}\t{line}x\n" for i, line in enumerate(text.split("\n")))
    for args in ((data, True), (data, False), (tsv.encode("utf-8"), True, docs)):

      def count(args=args):
        if kernel_loader.ENABLED:
          kernel_loader.kernels()
          assert kernel_loader.loaded() is not None
        return corpus_lib.count_chunk(*args)

      fast, slow = _both(monkeypatch, count)
      _same_counts(fast, slow)
  # The Python reference is str.split() per line.
  lines = text.split("\n")
  ref = corpus_lib.count_chunk(data, True)
  assert ref.num_lines == len(lines) and len(ref.tokens) == len(set(text.split()))


def _files(out):
  return {n: open(os.path.join(out, n), "rb").read() for n in sorted(os.listdir(out))}


@pytest.mark.parametrize("model", ["skipgram", "pv_dm"])
def test_create_same_bytes_with_and_without_kernels_any_workers(tmp_path, monkeypatch, model):
  monkeypatch.setattr(generator, "CHUNK_SENTENCES", 7)  # many work items
  monkeypatch.setattr(corpus_lib, "CHUNK_BYTES", 300)  # many read pieces
  src = tmp_path / "in.txt"
  with open(TINY, encoding="utf-8") as f:  # 60 sentences (+ the empty one after the last)
    src.write_text("".join([l for l in f if l.strip()][:60]), encoding="utf-8")
  results = {}
  for enabled in (True, False):
    monkeypatch.setattr(kernel_loader, "ENABLED", enabled)
    for workers in (1, 3):
      out = str(tmp_path / f"out_{enabled}_{workers}")
      generator.create(W2vConfig(input_file=str(src), output_dir=out, model=model,
                                min_freq=2, subsample_t=5e-2, max_window_size=3,
                                num_noise_words=3, num_workers=workers, num_shards=70,
                                quiet=True))
      results[enabled, workers] = _files(out)
      # No scratch folder is left behind.
      assert not [n for n in os.listdir(out) if n.startswith(".")]
  ref = results[False, 1]
  assert all(r == ref for r in results.values())
  # The offset index written from the encoder's record starts equals a scan
  # of the file (shards past the sentences are empty files without an index).
  shards = [n for n in ref if n.startswith("train.tfrecord") and "index" not in n]
  assert len(shards) == 70 and any(not ref[n] for n in shards)
  for name in shards:
    path = os.path.join(str(tmp_path / "out_True_3"), name)
    if ref[name]:
      assert np.array_equal(index_lib.load(index_lib.index_path(path)).offsets, index_lib.scan(path))
      assert len(list(tfrecord.read_records(path))) > 0


def test_prepare_and_docstrings(monkeypatch):
  import doctest  # pylint: disable=import-outside-toplevel
  from w2v_data import kernels  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(kernel_loader, "ENABLED", True)
  kernel_loader.prepare()
  for mod in (kernel_loader, kernels):
    result = doctest.testmod(mod)
    assert result.failed == 0 and result.attempted > 0, mod.__name__


def test_ahead_of_time_kernels_load_without_numba():
  # A fresh process: the kernels compiled ahead of time (built by an earlier
  # test or run if a C compiler is at hand) import without importing numba.
  import subprocess  # pylint: disable=import-outside-toplevel
  import sys  # pylint: disable=import-outside-toplevel
  code = ("import sys; from w2v_data import kernel_loader; k = kernel_loader.kernels(); "
          "print(k.source, 'numba' in sys.modules)")
  env = {k: v for k, v in os.environ.items() if k != "TEXTRECORDS_NUMBA"}
  out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                       text=True, check=True).stdout.split()
  assert out in (["aot", "False"], ["jit", "True"])
  if out[0] == "jit":  # no C compiler here: the build failed once and was recorded
    key = kernel_loader._source_key()  # pylint: disable=protected-access
    assert any(os.path.exists(os.path.join(d, f"_w2v_kernels_{key}.failed"))
               for d in kernel_loader._cache_dirs())  # pylint: disable=protected-access


def test_create_without_noise_words(tmp_path, monkeypatch):
  # --num_noise_words=0: every record's negatives list is empty (the numpy
  # encoder used to fail on a feature without any value).
  def run():
    out = str(tmp_path / f"out_{kernel_loader.ENABLED}")
    meta = generator.create(W2vConfig(input_file=TINY, output_dir=out, min_freq=2,
                                     num_noise_words=0, num_workers=1, quiet=True)).meta
    return meta["counts"], _files(out)

  fast, slow = _both(monkeypatch, run)
  assert fast[1] == slow[1] and fast[0]["negatives"] == 0 and fast[0]["pairs"] > 0
  path = tmp_path / "out_False" / "train.tfrecord"
  assert all(len(r) > 0 for r in tfrecord.read_records(str(path)))
