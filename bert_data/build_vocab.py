r"""`python -m bert_data.build_vocab`: a vocabulary for a new corpus.

    python -m bert_data.build_vocab --input_file=corpus/*.txt \
        --vocab_size=30522 --output_file=vocab.txt [--do_lower_case] \
        [--kind=wordpiece|sentencepiece]

`--kind=wordpiece` (default) writes a BERT-format vocab file: the reference
vocab's reserved lines (`[PAD]`, `[unused0]`..`[unused98]`, `[UNK]`, `[CLS]`,
`[SEP]`, `[MASK]`, `[unused99]`.. up to `--num_unused`), then the corpus's
characters, their `##` forms and the pieces Hugging Face `tokenizers`'
WordPiece trainer learns, in the order it learns them. The trainer sees words
after the reference's basic tokenization (the same pass `bert_data.create`
runs), so every piece is reachable by the tokenizer.

`--kind=sentencepiece` writes a SentencePiece unigram model (`--output_file`
is the `.model`) trained on the lines as `SentencePieceTokenizer` preprocesses
them, with `<pad>`=0, `<unk>`=1 and `[CLS]`, `[SEP]`, `[MASK]` as control
symbols (ALBERT's settings); give it to `bert_data.create --spm_model_file`.

Deterministic: the same input and flags give the same file, for any
`--num_workers`. Input is streamed: memory holds the distinct words and their
counts (WordPiece) or at most `--input_sentence_size` lines (SentencePiece),
not the corpus.
"""

import collections
import hashlib
import itertools
import sys
from typing import Counter, Dict, Iterable, Iterator, List, Optional, Sequence

from absl import flags

from bert_data.documents import iter_line_batches
from bert_data.tokenizer import SPECIAL_TOKENS
from textrecords.runs import cli
from textrecords.engine import parallel
from textrecords.files import storage
from textrecords.files import text_input
from textrecords.datasets import vocab as vocab_lib
from textrecords.errors import UserError
from bert_data.tokenizer import basic_tokenizer
from bert_data import sentencepiece_tokenizer as spt

FLAGS = flags.FLAGS

KINDS = ("wordpiece", "sentencepiece")
# Flags that only --kind=K reads.
_KIND_FLAGS = {"wordpiece": ["num_unused", "min_freq"],
               "sentencepiece": ["input_sentence_size", "random_seed"]}
PAD_TOKEN = "[PAD]"
# The reference vocab's layout: [PAD], 99 unused, the four specials, then 895
# more unused (ids 0..998).
REFERENCE_UNUSED = 994
_UNUSED_BEFORE_SPECIALS = 99
# Largest repeat count fed to the trainer in one string.
_REPEATS_PER_CHUNK = 1 << 14


def reserved_tokens(num_unused: int = REFERENCE_UNUSED) -> List[str]:
  """The vocab's first lines, laid out as in the reference's vocab files.

  >>> reserved_tokens(2)
  ['[PAD]', '[unused0]', '[unused1]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']
  >>> reserved_tokens(101)[99:106]
  ['[unused98]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', '[unused99]', '[unused100]']
  """
  unused = [f"[unused{i}]" for i in range(num_unused)]
  head = min(num_unused, _UNUSED_BEFORE_SPECIALS)
  return [PAD_TOKEN] + unused[:head] + list(SPECIAL_TOKENS) + unused[head:]


# ---------------------------------------------------------------- word counts

_STATE: Dict[str, object] = {}


def _init_counter(do_lower_case: bool):
  _STATE["basic"] = basic_tokenizer(do_lower_case)


def _count_batch(lines: Sequence[str]):
  tokenize = _STATE["basic"].tokenize
  return (collections.Counter(itertools.chain.from_iterable(tokenize(l) for l in lines if l)),
          sum(len(l) + 1 for l in lines))


