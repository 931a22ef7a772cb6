"""Training instances from documents: the reference algorithm, RNG passed in.

`instances_from_document` makes the reference's RNG calls in the reference's
order. Reference-compatible mode feeds it one `random.Random` for the whole
run; the default mode feeds it an RNG per (dupe round, document).
"""

import dataclasses
import itertools
from typing import List, Optional

from bert_data import masking


@dataclasses.dataclass(slots=True)
class Instance:
  """One pretraining example, before padding.

  Attributes:
    tokens: [CLS] A [SEP] B [SEP] ids, with masked positions replaced.
    num_a: length of segment 0 ([CLS], A and the first [SEP]).
    is_random_next: B is from a random document.
    positions: masked positions (ascending); labels: the original ids there.
  """
  tokens: List[int]
  num_a: int
  is_random_next: bool
  positions: List[int]
  labels: List[int]


class FastDraws:
  """A `random.Random` whose `randint` is one float draw (default mode only).

  `a + int(random() * (b - a + 1))` is uniform on [a, b] up to a bias below
  (b - a) / 2**53, and costs one C call instead of Python's randrange chain.
  Other methods are the wrapped RNG's.

  >>> import random
  >>> r = FastDraws(random.Random(0))
  >>> sorted({r.randint(1, 3) for _ in range(100)})
  [1, 2, 3]
  """
  __slots__ = ("random", "getrandbits", "sample", "shuffle")

  def __init__(self, rng):
    self.random = rng.random
    self.getrandbits = rng.getrandbits
    self.sample = rng.sample
    self.shuffle = rng.shuffle

  def randint(self, a: int, b: int) -> int:
    return a + int(self.random() * (b - a + 1))


def truncate_pair(a: list, b: list, max_num_tokens: int, rng) -> None:
  """Shortens a and b in place until they fit, one token at a time.

  Each step trims the longer one (b on ties) at the front or the back with
  equal chance.

  >>> import random
  >>> a, b = list(range(5)), list(range(3))
  >>> truncate_pair(a, b, 6, random.Random(1)); len(a), len(b)
  (3, 3)
  """
  while len(a) + len(b) > max_num_tokens:
    longer = a if len(a) > len(b) else b
    if rng.random() < 0.5:
      del longer[0]
    else:
      longer.pop()


def truncation_counts(len_a: int, len_b: int, max_num_tokens: int):
  """How many tokens `truncate_pair` removes from a and from b.

  Which list loses a token depends only on the lengths (the longer one, b on
  ties), not on the front/back draws, so the counts have a closed form.

  >>> truncation_counts(10, 4, 8), truncation_counts(5, 5, 7), truncation_counts(3, 3, 9)
  ((6, 0), (1, 2), (0, 0))
  """
  excess = len_a + len_b - max_num_tokens
  if excess <= 0:
    return 0, 0
  if len_a > len_b:
    first = min(excess, len_a - len_b)
    da, db = first, 0
  else:
    first = min(excess, len_b - len_a)
    da, db = 0, first
  rest = excess - first
  return da + rest // 2, db + (rest + 1) // 2


def truncate_pair_sampled(a: list, b: list, max_num_tokens: int, rng) -> None:
  """`truncate_pair` in distribution, with one draw per list (default mode).

  Each removal is from the front or the back with equal chance, so the
  number of front removals from a list is Binomial(removals, 1/2): the
  popcount of that many random bits.
  """
  da, db = truncation_counts(len(a), len(b), max_num_tokens)
  for lst, d in ((a, da), (b, db)):
    if d:
      front = bin(rng.getrandbits(d)).count("1")
      del lst[len(lst) - (d - front):]
      del lst[:front]


def target_length(rng, max_num_tokens: int, short_seq_prob: float) -> int:
  """A document's chunk target: max_num_tokens, or with probability
  short_seq_prob a uniform length in [2, max_num_tokens] (the reference's draws).

  >>> import random
  >>> target_length(random.Random(0), 125, 0.0), 2 <= target_length(random.Random(0), 9, 1.0) <= 9
  (125, True)
  """
  if rng.random() < short_seq_prob:
    return rng.randint(2, max_num_tokens)
  return max_num_tokens


def _random_start(d: int, docs, rng):
  """(document, segment) where a random next B starts: up to 10 draws for a
  document other than d (it may still be d), then a uniform segment."""
  r = d
  for _ in range(10):
    r = rng.randint(0, docs.num_docs - 1)
    if r != d:
      break
  return r, rng.randint(0, docs.num_segments(r) - 1)


def _random_next(d: int, docs, target_b: int, rng) -> list:
  """Tokens of B drawn from a random other document (the reference's draw)."""
  return docs.tokens_from(*_random_start(d, docs, rng), target_b)


