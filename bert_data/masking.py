"""Masked-LM choice, exactly as the reference draws it (pure Python).

The caller passes the RNG; the sequence of RNG calls is the reference's, so
with the reference's single `random.Random` the output is the reference's.
"""

import dataclasses
import functools
import itertools
from typing import List, Optional, Sequence, Tuple

import numpy as np

from textrecords import seeding


_PLANS = {}


def _plan(n: int):
  """(i, i + 1, bit length of i + 1) for i = n-1 .. 1, cached per n."""
  plan = _PLANS.get(n)
  if plan is None:
    plan = _PLANS[n] = tuple((i, i + 1, (i + 1).bit_length()) for i in range(n - 1, 0, -1))
  return plan


def shuffle_in_place(x: list, rng) -> None:
  """`random.Random.shuffle`, inlined: same calls on `rng`, same result.

  Python 3.11's shuffle draws j = randbelow(i + 1) for i = n-1 .. 1, where
  randbelow(m) takes k = m.bit_length() bits and redraws while >= m. Doing it
  here saves two method calls per element (the shuffle dominates masking).

  >>> import random
  >>> a, b = list(range(50)), list(range(50))
  >>> random.Random(3).shuffle(a); shuffle_in_place(b, random.Random(3)); a == b
  True
  """
  getrandbits = rng.getrandbits
  for i, m, k in _plan(len(x)):
    j = getrandbits(k)
    while j >= m:
      j = getrandbits(k)
    x[i], x[j] = x[j], x[i]


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
      (see `choose_ngrams`).
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


def num_to_predict(n_tokens: int, p: MaskingParams) -> int:
  return min(p.max_predictions_per_seq, max(1, int(round(n_tokens * p.masked_lm_prob))))


def candidate_groups(tokens: Sequence[int], p: MaskingParams) -> list:
  """Positions that may be masked, as groups (whole words with wwm).

  >>> p = MaskingParams(0.15, 20, True, 101, 102, 103, (), bytes([0] * 200 + [1]))
  >>> candidate_groups([101, 7, 200, 102, 9, 102], p)
  [[1, 2], [4]]
  """
  cls_id, sep_id = p.cls_id, p.sep_id
  if not p.do_whole_word_mask:
    return [[i] for i, t in enumerate(tokens) if t != cls_id and t != sep_id]
  groups: List[List[int]] = []
  is_subword = p.is_subword
  for i, t in enumerate(tokens):
    if t == cls_id or t == sep_id:
      continue
    if groups and is_subword[t]:
      groups[-1].append(i)
    else:
      groups.append([i])
  return groups


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
  if p.do_whole_word_mask:
    groups = candidate_groups(tokens, p)
  elif num_a:
    groups = list(range(1, num_a - 1))
    groups.extend(range(num_a, len(tokens) - 1))
  else:
    cls_id, sep_id = p.cls_id, p.sep_id
    groups = [i for i, t in enumerate(tokens) if t != cls_id and t != sep_id]
  limit = num_to_predict(len(tokens), p)
  if p.do_whole_word_mask and p.max_ngram_size > 1:
    pass  # choose_ngrams shuffles the n-gram starts itself
  elif exact_draws or p.do_whole_word_mask:
    shuffle_in_place(groups, rng)
  else:
    groups = rng.sample(groups, min(limit, len(groups)))
  output = list(tokens)
  random_ = rng.random
  mask_id, pool = p.mask_id, p.random_ids
  if p.do_whole_word_mask and p.max_ngram_size > 1:
    chosen = choose_ngrams(groups, limit, p.max_ngram_size, rng)
  elif p.do_whole_word_mask:
    chosen = []
    covered = set()
    for g in groups:
      if len(chosen) >= limit:
        break
      if len(chosen) + len(g) > limit or any(i in covered for i in g):
        continue
      covered.update(g)
      chosen.extend(g)
  else:  # one-position groups: the walk takes the first `limit` of them
    chosen = groups[:limit]
  for i in chosen:  # draws in walk order, as the reference makes them
    if random_() < 0.8:
      output[i] = mask_id
    elif random_() < 0.5:
      pass
    else:
      output[i] = pool[rng.randint(0, len(pool) - 1)]
  positions = sorted(chosen)
  return output, positions, [tokens[i] for i in positions]


