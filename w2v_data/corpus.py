"""Reading text, building the frequency vocab and mapping tokens to ids, in parallel.

Pure Python + numpy (no TensorFlow), with a compiled splitter when the
`fast` extra is loaded (`kernels.count_kernel`: the same result). Each input
file is cut into chunks (`read_chunk_bytes`, at most `CHUNK_BYTES`) that end
at line ends; `count_chunk` (a pure function of the chunk's bytes, run in
worker processes) splits its lines into tokens and returns the chunk's own
small vocab (tokens in first-occurrence order, their counts) and its tokens
as local ids. The main process merges the chunks' counts in input order,
which gives exactly the counts, and the first-occurrence order of ties, of
one pass over the whole text, and notes each chunk's local -> global ids (an
array); each chunk's local ids are then mapped with one array lookup. No Python
string of the corpus outlives its chunk: the corpus is held as int32 ids plus
per-sentence lengths (4 bytes a token), which is what the vectorised sampler
consumes. The result does not depend on the chunk size or worker count.
A chunk that is not clean UTF-8 is decoded line by line in its worker
(`decoded_chunk`: lines replaced or skipped as `--on_decode_error` says, and
their line numbers in the file kept for errors).

Two ways of reading lines:
  "sentences" (skip-gram, CBOW): every line is a sentence, as d2l's
    `f.read().split('\\n')`: a file ending in a newline yields one more
    (empty) sentence after its last line.
  "documents" (paragraph vectors): every line is a document, optionally
    `id<TAB>text` (`id_column`); the final newline ends the last line; a line
    without an id or text is an error naming file:line; ids must be unique.
"""

import bisect
import collections
import contextlib
import dataclasses
import os
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from textrecords.engine import parallel
from textrecords.files import storage
from textrecords.files import text_input
from textrecords.datasets import vocab as vocab_lib
from textrecords.errors import UserError
from w2v_data import kernel_loader
from w2v_data import schema

CHUNK_BYTES = 1 << 20  # bytes per read unit at most (the output does not depend on it)
MIN_CHUNK_BYTES = 1 << 18
CHUNKS_PER_WORKER = 2  # at least, where chunks stay >= MIN_CHUNK_BYTES
_END = "\x00"  # marks the end of each line in a chunk's token list


@dataclasses.dataclass
class _Vocabulary:
  """What both forms of a read corpus hold besides its tokens' ids.

  Attributes:
    tokens: the vocab; tokens[0] is "<unk>".
    counts: int64 [V]; counts[i] = occurrences of tokens[i] (counts[0]: tokens
      that mapped to <unk>, rare ones and literal "<unk>").
    raw_tokens: tokens before dropping <unk>.
    line_of: (file, line) of each sentence index, for error messages.
    doc_names: "documents" reading: the id of each document (line); else None.
  """
  tokens: List[str]
  counts: np.ndarray
  raw_tokens: int
  line_of: "LineMap"
  doc_names: Optional[List[str]] = dataclasses.field(default=None, kw_only=True)


@dataclasses.dataclass
class Corpus(_Vocabulary):
  """Sentences (or documents) as ids, `<unk>` (id 0) already dropped.

  Attributes (besides `_Vocabulary`'s):
    ids: int32, every non-<unk> token of every sentence, in order.
    lengths: int64 [S], tokens of each sentence left in `ids`.
  """
  ids: np.ndarray
  lengths: np.ndarray

  @property
  def num_sentences(self) -> int:
    return len(self.lengths)

  @property
  def num_tokens(self) -> int:
    """N: tokens left after dropping <unk> (the subsampling denominator)."""
    return int(self.lengths.sum())


class LineMap:
  """(file, line) of each sentence index, stored per read chunk.

  >>> m = LineMap(); m.add("a.txt", 0, 3, None); m.add("b.txt", 3, 2, [4, 9])
  >>> m.add("b.txt", 5, 2, None, base=9)
  >>> m[1], m[4], m[6], m.count
  (('a.txt', 2), ('b.txt', 9), ('b.txt', 11), 7)
  """

  def __init__(self):
    self._starts: List[int] = []
    self._files: List[Tuple[str, Optional[List[int]], int]] = []
    self.count = 0

  def add(self, path: str, first: int, count: int, lines: Optional[List[int]],
          base: int = 0):
    """Sentences first..first+count-1 are lines base+1..base+count of `path`, or `lines`."""
    self._starts.append(first)
    self._files.append((path, lines, base))
    self.count = first + count

  def __getitem__(self, index: int) -> Tuple[str, int]:
    k = bisect.bisect_right(self._starts, index) - 1
    path, lines, base = self._files[k]
    offset = index - self._starts[k]
    return path, base + offset + 1 if lines is None else lines[offset]


