"""Dynamic masking (bert_data/dynamic_masking.py): one rule with masking.py.

Single-piece masks equal numpy's `mask_matrix` bit for bit (same counter-based
numbers); whole-word and n-gram masks are held to the Python execution's
distribution over many seeds (fixed seeds, binomial bounds at ~5 sigma).
"""

import collections
import random

import numpy as np
import pytest
import tensorflow as tf

import bert_data
from bert_data import dynamic_masking as dm
from bert_data import generator, masking, units
from bert_data.masks import draws, single_piece, whole_word
from bert_data.config import BertConfig
from conftest import SAMPLE_TEXT, VOCAB, masking_rows, write_varied_corpus
from textrecords import seeding
from textrecords.files import tfrecord
from textrecords.wire import example_decoder

CLS, SEP, MASK = 101, 102, 103
POOL = tuple(range(3000))
SUB = bytes([0] * 1500 + [1] * 500 + [0] * 1000)  # ids 1500..1999 are "##" pieces


def _masker(seq, maxp, prob=0.15, whole_word=False, ngram=1):
  return dm.DynamicMasker(seq, maxp, prob, whole_word, ngram, CLS, SEP, MASK, POOL)


def test_tf_generator_equals_numpy():
  keys = np.array([0, 1, 2**63 + 5, 2**64 - 1], np.uint64)
  for stream in (0, 3, 4):
    np.testing.assert_array_equal(draws.uniform_grid(tf, tf.constant(keys), stream, 9).numpy(),
                                  seeding.uniform_grid(keys, stream, 9))
  rk = np.array([-5, 7, 2**62], np.int64)
  for salt in (0, 99, 2**40):
    np.testing.assert_array_equal(
        draws.epoch_keys(tf, tf.constant(rk), tf.constant(salt, tf.int64)).numpy(),
        draws.epoch_keys_np(rk, salt))


@pytest.mark.parametrize("seed,maxp,prob,seq", [(0, 5, 0.15, 32), (1, 20, 0.15, 32),
                                                (2, 3, 0.5, 32), (3, 32, 0.9, 32),
                                                (4, 76, 0.15, 511)])
def test_single_piece_equals_numpy_mask_matrix(seed, maxp, prob, seq):
  ids, lengths, num_a, mask = masking_rows(200, seq, seed)
  keys = draws.epoch_keys_np(np.arange(200) * 7919, seed)
  p = masking.MaskingParams(prob, maxp, False, CLS, SEP, MASK, POOL, SUB)
  want_ids, _, want_pos, want_lab, want_cnt = single_piece.mask_matrix(ids.copy(), lengths, num_a,
                                                                  keys, p)
  got_ids, pos, lab, w = dm.mask_batch(tf, tf.constant(ids), tf.constant(mask),
                                       tf.constant(keys), _masker(seq, maxp, prob))
  np.testing.assert_array_equal(got_ids.numpy(), want_ids)
  np.testing.assert_array_equal(pos.numpy(), want_pos)
  np.testing.assert_array_equal(lab.numpy(), want_lab)
  np.testing.assert_array_equal(w.numpy().sum(axis=1), want_cnt)


def _python_masks(tokens, p, runs, seed):
  """Per-position masked counts, per-action counts and count histogram from
  the Python execution (the reference's walk; choose_ngrams for n-grams)."""
  hits = np.zeros(len(tokens))
  actions = collections.Counter()
  sizes = collections.Counter()
  for r in range(runs):
    out, pos, lab = masking.mask_tokens(list(tokens), random.Random(seed * 100003 + r), p)
    hits[pos] += 1
    sizes[len(pos)] += 1
    actions["adjacent"] += sum(1 for a, b in zip(pos, pos[1:]) if b == a + 1)
    for q, l in zip(pos, lab):
      actions["mask" if out[q] == MASK else "keep" if out[q] == l else "random"] += 1
  return hits, actions, sizes


