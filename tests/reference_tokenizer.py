"""Slow, plain-Python oracle of the reference BERT FullTokenizer behaviour.

This module re-implements, character by character and without any third-party
library, the tokenizer described in section 6 of the project's reference spec
(google-research/bert's ``FullTokenizer``): a basic pass (cleaning, CJK
spacing, whitespace split, per-token lowercasing and accent stripping,
punctuation split) followed by greedy longest-match-first WordPiece.

It is written for clarity, not speed, and is used by the tests as the ground
truth the fast :class:`bert_data.tokenizer.WordPieceTokenizer` must equal.
"""

import unicodedata

UNK_TOKEN = "[UNK]"
MAX_INPUT_CHARS_PER_WORD = 200

_CJK_RANGES = (
  (0x4E00, 0x9FFF),
  (0x3400, 0x4DBF),
  (0x20000, 0x2A6DF),
  (0x2A700, 0x2B73F),
  (0x2B740, 0x2B81F),
  (0x2B820, 0x2CEAF),
  (0xF900, 0xFAFF),
  (0x2F800, 0x2FA1F),
)


def load_vocab(path):
  """Reads a vocab file the way the reference does.

  The reference reads the file through TensorFlow's line reader, which drops
  every carriage return and ends lines at newlines only, decodes UTF-8, and
  stores each line stripped with ``str.strip()`` under its 0-based line
  number. A token seen twice keeps the index of its last line, while the
  mapping's key order is that of first occurrence.

  Args:
    path: Path of a UTF-8 vocab file, one token per line.

  Returns:
    A dict mapping token to id.
  """
  with open(path, "rb") as handle:
    text = handle.read().replace(b"\r", b"").decode("utf-8")
  lines = text.split("\n")
  if lines[-1] == "":
    lines.pop()
  vocab = {}
  for index, line in enumerate(lines):
    vocab[line.strip()] = index
  return vocab


def is_whitespace(char):
  """Returns True for space, tab, newline, CR and category Zs."""
  if char in (" ", "\t", "\n", "\r"):
    return True
  return unicodedata.category(char) == "Zs"


def is_control(char):
  """Returns True for category C* characters other than tab, newline, CR."""
  if char in ("\t", "\n", "\r"):
    return False
  return unicodedata.category(char).startswith("C")


def is_punctuation(char):
  """Returns True for ASCII non-alphanumeric symbols and category P*."""
  code = ord(char)
  if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
    return True
  return unicodedata.category(char).startswith("P")


def is_cjk(code):
  """Returns True if the code point lies in one of the CJK ideograph blocks."""
  return any(low <= code <= high for low, high in _CJK_RANGES)


def whitespace_split(text):
  """Strips and splits text on whitespace, as Python's ``str.split()``."""
  text = text.strip()
  if not text:
    return []
  return text.split()


def clean_text(text):
  """Drops NUL, U+FFFD and control characters; maps whitespace to spaces."""
  output = []
  for char in text:
    code = ord(char)
    if code == 0 or code == 0xFFFD or is_control(char):
      continue
    output.append(" " if is_whitespace(char) else char)
  return "".join(output)


def space_cjk(text):
  """Surrounds every CJK ideograph with spaces."""
  output = []
  for char in text:
    if is_cjk(ord(char)):
      output.extend((" ", char, " "))
    else:
      output.append(char)
  return "".join(output)


def strip_accents(text):
  """Decomposes to NFD and drops nonspacing marks (category Mn)."""
  decomposed = unicodedata.normalize("NFD", text)
  return "".join(char for char in decomposed if unicodedata.category(char) != "Mn")


def split_punctuation(text):
  """Splits a token so that every punctuation character stands alone."""
  pieces = []
  current = []
  for char in text:
    if is_punctuation(char):
      if current:
        pieces.append("".join(current))
        current = []
      pieces.append(char)
    else:
      current.append(char)
  if current:
    pieces.append("".join(current))
  return pieces


def basic_tokenize(text, do_lower_case=True):
  """Runs the reference basic pass.

  Args:
    text: Input text.
    do_lower_case: Whether to lowercase and strip accents.

  Returns:
    List of basic tokens (words and single punctuation characters).
  """
  text = space_cjk(clean_text(text))
  split_tokens = []
  for token in whitespace_split(text):
    if do_lower_case:
      token = strip_accents(token.lower())
    split_tokens.extend(split_punctuation(token))
  return whitespace_split(" ".join(split_tokens))


def wordpiece_tokenize_word(word, vocab):
  """Greedy longest-match-first WordPiece split of one basic token.

  Args:
    word: A basic token.
    vocab: Mapping whose keys are the vocab tokens.

  Returns:
    List of word pieces, or ``[UNK_TOKEN]`` if the word is too long or
    cannot be fully covered by the vocab.
  """
  if len(word) > MAX_INPUT_CHARS_PER_WORD:
    return [UNK_TOKEN]
  pieces = []
  start = 0
  while start < len(word):
    end = len(word)
    match = None
    while start < end:
      candidate = word[start:end]
      if start > 0:
        candidate = "##" + candidate
      if candidate in vocab:
        match = candidate
        break
      end -= 1
    if match is None:
      return [UNK_TOKEN]
    pieces.append(match)
    start = end
  return pieces


class ReferenceTokenizer:
  """Plain-Python equivalent of the reference FullTokenizer.

  Args:
    vocab_file: Path of the vocab file.
    do_lower_case: Whether to lowercase and strip accents.
  """

  def __init__(self, vocab_file, do_lower_case=True):
    self.vocab = load_vocab(vocab_file)
    self.do_lower_case = do_lower_case

  def basic_tokenize(self, text):
    """Returns the basic-pass tokens of ``text``."""
    return basic_tokenize(text, self.do_lower_case)

  def tokenize(self, text):
    """Returns the word pieces of ``text``."""
    pieces = []
    for word in self.basic_tokenize(text):
      pieces.extend(wordpiece_tokenize_word(word, self.vocab))
    return pieces

  def encode(self, text):
    """Returns the ids of the word pieces of ``text``."""
    return [self.vocab[piece] for piece in self.tokenize(text)]
