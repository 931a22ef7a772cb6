"""bert_data's pure pieces of work, run by the generator (`generator.py`) on any engine.

Every engine tokenizes the units' input lines (`tokenize_chunk`), then runs
the same tasks over each partition's corpus: (dupe round, document range) in
the default mode (`default_task_records`), (dupe round, packed instance
range) with `--packing` (`packed_task_records`). Every draw of a task is
keyed by (seed, dupe, partition, document in the partition, a digest of its
tokens; the partition left out for partition 0, so an input of one
partition has the keys of a whole corpus), so a task's records never depend
on which engine or worker runs it. Partitions (`partition_bounds`,
`partitioned_units`) cut the input, from file sizes alone, into about equal
byte ranges of at most `partition_bytes`; documents crossing a cut end
there. The tokenizer, the masking settings, the record encoders, the counts
and the metadata are built here once.

No TensorFlow here, and no engine: nothing in this module starts a process or
writes a file.
"""

import dataclasses
import math
import os
from typing import Optional

import numpy as np

from bert_data import instance_packing
from bert_data import masking
from bert_data import packing
from bert_data import records
from bert_data.config import BertConfig
from bert_data.documents import Corpus, encode_lines
from bert_data.instances import (FastDraws, instances_from_document, instances_from_spans,
                                 spans_from_document)
from bert_data.masks import registry
from bert_data.masks import single_piece
from bert_data.masks import whole_word
from bert_data.sentence_order import sop_spans_from_document
from textrecords import seeding
from textrecords.datasets import metadata
from textrecords.datasets.layout import DEFAULT_SPLIT
from textrecords.engine import protocol
from textrecords.errors import UserError
from textrecords.files import storage
from textrecords.files import text_input
from textrecords.files import tfrecord
from bert_data.tokenizer import SPECIAL_TOKENS, MissingTokens, WordPieceTokenizer
from bert_data import sentencepiece_tokenizer

DOCS_PER_TASK = 32
PACKED_PER_TASK = 512  # packed instances per task (about 32 documents' worth)
_BUCKET_BYTES = 32 << 20  # about the bytes of records one order bucket holds
TEXT_BYTES_PER_TOKEN = 4  # about (English text, WordPiece): sizes bucket a partitioned run


# ---------------------------------------------------------------- partitions

def input_sizes(files) -> list:
  """Each input file's size in bytes."""
  return [storage.size(storage.absolute(p)) for p in files]


