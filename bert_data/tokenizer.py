"""A fast WordPiece tokenizer equal to the reference BERT FullTokenizer.

The reference (google-research/bert's ``FullTokenizer``, described in section 6
of the project's reference spec) runs a basic pass (clean, space out CJK
ideographs, split on whitespace, lowercase and strip accents per whitespace
token, split off punctuation) and then greedy longest-match-first WordPiece.

Most lines go through Hugging Face ``tokenizers`` (BertNormalizer,
BertPreTokenizer and WordPiece, in Rust, batched over threads). That pipeline
differs from the reference on a few characters, found by comparing both on
every code point:

* unassigned code points (category Cn): the reference drops them as control
  characters, Hugging Face keeps them;
* lone surrogates (category Cs): the reference drops them, Hugging Face cannot
  take them at all;
* Greek capital sigma: Python's ``str.lower()`` gives final sigma at the end of
  a word, Hugging Face always gives ``σ``;
* CJK ideographs U+2B820..U+2B91F: Hugging Face's CJK range starts at U+2B920;
* characters that Hugging Face's older Unicode tables do not know or classify
  differently (newer nonspacing marks, punctuation and format characters).

A line holding any such character takes a plain-Python basic pass (built from
``str.translate``, ``str.lower`` and NFD, with the reference's semantics) and
only its WordPiece step runs in Hugging Face. The list of Hugging Face table
differences holds for the Unicode version and ``tokenizers`` series it was
measured with; under any other, every non-ASCII line takes the Python pass.

This module does not import TensorFlow.
"""

import bisect
import os
import re
import unicodedata
import warnings
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import tokenizers
from tokenizers import Tokenizer
from tokenizers import normalizers
from tokenizers import pre_tokenizers
from tokenizers.models import WordPiece

from textrecords.datasets import vocab as core_vocab

UNK_TOKEN = "[UNK]"
# The tokens BERT records need, in the reference vocab's order.
SPECIAL_TOKENS = (UNK_TOKEN, "[CLS]", "[SEP]", "[MASK]")
MAX_INPUT_CHARS_PER_WORD = 200

# CJK ideograph blocks whose characters the reference surrounds with spaces.
_CJK_RANGES = (
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xF900, 0xFAFF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0x2F800, 0x2FA1F),
)

# The Unicode version (Python's unicodedata) and tokenizers series for which
# _HF_TABLE_DIFFERENCES was measured (tests/test_tokenizer.py re-checks it on
# every code point).
_VERIFIED_UNIDATA_VERSION = "14.0.0"
_VERIFIED_TOKENIZERS_SERIES = ("0.23",)

