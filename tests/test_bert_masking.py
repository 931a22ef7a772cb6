"""Masking and instance invariants over many seeds (pure Python, no TF)."""

import random

import numpy as np
from hypothesis import given, settings, strategies as st

from bert_data import instances, masking
from bert_data.masks import draws, whole_word
from bert_data.documents import CorpusBuilder, encode_lines

CLS, SEP, MASK = 1, 2, 3
POOL = tuple(range(4, 60))
SUBWORD = bytes([1 if 40 <= i < 60 else 0 for i in range(60)])


def _params(prob=0.15, max_pred=20, wwm=False):
  return masking.MaskingParams(prob, max_pred, wwm, CLS, SEP, MASK, POOL, SUBWORD)


def _tokens(rng, n_a, n_b):
  a = [rng.randrange(4, 60) for _ in range(n_a)]
  b = [rng.randrange(4, 60) for _ in range(n_b)]
  return [CLS] + a + [SEP] + b + [SEP]


@given(seed=st.integers(0, 2**32), n_a=st.integers(1, 60), n_b=st.integers(1, 60),
       prob=st.floats(0, 1), max_pred=st.integers(0, 30), wwm=st.booleans())
@settings(max_examples=300, deadline=None)
def test_unmasking_restores_input(seed, n_a, n_b, prob, max_pred, wwm):
  rng = random.Random(seed)
  tokens = _tokens(rng, n_a, n_b)
  p = _params(prob, max_pred, wwm)
  out, positions, labels = masking.mask_tokens(tokens, rng, p)
  assert positions == sorted(set(positions))
  assert len(positions) <= max(0, min(max_pred, max(1, round(len(tokens) * prob))))
  restored = list(out)
  for pos, lab in zip(positions, labels):
    assert tokens[pos] not in (CLS, SEP)
    assert out[pos] == MASK or out[pos] == tokens[pos] or out[pos] in POOL
    restored[pos] = lab
  assert restored == tokens
  changed = [i for i in range(len(tokens)) if out[i] != tokens[i]]
  assert set(changed) <= set(positions)
  if wwm:  # a masked word is masked whole: no masked piece next to an unmasked piece of it
    groups = whole_word.candidate_groups(tokens, p)
    chosen = set(positions)
    for g in groups:
      assert all(i in chosen for i in g) or not any(i in chosen for i in g)


def test_shuffle_equals_random_shuffle():
  for seed in range(200):
    n = seed % 150
    a, b = list(range(n)), list(range(n))
    ra, rb = random.Random(seed), random.Random(seed)
    ra.shuffle(a)
    draws.shuffle_in_place(b, rb)
    assert a == b and ra.random() == rb.random()


def test_mask_rates_are_80_10_10():
  rng = random.Random(0)
  p = _params(0.15, 1000)
  kinds = {"mask": 0, "same": 0, "random": 0}
  for _ in range(2000):
    tokens = _tokens(rng, 60, 60)
    out, positions, _ = masking.mask_tokens(tokens, rng, p)
    for i in positions:
      kinds["mask" if out[i] == MASK else "same" if out[i] == tokens[i] else "random"] += 1
  total = sum(kinds.values())
  # "random" can pick the same id by chance (1/56), counted as "same".
  assert abs(kinds["mask"] / total - 0.8) < 0.01
  assert abs(kinds["same"] / total - 0.1 - 0.1 / 56) < 0.01
  assert abs(kinds["random"] / total - 0.1 * 55 / 56) < 0.01


def _corpus(docs):
  b = CorpusBuilder()
  lines = []
  for doc in docs:
    lines += [" ".join(str(t) for t in seg) for seg in doc] + [""]
  b.add(*encode_lines(lines, lambda ls: [[int(w) for w in l.split()] for l in ls]))
  return b.build()


