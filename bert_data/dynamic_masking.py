"""Dynamic masking: the masked-LM rule executed inside tf.data, per batch.

Records written with `--masking=dynamic` hold unmasked instances and a
per-record key (`schema.RECORD_KEY`). `make_dataset` draws each batch's masks
here, afresh every epoch, with the rule `masking.py` executes in Python and
numpy (one rule, three executions):

  * k = min(max_predictions_per_seq, max(1, round(n * masked_lm_prob))) of
    the n tokens of the instance ([CLS]/[SEP] included in n, never masked);
  * single pieces: k positions uniformly among the non-special ones (as
    `masking.mask_matrix`, and with the same numbers: see below);
  * whole words (records made with `--do_whole_word_mask`): words in random
    order, each taken whole if it fits in the budget left (the reference's
    walk); with `max_ngram_size` N > 1, n-grams of 1..N words with weight
    1/n, shortened to fit, skipped when they overlap (`masking.choose_ngrams`);
  * each chosen position: [MASK] 80%, itself 10%, a random vocab id 10%.

Random numbers are counter-based and stateless: SplitMix64 of (record key
mixed with the epoch's salt, stream, column), the generator numpy uses in
`textrecords.seeding.uniform_grid`. `tf.random.stateless_*` ops take one
seed per call; a batch needs one key per record, so the generator is spelled
out in uint64 tensor ops instead, and then numpy and TensorFlow draw the
same numbers (single-piece masks equal `masking.mask_matrix`'s bit for bit).
The masks of a record depend only on (its key, the epoch's salt): not on
the batch, the shuffle or the number of input pipelines.

Speed: single pieces are chosen without a sort (the k smallest of the
distinct `masking.order_keys` by a bisected threshold) and the whole rule
runs as one XLA-compiled function (`tf.function(jit_compile=True)`: integer
and exact float64 arithmetic, so the bits stay numpy's); whole words and
n-grams walk in TF ops and share the compiled 80/10/10 and compaction step.
Each new batch shape compiles once (about a second).
"""

import dataclasses
from typing import Optional

import numpy as np

from bert_data import masking
from bert_data import schema as S
from textrecords.errors import UserError
from textrecords.tf_import import require_tf

_GOLDEN = 0x9E3779B97F4A7C15
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB

# Streams of `uniform_grid` (shared with masking.mask_matrix for 0..3).
_ORDER, _ACTION, _KEEP, _RANDOM_ID, _NGRAM = 0, 1, 2, 3, 4


def _u64(tf, value: int):
  return tf.constant(value, tf.uint64)


def _i64(tf, value: int):
  return tf.constant(value, tf.int64)


def _mix64(tf, z):
  """SplitMix64's finalizer in TensorFlow ops (as `seeding.mix64`)."""
  z = tf.bitwise.bitwise_xor(z, tf.bitwise.right_shift(z, _u64(tf, 30))) * _u64(tf, _M1)
  z = tf.bitwise.bitwise_xor(z, tf.bitwise.right_shift(z, _u64(tf, 27))) * _u64(tf, _M2)
  return tf.bitwise.bitwise_xor(z, tf.bitwise.right_shift(z, _u64(tf, 31)))


def uniform_grid(tf, keys, stream: int, width: int):
  """`seeding.uniform_grid` in TensorFlow: float64 (B, width) in [0, 1)."""
  base = _mix64(tf, tf.bitwise.bitwise_xor(keys, _u64(tf, ((stream + 1) * _GOLDEN) % (1 << 64))))
  cols = tf.range(1, width + 1, dtype=tf.int64)
  steps = tf.bitcast(cols, tf.uint64) * _u64(tf, _GOLDEN)
  z = _mix64(tf, base[:, None] + steps[None, :])
  bits = tf.bitwise.right_shift(z, _u64(tf, 11))
  return tf.cast(bits, tf.float64) * (1.0 / (1 << 53))