# Assigned code points (inclusive ranges) on which Hugging Face's BertNormalizer
# + BertPreTokenizer differ from the reference under Unicode 14.0.0, in either
# case mode. Unassigned code points and surrogates are added from unicodedata.
_HF_TABLE_DIFFERENCES = (
    (0x03A3, 0x03A3), (0x061D, 0x061D), (0x07FD, 0x07FD), (0x0890, 0x0891),
    (0x0898, 0x089F), (0x08CA, 0x08E2), (0x09FD, 0x09FE), (0x0A76, 0x0A76),
    (0x0AFA, 0x0AFF), (0x0B55, 0x0B55), (0x0C04, 0x0C04), (0x0C3C, 0x0C3C),
    (0x0C77, 0x0C77), (0x0C84, 0x0C84), (0x0D00, 0x0D00), (0x0D3B, 0x0D3C),
    (0x0D81, 0x0D81), (0x0EBA, 0x0EBA), (0x166D, 0x166D), (0x1734, 0x1734),
    (0x180F, 0x180F), (0x1885, 0x1886), (0x1ABF, 0x1ACE), (0x1B7D, 0x1B7E),
    (0x1DF6, 0x1DFB), (0x2E43, 0x2E4F), (0x2E52, 0x2E5D), (0xA82C, 0xA82C),
    (0xA8C5, 0xA8C5), (0xA8FF, 0xA8FF), (0xA9BD, 0xA9BD), (0x10D24, 0x10D27),
    (0x10EAB, 0x10EAD), (0x10F46, 0x10F50), (0x10F55, 0x10F59),
    (0x10F82, 0x10F89), (0x11070, 0x11070), (0x11073, 0x11074),
    (0x110C2, 0x110C2), (0x110CD, 0x110CD), (0x111C9, 0x111C9),
    (0x111CF, 0x111CF), (0x1123E, 0x1123E), (0x1133B, 0x1133B),
    (0x11438, 0x1143F), (0x11442, 0x11444), (0x11446, 0x11446),
    (0x1144B, 0x1144F), (0x1145A, 0x1145B), (0x1145D, 0x1145E),
    (0x11660, 0x1166C), (0x116B9, 0x116B9), (0x1182F, 0x11837),
    (0x11839, 0x1183B), (0x11938, 0x11938), (0x1193B, 0x1193C),
    (0x1193E, 0x1193E), (0x11943, 0x11946), (0x119D4, 0x119D7),
    (0x119DA, 0x119DB), (0x119E0, 0x119E0), (0x119E2, 0x119E2),
    (0x11A01, 0x11A0A), (0x11A33, 0x11A38), (0x11A3B, 0x11A47),
    (0x11A51, 0x11A56), (0x11A59, 0x11A5B), (0x11A8A, 0x11A96),
    (0x11A98, 0x11A9C), (0x11A9E, 0x11AA2), (0x11C30, 0x11C36),
    (0x11C38, 0x11C3D), (0x11C3F, 0x11C3F), (0x11C41, 0x11C45),
    (0x11C70, 0x11C71), (0x11C92, 0x11CA7), (0x11CAA, 0x11CB0),
    (0x11CB2, 0x11CB3), (0x11CB5, 0x11CB6), (0x11D31, 0x11D36),
    (0x11D3A, 0x11D3A), (0x11D3C, 0x11D3D), (0x11D3F, 0x11D45),
    (0x11D47, 0x11D47), (0x11D90, 0x11D91), (0x11D95, 0x11D95),
    (0x11D97, 0x11D97), (0x11EF3, 0x11EF4), (0x11EF7, 0x11EF8),
    (0x11FFF, 0x11FFF), (0x12FF1, 0x12FF2), (0x13430, 0x13438),
    (0x16E97, 0x16E9A), (0x16F4F, 0x16F4F), (0x16FE2, 0x16FE2),
    (0x16FE4, 0x16FE4), (0x1CF00, 0x1CF2D), (0x1CF30, 0x1CF46),
    (0x1E000, 0x1E006), (0x1E008, 0x1E018), (0x1E01B, 0x1E021),
    (0x1E023, 0x1E024), (0x1E026, 0x1E02A), (0x1E130, 0x1E136),
    (0x1E2AE, 0x1E2AE), (0x1E2EC, 0x1E2EF), (0x1E944, 0x1E94A),
    (0x1E95E, 0x1E95F), (0x2B820, 0x2B91F),
)
_HF_TABLE_DIFFERENCE_STARTS = tuple(low for low, _ in _HF_TABLE_DIFFERENCES)

_ASTRAL_CHAR = re.compile("[\U00010000-\U0010FFFF]")
_NON_ASCII_CHAR = re.compile("[^\x00-\x7F]")


# ---------------------------------------------------------------- vocab file

class MissingTokens(ValueError):
  """A vocab file without [UNK]; `missing` lists every special token it lacks."""

  def __init__(self, vocab_file: str, missing: List[str]):
    super().__init__(f"vocab file {vocab_file} lacks {', '.join(missing)}")
    self.missing = missing


def read_vocab_lines(vocab_file: str) -> List[str]:
  """Reads the tokens of a vocab file, one per line, as the reference does.

  The reference reads through TensorFlow's line reader, which drops every
  carriage return and ends lines at ``\\n`` only; each line is decoded as
  UTF-8 and stripped with ``str.strip()``. A final line without ``\\n``
  counts; nothing after a final ``\\n`` does.

  Args:
    vocab_file: Path of the vocab file.

  Returns:
    The stripped tokens, one per line; index = token id.

  Raises:
    FileNotFoundError: If the file does not exist.
    ValueError: If it cannot be read or is not valid UTF-8.
  """
  return core_vocab.load_tokens(vocab_file, None, strip=True, drop_cr=True,
                                allow_empty=True)


