"""Documents: text files -> tokenized corpus, compact (one int32 array).

Reading follows the reference: lines end at "\\n", every "\\r" byte is dropped,
each line is decoded as UTF-8 and `str.strip()`ped; an empty line starts a new
document; a line with tokens is one segment of the current document. Documents
continue across file boundaries. Empty documents are removed.

The corpus is held as `tokens` (all ids), `seg_starts` (segment boundaries in
`tokens`) and `doc_starts` (document boundaries in segments), so a 40 GB
corpus costs 4 bytes a token, not Python lists.
"""

import dataclasses
import io
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from textrecords.files import storage
from textrecords.files import text_input
from textrecords.errors import UserError

# A line batch sent to a tokenizer worker: (lines, is_break flags).
_BATCH_LINES = 4096


@dataclasses.dataclass
class Corpus:
  """A tokenized corpus.

  Example (two documents: [[5, 6], [7]] and [[8]]):
    >>> c = Corpus(np.array([5, 6, 7, 8], np.int32), np.array([0, 2, 3, 4]),
    ...            np.array([0, 2, 3]))
    >>> c.num_docs, c.document(0), c.document(1)
    (2, [[5, 6], [7]], [[8]])
  """
  tokens: np.ndarray
  seg_starts: np.ndarray
  doc_starts: np.ndarray

  @property
  def num_docs(self) -> int:
    return len(self.doc_starts) - 1

  @property
  def num_tokens(self) -> int:
    return int(self.tokens.size)

  def document(self, d: int) -> List[List[int]]:
    """Document d as a list of segments (lists of ids)."""
    s0, s1 = int(self.doc_starts[d]), int(self.doc_starts[d + 1])
    bounds = self.seg_starts[s0:s1 + 1].tolist()
    flat = self.tokens[bounds[0]:bounds[-1]].tolist()
    base = bounds[0]
    return [flat[a - base:b - base] for a, b in zip(bounds[:-1], bounds[1:])]

  def num_segments(self, d: int) -> int:
    return int(self.doc_starts[d + 1] - self.doc_starts[d])

  def tokens_from(self, d: int, start: int, min_tokens: int) -> List[int]:
    """Segments start, start+1, ... of document d, concatenated, stopping once
    at least `min_tokens` are taken (or at the document's end)."""
    t0, t1 = self.span_from(d, start, min_tokens)
    return self.tokens[t0:t1].tolist()

  def span_from(self, d: int, start: int, min_tokens: int):
    """As `tokens_from`, as a range [t0, t1) of `tokens`."""
    s0 = int(self.doc_starts[d]) + start
    s_end = int(self.doc_starts[d + 1])
    t0 = int(self.seg_starts[s0])
    ends = self.seg_starts[s0 + 1:s_end + 1]
    k = int(np.searchsorted(ends, t0 + max(min_tokens, 1), side="left"))
    return t0, int(ends[min(k, len(ends) - 1)])

  def segment_bounds(self, d: int) -> List[int]:
    """Document d's segment boundaries as offsets into `tokens` (n + 1 values)."""
    return self.seg_starts[int(self.doc_starts[d]):int(self.doc_starts[d + 1]) + 1].tolist()

  def reordered(self, order: Sequence[int]) -> "Corpus":
    """The same documents in another order (order[i] = old index of new doc i)."""
    docs_tokens, seg_lens, doc_nsegs = [], [], []
    for d in order:
      s0, s1 = int(self.doc_starts[d]), int(self.doc_starts[d + 1])
      t0, t1 = int(self.seg_starts[s0]), int(self.seg_starts[s1])
      docs_tokens.append(self.tokens[t0:t1])
      seg_lens.append(np.diff(self.seg_starts[s0:s1 + 1]))
      doc_nsegs.append(s1 - s0)
    return Corpus(np.concatenate(docs_tokens) if docs_tokens else self.tokens[:0],
                  _starts(np.concatenate(seg_lens) if seg_lens else np.zeros(0, np.int64)),
                  _starts(np.asarray(doc_nsegs, np.int64)))


