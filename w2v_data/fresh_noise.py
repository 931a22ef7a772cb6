"""`negatives="fresh"`: skip-gram noise words drawn anew in tf.data.

Each noise word is a function of (seed, epoch, center number, slot, round):
a keyed hash (`textrecords.reading.read_order.hash32`) picks a column of an
alias table of count**0.75 and decides between it and its alias. So a
center's draws are the same whichever input pipeline reads it and wherever
a run resumes, and new in every epoch. A draw equal to one of the center's
contexts is drawn again (the next round) until none is left.
"""

from textrecords.reading import read_order as R
from textrecords.reading import tf_order
from w2v_data import sampling

_NOISE = 16  # keeps these hashes apart from the read order's


def noise_table(tf, counts, power: float):
  """An alias table (threshold, alias) for ids 1..V-1 with weight count**power."""
  table = sampling.AliasTable(sampling.noise_probabilities(counts, power))
  return tf.constant(table.prob, tf.float64), tf.constant(table.alias, tf.int64)


def _center_states(tf, seed: int, epoch, ids):
  """The draws' hash state of each center: (seed, _NOISE) hashed now, in
  numpy, then (epoch, center number) in-graph (`hash32` goes part by part,
  so a draw continues from it with the same value as hashing all parts)."""
  np_ops = R.NumpyOps
  state = int(R.hash32(np_ops, *(np_ops.int64(v) for v in (*R.seed_parts(seed), _NOISE)))[0])
  ops = tf_order.TfOps(tf)
  epoch = tf.broadcast_to(ops.int64(epoch), tf.shape(ids, out_type=tf.int64))
  return R.hash32(ops, epoch, ops.int64(ids), state=state)


def _draw(tf, table, state, slot, round_index):
  """Alias-table draws, one per (center state, slot) pair (broadcast int64
  tensors): hashes of (slot, round, 0) and (slot, round, 1) after `state`."""
  prob, alias = table
  ops = tf_order.TfOps(tf)
  vocab = tf.shape(prob, out_type=tf.int64)[0]
  drawn = R.hash32(ops, slot, round_index, state=state)
  h_col = R.hash32(ops, ops.int64(0), state=drawn)
  h_frac = R.hash32(ops, ops.int64(1), state=drawn)
  col = (h_col * vocab) // (1 << 32)
  frac = tf.cast(h_frac, tf.float64) / float(1 << 32)
  return tf.where(frac < tf.gather(prob, col), col, tf.gather(alias, col))


def fresh_row(tf, row, n, k: int, table, seed: int, epoch, ids):
  """`row` (B, W) with its stored noise words replaced by new draws.

  Args:
    row: [contexts, noise words, 0...] of each center.
    n: contexts of each center (B,).
    k: noise words per context.
    table: a `noise_table`.
    seed: the draws' seed.
    epoch: int64 scalar (or (B,)) folded into the draws.
    ids: center numbers (B,) (a mixture: any int64 key of the center).
  """
  state = _center_states(tf, seed, epoch, ids)
  max_n = tf.reduce_max(tf.concat([n, [0]], 0))
  width = k * max_n
  ctx_col = tf.range(max_n, dtype=tf.int64)[tf.newaxis, :]
  contexts = tf.where(ctx_col < n[:, tf.newaxis], tf.cast(row[:, :max_n], tf.int64),
                      tf.constant(-1, tf.int64))
  slot_ok = tf.range(width, dtype=tf.int64)[tf.newaxis, :] < (k * n)[:, tf.newaxis]

  def collisions(noise):
    hit = tf.reduce_any(noise[:, :, tf.newaxis] == contexts[:, tf.newaxis, :], axis=2)
    return tf.where(hit & slot_ok)

  def body(i, noise, where):
    new = _draw(tf, table, tf.gather(state, where[:, 0]), where[:, 1], i + 1)
    noise = tf.tensor_scatter_nd_update(noise, where, new)
    return i + 1, noise, collisions(noise)

  noise = _draw(tf, table, state[:, tf.newaxis], tf.range(width, dtype=tf.int64)[tf.newaxis, :],
                tf.constant(0, tf.int64))
  _, noise, _ = tf.while_loop(lambda i, noise, where: tf.shape(where)[0] > 0, body,
                              (tf.constant(0, tf.int64), noise, collisions(noise)),
                              shape_invariants=(tf.TensorShape([]), tf.TensorShape([None, None]),
                                                tf.TensorShape([None, None])))
  return _with_noise(tf, row, n, k, noise, width)


def _with_noise(tf, row, n, k: int, noise, width):
  """Row = contexts, then the new noise words, then zeros."""
  cols = tf.range(tf.shape(row, out_type=tf.int64)[1], dtype=tf.int64)[tf.newaxis, :]
  from_noise = tf.gather(noise, tf.clip_by_value(cols - n[:, tf.newaxis], 0,
                                                 tf.maximum(width - 1, 0)), batch_dims=1)
  return tf.where(cols < n[:, tf.newaxis], row,
                  tf.where(cols < (1 + k) * n[:, tf.newaxis], tf.cast(from_noise, row.dtype),
                           tf.zeros([], row.dtype)))