def epoch_keys(tf, record_keys, salt):
  """Per-record keys for one epoch: mix(record key ^ mix(salt + golden)).

  Equals `epoch_keys_np` (numpy), used by tests and benchmarks.
  """
  s = _mix64(tf, tf.bitcast(tf.cast(salt, tf.int64), tf.uint64) + _u64(tf, _GOLDEN))
  return _mix64(tf, tf.bitwise.bitwise_xor(tf.bitcast(record_keys, tf.uint64), s))


def epoch_keys_np(record_keys, salt: int) -> np.ndarray:
  """numpy twin of `epoch_keys` (record keys as int64 or uint64)."""
  from textrecords import seeding  # pylint: disable=import-outside-toplevel
  keys = np.asarray(record_keys).astype(np.int64).view(np.uint64)
  with np.errstate(over="ignore"):
    s = seeding.mix64(np.uint64(np.int64(salt).view(np.uint64)) + seeding.GOLDEN)
    return seeding.mix64(keys ^ s)


@dataclasses.dataclass(frozen=True)
class DynamicMasker:
  """The masking settings of a dynamic dataset (from its metadata).

  Attributes:
    max_seq_length: the records' length.
    max_predictions_per_seq, masked_lm_prob: the rule's k (overridable).
    whole_word: records carry word-start flags; mask whole words.
    max_ngram_size: N for n-gram masking (1: words or pieces).
    cls_id, sep_id, mask_id: special ids.
    random_ids: the pool of the 10% random replacements.
  """
  max_seq_length: int
  max_predictions_per_seq: int
  masked_lm_prob: float
  whole_word: bool
  max_ngram_size: int
  cls_id: int
  sep_id: int
  mask_id: int
  random_ids: tuple

  def mask(self, features: dict, salt):
    """Masks one parsed batch.

    Args:
      features: parsed int64 tensors by canonical name: input_ids,
        input_mask, record_key and (whole words) word_starts.
      salt: the epoch's int64 scalar.
    Returns:
      (input_ids, masked_lm_positions, masked_lm_ids) int32 and
      masked_lm_weights float32; positions ascending, zero-padded to
      max_predictions_per_seq.
    """
    tf = require_tf()
    ids = features[S.INPUT_IDS]
    keys = epoch_keys(tf, features[S.RECORD_KEY][:, 0], salt)
    starts = features.get(S.WORD_STARTS) if self.whole_word else None
    out_ids, positions, labels, weights = mask_batch(tf, ids, features[S.INPUT_MASK], keys,
                                                     self, starts)
    return out_ids, positions, labels, weights


def masker_from_metadata(meta: dict, masked_lm_prob: Optional[float] = None,
                         max_predictions_per_seq: Optional[int] = None) -> DynamicMasker:
  """The masker of a dynamic dataset, with `make_dataset`'s overrides checked."""
  m = meta["masking"]
  seq = int(meta["max_seq_length"])
  prob = m["masked_lm_prob"] if masked_lm_prob is None else masked_lm_prob
  maxp = m["max_predictions_per_seq"] if max_predictions_per_seq is None \
      else max_predictions_per_seq
  where = meta.get("_path", "records")
  if not isinstance(prob, (int, float)) or not 0.0 <= prob <= 1.0:
    raise UserError(f"masked_lm_prob={prob!r}: must be a probability in [0, 1]")
  if not isinstance(maxp, (int, np.integer)) or not 1 <= maxp <= seq:
    raise UserError(f"max_predictions_per_seq={maxp!r}: must be in [1, {seq}] "
                    f"(the max_seq_length of {where})")
  pool = m["random_ids"]
  pool = tuple(range(pool["range"])) if isinstance(pool, dict) else tuple(pool)
  return DynamicMasker(seq, int(maxp), float(prob), bool(m["whole_word"]),
                       int(m.get("max_ngram_size", 1)), int(m["cls_id"]), int(m["sep_id"]),
                       int(m["mask_id"]), pool)


