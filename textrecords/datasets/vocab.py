"""Vocabulary files (one token per line, id = line number) and frequency vocabs."""

import collections
from typing import Iterable, List, Optional, Sequence

from textrecords.files import hashing
from textrecords.files import storage
from textrecords.errors import MissingFileError
from textrecords.errors import UserError


def load_tokens(path: str, flag: Optional[str] = "--vocab_file", *, strip: bool = True,
                drop_cr: bool = False, allow_empty: bool = False) -> List[str]:
  """Reads a one-token-per-line vocab file (UTF-8); id = line number.

  The one vocab reader of the code base. Lines end at "\\n"; a final line
  without "\\n" counts, nothing after a final "\\n" does.

  Args:
    path: the file.
    flag: the flag that named it, for messages (None: no flag).
    strip: `str.strip()` each token (bert_data, the reference); False keeps
      tokens as written (mt_data, whose vocabs it wrote itself).
    drop_cr: remove every carriage return byte first (TensorFlow's line
      reader, which the BERT reference uses, does).
    allow_empty: return [] for an empty file instead of raising.

  Raises:
    MissingFileError: the file does not exist.
    UserError: unreadable, not UTF-8, or empty.
  """
  prefix = f"{flag}: " if flag else ""
  if storage.is_url(path):
    data = storage.read_bytes(path)
  else:
    data = _read_local(path, prefix)
  return _tokens(data, path, prefix, strip=strip, drop_cr=drop_cr, allow_empty=allow_empty)


def _read_local(path: str, prefix: str) -> bytes:
  try:
    with open(storage.local_path(path), "rb") as f:
      return f.read()
  except FileNotFoundError as e:
    raise MissingFileError(f"{prefix}vocab file not found: {path}") from e
  except OSError as e:
    raise UserError(f"{prefix}cannot read {path}: {e.strerror}") from e


def _tokens(data: bytes, path: str, prefix: str, *, strip: bool, drop_cr: bool,
            allow_empty: bool) -> List[str]:
  if drop_cr:
    data = data.replace(b"\r", b"")
  try:
    text = data.decode("utf-8")
  except UnicodeDecodeError as e:
    line = data[:e.start].count(b"\n") + 1
    raise UserError(f"{prefix}{path}:{line}: not valid UTF-8 (byte {e.start})") from e
  tokens = text.split("\n")
  if tokens[-1] == "":
    tokens.pop()
  if strip:
    tokens = [t.strip() for t in tokens]
  if not tokens and not allow_empty:
    raise UserError(f"{prefix}{path} is empty")
  return tokens


def tokens_file_bytes(tokens: Sequence[str]) -> bytes:
  """The bytes of a vocab file: one token per line, UTF-8, trailing newline."""
  return "".join(t + "\n" for t in tokens).encode("utf-8")


sha256_bytes = hashing.sha256_bytes
file_sha256 = hashing.file_sha256


def frequency_vocab(token_stream: Iterable[str], min_freq: int,
                    reserved: Sequence[str] = ()) -> List[str]:
  """Reserved tokens, then tokens with count >= min_freq by descending count.

  Ties keep first-occurrence order. Reserved tokens are never repeated.

  >>> frequency_vocab("b a b c a b".split(), 2, ["<unk>"])
  ['<unk>', 'b', 'a']
  """
  counts = collections.Counter(token_stream)
  return frequency_vocab_from_counts(counts, min_freq, reserved)


def frequency_vocab_from_counts(counts: "collections.Counter", min_freq: int,
                                reserved: Sequence[str] = ()) -> List[str]:
  """As `frequency_vocab`, from a Counter filled in first-occurrence order."""
  reserved_set = set(reserved)
  kept = [t for t, c in sorted(counts.items(), key=lambda kv: -kv[1])
          if c >= min_freq and t not in reserved_set]
  return list(reserved) + kept


def count_first_seen(acc: dict, key, tokens: Sequence[str], counts=None) -> dict:
  """Adds one unit's tokens to a first-seen count `acc` (token -> [count,
  first (key, position)]); returns `acc`.

  `key` is the unit's sortable place in the corpus (a sentence or pair
  number), `counts` each token's count when `tokens` are distinct.
  """
  for pos, t in enumerate(tokens):
    n = 1 if counts is None else int(counts[pos])
    entry = acc.get(t)
    if entry is None:
      acc[t] = [n, (key, pos)]
    else:
      entry[0] += n
      if (key, pos) < entry[1]:
        entry[1] = (key, pos)
  return acc


def merge_first_seen(accs: Iterable[dict]) -> dict:
  """First-seen counts merged (into the first one); any order gives the same.

  >>> a = count_first_seen({}, 1, ["x", "y"]); b = count_first_seen({}, 0, ["y"])
  >>> merge_first_seen([a, b])
  {'x': [1, (1, 0)], 'y': [2, (0, 0)]}
  """
  accs = iter(accs)
  out = next(accs, None)
  out = {} if out is None else out
  for acc in accs:
    for t, (count, first) in acc.items():
      entry = out.get(t)
      if entry is None:
        out[t] = [count, first]
      else:
        entry[0] += count
        if first < entry[1]:
          entry[1] = first
  return out


def first_seen_counter(acc: dict) -> "collections.Counter":
  """A Counter filled in order of each token's first occurrence, as one
  updated unit by unit in corpus order (so vocabulary ties break the same)."""
  counter = collections.Counter()
  for t, (count, _) in sorted(acc.items(), key=lambda kv: kv[1][1]):
    counter[t] = count
  return counter


def first_seen_of(key, tokens: Iterable[str]) -> dict:
  """First-seen counts of one unit's tokens (in corpus order), whose place in
  the corpus is `key`: each token's first occurrence is (key, its rank among
  the unit's distinct tokens), which orders tokens across units as
  `count_first_seen` does (merge with `merge_first_seen`).

  >>> first_seen_of(7, ["b", "a", "b"])
  {'b': [2, (7, 0)], 'a': [1, (7, 1)]}
  """
  counts = collections.Counter(tokens)  # (in first-occurrence order)
  return first_seen_ranked(key, counts.keys(), counts.values())


def first_seen_ranked(key, distinct: Iterable[str], counts: Iterable[int]) -> dict:
  """`first_seen_of` from a unit's distinct tokens in first-occurrence order
  and their counts.

  >>> first_seen_ranked(7, ["b", "a"], [2, 1])
  {'b': [2, (7, 0)], 'a': [1, (7, 1)]}
  """
  return {t: [c, (key, rank)] for rank, (t, c) in enumerate(zip(distinct, counts))}
