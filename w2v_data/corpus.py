"""Reading sentences, building the frequency vocab and mapping tokens to ids.

Pure Python + numpy (no TensorFlow). A corpus is held as one flat id array
plus per-sentence lengths, which is what the vectorised sampler consumes.
"""

import bisect
import collections
import dataclasses
import itertools
import os
from typing import List, Optional, Sequence, Tuple

import numpy as np

from textrecords import text_input
from textrecords import vocab as vocab_lib
from textrecords.errors import UserError
from w2v_data import schema


@dataclasses.dataclass
class Corpus:
  """Sentences as ids, `<unk>` (id 0) already dropped.

  Attributes:
    tokens: the vocab; tokens[0] is "<unk>".
    counts: int64 [V]; counts[i] = occurrences of tokens[i] (counts[0]: tokens
      that mapped to <unk>, rare ones and literal "<unk>").
    ids: int32, every non-<unk> token of every sentence, in order.
    lengths: int64 [S], tokens of each sentence left in `ids`.
    raw_tokens: tokens before dropping <unk>.
    line_of: (file, line) of each sentence index, for error messages.
  """
  tokens: List[str]
  counts: np.ndarray
  ids: np.ndarray
  lengths: np.ndarray
  raw_tokens: int
  line_of: "LineMap"

  @property
  def num_sentences(self) -> int:
    return len(self.lengths)

  @property
  def num_tokens(self) -> int:
    """N: tokens left after dropping <unk> (the subsampling denominator)."""
    return int(self.lengths.sum())


def _ends_with_newline(path: str) -> bool:
  with open(path, "rb") as f:
    f.seek(0, os.SEEK_END)
    if f.tell() == 0:
      return False
    f.seek(-1, os.SEEK_END)
    return f.read(1) == b"\n"


_END = "\x00"  # marks the end of each sentence in the flat token list


class LineMap:
  """(file, line) of each sentence index, stored per file.

  >>> m = LineMap(); m.add("a.txt", 0, 3, None); m.add("b.txt", 3, 2, [4, 9])
  >>> m[1], m[4], m.count
  (('a.txt', 2), ('b.txt', 9), 5)
  """

  def __init__(self):
    self._starts: List[int] = []
    self._files: List[Tuple[str, Optional[List[int]]]] = []
    self.count = 0

  def add(self, path: str, first: int, count: int, lines: Optional[List[int]]):
    """Sentences first..first+count-1 are lines 1..count of `path`, or `lines`."""
    self._starts.append(first)
    self._files.append((path, lines))
    self.count = first + count

  def __getitem__(self, index: int) -> Tuple[str, int]:
    k = bisect.bisect_right(self._starts, index) - 1
    path, lines = self._files[k]
    offset = index - self._starts[k]
    return path, offset + 1 if lines is None else lines[offset]


def _fast_tokens(path: str):
  """The file's tokens with _END after each line, if it is clean UTF-8 text, else None.

  One `str.split` over the whole text (newlines turned into _END tokens) is
  several times faster than splitting line by line.
  """
  try:
    with open(path, "rb") as f:
      data = f.read()
  except OSError as e:
    raise UserError(f"cannot read {path}: {e.strerror}") from e
  if b"\x00" in data:
    return None
  try:
    text = data.decode("utf-8")
  except UnicodeDecodeError:
    return None
  if text.endswith("\n"):
    text = text[:-1]
  tokens = text.replace("\n", f" {_END} ").split()
  tokens.append(_END)
  return tokens


def read_sentences(files: Sequence[str], on_decode_error: str = "strict"):
  """Whitespace-split sentences, one per line, as d2l reads them.

  Like d2l's `f.read().split('\\n')`, a file ending in a newline yields one
  more (empty) sentence after its last line.

  Returns:
    (flat token list with "\\x00" after each sentence, a LineMap).

  Raises:
    UserError: an empty or unreadable file, invalid UTF-8 (strict), binary data.
  """
  flat: List[str] = []
  line_of = LineMap()
  for path in files:
    try:
      size = os.path.getsize(path)
    except OSError as e:
      raise UserError(f"cannot read {path}: {e.strerror}") from e
    if size == 0:
      raise UserError(f"{path}: empty file (expected one sentence per line)")
    tokens = _fast_tokens(path)
    first = line_of.count
    if tokens is not None:
      flat.extend(tokens)
      lines = None
      count = tokens.count(_END)
    else:  # invalid UTF-8 or NUL bytes: read_lines reports them or applies on_decode_error
      lines = []
      for lineno, text in text_input.read_lines(path, on_decode_error):
        if _END in text:
          raise UserError(f"{path}:{lineno}: NUL byte in the line; expected UTF-8 text")
        flat.extend(text.split())
        flat.append(_END)
        lines.append(lineno)
      count = len(lines)
    if _ends_with_newline(path):
      flat.append(_END)
      if lines is not None:
        lines.append((lines[-1] if lines else 0) + 1)
      count += 1
    line_of.add(path, first, count, lines)
  return flat, line_of


def build_vocab(counter: "collections.Counter", min_freq: int) -> List[str]:
  """`<unk>` then tokens with count >= min_freq, most frequent first.

  Ties keep first-occurrence order (the Counter's insertion order); a literal
  "<unk>" in the text is not a vocab entry (it maps to id 0).

  >>> build_vocab(collections.Counter("b a b c a b <unk> <unk> <unk>".split()), 2)
  ['<unk>', 'b', 'a']
  """
  return vocab_lib.frequency_vocab_from_counts(counter, min_freq, [schema.UNK])


def load_corpus(files: Sequence[str], min_freq: int,
                on_decode_error: str = "strict") -> Corpus:
  """Reads `files`, builds the vocab and maps every token to its id.

  Raises:
    UserError: bad input (see `read_sentences`), no tokens at all, or a
      `min_freq` that leaves no word besides <unk>.
  """
  flat, line_of = read_sentences(files, on_decode_error)
  counter = collections.Counter(flat)
  num_sentences = counter.pop(_END)
  raw_tokens = len(flat) - num_sentences
  if not raw_tokens:
    raise UserError(f"--input_file: no tokens in {', '.join(files)} (only blank lines)")
  tokens = build_vocab(counter, min_freq)
  if len(tokens) < 2:
    top, top_count = max(((t, c) for t, c in counter.items() if t != schema.UNK),
                         key=lambda tc: tc[1], default=(schema.UNK, 0))
    raise UserError(f"--min_freq={min_freq} leaves an empty vocabulary (the most "
                    f"frequent token, {top!r}, occurs {top_count} times); lower --min_freq")
  index = {t: i for i, t in enumerate(tokens)}
  index[_END] = -1
  all_ids = np.fromiter(map(index.get, flat, itertools.repeat(0)), dtype=np.int32,
                        count=len(flat))
  counts = np.zeros(len(tokens), dtype=np.int64)
  counts[1:] = [counter[t] for t in tokens[1:]]
  counts[0] = raw_tokens - int(counts[1:].sum())
  end = all_ids < 0
  owner = np.cumsum(end) - end  # sentence of each token
  keep = all_ids > 0
  kept_lengths = np.bincount(owner[keep], minlength=num_sentences).astype(np.int64)
  return Corpus(tokens=tokens, counts=counts, ids=all_ids[keep], lengths=kept_lengths,
                raw_tokens=raw_tokens, line_of=line_of)