def mask_batch(tf, ids, input_mask, keys, p: DynamicMasker, starts=None):
  """The rule on a batch: ids (B, L) int64, keys (B,) uint64 (epoch keys).

  Returns (ids with replacements, positions, labels (B, maxp) int32,
  weights (B, maxp) float32).
  """
  ids = tf.cast(ids, tf.int64)
  if not (p.whole_word and starts is not None):
    return _compiled(p).single(ids, tf.cast(input_mask, tf.int64), keys)
  c = _compiled(p)
  input_mask = tf.cast(input_mask, tf.int64)
  starts = tf.cast(starts, tf.int64)
  by_priority = tf.argsort(c.word_priority(ids, input_mask, starts, keys), axis=1, stable=True)
  return c.words(ids, input_mask, starts, keys, by_priority)


class _Compiled:
  """The XLA-compiled parts of one masker's rule (compiled once per shape).

  Integer and exact float64 arithmetic only, so XLA gives the same bits as
  numpy; fused, the SplitMix64 grids and the selection cost a fraction of
  the separate TensorFlow ops (BENCHMARKS.md).
  """

  def __init__(self, p: DynamicMasker):
    tf = require_tf()
    self.single = tf.function(lambda ids, input_mask, keys: _finish(
        tf, ids, _single_choice(tf, ids, input_mask, keys, p), keys, p), jit_compile=True)
    self.word_priority = tf.function(lambda ids, input_mask, starts, keys: _word_priority(
        tf, ids, input_mask, starts, keys, p), jit_compile=True)
    self.words = tf.function(lambda ids, input_mask, starts, keys, by_priority: _finish(
        tf, ids, _word_choice(tf, ids, input_mask, starts, keys, by_priority, p), keys, p),
                             jit_compile=True)


_COMPILED = {}


def _compiled(p: DynamicMasker) -> _Compiled:
  if p not in _COMPILED:
    _COMPILED[p] = _Compiled(p)
  return _COMPILED[p]


def _grid_bits(tf, keys, stream: int, counters):
  """SplitMix64 bits of stream `stream` at 1-based `counters` (uint64 (B, W))."""
  base = _mix64(tf, tf.bitwise.bitwise_xor(keys, _u64(tf, ((stream + 1) * _GOLDEN) % (1 << 64))))
  return _mix64(tf, base[:, None] + counters * _u64(tf, _GOLDEN))


def _unit(tf, bits):
  return tf.cast(tf.bitwise.right_shift(bits, _u64(tf, 11)), tf.float64) * (1.0 / (1 << 53))


def _single_choice(tf, ids, input_mask, keys, p: DynamicMasker):
  """(B, L) bool: the k smallest order keys among the candidates, no sort.

  The order key of column j is `masking.order_keys`' (the order grid's bits
  with the column in the low bits: distinct, so exactly k are below the
  k+1-th). Each row's threshold T with #(keys < T) = k is found by
  bisection on uint64 T: about 15 fused count steps, exact after at most 64.
  """
  seq, maxp = p.max_seq_length, p.max_predictions_per_seq
  cand = (input_mask > 0) & tf.not_equal(ids, p.cls_id) & tf.not_equal(ids, p.sep_id)
  lengths = tf.reduce_sum(tf.cast(input_mask > 0, tf.int64), axis=1)
  counts = tf.minimum(tf.cast(maxp, tf.int64), tf.maximum(tf.cast(1, tf.int64), tf.cast(
      tf.round(tf.cast(lengths, tf.float64) * p.masked_lm_prob), tf.int64)))
  counts = tf.minimum(counts, tf.reduce_sum(tf.cast(cand, tf.int64), axis=1))
  shift = _u64(tf, masking.order_shift(seq))
  cols = tf.bitcast(tf.range(seq, dtype=tf.int64), tf.uint64)
  bits = _grid_bits(tf, keys, _ORDER, cols[None, :] + _u64(tf, 1))
  order = tf.bitwise.bitwise_or(tf.bitwise.left_shift(tf.bitwise.right_shift(bits, shift), shift),
                                cols[None, :])
  never = _u64(tf, (1 << 64) - 1)  # above every candidate's key (its column < 2**shift - 1)
  order = tf.where(cand, order, tf.fill(tf.shape(order), never))

  def step(lo, hi, done, cut):
    mid = lo + tf.bitwise.right_shift(hi - lo, _u64(tf, 1))
    below = tf.reduce_sum(tf.cast(order < mid[:, None], tf.int64), axis=1)
    hit = (below == counts) & ~done
    return (tf.where(below < counts, mid, lo), tf.where(below > counts, mid, hi), done | hit,
            tf.where(hit, mid, cut))

  zero = tf.zeros_like(keys)
  state = (zero, tf.fill(tf.shape(keys), never), counts == 0, zero)
  _, _, _, cut = tf.while_loop(lambda lo, hi, done, cut: ~tf.reduce_all(done), step, state,
                               maximum_iterations=65)
  return order < cut[:, None]


