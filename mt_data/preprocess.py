"""Cleaning, tokenizing and reading translation pairs (pure Python, no TF).

The rules follow d2l's `MTFra` reader, applied to each column separately:

* clean: U+202F and U+00A0 become a space, the text is lowercased, and a
  space is inserted before each of ``, . ! ?`` whose previous character is
  not a space (nothing is inserted at position 0);
* tokenize: split on the space character, drop empty tokens, append `<eos>`.

Lines are ``source<TAB>target[<TAB>anything]``: extra columns (the attribution
column of newer Tatoeba exports) are ignored. Lines with fewer than two
columns, and lines whose source or target has no token, are skipped and
counted by reason.
"""

import collections
import dataclasses
import re
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from textrecords.files import text_input

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<bos>", "<eos>"
RESERVED = (PAD, UNK, BOS, EOS)
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3

# Reasons a line is skipped (keys of the `skipped` counter in the summary).
SKIP_BLANK = "blank_line"
SKIP_COLUMNS = "fewer_than_2_columns"
SKIP_EMPTY = "empty_source_or_target"
SKIP_REASONS = (SKIP_BLANK, SKIP_COLUMNS, SKIP_EMPTY)

# The empty position before a punctuation mark whose previous character (in
# the text being cleaned) exists and is not a space. re.sub looks behind into
# the original string, so in "hi!!" both marks get a space: "hi ! !".
_BEFORE_PUNCT = re.compile(r"(?<=[^ ])(?=[,.!?])")

Pair = Tuple[List[str], List[str]]


def clean(text: str) -> str:
  """Normalises one side of a pair.

  >>> clean("Va\\u202f!")
  'va !'
  >>> clean("Hi!! Who, me?")
  'hi ! ! who , me ?'
  >>> clean("...")
  '. . .'
  """
  text = text.replace("\u202f", " ").replace("\u00a0", " ").lower()
  return _BEFORE_PUNCT.sub(" ", text)


def tokenize(cleaned: str) -> List[str]:
  """Space-split tokens of a cleaned text, without empties, plus `<eos>`.

  >>> tokenize("va  !")
  ['va', '!', '<eos>']
  >>> tokenize("")
  ['<eos>']
  """
  tokens = cleaned.split(" ")
  if "" in tokens:  # (most texts have no empty piece: no filtering pass)
    tokens = [t for t in tokens if t]
  tokens.append(EOS)
  return tokens


def parse_line(line: str) -> Tuple[Optional[Pair], Optional[str]]:
  """Splits, cleans and tokenizes one input line.

  Returns:
    ((source_tokens, target_tokens), None) for a usable pair, or
    (None, reason) with reason in SKIP_REASONS.

  >>> parse_line("Go.\\tVa !\\tCC-BY 2.0 (France) Attribution: tatoeba.org")
  ((['go', '.', '<eos>'], ['va', '!', '<eos>']), None)
  >>> parse_line("Hi.\\t ")
  (None, 'empty_source_or_target')
  """
  if not line.strip(" "):
    return None, SKIP_BLANK
  parts = line.split("\t")
  if len(parts) < 2:
    return None, SKIP_COLUMNS
  src = tokenize(clean(parts[0]))
  tgt = tokenize(clean(parts[1]))
  if len(src) < 2 or len(tgt) < 2:
    return None, SKIP_EMPTY
  return (src, tgt), None


def _has_token(side: str) -> bool:
  """True when `tokenize(clean(side))` has a token besides `<eos>`: cleaning
  only turns U+202F and U+00A0 into spaces, lowercases (never to a space)
  and inserts spaces, so a side has a token iff something else is left."""
  return bool(side.replace("\u202f", " ").replace("\u00a0", " ").strip(" "))


def skip_reason(line: str) -> Optional[str]:
  """`parse_line(line)`'s skip reason (None for a pair), without tokenizing.

  >>> skip_reason("Go.\\tVa !"), skip_reason("Hi.\\t\\u00a0"), skip_reason(" ")
  (None, 'empty_source_or_target', 'blank_line')
  """
  if not line.strip(" "):
    return SKIP_BLANK
  parts = line.split("\t", 2)
  if len(parts) < 2:
    return SKIP_COLUMNS
  if not (_has_token(parts[0]) and _has_token(parts[1])):
    return SKIP_EMPTY
  return None


class PairReader:
  """Reads pairs from files in order, counting lines and skips.

  Args:
    files: input paths, read in this order.
    on_decode_error: "strict" | "replace" | "skip_line" (see text_input).
    limit: stop after this many pairs (None: read everything).

  Attributes (after iteration):
    lines: lines read (not counting lines skipped as invalid UTF-8);
    skipped: Counter by reason; decode_errors: lines replaced or skipped as
    invalid UTF-8 (`text_input.DecodeErrorCounts`). With a limit, reading
    stops right after the line of the last pair needed, so the counts cover
    the lines up to it.
  """

  def __init__(self, files: Sequence[str], on_decode_error: str = "strict",
               limit: Optional[int] = None):
    self.files = list(files)
    self.on_decode_error = on_decode_error
    self.limit = limit
    self.lines = 0
    self.skipped = collections.Counter()
    self.decode_errors = text_input.DecodeErrorCounts()

  def __iter__(self) -> Iterator[Pair]:
    kept = 0
    if self.limit is not None and self.limit <= 0:
      return
    for path in self.files:
      for _, text in text_input.read_lines(path, self.on_decode_error,
                                           counts=self.decode_errors):
        self.lines += 1
        pair, reason = parse_line(text)
        if pair is None:
          self.skipped[reason] += 1
          continue
        kept += 1
        yield pair
        if self.limit is not None and kept >= self.limit:
          return

  def skipped_dict(self) -> dict:
    return {r: self.skipped.get(r, 0) for r in SKIP_REASONS}


