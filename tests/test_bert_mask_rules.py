"""Each masking rule (bert_data/masks/): its forms agree and un-mask to the original tokens.

Per rule, on the same records and keys: the numpy form (`masking.dynamic_mask`,
the TF-free readers) and the TensorFlow form (`dynamic_masking.mask_batch`,
make_dataset) give the same ids, positions, labels and weights bit for bit;
the Python form (`masking.mask_tokens`, static records) and both
counter-based forms mask only candidates, within the budget, words whole
(word rules), and putting the labels back restores the input.
"""

import random

import numpy as np
import pytest
import tensorflow as tf

from bert_data import dynamic_masking as dm
from bert_data import masking
from bert_data.masks import draws, ngram, registry, single_piece, whole_word
from bert_data.config import BertConfig
from conftest import masking_rows
from textrecords.errors import UserError

CLS, SEP, MASK = 101, 102, 103
POOL = tuple(range(3000))
SUB = bytes([0] * 1500 + [1] * 500 + [0] * 1000)  # ids 1500..1999 are "##" pieces
SEQ, MAXP, PROB = 48, 8, 0.2

# (rule, --do_whole_word_mask, --max_ngram_size)
CASES = [(single_piece, False, 1), (whole_word, True, 1), (ngram, True, 3)]


def _rows(n_rows, seed):
  """Rows of 40% "##" pieces: ids, lengths, num_a, input_mask."""
  return masking_rows(n_rows, SEQ, seed, subword_share=0.4, cls=CLS, sep=SEP)


def _params(wwm, n):
  return masking.MaskingParams(PROB, MAXP, wwm, CLS, SEP, MASK, POOL, SUB, n)


def _check_masks(original, out, positions, labels, p):
  """Candidates only, within the budget, words whole; the labels un-mask."""
  n = int(np.count_nonzero(original))
  assert len(positions) <= masking.num_to_predict(n, p)
  assert list(positions) == sorted(set(positions))
  restored = np.array(out)
  restored[list(positions)] = labels
  assert restored.tolist() == list(original)
  assert all(original[q] not in (CLS, SEP) and q < n for q in positions)
  changed = {i for i in range(len(original)) if out[i] != original[i]}
  assert changed <= set(positions)
  if p.do_whole_word_mask:
    chosen = set(int(q) for q in positions)
    for g in whole_word.candidate_groups(list(original[:n]), p):
      assert len(chosen & set(g)) in (0, len(g))


@pytest.mark.parametrize("rule,wwm,n", CASES, ids=[c[0].NAME for c in CASES])
def test_registry_finds_the_rule(rule, wwm, n):
  assert registry.rule_for(wwm, n) is rule is _params(wwm, n).rule
  assert registry.RULES[rule.NAME] is rule
  meta = registry.meta_fields(BertConfig(input_files=("x",), output_files=("y",),
                                         vocab_file="v", do_whole_word_mask=wwm,
                                         max_ngram_size=n))
  assert registry.rule_of_meta(meta) is rule
  masker = dm.DynamicMasker(SEQ, MAXP, PROB, wwm, n, CLS, SEP, MASK, POOL)
  assert masker.rule is rule and masker.rule.WORDS == wwm


@pytest.mark.parametrize("rule,wwm,n", CASES, ids=[c[0].NAME for c in CASES])
def test_numpy_and_tensorflow_forms_agree_and_unmask(rule, wwm, n):
  ids, lengths, _, mask = _rows(200, seed=n + 7 * wwm)
  p = _params(wwm, n)
  starts = whole_word.word_starts(ids, lengths, p) if rule.WORDS else None
  keys = draws.epoch_keys_np(np.arange(200) * 7919, 3)
  masker = dm.DynamicMasker(SEQ, MAXP, PROB, wwm, n, CLS, SEP, MASK, POOL)
  want = masking.dynamic_mask(ids, mask, keys, masker, starts)
  got = dm.mask_batch(tf, tf.constant(ids), tf.constant(mask), tf.constant(keys), masker,
                      None if starts is None else tf.constant(starts))
  for w, g in zip(want, got):
    np.testing.assert_array_equal(g.numpy(), w)
  out, positions, labels, weights = want
  assert weights.sum() > 100
  for i in range(len(ids)):
    m = int(weights[i].sum())
    _check_masks(ids[i], out[i], positions[i, :m], labels[i, :m], p)


@pytest.mark.parametrize("rule,wwm,n", CASES, ids=[c[0].NAME for c in CASES])
def test_python_form_unmasks(rule, wwm, n):
  ids, lengths, num_a, _ = _rows(100, seed=11 + n)
  p = _params(wwm, n)
  taken = 0
  for i in range(len(ids)):
    tokens = ids[i, :lengths[i]].tolist()
    for exact in (True, False):
      out, positions, labels = masking.mask_tokens(tokens, random.Random(i), p, exact,
                                                   num_a=int(num_a[i]) if exact else 0)
      _check_masks(ids[i], out + [0] * (SEQ - len(out)), positions, labels, p)
      taken += len(positions)
  assert taken > 300
  assert rule.python_choice(tokens, random.Random(0), p, 3, True, 0)


def test_static_single_piece_matrix_unmasks():
  ids, lengths, num_a, _ = _rows(100, seed=5)
  p = _params(False, 1)
  out, _, positions, labels, counts = single_piece.mask_matrix(
      ids.copy(), lengths, num_a, np.arange(100, dtype=np.uint64), p)
  for i in range(len(ids)):
    _check_masks(ids[i], out[i], positions[i, :counts[i]], labels[i, :counts[i]], p)


def test_rules_check_their_flags_and_the_reference_walk_takes_its_rule():
  base = dict(input_files=("x",), output_files=("y",), vocab_file="v")
  with pytest.raises(UserError, match="add --do_whole_word_mask"):
    BertConfig(**base, max_ngram_size=2).validate()
  with pytest.raises(UserError, match="the reference has no n-gram masking"):
    BertConfig(**base, max_ngram_size=2, do_whole_word_mask=True,
               reference_compatible=True).validate()
  assert [r.REFERENCE_WALK for r in (single_piece, whole_word, ngram)] == [0, 1, None]