def _starts(lengths: np.ndarray) -> np.ndarray:
  out = np.zeros(len(lengths) + 1, np.int64)
  np.cumsum(lengths, out=out[1:])
  return out


def iter_line_batches(files: Sequence[str], on_decode_error: str,
                      batch: int = _BATCH_LINES,
                      counts: Optional[text_input.DecodeErrorCounts] = None
                      ) -> Iterator[List[str]]:
  """Yields lists of stripped lines across all files ('' = document break).

  `counts`, if given, counts the lines replaced or skipped as invalid UTF-8.
  """
  out = []
  for path in files:
    for _, line in text_input.read_lines(path, on_decode_error, drop_cr=True,
                                         counts=counts):
      out.append(line.strip())
      if len(out) >= batch:
        yield out
        out = []
  if out:
    yield out


def encode_lines(lines: Sequence[str], encode_batch) -> Tuple[np.ndarray, np.ndarray]:
  """Tokenizes a batch of stripped lines into (flat ids, lengths).

  A length of -1 marks an empty line (a document break); 0 a line without
  tokens.

  >>> encode_lines(["a b", "", "c"], lambda ls: [[len(w) for w in l.split()] for l in ls])
  (array([1, 1, 1], dtype=int32), array([ 2, -1,  1], dtype=int32))
  """
  ids = encode_batch([line for line in lines if line])
  lengths = np.full(len(lines), -1, np.int32)
  flat = []
  k = 0
  for i, line in enumerate(lines):
    if line:
      lengths[i] = len(ids[k])
      flat.extend(ids[k])
      k += 1
  return np.asarray(flat, np.int32), lengths


class CorpusBuilder:
  """Accumulates tokenized line batches into a Corpus, by the reference's rules."""

  def __init__(self):
    self._tokens: List[np.ndarray] = []
    self._seg_lens: List[np.ndarray] = []
    self._doc_nsegs: List[int] = []
    self._cur = 0   # segments in the current document
    self.lines = 0

  def add(self, flat: np.ndarray, lengths: np.ndarray):
    """Adds one batch from `encode_lines`."""
    self._tokens.append(flat)
    self.add_lengths(lengths)

  def add_lengths(self, lengths: np.ndarray):
    """Adds one batch's structure only (its tokens are kept elsewhere)."""
    self.lines += len(lengths)
    self._seg_lens.append(lengths[lengths > 0])
    breaks = np.flatnonzero(lengths < 0)
    segs = lengths > 0
    start = 0
    for b in breaks.tolist():
      self._cur += int(np.count_nonzero(segs[start:b]))
      self._end_document()
      start = b + 1
    self._cur += int(np.count_nonzero(segs[start:]))

  def _end_document(self):
    if self._cur:
      self._doc_nsegs.append(self._cur)
    self._cur = 0

  def build(self, tokens=None) -> Corpus:
    """The Corpus; `tokens` replaces the added token arrays (an array-like
    indexed by global token offset, e.g. a `TokenStore`)."""
    self._end_document()
    if tokens is None:
      tokens = np.concatenate(self._tokens) if self._tokens else np.zeros(0, np.int32)
    seg_lens = (np.concatenate(self._seg_lens).astype(np.int64) if self._seg_lens
                else np.zeros(0, np.int64))
    return Corpus(tokens, _starts(seg_lens), _starts(np.asarray(self._doc_nsegs, np.int64)))


