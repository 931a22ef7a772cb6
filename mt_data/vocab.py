"""Per-language vocabularies: word (d2l rule) or BPE (Hugging Face tokenizers).

Both kinds reserve `<pad>`=0, `<unk>`=1, `<bos>`=2, `<eos>`=3. The vocab
file holds one token per line, the id being the line number (0-based).

Word vocab: tokens with count >= min_freq over the pairs written (train and
validation), descending count, ties in first-occurrence order.

BPE vocab: a `tokenizers` BPE model trained on the train pairs' cleaned
words (split on spaces), U+2581 marking word starts; it is stored as
`*_tokenizer.json` next to the vocab file.
"""

import json
from typing import Dict, List, Optional, Sequence

from textrecords.datasets import layout
from textrecords.datasets import metadata
from textrecords.datasets import vocab as core_vocab
from textrecords.errors import UserError

from mt_data import preprocess
from mt_data import schema
from textrecords.reading import locations as dataset_files

WORD_START = "\u2581"


def word_vocab(sentences: Sequence[Sequence[str]], min_freq: int) -> List[str]:
  """The d2l-rule vocabulary of tokenized sentences.

  >>> word_vocab([["a", "b", "<eos>"], ["b", "a", "c", "<eos>"]], 2)
  ['<pad>', '<unk>', '<bos>', '<eos>', 'a', 'b']
  """
  return word_vocab_from_counts(preprocess.count_tokens(sentences), min_freq)


def word_vocab_from_counts(counts, min_freq: int) -> List[str]:
  """As `word_vocab`, from token counts in first-occurrence order."""
  return core_vocab.frequency_vocab_from_counts(counts, min_freq, preprocess.RESERVED)


def load_tokens(path: str) -> List[str]:
  """Reads a vocab file written by mt_data (split on "\\n" only, no stripping)."""
  tokens = core_vocab.load_tokens(path, None, strip=False, allow_empty=True)
  if tuple(tokens[:4]) != preprocess.RESERVED:
    raise UserError(f"{path}: not an mt_data vocabulary (must start with "
                    f"{', '.join(preprocess.RESERVED)})")
  return tokens


class WordCodec:
  """Maps raw sentences to ids and back with a word vocabulary.

  >>> c = WordCodec(['<pad>', '<unk>', '<bos>', '<eos>', 'go', '.'])
  >>> c.encode("Go!")
  [4, 1, 3]
  >>> c.decode([4, 5, 3, 0])
  'go .'
  """

  kind = "word"

  def __init__(self, tokens: Sequence[str]):
    self.tokens = list(tokens)
    self.index: Dict[str, int] = {t: i for i, t in enumerate(self.tokens)}

  def __len__(self):
    return len(self.tokens)

  def ids(self, tokens: Sequence[str]) -> List[int]:
    get = self.index.get
    return [get(t, preprocess.UNK_ID) for t in tokens]

  def encode(self, text: str) -> List[int]:
    """Cleans, tokenizes (with `<eos>`) and maps to ids."""
    return self.ids(preprocess.tokenize(preprocess.clean(text)))

  def id_tokens(self, ids: Sequence[int]) -> List[str]:
    return [self.tokens[i] if 0 <= i < len(self.tokens) else preprocess.UNK
            for i in ids]

  def visible_tokens(self, ids: Sequence[int]) -> List[str]:
    """The tokens of `ids` up to the first `<eos>`, without `<pad>`/`<bos>`."""
    out = []
    for tok in self.id_tokens([int(i) for i in ids]):
      if tok == preprocess.EOS:
        break
      if tok not in (preprocess.PAD, preprocess.BOS):
        out.append(tok)
    return out

  def decode(self, ids: Sequence[int]) -> str:
    """`visible_tokens`, space-joined."""
    return " ".join(self.visible_tokens(ids))


def _tokenizers():
  try:
    import tokenizers  # pylint: disable=import-outside-toplevel
  except ImportError as e:  # pragma: no cover - tokenizers is a dependency
    raise UserError("--tokenizer=bpe needs the 'tokenizers' package: pip install tokenizers") from e
  return tokenizers


