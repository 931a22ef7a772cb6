"""Skip-gram, CBOW and paragraph-vector sampling, vectorised over many sentences (numpy, no TF).

For each sentence or document (ids with <unk> already dropped):
  1. subsampling: keep token w with probability keep_prob[w];
  2. skip-gram, CBOW, PV-DM: if >= 2 tokens are left, every position is a
     center with a window size uniform on 1..max_window_size; its contexts
     are the tokens within that distance, in sentence order, excluding the
     center's own position. PV-DBOW: every kept token is a target (center)
     of the document, without contexts;
  3. noise words, drawn from ids 1..V-1 with weight count**0.75 and drawn
     again while equal to an excluded word:
       skip-gram: K per context (K*n per center), excluding the contexts;
       CBOW, PV-DM: K per center, excluding the center and its contexts;
       PV-DBOW: K per target, excluding the target.

Randomness is counter-based: every random number is a hash (splitmix64) of
(the sentence's key, a stream, a position), the sentence's key derived from
(seed, sentence index). So every sentence has its own random streams, results
never depend on how sentences are grouped into batches or workers, and the
whole batch is drawn with a few array operations.
"""

import dataclasses
from typing import Optional

import numpy as np

from textrecords import seeding
from w2v_data import kernel_loader
from w2v_data import schema

_U64 = np.uint64
_GAMMA = seeding.GOLDEN
mix64 = seeding.mix64  # splitmix64's finaliser (the core's one counter-based RNG)
to_unit = seeding.to_unit
_STREAM_KEEP, _STREAM_WINDOW, _STREAM_NOISE = 1, 2, 3
NOISE_POWER = 0.75
_MAX_ATTEMPTS_BEFORE_CHECK = 64


class NoNoiseWordError(Exception):
  """A center's contexts cover every noise word, so no negative can be drawn."""

  def __init__(self, sentence_index: int):
    super().__init__(sentence_index)
    self.sentence_index = sentence_index


def sentence_keys(seed: int, sentence_index: np.ndarray) -> np.ndarray:
  """The 64-bit key of each sentence, a function of (seed, sentence index) only."""
  base = _U64(seeding.derive_seed(seed, "w2v_data/sentence"))
  with np.errstate(over="ignore"):
    return mix64(base + np.asarray(sentence_index, dtype=_U64) * _GAMMA)


def random_bits(keys: np.ndarray, stream: int, owner: np.ndarray,
                counter: np.ndarray) -> np.ndarray:
  """uint64 random bits for position `counter` of stream `stream` of sentence `owner`."""
  with np.errstate(over="ignore"):
    stream_keys = mix64(keys ^ _U64(stream * 0xD1B54A32D192ED03 % (1 << 64)))
    return mix64(stream_keys[owner] + np.asarray(counter, dtype=_U64) * _GAMMA)


def keep_probabilities(counts: np.ndarray, t: float, formula: str = "sqrt") -> np.ndarray:
  """Per-id keep probability; id 0 (<unk>) is always dropped.

  f(w) = counts[w] / N with N = counts[1:].sum() (tokens after dropping <unk>).
  "sqrt": min(1, sqrt(t / f)) (d2l); "word2vec": min(1, sqrt(t / f) + t / f).

  >>> keep_probabilities(np.array([7, 99, 1]), 0.0099).round(3).tolist()
  [0.0, 0.1, 0.995]
  """
  counts = np.asarray(counts, dtype=np.float64)
  n = counts[1:].sum()
  ratio = np.zeros_like(counts)
  ratio[1:] = t * n / np.maximum(counts[1:], 1)
  keep = np.sqrt(ratio)
  if formula == "word2vec":
    keep = keep + ratio
  keep = np.minimum(keep, 1.0)
  keep[0] = 0.0
  return keep


def noise_probabilities(counts: np.ndarray, power: float = NOISE_POWER) -> np.ndarray:
  """P(noise id = i) proportional to counts[i]**power (0.75) for i >= 1; P(0) = 0."""
  w = np.asarray(counts, dtype=np.float64) ** power
  w[0] = 0.0
  return w / w.sum()