def _tf_masks(tokens, masker, runs, seed, starts=None):
  seq = masker.max_seq_length
  ids = np.zeros((runs, seq), np.int64)
  ids[:, :len(tokens)] = tokens
  mask = np.zeros((runs, seq), np.int64)
  mask[:, :len(tokens)] = 1
  keys = draws.epoch_keys_np(np.arange(runs), seed)
  st = None if starts is None else tf.constant(np.tile(starts, (runs, 1)))
  out, pos, lab, w = dm.mask_batch(tf, tf.constant(ids), tf.constant(mask), tf.constant(keys),
                                   masker, st)
  out, pos, lab, w = out.numpy(), pos.numpy(), lab.numpy(), w.numpy()
  hits = np.zeros(seq)
  actions = collections.Counter()
  sizes = collections.Counter()
  for i in range(runs):
    m = int(w[i].sum())
    hits[pos[i, :m]] += 1
    sizes[m] += 1
    actions["adjacent"] += int(np.sum(np.diff(pos[i, :m]) == 1))
    for q, l in zip(pos[i, :m], lab[i, :m]):
      actions["mask" if out[i, q] == MASK else "keep" if out[i, q] == l else "random"] += 1
  return hits[:len(tokens)], actions, sizes


def _same_rate(a, b, n):
  """Two binomial counts out of n each agree within 5 standard errors."""
  pa, pb = a / n, b / n
  pool = (a + b) / (2 * n)
  return abs(pa - pb) <= 5 * np.sqrt(max(pool * (1 - pool), 1e-4) * 2 / n)


@pytest.mark.parametrize("ngram,seed", [(1, 11), (3, 12)])
def test_whole_word_and_ngram_follow_the_python_rule(ngram, seed):
  """Per-position mask rates, the number masked and the 80/10/10 split of the
  TF walk match the Python walk over 3000 seeds each."""
  rng = np.random.default_rng(seed)
  seq = 40
  body = []
  while len(body) < 30:  # words of 1..4 pieces
    k = int(rng.integers(1, 5))
    body += [int(rng.integers(1000, 1500))] + [int(x) for x in rng.integers(1500, 2000, k - 1)]
  body = body[:30]
  tokens = [CLS] + body[:12] + [SEP] + body[12:] + [SEP]
  p = masking.MaskingParams(0.15, 6, True, CLS, SEP, MASK, POOL, SUB, ngram)
  starts = whole_word.word_starts(np.array([tokens]), np.array([len(tokens)]), p)[0]
  starts = np.pad(starts, (0, seq - len(tokens)))
  runs = 3000
  py_hits, py_act, py_sizes = _python_masks(tokens, p, runs, seed)
  tf_hits, tf_act, tf_sizes = _tf_masks(tokens, _masker(seq, 6, 0.15, True, ngram), runs, seed,
                                        starts)
  assert py_hits[0] == tf_hits[0] == 0 and tf_hits[len(body[:12]) + 1] == 0
  assert all(_same_rate(a, b, runs) for a, b in zip(py_hits, tf_hits)), (py_hits, tf_hits)
  for k in set(py_sizes) | set(tf_sizes):
    assert _same_rate(py_sizes[k], tf_sizes[k], runs), (k, py_sizes, tf_sizes)
  total = tf_act["mask"] + tf_act["keep"] + tf_act["random"]
  assert abs(tf_act["mask"] / total - 0.8) < 5 * np.sqrt(0.16 / total)
  assert abs(tf_act["keep"] / total - 0.1) < 5 * np.sqrt(0.09 / total)
  # Masked neighbours (n-grams make runs of masked words): same mean.
  py_adj, tf_adj = py_act["adjacent"], tf_act["adjacent"]
  assert abs(py_adj - tf_adj) <= 5 * np.sqrt(2 * max(py_adj, tf_adj)) + 5, (py_adj, tf_adj)


def test_whole_words_are_masked_whole():
  seq = 48
  ids, lengths, _, mask = masking_rows(300, seq, 5, subword_share=0.4)
  p = masking.MaskingParams(0.2, 8, True, CLS, SEP, MASK, POOL, SUB, 2)
  starts = whole_word.word_starts(ids, lengths, p)
  keys = draws.epoch_keys_np(np.arange(300), 1)
  _, pos, _, w = dm.mask_batch(tf, tf.constant(ids), tf.constant(mask), tf.constant(keys),
                               _masker(seq, 8, 0.2, True, 2), tf.constant(starts))
  pos, w = pos.numpy(), w.numpy()
  total = 0
  for i in range(300):
    chosen = set(pos[i, :int(w[i].sum())].tolist())
    limit = min(8, max(1, round(lengths[i] * 0.2)))
    assert len(chosen) <= limit  # may be 0: no word fits a budget of 1 (as the reference)
    total += len(chosen)
    groups = whole_word.candidate_groups(ids[i, :lengths[i]].tolist(), p)
    for g in groups:  # a word is either fully in or fully out
      assert len(chosen & set(g)) in (0, len(g))
  assert total > 300