def spans_from_document(d: int, bounds: List[int], docs, rng, max_num_tokens: int,
                        short_seq_prob: float) -> list:
  """Default mode's instances of document d as token ranges, not lists.

  Makes exactly the RNG calls of `instances_from_document(...,
  mask_params=None, exact_draws=False)` and describes the same instances:
  segment A is tokens[a0:a1] and B is tokens[b0:b1] of the corpus token array
  (after truncation both are still contiguous ranges), so they can be
  gathered into an id matrix with array code.

  Args:
    bounds: the document's segment boundaries in the corpus token array
      (`Corpus.segment_bounds(d)`).
    docs: the corpus (for `num_docs`, `num_segments`, `span_from`).
    rng: a `random.Random` or `FastDraws`.
  Returns:
    [(a0, a1, b0, b1, is_random_next)].
  """
  target = target_length(rng, max_num_tokens, short_seq_prob)
  out = []
  n = len(bounds) - 1
  chunk_start = 0
  chunk_len = 0
  i = 0
  while i < n:
    chunk_len += bounds[i + 1] - bounds[i]
    if i == n - 1 or chunk_len >= target:
      nseg = i - chunk_start + 1
      a_end = 1
      if nseg >= 2:
        a_end = rng.randint(1, nseg - 1)
      a0, a1 = bounds[chunk_start], bounds[chunk_start + a_end]
      if nseg == 1 or rng.random() < 0.5:
        is_random_next = True
        b0, b1 = docs.span_from(*_random_start(d, docs, rng), target - (a1 - a0))
        i -= nseg - a_end
      else:
        is_random_next = False
        b0, b1 = a1, bounds[i + 1]
      da, db = truncation_counts(a1 - a0, b1 - b0, max_num_tokens)
      if da:
        front = bin(rng.getrandbits(da)).count("1")
        a0, a1 = a0 + front, a1 - (da - front)
      if db:
        front = bin(rng.getrandbits(db)).count("1")
        b0, b1 = b0 + front, b1 - (db - front)
      out.append((a0, a1, b0, b1, is_random_next))
      chunk_start = i + 1
      chunk_len = 0
    i += 1
  return out


def instances_from_spans(tokens, spans, rng, mask_params: Optional[masking.MaskingParams],
                         clean_corpus: bool) -> List[Instance]:
  """Masked instances from (a0, a1, b0, b1, label) ranges of a token array.

  [CLS] tokens[a0:a1] [SEP] tokens[b0:b1] [SEP], masked by
  `masking.mask_tokens` (default mode's draws) with `rng`; unmasked if
  mask_params is None.

  >>> import random, numpy as np
  >>> p = masking.MaskingParams(0.2, 2, False, 1, 2, 3, (4,), bytes(10))
  >>> inst, = instances_from_spans(np.arange(5, 9), [(2, 4, 0, 2, True)], random.Random(0), p, True)
  >>> inst.num_a, inst.is_random_next, len(inst.tokens), len(inst.positions)
  (4, True, 7, 1)
  """
  out = []
  cls_id, sep_id = mask_params.cls_id, mask_params.sep_id
  for a0, a1, b0, b1, label in spans:
    ids = [cls_id] + tokens[a0:a1].tolist() + [sep_id] + tokens[b0:b1].tolist() + [sep_id]
    num_a = a1 - a0 + 2
    if mask_params is None:  # unmasked (dynamic masking masks later)
      out.append(Instance(ids, num_a, bool(label), [], []))
      continue
    output, positions, labels = masking.mask_tokens(ids, rng, mask_params, False,
                                                    num_a if clean_corpus else 0)
    out.append(Instance(output, num_a, bool(label), positions, labels))
  return out


def instances_from_document(d: int, document: List[List[int]], docs, rng,
                            max_num_tokens: int,
                            short_seq_prob: float, cls_id: int, sep_id: int,
                            mask_params: masking.MaskingParams,
                            exact_draws: bool = True,
                            clean_corpus: bool = False) -> List[Instance]:
  """All instances of document `d` for one pass.

  Args:
    d: the document's index (compared with the random document's index).
    document: its segments (lists of ids).
    docs: all documents, for the random next document: has `num_docs`,
      `num_segments(r)` and `tokens_from(r, start, min_tokens)` (a `Corpus`).
    rng: a `random.Random`; the call sequence is the reference's (unless
      `exact_draws` is False, see `masking.mask_tokens`).
    clean_corpus: no document token is [CLS] or [SEP] (lets masking skip a scan).
    mask_params: None returns unmasked instances, for batch masking.
  """
  target = target_length(rng, max_num_tokens, short_seq_prob)
  out = []
  chunk: List[List[int]] = []
  chunk_len = 0
  i = 0
  n = len(document)
  while i < n:
    seg = document[i]
    chunk.append(seg)
    chunk_len += len(seg)
    if i == n - 1 or chunk_len >= target:
      if chunk:
        a_end = 1
        if len(chunk) >= 2:
          a_end = rng.randint(1, len(chunk) - 1)
        a = list(itertools.chain.from_iterable(chunk[:a_end]))
        if len(chunk) == 1 or rng.random() < 0.5:
          is_random_next = True
          b = _random_next(d, docs, target - len(a), rng)
          i -= len(chunk) - a_end
        else:
          is_random_next = False
          b = list(itertools.chain.from_iterable(chunk[a_end:]))
        if exact_draws:
          truncate_pair(a, b, max_num_tokens, rng)
        else:
          truncate_pair_sampled(a, b, max_num_tokens, rng)
        tokens = [cls_id] + a + [sep_id] + b + [sep_id]
        if mask_params is None:  # the caller masks (see masking.mask_batch)
          out.append(Instance(tokens, len(a) + 2, is_random_next, [], []))
        else:
          output, positions, labels = masking.mask_tokens(
              tokens, rng, mask_params, exact_draws, len(a) + 2 if clean_corpus else 0)
          out.append(Instance(output, len(a) + 2, is_random_next, positions, labels))
      chunk = []
      chunk_len = 0
    i += 1
  return out