def count_words(files: Sequence[str], do_lower_case: bool, num_workers: int = 1,
                on_decode_error: str = "strict", progress=None,
                decode: Optional[text_input.DecodeErrorCounts] = None) -> Counter:
  """Counts of the reference's basic tokens over all lines of `files`.

  Lines are read in batches and counted in worker processes; sums do not
  depend on the worker count. `decode`, if given, counts the lines replaced
  or skipped as invalid UTF-8.
  """
  total: Counter = collections.Counter()
  chars = 0
  batches = iter_line_batches(files, on_decode_error, counts=decode)
  for counts, nchars in parallel.ordered_map(_count_batch, batches, num_workers,
                                             initializer=_init_counter,
                                             initargs=(do_lower_case,)):
    total.update(counts)
    chars += nchars
    if progress is not None:
      progress.update(lambda: f"read {chars / 1e6:,.1f}M characters, "
                      f"{len(total):,} distinct words")
  return total


# ---------------------------------------------------------------- WordPiece

def alphabet(counts: Counter, max_size: int) -> List[str]:
  """The `max_size` most frequent characters (ties by code point), sorted.

  >>> alphabet(collections.Counter({"ab": 3, "b": 1, "c": 1}), 2)
  ['a', 'b']
  """
  chars: Counter = collections.Counter()
  for word, count in counts.items():
    for ch in word:
      chars[ch] += count
  ranked = sorted(chars.items(), key=lambda kv: (-kv[1], kv[0]))[:max_size]
  return sorted(ch for ch, _ in ranked)


def _repeated_words(counts: Counter) -> Iterator[str]:
  """Strings whose whitespace-split words have exactly `counts`."""
  for word in sorted(counts):
    c = counts[word]
    while c > 0:
      n = min(c, _REPEATS_PER_CHUNK)
      yield " ".join(itertools.repeat(word, n))
      c -= n