def build_vocab(tokens: Sequence[str]) -> Dict[str, int]:
  """Maps each token to the index of its LAST line, keys in first-seen order."""
  vocab: Dict[str, int] = {}
  for index, token in enumerate(tokens):
    vocab[token] = index
  return vocab


# ---------------------------------------------------------------- characters

def _is_whitespace(char: str) -> bool:
  """Space, tab, newline, carriage return, or category Zs."""
  return char in " \t\n\r" or unicodedata.category(char) == "Zs"


def _is_control(char: str) -> bool:
  """Any category C* character except tab, newline and carriage return."""
  return char not in "\t\n\r" and unicodedata.category(char).startswith("C")


def _is_punctuation(char: str) -> bool:
  """ASCII 33-47, 58-64, 91-96, 123-126, or any category P* character."""
  code = ord(char)
  if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
    return True
  return unicodedata.category(char).startswith("P")


def _is_cjk(code: int) -> bool:
  """Whether the code point is a CJK ideograph the reference spaces out."""
  return any(low <= code <= high for low, high in _CJK_RANGES)


def _clean_replacement(code: int):
  """The basic pass's clean-up and CJK spacing for one code point.

  Returns:
    None to drop the character, a string to replace it, or the code point
    itself to keep it (``str.translate`` conventions).
  """
  char = chr(code)
  if code in (0, 0xFFFD) or _is_control(char):
    return None
  if _is_whitespace(char):
    return " "
  if _is_cjk(code):
    return f" {char} "
  return code


def _split_replacement(code: int, drop_marks: bool):
  """Accent stripping (after NFD) and punctuation splitting for one code point.

  Args:
    code: The code point.
    drop_marks: Whether nonspacing marks (category Mn) are dropped.

  Returns:
    None, a replacement string, or the code point (``str.translate``).
  """
  char = chr(code)
  if drop_marks and unicodedata.category(char) == "Mn":
    return None
  if _is_punctuation(char):
    return f" {char} "
  return code


def _hf_differs_on(code: int) -> bool:
  """Whether Hugging Face's basic pass may differ from the reference on a char.

  Only valid under the verified Unicode version and tokenizers series.
  """
  if unicodedata.category(chr(code)) in ("Cn", "Cs"):
    return True
  slot = bisect.bisect_right(_HF_TABLE_DIFFERENCE_STARTS, code) - 1
  return slot >= 0 and code <= _HF_TABLE_DIFFERENCES[slot][1]


def _code_ranges_pattern(codes: Iterable[int]) -> str:
  """A regex character-class body matching exactly the given code points."""
  parts = []
  start = previous = None
  for code in codes:
    if previous is not None and code == previous + 1:
      previous = code
      continue
    if start is not None:
      parts.append(_range_pattern(start, previous))
    start = previous = code
  if start is not None:
    parts.append(_range_pattern(start, previous))
  return "".join(parts)


def _range_pattern(low: int, high: int) -> str:
  """A regex character-class item for the inclusive range low..high."""
  if low == high:
    return re.escape(chr(low))
  return f"{re.escape(chr(low))}-{re.escape(chr(high))}"


def _environment_verified() -> bool:
  """Whether _HF_TABLE_DIFFERENCES was measured for this Python and tokenizers."""
  series = ".".join(tokenizers.__version__.split(".")[:2])
  return (unicodedata.unidata_version == _VERIFIED_UNIDATA_VERSION
          and series in _VERIFIED_TOKENIZERS_SERIES)


# ---------------------------------------------------------------- basic pass

