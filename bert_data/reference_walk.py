"""The reference's RNG walk compiled with numba (reference-compatible mode).

Reference-compatible mode makes the reference's draws from one
`random.Random`, in order: per dupe round and document, the target length,
the segment split, the random next document, the truncation and the
masking (a full shuffle of the candidates, then the 80/10/10 draws). That
walk is sequential. `instances.instances_from_document` does it in Python;
`Walk` does exactly the same draws on `reference_rng`'s replica of the
Mersenne Twister over the corpus's int32 token arrays, and gives the same
instances (tests compare the two and the goldens). Without numba
(`pip install textrecords[fast]`) the pipeline takes the Python walk.

The kernel fills a batch of at most `capacity` instances and stops; the
walk's position (dupe round, document, chunk) is kept in a small array,
so the next call goes on where it stopped, even inside a document.

Example (the instances of `instances_from_document` with one Python RNG):
  >>> import random
  >>> from bert_data import instances, masking
  >>> from bert_data.documents import Corpus
  >>> c = Corpus(np.arange(10, 40, dtype=np.int32), np.arange(0, 31, 3), np.array([0, 6, 10]))
  >>> p = masking.MaskingParams(0.15, 5, False, 1, 2, 3, tuple(range(4, 40)), bytes(40))
  >>> r1, r2 = random.Random(3), random.Random(3)
  >>> want = [i for d in range(2) for i in instances.instances_from_document(
  ...     d, c.document(d), c, r1, 9, 0.1, 1, 2, p)]
  >>> got = Walk(c, p, 12, 0.1, dupe_factor=1).batch(r2, 100)
  >>> got[0].tolist() == [t for i in want for t in i.tokens], r1.random() == r2.random()
  (True, True)
"""

import random
from typing import Tuple

import numpy as np

from bert_data import masking
from bert_data import reference_rng as R
from bert_data.documents import Corpus
from bert_data.masks import whole_word

jit = R.jit

# The walk's masking rules (`masks.registry`): each rule's REFERENCE_WALK.
_WHOLE_WORD = whole_word.REFERENCE_WALK

# Walk position (an int64 array): dupe round, document, inside a document
# (0/1), the document's target length, segment index, chunk start, chunk length.
_DUPE, _DOC, _IN_DOC, _TARGET, _SEG, _CHUNK0, _CHUNK_LEN = range(7)


def available() -> bool:
  """Whether the compiled walk can run (numba installed)."""
  return R.available()


@jit
def _mask(st, buf, t0, n, orig, cand, gbeg, order, chosen, cls_id, sep_id, mask_id,
          masked_lm_prob, max_predictions, rule, is_subword, pool, pos_out, lab_out,
          p0):
  """Masks buf[t0:t0+n] in place, the reference's draws (`rule`: the masking
  rule's REFERENCE_WALK, single pieces or whole words); writes the sorted
  positions and their original ids at pos_out/lab_out[p0:]; returns the count."""
  m = 0
  for q in range(n):
    t = buf[t0 + q]
    orig[q] = t
    if t != cls_id and t != sep_id:
      cand[m] = q
      m += 1
  limit = min(max_predictions, max(1, int(np.rint(n * masked_lm_prob))))
  k = 0
  if rule == _WHOLE_WORD:
    # Groups: a candidate starts one unless it is a "##" piece after another
    # group (even across [SEP]); members are consecutive in `cand`.
    g = 0
    for c in range(m):
      if g == 0 or not is_subword[orig[cand[c]]]:
        gbeg[g] = c
        order[g] = g
        g += 1
    gbeg[g] = m
    R.shuffle(st, order[:g])
    for x in range(g):
      if k >= limit:
        break
      grp = order[x]
      size = gbeg[grp + 1] - gbeg[grp]
      if k + size > limit:
        continue  # groups never overlap, so no coverage check is needed
      for c in range(gbeg[grp], gbeg[grp + 1]):
        chosen[k] = cand[c]
        k += 1
  else:
    R.shuffle(st, cand[:m])
    k = min(limit, m)
    for x in range(k):
      chosen[x] = cand[x]
  for x in range(k):  # draws in walk order, as the reference makes them
    q = chosen[x]
    if R.uniform(st) < 0.8:
      buf[t0 + q] = mask_id
    elif R.uniform(st) < 0.5:
      pass
    else:
      buf[t0 + q] = pool[R.randbelow(st, len(pool))]
  for x in range(1, k):  # insertion sort: k <= max_predictions, mostly ~20
    q = chosen[x]
    y = x - 1
    while y >= 0 and chosen[y] > q:
      chosen[y + 1] = chosen[y]
      y -= 1
    chosen[y + 1] = q
  for x in range(k):
    pos_out[p0 + x] = chosen[x]
    lab_out[p0 + x] = orig[chosen[x]]
  return k


