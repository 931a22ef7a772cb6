"""Vocabulary files (one token per line, id = line number) and frequency vocabs."""

import collections
import hashlib
from typing import Iterable, List, Sequence

from textrecords.errors import UserError


def load_tokens(path: str, flag: str = "--vocab_file") -> List[str]:
  """Reads a one-token-per-line vocab file (UTF-8), stripping each line."""
  try:
    with open(path, "rb") as f:
      data = f.read()
  except OSError as e:
    raise UserError(f"{flag}: cannot read {path}: {e.strerror}") from e
  try:
    text = data.decode("utf-8")
  except UnicodeDecodeError as e:
    line = data[:e.start].count(b"\n") + 1
    raise UserError(f"{flag}: {path}:{line}: invalid UTF-8") from e
  tokens = [t.strip() for t in text.split("\n")]
  if tokens and tokens[-1] == "" and text.endswith("\n"):
    tokens.pop()
  if not tokens:
    raise UserError(f"{flag}: {path} is empty")
  return tokens


def tokens_file_bytes(tokens: Sequence[str]) -> bytes:
  """The bytes of a vocab file: one token per line, UTF-8, trailing newline."""
  return "".join(t + "\n" for t in tokens).encode("utf-8")


def sha256_bytes(data: bytes) -> str:
  return hashlib.sha256(data).hexdigest()


def file_sha256(path: str) -> str:
  with open(path, "rb") as f:
    return sha256_bytes(f.read())


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