class AliasTable:
  """Walker/Vose alias table: O(1) draws from a discrete distribution.

  The table has a power-of-two number of columns (padding columns have weight
  0 and always take their alias), so a draw is: the top bits of a 64-bit
  random number pick a column uniformly, the low 32 bits decide between the
  column and its alias.

  >>> table = AliasTable(np.array([0.0, 3.0, 1.0]))
  >>> bits = mix64(np.arange(1, 20001, dtype=np.uint64))
  >>> bool(abs(np.mean(table.sample(bits) == 1) - 0.75) < 0.02)
  True
  """

  def __init__(self, weights: np.ndarray):
    w = np.asarray(weights, dtype=np.float64)
    self.n = len(w)
    self.log2_size = max(1, int(np.ceil(np.log2(max(self.n, 2)))))
    size = 1 << self.log2_size
    scaled = np.zeros(size)
    scaled[:self.n] = w * (size / w.sum())
    kern = kernel_loader.kernels()
    if kern is not None:  # the same steps, compiled
      prob, alias = kern.alias_kernel(scaled)
    else:
      prob, alias = _vose(scaled)
    # Columns left over keep prob 1 and alias = themselves (rounding residue).
    self.prob = prob
    self.threshold = np.minimum(np.floor(prob * 4294967296.0), 4294967295.0).astype(np.uint32)
    self.alias = alias.astype(np.int32)

  def sample(self, bits: np.ndarray) -> np.ndarray:
    """Indices (int32) drawn with the table's weights, one per uint64 in `bits`."""
    col = (bits >> _U64(64 - self.log2_size)).astype(np.int32)
    low = bits.astype(np.uint32)
    return np.where(low >= self.threshold[col], self.alias[col], col)


def _vose(scaled: np.ndarray):
  """Vose's alias construction: (prob, alias) for weights summing to len(scaled)."""
  size = len(scaled)
  prob = np.ones(size)
  alias = np.arange(size, dtype=np.int64)
  small = [i for i in range(size) if scaled[i] < 1.0]
  large = [i for i in range(size) if scaled[i] >= 1.0]
  scaled = scaled.tolist()
  while small and large:
    s, l = small.pop(), large.pop()
    prob[s] = scaled[s]
    alias[s] = l
    scaled[l] = scaled[l] + scaled[s] - 1.0
    (small if scaled[l] < 1.0 else large).append(l)
  return prob, alias


@dataclasses.dataclass
class SkipGramBatch:
  """Centers of a group of sentences, in sentence order, with their samples.

  Attributes:
    centers: int32 [C] center ids (PV-DBOW: the documents' targets).
    sentence: int64 [C] global index of each center's sentence (document).
    num_contexts: int64 [C] n for each center (PV-DBOW: 0).
    contexts: int32 [sum n] contexts, center after center.
    negatives: int32 noise words, center after center: K*n each (skip-gram)
      or K each (other models).
    subsampled_tokens: tokens kept by subsampling (all sentences, incl. short).
  """
  centers: np.ndarray
  sentence: np.ndarray
  num_contexts: np.ndarray
  contexts: np.ndarray
  negatives: np.ndarray
  subsampled_tokens: int

  @property
  def num_pairs(self) -> int:
    return int(len(self.contexts))