def train_bpe(sentences: Sequence[Sequence[str]], vocab_size: int, min_freq: int):
  """Trains a BPE `tokenizers.Tokenizer` on tokenized sentences (`<eos>` ignored).

  Words are marked with a leading U+2581 ("▁", as SentencePiece), so every
  initial symbol is a plain character; `tokenizers` numbers those in sorted
  order and breaks ties between equally frequent merges by id, which makes
  the result deterministic. (A word-end suffix such as `</w>` would number
  the suffixed characters in hash-map order: different merges run to run.)
  """
  tk = _tokenizers()
  tok = tk.Tokenizer(tk.models.BPE(unk_token=preprocess.UNK))
  tok.pre_tokenizer = tk.pre_tokenizers.Metaspace(replacement=WORD_START,
                                                  prepend_scheme="always")
  tok.decoder = tk.decoders.Metaspace(replacement=WORD_START, prepend_scheme="always")
  trainer = tk.trainers.BpeTrainer(
      vocab_size=vocab_size, min_frequency=min_freq, show_progress=False,
      special_tokens=list(preprocess.RESERVED))
  tok.train_from_iterator((" ".join(s[:-1]) for s in sentences), trainer=trainer,
                          length=len(sentences))
  for i, t in enumerate(preprocess.RESERVED):
    if tok.token_to_id(t) != i:  # pragma: no cover - guaranteed by special_tokens order
      raise RuntimeError(f"BPE put {t} at id {tok.token_to_id(t)}, expected {i}")
  return tok


def bpe_tokens(tok) -> List[str]:
  """The BPE vocabulary in id order."""
  vocab = tok.get_vocab(with_added_tokens=True)
  tokens = [None] * len(vocab)
  for t, i in vocab.items():
    tokens[i] = t
  return tokens


def bpe_encode_all(tok, sentences: Sequence[Sequence[str]]) -> List[List[int]]:
  """Subword ids of each tokenized sentence (words only), plus `<eos>`."""
  encs = tok.encode_batch([" ".join(s[:-1]) for s in sentences], add_special_tokens=False)
  return [e.ids + [preprocess.EOS_ID] for e in encs]


class BpeCodec(WordCodec):
  """Raw sentences <-> subword ids with a trained BPE tokenizer."""

  kind = "bpe"

  def __init__(self, tok):
    super().__init__(bpe_tokens(tok))
    self.tok = tok

  def encode(self, text: str) -> List[int]:
    words = preprocess.tokenize(preprocess.clean(text))
    return bpe_encode_all(self.tok, [words])[0]

  def decode(self, ids: Sequence[int]) -> str:
    return self.tok.decoder.decode(self.visible_tokens(ids))


def load_codecs(output_dir: str, meta: Optional[dict] = None):
  """(source_codec, target_codec) of a dataset written by mt_data.create.

  `output_dir` may be any location of the dataset (its folder, meta.json or
  record files); with `meta` given it must be the folder.
  """
  if meta is None:
    found = dataset_files.open_datasets(output_dir, schema.PACKAGE)[0]
    lay, meta = found.layout, found.meta
  else:
    lay = layout.DatasetLayout.for_dir(output_dir)
  bpe = meta.get("tokenizer") == "bpe"
  names = [(schema.TOKENIZER_FILE if bpe else schema.VOCAB_FILE)[side]
           for side in ("source", "target")]
  paths = metadata.verified_files(meta, lay, names, "checksum")  # a changed vocab: refused
  codecs = []
  for path in paths:
    if bpe:
      try:
        tok = _tokenizers().Tokenizer.from_file(path)
      except Exception as e:  # pylint: disable=broad-except
        raise UserError(f"cannot load BPE tokenizer {path}: {e}") from e
      codecs.append(BpeCodec(tok))
    else:
      codecs.append(WordCodec(load_tokens(path)))
  return tuple(codecs)


def tokenizer_json(tok) -> bytes:
  """Stable bytes of a trained tokenizer (keys sorted)."""
  return (json.dumps(json.loads(tok.to_str()), sort_keys=True, ensure_ascii=False,
                     indent=1) + "\n").encode("utf-8")