@dataclasses.dataclass(frozen=True)
class ReadMode:
  """How lines become units: "sentences" or "documents" (optionally with ids)."""
  kind: str = "sentences"
  id_column: bool = False


SENTENCES = ReadMode()


@dataclasses.dataclass
class ChunkCounts:
  """What `count_chunk` returns for one chunk of lines.

  Attributes:
    tokens: the chunk's distinct tokens in first-occurrence order (no _END).
    counts: int64, occurrences of each of `tokens` in the chunk.
    local_ids: int32, each token of the chunk as an index into `tokens`, and
      -1 at the end of each line.
    num_lines: lines (sentences or documents) in the chunk.
    doc_names: documents with ids: each line's id; else None.
    error: (0-based line within the chunk, message) if a line is bad; the
      other fields are then empty.
    unclean: a line kept holds NUL, the file's first
      `text_input.BINARY_PROBE_BYTES` hold one, or (on_decode_error="strict")
      invalid UTF-8: the file is in error (`raise_unclean_error` names it).
    linenos: read line by line (invalid UTF-8 replaced or skipped): each
      sentence's 1-based line number within the chunk; None: lines 1, 2, ...
    file_lines: the chunk's lines in the file, skipped ones included (None:
      `num_lines`).
    decode_errors: (lines replaced, lines skipped) as invalid UTF-8.
  """
  tokens: List[str]
  counts: np.ndarray
  local_ids: np.ndarray
  num_lines: int
  doc_names: Optional[List[str]] = None
  error: Optional[Tuple[int, str]] = None
  unclean: bool = False
  linenos: Optional[np.ndarray] = None
  file_lines: Optional[int] = None
  decode_errors: Tuple[int, int] = (0, 0)

  def lines_in_file(self) -> int:
    """Lines of the file the chunk covers (skipped lines included)."""
    return self.num_lines if self.file_lines is None else self.file_lines


def _lines_to_counts(text: str, num_lines: int, doc_names=None) -> ChunkCounts:
  """Tokens of `text` (lines joined by "\\n", no final newline) as local ids."""
  # One str.split over the whole chunk (newlines turned into _END tokens) is
  # several times faster than splitting line by line.
  toks = text.replace("\n", f" {_END} ").split()
  toks.append(_END)
  index = dict.fromkeys(toks)  # distinct tokens, first-occurrence order (C speed)
  del index[_END]
  for i, t in enumerate(index):
    index[t] = i
  index[_END] = -1
  local = np.fromiter(map(index.__getitem__, toks), dtype=np.int32, count=len(toks))
  del index[_END]
  counts = np.bincount(local[local >= 0], minlength=len(index)).astype(np.int64)
  return ChunkCounts(tokens=list(index), counts=counts, local_ids=local,
                     num_lines=num_lines, doc_names=doc_names)


def _bytes_to_counts(data: bytes, num_lines: int, doc_names=None) -> ChunkCounts:
  """`_lines_to_counts` of `data` (valid UTF-8 without NUL): the same result,
  from the compiled kernel when this process has it loaded."""
  kern = kernel_loader.loaded()
  if kern is None:
    return _lines_to_counts(data.decode("utf-8"), num_lines, doc_names)
  local, first, length, counts = kern.count_kernel(np.frombuffer(data, np.uint8).copy(),
                                                   space_table())
  tokens = [data[a:a + n].decode("utf-8") for a, n in zip(first.tolist(), length.tolist())]
  return ChunkCounts(tokens=tokens, counts=counts, local_ids=local, num_lines=num_lines,
                     doc_names=doc_names)


_SPACE = []


def space_table() -> np.ndarray:
  """bool per code point up to U+3000: whitespace as `str.split()` sees it
  (no code point above U+3000 is whitespace; a test checks all of them)."""
  if not _SPACE:
    _SPACE.append(np.array([chr(c).isspace() for c in range(0x3001)], dtype=np.bool_))
  return _SPACE[0]


def _empty(**kw) -> ChunkCounts:
  return ChunkCounts([], np.zeros(0, np.int64), np.zeros(0, np.int32), 0, **kw)


def _bad(line: int, message: str) -> ChunkCounts:
  return _empty(error=(line, message))