@given(seed=st.integers(0, 2**32), max_len=st.integers(5, 64))
@settings(max_examples=100, deadline=None)
def test_instances_fit_and_segments_come_from_corpus(seed, max_len):
  rng = random.Random(seed)
  docs = [[[rng.randrange(4, 60) for _ in range(rng.randint(1, 12))]
           for _ in range(rng.randint(1, 6))] for _ in range(5)]
  corpus = _corpus(docs)
  assert corpus.num_docs == 5 and corpus.document(2) == docs[2]
  p = _params()
  for d in range(corpus.num_docs):
    for inst in instances.instances_from_document(d, corpus.document(d), corpus, rng,
                                                  max_len - 3, 0.1, CLS, SEP, p):
      assert len(inst.tokens) <= max_len
      assert inst.tokens[0] == CLS and inst.tokens[inst.num_a - 1] == SEP
      assert inst.tokens[-1] == SEP
      assert inst.num_a >= 3 and len(inst.tokens) - inst.num_a >= 2


def test_corpus_reorder_and_tokens_from():
  corpus = _corpus([[[5, 6], [7]], [[8, 9, 10], [11], [12, 13]]])
  assert corpus.tokens_from(1, 0, 4) == [8, 9, 10, 11]
  assert corpus.tokens_from(1, 1, 100) == [11, 12, 13]
  assert corpus.tokens_from(1, 2, -3) == [12, 13]
  swapped = corpus.reordered([1, 0])
  assert swapped.document(0) == corpus.document(1)
  assert swapped.document(1) == corpus.document(0)


def test_documents_follow_reference_rules():
  lines = ["a b", "", "", "c", "   ", "d", "?", "e"]
  # "?" yields no token here: it is not a segment and does not break the document.
  enc = lambda ls: [[ord(ch) for ch in l.split()[0]] if l != "?" else [] for l in ls]
  b = CorpusBuilder()
  b.add(*encode_lines([l.strip() for l in lines], enc))
  c = b.build()
  assert c.num_docs == 3
  assert [len(c.document(d)) for d in range(3)] == [1, 1, 2]


@given(seed=st.integers(0, 2**32), n_a=st.integers(1, 60), n_b=st.integers(1, 60),
       exact=st.booleans())
@settings(max_examples=100, deadline=None)
def test_candidate_fast_path_draws_identically(seed, n_a, n_b, exact):
  tokens = _tokens(random.Random(seed), n_a, n_b)
  slow = masking.mask_tokens(tokens, random.Random(seed), _params(), exact)
  fast = masking.mask_tokens(tokens, random.Random(seed), _params(), exact, num_a=n_a + 2)
  assert slow == fast


def test_sampled_draws_choose_positions_uniformly():
  """Default mode's rng.sample picks each candidate equally often, as the shuffle does."""
  counts = [0] * 30
  p = _params(0.15, 3)
  rng = random.Random(1)
  tokens = [CLS] + list(range(4, 18)) + [SEP] + list(range(4, 18)) + [SEP]
  for _ in range(6000):
    _, positions, _ = masking.mask_tokens(tokens, rng, p, exact_draws=False)
    assert len(positions) == 3
    for i in positions:
      counts[i] += 1
  used = [c for i, c in enumerate(counts) if i not in (0, 15, 30) and i < 30]
  assert counts[0] == counts[15] == 0
  assert max(used) / min(used) < 1.25


def _batch(seed, b=40):
  rng = random.Random(seed)
  toks, num_as = [], []
  for _ in range(b):
    n_a, n_b = rng.randint(1, 60), rng.randint(1, 60)
    toks.append(_tokens(rng, n_a, n_b))
    num_as.append(n_a + 2)
  return toks, num_as


@given(seed=st.integers(0, 2**32), prob=st.floats(0, 1), max_pred=st.integers(0, 25))
@settings(max_examples=60, deadline=None)
def test_mask_batch_invariants(seed, prob, max_pred):
  import numpy as np
  toks, num_as = _batch(seed)
  p = _params(prob, max_pred)
  keys = np.random.default_rng(seed).integers(0, 2**63, len(toks)).astype(np.uint64)
  ids, lengths, positions, labels, counts = masking.mask_batch(toks, num_as, keys, p, 128)
  # An instance's draws depend on its key only, not on the rest of the batch.
  alone = masking.mask_batch(toks[3:4], num_as[3:4], keys[3:4], p, 128)
  assert (alone[0][0] == ids[3]).all() and (alone[2][0] == positions[3]).all()
  for i, t in enumerate(toks):
    k = int(counts[i])
    assert k == min(max_pred, max(1, round(len(t) * prob)), len(t) - 3)
    pos = positions[i, :k].tolist()
    assert pos == sorted(set(pos)) and all(positions[i, k:] == 0) and all(labels[i, k:] == 0)
    assert all(q not in (0, num_as[i] - 1, len(t) - 1) for q in pos)
    restored = ids[i, :len(t)].tolist()
    for q, lab in zip(pos, labels[i, :k].tolist()):
      assert t[q] == lab
      assert restored[q] in (MASK, lab) or restored[q] in POOL
      restored[q] = lab
    assert restored == t and all(ids[i, len(t):] == 0)