def ngram_weights(max_ngram_size: int) -> np.ndarray:
  """Cumulative weights of n-gram lengths 1..N: weight(n) = 1/n (ALBERT's and
  Model Garden's choice, favouring short n-grams).

  >>> ngram_weights(3).round(3).tolist()
  [1.0, 1.5, 1.833]
  """
  return np.cumsum(1.0 / np.arange(1, max_ngram_size + 1))


def choose_ngrams(words: List[List[int]], limit: int, max_ngram_size: int, rng) -> list:
  """N-gram whole-word masking: which positions to mask (in walk order).

  The rule (ALBERT's, which Model Garden's follows in distribution): visit
  the words in random order; at word w draw a length n in 1..min(N, words
  left from w) with weight 1/n; while the n-gram (words w..w+n-1) has more
  positions than the budget left, shorten it; skip it if even one word does
  not fit or it overlaps positions already chosen; else take all its
  positions. Stop once `limit` positions are taken. `dynamic_masking`
  executes the same rule in TensorFlow.

  Args:
    words: candidate groups (`candidate_groups` with whole-word masking).
    limit: number of positions to predict at most.
    rng: a `random.Random`.

  Example (words of 1, 2 and 1 pieces, budget 3: whole words only, never
  more than the budget):
    >>> import random
    >>> sorted(choose_ngrams([[1], [2, 3], [4]], 3, 2, random.Random(0)))
    [1, 4]
  """
  num_words = len(words)
  starts = list(range(num_words))
  shuffle_in_place(starts, rng)
  cum = ngram_weights(max_ngram_size).tolist()
  chosen: List[int] = []
  covered = set()
  for w in starts:
    if len(chosen) >= limit:
      break
    avail = min(max_ngram_size, num_words - w)
    u = rng.random() * cum[avail - 1]
    n = 1
    while n < avail and u >= cum[n - 1]:
      n += 1
    left = limit - len(chosen)
    while n > 0 and sum(len(g) for g in words[w:w + n]) > left:
      n -= 1
    if n == 0:
      continue
    positions = [i for g in words[w:w + n] for i in g]
    if any(i in covered for i in positions):
      continue
    covered.update(positions)
    chosen.extend(positions)
  return chosen


def word_starts(ids: np.ndarray, lengths: np.ndarray, p: MaskingParams) -> np.ndarray:
  """Flags (B, seq_len) uint8: 1 where a whole-word group starts.

  The groups are `candidate_groups`'s: every non-special position belongs to
  the group of the last start at or before it; a "##" piece starts a group
  only when no candidate precedes it. Dynamic records store these so that
  `make_dataset` can mask whole words without the vocab.

  >>> p = MaskingParams(0.15, 20, True, 101, 102, 103, (), bytes([0] * 200 + [1]))
  >>> word_starts(np.array([[101, 200, 7, 200, 102, 200, 102, 0]]), np.array([7]), p).tolist()
  [[0, 1, 1, 0, 0, 0, 0, 0]]
  """
  ids = np.asarray(ids, np.int64)
  col = np.arange(ids.shape[1])[None, :]
  cand = (col < np.asarray(lengths)[:, None]) & (ids != p.cls_id) & (ids != p.sep_id)
  sub = np.frombuffer(p.is_subword, np.uint8)
  is_sub = sub[np.clip(ids, 0, len(sub) - 1)].astype(bool) & (ids < len(sub))
  first = np.argmax(cand, axis=1)
  return (cand & (~is_sub | (col == first[:, None]))).astype(np.uint8)


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
  return mask_matrix(ids, lengths, np.asarray(num_as, np.int64), keys, p)


_NEVER = (1 << 64) - 1  # above every order key


def order_shift(seq_len: int) -> int:
  """Low bits of an order key that hold the column (`order_keys`)."""
  return int(seq_len).bit_length()


def order_keys(keys, seq_len: int) -> np.ndarray:
  """uint64 (B, seq_len) order keys: the k smallest of a row's candidates are masked.

  Column j's key is stream 0's SplitMix64 bits (those of
  `seeding.uniform_grid(keys, 0, seq_len)`) with the low `order_shift` bits
  replaced by j: keys of a row are distinct and never all ones, and order
  as the uniforms do (ties, with probability about 2**-40 a row, go to the
  lower column). `dynamic_masking` computes the same keys in TensorFlow.

  >>> k = order_keys(np.array([7], np.uint64), 5)
  >>> [int(v) & 7 for v in k[0]], len(set(k[0].tolist()))
  ([0, 1, 2, 3, 4], 5)
  """
  shift = np.uint64(order_shift(seq_len))
  bits = seeding.grid_bits(keys, 0, seq_len)
  return ((bits >> shift) << shift) | np.arange(seq_len, dtype=np.uint64)[None, :]


