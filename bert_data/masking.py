"""Masked-LM masking of instances: the create-time masking and the numpy dynamic masking.

Which positions are masked is the rule's (`bert_data.masks`, found through
`masks.registry`); here are the settings (`MaskingParams`), the budget and
the 80/10/10 replacement around it:
  * `mask_tokens`: one instance, the reference's draws from the RNG the
    caller passes (with the reference's single `random.Random` the output
    is the reference's);
  * `mask_batch`: single pieces, many instances at once (default mode);
  * `dynamic_mask`: records written with `--masking=dynamic`, in numpy (the
    TF-free readers), as `dynamic_masking.mask_batch` does in TensorFlow.
"""

import dataclasses
import functools
import itertools
from typing import List, Optional, Sequence, Tuple

import numpy as np

from bert_data.masks import draws
from bert_data.masks import registry
from bert_data.masks import single_piece
from textrecords import seeding


_PLANS = {}


@dataclasses.dataclass(frozen=True)
class MaskingParams:
  """What masking needs to know about the vocab and flags.

  Attributes:
    masked_lm_prob, max_predictions_per_seq, do_whole_word_mask: the flags.
    cls_id, sep_id, mask_id: ids of [CLS], [SEP], [MASK].
    random_ids: ids of the vocab's tokens in file order (first occurrence of
      each), the pool for the 10% random replacements.
    is_subword: `is_subword[id]` true for tokens starting with "##".
    max_ngram_size: with whole-word masking, mask n-grams of 1..N words
      (`masks.ngram`).
  """
  masked_lm_prob: float
  max_predictions_per_seq: int
  do_whole_word_mask: bool
  cls_id: int
  sep_id: int
  mask_id: int
  random_ids: Tuple[int, ...]
  is_subword: bytes
  max_ngram_size: int = 1

  @functools.cached_property
  def random_ids_array(self) -> np.ndarray:
    """`random_ids` as an int64 array (built once)."""
    return np.asarray(self.random_ids, np.int64)

  @property
  def rule(self):
    """The masking rule's module (`masks.registry`)."""
    return registry.rule_for(self.do_whole_word_mask, self.max_ngram_size)


def num_to_predict(n_tokens: int, p: MaskingParams) -> int:
  return min(p.max_predictions_per_seq, max(1, int(round(n_tokens * p.masked_lm_prob))))


def mask_tokens(tokens: List[int], rng, p: MaskingParams, exact_draws: bool = True,
                num_a: int = 0):
  """Chooses masked positions and replacements.

  Args:
    tokens: [CLS] A [SEP] B [SEP] as ids; not modified.
    rng: a `random.Random`.
    exact_draws: make the reference's RNG calls (a full shuffle of the
      candidates). False (default mode, single-piece masking) draws only the
      positions used with `rng.sample`: the same distribution, since the
      first k of a uniform shuffle are a uniform k-sample in random order.
    num_a: if > 0, the caller guarantees [CLS]/[SEP] occur only at 0,
      num_a - 1 and the end, so candidates are computed without a scan.
  Returns:
    (output_tokens, positions, labels): positions sorted ascending, labels
    the original ids there; output has [MASK] (80%), the original (10%) or a
    random vocab id (10%) at each position.

  Example (positions are a subset of the non-special positions, labels are
  the original tokens there):
    >>> import random
    >>> p = MaskingParams(0.5, 2, False, 1, 2, 3, (4, 5), bytes(10))
    >>> out, pos, lab = mask_tokens([1, 6, 7, 2, 8, 2], random.Random(0), p)
    >>> len(pos), all(lab[k] == [1, 6, 7, 2, 8, 2][i] for k, i in enumerate(pos))
    (2, True)
  """
  limit = num_to_predict(len(tokens), p)
  chosen = p.rule.python_choice(tokens, rng, p, limit, exact_draws, num_a)
  output = list(tokens)
  random_ = rng.random
  mask_id, pool = p.mask_id, p.random_ids
  for i in chosen:  # draws in walk order, as the reference makes them
    if random_() < 0.8:
      output[i] = mask_id
    elif random_() < 0.5:
      pass
    else:
      output[i] = pool[rng.randint(0, len(pool) - 1)]
  positions = sorted(chosen)
  return output, positions, [tokens[i] for i in positions]


def spans_to_ids(tokens: np.ndarray, spans: np.ndarray, cls_id: int, sep_id: int,
                 seq_len: int):
  """[CLS] A [SEP] B [SEP] id rows from (a0, a1, b0, b1) ranges of `tokens`.

  Returns (ids (B, seq_len) int64 zero-padded, lengths, num_as).

  >>> ids, n, na = spans_to_ids(np.arange(10, 20), np.array([[0, 2, 5, 6]]), 1, 2, 8)
  >>> ids.tolist(), n.tolist(), na.tolist()
  ([[1, 10, 11, 2, 15, 2, 0, 0]], [6], [4])
  """
  a0, a1, b0, b1 = (spans[:, k:k + 1].astype(np.int64) for k in range(4))
  la, lb = a1 - a0, b1 - b0
  col = np.arange(seq_len)[None, :]
  ids = np.zeros((len(spans), seq_len), np.int64)
  in_a = (col >= 1) & (col <= la)
  ids[in_a] = tokens[(a0 + col - 1)[in_a]]
  b_first = la + 2
  in_b = (col >= b_first) & (col < b_first + lb)
  ids[in_b] = tokens[(b0 + col - b_first)[in_b]]
  ids[:, 0] = cls_id
  ids[col == la + 1] = sep_id
  ids[col == la + lb + 2] = sep_id
  return ids, (la + lb + 3)[:, 0], (la + 2)[:, 0]


