"""The single-piece rule: k wordpieces chosen uniformly among the non-special ones.

Forms:
  * Python (`python_choice`): the reference's draws (a full shuffle of the
    candidates), or (`exact_draws=False`) only the k positions used, with
    `rng.sample`: the same distribution, since the first k of a uniform
    shuffle are a uniform k-sample in random order;
  * numpy (`smallest_keys`): the k smallest `order_keys` of each row's
    candidates, all rows at once; static records (`mask_matrix`, create's
    default mode) and dynamic records (`numpy_choice`, the TF-free readers)
    both choose with it;
  * TensorFlow (`tf_choice`): the k smallest `order_keys` by a bisected
    threshold (no sort), under XLA.
The counter-based forms choose the same positions from the same keys: a
row's order keys are distinct, so the k smallest are one set
(tests/test_bert_mask_rules.py).
"""

from typing import Optional

import numpy as np

from bert_data.masks import draws
from textrecords import seeding

NAME = "single_piece"
WORDS = False  # chooses pieces: the records need no word starts
REFERENCE_WALK = 0  # the compiled reference walk's number for this rule

_NEVER = (1 << 64) - 1  # above every order key


def validate(config) -> None:
  """No flags of its own."""
  del config


# ------------------------------------------------------------------- Python

def python_choice(tokens, rng, p, limit: int, exact_draws: bool, num_a: int) -> list:
  """The positions to mask, in walk order (see `masking.mask_tokens`)."""
  if num_a:  # [CLS]/[SEP] only at 0, num_a - 1 and the end: no scan
    groups = list(range(1, num_a - 1))
    groups.extend(range(num_a, len(tokens) - 1))
  else:
    cls_id, sep_id = p.cls_id, p.sep_id
    groups = [i for i, t in enumerate(tokens) if t != cls_id and t != sep_id]
  if exact_draws:
    draws.shuffle_in_place(groups, rng)
    return groups[:limit]
  return rng.sample(groups, min(limit, len(groups)))


# -------------------------------------------------------------------- numpy

def order_shift(seq_len: int) -> int:
  """Low bits of an order key that hold the column (`order_keys`)."""
  return int(seq_len).bit_length()


def order_keys(keys, seq_len: int) -> np.ndarray:
  """uint64 (B, seq_len) order keys: the k smallest of a row's candidates are masked.

  Column j's key is stream 0's SplitMix64 bits (those of
  `seeding.uniform_grid(keys, 0, seq_len)`) with the low `order_shift` bits
  replaced by j: keys of a row are distinct and never all ones, and order
  as the uniforms do (ties, with probability about 2**-40 a row, go to the
  lower column). `tf_choice` computes the same keys in TensorFlow.

  >>> k = order_keys(np.array([7], np.uint64), 5)
  >>> [int(v) & 7 for v in k[0]], len(set(k[0].tolist()))
  ([0, 1, 2, 3, 4], 5)
  """
  shift = np.uint64(order_shift(seq_len))
  bits = seeding.grid_bits(keys, draws.ORDER, seq_len)
  return ((bits >> shift) << shift) | np.arange(seq_len, dtype=np.uint64)[None, :]


def mask_matrix(ids: np.ndarray, lengths: np.ndarray, num_a: np.ndarray, keys, p,
                special: Optional[np.ndarray] = None):
  """Static single-piece masking of an id matrix (B, seq_len), in place.

  Instance i's draws depend only on keys[i] (counter-based, see
  `textrecords.seeding.uniform_grid`), never on the rest of the batch.
  Assumes [CLS]/[SEP] only at 0, num_a - 1 and the end.

  Args:
    ids, lengths, num_a: the instances (zero-padded), their lengths and
      segment-0 lengths.
    keys: one uint64 key per instance (its order key).
    p: the `masking.MaskingParams`.
    special: optional (B, seq_len) bool marking more positions never to
      mask (the [SEP]s between documents of packed instances).
  Returns:
    (ids, lengths, positions, labels, counts): ids with the replacements
    applied; positions and labels (B, max_predictions) zero-padded,
    positions ascending; counts (B,).
  """
  b, seq_len = ids.shape
  maxp = p.max_predictions_per_seq
  col = np.arange(seq_len)
  valid = col[None, :] < lengths[:, None]
  counts = draws.budget(lengths, p.masked_lm_prob, maxp)
  candidate = valid & (col[None, :] != 0) & (col[None, :] != num_a[:, None] - 1) & (
      col[None, :] != lengths[:, None] - 1)
  if special is not None:
    candidate &= ~special
  counts = np.minimum(counts, candidate.sum(axis=1))
  keys = np.asarray(keys, np.uint64)
  positions, used = smallest_keys(candidate, counts, keys, max(1, maxp))
  rows = np.arange(b)[:, None]
  labels = np.where(used, ids[rows, positions], 0)
  draws.replace(ids, positions, labels, used, keys, p.mask_id, p.random_ids_array)
  return ids, lengths, positions[:, :maxp], labels[:, :maxp], counts


