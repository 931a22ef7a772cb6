"""What every masking rule shares, in each of its forms (Python, numpy, TensorFlow).

  * the budget: k = min(max_predictions_per_seq, max(1, round(n *
    masked_lm_prob))) of the n tokens of the instance ([CLS]/[SEP] included
    in n, never masked);
  * the reference's shuffle (`shuffle_in_place`, Python);
  * counter-based numbers: SplitMix64 of (record key mixed with the epoch's
    salt, stream, column), the generator numpy uses in
    `textrecords.seeding.uniform_grid`, spelled out in uint64 tensor ops for
    TensorFlow (`tf.random.stateless_*` ops take one seed per call; a batch
    needs one key per record), so both draw the same numbers;
  * the 80/10/10 replacement of the chosen positions ([MASK] 80%, itself
    10%, a random vocab id 10%), numpy (`replace`) and TensorFlow
    (`finish`), from streams 1..3.

The TensorFlow functions take the `tf` module as their first argument.
"""

import numpy as np

from textrecords import seeding

_GOLDEN = 0x9E3779B97F4A7C15
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB

# Streams of `uniform_grid` (numpy's `seeding.uniform_grid` and the TF one).
ORDER, ACTION, KEEP, RANDOM_ID, NGRAM = 0, 1, 2, 3, 4

_PLANS = {}


# ------------------------------------------------------------------- Python

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


# -------------------------------------------------------------------- numpy

def budget(lengths: np.ndarray, masked_lm_prob: float, max_predictions: int) -> np.ndarray:
  """k per row (int64) of rows of `lengths` tokens."""
  return np.minimum(max_predictions, np.maximum(1, np.round(lengths * masked_lm_prob).astype(
      np.int64)))


def replace(ids: np.ndarray, positions: np.ndarray, labels: np.ndarray, used: np.ndarray,
            keys: np.ndarray, mask_id: int, pool: np.ndarray) -> None:
  """The 80/10/10 replacement, in place: slot s of row r (positions[r, s],
  where used[r, s]) draws from column s+1 of streams 1..3 of keys[r]."""
  width = positions.shape[1]
  u = seeding.uniform_grid(keys, ACTION, width)
  same = seeding.uniform_grid(keys, KEEP, width) < 0.5
  random_ids = pool[(seeding.uniform_grid(keys, RANDOM_ID, width) * len(pool)).astype(np.int64)]
  replacement = np.where(u < 0.8, mask_id, np.where(same, labels, random_ids))
  pr, pc = np.nonzero(used)
  ids[pr, positions[pr, pc]] = replacement[pr, pc]


def epoch_keys_np(record_keys, salt: int) -> np.ndarray:
  """numpy twin of `epoch_keys` (record keys as int64 or uint64)."""
  keys = np.asarray(record_keys).astype(np.int64).view(np.uint64)
  with np.errstate(over="ignore"):
    s = seeding.mix64(np.uint64(np.int64(salt).view(np.uint64)) + seeding.GOLDEN)
    return seeding.mix64(keys ^ s)


# --------------------------------------------------------------- TensorFlow

def u64(tf, value: int):
  return tf.constant(value, tf.uint64)


def i64(tf, value: int):
  return tf.constant(value, tf.int64)


def _mix64(tf, z):
  """SplitMix64's finalizer in TensorFlow ops (as `seeding.mix64`)."""
  z = tf.bitwise.bitwise_xor(z, tf.bitwise.right_shift(z, u64(tf, 30))) * u64(tf, _M1)
  z = tf.bitwise.bitwise_xor(z, tf.bitwise.right_shift(z, u64(tf, 27))) * u64(tf, _M2)
  return tf.bitwise.bitwise_xor(z, tf.bitwise.right_shift(z, u64(tf, 31)))


def uniform_grid(tf, keys, stream: int, width: int):
  """`seeding.uniform_grid` in TensorFlow: float64 (B, width) in [0, 1)."""
  base = _mix64(tf, tf.bitwise.bitwise_xor(keys, u64(tf, ((stream + 1) * _GOLDEN) % (1 << 64))))
  cols = tf.range(1, width + 1, dtype=tf.int64)
  steps = tf.bitcast(cols, tf.uint64) * u64(tf, _GOLDEN)
  z = _mix64(tf, base[:, None] + steps[None, :])
  bits = tf.bitwise.right_shift(z, u64(tf, 11))
  return tf.cast(bits, tf.float64) * (1.0 / (1 << 53))


def epoch_keys(tf, record_keys, salt):
  """Per-record keys for one epoch: mix(record key ^ mix(salt + golden)).

  Equals `epoch_keys_np` (numpy), used by the TF-free readers and tests.
  """
  s = _mix64(tf, tf.bitcast(tf.cast(salt, tf.int64), tf.uint64) + u64(tf, _GOLDEN))
  return _mix64(tf, tf.bitwise.bitwise_xor(tf.bitcast(record_keys, tf.uint64), s))


