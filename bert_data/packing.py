"""RoBERTa-style packing: one segment of contiguous sentences, filled to the length.

`--next_sentence=false --packing=full_sentences|doc_sentences` makes
instances `[CLS] s_i s_i+1 ... s_j [SEP]`: consecutive sentences (segments)
taken greedily while they fit in `max_seq_length - 2` tokens, so an instance
is full unless the next sentence would not fit, or (doc_sentences) its
document ends, or the corpus ends.

* full_sentences: instances cross document boundaries; a `[SEP]` separates
  the documents inside an instance (it counts towards the length).
* doc_sentences: an instance never crosses a document boundary.

A sentence longer than the budget is cut into budget-sized pieces, each
packed like a sentence (no text is dropped). Packing has no randomness: every
dupe round packs the same way, and only the masks differ. Instances are
described as piece ranges `[p0, p1)` of the corpus's piece boundaries, so
they can be cut into fixed-size blocks for the workers without any
dependence on the worker count. `pack_windows` makes the same plan from
consecutive windows of segments, holding only the open instance's pieces
between windows (Beam runs plan per input chunk).
"""

import dataclasses
from typing import Iterable, Iterator, Tuple

import numpy as np

PACKING_MODES = ("full_sentences", "doc_sentences")


@dataclasses.dataclass(frozen=True)
class Packing:
  """The packed instances of a corpus.

  Attributes:
    piece_starts: token offsets of the pieces (sentences, or budget-sized
      parts of long ones), plus the end offset: n_pieces + 1 values.
    doc_first: doc_first[i] is True if piece i starts a document.
    instances: (n, 2) int64 rows [p0, p1): pieces p0..p1-1 form an instance.
  """
  piece_starts: np.ndarray
  doc_first: np.ndarray
  instances: np.ndarray

  @property
  def num_instances(self) -> int:
    return int(self.instances.shape[0])

  def token_range(self, k: int):
    p0, p1 = self.instances[k]
    return int(self.piece_starts[p0]), int(self.piece_starts[p1])

  def doc_breaks(self, k: int) -> np.ndarray:
    """Token offsets inside instance k where a new document starts."""
    p0, p1 = (int(x) for x in self.instances[k])
    inner = np.flatnonzero(self.doc_first[p0 + 1:p1]) + p0 + 1
    return self.piece_starts[inner]

  def window(self, k0: int, k1: int) -> "Packing":
    """Instances [k0, k1) (k1 > k0) as a Packing of only the pieces they cover."""
    inst = self.instances[k0:k1]
    a, b = int(inst[0, 0]), int(inst[-1, 1])
    return Packing(self.piece_starts[a:b + 1], self.doc_first[a:b], inst - a)


def pieces(seg_starts: np.ndarray, doc_starts: np.ndarray, budget: int):
  """Sentences cut to at most `budget` tokens: (piece_starts, doc_first).

  >>> s, f = pieces(np.array([0, 3, 10, 12]), np.array([0, 2, 3]), 4)
  >>> s.tolist(), f.tolist()
  ([0, 3, 7, 10, 12], [True, False, False, True])
  """
  seg_first = np.zeros(len(seg_starts) - 1, bool)
  seg_first[np.asarray(doc_starts[:-1], np.int64)] = True
  return _cut(np.asarray(seg_starts, np.int64), seg_first, budget)