def count_chunk(data: bytes, last: bool, mode: ReadMode = SENTENCES) -> ChunkCounts:
  """Splits one chunk of a file (whole lines) into tokens and counts them.

  A pure function of its arguments (the unit of the parallel read).

  Args:
    data: the chunk's bytes: whole lines, each ending in "\\n" except maybe
      the file's last.
    last: the chunk ends the file.
    mode: how lines become sentences or documents.

  >>> c = count_chunk(b"a b a\\n\\nb c\\n", last=True)
  >>> c.tokens, c.counts.tolist(), c.local_ids.tolist(), c.num_lines
  (['a', 'b', 'c'], [2, 2, 1], [0, 1, 0, -1, -1, 1, 2, -1, -1], 4)
  >>> count_chunk(b"7\\tx y\\n8\\ty\\n", True, ReadMode("documents", True)).doc_names
  ['7', '8']
  """
  if b"\x00" in data:
    return _empty(unclean=True)
  try:
    text = None if data.isascii() else data.decode("utf-8")
  except UnicodeDecodeError:
    return _empty(unclean=True)
  if mode.kind == "sentences":
    # d2l: after the file's final newline comes one more (empty) sentence.
    if not last or data.endswith(b"\n"):
      data = data[:-1] if data.endswith(b"\n") else data
      extra = last
    else:
      extra = False
    num = data.count(b"\n") + 1 + (1 if extra else 0)
    if extra:
      data += b"\n"
    return _bytes_to_counts(data, num)
  if text is None:
    text = data.decode("ascii")
  if text.endswith("\n"):
    text = text[:-1]
  lines = text.split("\n")
  names = None
  if mode.id_column:
    names, texts = [], []
    for i, line in enumerate(lines):
      name, tab, rest = line.partition("\t")
      name = name.strip()
      if not tab or not name or any(c.isspace() for c in name):
        return _bad(i, "expected 'id<TAB>text' (--doc_id_column) with an id without spaces")
      names.append(name)
      texts.append(rest)
    lines = texts
  for i, line in enumerate(lines):
    if not line.strip():
      return _bad(i, "empty document text (every line must hold a document)")
  return _bytes_to_counts("\n".join(lines).encode("utf-8"), len(lines), names)