@dataclasses.dataclass
class Side:
  """One side (source or target) of a block of pairs, with the block's own vocab.

  tokens: the distinct tokens in first-occurrence order; counts: how often
  each occurs; ids: every sentence's tokens as indexes into `tokens`,
  concatenated (int32); lengths: tokens per sentence (int32).
  """
  tokens: List[str]
  counts: List[int]
  ids: np.ndarray
  lengths: np.ndarray

  def global_ids(self, local_to_global: Sequence[int]) -> np.ndarray:
    """`ids` mapped through a vocabulary (local_to_global[i] = id of tokens[i])."""
    return np.asarray(local_to_global, np.int32)[self.ids] if self.tokens else self.ids

  def sentences(self) -> List[List[str]]:
    """The sentences as token lists again."""
    toks = self.tokens
    flat = [toks[i] for i in self.ids.tolist()]
    out, pos = [], 0
    for n in self.lengths.tolist():
      out.append(flat[pos:pos + n])
      pos += n
    return out


@dataclasses.dataclass
class PairBlock:
  """A stretch of input read, cleaned, tokenized and counted (in a worker).

  Blocks merge exactly: adding their counts in input order gives the counts
  of the whole input, in first-occurrence order. `decode_errors`: the lines
  replaced or skipped as invalid UTF-8 (not in `lines`, if skipped).
  """
  lines: int
  skipped: "collections.Counter"
  source: Side
  target: Side
  decode_errors: text_input.DecodeErrorCounts = dataclasses.field(
      default_factory=text_input.DecodeErrorCounts)

  @property
  def num_pairs(self) -> int:
    return len(self.source.lengths)


def _side(sentences: List[List[str]]) -> Side:
  flat = [t for s in sentences for t in s]
  counts = collections.Counter(flat)
  index = {t: i for i, t in enumerate(counts)}
  return Side(list(counts), list(counts.values()),
              np.fromiter(map(index.__getitem__, flat), np.int32, len(flat)),
              np.fromiter(map(len, sentences), np.int32, len(sentences)))


def pair_block(pairs: Sequence[Pair], lines: int, skipped,
               decode_errors: Optional[text_input.DecodeErrorCounts] = None) -> PairBlock:
  """Counts and indexes tokenized pairs.

  >>> b = pair_block([(["a", "b", "<eos>"], ["x", "<eos>"]), (["b", "<eos>"], ["y", "<eos>"])],
  ...                2, collections.Counter())
  >>> b.source.tokens, b.source.counts, b.source.ids.tolist(), b.source.lengths.tolist()
  (['a', 'b', '<eos>'], [1, 2, 2], [0, 1, 2, 1, 2], [3, 2])
  """
  return PairBlock(lines, collections.Counter(skipped),
                   _side([p[0] for p in pairs]), _side([p[1] for p in pairs]),
                   decode_errors or text_input.DecodeErrorCounts())


def read_block(chunk: text_input.LineChunk, on_decode_error: str = "strict") -> PairBlock:
  """Reads, cleans, tokenizes and counts the pairs of one input chunk."""
  decode_errors = text_input.DecodeErrorCounts()
  lines, _ = text_input.chunk_lines(chunk, on_decode_error, counts=decode_errors)
  pairs, skipped = [], collections.Counter()
  for text in lines:
    pair, reason = parse_line(text)
    if pair is None:
      skipped[reason] += 1
    else:
      pairs.append(pair)
  return pair_block(pairs, len(lines), skipped, decode_errors)


def merge_counts(sides: Iterable[Side]) -> "collections.Counter":
  """The token counts of several blocks' sides, in first-occurrence order.

  >>> a = pair_block([(["a", "b"], ["x"])], 1, {}).source
  >>> b = pair_block([(["c", "b"], ["x"])], 1, {}).source
  >>> merge_counts([a, b])
  Counter({'b': 2, 'a': 1, 'c': 1})
  >>> list(merge_counts([a, b]))
  ['a', 'b', 'c']
  """
  total = collections.Counter()
  for side in sides:
    for t, c in zip(side.tokens, side.counts):
      total[t] += c
  return total


def split_sizes(total: int, num_train: int, num_val: int) -> Tuple[int, int]:
  """How many of `total` pairs go to train and to validation.

  Train is always pairs[:n_train] and validation the pairs right after it,
  pairs[n_train:n_train + n_val].

  * num_train > 0: train = the first num_train pairs; validation = the next
    num_val pairs, or all the rest when num_val == 0.
  * num_train == 0: train = everything except the last num_val pairs, which
    are validation (num_val == 0 too: everything is train, no validation).

  >>> split_sizes(1000, 512, 128)
  (512, 128)
  >>> split_sizes(1000, 512, 0)
  (512, 488)
  >>> split_sizes(1000, 0, 128)
  (872, 128)
  >>> split_sizes(100, 512, 128)
  (100, 0)
  """
  if num_train > 0:
    n_train = min(num_train, total)
    rest = total - n_train
    n_val = rest if num_val == 0 else min(num_val, rest)
  else:
    n_val = min(num_val, total)
    n_train = total - n_val
  return n_train, n_val


def pairs_needed(num_train: int, num_val: int) -> Optional[int]:
  """Pairs to read before stopping (None = the whole input)."""
  if num_train > 0 and num_val > 0:
    return num_train + num_val
  return None


def count_tokens(sentences: Iterable[Sequence[str]]) -> "collections.Counter":
  """A Counter of tokens filled in first-occurrence order."""
  counts = collections.Counter()
  for s in sentences:
    counts.update(s)
  return counts
