"""The whole-word rule: words in random order, each taken whole if it fits (the reference's walk).

A word is a candidate position that is not a "##" piece (or the first
candidate) with the "##" pieces after it (`candidate_groups`). The walk
visits the words in a uniformly random order and takes each one whose
pieces fit in the budget left; it stops once k positions are taken (so it
may take fewer when no word fits, as the reference does).

Forms:
  * Python (`python_choice`): the reference's draws (a shuffle of the words);
  * numpy (`numpy_choice`, dynamic records): the walk over words ordered by
    the order stream's uniform at their start, one taken word per row per
    step (`walk_np`, which the n-gram rule shares);
  * TensorFlow (`tf_choice`): the same visiting order; several words per
    loop step (`_word_walk`): the same positions as numpy.
Dynamic records store each instance's word starts (`word_starts`), so that
the numpy and TF forms need no vocab.
"""

from typing import List, Sequence

import numpy as np

from bert_data.masks import draws

NAME = "whole_word"
WORDS = True  # the records carry word starts
REFERENCE_WALK = 1  # the compiled reference walk's number for this rule


def validate(config) -> None:
  """No flags of its own."""
  del config


# ------------------------------------------------------------------- Python

def candidate_groups(tokens: Sequence[int], p) -> list:
  """Positions that may be masked, as whole-word groups.

  >>> from bert_data.masking import MaskingParams
  >>> p = MaskingParams(0.15, 20, True, 101, 102, 103, (), bytes([0] * 200 + [1]))
  >>> candidate_groups([101, 7, 200, 102, 9, 102], p)
  [[1, 2], [4]]
  """
  cls_id, sep_id = p.cls_id, p.sep_id
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


def python_choice(tokens, rng, p, limit: int, exact_draws: bool, num_a: int) -> list:
  """The positions to mask, in walk order (see `masking.mask_tokens`)."""
  del exact_draws, num_a  # the walk always shuffles the words
  groups = candidate_groups(tokens, p)
  draws.shuffle_in_place(groups, rng)
  chosen = []
  covered = set()
  for g in groups:
    if len(chosen) >= limit:
      break
    if len(chosen) + len(g) > limit or any(i in covered for i in g):
      continue
    covered.update(g)
    chosen.extend(g)
  return chosen


# -------------------------------------------------------------------- numpy

