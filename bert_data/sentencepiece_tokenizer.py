"""SentencePiece tokenizing for bert_data (ALBERT's way), via `sentencepiece`.

ALBERT's generator takes a SentencePiece model instead of a WordPiece vocab:
each line is preprocessed (whitespace collapsed, ``` `` ``` and `''` made
`"`, accents removed, lowercased with do_lower_case) and cut into the model's
pieces; ids are the model's. `[CLS]`, `[SEP]` and `[MASK]` must be pieces of
the model (control symbols, as `build_vocab --kind=sentencepiece` makes
them). A word starts at a piece beginning with `▁` or at a lone punctuation
piece; the other pieces continue the word (whole-word masking groups them).

Needs the optional `sentencepiece` package (`pip install 'textrecords[spm]'`).
No TensorFlow here.
"""

import hashlib
import io
import re
import string
import unicodedata
from typing import Iterable, List, Optional, Sequence

from textrecords.files import storage
from textrecords.errors import UserError

WORD_START = "\u2581"
CONTROL_SYMBOLS = ("[CLS]", "[SEP]", "[MASK]")
PAD_PIECE, UNK_PIECE = "<pad>", "<unk>"
_PUNCTUATION = frozenset(string.punctuation)


def require_sentencepiece():
  """The `sentencepiece` module, or a UserError saying how to install it."""
  try:
    import sentencepiece  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise UserError("SentencePiece needs the sentencepiece package, which is not "
                    "installed: pip install 'textrecords[spm]'") from e
  return sentencepiece


def preprocess_text(text: str, lower: bool = True) -> str:
  """ALBERT's text preprocessing before SentencePiece.

  >>> preprocess_text("  Café  ``quoted''\\tText ")
  'cafe "quoted" text'
  """
  out = " ".join(text.strip().split()).replace("``", '"').replace("''", '"')
  out = "".join(c for c in unicodedata.normalize("NFKD", out) if not unicodedata.combining(c))
  return out.lower() if lower else out


def is_word_start(piece: str) -> bool:
  """Whether a piece begins a word (for whole-word masking).

  >>> [is_word_start(p) for p in ("\u2581the", "re", ",", "[CLS]")]
  [True, False, True, True]
  """
  return piece.startswith(WORD_START) or piece in _PUNCTUATION or (
      piece.startswith("[") and piece.endswith("]")) or piece.startswith("<")


def train_model(spm, sentences: Iterable[str], vocab_size: int, input_sentence_size: int,
                random_seed: int, num_threads: int = 1) -> bytes:
  """Trains a unigram model with ALBERT's settings; returns its bytes."""
  buf = io.BytesIO()
  spm.set_random_generator_seed(random_seed)
  try:
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences), model_writer=buf, vocab_size=vocab_size,
        model_type="unigram", pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
        pad_piece=PAD_PIECE, unk_piece=UNK_PIECE, control_symbols=list(CONTROL_SYMBOLS),
        character_coverage=0.99995, input_sentence_size=input_sentence_size,
        shuffle_input_sentence=True, num_threads=num_threads, minloglevel=2)
  except RuntimeError as e:
    largest = _TOO_HIGH.search(str(e))
    if largest:
      raise VocabSizeTooHigh(vocab_size, int(largest.group(1))) from e
    raise UserError(f"SentencePiece training failed: {str(e).strip().splitlines()[-1]}") from e
  return buf.getvalue()


# SentencePiece's words when the input has fewer pieces than asked for.
_TOO_HIGH = re.compile(r"Vocabulary size too high \(\d+\)\. Please set it to a value <= (\d+)")


class VocabSizeTooHigh(UserError):
  """The input gives SentencePiece at most `largest` pieces, fewer than asked."""

  def __init__(self, vocab_size: int, largest: int):
    super().__init__(f"--vocab_size={vocab_size}: the input has at most {largest} "
                     f"SentencePiece pieces; pass --vocab_size={largest} or less, or more text")
    self.largest = largest