def read_chunk_bytes(files: Sequence[str], num_workers: int) -> int:
  """The read unit's size: at most CHUNK_BYTES, and such that the units come
  in a multiple of `num_workers`, at least CHUNKS_PER_WORKER each (so the
  last units do not keep one worker busy alone), but not below
  MIN_CHUNK_BYTES.

  >>> read_chunk_bytes([], 1) == CHUNK_BYTES
  True
  """
  if num_workers <= 1:
    return CHUNK_BYTES
  total = 0
  for path in files:
    try:
      total += storage.size(path)
    except OSError:
      pass  # reported when the file is read
  units = max(-(-total // CHUNK_BYTES), CHUNKS_PER_WORKER * num_workers)
  units = -(-units // num_workers) * num_workers
  return int(max(MIN_CHUNK_BYTES, min(CHUNK_BYTES, -(-total // units))))


def file_chunks(path: str, chunk_bytes: int) -> List[Tuple[int, int]]:
  """Byte ranges [start, end) of `path` of about chunk_bytes, each ending after a newline.

  Raises:
    UserError: an unreadable or empty file.
  """
  try:
    size = storage.size(path)
    f = storage.open_read(path)
  except OSError as e:
    raise UserError(f"cannot read {path}: {e.strerror}") from e
  if size == 0:
    f.close()
    raise UserError(f"{path}: empty file (expected one line per sentence or document)")
  bounds = [0]
  with f:
    while bounds[-1] + chunk_bytes < size:
      f.seek(bounds[-1] + chunk_bytes)
      rest = f.readline()  # up to and including the next newline
      end = f.tell() if rest.endswith(b"\n") else size
      if end >= size:
        break
      bounds.append(end)
  bounds.append(size)
  return list(zip(bounds[:-1], bounds[1:]))


@dataclasses.dataclass(frozen=True)
class _ReadUnit:
  path: str
  start: int
  end: int
  last: bool
  mode: ReadMode
  on_decode_error: str = "strict"
  ids_path: Optional[str] = None  # where the worker leaves the chunk's local ids


def _read_unit(unit: _ReadUnit) -> ChunkCounts:
  """Reads and counts one chunk; runs in a worker.

  With `unit.ids_path`, the local ids are written there (raw int32) and the
  result carries that path instead of the array: the main process never
  holds the corpus's ids, and a result is a few kB to send instead of 4
  bytes a token.
  """
  result = read_chunk(unit.path, unit.start, unit.end, unit.last, unit.mode,
                      unit.on_decode_error)
  if unit.ids_path is not None and result.error is None and not result.unclean:
    result.local_ids.tofile(unit.ids_path)
    result.local_ids = unit.ids_path
  return result


def local_ids_of(local_ids) -> np.ndarray:
  """A piece's local ids: the array, or read from the file a worker left them in."""
  if isinstance(local_ids, str):
    return np.fromfile(local_ids, dtype=np.int32)
  return local_ids


def read_chunk(path: str, start: int, end: int, last: bool,
               mode: ReadMode = SENTENCES, on_decode_error: str = "strict",
               data: Optional[bytes] = None) -> ChunkCounts:
  """`count_chunk` of bytes [start, end) of `path` (the read unit of both
  engines; `data`: those bytes, already read).

  Counts with the compiled splitter if it is loaded or quick to load (built
  ahead of time: a Beam worker loads it here once). A range that is not
  clean UTF-8 (or holds NUL bytes) is decoded line by line (`decoded_chunk`)
  unless `on_decode_error` is "strict" or a NUL byte makes the file look
  binary (then `unclean`).
  """
  kernel_loader.load_if_built()
  if data is None:
    try:
      with storage.open_read(path, block_size=text_input.URL_BLOCK_BYTES) as f:
        f.seek(start)
        data = f.read(end - start)
    except OSError as e:
      return _bad(0, f"cannot read: {e.strerror}")
  binary = b"\x00" in data[:max(0, text_input.BINARY_PROBE_BYTES - start)]
  if start == 0:
    data = text_input.drop_bom(data)
  result = count_chunk(data, last, mode)
  if result.unclean and on_decode_error != "strict" and not binary:
    ends_line = data.endswith(b"\n")
    return decoded_chunk(text_input.LineChunk(path, start, end), last and ends_line, mode,
                         on_decode_error)
  return result


def _unit_line_ends(path: str, start: int, end: int, mode: ReadMode):
  """`read_unit`'s (lo, hi, last, extra, None) read from an open file."""
  try:
    with storage.open_read(path, block_size=text_input.URL_BLOCK_BYTES) as f:
      size = f.seek(0, os.SEEK_END)
      lo, hi = text_input.whole_lines(f, start, end, size)
      last = end >= size
      extra = False
      if hi == lo and last and mode.kind == "sentences" and size:
        f.seek(size - 1)
        extra = f.read(1) == b"\n"
  except OSError as e:
    raise UserError(f"cannot read {path}: {e.strerror}") from e
  return lo, hi, last, extra, None


def read_unit(path: str, start: int, end: int, mode: ReadMode = SENTENCES,
              on_decode_error: str = "strict") -> Tuple[ChunkCounts, int]:
  """`read_chunk` of the whole lines that start in bytes [start, end) of
  `path` (a range cut from the file's size alone, `protocol.Unit`), and the
  offset where those lines start. The file's last range (`end` at its
  size) gets d2l's empty sentence after a final newline even when no line
  starts in it.

  Raises:
    UserError: an unreadable file.
  """
  got = text_input.range_read(path, start, end) if storage.is_url(path) and start < end else None
  if got is not None:  # one request
    lo, hi, data = got.chunk.start, got.chunk.end, got.chunk.data
    last = got.size is not None and end >= got.size
    extra = hi == lo and last and mode.kind == "sentences" and got.last_byte == b"\n"
  else:
    lo, hi, last, extra, data = _unit_line_ends(path, start, end, mode)
  if hi > lo:
    return read_chunk(path, lo, hi, last, mode, on_decode_error, data), lo
  if extra:  # one empty sentence
    return ChunkCounts([], np.zeros(0, np.int64), np.full(1, -1, np.int32), 1), lo
  return _empty(), lo


def line_steps(linenos: Optional[np.ndarray]) -> Optional[tuple]:
  """A chunk's sentence line numbers (`ChunkCounts.linenos`) in a few
  numbers: (sentence offsets where the gap to offset + 1 changes, the gaps),
  or None when every sentence j is on line j + 1 (`line_in_chunk` reads it).

  >>> line_steps(np.array([1, 2, 4, 5, 8])), line_steps(np.array([1, 2])), line_steps(None)
  (((2, 4), (1, 3)), None, None)
  """
  if linenos is None or not len(linenos):
    return None
  gaps = np.asarray(linenos, np.int64) - np.arange(1, len(linenos) + 1)
  at = np.flatnonzero(np.diff(np.r_[0, gaps]))
  if not len(at):
    return None
  return tuple(at.tolist()), tuple(gaps[at].tolist())


def line_in_chunk(offset: int, steps: Optional[tuple]) -> int:
  """The 1-based line within its chunk of sentence `offset` (`line_steps`).

  >>> [line_in_chunk(j, ((2, 4), (1, 3))) for j in range(5)]
  [1, 2, 4, 5, 8]
  """
  if steps is None:
    return offset + 1
  k = bisect.bisect_right(steps[0], offset) - 1
  return offset + 1 + (steps[1][k] if k >= 0 else 0)


def decoded_chunk(chunk: "text_input.LineChunk", extra: bool, mode: ReadMode,
                  on_decode_error: str) -> ChunkCounts:
  """A range with invalid UTF-8 or NUL bytes, decoded line by line
  (`text_input.chunk_lines`: lines replaced or skipped): what `count_chunk`
  gives for its kept lines, with their line numbers and the decode counts
  (`unclean` if a kept line holds NUL; a skipped one is dropped whole).

  Args:
    chunk: the byte range (whole lines).
    extra: sentences: the file ends here after a newline (d2l's empty
      sentence after it).
    mode: how lines become sentences or documents.
    on_decode_error: "replace" or "skip_line".
  """
  decode = text_input.DecodeErrorCounts()
  positions = []
  lines, file_lines = text_input.chunk_lines(chunk, on_decode_error, counts=decode,
                                             positions=positions)
  if any(_END in line for line in lines):
    return _empty(unclean=True)
  skipped = np.array([p[0] for p in positions if p[2]], np.int64)
  kept = np.arange(len(lines), dtype=np.int64)
  linenos = kept + 1 + np.searchsorted(skipped, kept, side="right")
  if mode.kind == "sentences" and extra:
    lines.append("")
    linenos = np.append(linenos, file_lines + 1)
  if not lines:
    result = _empty()
  elif mode.kind == "sentences":
    result = _bytes_to_counts("\n".join(lines).encode("utf-8"), len(lines))
  else:
    result = count_chunk("".join(line + "\n" for line in lines).encode("utf-8"), True, mode)
    if result.error is not None:  # as a line of the chunk, skipped lines counted
      result.error = (int(linenos[result.error[0]]) - 1, result.error[1])
  result.linenos, result.file_lines = linenos, file_lines
  result.decode_errors = decode.as_tuple()
  return result


def raise_unclean_error(path: str, on_decode_error: str, shown: Optional[str] = None):
  """Raises the UserError of a file with a chunk `read_chunk` found unclean:
  NUL bytes, or invalid UTF-8 under "strict", naming the first such line
  (the file as `shown`, default `path`)."""
  shown = path if shown is None else shown
  try:
    for lineno, text in text_input.read_lines(path, on_decode_error):
      if _END in text:
        raise UserError(f"{shown}:{lineno}: NUL byte in the line; expected UTF-8 text")
  except UserError as e:
    if shown == path or not str(e).startswith(path):
      raise
    raise UserError(shown + str(e)[len(path):]) from None
  raise UserError(f"{shown}: changed while it was read (not valid UTF-8 at first)")


def build_vocab(counter: "collections.Counter", min_freq: int) -> List[str]:
  """`<unk>` then tokens with count >= min_freq, most frequent first.

  Ties keep first-occurrence order (the Counter's insertion order); a literal
  "<unk>" in the text is not a vocab entry (it maps to id 0).

  >>> build_vocab(collections.Counter("b a b c a b <unk> <unk> <unk>".split()), 2)
  ['<unk>', 'b', 'a']
  """
  return vocab_lib.frequency_vocab_from_counts(counter, min_freq, [schema.UNK])


def vocab_and_counts(counter: "collections.Counter", raw_tokens: int, min_freq: int,
                     files: Sequence[str]):
  """The vocab and its counts array from first-occurrence-ordered counts.

  Raises:
    UserError: no tokens at all, or a min_freq that leaves only <unk>.
  """
  if not raw_tokens:
    raise UserError(f"--input_file: no tokens in {', '.join(files)} (only blank lines)")
  tokens = build_vocab(counter, min_freq)
  if len(tokens) < 2:
    top, top_count = max(((t, c) for t, c in counter.items() if t != schema.UNK),
                         key=lambda tc: tc[1], default=(schema.UNK, 0))
    raise UserError(f"--min_freq={min_freq} leaves an empty vocabulary (the most "
                    f"frequent token, {top!r}, occurs {top_count} times); lower --min_freq")
  counts = np.zeros(len(tokens), dtype=np.int64)
  counts[1:] = [counter[t] for t in tokens[1:]]
  counts[0] = raw_tokens - int(counts[1:].sum())
  return tokens, counts


def slot_vocab(slot: Dict[str, int], total: np.ndarray, min_freq: int, files: Sequence[str],
               raw_tokens: Optional[int] = None):
  """`vocab_and_counts` of merged counts (token -> slot in first-occurrence
  order, the slots' counts) with array operations, and each slot's global id
  (0: <unk>). `raw_tokens`: every token's count when `slot` holds only some
  (a sharded pass's selected tokens); default: the slots' sum.

  A stable sort by count keeps ties in slot order, which is the
  first-occurrence order `build_vocab` keeps: the same vocab, without a
  Counter or a Python sort over every distinct token of the corpus.

  >>> toks, counts, ids = slot_vocab({"b": 0, "a": 1, "<unk>": 2, "c": 3},
  ...                                 np.array([3, 2, 3, 1]), 2, [])
  >>> toks, counts.tolist(), ids.tolist()
  (['<unk>', 'b', 'a'], [4, 3, 2], [1, 2, 0, 0])
  """
  order = np.argsort(-total, kind="stable")
  keep = order[total[order] >= min_freq]
  unk = slot.get(schema.UNK)
  if unk is not None:
    keep = keep[keep != unk]
  raw_tokens = int(total.sum()) if raw_tokens is None else raw_tokens
  if not raw_tokens or not len(keep):  # the errors, worded once
    vocab_and_counts(collections.Counter(dict(zip(slot, total.tolist()))), raw_tokens,
                     min_freq, files)
  names = list(slot)
  tokens = [schema.UNK] + [names[i] for i in keep.tolist()]
  counts = np.zeros(len(tokens), dtype=np.int64)
  counts[1:] = total[keep]
  counts[0] = raw_tokens - int(counts[1:].sum())
  global_of_slot = np.zeros(len(names), dtype=np.int32)
  global_of_slot[keep] = np.arange(1, len(keep) + 1, dtype=np.int32)
  return tokens, counts, global_of_slot


def global_ids(local_tokens: Sequence[str], local_ids: np.ndarray, index: Dict[str, int]):
  """A chunk's local ids -> (global ids without <unk>, tokens kept per line).

  >>> ids, lengths = global_ids(["a", "x"], np.array([0, 1, -1, -1], np.int32), {"a": 3})
  >>> ids.tolist(), lengths.tolist()
  ([3], [1, 0])
  """
  # Local id -> global id (0 = <unk>); slot -1 (line end) -> -1.
  remap = np.array([index.get(t, 0) for t in local_tokens] + [-1], dtype=np.int32)
  g = remap[local_ids]
  keep = g > 0
  ends = np.flatnonzero(g < 0)
  # each line with its end marker: segments whose starts strictly increase
  lengths = (np.add.reduceat(keep[:ends[-1] + 1], np.r_[0, ends[:-1] + 1], dtype=np.int64)
             if len(ends) else np.zeros(0, np.int64))
  after = int(keep[ends[-1] + 1:].sum()) if len(ends) else int(keep.sum())
  if after:  # tokens after the last line end (not from `count_chunk`)
    lengths = np.append(lengths, after)
  return g[keep], lengths


@dataclasses.dataclass
class CountedCorpus(_Vocabulary):
  """The vocab and the read chunks' local ids, before mapping them to global ids.

  Attributes (besides `_Vocabulary`'s):
    pieces: per read chunk, in input order, (int32: the global id of each of
      its distinct tokens, its local ids with -1 at each line end as
      `count_chunk` returns them, or the path of the file holding them).
    piece_lines: sentences (lines) of each piece.
  """
  pieces: List[Tuple[np.ndarray, object]]
  piece_lines: List[int]

  @property
  def num_sentences(self) -> int:
    return sum(self.piece_lines)

  @property
  def num_tokens(self) -> int:
    """Tokens that are not <unk> (equal to `Corpus.num_tokens`)."""
    return int(self.counts[1:].sum())


class PieceIds:
  """One piece's tokens as global ids, per line; built in a worker from a CountedCorpus piece.

  >>> p = PieceIds(np.array([3, 0, 4], np.int32), np.array([0, 1, -1, 2, -1, -1], np.int32))
  >>> [(i.tolist(), n.tolist()) for i, n in [p.lines(0, 3), p.lines(1, 2)]]
  [([3, 4], [1, 1, 0]), ([4], [1])]
  """

  def __init__(self, global_of_local: np.ndarray, local_ids):
    remap = np.append(global_of_local.astype(np.int32), np.int32(-1))  # local -1 -> -1
    self.ids = remap[local_ids_of(local_ids)]
    self.ends = np.flatnonzero(self.ids < 0)  # line j ends at ends[j]

  def lines(self, a: int, b: int) -> Tuple[np.ndarray, np.ndarray]:
    """(global ids without <unk>, tokens per line) of lines a..b-1."""
    start = 0 if a == 0 else int(self.ends[a - 1]) + 1
    seg = self.ids[start:int(self.ends[b - 1]) + 1] if b > a else self.ids[:0]
    end = seg < 0
    owner = np.cumsum(end) - end
    keep = seg > 0
    return seg[keep], np.bincount(owner[keep], minlength=b - a).astype(np.int64)


def load_corpus(files: Sequence[str], min_freq: int, on_decode_error: str = "strict",
                num_workers: int = 1, mode: ReadMode = SENTENCES,
                chunk_bytes: Optional[int] = None,
                counts: Optional[text_input.DecodeErrorCounts] = None) -> Corpus:
  """Reads `files` (in parallel), builds the vocab and maps every token to its id.

  `counts`, if given, counts the lines replaced or skipped as invalid UTF-8.

  Raises:
    UserError: an empty or unreadable file, invalid UTF-8 (strict), binary
      data, a bad document line, a duplicate document id, no tokens at all, or
      a `min_freq` that leaves no word besides <unk>.
  """
  c = count_corpus(files, min_freq, on_decode_error, num_workers, mode, chunk_bytes, counts)
  ids, lengths = [], []
  for (global_of_local, local_ids), num_lines in zip(c.pieces, c.piece_lines):
    chunk_ids, chunk_lengths = PieceIds(global_of_local, local_ids).lines(0, num_lines)
    ids.append(chunk_ids)
    lengths.append(chunk_lengths)
  return Corpus(tokens=c.tokens, counts=c.counts, ids=np.concatenate(ids),
                lengths=np.concatenate(lengths), raw_tokens=c.raw_tokens, line_of=c.line_of,
                doc_names=c.doc_names)


class _SlotCounts:
  """Token counts merged chunk by chunk: token -> slot (first-occurrence
  order) and each slot's count.

  >>> m = _SlotCounts()
  >>> m.add(["a", "b"], np.array([2, 1])).tolist(), m.add(["b", "c"], np.array([1, 5])).tolist()
  ([0, 1], [1, 2])
  >>> m.total[:3].tolist()
  [2, 2, 5]
  """

  def __init__(self):
    self.slot: Dict[str, int] = {}
    self.total = np.zeros(1024, dtype=np.int64)

  def add(self, tokens: List[str], counts: np.ndarray) -> np.ndarray:
    """Counts a chunk's distinct tokens in; returns their slots (int32)."""
    slot = self.slot
    slots = np.array([slot.setdefault(t, len(slot)) for t in tokens], dtype=np.int32)
    if len(slot) > len(self.total):
      grown = np.zeros(max(len(slot), 2 * len(self.total)), np.int64)
      grown[:len(self.total)] = self.total
      self.total = grown
    self.total[slots] += counts  # a chunk's tokens are distinct
    return slots


def count_corpus(files: Sequence[str], min_freq: int, on_decode_error: str = "strict",
                 num_workers: int = 1, mode: ReadMode = SENTENCES,
                 chunk_bytes: Optional[int] = None,
                 counts: Optional[text_input.DecodeErrorCounts] = None,
                 started: Optional[Callable[[], None]] = None,
                 ids_dir: Optional[str] = None) -> CountedCorpus:
  """`load_corpus` without the mapping to global ids (workers do that: `PieceIds`).

  `started`, if given, is called once the read is under way (its worker
  processes, if any, started), so that the caller can overlap other work
  with it. `ids_dir`, with worker processes: each chunk's local ids stay in
  a file there (the pieces then hold its path; see `local_ids_of`).

  Raises:
    UserError: as `load_corpus`.
  """
  if kernel_loader.loaded() is not None:
    space_table()  # built once, before the workers fork
  units = _read_units(files, num_workers, mode, chunk_bytes, ids_dir, on_decode_error)
  acc = _Accumulator(_DocNames() if mode.kind == "documents" else None)
  results = parallel.ordered_map(_read_unit, units, num_workers, reuse_memory=True)
  with contextlib.closing(results):  # a bad line stops the workers before it raises on
    for i, (unit, result) in enumerate(zip(units, results)):
      if i == 0 and started is not None:
        started()
      acc.add_chunk(unit.path, result, on_decode_error)
      if counts is not None:
        counts.add(result.decode_errors)
      if unit.last:
        acc.file_lines = 0
  merged = acc.merged
  slot, total = merged.slot, merged.total[:len(merged.slot)]
  tokens, counts, global_of_slot = slot_vocab(slot, total, min_freq, files)
  raw_tokens = int(total.sum())
  pieces = [(global_of_slot[slots], local_ids) for slots, local_ids in acc.pieces]
  return CountedCorpus(tokens=tokens, counts=counts, raw_tokens=raw_tokens,
                       line_of=acc.line_of, pieces=pieces, piece_lines=acc.piece_lines,
                       doc_names=None if acc.docs is None else acc.docs.names)


class _Accumulator:
  """The read chunks merged in input order, as each arrives (while the
  workers read on): token -> slot in first-occurrence order and the slots'
  counts (one array add per chunk), the pieces, line map and document ids."""

  def __init__(self, docs: Optional["_DocNames"]):
    self.merged = _SlotCounts()
    self.pieces = []  # (chunk's slots, local ids) in input order
    self.piece_lines: List[int] = []
    self.line_of = LineMap()
    self.docs = docs
    self.file_lines = 0  # lines of the current file before the next chunk

  def add_chunk(self, path: str, result: ChunkCounts, on_decode_error: str):
    """Merges the next chunk of the current file (its first error raises).

    Raises:
      UserError: a bad line, NUL bytes or (strict) invalid UTF-8, naming
        the line in the file.
    """
    if result.unclean:
      raise_unclean_error(path, on_decode_error)
    if result.error is not None:
      raise UserError(f"{path}:{self.file_lines + result.error[0] + 1}: {result.error[1]}")
    linenos = None if result.linenos is None else (result.linenos + self.file_lines).tolist()
    self.line_of.add(path, self.line_of.count, result.num_lines, linenos, self.file_lines)
    self.pieces.append((self.merged.add(result.tokens, result.counts), result.local_ids))
    self.piece_lines.append(result.num_lines)
    if self.docs is not None:
      self.docs.add(result.doc_names, result.num_lines, self.line_of)
    self.file_lines += result.lines_in_file()


def _read_units(files: Sequence[str], num_workers: int, mode: ReadMode,
                chunk_bytes: Optional[int], ids_dir: Optional[str],
                on_decode_error: str = "strict") -> list:
  """The read work: each file cut into chunks of whole lines (`_ReadUnit`s,
  in input order), each with its ids file in `ids_dir` when workers read."""
  if not chunk_bytes:
    chunk_bytes = read_chunk_bytes(files, num_workers)
  units = []
  for path in files:
    chunks = file_chunks(path, chunk_bytes)
    units.extend(_ReadUnit(path, a, b, i == len(chunks) - 1, mode, on_decode_error)
                 for i, (a, b) in enumerate(chunks))
  if ids_dir is not None and num_workers > 1:
    units = [dataclasses.replace(u, ids_path=os.path.join(ids_dir, f"ids-{i:07d}"))
             for i, u in enumerate(units)]
  return units


class _DocNames:
  """Paragraph vectors' document ids in corpus order, each checked unique."""

  def __init__(self):
    self.names: List[str] = []
    self.index: Dict[str, int] = {}

  def add(self, names: Optional[List[str]], num_lines: int, line_of: "LineMap"):
    """The ids of a chunk's `num_lines` documents (None: their numbers in
    the corpus). Raises UserError naming both lines of a repeated id."""
    names = names or [str(len(self.names) + i) for i in range(num_lines)]
    for name in names:
      if name in self.index:
        path, line = line_of[len(self.names)]
        raise UserError(f"{path}:{line}: duplicate document id {name!r} (first at "
                        "{}:{})".format(*line_of[self.index[name]]))
      self.index[name] = len(self.names)
      self.names.append(name)