@jit
def _walk(st, ws, tokens, seg_starts, doc_starts, dupe_factor, max_num_tokens, short_seq_prob,
          cls_id, sep_id, mask_id, masked_lm_prob, max_predictions, rule, is_subword,
          pool, capacity, out_tokens, lengths, num_as, is_random, positions, labels, counts):
  """Up to `capacity` instances from walk position `ws`; returns
  (instances, tokens, predictions) written."""
  num_docs = len(doc_starts) - 1
  seq = max_num_tokens + 3
  orig = np.empty(seq, np.int32)
  cand = np.empty(seq, np.int64)
  gbeg = np.empty(seq + 1, np.int64)
  order = np.empty(seq, np.int64)
  chosen = np.empty(seq, np.int64)
  ni = nt = npred = 0
  while ni < capacity:
    if ws[_IN_DOC] == 0:
      if ws[_DUPE] >= dupe_factor:
        break
      target = max_num_tokens
      if R.uniform(st) < short_seq_prob:
        target = R.randint(st, 2, max_num_tokens)
      ws[_TARGET] = target
      ws[_SEG] = 0
      ws[_CHUNK0] = 0
      ws[_CHUNK_LEN] = 0
      ws[_IN_DOC] = 1
    d = ws[_DOC]
    base = doc_starts[d]
    nseg = doc_starts[d + 1] - base
    target = ws[_TARGET]
    i = ws[_SEG]
    cs = ws[_CHUNK0]
    cl = ws[_CHUNK_LEN]
    while i < nseg:
      cl += seg_starts[base + i + 1] - seg_starts[base + i]
      if i == nseg - 1 or cl >= target:
        nchunk = i - cs + 1
        a_end = 1
        if nchunk >= 2:
          a_end = R.randint(st, 1, nchunk - 1)
        a0 = seg_starts[base + cs]
        a1 = seg_starts[base + cs + a_end]
        if nchunk == 1 or R.uniform(st) < 0.5:
          rand_next = 1
          target_b = target - (a1 - a0)
          r = d
          for _ in range(10):
            r = R.randint(st, 0, num_docs - 1)
            if r != d:
              break
          rbase = doc_starts[r]
          start = R.randint(st, 0, doc_starts[r + 1] - rbase - 1)
          b0 = seg_starts[rbase + start]
          s = rbase + start + 1
          rend = doc_starts[r + 1]
          while s < rend and seg_starts[s] - b0 < max(target_b, 1):
            s += 1
          b1 = seg_starts[s]
          i -= nchunk - a_end
        else:
          rand_next = 0
          b0 = a1
          b1 = seg_starts[base + i + 1]
        while (a1 - a0) + (b1 - b0) > max_num_tokens:
          front = np.int64(R.uniform(st) < 0.5)  # trims the front (1) or the back (0)
          if a1 - a0 > b1 - b0:
            a0 += front
            a1 -= 1 - front
          else:
            b0 += front
            b1 -= 1 - front
        t0 = nt
        out_tokens[nt] = cls_id
        nt += 1
        for t in range(a0, a1):
          out_tokens[nt] = tokens[t]
          nt += 1
        out_tokens[nt] = sep_id
        nt += 1
        for t in range(b0, b1):
          out_tokens[nt] = tokens[t]
          nt += 1
        out_tokens[nt] = sep_id
        nt += 1
        k = _mask(st, out_tokens, t0, nt - t0, orig, cand, gbeg, order, chosen, cls_id,
                  sep_id, mask_id, masked_lm_prob, max_predictions, rule, is_subword,
                  pool, positions, labels, npred)
        lengths[ni] = nt - t0
        num_as[ni] = a1 - a0 + 2
        is_random[ni] = rand_next
        counts[ni] = k
        npred += k
        ni += 1
        i += 1
        cs = i
        cl = 0
        break
      i += 1
    ws[_SEG] = i
    ws[_CHUNK0] = cs
    ws[_CHUNK_LEN] = cl
    if i >= nseg:
      ws[_IN_DOC] = 0
      ws[_DOC] = d + 1
      if d + 1 == num_docs:
        ws[_DOC] = 0
        ws[_DUPE] += 1
  return ni, nt, npred