def word_starts(ids: np.ndarray, lengths: np.ndarray, p) -> np.ndarray:
  """Flags (B, seq_len) uint8: 1 where a whole-word group starts.

  The groups are `candidate_groups`'s: every non-special position belongs to
  the group of the last start at or before it; a "##" piece starts a group
  only when no candidate precedes it. Dynamic records store these so that
  `make_dataset` can mask whole words without the vocab.

  >>> from bert_data.masking import MaskingParams
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


def words_np(starts: np.ndarray):
  """(column grid, number of words, start of word w (seq past the last))
  of (B, L) word-start flags."""
  b, seq = starts.shape
  col = np.broadcast_to(np.arange(seq)[None, :], (b, seq))
  return col, starts.sum(axis=1), np.sort(np.where(starts, col, seq), axis=1)


def walk_np(cand, starts, limit, order, drawn, n_max: int, max_steps: int) -> np.ndarray:
  """Positions (B, L) bool of the whole-word / n-gram walk: words visited in
  the order of `order` at their starts (stable), each the longest n-gram up
  to its drawn length (`drawn`, (B, L) by word; 1 for whole words) that fits
  the budget left and overlaps nothing taken; one taken n-gram per row per
  step."""
  b, seq = cand.shape
  rows = np.arange(b)
  col, num_words, word_pos = words_np(starts)
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
  big = 1 << 30
  covered = np.zeros((b, seq), bool)
  left = np.asarray(limit, np.int64).copy()
  cursor = np.full(b, -1, np.int64)
  active = np.ones(b, bool)
  for _ in range(max_steps):
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


def positions_np(chosen: np.ndarray, maxp: int):
  """(positions (B, maxp) ascending, zero-padded; used (B, maxp)) of chosen (B, L)."""
  seq = chosen.shape[1]
  key = np.where(chosen, np.arange(seq)[None, :], seq + 1)
  positions = np.sort(key, axis=1)[:, :maxp]
  used = positions <= seq
  return np.where(used, positions, 0), used


def numpy_choice(cand: np.ndarray, starts: np.ndarray, counts: np.ndarray, order: np.ndarray,
                 keys, rule):
  """Dynamic records: (positions, used) of the walk (see `walk_np`)."""
  del keys  # the order grid is all it draws
  drawn = np.ones(cand.shape, np.int64)
  chosen = walk_np(cand, starts, counts, order, drawn, 1, rule.max_predictions_per_seq)
  return positions_np(chosen, rule.max_predictions_per_seq)


# --------------------------------------------------------------- TensorFlow

def tf_setup(tf, ids, input_mask, starts, keys, p):
  """(candidates, word starts, budgets k, the order grid) of a batch."""
  cand = draws.candidates_tf(tf, ids, input_mask, p)
  counts = draws.budget_tf(tf, input_mask, p.masked_lm_prob, p.max_predictions_per_seq)
  starts = (starts > 0) & cand
  return cand, starts, counts, draws.uniform_grid(tf, keys, draws.ORDER, p.max_seq_length)


def tf_priority(tf, ids, input_mask, starts, keys, p):
  """(B, L) float64 sort key: a word's start holds its uniform priority, others 2.

  The word rules' `tf_choice` take the positions sorted by it (stable):
  the one sort, done by TensorFlow's CPU kernel outside XLA (XLA's CPU
  sort is slower).
  """
  _, starts, _, order = tf_setup(tf, ids, input_mask, starts, keys, p)
  return tf.where(starts, order, tf.fill(tf.shape(order), tf.constant(2.0, tf.float64)))


def tf_choice(tf, ids, input_mask, starts, keys, by_priority, p):
  """(B, L) bool chosen by the walk; by_priority: the positions sorted by
  `tf_priority` (word starts in visiting order first)."""
  cand, starts, counts, _ = tf_setup(tf, ids, input_mask, starts, keys, p)
  return _word_walk(tf, cand, starts, counts, tf.cast(by_priority, tf.int64), p.max_seq_length)


def _word_walk(tf, cand, starts, limit, by_priority, seq: int):
  """The reference's walk, several words per loop step.

  Words are keyed by their start position; `by_priority` lists the starts
  in visiting order (uniformly random). In that order, a word longer than the budget
  left can never be taken later (the budget only shrinks); among the
  others the walk takes words while their running total fits, and skips
  the first that does not. So each loop step takes the longest fitting run
  of the remaining eligible words (at least one) and moves past the first
  misfit: the budget shrinks every step, and a few steps finish a batch.
  """
  running_count = draws.running_count
  batch = tf.shape(cand, out_type=tf.int64)[0]
  rows = tf.broadcast_to(tf.range(batch)[:, None], tf.shape(cand, out_type=tf.int64))
  col = tf.broadcast_to(tf.range(seq, dtype=tf.int64)[None, :], tf.shape(cand, out_type=tf.int64))
  # Word of each position (row-local index of its start), as segment ids.
  word_of = running_count(tf, starts, seq) - 1
  segment = tf.where(cand & (word_of >= 0), rows * seq + word_of,
                     tf.fill(tf.shape(word_of), batch * seq))
  num_segments = batch * seq + 1
  word_size = tf.math.unsorted_segment_sum(tf.ones_like(segment), segment, num_segments)
  size_at = tf.where(starts, tf.gather(word_size, segment), tf.zeros_like(segment))
  size_sorted = tf.gather(size_at, by_priority, batch_dims=1)
  word_sorted = tf.gather(starts, by_priority, batch_dims=1)
  big = tf.constant(seq + 1, tf.int64)

  def step(taken, left, cursor):
    eligible = word_sorted & (col > cursor[:, None]) & (size_sorted <= left[:, None])
    run = running_count(tf, tf.where(eligible, size_sorted, tf.zeros_like(size_sorted)), seq)
    take = eligible & (run <= left[:, None])
    misfit = eligible & (run > left[:, None])
    cursor = tf.reduce_min(tf.where(misfit, col, tf.fill(tf.shape(col), big)), axis=1)
    left = left - tf.reduce_sum(tf.where(take, size_sorted, tf.zeros_like(size_sorted)), axis=1)
    return taken | take, left, cursor

  state = (tf.zeros_like(word_sorted), tf.cast(limit, tf.int64),
           tf.fill(tf.shape(limit), tf.constant(-1, tf.int64)))
  taken, _, _ = tf.while_loop(lambda t, l, c: tf.reduce_any((c < seq) & (l > 0)), step, state,
                              maximum_iterations=seq)
  # Back to positions: a start is taken if its sorted slot was; then its word.
  taken_start = tf.tensor_scatter_nd_max(
      tf.zeros_like(cand, tf.int64), tf.stack([rows, by_priority], axis=2),
      tf.cast(taken, tf.int64))
  taken_word = tf.math.unsorted_segment_max(taken_start, segment, num_segments)
  return cand & (tf.gather(taken_word, segment) > 0)
