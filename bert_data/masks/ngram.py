"""The n-gram rule: runs of 1..N whole words, shorter ones favoured (ALBERT's).

Visit the words in random order; at word w draw a length n in 1..min(N,
words left from w) with weight 1/n (`ngram_weights`); while the n-gram
(words w..w+n-1) has more positions than the budget left, shorten it; skip
it if even one word does not fit or it overlaps positions already chosen;
else take all its positions. Stop once k positions are taken. Model
Garden's rule follows the same distribution.

Forms:
  * Python (`python_choice`, `choose_ngrams`): draws from a `random.Random`;
  * numpy (`numpy_choice`, dynamic records): the lengths from stream 4 at
    each word's start, then the whole-word walk (`whole_word.walk_np`);
  * TensorFlow (`tf_choice`): the same numbers, the walk as written, one
    word per loop step: the same positions as numpy.
"""

from typing import List

import numpy as np

from bert_data.masks import draws
from bert_data.masks import whole_word
from textrecords.runs import cli
from textrecords import seeding
from textrecords.errors import UserError

NAME = "ngram"
WORDS = True  # the records carry word starts
REFERENCE_WALK = None  # the reference has no n-gram masking


def validate(config) -> None:
  """--max_ngram_size: in range, with whole words, not in reference mode.

  Raises:
    UserError: naming the flag.
  """
  cli.check_range("max_ngram_size", config.max_ngram_size, 1, 32)
  if config.max_ngram_size > 1 and not config.do_whole_word_mask:
    raise UserError(f"--max_ngram_size={config.max_ngram_size} masks n-grams of whole "
                    "words: add --do_whole_word_mask")
  if config.max_ngram_size > 1 and config.reference_compatible:
    raise UserError(f"--max_ngram_size={config.max_ngram_size} with --reference_compatible: "
                    "the reference has no n-gram masking")


def ngram_weights(max_ngram_size: int) -> np.ndarray:
  """Cumulative weights of n-gram lengths 1..N: weight(n) = 1/n (ALBERT's and
  Model Garden's choice, favouring short n-grams).

  >>> ngram_weights(3).round(3).tolist()
  [1.0, 1.5, 1.833]
  """
  return np.cumsum(1.0 / np.arange(1, max_ngram_size + 1))


# ------------------------------------------------------------------- Python

def python_choice(tokens, rng, p, limit: int, exact_draws: bool, num_a: int) -> list:
  """The positions to mask, in walk order (see `masking.mask_tokens`)."""
  del exact_draws, num_a  # the walk shuffles the n-gram starts itself
  return choose_ngrams(whole_word.candidate_groups(tokens, p), limit, p.max_ngram_size, rng)


