"""Sentence-order prediction (ALBERT's SOP) instances, as token ranges.

Documents are chunked as the reference chunks them (a target length, shorter
with probability short_seq_prob), but a chunk holds at least two segments
unless the document ends, and segment B is always the text right after
segment A in the same document: A is the chunk's first `a_end` segments
(a_end uniform on 1..n-1), B the rest. With probability 0.5 the two are
swapped and the label is 1 (ALBERT's convention); otherwise the label is 0.

Differences from ALBERT's generator, each to keep A and B adjacent:
  * a chunk of one segment (a document's last segment alone) is cut inside
    the segment at a uniform token boundary, instead of taking B from a
    random document; a one-token remainder makes no instance;
  * truncation trims A at its front and B at its back (never at the
    junction), the longer one first, as the reference's counts.

Instances are (a0, a1, b0, b1, label) ranges of the corpus token array: the
first segment is tokens[a0:a1], the second tokens[b0:b1] (for label 1, the
later text comes first), the shape `instances.spans_from_document` returns.
"""

from typing import List

from bert_data.instances import target_length, truncation_counts


def sop_spans_from_document(bounds: List[int], rng, max_num_tokens: int,
                            short_seq_prob: float) -> list:
  """SOP instances of one document.

  Args:
    bounds: the document's segment boundaries in the corpus token array
      (`Corpus.segment_bounds(d)`).
    rng: a `random.Random` (or `instances.FastDraws`) for this document.
    max_num_tokens: tokens A and B may hold together (max_seq_length - 3).
  Returns:
    [(a0, a1, b0, b1, swapped)]: first and second segment ranges.

  Example (three 4-token segments; every instance covers adjacent text):
    >>> import random
    >>> spans = sop_spans_from_document([0, 4, 8, 12], random.Random(1), 100, 0.0)
    >>> [(s[1] == s[2]) if not s[4] else (s[3] == s[0]) for s in spans]
    [True]
  """
  target = target_length(rng, max_num_tokens, short_seq_prob)
  out = []
  n = len(bounds) - 1
  start = 0
  for i in range(n):
    nseg = i - start + 1
    if i < n - 1 and (bounds[i + 1] - bounds[start] < target or nseg < 2):
      continue
    if nseg >= 2:
      a_end = rng.randint(1, nseg - 1)
      a0, b1 = bounds[start], bounds[i + 1]
      a1 = b0 = bounds[start + a_end]
    else:
      t0, t1 = bounds[i], bounds[i + 1]
      start = i + 1
      if t1 - t0 < 2:
        continue
      a0, b1 = t0, t1
      a1 = b0 = rng.randint(t0 + 1, t1 - 1)
    da, db = truncation_counts(a1 - a0, b1 - b0, max_num_tokens)
    a0 += da
    b1 -= db
    if rng.random() < 0.5:
      out.append((b0, b1, a0, a1, True))
    else:
      out.append((a0, a1, b0, b1, False))
    start = i + 1
  return out