def test_mask_batch_rates():
  import numpy as np
  kinds = {"mask": 0, "same": 0, "random": 0}
  for seed in range(60):
    toks, num_as = _batch(seed)
    keys = np.arange(len(toks), dtype=np.uint64) + np.uint64(seed * 1000)
    ids, _, positions, labels, counts = masking.mask_batch(toks, num_as, keys, _params(), 128)
    for i in range(len(toks)):
      for q, lab in zip(positions[i, :counts[i]], labels[i, :counts[i]]):
        got = ids[i, q]
        kinds["mask" if got == MASK else "same" if got == lab else "random"] += 1
  total = sum(kinds.values())
  assert abs(kinds["mask"] / total - 0.8) < 0.015
  assert abs(kinds["random"] / total - 0.1 * 55 / 56) < 0.015


def test_encode_arrays_equals_encode():
  import numpy as np
  from bert_data.instances import Instance
  from bert_data.records import BertRecordEncoder
  toks, num_as = _batch(3)
  toks = [[t * 500 % 30000 + (t > 3) for t in ts] for ts in toks]  # multi-byte varints
  p = _params()
  ids, lengths, positions, labels, counts = masking.mask_batch(
      toks, num_as, np.arange(len(toks), dtype=np.uint64), p, 128)
  enc = BertRecordEncoder(128, 20, 30522)
  rnd = [i % 2 == 0 for i in range(len(toks))]
  got = enc.encode_arrays(ids, lengths, num_as, rnd, positions, labels, counts)
  for i in range(len(toks)):
    k, n = int(counts[i]), int(lengths[i])
    inst = Instance(ids[i, :n].tolist(), num_as[i], rnd[i], positions[i, :k].tolist(),
                    labels[i, :k].tolist())
    assert got[i] == enc.encode(inst)


def test_mask_batch_positions_uniform():
  import numpy as np
  tokens = [CLS] + list(range(4, 18)) + [SEP] + list(range(4, 18)) + [SEP]
  keys = np.arange(6000, dtype=np.uint64)
  _, _, positions, _, counts = masking.mask_batch([tokens] * 6000, [16] * 6000, keys,
                                                  _params(0.15, 3), 40)
  assert (counts == 3).all()
  hits = np.bincount(positions.ravel(), minlength=31)
  used = [hits[i] for i in range(31) if i not in (0, 15, 30)]
  assert hits[0] == hits[15] == hits[30] == 0
  assert max(used) / min(used) < 1.25


@given(la=st.integers(0, 80), lb=st.integers(0, 80), m=st.integers(1, 100))
@settings(max_examples=300, deadline=None)
def test_truncation_counts_match_the_loop(la, lb, m):
  a, b = list(range(la)), list(range(100, 100 + lb))
  instances.truncate_pair(a, b, m, random.Random(0))
  assert instances.truncation_counts(la, lb, m) == (la - len(a), lb - len(b))
  a2, b2 = list(range(la)), list(range(100, 100 + lb))
  instances.truncate_pair_sampled(a2, b2, m, random.Random(1))
  assert (len(a2), len(b2)) == (len(a), len(b))
  # What is left is a contiguous window of each list.
  assert a2 == list(range(a2[0], a2[0] + len(a2))) if a2 else True
  assert b2 == list(range(b2[0], b2[0] + len(b2))) if b2 else True


def test_sampled_truncation_front_share_is_half():
  rng = random.Random(5)
  fronts = []
  for _ in range(4000):
    a = list(range(40))
    instances.truncate_pair_sampled(a, [], 20, rng)
    fronts.append(a[0])
  mean = sum(fronts) / len(fronts)
  assert abs(mean - 10) < 0.25  # Binomial(20, 1/2) front removals