def smallest_keys(cand: np.ndarray, counts: np.ndarray, keys: np.ndarray, width: int):
  """The numpy choice: each row's `counts` candidates of smallest `order_keys`.

  Args:
    cand: (B, L) bool, the positions that may be masked.
    counts: (B,) how many to take (at most the row's candidates).
    keys: (B,) uint64, each row's key (its order keys' stream).
    width: the columns returned (>= every count).
  Returns:
    (positions (B, width) ascending, zero-padded; used (B, width) bool).
  """
  seq_len = cand.shape[1]
  order = np.where(cand, order_keys(keys, seq_len), np.uint64(_NEVER))
  if width < seq_len:  # the `width` smallest keys, then in key order
    part = np.argpartition(order, width - 1, axis=1)[:, :width]
    chosen = np.take_along_axis(
        part, np.argsort(np.take_along_axis(order, part, axis=1), axis=1), axis=1)
  else:
    chosen = np.argsort(order, axis=1)[:, :width]
  used = np.arange(width)[None, :] < counts[:, None]
  positions = np.where(used, chosen, seq_len)      # unused slots sort last
  positions.sort(axis=1)
  return np.where(used, positions, 0), used


def numpy_choice(cand: np.ndarray, starts, counts: np.ndarray, order, keys, rule):
  """Dynamic records: (positions (B, maxp) ascending, zero-padded; used
  (B, maxp) bool), `smallest_keys` as static records choose."""
  del starts, order  # pieces, not words: the order keys are all it draws
  maxp = rule.max_predictions_per_seq
  counts = np.minimum(counts, cand.sum(axis=1))
  positions, used = smallest_keys(cand, counts, np.asarray(keys, np.uint64), max(1, maxp))
  return positions[:, :maxp], used[:, :maxp]


# --------------------------------------------------------------- TensorFlow

def tf_choice(tf, ids, input_mask, keys, p):
  """(B, L) bool: the k smallest order keys among the candidates, no sort.

  The order key of column j is `order_keys`' (the order grid's bits with
  the column in the low bits: distinct, so exactly k are below the k+1-th).
  Each row's threshold T with #(keys < T) = k is found by bisection on
  uint64 T: about 15 fused count steps, exact after at most 64.
  """
  seq = p.max_seq_length
  cand = draws.candidates_tf(tf, ids, input_mask, p)
  counts = draws.budget_tf(tf, input_mask, p.masked_lm_prob, p.max_predictions_per_seq)
  counts = tf.minimum(counts, tf.reduce_sum(tf.cast(cand, tf.int64), axis=1))
  u64 = draws.u64
  shift = u64(tf, order_shift(seq))
  cols = tf.bitcast(tf.range(seq, dtype=tf.int64), tf.uint64)
  bits = draws.grid_bits(tf, keys, draws.ORDER, cols[None, :] + u64(tf, 1))
  order = tf.bitwise.bitwise_or(tf.bitwise.left_shift(tf.bitwise.right_shift(bits, shift), shift),
                                cols[None, :])
  never = u64(tf, _NEVER)  # above every candidate's key (its column < 2**shift - 1)
  order = tf.where(cand, order, tf.fill(tf.shape(order), never))

  def step(lo, hi, done, cut):
    mid = lo + tf.bitwise.right_shift(hi - lo, u64(tf, 1))
    below = tf.reduce_sum(tf.cast(order < mid[:, None], tf.int64), axis=1)
    hit = (below == counts) & ~done
    return (tf.where(below < counts, mid, lo), tf.where(below > counts, mid, hi), done | hit,
            tf.where(hit, mid, cut))

  zero = tf.zeros_like(keys)
  state = (zero, tf.fill(tf.shape(keys), never), counts == 0, zero)
  _, _, _, cut = tf.while_loop(lambda lo, hi, done, cut: ~tf.reduce_all(done), step, state,
                               maximum_iterations=65)
  return order < cut[:, None]