def partition_bounds(sizes, partition_bytes: int) -> list:
  """Offsets into the inputs laid end to end that cut them into
  ceil(total / partition_bytes) partitions of about equal size (n + 1
  offsets; one partition: [0, total]).

  >>> partition_bounds([10, 5], 8), partition_bounds([10], 100)
  ([0, 7, 15], [0, 10])
  """
  total = sum(sizes)
  n = max(1, -(-total // partition_bytes))
  return [total * p // n for p in range(n + 1)]


def partitioned_units(files, sizes, unit_bytes: int, bounds) -> list:
  """`protocol.Unit`s of at most `unit_bytes`, cut at every partition
  bound too, each with its partition: a partition is the lines that start
  in its byte range, however the units are cut. With one partition, the
  units of `protocol.units_from_sizes`.

  >>> [(u.index, u.file, u.start, u.end, u.partition)
  ...  for u in partitioned_units(["a", "b"], [10, 5], 4, [0, 7, 15])]
  ... # doctest: +NORMALIZE_WHITESPACE
  [(0, 0, 0, 4, 0), (1, 0, 4, 7, 0), (2, 0, 7, 10, 1), (3, 1, 0, 4, 1),
   (4, 1, 4, 5, 1)]
  """
  units, offset = [], 0
  for file_index, (path, size) in enumerate(zip(files, sizes)):
    path = storage.absolute(path)
    cuts = sorted({0, size} | {b - offset for b in bounds if offset < b < offset + size})
    for a, b in zip(cuts, cuts[1:]):
      partition = int(np.searchsorted(bounds, offset + a, side="right")) - 1
      for start in range(a, b, unit_bytes):
        units.append(protocol.Unit(len(units), file_index, path, start,
                                   min(b, start + unit_bytes), partition))
    offset += size
  return units


# ---------------------------------------------------------------- run settings

def load_tokenizer(config: BertConfig):
  """The WordPiece (or SentencePiece) tokenizer; UserError for an unusable vocab."""
  if config.spm_model_file:
    return sentencepiece_tokenizer.load(config.spm_model_file, config.do_lower_case)
  if storage.is_dir(storage.check(config.vocab_file, "--vocab_file")):
    raise UserError(f"--vocab_file: {config.vocab_file} is a folder, expected a vocab file")
  if not storage.exists(config.vocab_file):
    raise UserError(f"--vocab_file: {config.vocab_file} not found")
  try:
    tok = WordPieceTokenizer(config.vocab_file, do_lower_case=config.do_lower_case)
  except MissingTokens as e:
    missing = e.missing
  except (OSError, ValueError, UnicodeDecodeError) as e:
    raise UserError(f"--vocab_file: cannot load {config.vocab_file}: {e}") from e
  else:
    missing = [t for t in SPECIAL_TOKENS if tok.token_to_id(t) is None]
  if missing:
    raise UserError(f"--vocab_file: {config.vocab_file} lacks {', '.join(missing)}")
  return tok


def masking_params(config: BertConfig, tok) -> masking.MaskingParams:
  """The masking settings of a run: the flags plus the tokenizer's special and
  word-continuing pieces (UserError if whole-word masking has none to use)."""
  words = tok.vocab_words()
  is_subword = bytearray(tok.vocab_size)
  if hasattr(tok, "word_start_flags"):  # SentencePiece: pieces without a word start
    is_subword = bytearray(1 - f for f in tok.word_start_flags())
  for w in words:
    if w.startswith("##"):
      is_subword[tok.token_to_id(w)] = 1
  if config.do_whole_word_mask and not any(is_subword):
    raise UserError(f"--do_whole_word_mask: {config.tokenizer_file} has no word-continuing "
                    "pieces (## pieces), so every word would be one piece")
  return masking.MaskingParams(
      masked_lm_prob=config.masked_lm_prob,
      max_predictions_per_seq=config.max_predictions_per_seq,
      do_whole_word_mask=config.do_whole_word_mask,
      cls_id=tok.token_to_id("[CLS]"), sep_id=tok.token_to_id("[SEP]"),
      mask_id=tok.token_to_id("[MASK]"),
      random_ids=tuple(tok.token_to_id(w) for w in words),
      is_subword=bytes(is_subword), max_ngram_size=config.max_ngram_size)


def make_encoder(config: BertConfig, tok) -> records.BertRecordEncoder:
  """The record encoder of a run (with --pack_instances > 1: compact
  instances, packed into rows once ordered; see `make_row_packer`)."""
  if config.pack_instances > 1:
    return instance_packing.CompactInstanceEncoder(
        config.max_seq_length, config.max_predictions_per_seq, predictions_per_row(config),
        config.pack_instances, v2_names=config.use_v2_feature_names)
  return records.BertRecordEncoder(config.max_seq_length, config.max_predictions_per_seq,
                                   tok.vocab_size, v2_names=config.use_v2_feature_names,
                                   next_sentence=config.next_sentence)


def make_row_packer(config: BertConfig) -> Optional[instance_packing.RowPacker]:
  """--pack_instances > 1: what packs the ordered instances into rows (else None)."""
  if config.pack_instances == 1:
    return None
  return instance_packing.RowPacker(config.max_seq_length, predictions_per_row(config),
                                    config.pack_instances, config.use_v2_feature_names)


def predictions_per_row(config: BertConfig) -> int:
  """Packed rows' masked-LM slots (`instance_packing.predictions_per_row`)."""
  return instance_packing.predictions_per_row(config.max_seq_length,
                                              config.max_predictions_per_seq,
                                              config.pack_instances, config.masked_lm_prob)


def make_dynamic_encoder(config: BertConfig) -> Optional[records.DynamicRecordEncoder]:
  """--masking=dynamic: the unmasked-record encoder (None for static masking)."""
  if config.masking != "dynamic":
    return None
  return records.DynamicRecordEncoder(config.max_seq_length, config.do_whole_word_mask,
                                      v2_names=config.use_v2_feature_names,
                                      next_sentence=config.next_sentence)


# ---------------------------------------------------------------- tokenizing

def tokenize_chunk(chunk, tok, on_decode_error: str):
  """Reads, strips and tokenizes the lines of one input chunk (`text_input.line_chunks`).

  Returns:
    (flat token ids, line lengths, `text_input.DecodeErrorCounts` of the chunk).
  """
  decode_errors = text_input.DecodeErrorCounts()
  lines, _ = text_input.chunk_lines(chunk, on_decode_error, drop_cr=True,
                                    counts=decode_errors)
  flat, lengths = encode_lines([line.strip() for line in lines], tok.encode_batch)
  return flat, lengths, decode_errors


# ---------------------------------------------------------------- tasks

@dataclasses.dataclass
class TaskContext:
  """What a default-mode or packed task reads (the same in both engines)."""
  config: BertConfig
  corpus: Corpus
  mask: Optional[masking.MaskingParams]
  encoder: Optional[records.BertRecordEncoder]
  clean: bool = False  # no [CLS]/[SEP] inside the documents
  packed: Optional[packing.Packing] = None  # --packing: the plan (or a PagedPacking)
  dynamic: Optional[records.DynamicRecordEncoder] = None  # --masking=dynamic
  partition: int = 0  # the input partition the corpus is (keys its draws)

  def item_key(self, index: int) -> tuple:
    """The key parts of a document (or packed instance) of the corpus:
    (index,) in partition 0 (a whole corpus's keys), else the partition's
    too."""
    return (index,) if self.partition == 0 else ("partition", self.partition, index)


def pack(config: BertConfig, corpus: Corpus) -> Optional[packing.Packing]:
  """--packing: the packed instances of the corpus (None without packing)."""
  if not config.packing or corpus.num_docs == 0:
    return None
  return packing.pack(corpus.seg_starts, corpus.doc_starts, config.max_seq_length,
                      config.packing)


_CLEAN_CHUNK = 1 << 20  # tokens `is_clean` compares at a time


def is_clean(corpus: Corpus, mask: masking.MaskingParams) -> bool:
  """Whether no [CLS] or [SEP] id appears inside the corpus's documents
  (looked for `_CLEAN_CHUNK` tokens at a time: a partition's finish holds no
  corpus-sized masks)."""
  tokens, special = corpus.tokens, [mask.cls_id, mask.sep_id]
  return not any(np.isin(tokens[i:i + _CLEAN_CHUNK], special).any()
                 for i in range(0, tokens.size, _CLEAN_CHUNK))


def task_records_fn(ctx: TaskContext):
  """The unit of work of a run: packed instances or (dupe, documents) tasks."""
  return packed_task_records if ctx.packed is not None else default_task_records


def document_digest(corpus: Corpus, d: int) -> int:
  """64-bit digest of document d's token ids (keys its default-mode draws)."""
  s0, s1 = int(corpus.doc_starts[d]), int(corpus.doc_starts[d + 1])
  return seeding.content_digest(
      corpus.tokens[int(corpus.seg_starts[s0]):int(corpus.seg_starts[s1])])


def default_task_records(ctx: TaskContext, dupe: int, d0: int, d1: int):
  """The (order keys, encoded records) of documents [d0, d1) in round `dupe`.

  The unit of work of both engines. Each document's instances are built with
  a `random.Random` keyed by (seed, dupe, document index (and partition:
  `TaskContext.item_key`), digest of the document's token ids); the k-th instance's order key is derived from the
  same key and k, and also keys its masking draws, so the
  task's instances are gathered, masked and encoded together as arrays
  without any draw depending on the task's extent.
  """
  python_masking = ctx.config.do_whole_word_mask or not ctx.clean
  insts, spans, keys = [], [], []
  for d in range(d0, d1):
    digest = document_digest(ctx.corpus, d)
    count = _document_units(ctx, dupe, d, digest, python_masking, insts, spans)
    keys.append(seeding.sub_keys(
        seeding.order_key(ctx.config.random_seed, dupe, *ctx.item_key(d), digest), count))
  keys = np.concatenate(keys) if keys else np.zeros(0, np.uint64)
  if ctx.dynamic is not None:
    return keys, _dynamic_records(ctx, insts, spans, keys)
  if python_masking:
    return keys, [ctx.encoder.encode(inst) for inst in insts]
  return keys, _single_piece_records(ctx, spans, keys)


def _document_units(ctx: TaskContext, dupe: int, d: int, digest: int, python_masking: bool,
                    insts: list, spans: list) -> int:
  """Document d's instances (masked in Python) or spans (masked later as
  arrays), appended to `insts` or `spans`; returns how many."""
  c, corpus = ctx.config, ctx.corpus
  rng = FastDraws(seeding.rng_for(c.random_seed, dupe, *ctx.item_key(d), digest))
  if c.sentence_order:
    doc_spans = sop_spans_from_document(corpus.segment_bounds(d), rng, c.max_num_tokens,
                                        c.short_seq_prob)
    if python_masking and ctx.dynamic is None:
      insts.extend(instances_from_spans(corpus.tokens, doc_spans, rng, ctx.mask, ctx.clean))
    else:
      spans.extend(doc_spans)
    return len(doc_spans)
  if python_masking:
    doc_insts = instances_from_document(
        d, corpus.document(d), corpus, rng, c.max_num_tokens, c.short_seq_prob,
        ctx.mask.cls_id, ctx.mask.sep_id, None if ctx.dynamic else ctx.mask,
        exact_draws=False, clean_corpus=ctx.clean)
    insts.extend(doc_insts)
    return len(doc_insts)
  doc_spans = spans_from_document(d, corpus.segment_bounds(d), corpus, rng,
                                  c.max_num_tokens, c.short_seq_prob)
  spans.extend(doc_spans)
  return len(doc_spans)


def _single_piece_records(ctx: TaskContext, spans, keys) -> list:
  """Records of a task's spans, masked as arrays (single pieces, clean corpus)."""
  if not spans:
    return []
  span_arr = np.asarray([s[:4] for s in spans], np.int64)
  ids, lengths, num_as = masking.spans_to_ids(ctx.corpus.tokens, span_arr, ctx.mask.cls_id,
                                              ctx.mask.sep_id, ctx.config.max_seq_length)
  ids, lengths, positions, labels, counts = single_piece.mask_matrix(
      ids, lengths, num_as, keys, ctx.mask)
  return ctx.encoder.encode_arrays(ids, lengths, num_as.tolist(), [s[4] for s in spans],
                                   positions, labels, counts)


def _dynamic_records(ctx: TaskContext, insts, spans, keys) -> list:
  """Unmasked records (`--masking=dynamic`) of a task's instances or spans."""
  c = ctx.config
  if insts:
    lengths = np.fromiter((len(i.tokens) for i in insts), np.int64, len(insts))
    ids = np.zeros((len(insts), c.max_seq_length), np.int64)
    ids[np.arange(c.max_seq_length)[None, :] < lengths[:, None]] = np.fromiter(
        (t for i in insts for t in i.tokens), np.int64, int(lengths.sum()))
    num_as = [i.num_a for i in insts]
    is_random_next = [i.is_random_next for i in insts]
  elif spans:
    span_arr = np.asarray([s[:4] for s in spans], np.int64)
    ids, lengths, num_as = masking.spans_to_ids(ctx.corpus.tokens, span_arr, ctx.mask.cls_id,
                                                ctx.mask.sep_id, c.max_seq_length)
    num_as = num_as.tolist()
    is_random_next = [s[4] for s in spans]
  else:
    return []
  starts = whole_word.word_starts(ids, lengths, ctx.mask) if c.do_whole_word_mask else None
  return ctx.dynamic.encode_arrays(ids, lengths, num_as, is_random_next, keys, starts)


def packed_task_records(ctx: TaskContext, dupe: int, k0: int, k1: int):
  """The (order keys, records) of packed instances [k0, k1) in round `dupe`.

  Packing has no randomness (`packing.pack`); instance k's masks and order
  key come from (seed, dupe, k, a digest of its token ids).
  """
  c = ctx.config
  ids, lengths, special = packing.instance_ids(ctx.corpus.tokens, ctx.packed.window(k0, k1),
                                               range(k1 - k0), ctx.mask.cls_id,
                                               ctx.mask.sep_id, c.max_seq_length)
  keys = np.asarray([seeding.order_key(c.random_seed, dupe, "packed", *ctx.item_key(k),
                                       seeding.content_digest(ids[k - k0]))
                     for k in range(k0, k1)], np.uint64)
  if ctx.dynamic is not None:   # unmasked; make_dataset masks (never [CLS]/[SEP])
    starts = whole_word.word_starts(ids, lengths, ctx.mask) if c.do_whole_word_mask else None
    records_ = ctx.dynamic.encode_arrays(ids, lengths, lengths.tolist(), [False] * len(keys),
                                         keys, starts)
  elif c.do_whole_word_mask or not ctx.clean:
    records_ = []
    for r, key in enumerate(keys.tolist()):
      rng = FastDraws(seeding.rng_for(c.random_seed, key))
      tokens = ids[r, :lengths[r]].tolist()
      output, positions, labels = masking.mask_tokens(tokens, rng, ctx.mask, False)
      records_.append(ctx.encoder.encode_parts(output, len(tokens), False, positions, labels))
  else:
    ids, lengths, positions, labels, counts = single_piece.mask_matrix(
        ids, lengths, lengths.copy(), keys, ctx.mask, special=special)
    records_ = ctx.encoder.encode_arrays(ids, lengths, lengths.tolist(),
                                         [False] * len(keys), positions, labels, counts)
  return keys, records_


# ---------------------------------------------------------------- order buckets

def estimate_record_bytes(config: BertConfig, num_tokens: int) -> float:
  """About the bytes of records a run of `num_tokens` tokens makes (all
  --dupe_factor rounds)."""
  est_records = num_tokens * config.dupe_factor / max(1, config.max_num_tokens * 0.8)
  return est_records * (config.max_seq_length * 3 + config.max_predictions_per_seq * 8 + 200)


def estimate_buckets(config: BertConfig, corpus: Corpus, num_shards: int) -> int:
  """How many hash buckets the instances of a corpus are ordered in (a
  multiple of `num_shards`, each bucket about `_BUCKET_BYTES` of records)."""
  return buckets_for_tokens(config, corpus.num_tokens, num_shards)


def buckets_for_bytes(config: BertConfig, input_bytes: int, num_shards: int) -> int:
  """`estimate_buckets` of a partitioned run, from the input's size
  (`TEXT_BYTES_PER_TOKEN`): no partition knows every token."""
  return buckets_for_tokens(config, input_bytes // TEXT_BYTES_PER_TOKEN, num_shards)


def buckets_for_tokens(config: BertConfig, num_tokens: int, num_shards: int) -> int:
  """`estimate_buckets` for `num_tokens` tokens."""
  est_bytes = estimate_record_bytes(config, num_tokens)
  per_shard = max(1, math.ceil(est_bytes / _BUCKET_BYTES / num_shards))
  return num_shards * per_shard


def check_instance_count(total: int, num_files: int):
  """Every output file must get an instance (UserError otherwise)."""
  if total < num_files:
    raise UserError(f"--num_shards={num_files} (or that many --output_file paths) "
                    f"but the input makes only {total} instances: every file would not "
                    "get one; use fewer shards or more input")


# ---------------------------------------------------------------- counts and metadata

def masking_meta(config: BertConfig, mask: masking.MaskingParams) -> dict:
  """The metadata's "masking" block: the settings `make_dataset` needs to mask
  dynamic records (and a record of how static ones were masked)."""
  out = {"mode": config.masking, "masked_lm_prob": config.masked_lm_prob,
         "max_predictions_per_seq": config.max_predictions_per_seq,
         **registry.meta_fields(config)}
  if config.masking == "dynamic":
    pool = list(mask.random_ids)
    out.update({"cls_id": mask.cls_id, "sep_id": mask.sep_id, "mask_id": mask.mask_id,
                # The pool of the 10% random replacements: usually all ids in order.
                "random_ids": ({"range": len(pool)} if pool == list(range(len(pool)))
                               else pool)})
  return out


def run_summary(corpus: Corpus, instances: int,
                decode_errors: text_input.DecodeErrorCounts) -> dict:
  """A run's summary, also the metadata's `counts`."""
  return {"documents": corpus.num_docs, "tokens": corpus.num_tokens, "instances": instances,
          **decode_errors.as_dict()}


def summary_of(meta: dict) -> dict:
  """The summary of a finished run, from its metadata."""
  return {k: v for k, v in meta["counts"].items() if k != "records"}


class MetaBuilder:
  """build_meta(file infos) -> one dataset's metadata (picklable).

  `partitions`: for an input of more than one partition, {"count": n,
  "partition_bytes": at most that many bytes each} (its random next
  sentences come from within each partition); None (no field) otherwise.
  """

  def __init__(self, config: BertConfig, vocab_sha: str, vocab_size: int, schema: list,
               masking_block: dict, summary: dict, partitions: Optional[dict] = None):
    self.config, self.vocab_sha, self.vocab_size = config, vocab_sha, vocab_size
    self.schema, self.masking_block, self.summary = schema, masking_block, summary
    self.partitions = partitions

  def __call__(self, infos) -> dict:
    config = self.config
    meta = metadata.base_meta("bert_data")
    meta.update({
        "schema": self.schema,
        "max_seq_length": config.max_seq_length,
        "max_predictions_per_seq": config.max_predictions_per_seq,
        "compression": tfrecord.check_compression(config.compression),
        "vocab_sha256": self.vocab_sha,
        "vocab_size": self.vocab_size, "random_seed": config.random_seed,
        "mode": "reference" if config.reference_compatible else "default",
        "masking": self.masking_block,
        "flags": dict(config.identity_flags(),  # URL outputs as given, not staged
                      output_files=[storage.origin(p) for p in config.output_files]),
        "counts": dict(self.summary, records=sum(i["records"] for i in infos)),
        "datasets": [os.path.basename(p) for p in config.output_files],
        "sentence_task": config.sentence_task,
        "packing": config.packing or None,
        "pack_instances": config.pack_instances,
        "predictions_per_row": (predictions_per_row(config) if config.pack_instances > 1
                                else config.max_predictions_per_seq),
        "tokenizer": "sentencepiece" if config.spm_model_file else "wordpiece",
    })
    if self.partitions:
      meta["partitions"] = dict(self.partitions)
    if config.spm_model_file:
      meta["spm_model_sha256"] = self.vocab_sha
    meta["external_files"] = [metadata.external_file(
        config.tokenizer_file, self.vocab_sha, "tokenizer" if config.spm_model_file else "vocab")]
    return metadata.set_files(meta, infos, {DEFAULT_SPLIT: [i["name"] for i in infos]})