class _TranslationTable(dict):
  """A ``str.translate`` table filled lazily, one code point at a time.

  Concurrent fills from several threads are harmless: each writes the same
  value for a code point.

  Args:
    replacement: Function from a code point to its ``str.translate`` value.
  """

  def __init__(self, replacement):
    super().__init__()
    self._replacement = replacement

  def __missing__(self, code: int):
    value = self._replacement(code)
    self[code] = value
    return value


class _PythonBasicTokenizer:
  """The reference basic pass, in Python with whole-string operations.

  Lowercasing and NFD run over the whole cleaned line rather than per
  whitespace token; this is equivalent because whitespace is neither cased nor
  case-ignorable (so final sigma stops at it) and is an NFD starter.

  Args:
    do_lower_case: Whether to lowercase and strip accents.
  """

  def __init__(self, do_lower_case: bool):
    self._do_lower_case = do_lower_case
    self._clean_table = _TranslationTable(_clean_replacement)
    self._split_table = _TranslationTable(
        lambda code: _split_replacement(code, drop_marks=do_lower_case))

  def tokenize(self, text: str) -> List[str]:
    """Returns the basic tokens (words and lone punctuation) of ``text``."""
    text = text.translate(self._clean_table)
    if self._do_lower_case:
      text = unicodedata.normalize("NFD", text.lower())
    return text.translate(self._split_table).split()


def basic_tokenizer(do_lower_case: bool = True) -> _PythonBasicTokenizer:
  """The reference's basic pass alone (no WordPiece), e.g. to count words.

  >>> basic_tokenizer().tokenize("Hello, Wörld!")
  ['hello', ',', 'world', '!']
  """
  return _PythonBasicTokenizer(do_lower_case)


class _PythonPathSelector:
  """Decides which lines need the Python basic pass instead of Hugging Face's.

  Args:
    verified: Whether the measured Hugging Face table differences apply; if
      not, every non-ASCII line is sent to the Python pass.
  """

  def __init__(self, verified: bool):
    if verified:
      codes = (code for code in range(0x80, 0x10000) if _hf_differs_on(code))
      self._bmp_pattern = re.compile(f"[{_code_ranges_pattern(codes)}]")
    else:
      self._bmp_pattern = _NON_ASCII_CHAR

  def needs_python_path(self, text: str) -> bool:
    """Whether Hugging Face's basic pass could differ from the reference."""
    if not isinstance(text, str):
      raise TypeError(f"text must be str, not {type(text).__name__}")
    if text.isascii():
      return False
    if self._bmp_pattern.search(text):
      return True
    return any(_hf_differs_on(ord(char)) for char in _ASTRAL_CHAR.findall(text))


# ---------------------------------------------------------------- Hugging Face

def _wordpiece_model(vocab: Dict[str, int]) -> WordPiece:
  """Hugging Face WordPiece with the reference's unknown token and word limit."""
  return WordPiece(vocab, unk_token=UNK_TOKEN, continuing_subword_prefix="##",
                   max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD)


def _full_pipeline(vocab: Dict[str, int], do_lower_case: bool) -> Tokenizer:
  """Hugging Face BERT normalizer + pre-tokenizer + WordPiece, no specials."""
  tokenizer = Tokenizer(_wordpiece_model(vocab))
  tokenizer.normalizer = normalizers.BertNormalizer(
      clean_text=True, handle_chinese_chars=True,
      strip_accents=do_lower_case, lowercase=do_lower_case)
  tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
  return tokenizer


def _wordpiece_over_spaces(vocab: Dict[str, int]) -> Tokenizer:
  """Hugging Face WordPiece over words joined by spaces (no normalizer).

  Words from the Python basic pass hold no character that Python's
  ``str.split()`` splits on, and every character Rust's ``is_whitespace``
  (used by WhitespaceSplit) accepts is one of those, so splitting the joined
  words on whitespace gives back exactly the same words. This is faster than
  handing Hugging Face pre-tokenized lists.
  """
  tokenizer = Tokenizer(_wordpiece_model(vocab))
  tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
  return tokenizer


# ---------------------------------------------------------------- tokenizer

BASIC_PASSES = ("python", "hf")