def train_wordpiece(counts: Counter, num_pieces: int, min_frequency: int = 2) -> List[str]:
  """WordPiece pieces learned from word counts, in learning order.

  The first pieces are the alphabet (at most a quarter of `num_pieces`
  characters, the most frequent) and the alphabet's `##` forms; the rest are
  merges. Hugging Face's trainer numbers `##` forms in hash-map order, which
  would make ties between equally frequent merges fall differently run to
  run; giving it the `##` forms up front as fixed tokens makes it
  deterministic.

  Example:
    >>> pieces = train_wordpiece(collections.Counter({"low": 5, "lower": 2}), 12)
    >>> pieces[:6], "low" in pieces
    (['l', 'o', 'w', '##l', '##o', '##w'], True)
  """
  from tokenizers import Tokenizer, pre_tokenizers, trainers  # pylint: disable=import-outside-toplevel
  from tokenizers.models import WordPiece  # pylint: disable=import-outside-toplevel
  chars = alphabet(counts, max(1, num_pieces // 4))
  suffixes = ["##" + ch for ch in chars]
  tok = Tokenizer(WordPiece(unk_token=SPECIAL_TOKENS[0], continuing_subword_prefix="##"))
  tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
  trainer = trainers.WordPieceTrainer(
      vocab_size=num_pieces, min_frequency=min_frequency, show_progress=False,
      special_tokens=suffixes, initial_alphabet=chars, limit_alphabet=len(chars),
      continuing_subword_prefix="##")
  tok.train_from_iterator(_repeated_words(counts), trainer)
  by_id = sorted(tok.get_vocab().items(), key=lambda kv: kv[1])
  suffix_set = set(suffixes)
  learned = [t for t, _ in by_id if t not in suffix_set]
  # Characters first, then their ## forms, then merges in learning order.
  return chars + suffixes + [t for t in learned if t not in set(chars)]


def build_wordpiece_vocab(counts: Counter, vocab_size: int, num_unused: int = REFERENCE_UNUSED,
                          min_frequency: int = 2) -> List[str]:
  """The whole BERT-format vocab: reserved lines, then learned pieces.

  At most `vocab_size` lines; fewer when the corpus has fewer pieces to
  learn.
  """
  reserved = reserved_tokens(num_unused)
  if vocab_size <= len(reserved):
    raise UserError(f"--vocab_size={vocab_size}: must exceed the {len(reserved)} reserved "
                    f"tokens ([PAD], {num_unused} [unused*], {', '.join(SPECIAL_TOKENS)}); "
                    "lower --num_unused or raise --vocab_size")
  if not counts:
    raise UserError("--input_file: the input holds no words")
  pieces = train_wordpiece(counts, vocab_size - len(reserved), min_frequency)
  taken = set(reserved)
  return reserved + [p for p in pieces if p not in taken][:vocab_size - len(reserved)]


# ---------------------------------------------------------------- SentencePiece

def build_sentencepiece_model(files: Sequence[str], vocab_size: int, do_lower_case: bool,
                              on_decode_error: str = "strict",
                              input_sentence_size: int = 10_000_000,
                              random_seed: int = 12345, progress=None,
                              decode: Optional[text_input.DecodeErrorCounts] = None) -> bytes:
  """A SentencePiece unigram model (serialized) trained on the input lines.

  An input with fewer pieces than `vocab_size` gives a model of as many as it
  has (as `build_wordpiece_vocab` gives fewer lines). `decode`, if given,
  counts the lines replaced or skipped as invalid UTF-8.
  """
  spm = spt.require_sentencepiece()
  lines = {"n": 0}

  def sentences(counts) -> Iterable[str]:
    lines["n"] = 0
    for batch in iter_line_batches(files, on_decode_error, counts=counts):
      for line in batch:
        text = spt.preprocess_text(line, do_lower_case)
        if text:
          lines["n"] += 1
          yield text
      if progress is not None:
        progress.update(lambda: f"read {lines['n']:,} lines")

  try:
    model = spt.train_model(spm, sentences(decode), vocab_size, input_sentence_size,
                            random_seed)
  except spt.VocabSizeTooHigh as e:  # as WordPiece: fewer pieces, said in the summary
    if lines["n"] == 0 or e.largest < len(spt.CONTROL_SYMBOLS) + 3:
      raise
    if progress is not None:
      progress.update(lambda: f"the input has at most {e.largest:,} pieces: training "
                      f"{e.largest:,}", force=True)
    model = spt.train_model(spm, sentences(None), e.largest, input_sentence_size, random_seed)
  if lines["n"] == 0:
    raise UserError("--input_file: the input holds no text")
  return model


# ---------------------------------------------------------------- CLI

def define_flags():
  flags.DEFINE_string("input_file", None, "Comma-separated input text files or globs.")
  flags.DEFINE_string("output_file", None, "The vocab file (wordpiece) or .model file "
                      "(sentencepiece) to write.")
  flags.DEFINE_integer("vocab_size", 30522, "Lines of the vocab (including the reserved "
                       "ones) or pieces of the SentencePiece model.")
  flags.DEFINE_enum("kind", "wordpiece", list(KINDS), "What to build.")
  flags.DEFINE_bool("do_lower_case", True, "Lowercase and strip accents first.")
  flags.DEFINE_integer("num_unused", REFERENCE_UNUSED, "[unused*] lines reserved (wordpiece; "
                       "the reference's vocab has 994).")
  flags.DEFINE_integer("min_freq", 2, "A merge needs a pair seen this often (wordpiece; "
                       "the name w2v_data and mt_data use).")
  flags.DEFINE_alias("min_frequency", "min_freq")  # deprecated: the name before --min_freq
  flags.DEFINE_integer("input_sentence_size", 10_000_000, "Lines SentencePiece trains on at "
                       "most (a seeded sample of longer inputs).")
  flags.DEFINE_integer("random_seed", 12345, "Seed of SentencePiece's line sample.")
  cli.define_text_tool_flags()
  cli.define_summary_flag()


def _summary(kind: str, size: int, files: Sequence[str], out: str, data: bytes, extra: dict,
             decode: text_input.DecodeErrorCounts):
  """(the one summary line, the --summary_json dict), as the generators give them
  (`cli.summary`'s shape)."""
  asked = FLAGS.vocab_size
  note = "" if size == asked else f" (asked for {asked:,}: the input has no more pieces to learn)"
  line = f"build_vocab: {size:,} {kind} entries{cli.decode_note(decode.as_dict())} -> {out}{note}"
  written = [{"name": storage.basename(out), "bytes": len(data),
              "sha256": hashlib.sha256(data).hexdigest()}]
  summary = cli.summary("bert_data", out, dict(extra, entries=size, **decode.as_dict()),
                        written, tool="build_vocab", kind=kind, vocab_size=asked,
                        input_files=list(files))
  return line, summary


def _wordpiece(files: Sequence[str], workers: int, decode, progress):
  """(vocab file bytes, entries, summary counts) of --kind=wordpiece."""
  counts = count_words(files, FLAGS.do_lower_case, workers, FLAGS.on_decode_error, progress,
                       decode)
  words = sum(counts.values())
  progress.update(lambda: f"training WordPiece on {len(counts):,} distinct words "
                  f"({words:,} in all)", force=True)
  tokens = build_wordpiece_vocab(counts, FLAGS.vocab_size, FLAGS.num_unused,
                                 FLAGS.min_freq)
  return (vocab_lib.tokens_file_bytes(tokens), len(tokens),
          {"words": words, "distinct_words": len(counts)})


def _sentencepiece(files: Sequence[str], decode, progress):
  """(model bytes, pieces, summary counts) of --kind=sentencepiece."""
  spm = spt.require_sentencepiece()
  model = build_sentencepiece_model(files, FLAGS.vocab_size, FLAGS.do_lower_case,
                                    FLAGS.on_decode_error, FLAGS.input_sentence_size,
                                    FLAGS.random_seed, progress, decode)
  return model, spm.SentencePieceProcessor(model_proto=model).GetPieceSize(), {}


def _check_flags(files: Sequence[str]) -> str:
  """Every flag checked before any reading; returns the output path."""
  if not FLAGS.output_file:
    raise UserError("--output_file is required")
  inputs = [("--input_file", f) for f in files]
  for flag in ("output_file", "summary_json"):
    if FLAGS[flag].value:
      storage.check_not_inputs([FLAGS[flag].value], inputs, f"--{flag}", FLAGS[flag].value)
  out = storage.check_output_file(FLAGS.output_file, "--output_file",
                                  overwrite=FLAGS.overwrite)
  cli.check_range("vocab_size", FLAGS.vocab_size, 1, 1 << 24)
  cli.check_range("num_unused", FLAGS.num_unused, 0, 1 << 20)
  if FLAGS["min_frequency"].present:
    print("warning: --min_frequency is deprecated; use --min_freq", file=sys.stderr)
  cli.check_range("min_freq", FLAGS.min_freq, 0, None)
  cli.check_range("input_sentence_size", FLAGS.input_sentence_size, 1, None)
  text_input.check_decode_mode(FLAGS.on_decode_error)
  cli.refuse_without_effect(FLAGS, _KIND_FLAGS[KINDS[1 - KINDS.index(FLAGS.kind)]],
                            f"with --kind={FLAGS.kind}")
  if FLAGS.kind == "wordpiece":
    if FLAGS.vocab_size <= len(reserved_tokens(FLAGS.num_unused)):
      build_wordpiece_vocab(collections.Counter(), FLAGS.vocab_size, FLAGS.num_unused)
  else:
    spt.require_sentencepiece()
    cli.check_range("vocab_size", FLAGS.vocab_size, len(spt.CONTROL_SYMBOLS) + 3, 1 << 24)
  return out


def main(argv):
  cli.check_no_positional(argv)
  files = text_input.expand_patterns(FLAGS.input_file or "", "--input_file")
  out = _check_flags(files)
  summary_json = cli.check_summary_path(FLAGS.summary_json)
  workers = cli.num_workers(FLAGS.num_workers)
  progress = cli.Progress(FLAGS.quiet)
  decode = text_input.DecodeErrorCounts()
  if FLAGS.kind == "wordpiece":
    data, size, extra = _wordpiece(files, workers, decode, progress)
  else:
    data, size, extra = _sentencepiece(files, decode, progress)
  storage.write_file(out, data)
  line, summary = _summary(FLAGS.kind, size, files, out, data, extra, decode)
  cli.report(line, summary, quiet=FLAGS.quiet, summary_json=summary_json)


entry_point = cli.entry_point(define_flags, main)  # the `bert-build-vocab` console script


if __name__ == "__main__":
  entry_point()