class Walk:
  """The reference's instances of every dupe round and document, in batches.

  Args:
    corpus: the documents in walk order (the reference shuffles them first).
    mask: the masking settings.
    max_seq_length, short_seq_prob, dupe_factor: the flags.
  """

  def __init__(self, corpus: Corpus, mask: masking.MaskingParams, max_seq_length: int,
               short_seq_prob: float, dupe_factor: int):
    if not available():
      raise RuntimeError("the compiled walk needs numba: pip install textrecords[fast]")
    self.tokens = np.ascontiguousarray(corpus.tokens, np.int32)
    self.seg_starts = np.ascontiguousarray(corpus.seg_starts, np.int64)
    self.doc_starts = np.ascontiguousarray(corpus.doc_starts, np.int64)
    if corpus.num_docs >= 1 << 32 or len(mask.random_ids) >= 1 << 32:
      raise ValueError("more than 2**32 documents or vocab entries")
    self.mask = mask
    self.rule = mask.rule.REFERENCE_WALK
    if self.rule is None:
      raise ValueError(f"the reference walk has no {mask.rule.NAME} masking")
    self.pool = np.asarray(mask.random_ids, np.int32)
    self.is_subword = np.frombuffer(mask.is_subword, np.uint8)
    self.max_seq_length = max_seq_length
    self.short_seq_prob = float(short_seq_prob)
    self.dupe_factor = dupe_factor
    self.position = np.zeros(7, np.int64)

  @property
  def done(self) -> bool:
    return bool(self.position[_DUPE] >= self.dupe_factor)

  def batch(self, rng: random.Random, capacity: int) -> Tuple[np.ndarray, ...]:
    """The next (up to) `capacity` instances, `rng` advanced by their draws.

    Returns:
      (tokens, lengths, num_as, is_random_next, positions, labels, counts):
      tokens are the instances' masked ids one after another; positions and
      labels the masked positions (ascending) and original ids, `counts` per
      instance; int32 (is_random_next int8).
    """
    st = R.to_state(rng)
    seq, maxp = self.max_seq_length, self.mask.max_predictions_per_seq
    out = (np.empty(capacity * seq, np.int32), np.empty(capacity, np.int32),
           np.empty(capacity, np.int32), np.empty(capacity, np.int8),
           np.empty(capacity * maxp, np.int32), np.empty(capacity * maxp, np.int32),
           np.empty(capacity, np.int32))
    m = self.mask
    ni, nt, npred = _walk(st, self.position, self.tokens, self.seg_starts, self.doc_starts,
                          self.dupe_factor, self.max_seq_length - 3, self.short_seq_prob,
                          m.cls_id, m.sep_id, m.mask_id, float(m.masked_lm_prob),
                          m.max_predictions_per_seq, self.rule, self.is_subword,
                          self.pool, capacity, *out)
    R.set_state(rng, st)
    tokens, lengths, num_as, is_random, positions, labels, counts = out
    # Views of this call's buffers (a pickled view carries only its own items).
    return (tokens[:nt], lengths[:ni], num_as[:ni], is_random[:ni], positions[:npred],
            labels[:npred], counts[:ni])