def load(model_file: str, do_lower_case: bool) -> "SentencePieceTokenizer":
  """The tokenizer of `--spm_model_file`, checked for [CLS], [SEP] and [MASK]."""
  tok = SentencePieceTokenizer(model_file, do_lower_case)
  missing = [t for t in CONTROL_SYMBOLS if tok.token_to_id(t) is None]
  if missing:
    raise UserError(f"--spm_model_file: {model_file} lacks {', '.join(missing)} (train it "
                    "with bert_data.build_vocab --kind=sentencepiece)")
  return tok


class SentencePieceTokenizer:
  """The bert_data tokenizer interface over a SentencePiece model.

  Picklable (the pickle carries the model bytes).

  Args:
    model_file: a SentencePiece `.model` file.
    do_lower_case: lowercase in preprocessing (ALBERT's flag).
  Raises:
    UserError: no sentencepiece package, or a file that is not a model.
  """

  def __init__(self, model_file: str, do_lower_case: bool = True):
    try:
      with (storage.open_read(model_file) if storage.is_url(model_file)
            else open(storage.local_path(model_file), "rb")) as f:
        data = f.read()
    except OSError as e:
      raise UserError(f"--spm_model_file: cannot read {model_file}: {e.strerror}") from e
    self._setup(model_file, data, do_lower_case)

  def _setup(self, model_file: str, data: bytes, do_lower_case: bool):
    spm = require_sentencepiece()
    self.vocab_file = model_file
    self.do_lower_case = bool(do_lower_case)
    self._data = data
    self.sha256 = hashlib.sha256(data).hexdigest()
    self._sp = spm.SentencePieceProcessor()
    try:
      self._sp.LoadFromSerializedProto(data)
    except (RuntimeError, OSError, TypeError) as e:
      raise UserError(f"--spm_model_file: {model_file} is not a SentencePiece model") from e
    self.vocab_size = self._sp.GetPieceSize()
    if self.vocab_size == 0:
      raise UserError(f"--spm_model_file: {model_file} is not a SentencePiece model")
    self._pieces = [self._sp.IdToPiece(i) for i in range(self.vocab_size)]

  def __getstate__(self):
    return {"model_file": self.vocab_file, "data": self._data,
            "do_lower_case": self.do_lower_case}

  def __setstate__(self, state):
    self._setup(state["model_file"], state["data"], state["do_lower_case"])

  def __repr__(self):
    return (f"SentencePieceTokenizer({self.vocab_file!r}, "
            f"do_lower_case={self.do_lower_case}, vocab_size={self.vocab_size})")

  def id_to_token(self, i: int) -> str:
    if not 0 <= i < self.vocab_size:
      raise IndexError(f"token id {i} out of range(0, {self.vocab_size})")
    return self._pieces[i]

  def token_to_id(self, tok: str) -> Optional[int]:
    i = self._sp.PieceToId(tok)
    return i if self._pieces[i] == tok else None

  def vocab_words(self) -> List[str]:
    """Pieces in id order."""
    return list(self._pieces)

  def word_start_flags(self) -> bytes:
    """`flags[id]` is 1 where the piece starts a word (see `is_word_start`)."""
    return bytes(1 if is_word_start(p) else 0 for p in self._pieces)

  def normalize(self, text: str) -> str:
    """The text the pieces spell: preprocessed, then the model's normalization."""
    normalized = self._sp.Normalize(preprocess_text(text, self.do_lower_case))
    return normalized.replace(WORD_START, " ").strip(" ")

  def tokenize(self, text: str) -> List[str]:
    return self._sp.EncodeAsPieces(preprocess_text(text, self.do_lower_case))

  def encode(self, text: str) -> List[int]:
    return self._sp.EncodeAsIds(preprocess_text(text, self.do_lower_case))

  def encode_batch(self, texts: Sequence[str]) -> List[List[int]]:
    lower = self.do_lower_case
    return self._sp.Encode([preprocess_text(t, lower) for t in texts])

  def decode_pieces(self, pieces: Sequence[str]) -> str:
    return self._sp.DecodePieces(list(pieces))