# ------------------------------------------------------------ end to end

@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  return write_varied_corpus(tmp_path_factory.mktemp("dyn") / "corpus.txt", 4)


def _create(path, corpus, **kw):
  cfg = dict(input_files=(corpus,), output_files=(str(path),), vocab_file=VOCAB,
             max_seq_length=64, max_predictions_per_seq=10, dupe_factor=1, masking="dynamic")
  cfg.update(kw)
  generator.create(BertConfig(**cfg))
  return str(path)


@pytest.fixture(scope="module")
def dynamic_records(tmp_path_factory, corpus):
  return _create(tmp_path_factory.mktemp("dynrec") / "d.tfrecord", corpus, num_shards=2)


def _masked(ds):
  """Counter of (unmasked ids, masked positions, masked ids) over all rows."""
  out = collections.Counter()
  for x, y, w in ds:
    ids, pos = x["input_ids"].numpy(), x["masked_lm_positions"].numpy()
    lab, wt = y["masked_lm"].numpy(), w["masked_lm"].numpy()
    for i in range(ids.shape[0]):
      m = int(wt[i].sum())
      orig = ids[i].copy()
      orig[pos[i, :m]] = lab[i, :m]
      out[(tuple(orig.tolist()), tuple(pos[i, :m].tolist()), tuple(ids[i].tolist()))] += 1
  return out


def _instances(masked):
  return collections.Counter({k[0]: 0 for k in masked}) + collections.Counter(
      k[0] for k in masked.elements())


def test_seeded_masks_repeat_differ_by_epoch_and_ignore_pipelines(dynamic_records):
  one = lambda: bert_data.make_dataset(dynamic_records, 1, seed=5, training=True)  # noqa: E731
  a, b = _masked(one()), _masked(one())
  assert a == b and sum(a.values()) > 20
  n = sum(a.values())  # one epoch of batches of 1
  ds = bert_data.make_dataset(dynamic_records, 1, seed=5, training=True, repeat=True)
  first, second = _masked(ds.take(n)), _masked(ds.skip(n).take(n))  # two epochs
  assert first == a and _instances(second) == _instances(first)
  assert sum((first & second).values()) < sum(first.values()) // 2
  # The masks depend on the record and the epoch, not on who reads it.
  whole = _masked(bert_data.make_dataset(dynamic_records, 2, seed=5))
  parts = collections.Counter()
  for i in range(2):
    ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=i)
    parts += _masked(bert_data.make_dataset(dynamic_records, 1, seed=5, input_context=ctx))
  assert parts == whole
  other = _masked(bert_data.make_dataset(dynamic_records, 1, seed=6))
  assert sum((other & a).values()) < sum(a.values()) // 2


def test_repeat_gives_new_masks_each_pass(dynamic_records):
  n = sum(f["records"] for f in __import__("json").load(
      open(dynamic_records + ".meta.json"))["files"])
  ds = bert_data.make_dataset(dynamic_records, 1, seed=2, repeat=True, training=True)
  seen = collections.defaultdict(list)
  for x, y, w in ds.take(3 * n):
    ids, pos, lab = (x["input_ids"][0].numpy(), x["masked_lm_positions"][0].numpy(),
                     y["masked_lm"][0].numpy())
    m = int(w["masked_lm"][0].numpy().sum())
    orig = ids.copy()
    orig[pos[:m]] = lab[:m]
    seen[tuple(orig.tolist())].append(tuple(pos[:m].tolist()))
  assert all(len(v) % 3 == 0 for v in seen.values())  # duplicate instances: 6, 9, ...
  assert sum(len(set(v)) > 1 for v in seen.values()) > len(seen) // 2