def mask_matrix(ids: np.ndarray, lengths: np.ndarray, num_a: np.ndarray, keys,
                p: MaskingParams, special: Optional[np.ndarray] = None):
  """`mask_batch` on an id matrix (B, seq_len), modified in place.

  special: optional (B, seq_len) bool marking more positions never to mask
  (the [SEP]s between documents of packed instances).
  Returns what `mask_batch` returns.
  """
  b, seq_len = ids.shape
  maxp = p.max_predictions_per_seq
  col = np.arange(seq_len)
  valid = col[None, :] < lengths[:, None]
  counts = np.minimum(maxp, np.maximum(1, np.round(lengths * p.masked_lm_prob).astype(np.int64)))
  candidate = valid & (col[None, :] != 0) & (col[None, :] != num_a[:, None] - 1) & (
      col[None, :] != lengths[:, None] - 1)
  if special is not None:
    candidate &= ~special
  counts = np.minimum(counts, candidate.sum(axis=1))
  width = max(1, maxp)
  keys = np.asarray(keys, np.uint64)
  order = np.where(candidate, order_keys(keys, seq_len), np.uint64(_NEVER))
  if width < seq_len:  # the `width` smallest keys, then in key order
    part = np.argpartition(order, width - 1, axis=1)[:, :width]
    chosen = np.take_along_axis(
        part, np.argsort(np.take_along_axis(order, part, axis=1), axis=1), axis=1)
  else:
    chosen = np.argsort(order, axis=1)[:, :width]
  used = np.arange(width)[None, :] < counts[:, None]
  positions = np.where(used, chosen, seq_len)      # unused slots sort last
  positions.sort(axis=1)
  positions = np.where(used, positions, 0)
  rows = np.arange(b)[:, None]
  labels = np.where(used, ids[rows, positions], 0)
  u = seeding.uniform_grid(keys, 1, width)
  same = seeding.uniform_grid(keys, 2, width) < 0.5
  pool = p.random_ids_array
  random_ids = pool[(seeding.uniform_grid(keys, 3, width) * len(pool)).astype(np.int64)]
  replacement = np.where(u < 0.8, p.mask_id, np.where(same, labels, random_ids))
  pr, pc = np.nonzero(used)
  ids[pr, positions[pr, pc]] = replacement[pr, pc]
  return ids, lengths, positions[:, :maxp], labels[:, :maxp], counts