def _cut(seg_starts: np.ndarray, seg_first: np.ndarray, budget: int):
  """`pieces` of segments given as their starts (and end) and whether each
  starts a document."""
  lengths = np.diff(seg_starts)
  parts = np.maximum(1, -(-lengths // budget))          # ceil, at least one
  first_piece = np.zeros(len(parts) + 1, np.int64)
  np.cumsum(parts, out=first_piece[1:])
  seg_of_piece = np.repeat(np.arange(len(parts)), parts)
  within = np.arange(int(first_piece[-1])) - first_piece[seg_of_piece]
  starts = seg_starts[:-1][seg_of_piece] + within * budget
  piece_starts = np.append(starts, seg_starts[-1])
  doc_first = seg_first[seg_of_piece] & (within == 0)
  return piece_starts, doc_first


def pack(seg_starts: np.ndarray, doc_starts: np.ndarray, max_seq_length: int,
         mode: str) -> Packing:
  """Greedy packing of a corpus's segments (see the module docstring).

  Args:
    seg_starts, doc_starts: the corpus's boundaries (`documents.Corpus`).
    max_seq_length: the record length; an instance holds at most
      max_seq_length - 2 tokens of text and inner [SEP]s.
    mode: "full_sentences" or "doc_sentences".

  Example (documents [[3 tokens], [2 tokens]] and [[5 tokens]], length 8):
    >>> p = pack(np.array([0, 3, 5, 10]), np.array([0, 2, 3]), 8, "full_sentences")
    >>> p.instances.tolist()  # 3 + 2 fit; the next document's 5 (+1 [SEP]) do not
    [[0, 2], [2, 3]]
    >>> pack(np.array([0, 3, 5, 10]), np.array([0, 1, 3]), 9, "full_sentences").instances.tolist()
    [[0, 2], [2, 3]]
  """
  _check_mode(mode)
  budget = max_seq_length - 2
  piece_starts, doc_first = pieces(seg_starts, doc_starts, budget)
  instances, _ = _greedy(piece_starts, doc_first, budget, mode == "full_sentences", True)
  return Packing(piece_starts, doc_first, instances)


def pack_windows(windows: Iterable[Tuple[np.ndarray, np.ndarray]], max_seq_length: int,
                 mode: str) -> Iterator[Packing]:
  """`pack` of a corpus given as consecutive windows of its segments.

  Args:
    windows: (segment starts and the window's end, in corpus tokens; whether
      each segment starts a document) per window, in corpus order, each
      window starting where the previous one ended.
    max_seq_length, mode: as `pack`.
  Yields:
    one Packing per window: the instances closed once that window was seen
    (the last one closes all), each over only the pieces it covers. Laid end
    to end they are `pack`'s instances; between windows only the pieces of
    the instance still open are held.

  >>> w = [(np.array([0, 3]), np.array([True])), (np.array([3, 5, 10]), np.array([False, True]))]
  >>> [p.instances.tolist() for p in pack_windows(w, 8, "full_sentences")]
  [[], [[0, 2], [2, 3]]]
  """
  _check_mode(mode)
  budget, full = max_seq_length - 2, mode == "full_sentences"
  starts, first = np.zeros(1, np.int64), np.zeros(0, bool)  # the open instance's pieces
  todo = iter(windows)
  window = next(todo, None)
  while window is not None:
    following = next(todo, None)
    seg_starts, seg_first = window
    more_starts, more_first = _cut(np.asarray(seg_starts, np.int64), seg_first, budget)
    if len(first):
      more_starts = np.concatenate([starts[:-1], more_starts])
      more_first = np.concatenate([first, more_first])
    instances, s = _greedy(more_starts, more_first, budget, full, following is None)
    yield Packing(more_starts[:s + 1], more_first[:s], instances)
    starts, first, window = more_starts[s:], more_first[s:], following


def _check_mode(mode: str):
  if mode not in PACKING_MODES:
    raise ValueError(f"packing mode {mode!r}: must be one of {PACKING_MODES}")


def _greedy(piece_starts: np.ndarray, doc_first: np.ndarray, budget: int, full: bool,
            final: bool) -> Tuple[np.ndarray, int]:
  """The greedy instances of pieces: ((n, 2) rows [p0, p1), first piece not
  in one). Unless `final`, stops at the first instance whose end depends on
  pieces after these."""
  n = len(doc_first)
  # Cost of pieces [s, e): their tokens, plus one [SEP] before each piece
  # that starts a document, except the first one (full_sentences).
  cost = np.diff(piece_starts) + (doc_first if full else 0)
  cum = np.zeros(n + 1, np.int64)
  np.cumsum(cost, out=cum[1:])
  doc_end = _doc_ends(doc_first)
  out = []
  s = 0
  search = cum.searchsorted
  while s < n:
    limit = cum[s] + (int(doc_first[s]) if full else 0) + budget
    last = int(search(limit, side="right")) - 1
    e = max(s + 1, last)
    if not full:
      e = min(e, int(doc_end[s]))
    if not final and e == n and last == n:  # the next pieces could still fit
      break
    out.append((s, e))
    s = e
  return np.asarray(out, np.int64).reshape(-1, 2), s


def _doc_ends(doc_first: np.ndarray) -> np.ndarray:
  """For each piece, the index of the first piece of the next document."""
  starts = np.append(np.flatnonzero(doc_first), len(doc_first))
  which = np.cumsum(doc_first) - 1
  return starts[which + 1]


def instance_ids(tokens: np.ndarray, packing: Packing, rows, cls_id: int, sep_id: int,
                 seq_len: int):
  """[CLS] text [SEP] id rows (inner [SEP] between documents) for instances `rows`.

  Returns (ids (B, seq_len) int64 zero-padded, lengths, is_special (B,
  seq_len) bool marking [CLS] and every [SEP]).

  >>> p = pack(np.array([0, 2, 3]), np.array([0, 1, 2]), 8, "full_sentences")
  >>> ids, n, sp = instance_ids(np.array([7, 8, 9]), p, [0], 1, 2, 8)
  >>> ids.tolist(), n.tolist(), np.flatnonzero(sp[0]).tolist()
  ([[1, 7, 8, 2, 9, 2, 0, 0]], [6], [0, 3, 5])
  """
  rows = np.asarray(list(rows), np.int64)
  b = len(rows)
  p0, p1 = packing.instances[rows, 0], packing.instances[rows, 1]
  t0, t1 = packing.piece_starts[p0], packing.piece_starts[p1]
  ntok = t1 - t0
  row_of = np.repeat(np.arange(b), ntok)
  first = np.zeros(b + 1, np.int64)
  np.cumsum(ntok, out=first[1:])
  offset = np.arange(int(first[-1])) - first[row_of]          # position in the row's text
  t = t0[row_of] + offset                                     # corpus token offsets
  doc_starts = packing.piece_starts[:-1][packing.doc_first]
  is_break = np.isin(t, doc_starts) & (offset > 0)            # a document starts here
  seps_before = np.cumsum(is_break)
  seps_before -= np.concatenate([[0], seps_before])[first[:-1]][row_of]
  col = 1 + offset + seps_before
  ids = np.zeros((b, seq_len), np.int64)
  special = np.zeros((b, seq_len), bool)
  ids[row_of, col] = tokens[t]
  ids[row_of[is_break], col[is_break] - 1] = sep_id
  special[row_of[is_break], col[is_break] - 1] = True
  lengths = ntok + np.bincount(row_of[is_break], minlength=b) + 2
  ids[:, 0] = cls_id
  ar = np.arange(b)
  ids[ar, lengths - 1] = sep_id
  special[:, 0] = True
  special[ar, lengths - 1] = True
  return ids, lengths, special
