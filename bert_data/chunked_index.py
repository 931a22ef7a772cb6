"""bert_data's corpus index built per input chunk and read in pages (Beam runs).

A local run builds the corpus index (`documents.CorpusBuilder`: segment
starts, one per non-empty line, and document starts) in one process. A Beam
run builds it where the chunks are tokenized: each chunk's piece (its
segment ends and the segment counts at its blank lines) is a hidden object
under the output location, and only a few numbers per chunk (`PieceSizes`)
meet in one step, which lays the pieces end to end (`assemble`). The
instance steps read the index through `PagedArray`s that load the pieces
they touch, so no worker holds a per-line index of the whole corpus. The
values are exactly `CorpusBuilder`'s. With --packing, the plan is made
window by window (`plan_packing`: one window per chunk) into page objects,
and each task loads the pages of its instances (`PagedPacking`).
"""

import collections
import dataclasses
import io
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from bert_data import packing
from textrecords.files import storage


@dataclasses.dataclass(frozen=True)
class PieceSizes:
  """What the index step needs of one chunk's piece.

  Attributes:
    path: the piece object (`piece_bytes`).
    tokens: tokens in the chunk (its segments' lengths summed).
    segments: non-empty lines.
    breaks: distinct segment counts at the chunk's blank lines.
    first_break, last_break: the smallest and largest of those counts
      (-1 if no blank line).
  """
  path: str
  tokens: int
  segments: int
  breaks: int
  first_break: int
  last_break: int