def grid_bits(tf, keys, stream: int, counters):
  """SplitMix64 bits of stream `stream` at 1-based `counters` (uint64 (B, W))."""
  base = _mix64(tf, tf.bitwise.bitwise_xor(keys, u64(tf, ((stream + 1) * _GOLDEN) % (1 << 64))))
  return _mix64(tf, base[:, None] + counters * u64(tf, _GOLDEN))


def unit(tf, bits):
  """Uniform float64 in [0, 1) from the top 53 of 64 bits (as numpy's)."""
  return tf.cast(tf.bitwise.right_shift(bits, u64(tf, 11)), tf.float64) * (1.0 / (1 << 53))


def budget_tf(tf, input_mask, masked_lm_prob: float, max_predictions: int):
  """`budget` in TensorFlow: k per row (int64) of the rows' input_mask."""
  lengths = tf.reduce_sum(tf.cast(input_mask > 0, tf.int64), axis=1)
  return tf.minimum(tf.cast(max_predictions, tf.int64), tf.maximum(tf.cast(1, tf.int64), tf.cast(
      tf.round(tf.cast(lengths, tf.float64) * masked_lm_prob), tf.int64)))


def candidates_tf(tf, ids, input_mask, p):
  """(B, L) bool: present positions other than [CLS] and [SEP]."""
  return (input_mask > 0) & tf.not_equal(ids, p.cls_id) & tf.not_equal(ids, p.sep_id)


def inclusive_counts(tf, flags, seq: int):
  """Running count of True (or sum of small ints) along axis 1 (int32), as two matmuls.

  Exact (integers far below 2**24 in float32); cheaper under XLA than a
  cumsum (a reduce window) over the whole row.
  """
  width = 8
  padded = -(-seq // width) * width
  x = tf.pad(tf.cast(flags, tf.float32), [[0, 0], [0, padded - seq]])
  blocks = tf.reshape(x, [-1, padded // width, width])
  inner = tf.einsum("bnw,wv->bnv", blocks, tf.constant(np.triu(np.ones((width, width),
                                                                       np.float32))))
  before = tf.matmul(inner[:, :, -1], tf.constant(np.triu(np.ones(
      (padded // width, padded // width), np.float32), 1)))
  total = tf.reshape(inner + before[:, :, None], [-1, padded])[:, :seq]
  return tf.cast(total, tf.int32)


def running_count(tf, values, seq: int):
  """Inclusive running sum of small non-negative ints along axis 1, as int64."""
  return tf.cast(inclusive_counts(tf, values, seq), tf.int64)


def finish(tf, ids, chosen, keys, p):
  """Positions, labels and replacements of the chosen (B, L) positions.

  The chosen positions, ascending, take slots 0, 1, ...; slot s draws its
  action from column s+1 of the ACTION/KEEP/RANDOM_ID streams (as
  `replace`), computed at each chosen position directly, so no gather or
  scatter of the ids is needed.

  Returns:
    (ids with replacements, positions, labels (B, maxp) int32, weights
    (B, maxp) float32).
  """
  seq, maxp = p.max_seq_length, p.max_predictions_per_seq
  incl = inclusive_counts(tf, chosen, seq)
  slot = incl - tf.cast(chosen, tf.int32)
  counters = tf.bitcast(tf.cast(slot, tf.int64) + 1, tf.uint64)
  action = unit(tf, grid_bits(tf, keys, ACTION, counters))
  keep = unit(tf, grid_bits(tf, keys, KEEP, counters)) < 0.5
  pool = np.asarray(p.random_ids, np.int64)
  pick = tf.cast(unit(tf, grid_bits(tf, keys, RANDOM_ID, counters)) * len(pool), tf.int64)
  if not np.array_equal(pool, np.arange(len(pool))):
    pick = tf.gather(tf.constant(pool), pick)
  replacement = tf.where(action < 0.8, tf.fill(tf.shape(ids), i64(tf, p.mask_id)),
                         tf.where(keep, ids, pick))
  out = tf.where(chosen, replacement, ids)
  # Slot s's position: the column where slot s is chosen (segment sums).
  batch = tf.shape(ids)[0]
  col = tf.broadcast_to(tf.range(seq, dtype=tf.int32)[None, :], tf.shape(slot))
  rows = tf.range(batch, dtype=tf.int32)[:, None]
  segment = rows * (maxp + 1) + tf.where(chosen, tf.minimum(slot, maxp), maxp)
  positions = tf.reshape(tf.math.unsorted_segment_sum(
      tf.where(chosen, col, tf.zeros_like(col)), segment, batch * (maxp + 1)),
                         [batch, maxp + 1])[:, :maxp]
  used = tf.range(maxp, dtype=tf.int32)[None, :] < incl[:, -1:]
  labels = tf.where(used, tf.gather(tf.cast(ids, tf.int32), positions, batch_dims=1),
                    tf.zeros_like(positions))
  return tf.cast(out, tf.int32), positions, labels, tf.cast(used, tf.float32)