def test_dynamic_records_are_the_static_instances_unmasked(tmp_path, corpus):
  """Single-piece mode on a clean corpus: the same instances as static mode
  (same seed), only not masked; bytes the same for 1 and 3 workers."""
  dyn = _create(tmp_path / "d.tfrecord", corpus)
  dyn3 = _create(tmp_path / "d3.tfrecord", corpus, num_workers=3)
  assert tfrecord.file_sha256(dyn) == tfrecord.file_sha256(dyn3)
  static = _create(tmp_path / "s.tfrecord", corpus, masking="static")
  unmasked = []
  for rec in tfrecord.read_records(static):
    ex = example_decoder.decode_example(rec)
    ids = ex["input_ids"]
    for q, l, wt in zip(ex["masked_lm_positions"], ex["masked_lm_ids"], ex["masked_lm_weights"]):
      if wt:
        ids[q] = l
    unmasked.append((tuple(ids), tuple(ex["segment_ids"]), ex["next_sentence_labels"][0]))
  dynamic = [(tuple(e["input_ids"]), tuple(e["segment_ids"]), e["next_sentence_labels"][0])
             for e in map(example_decoder.decode_example, tfrecord.read_records(dyn))]
  assert sorted(unmasked) == sorted(dynamic) and len(dynamic) > 20
  ex = example_decoder.decode_example(next(iter(tfrecord.read_records(dyn))))
  assert "masked_lm_positions" not in ex and "word_starts" not in ex


def test_whole_word_records_store_word_starts(tmp_path, corpus):
  out = _create(tmp_path / "w.tfrecord", corpus, do_whole_word_mask=True, max_ngram_size=2)
  tok = units.load_tokenizer(BertConfig(input_files=(), output_files=("x",), vocab_file=VOCAB))
  p = units.masking_params(BertConfig(input_files=(), output_files=("x",), vocab_file=VOCAB,
                                      do_whole_word_mask=True), tok)
  for rec in tfrecord.read_records(out):
    ex = example_decoder.decode_example(rec)
    n = sum(ex["input_mask"])
    want = whole_word.word_starts(np.array([ex["input_ids"]]), np.array([n]), p)[0]
    assert ex["word_starts"] == want.tolist()
  x, y, w = next(iter(bert_data.make_dataset(out, 8, seed=0, feature_names="keras_hub")))
  assert x["mask_positions"].shape == (8, 10) and float(w.numpy().sum()) > 8


@pytest.mark.parametrize("kwargs,text", [
    (dict(max_predictions_per_seq=65), "max_predictions_per_seq=65.*64"),
    (dict(max_predictions_per_seq=0), "max_predictions_per_seq=0"),
    (dict(masked_lm_prob=1.5), "masked_lm_prob=1.5"),
    (dict(max_seq_length=128), "max_seq_length=64"),
])
def test_bad_overrides(dynamic_records, kwargs, text):
  with pytest.raises(ValueError, match=text):
    bert_data.make_dataset(dynamic_records, 4, **kwargs)


def test_overrides_change_the_rule(dynamic_records):
  x, y, w = next(iter(bert_data.make_dataset(dynamic_records, 16, training=False,
                                             masked_lm_prob=0.5, max_predictions_per_seq=40)))
  n = x["input_mask"].numpy().sum(axis=1)
  want = np.minimum(40, np.maximum(1, np.round(n * 0.5)))
  np.testing.assert_array_equal(w["masked_lm"].numpy().sum(axis=1), want)
  assert x["masked_lm_positions"].shape == (16, 40)


def test_global_keras_seed_does_not_break_the_pipeline(dynamic_records):
  """keras.utils.set_random_seed sets TF's global seed (keras-hub users do)."""
  import keras
  keras.utils.set_random_seed(0)
  try:
    a = _masked(bert_data.make_dataset(dynamic_records, 1, seed=5))
    assert a == _masked(bert_data.make_dataset(dynamic_records, 1, seed=5))
  finally:
    tf.random.set_seed(None)


def test_evaluation_keeps_its_masks(dynamic_records):
  ds = bert_data.make_dataset(dynamic_records, 4, training=False)
  first = _masked(ds)
  assert _masked(ds) == first == _masked(bert_data.make_dataset(dynamic_records, 4,
                                                                training=False))
  assert _masked(bert_data.make_dataset(dynamic_records, 4, training=False, seed=1)) != first