def choose_ngrams(words: List[List[int]], limit: int, max_ngram_size: int, rng) -> list:
  """Which positions to mask (in walk order), by the rule above.

  Args:
    words: candidate groups (`whole_word.candidate_groups`).
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
  draws.shuffle_in_place(starts, rng)
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


# -------------------------------------------------------------------- numpy

def numpy_choice(cand: np.ndarray, starts: np.ndarray, counts: np.ndarray, order: np.ndarray,
                 keys, rule):
  """Dynamic records: (positions, used) of the walk with drawn lengths."""
  seq = cand.shape[1]
  n_max = rule.max_ngram_size
  col, num_words, word_pos = whole_word.words_np(starts)
  safe_pos = np.minimum(word_pos, seq - 1)
  cum = ngram_weights(n_max)
  avail = np.minimum(n_max, num_words[:, None] - col)
  total = cum[np.maximum(avail - 1, 0)]
  u = np.take_along_axis(seeding.uniform_grid(keys, draws.NGRAM, seq), safe_pos, axis=1) * total
  drawn = 1 + sum((u >= cum[n - 1]).astype(np.int64) for n in range(1, n_max))
  drawn = np.minimum(drawn, np.maximum(avail, 1))
  chosen = whole_word.walk_np(cand, starts, counts, order, drawn, n_max,
                              rule.max_predictions_per_seq)
  return whole_word.positions_np(chosen, rule.max_predictions_per_seq)


# --------------------------------------------------------------- TensorFlow

def tf_choice(tf, ids, input_mask, starts, keys, by_priority, p):
  """(B, L) bool chosen by the n-gram walk; by_priority: the positions sorted
  by `whole_word.tf_priority` (word starts in visiting order first)."""
  cand, starts, counts, _ = whole_word.tf_setup(tf, ids, input_mask, starts, keys, p)
  return _walk(tf, cand, starts, counts, keys, tf.cast(by_priority, tf.int64), p)


def _walk(tf, cand, starts, limit, keys, by_position, p):
  """Positions (B, L) bool chosen by the n-gram walk.

  Words are numbered by their start; word w's priority is the order
  stream's uniform at its start (so the walk visits words in a uniformly
  random order: `by_position` lists the starts in that order) and its drawn n-gram length
  comes from stream NGRAM there. The walk is executed as written, one
  word per loop step for all rows at once: shorten the drawn n-gram while
  it does not fit the budget left, take it unless it overlaps a taken word.
  Each step is a few ops on (B,) and (B, N) vectors, which XLA runs in
  microseconds; the loop ends once every row's budget is spent or its words
  are visited.
  """
  running_count, i64 = draws.running_count, draws.i64
  seq = p.max_seq_length
  starts = starts & cand
  col = tf.range(seq, dtype=tf.int64)[None, :]
  num_words = tf.reduce_sum(tf.cast(starts, tf.int64), axis=1)            # (B,)
  batch = tf.shape(cand, out_type=tf.int64)[0]
  rows = tf.range(batch)[:, None]
  word_of = running_count(tf, starts, seq) - 1                           # word at a position
  # word_pos[b, w]: start of word w (seq past the last word), by segment sums.
  segment = rows * (seq + 1) + tf.where(starts, word_of, tf.fill(tf.shape(word_of), i64(
      tf, seq)))
  word_pos = tf.reshape(tf.math.unsorted_segment_sum(
      tf.where(starts, tf.broadcast_to(col, tf.shape(word_of)), tf.zeros_like(word_of)),
      segment, batch * (seq + 1)), [batch, seq + 1])[:, :seq]
  word_pos = tf.where(col < tf.reduce_sum(tf.cast(starts, tf.int64), axis=1)[:, None], word_pos,
                      tf.fill(tf.shape(word_pos), i64(tf, seq)))
  word_pos_ext = tf.concat([word_pos, tf.fill([tf.shape(word_pos)[0], 1],
                                              tf.constant(seq, tf.int64))], axis=1)
  cand_i = tf.cast(cand, tf.int64)
  cand_before = tf.concat([tf.zeros_like(cand_i[:, :1]), running_count(tf, cand_i, seq)],
                          axis=1)
  widx = tf.broadcast_to(col, tf.shape(word_pos, out_type=tf.int64))      # word index w
  is_word = widx < num_words[:, None]
  at = lambda t, i: tf.gather(t, tf.minimum(i, seq), batch_dims=1)        # noqa: E731
  first = at(cand_before, word_pos_ext[:, :seq])
  n_max = p.max_ngram_size
  # sizes[n-1][b, w]: positions covered by words w..w+n-1 (valid if w+n <= W).
  sizes = [at(cand_before, at(word_pos_ext, widx + n)) - first for n in range(1, n_max + 1)]
  fits_end = [widx + n <= num_words[:, None] for n in range(1, n_max + 1)]
  safe_pos = tf.minimum(word_pos, seq - 1)
  # Words in visiting order (then the non-words in index order).
  by_priority = tf.where(is_word, tf.gather(word_of, by_position, batch_dims=1), widx)
  drawn = _drawn_tf(tf, keys, num_words, widx, safe_pos, p)
  return _steps(tf, cand, starts, limit, word_of, num_words, rows, sizes, fits_end, drawn,
                by_priority, p)


def _drawn_tf(tf, keys, num_words, widx, safe_pos, p):
  """(B, L) int64: word w's drawn n-gram length (stream NGRAM at its start)."""
  seq, n_max = p.max_seq_length, p.max_ngram_size
  if n_max == 1:
    return tf.ones_like(widx)
  cum = ngram_weights(n_max)
  avail = tf.minimum(tf.cast(n_max, tf.int64), num_words[:, None] - widx)
  total = tf.gather(tf.constant(cum), tf.maximum(avail - 1, 0))
  u = tf.gather(draws.uniform_grid(tf, keys, draws.NGRAM, seq), safe_pos, batch_dims=1) * total
  drawn = 1 + tf.add_n([tf.cast(u >= cum[n - 1], tf.int64) for n in range(1, n_max)])
  return tf.minimum(drawn, tf.maximum(avail, 1))


def _steps(tf, cand, starts, limit, word_of, num_words, rows, sizes, fits_end, drawn,
           by_priority, p):
  """The walk, one word (in visiting order) per loop step, each step on (B,)
  vectors: cheap under XLA. Returns the chosen positions (B, L) bool."""
  seq, n_max = p.max_seq_length, p.max_ngram_size
  span = tf.range(n_max, dtype=tf.int64)[None, :]                         # (1, N)
  sizes_t = tf.stack(sizes, axis=2)                                       # (B, L, N)
  fits_t = tf.stack(fits_end, axis=2)
  nums = tf.range(1, n_max + 1, dtype=tf.int64)[None, :]

  def step(r, covered, left):
    w = by_priority[:, r]                                                 # (B,)
    sz = tf.gather(sizes_t, w, batch_dims=1)                              # (B, N)
    fit = tf.gather(fits_t, w, batch_dims=1)
    ok = (nums <= tf.gather(drawn, w, batch_dims=1)[:, None]) & (sz <= left[:, None]) & fit
    n_eff = tf.reduce_max(tf.where(ok, nums, tf.zeros_like(nums)), axis=1)
    size = tf.reduce_sum(tf.where(nums == n_eff[:, None], sz, tf.zeros_like(sz)), axis=1)
    idx = tf.minimum(w[:, None] + span, seq - 1)                          # (B, N)
    inside = span < n_eff[:, None]
    overlap = tf.reduce_any(tf.gather(covered, idx, batch_dims=1) & inside, axis=1)
    took = (r < num_words) & (n_eff > 0) & ~overlap
    rows_n = tf.broadcast_to(rows, tf.shape(idx, out_type=tf.int64))
    covered = tf.tensor_scatter_nd_max(
        tf.cast(covered, tf.int32), tf.reshape(tf.stack([rows_n, idx], axis=2), [-1, 2]),
        tf.reshape(tf.cast(inside & took[:, None], tf.int32), [-1])) > 0
    return r + 1, covered, left - tf.where(took, size, tf.zeros_like(size))

  last = tf.reduce_max(num_words)
  _, covered, _ = tf.while_loop(
      lambda r, c, l: (r < last) & tf.reduce_any((l > 0) & (r < num_words)), step,
      (tf.constant(0, tf.int64), tf.zeros_like(starts), tf.cast(limit, tf.int64)),
      maximum_iterations=seq)
  return cand & (word_of >= 0) & tf.gather(covered, tf.maximum(word_of, 0), batch_dims=1)
