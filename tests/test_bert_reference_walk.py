"""The compiled reference walk: CPython's RNG replicated, same instances, same bytes.

`bert_data.reference_rng` must draw exactly what `random.Random` draws (every
fact checked against the running CPython), and `reference_walk.Walk` must
give exactly `instances.instances_from_document`'s instances and leave the
RNG where the Python walk leaves it, on generated corpora and flag sets.
"""

import random

import numpy as np
import pytest

pytest.importorskip("numba")

# pylint: disable=wrong-import-position
from bert_data import generator, instances, masking, reference_rng as R, reference_walk
from bert_data.config import BertConfig
from bert_data.documents import Corpus
from conftest import SAMPLE_TEXT, VOCAB
from textrecords.files import tfrecord

SEEDS = [0, 1, 12345, 2**40 + 3, 987654321987654321]


def _advanced(seed, draws):
  r = random.Random(seed)
  for _ in range(draws):
    r.getrandbits(32)
  return r


@pytest.mark.parametrize("seed", SEEDS)
def test_outputs_bits_and_floats_equal_cpython(seed):
  r = random.Random(seed)
  st = R.to_state(r)
  assert st[R.N] == R.N  # a fresh RNG twists before its first output
  for _ in range(1500):  # crosses two twists
    assert R.next32(st) == r.getrandbits(32)
  for k in range(1, 33):
    assert R.getrandbits(st, k) == r.getrandbits(k)
  for _ in range(200):
    assert R.uniform(st) == r.random()
  R.set_state(r, st)
  assert R.next32(st) == r.getrandbits(32)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 64, 65, 127, 128, 129, 30522, 2**31, 2**31 + 5,
                               2**32 - 1])
def test_randbelow_and_randint_equal_cpython(n):
  r = _advanced(n, 700)
  st = R.to_state(r)
  for _ in range(300):
    assert R.randbelow(st, n) == r._randbelow(n)  # pylint: disable=protected-access
  for _ in range(100):
    assert R.randint(st, 2, n + 1) == r.randint(2, n + 1)
    assert R.randint(st, 0, n - 1) == r.randint(0, n - 1)
  assert R.uniform(st) == r.random()


@pytest.mark.parametrize("length", [0, 1, 2, 3, 125, 1000])
def test_shuffle_equals_cpython(length):
  r = _advanced(length, 620)
  st = R.to_state(r)
  for _ in range(3):
    want = list(range(length))
    r.shuffle(want)
    got = np.arange(length)
    R.shuffle(st, got)
    assert got.tolist() == want
  assert R.uniform(st) == r.random()
  r2 = _advanced(length, 620)
  want = list(range(length))
  r2.shuffle(want)
  r3 = _advanced(length, 620)
  assert R.shuffled_range(r3, length).tolist() == want
  assert r3.getstate() == r2.getstate()


VOCAB_SIZE = 60
CLS, SEP, MASK = 1, 2, 3


def _corpus(seed, clean=True):
  """Random documents of random segments; ids 4..59, "##" pieces are ids >= 45."""
  rng = random.Random(seed)
  seg_lens, doc_segs = [], []
  for _ in range(rng.randint(1, 9)):
    n = rng.choice([1, 1, 2, 3, 5, 12, 30])
    doc_segs.append(n)
    seg_lens.extend(rng.choice([1, 2, 3, 7, 15, 40, 90]) for _ in range(n))
  lo = 4 if clean else 1
  tokens = np.asarray([rng.randint(lo, VOCAB_SIZE - 1) for _ in range(sum(seg_lens))], np.int32)
  starts = lambda x: np.concatenate([[0], np.cumsum(x)]).astype(np.int64)
  return Corpus(tokens, starts(seg_lens), starts(doc_segs))


def _params(max_predictions, whole_word, prob):
  is_subword = bytes(1 if i >= 45 else 0 for i in range(VOCAB_SIZE))
  pool = tuple(range(VOCAB_SIZE - 1, -1, -1))  # not the identity, to catch a missed lookup
  return masking.MaskingParams(prob, max_predictions, whole_word, CLS, SEP, MASK, pool,
                               is_subword)


FLAGS = [  # (max_seq_length, max_predictions, whole word, masked_lm_prob, short_seq_prob, dupe)
    (128, 20, False, 0.15, 0.1, 2),
    (32, 5, True, 0.3, 0.5, 3),
    (16, 0, False, 0.15, 1.0, 1),
    (64, 64, True, 1.0, 0.0, 2),
    (8, 0, True, 0.15, 0.1, 2),
    (5, 2, False, 0.5, 0.9, 2),
    (24, 24, False, 1.0, 0.3, 2),
]


@pytest.mark.parametrize("case", range(14))
def test_compiled_walk_equals_python_walk(case):
  seq, maxp, wwm, prob, short, dupe = FLAGS[case % len(FLAGS)]
  corpus = _corpus(case, clean=case % 3 != 2)
  clean = not np.isin(corpus.tokens, [CLS, SEP]).any()
  p = _params(maxp, wwm, prob)
  r1 = random.Random(case * 31 + 7)
  want = []
  for _ in range(dupe):
    for d in range(corpus.num_docs):
      want.extend(instances.instances_from_document(
          d, corpus.document(d), corpus, r1, seq - 3, short, CLS, SEP, p, exact_draws=True,
          clean_corpus=clean))
  r2 = random.Random(case * 31 + 7)
  walk = reference_walk.Walk(corpus, p, seq, short, dupe)
  got = []
  while not walk.done:  # small batches: the walk stops and resumes inside documents
    tokens, lengths, num_as, is_random, positions, labels, counts = walk.batch(r2, 1 + case % 4)
    t = q = 0
    for n, a, rn, k in zip(lengths.tolist(), num_as.tolist(), is_random.tolist(),
                           counts.tolist()):
      got.append(instances.Instance(tokens[t:t + n].tolist(), a, bool(rn),
                                    positions[q:q + k].tolist(), labels[q:q + k].tolist()))
      t, q = t + n, q + k
  assert len(got) == len(want) > 0
  assert got == want
  assert r2.getstate() == r1.getstate()


def _run(tmp_path, name, num_workers, **flags):
  out = str(tmp_path / name / "out.tfrecord")
  cfg = BertConfig(input_files=(SAMPLE_TEXT,), output_files=(out,), vocab_file=VOCAB,
                   reference_compatible=True, num_workers=num_workers, quiet=True, **flags)
  return generator.create(cfg).counts, tfrecord.file_sha256(out)


@pytest.mark.parametrize("flags", [
    dict(do_whole_word_mask=True, dupe_factor=2),
    dict(max_predictions_per_seq=0, max_seq_length=32, dupe_factor=1, short_seq_prob=0.5),
])
def test_pipeline_bytes_same_with_and_without_numba(tmp_path, monkeypatch, flags):
  compiled = _run(tmp_path, "compiled", 2, **flags)
  monkeypatch.setattr(reference_walk, "available", lambda: False)
  python = _run(tmp_path, "python", 1, **flags)
  assert compiled == python