class TokenStore:
  """The corpus token array kept as one .npy file per line batch, read lazily.

  Supports what the instance builders and maskers do with `Corpus.tokens`:
  slices, integer-array indexing and `.size`. Batch files are memory-mapped
  (a few at a time), so a worker holds only the pages it reads.

  Example:
    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> np.save(os.path.join(d, "a.npy"), np.array([5, 6], np.int32))
    >>> np.save(os.path.join(d, "b.npy"), np.array([7, 8, 9], np.int32))
    >>> t = TokenStore([os.path.join(d, "a.npy"), os.path.join(d, "b.npy")], [0, 2, 5])
    >>> t[1:4].tolist(), t[np.array([4, 0])].tolist(), t.size
    ([6, 7, 8], [9, 5], 5)
  """

  _OPEN = 64  # memory maps kept open

  def __init__(self, paths: Sequence[str], offsets: Sequence[int]):
    self.paths = list(paths)
    self.offsets = np.asarray(offsets, np.int64)
    self.size = int(self.offsets[-1]) if len(self.offsets) else 0
    self._maps = {}

  def __getstate__(self):
    return {"paths": self.paths, "offsets": self.offsets, "size": self.size, "_maps": {}}

  def _batch(self, b: int) -> np.ndarray:
    m = self._maps.pop(b, None)
    if m is None:
      if len(self._maps) >= self._OPEN:
        self._maps.pop(next(iter(self._maps)))
      m = _load_batch(self.paths[b]) if self.offsets[b + 1] > self.offsets[b] \
          else np.zeros(0, np.int32)
    self._maps[b] = m
    return m

  def __getitem__(self, index):
    if isinstance(index, slice):
      start, stop, _ = index.indices(self.size)
      if stop <= start:
        return np.zeros(0, np.int32)
      b0 = int(np.searchsorted(self.offsets, start, "right")) - 1
      b1 = int(np.searchsorted(self.offsets, stop - 1, "right")) - 1
      parts = []
      for b in range(b0, b1 + 1):
        lo, hi = max(start, self.offsets[b]), min(stop, self.offsets[b + 1])
        if hi > lo:
          parts.append(np.asarray(self._batch(b)[lo - self.offsets[b]:hi - self.offsets[b]]))
      return np.concatenate(parts) if parts else np.zeros(0, np.int32)
    index = np.asarray(index)
    out = np.empty(index.shape, np.int32)
    batches = np.searchsorted(self.offsets, index, "right") - 1
    for b in np.unique(batches).tolist():
      sel = batches == b
      out[sel] = self._batch(b)[index[sel] - self.offsets[b]]
    return out


def _load_batch(path: str) -> np.ndarray:
  """One batch file of a TokenStore: memory-mapped if local, downloaded if a
  URL (Beam workers' token ids under the output location)."""
  if storage.is_url(path):
    return np.load(io.BytesIO(storage.read_bytes(path)))
  return np.load(path, mmap_mode="r")


def read_corpus(tokenized_batches: Iterable[Tuple[np.ndarray, np.ndarray]],
                files: Sequence[str], progress=None) -> Corpus:
  """Builds a Corpus from `encode_lines` batches in reading order.

  Args:
    tokenized_batches: `(flat, lengths)` per batch or chunk of input lines, in reading order.
    files: the input files (for the error message).
    progress: optional callable taking the builder after each batch.
  Raises:
    UserError: if the files hold no document with a token.
  """
  builder = CorpusBuilder()
  for flat, lengths in tokenized_batches:
    builder.add(flat, lengths)
    if progress:
      progress(builder)
  return check_corpus(builder.build(), files)


def check_corpus(corpus: Corpus, files: Sequence[str]) -> Corpus:
  """The corpus, or a UserError if it holds no document."""
  if corpus.num_docs == 0:
    verb = "holds" if len(files) == 1 else "hold"
    raise UserError(f"--input_file: {', '.join(files)} {verb} no text "
                    "(no line yields a token)")
  return corpus


def iter_file_line_batches(path: str, on_decode_error: str, batch: int = _BATCH_LINES,
                           counts: Optional[text_input.DecodeErrorCounts] = None
                           ) -> Iterator[List[str]]:
  """As `iter_line_batches`, for one file (batches never span files)."""
  yield from iter_line_batches([path], on_decode_error, batch, counts)