def _inclusive_counts(tf, flags, seq: int):
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


def _running_count(tf, values, seq: int):
  """Inclusive running sum of small non-negative ints along axis 1, as int64."""
  return tf.cast(_inclusive_counts(tf, values, seq), tf.int64)


def _finish(tf, ids, chosen, keys, p: DynamicMasker):
  """Positions, labels and replacements of the chosen (B, L) positions.

  The chosen positions, ascending, take slots 0, 1, ...; slot s draws its
  action from column s+1 of the `_ACTION`/`_KEEP`/`_RANDOM_ID` streams (as
  `masking.mask_matrix`), computed at each chosen position directly, so no
  gather or scatter of the ids is needed.
  """
  seq, maxp = p.max_seq_length, p.max_predictions_per_seq
  incl = _inclusive_counts(tf, chosen, seq)
  slot = incl - tf.cast(chosen, tf.int32)
  counters = tf.bitcast(tf.cast(slot, tf.int64) + 1, tf.uint64)
  action = _unit(tf, _grid_bits(tf, keys, _ACTION, counters))
  keep = _unit(tf, _grid_bits(tf, keys, _KEEP, counters)) < 0.5
  pool = np.asarray(p.random_ids, np.int64)
  pick = tf.cast(_unit(tf, _grid_bits(tf, keys, _RANDOM_ID, counters)) * len(pool), tf.int64)
  if not np.array_equal(pool, np.arange(len(pool))):
    pick = tf.gather(tf.constant(pool), pick)
  replacement = tf.where(action < 0.8, tf.fill(tf.shape(ids), _i64(tf, p.mask_id)),
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


def _word_setup(tf, ids, input_mask, starts, keys, p: DynamicMasker):
  """Whole words: (candidates, word starts, budgets k, the order grid) of a batch."""
  seq, maxp = p.max_seq_length, p.max_predictions_per_seq
  cand = (input_mask > 0) & tf.not_equal(ids, p.cls_id) & tf.not_equal(ids, p.sep_id)
  lengths = tf.reduce_sum(tf.cast(input_mask > 0, tf.int64), axis=1)
  counts = tf.minimum(tf.cast(maxp, tf.int64), tf.maximum(tf.cast(1, tf.int64), tf.cast(
      tf.round(tf.cast(lengths, tf.float64) * p.masked_lm_prob), tf.int64)))
  starts = (starts > 0) & cand
  return cand, starts, counts, uniform_grid(tf, keys, _ORDER, seq)


def _word_priority(tf, ids, input_mask, starts, keys, p: DynamicMasker):
  """(B, L) float64 sort key: a word's start holds its uniform priority, others 2."""
  _, starts, _, order = _word_setup(tf, ids, input_mask, starts, keys, p)
  return tf.where(starts, order, tf.fill(tf.shape(order), tf.constant(2.0, tf.float64)))


def _word_choice(tf, ids, input_mask, starts, keys, by_priority, p: DynamicMasker):
  """(B, L) bool chosen by the whole-word (N = 1) or n-gram walk.

  by_priority: (B, L) positions sorted by `_word_priority` (word starts in
  visiting order first): the one sort, done by TensorFlow's CPU kernel
  outside XLA (XLA's CPU sort is slower).
  """
  cand, starts, counts, order = _word_setup(tf, ids, input_mask, starts, keys, p)
  by_priority = tf.cast(by_priority, tf.int64)
  if p.max_ngram_size == 1:
    return _word_walk(tf, cand, starts, counts, by_priority, p.max_seq_length)
  return _whole_word_choice(tf, cand, starts, counts, order, keys, by_priority, p)


def _word_walk(tf, cand, starts, limit, by_priority, seq: int):
  """Whole words (N = 1): the reference's walk, several words per loop step.

  Words are keyed by their start position; `by_priority` lists the starts
  in visiting order (uniformly random). In that order, a word longer than the budget
  left can never be taken later (the budget only shrinks); among the
  others the walk takes words while their running total fits, and skips
  the first that does not. So each loop step takes the longest fitting run
  of the remaining eligible words (at least one) and moves past the first
  misfit: the budget shrinks every step, and a few steps finish a batch.
  """
  batch = tf.shape(cand, out_type=tf.int64)[0]
  rows = tf.broadcast_to(tf.range(batch)[:, None], tf.shape(cand, out_type=tf.int64))
  col = tf.broadcast_to(tf.range(seq, dtype=tf.int64)[None, :], tf.shape(cand, out_type=tf.int64))
  # Word of each position (row-local index of its start), as segment ids.
  word_of = _running_count(tf, starts, seq) - 1
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
    run = _running_count(tf, tf.where(eligible, size_sorted, tf.zeros_like(size_sorted)), seq)
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


def _whole_word_choice(tf, cand, starts, limit, order, keys, by_position, p: DynamicMasker):
  """Positions (B, L) bool chosen by the whole-word / n-gram walk.

  Words are numbered by their start; word w's priority is `order` at its
  start (so the walk visits words in a uniformly random order:
  `by_position` lists the starts in that order) and its drawn n-gram length
  comes from stream `_NGRAM` there. The walk is executed as written, one
  word per loop step for all rows at once: shorten the drawn n-gram while
  it does not fit the budget left, take it unless it overlaps a taken word.
  Each step is a few ops on (B,) and (B, N) vectors, which XLA runs in
  microseconds; the loop ends once every row's budget is spent or its words
  are visited.
  """
  seq = p.max_seq_length
  starts = starts & cand
  col = tf.range(seq, dtype=tf.int64)[None, :]
  num_words = tf.reduce_sum(tf.cast(starts, tf.int64), axis=1)            # (B,)
  batch = tf.shape(cand, out_type=tf.int64)[0]
  rows = tf.range(batch)[:, None]
  word_of = _running_count(tf, starts, seq) - 1                          # word at a position
  # word_pos[b, w]: start of word w (seq past the last word), by segment sums.
  segment = rows * (seq + 1) + tf.where(starts, word_of, tf.fill(tf.shape(word_of), _i64(
      tf, seq)))
  word_pos = tf.reshape(tf.math.unsorted_segment_sum(
      tf.where(starts, tf.broadcast_to(col, tf.shape(word_of)), tf.zeros_like(word_of)),
      segment, batch * (seq + 1)), [batch, seq + 1])[:, :seq]
  word_pos = tf.where(col < tf.reduce_sum(tf.cast(starts, tf.int64), axis=1)[:, None], word_pos,
                      tf.fill(tf.shape(word_pos), _i64(tf, seq)))
  word_pos_ext = tf.concat([word_pos, tf.fill([tf.shape(word_pos)[0], 1],
                                              tf.constant(seq, tf.int64))], axis=1)
  cand_i = tf.cast(cand, tf.int64)
  cand_before = tf.concat([tf.zeros_like(cand_i[:, :1]), _running_count(tf, cand_i, seq)],
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
  if n_max > 1:
    cum = masking.ngram_weights(n_max)
    avail = tf.minimum(tf.cast(n_max, tf.int64), num_words[:, None] - widx)
    total = tf.gather(tf.constant(cum), tf.maximum(avail - 1, 0))
    u = tf.gather(uniform_grid(tf, keys, _NGRAM, seq), safe_pos, batch_dims=1) * total
    drawn = 1 + tf.add_n([tf.cast(u >= cum[n - 1], tf.int64) for n in range(1, n_max)])
    drawn = tf.minimum(drawn, tf.maximum(avail, 1))
  else:
    drawn = tf.ones_like(widx)

  # The walk, one word (in visiting order) per loop step, each step on (B,)
  # vectors: cheap under XLA.
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