@given(seed=st.integers(0, 2**32), max_len=st.integers(5, 64), short=st.floats(0, 1))
@settings(max_examples=100, deadline=None)
def test_spans_describe_the_list_instances(seed, max_len, short):
  """The array path (spans + gather) makes the same draws and instances as the list path."""
  import numpy as np
  rng = random.Random(seed)
  docs = [[[rng.randrange(4, 60) for _ in range(rng.randint(1, 12))]
           for _ in range(rng.randint(1, 6))] for _ in range(rng.randint(1, 5))]
  corpus = _corpus(docs)
  for d in range(corpus.num_docs):
    r1, r2 = random.Random(seed + d), random.Random(seed + d)
    lists = instances.instances_from_document(d, corpus.document(d), corpus,
                                              instances.FastDraws(r1), max_len - 3, short,
                                              CLS, SEP, None, exact_draws=False)
    spans = instances.spans_from_document(d, corpus.segment_bounds(d), corpus,
                                          instances.FastDraws(r2), max_len - 3, short)
    assert r1.random() == r2.random()  # same number of draws
    assert len(lists) == len(spans)
    if not spans:
      continue
    ids, lengths, num_as = masking.spans_to_ids(
        corpus.tokens, np.asarray([s[:4] for s in spans]), CLS, SEP, max_len)
    for inst, span, row, n, na in zip(lists, spans, ids, lengths, num_as):
      assert row[:n].tolist() == inst.tokens and na == inst.num_a
      assert not row[n:].any() and span[4] == inst.is_random_next


def test_ngram_masking_takes_runs_of_whole_words():
  """--max_ngram_size=3 (Python rule): whole words, within the budget, and
  masked words come in runs far more often than with single words."""
  rng = np.random.default_rng(4)
  body = [int(t) for t in rng.integers(1000, 1500, 60)]
  tokens = [101] + body[:30] + [102] + body[30:] + [102]
  sub = bytes(3000)
  adjacent = {}
  for n in (1, 3):
    p = masking.MaskingParams(0.15, 9, True, 101, 102, 103, tuple(range(3000)), sub, n)
    total = 0
    for r in range(1500):
      out, pos, lab = masking.mask_tokens(list(tokens), random.Random(r), p)
      assert len(pos) == 9 and all(tokens[q] == l for q, l in zip(pos, lab))
      total += sum(1 for a, b in zip(pos, pos[1:]) if b == a + 1)
    adjacent[n] = total / 1500
  # Random 9 of 62 positions: ~1.2 adjacent pairs; 1/n-weighted n-grams: ~3.
  assert adjacent[1] < 1.6 and adjacent[3] > 2 * adjacent[1], adjacent


def _encoder_peak_bytes(seq: int) -> tuple:
  """(tracemalloc peak, record) of building both encoders at `seq` and encoding."""
  import tracemalloc
  from bert_data.instances import Instance
  from bert_data.records import BertRecordEncoder, DynamicRecordEncoder
  tracemalloc.start()
  try:
    enc = BertRecordEncoder(seq, 20, 100)
    rec = enc.encode(Instance([1] * (seq // 2), 3, True, [1], [9]))
    DynamicRecordEncoder(seq, whole_word=True)
    return tracemalloc.get_traced_memory()[1], rec
  finally:
    tracemalloc.stop()


def test_encoder_memory_grows_linearly_in_seq_length():
  # issue 21 item 3: a table per length (6.5 GB at --max_seq_length=65536).
  from textrecords.wire import example_decoder as codec
  small, _ = _encoder_peak_bytes(2048)
  large, rec = _encoder_peak_bytes(8192)
  assert large < 6 * small, (small, large)  # 4x the length: ~4x, not ~16x
  ex = codec.decode_example(rec)
  assert ex["input_mask"] == [1] * 4096 + [0] * 4096
  assert ex["segment_ids"] == [0] * 3 + [1] * 4093 + [0] * 4096
  assert ex["masked_lm_weights"] == [1.0] + [0.0] * 19