def piece(lengths: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
  """One chunk's line lengths (`documents.encode_lines`: -1 a blank line) ->
  (segment ends in tokens from the chunk's start, distinct segment counts
  before its blank lines).

  >>> ends, breaks = piece(np.array([2, -1, -1, 3, 0, 1, -1], np.int32))
  >>> ends.tolist(), breaks.tolist()
  ([2, 5, 6], [1, 3])
  """
  lengths = np.asarray(lengths)
  is_seg = lengths > 0
  ends = np.cumsum(lengths[is_seg].astype(np.int64))
  before = np.cumsum(is_seg) - is_seg  # segments before each line
  breaks = np.unique(before[lengths < 0].astype(np.int64))
  return ends, breaks


def piece_bytes(lengths: np.ndarray) -> Tuple[bytes, tuple]:
  """(the piece object's bytes, the `PieceSizes` fields after `path`) of a chunk."""
  ends, breaks = piece(lengths)
  buf = io.BytesIO()
  np.savez(buf, ends=ends, breaks=breaks)
  tokens = int(ends[-1]) if len(ends) else 0
  first, last = (int(breaks[0]), int(breaks[-1])) if len(breaks) else (-1, -1)
  return buf.getvalue(), (tokens, len(ends), len(breaks), first, last)


class PagedArray:
  """An int64 array laid end to end from pages, loaded when touched.

  A page is (values held here, or None) or (piece path, field of it, value
  added, entries skipped at its start, length). Supports what the instance
  builders and `segment_windows` do with `Corpus.seg_starts` / `doc_starts`:
  `len`, integers and slices; `np.asarray` gives the whole array (every
  page loaded: no step of a run takes it whole).

  >>> a = PagedArray([(np.array([0, 4]), None, None, 0, 0, 2), (np.array([9]), None, None, 0, 0, 1)])
  >>> len(a), int(a[2]), a[1:3].tolist(), np.asarray(a).tolist()
  (3, 9, [4, 9], [0, 4, 9])
  """

  _OPEN = 16  # pieces kept loaded

  def __init__(self, pages: Sequence[tuple]):
    self.pages = list(pages)
    self.starts = np.zeros(len(self.pages) + 1, np.int64)
    np.cumsum([p[5] for p in self.pages], out=self.starts[1:])
    self._cache = collections.OrderedDict()

  def __getstate__(self):
    return {"pages": self.pages, "starts": self.starts, "_cache": collections.OrderedDict()}

  def __len__(self) -> int:
    return int(self.starts[-1])

  def _page(self, i: int) -> np.ndarray:
    values, path, field, add, skip, length = self.pages[i]
    if values is not None:
      return values
    got = self._cache.get(i)
    if got is None:
      with np.load(io.BytesIO(storage.read_bytes(path)), allow_pickle=False) as z:
        got = z[field][skip:skip + length] + add
      if len(self._cache) >= self._OPEN:
        self._cache.popitem(last=False)
      self._cache[i] = got
    else:
      self._cache.move_to_end(i)
    return got

  def __getitem__(self, index):
    if isinstance(index, slice):
      start, stop, step = index.indices(len(self))
      if step != 1:
        return np.asarray(self)[index]
      if stop <= start:
        return np.zeros(0, np.int64)
      p0 = int(np.searchsorted(self.starts, start, "right")) - 1
      p1 = int(np.searchsorted(self.starts, stop - 1, "right")) - 1
      parts = [self._page(p)[max(start, self.starts[p]) - self.starts[p]:
                             min(stop, self.starts[p + 1]) - self.starts[p]]
               for p in range(p0, p1 + 1)]
      return np.concatenate(parts)
    i = int(index)
    if i < 0:
      i += len(self)
    if not 0 <= i < len(self):
      raise IndexError(index)
    p = int(np.searchsorted(self.starts, i, "right")) - 1
    return self._page(p)[i - self.starts[p]]

  def __array__(self, dtype=None, copy=None):  # pylint: disable=unused-argument
    whole = np.concatenate([self._page(p) for p in range(len(self.pages))] or
                           [np.zeros(0, np.int64)])
    return whole if dtype is None else whole.astype(dtype)


def assemble(sizes: Sequence[Optional[PieceSizes]]) -> Tuple[PagedArray, PagedArray, List[int]]:
  """The chunks' pieces, in corpus order -> (segment starts, document starts,
  each chunk's first token offset), as `CorpusBuilder` would build them.

  A document ends at each blank line that follows a segment of it; the
  document starts are therefore 0, the distinct segment counts at blank
  lines (a count equal to the last start adds nothing), and the total
  segment count if segments follow the last blank line.
  """
  seg_pages = [(np.zeros(1, np.int64), None, None, 0, 0, 1)]
  doc_pages = [(np.zeros(1, np.int64), None, None, 0, 0, 1)]
  token_offsets, tokens, segments, last = [], 0, 0, 0
  for s in sizes:
    token_offsets.append(tokens)
    if s.segments:
      seg_pages.append((None, s.path, "ends", tokens, 0, s.segments))
    if s.breaks:
      skip = int(segments + s.first_break == last)
      if s.breaks > skip:
        doc_pages.append((None, s.path, "breaks", segments, skip, s.breaks - skip))
      last = segments + s.last_break
    tokens += s.tokens
    segments += s.segments
  if segments > last:
    doc_pages.append((np.array([segments], np.int64), None, None, 0, 0, 1))
  token_offsets.append(tokens)
  return PagedArray(seg_pages), PagedArray(doc_pages), token_offsets


def segment_windows(corpus, sizes: Sequence[PieceSizes]
                    ) -> Iterator[Tuple[np.ndarray, np.ndarray]]:
  """(segment starts and end, whether each starts a document) per chunk with
  segments, in corpus order, read from the corpus's paged index."""
  doc_starts, num_docs = corpus.doc_starts, corpus.num_docs
  d, g0 = 0, 0
  for s in sizes:
    if not s.segments:
      continue
    g1 = g0 + s.segments
    first = np.zeros(s.segments, bool)
    while d < num_docs:  # the documents starting in [g0, g1)
      block = np.asarray(doc_starts[d:min(num_docs, d + 4096)])
      inside = block[block < g1]
      first[inside - g0] = True
      d += len(inside)
      if len(inside) < len(block):
        break
    yield np.asarray(corpus.seg_starts[g0:g1 + 1]), first
    g0 = g1


def plan_packing(corpus, sizes: Sequence[PieceSizes], max_seq_length: int, mode: str,
                 write: Callable[[str, bytes], str]) -> "PagedPacking":
  """`packing.pack` of the corpus, one window per chunk, each window's
  instances written as a page object (`write(name, bytes)` -> its path).
  Holds one chunk's index and the open instance's pieces at a time."""
  pages = []
  windows = segment_windows(corpus, sizes)
  for i, page in enumerate(packing.pack_windows(windows, max_seq_length, mode)):
    if page.num_instances:
      buf = io.BytesIO()
      np.savez(buf, piece_starts=page.piece_starts, doc_first=page.doc_first,
               instances=page.instances)
      pages.append((write("plan-%09d.npz" % i, buf.getvalue()), page.num_instances))
  return PagedPacking(pages)


class PagedPacking:
  """A packing plan kept as page objects (`plan_packing`), read per task.

  Supports what the tasks use of a `packing.Packing`: `num_instances` and
  `window(k0, k1)`, which loads only the pages holding instances [k0, k1).
  """

  def __init__(self, pages: Sequence[Tuple[str, int]]):
    self.pages = list(pages)
    self.starts = np.zeros(len(self.pages) + 1, np.int64)
    np.cumsum([n for _, n in self.pages], out=self.starts[1:])

  @property
  def num_instances(self) -> int:
    return int(self.starts[-1])

  def window(self, k0: int, k1: int) -> packing.Packing:
    """Instances [k0, k1) (k1 > k0) as a Packing of only the pieces they cover."""
    p0 = int(np.searchsorted(self.starts, k0, "right")) - 1
    p1 = int(np.searchsorted(self.starts, k1 - 1, "right")) - 1
    starts, firsts, rows, pieces = [], [], [], 0
    for p in range(p0, p1 + 1):
      with np.load(io.BytesIO(storage.read_bytes(self.pages[p][0])), allow_pickle=False) as z:
        starts.append(z["piece_starts"][:-1])
        firsts.append(z["doc_first"])
        rows.append(z["instances"] + pieces)
        end = z["piece_starts"][-1:]
      pieces += len(firsts[-1])
    joined = packing.Packing(np.concatenate(starts + [end]), np.concatenate(firsts),
                             np.concatenate(rows))
    return joined.window(k0 - int(self.starts[p0]), k1 - int(self.starts[p0]))