def mask_batch(token_lists: Sequence[List[int]], num_as: Sequence[int], keys,
               p: MaskingParams, seq_len: int):
  """Vectorized single-piece masking of many instances (default mode).

  The same distribution as `mask_tokens` with `exact_draws=False`: each
  instance masks num_to_predict(len) positions chosen uniformly among its
  non-special positions, each replaced by [MASK] (80%), itself (10%) or a
  random vocab id (10%); but all draws come from one numpy Generator in a
  few array operations. Assumes [CLS]/[SEP] only at 0, num_a - 1 and the end.
  Instance i's draws depend only on keys[i] (counter-based, see
  `textrecords.seeding.uniform_grid`), never on the rest of the batch.

  Args:
    token_lists: [CLS] A [SEP] B [SEP] ids per instance.
    num_as: segment-0 length per instance.
    keys: one uint64 key per instance (its order key).
    seq_len: the padded length (max_seq_length).
  Returns:
    (ids, lengths, positions, labels, counts): ids (B, seq_len) int64 with the
    replacements applied, zero-padded; lengths (B,); positions and labels
    (B, max_predictions) zero-padded, positions ascending; counts (B,).

  Example:
    >>> import numpy as np
    >>> p = MaskingParams(0.5, 3, False, 1, 2, 3, (4, 5), bytes(10))
    >>> ids, n, pos, lab, k = mask_batch([[1, 6, 7, 2, 8, 2]], [4], [12345], p, 8)
    >>> int(k[0]), all(0 < q < 5 and q != 3 for q in pos[0][:k[0]])
    (3, True)
  """
  b = len(token_lists)
  lengths = np.fromiter((len(t) for t in token_lists), np.int64, b)
  ids = np.zeros((b, seq_len), np.int64)
  flat = np.fromiter(itertools.chain.from_iterable(token_lists), np.int64, int(lengths.sum()))
  ids[np.arange(seq_len)[None, :] < lengths[:, None]] = flat
  return single_piece.mask_matrix(ids, lengths, np.asarray(num_as, np.int64), keys, p)


def dynamic_mask(ids: np.ndarray, input_mask: np.ndarray, keys: np.ndarray, masker,
                 starts: Optional[np.ndarray] = None):
  """`dynamic_masking.mask_batch` in numpy: the same masks, bit for bit.

  The TF-free readers mask records written with `--masking=dynamic` here.
  Same rule, same counter-based numbers (`seeding.uniform_grid` streams 0
  order, 1 action, 2 keep, 3 random id, 4 n-gram length), same tie-breaking.

  Args:
    ids, input_mask: (B, L) int arrays of the records.
    keys: (B,) uint64 epoch keys (`masks.draws.epoch_keys_np`).
    masker: a `dynamic_masking.DynamicMasker` (its rule, budget and ids).
    starts: (B, L) word-start flags (whole-word records), else None.
  Returns:
    (ids with replacements (B, L) int64, positions, labels (B, maxp) int64,
    weights (B, maxp) float32); positions ascending, zero-padded.

  Example (one row, 4 tokens, budget 1):
    >>> from bert_data.dynamic_masking import DynamicMasker
    >>> r = DynamicMasker(6, 1, 0.2, False, 1, 1, 2, 3, (9,))
    >>> out, pos, lab, w = dynamic_mask(np.array([[1, 7, 8, 2, 0, 0]]),
    ...                                 np.array([[1, 1, 1, 1, 0, 0]]), np.array([5], np.uint64), r)
    >>> int(pos[0, 0]) in (1, 2), int(lab[0, 0]) == [1, 7, 8, 2][pos[0, 0]], w.tolist()
    (True, True, [[1.0]])
  """
  ids = np.array(ids, np.int64)
  b, seq = ids.shape
  keys = np.asarray(keys, np.uint64)
  present = np.asarray(input_mask).astype(bool)
  cand = present & (ids != masker.cls_id) & (ids != masker.sep_id)
  counts = draws.budget(present.sum(axis=1), masker.masked_lm_prob, masker.max_predictions_per_seq)
  rule = masker.rule if starts is not None else single_piece
  order = None  # single pieces: the order keys of `single_piece.smallest_keys`
  if rule.WORDS:
    order = seeding.uniform_grid(keys, draws.ORDER, seq)
    starts = np.asarray(starts).astype(bool) & cand
  positions, used = rule.numpy_choice(cand, starts, counts, order, keys, masker)
  labels = np.where(used, ids[np.arange(b)[:, None], positions], 0)
  draws.replace(ids, positions, labels, used, keys, masker.mask_id,
                np.asarray(masker.random_ids, np.int64))
  return ids, positions, labels, used.astype(np.float32)