@dataclasses.dataclass(frozen=True)
class SkipGramSampler:
  """Draws centers, contexts and noise words for batches of sentences.

  Example:
    >>> counts = np.array([0, 5, 4, 3, 2])
    >>> s = SkipGramSampler.build(counts, subsample_t=1.0, max_window_size=2,
    ...                           num_noise_words=1, seed=1)
    >>> b = s.sample(np.array([1, 2, 3, 4], np.int32), np.array([4]), np.array([0]))
    >>> b.centers.tolist(), int(b.num_contexts.sum()) == len(b.negatives)
    ([1, 2, 3, 4], True)
  """
  keep_prob: np.ndarray
  noise: Optional[AliasTable]
  vocab_size: int
  max_window_size: int
  num_noise_words: int
  seed: int
  model: str = "skipgram"

  @classmethod
  def build(cls, counts: np.ndarray, *, subsample_t: float, max_window_size: int,
            num_noise_words: int, seed: int, subsample_formula: str = "sqrt",
            model: str = "skipgram"):
    if model not in schema.MODELS:
      raise ValueError(f"model {model!r} is not one of {schema.MODELS}")
    counts = np.asarray(counts, dtype=np.int64)
    return cls(keep_prob=keep_probabilities(counts, subsample_t, subsample_formula),
               noise=AliasTable(noise_probabilities(counts)[1:]),
               vocab_size=len(counts), max_window_size=max_window_size,
               num_noise_words=num_noise_words, seed=seed, model=model)

  def sample(self, ids: np.ndarray, lengths: np.ndarray, sentence_index: np.ndarray,
             with_negatives: bool = True) -> SkipGramBatch:
    """Samples every center of a group of sentences.

    Args:
      ids: int [sum lengths], the sentences' ids (no 0s), concatenated.
      lengths: int [S], each sentence's length.
      sentence_index: int [S], each sentence's global index (seeds its streams).
      with_negatives: False skips the noise words (for counting only).

    Raises:
      NoNoiseWordError: a center's contexts cover the whole noise vocabulary.
    """
    kern = kernel_loader.kernels()
    if kern is not None and self.noise is not None:
      return self._sample_compiled(kern, ids, lengths, sentence_index, with_negatives)
    lengths = np.asarray(lengths, dtype=np.int64)
    num_s = len(lengths)
    keys = sentence_keys(self.seed, sentence_index)
    owner = np.repeat(np.arange(num_s), lengths)
    starts = np.cumsum(lengths) - lengths
    pos = np.arange(len(ids), dtype=np.int64) - starts[owner]
    # 1. Subsampling.
    keep = to_unit(random_bits(keys, _STREAM_KEEP, owner, pos)) < self.keep_prob[ids]
    toks, towner = ids[keep], owner[keep]
    tlen = np.bincount(towner, minlength=num_s)
    subsampled = int(len(toks))
    if self.model == "pv_dbow":  # every kept token is a target; nothing to exclude but it
      return self._pv_dbow_batch(keys, toks, towner, tlen, sentence_index, with_negatives)
    long_enough = tlen[towner] >= 2
    toks, towner = toks[long_enough], towner[long_enough]
    tlen = np.where(tlen >= 2, tlen, 0)
    tstart = np.cumsum(tlen) - tlen
    tpos = np.arange(len(toks), dtype=np.int64) - tstart[towner]
    contexts, num_ctx = self._contexts(keys, toks, towner, tpos, tlen, tstart)
    negatives = np.zeros(0, dtype=np.int32)
    if with_negatives and self.num_noise_words > 0 and len(toks):
      negatives = self._context_negatives(keys, toks, towner, tpos, contexts, num_ctx,
                                          sentence_index)
    return SkipGramBatch(centers=toks.astype(np.int32),
                         sentence=np.asarray(sentence_index, dtype=np.int64)[towner],
                         num_contexts=num_ctx, contexts=contexts.astype(np.int32),
                         negatives=negatives, subsampled_tokens=subsampled)

  def _pv_dbow_batch(self, keys, toks, towner, tlen, sentence_index,
                     with_negatives) -> SkipGramBatch:
    """PV-DBOW's batch: every kept token a target of its document, K noise
    words each (never the target)."""
    k = self.num_noise_words
    tstart = np.cumsum(tlen) - tlen
    tpos = np.arange(len(toks), dtype=np.int64) - tstart[towner]
    negatives = np.zeros(0, dtype=np.int32)
    if with_negatives and k > 0 and len(toks):
      ones = np.ones(len(toks), dtype=np.int64)
      negatives = self._draw_excluding(keys, towner, tpos * k, np.full(len(toks), k),
                                       toks, ones, sentence_index)
    return SkipGramBatch(centers=toks.astype(np.int32),
                         sentence=np.asarray(sentence_index, dtype=np.int64)[towner],
                         num_contexts=np.zeros(len(toks), dtype=np.int64),
                         contexts=np.zeros(0, dtype=np.int32), negatives=negatives,
                         subsampled_tokens=int(len(toks)))

  def _contexts(self, keys, toks, towner, tpos, tlen, tstart):
    """Each center's window drawn, its contexts (positions lo..hi-1 except
    the center's own): (contexts center after center, count per center)."""
    width = self.max_window_size
    win = 1 + (to_unit(random_bits(keys, _STREAM_WINDOW, towner, tpos)) * width).astype(np.int64)
    lo = np.maximum(tpos - win, 0)
    hi = np.minimum(tpos + win + 1, tlen[towner])
    span = hi - lo
    rep = np.repeat(np.arange(len(toks)), span)
    off = np.arange(int(span.sum()), dtype=np.int64) - np.repeat(np.cumsum(span) - span, span)
    local = lo[rep] + off
    not_self = local != tpos[rep]
    ctx_owner = rep[not_self]
    return toks[tstart[towner[ctx_owner]] + local[not_self]], span - 1

  def _context_negatives(self, keys, toks, towner, tpos, contexts, num_ctx, sentence_index):
    """The noise words: skip-gram K per (center, context) pair, never the
    context; CBOW and PV-DM K per center, never the center or a context."""
    k, width = self.num_noise_words, self.max_window_size
    if self.model == "skipgram":
      # Slot j of center c draws from the stream position tpos[c] * (2 * W * K) + j.
      return self._draw_excluding(keys, towner, tpos * (2 * width * k), k * num_ctx,
                                  contexts, num_ctx, sentence_index)
    excl_len = num_ctx + 1
    excl = np.empty(int(excl_len.sum()), dtype=contexts.dtype)
    first = np.cumsum(excl_len) - excl_len
    excl[first] = toks
    rest = np.ones(len(excl), dtype=bool)
    rest[first] = False
    excl[rest] = contexts
    return self._draw_excluding(keys, towner, tpos * k, np.full(len(toks), k),
                                excl, excl_len, sentence_index)

  def _sample_compiled(self, kern, ids, lengths, sentence_index,
                       with_negatives) -> SkipGramBatch:
    """`sample` in one compiled pass (w2v_data.kernels): the same arrays."""
    sentence_index = np.asarray(sentence_index, dtype=np.int64)
    centers, owner, num_ctx, contexts, negatives, subsampled, failed = kern.sample_kernel(
        np.ascontiguousarray(ids, dtype=np.int32), np.ascontiguousarray(lengths, dtype=np.int64),
        sentence_keys(self.seed, sentence_index), self.keep_prob, self.noise.threshold,
        self.noise.alias, self.noise.log2_size, self.max_window_size, self.num_noise_words,
        kernel_loader.MODEL_CODES[self.model], bool(with_negatives), self.vocab_size - 1)
    if failed >= 0:
      raise NoNoiseWordError(int(sentence_index[failed]))
    return SkipGramBatch(centers=centers, sentence=sentence_index[owner],
                         num_contexts=num_ctx, contexts=contexts, negatives=negatives,
                         subsampled_tokens=int(subsampled))

  def _draw_excluding(self, keys, towner, base, slots_per, excluded, excl_len,
                      sentence_index):
    """Noise words for owners (centers or targets), none equal to an excluded word.

    Owner c gets slots_per[c] draws; slot j draws from position base[c] + j of
    its sentence's noise stream (and, if rejected, of the streams of later
    attempts). excluded: the owners' excluded words, owner after owner,
    excl_len[c] >= 1 each.
    """
    slot_start = np.cumsum(slots_per) - slots_per
    total = int(slots_per.sum())
    counter = np.arange(total, dtype=np.int64) + np.repeat(base - slot_start, slots_per)
    # Excluded words of each owner: a padded matrix, and a 64-bit mask of
    # (id % 64) that rules most draws out without looking at the matrix.
    max_n = int(excl_len.max())
    ctx_start = np.cumsum(excl_len) - excl_len
    ctx_owner = np.repeat(np.arange(len(excl_len)), excl_len)
    ctx_col = np.arange(len(excluded), dtype=np.int64) - ctx_start[ctx_owner]
    ctx_pad = np.full((len(excl_len), max_n), -1, dtype=np.int32)
    ctx_pad[ctx_owner, ctx_col] = excluded
    bloom = np.bitwise_or.reduceat(
        np.left_shift(_U64(1), (excluded & 63).astype(_U64)), ctx_start)

    bits = random_bits(keys, _STREAM_NOISE, np.repeat(towner, slots_per), counter)
    negatives = self.noise.sample(bits) + 1
    maybe = (np.repeat(bloom, slots_per) >> (negatives & 63).astype(_U64)) & _U64(1)
    todo = np.flatnonzero(maybe)
    owner = np.searchsorted(slot_start, todo, side="right") - 1
    hit = (ctx_pad[owner] == negatives[todo, None]).any(axis=1)
    todo, owner = todo[hit], owner[hit]
    attempt = 1
    while len(todo):
      bits = random_bits(keys, _STREAM_NOISE + (attempt << 8), towner[owner], counter[todo])
      draw = self.noise.sample(bits) + 1
      negatives[todo] = draw
      hit = (ctx_pad[owner] == draw[:, None]).any(axis=1)
      todo, owner = todo[hit], owner[hit]
      attempt += 1
      if attempt % _MAX_ATTEMPTS_BEFORE_CHECK == 0 and len(todo):
        self._check_drawable(ctx_pad, np.unique(owner), towner, sentence_index)
    return negatives

  def _check_drawable(self, ctx_pad, centers, towner, sentence_index):
    """Raises NoNoiseWordError if some center's contexts cover every noise word."""
    noise_words = self.vocab_size - 1
    for c in centers.tolist():
      row = ctx_pad[c]
      if len(np.unique(row[row > 0])) >= noise_words:
        raise NoNoiseWordError(int(np.asarray(sentence_index)[towner[c]]))