class WordPieceTokenizer:
  """WordPiece tokenizer whose output equals the reference FullTokenizer's.

  Thread-safe; picklable (the pickle carries the vocab, not the file).

  Args:
    vocab_file: Path of a UTF-8 vocab file, one token per line; a token's id
      is its line number (a duplicated token gets its last line's number).
    do_lower_case: Whether to lowercase and strip accents.
    basic_pass: "python" (default): the reference's basic pass in Python
      (whole-string translate/lower/NFD), then Hugging Face WordPiece; faster
      per core than Hugging Face's normalizer and pre-tokenizer (BENCHMARKS.md), and independent of its Unicode tables. "hf": Hugging
      Face BertNormalizer + BertPreTokenizer, except for lines holding a
      character where those differ from the reference (Python pass there).

  Raises:
    FileNotFoundError: If the vocab file does not exist.
    ValueError: If it cannot be read, is not UTF-8, is empty or lacks [UNK].
  """

  def __init__(self, vocab_file: str, do_lower_case: bool = True,
               basic_pass: str = "python"):
    vocab_file = os.fspath(vocab_file)
    if basic_pass not in BASIC_PASSES:
      raise ValueError(f"basic_pass={basic_pass!r}: must be one of {BASIC_PASSES}")
    self.basic_pass = basic_pass
    self._setup(vocab_file, read_vocab_lines(vocab_file), bool(do_lower_case))

  def _setup(self, vocab_file: str, lines: List[str], do_lower_case: bool) -> None:
    """Builds every derived structure from the vocab lines."""
    vocab = build_vocab(lines)
    if not lines:
      raise ValueError(f"vocab file {vocab_file} is empty")
    if UNK_TOKEN not in vocab:
      raise MissingTokens(vocab_file, [t for t in SPECIAL_TOKENS if t not in vocab])
    verified = _environment_verified()
    if not verified:
      warnings.warn(
          "bert_data.tokenizer: Hugging Face table differences were not measured "
          f"for Unicode {unicodedata.unidata_version} / tokenizers "
          f"{tokenizers.__version__}; every non-ASCII line takes the Python basic pass",
          RuntimeWarning, stacklevel=3)
    self.vocab_file = vocab_file
    self.do_lower_case = do_lower_case
    self.vocab_size = len(lines)
    self._lines = lines
    self._vocab = vocab
    self._selector = _PythonPathSelector(verified)
    self._python_basic = _PythonBasicTokenizer(do_lower_case)
    self._hf_full = _full_pipeline(vocab, do_lower_case)
    self._hf_wordpiece = _wordpiece_over_spaces(vocab)
    # word -> ids of its pieces. WordPiece works word by word, so caching is
    # exact; natural text repeats words, so most lookups hit.
    self._word_ids: Dict[str, Tuple[int, ...]] = {}

  def __getstate__(self):
    return {"vocab_file": self.vocab_file, "lines": self._lines,
            "do_lower_case": self.do_lower_case, "basic_pass": self.basic_pass}

  def __setstate__(self, state):
    self.basic_pass = state.get("basic_pass", "python")
    self._setup(state["vocab_file"], state["lines"], state["do_lower_case"])

  def __repr__(self):
    return (f"WordPieceTokenizer({self.vocab_file!r}, "
            f"do_lower_case={self.do_lower_case}, vocab_size={self.vocab_size})")

  # -------------------------------------------------------------- vocab

  def id_to_token(self, i: int) -> str:
    """The token on line ``i`` of the vocab file.

    For a duplicated token, an earlier line's id still names that token here,
    although ``token_to_id`` gives the last line's id.

    Raises:
      IndexError: If ``i`` is not in ``range(vocab_size)``.
    """
    if not 0 <= i < self.vocab_size:
      raise IndexError(f"token id {i} out of range(0, {self.vocab_size})")
    return self._lines[i]

  def token_to_id(self, tok: str) -> Optional[int]:
    """The id of ``tok`` (its last line), or None if it is not in the vocab."""
    return self._vocab.get(tok)

  def vocab_words(self) -> List[str]:
    """Vocab tokens in file order, each once (first occurrence)."""
    return list(self._vocab)

  # -------------------------------------------------------------- tokenizing

  def tokenize(self, text: str) -> List[str]:
    """The word pieces of ``text``, as the reference FullTokenizer.tokenize."""
    return self._encoding(text).tokens

  def encode(self, text: str) -> List[int]:
    """The ids of ``tokenize(text)``."""
    if self.basic_pass == "python":
      return self._encode_cached(self._checked(text))
    return self._encoding(text).ids

  def encode_batch(self, texts: Sequence[str]) -> List[List[int]]:
    """``[encode(t) for t in texts]``, fast.

    With the Python basic pass, word pieces come from a per-word cache
    (Hugging Face WordPiece only for words not seen before), which is faster
    than building Hugging Face encodings for whole lines.
    """
    if self.basic_pass == "python":
      return [self._encode_cached(self._checked(t)) for t in texts]
    return [encoding.ids for encoding in self._encodings(texts)]

  # Words cached at most (~260 bytes each with their ids: ~8 MB). The
  # tokenizer lives as long as its process (an engine's worker keeps it for
  # every unit), and the distinct words a worker sees grow with the corpus:
  # with 1 << 20 the cache held 25.6 MB after bench_scale's 400 MB bert
  # corpus (102k words; 2.7 MB at 25 MB). A full cache is emptied and
  # starts again, so it follows the words of the text being read.
  _MAX_CACHED_WORDS = 1 << 15

  def _encode_cached(self, text: str) -> List[int]:
    cache = self._word_ids
    out: List[int] = []
    for word in self._python_basic.tokenize(text):
      ids = cache.get(word)
      if ids is None:
        ids = tuple(self._hf_wordpiece.encode(word, add_special_tokens=False).ids)
        if len(cache) >= self._MAX_CACHED_WORDS:
          cache.clear()
        cache[word] = ids
      out += ids
    return out

  def _needs_python_path(self, text: str) -> bool:
    if self.basic_pass == "python":
      if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")
      return True
    return self._selector.needs_python_path(text)

  def _encoding(self, text: str):
    """The Hugging Face encoding of one text, by the path it needs."""
    if self._needs_python_path(text):
      return self._hf_wordpiece.encode(self._python_basic_pass(text),
                                       add_special_tokens=False)
    return self._hf_full.encode(text, add_special_tokens=False)

  def _python_basic_pass(self, text: str) -> str:
    """The reference basic tokens of ``text``, joined by single spaces."""
    return " ".join(self._python_basic.tokenize(text))

  def _encodings(self, texts: Sequence[str]) -> list:
    """Hugging Face encodings of many texts, in order."""
    texts = list(texts)
    if self.basic_pass == "python":
      return _batch_encode(self._hf_wordpiece,
                           [self._python_basic_pass(self._checked(t)) for t in texts])
    slow = [i for i, text in enumerate(texts) if self._selector.needs_python_path(text)]
    if not slow:
      return _batch_encode(self._hf_full, texts)
    results: list = [None] * len(texts)
    slow_set = set(slow)
    fast = [i for i in range(len(texts)) if i not in slow_set]
    fast_encodings = _batch_encode(self._hf_full, [texts[i] for i in fast])
    for i, encoding in zip(fast, fast_encodings):
      results[i] = encoding
    slow_encodings = _batch_encode(
        self._hf_wordpiece, [self._python_basic_pass(texts[i]) for i in slow])
    for i, encoding in zip(slow, slow_encodings):
      results[i] = encoding
    return results

  @staticmethod
  def _checked(text):
    if not isinstance(text, str):
      raise TypeError(f"text must be str, not {type(text).__name__}")
    return text


def _batch_encode(tokenizer: Tokenizer, texts: List[str]) -> list:
  """encode_batch without offsets where the library has it (faster)."""
  fast = getattr(tokenizer, "encode_batch_fast", None)
  if fast is not None:
    return fast(texts, add_special_tokens=False)
  return tokenizer.encode_batch(texts, add_special_tokens=False)