def dynamic_mask(ids: np.ndarray, input_mask: np.ndarray, keys: np.ndarray, rule,
                 starts: Optional[np.ndarray] = None):
  """`dynamic_masking.mask_batch` in numpy: the same masks, bit for bit.

  The TF-free readers mask records written with `--masking=dynamic` here.
  Same rule, same counter-based numbers (`seeding.uniform_grid` streams 0
  order, 1 action, 2 keep, 3 random id, 4 n-gram length), same tie-breaking.

  Args:
    ids, input_mask: (B, L) int arrays of the records.
    keys: (B,) uint64 epoch keys (`dynamic_masking.epoch_keys_np`).
    rule: a `dynamic_masking.DynamicMasker`.
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
  maxp = rule.max_predictions_per_seq
  keys = np.asarray(keys, np.uint64)
  present = np.asarray(input_mask).astype(bool)
  lengths = present.sum(axis=1)
  cand = present & (ids != rule.cls_id) & (ids != rule.sep_id)
  counts = np.minimum(maxp, np.maximum(1, np.round(lengths * rule.masked_lm_prob).astype(
      np.int64)))
  order = seeding.uniform_grid(keys, 0, seq)
  rows = np.arange(b)[:, None]
  if rule.whole_word and starts is not None:
    chosen = _whole_word_choice(cand, np.asarray(starts).astype(bool) & cand, counts, order,
                                keys, rule)
    key = np.where(chosen, np.arange(seq)[None, :], seq + 1)
    positions = np.sort(key, axis=1)[:, :maxp]
    used = positions <= seq
    positions = np.where(used, positions, 0)
  else:
    counts = np.minimum(counts, cand.sum(axis=1))
    key = np.where(cand, order, 2.0)
    smallest = np.argsort(key, axis=1, kind="stable")[:, :maxp]  # top_k: lower index first
    used = np.arange(maxp)[None, :] < counts[:, None]
    positions = np.sort(np.where(used, smallest, seq), axis=1)
    positions = np.where(used, positions, 0)
  labels = np.where(used, ids[rows, positions], 0)
  action = seeding.uniform_grid(keys, 1, maxp)
  keep = seeding.uniform_grid(keys, 2, maxp) < 0.5
  pool = np.asarray(rule.random_ids, np.int64)
  random_ids = pool[(seeding.uniform_grid(keys, 3, maxp) * len(pool)).astype(np.int64)]
  replacement = np.where(action < 0.8, rule.mask_id, np.where(keep, labels, random_ids))
  pr, pc = np.nonzero(used)
  ids[pr, positions[pr, pc]] = replacement[pr, pc]
  return ids, positions, labels, used.astype(np.float32)


def _whole_word_choice(cand, starts, limit, order, keys, rule) -> np.ndarray:
  """Positions (B, L) bool of the whole-word / n-gram walk, as
  `dynamic_masking` takes them: words visited in the order of `order` at
  their starts (stable), each the longest n-gram up to its drawn length
  that fits the budget left and overlaps nothing taken; one taken n-gram
  per row per step."""
  b, seq = cand.shape
  n_max = rule.max_ngram_size
  rows = np.arange(b)
  col = np.broadcast_to(np.arange(seq)[None, :], (b, seq))
  num_words = starts.sum(axis=1)
  word_pos = np.sort(np.where(starts, col, seq), axis=1)
  word_pos_ext = np.concatenate([word_pos, np.full((b, 1), seq)], axis=1)
  cand_before = np.concatenate([np.zeros((b, 1), np.int64), np.cumsum(cand, axis=1)], axis=1)
  at = lambda t, i: np.take_along_axis(t, np.minimum(i, seq), axis=1)  # noqa: E731
  first = at(cand_before, word_pos_ext[:, :seq])
  sizes = [at(cand_before, at(word_pos_ext, col + n)) - first for n in range(1, n_max + 1)]
  fits_end = [col + n <= num_words[:, None] for n in range(1, n_max + 1)]
  is_word = col < num_words[:, None]
  safe_pos = np.minimum(word_pos, seq - 1)
  priority = np.where(is_word, np.take_along_axis(order, safe_pos, axis=1), 2.0)
  by_priority = np.argsort(priority, axis=1, kind="stable")
  rank = np.argsort(by_priority, axis=1, kind="stable")
  if n_max > 1:
    cum = ngram_weights(n_max)
    avail = np.minimum(n_max, num_words[:, None] - col)
    total = cum[np.maximum(avail - 1, 0)]
    u = np.take_along_axis(seeding.uniform_grid(keys, 4, seq), safe_pos, axis=1) * total
    drawn = 1 + sum((u >= cum[n - 1]).astype(np.int64) for n in range(1, n_max))
    drawn = np.minimum(drawn, np.maximum(avail, 1))
  else:
    drawn = np.ones((b, seq), np.int64)
  big = 1 << 30
  covered = np.zeros((b, seq), bool)
  left = np.asarray(limit, np.int64).copy()
  cursor = np.full(b, -1, np.int64)
  active = np.ones(b, bool)
  for _ in range(rule.max_predictions_per_seq):
    if not active.any():
      break
    cov_before = np.concatenate([np.zeros((b, 1), np.int64), np.cumsum(covered, axis=1)],
                                axis=1)
    n_eff = np.zeros((b, seq), np.int64)
    size = np.zeros((b, seq), np.int64)
    for n in range(1, n_max + 1):
      ok = (n <= drawn) & (sizes[n - 1] <= left[:, None]) & fits_end[n - 1]
      n_eff = np.where(ok, n, n_eff)
      size = np.where(ok, sizes[n - 1], size)
    overlap = at(cov_before, col + n_eff) - at(cov_before, col) > 0
    valid = is_word & (n_eff > 0) & ~overlap & (rank > cursor[:, None])
    best = np.where(valid, rank, big).min(axis=1)
    took = active & (best < big)
    w_star = by_priority[rows, np.minimum(best, seq - 1)]
    n_star = n_eff[rows, w_star]
    size_star = size[rows, w_star]
    covered |= (col >= w_star[:, None]) & (col < (w_star + n_star)[:, None]) & took[:, None]
    left = left - np.where(took, size_star, 0)
    cursor = np.where(took, best, cursor)
    active = took
  word_of = np.cumsum(starts, axis=1) - 1
  return cand & (word_of >= 0) & np.take_along_axis(covered, np.maximum(word_of, 0), axis=1)
