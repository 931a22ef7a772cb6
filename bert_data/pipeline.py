"""The bert_data run: corpus -> instances -> records -> files + metadata.

No TensorFlow here. Worker processes (fork) tokenize line batches and, in the
default mode, build, encode and spill the instances of (dupe, document-range)
tasks; every draw depends only on (seed, dupe, document, a digest of its
tokens), so the output is the same for any number of workers.
"""

import array
import dataclasses
import functools
import math
import mmap
import os
import random
from typing import Dict, Optional

import numpy as np

from bert_data import masking
from bert_data import packing
from bert_data import records
from bert_data.config import BertConfig
from bert_data.masks import registry
from bert_data.masks import single_piece
from bert_data.masks import whole_word
from bert_data.documents import Corpus, encode_lines, read_corpus
from bert_data.instances import (FastDraws, instances_from_document, instances_from_spans,
                                 spans_from_document)
from bert_data.sentence_order import sop_spans_from_document
from textrecords.runs import cli
from textrecords import engine as engine_lib
from textrecords.engine import local as local_engine
from textrecords.files import storage
from textrecords.wire import features
from textrecords.datasets import metadata
from textrecords.engine import parallel
from textrecords.runs import run as run_lib
from textrecords import seeding
from textrecords.files import spill
from textrecords.files import text_input
from textrecords.files import tfrecord
from textrecords.errors import UserError
from textrecords.datasets.layout import DEFAULT_SPLIT, DatasetLayout

_DOCS_PER_TASK = 32
_PACKED_PER_TASK = 512  # packed instances per worker task (about 32 documents' worth)
_CHUNK_BYTES = 1 << 20  # input bytes a tokenizing task reads
_BUCKET_BYTES = 32 << 20

# Per-process state: set before forking workers, or by the initializer.
_STATE: Dict[str, object] = {}


def load_tokenizer(config: BertConfig):
  """The WordPiece (or SentencePiece) tokenizer; UserError for an unusable vocab."""
  if config.spm_model_file:
    from bert_data import sentencepiece_tokenizer  # pylint: disable=import-outside-toplevel
    return sentencepiece_tokenizer.load(config.spm_model_file, config.do_lower_case)
  from bert_data.tokenizer import (  # pylint: disable=import-outside-toplevel
      SPECIAL_TOKENS, MissingTokens, WordPieceTokenizer)
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


# ---------------------------------------------------------------- tokenizing

def _tokenize_chunk(chunk):
  """Worker: reads, strips and tokenizes the lines of one input chunk.

  Returns (flat ids, line lengths, (lines replaced, lines skipped) as invalid UTF-8).
  """
  decode_errors = text_input.DecodeErrorCounts()
  lines, _ = text_input.chunk_lines(chunk, _STATE["on_decode_error"], drop_cr=True,
                                    counts=decode_errors)
  flat, lengths = encode_lines([line.strip() for line in lines],
                               _STATE["tokenizer"].encode_batch)
  return flat, lengths, decode_errors.as_tuple()


def _init_tokenizer(tok, on_decode_error):
  _STATE["tokenizer"] = tok
  _STATE["on_decode_error"] = on_decode_error


def build_corpus(config: BertConfig, tok, progress: cli.Progress,
                 decode_errors: Optional[text_input.DecodeErrorCounts] = None) -> Corpus:
  """Reads and tokenizes all input files in worker processes.

  This process only cuts the files into chunks of whole lines and joins the
  workers' (ids, line lengths) arrays in order; `decode_errors`, if given,
  gets the sum of the chunks' counts of lines replaced or skipped.
  """
  chunks = text_input.line_chunks(config.input_files, _CHUNK_BYTES)
  if config.num_workers > 1:
    # Worker processes are the parallelism; Hugging Face threads would oversubscribe.
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
  results = parallel.ordered_map(_tokenize_chunk, chunks, config.num_workers,
                                 initializer=_init_tokenizer,
                                 initargs=(tok, config.on_decode_error))

  def report(builder):
    progress.update(lambda: f"read {builder.lines:,} lines")

  def tokenized():
    for flat, lengths, errors in results:
      if decode_errors is not None:
        decode_errors.add(errors)
      yield flat, lengths

  return read_corpus(tokenized(), config.input_files, report)


# ---------------------------------------------------------------- instances

@dataclasses.dataclass
class _Context:
  config: BertConfig
  corpus: Corpus
  mask: masking.MaskingParams
  encoder: records.BertRecordEncoder
  spill_dir: str = ""
  num_buckets: int = 1
  clean: bool = False  # no [CLS]/[SEP] inside the documents
  packed: Optional[packing.Packing] = None  # --packing: the packed instances
  dynamic: Optional[records.DynamicRecordEncoder] = None  # --masking=dynamic


def make_encoder(config: BertConfig, tok) -> records.BertRecordEncoder:
  """The record encoder of a run (both engines)."""
  return records.BertRecordEncoder(config.max_seq_length, config.max_predictions_per_seq,
                                   tok.vocab_size, v2_names=config.use_v2_feature_names,
                                   next_sentence=config.next_sentence)


def make_dynamic_encoder(config: BertConfig) -> Optional[records.DynamicRecordEncoder]:
  """--masking=dynamic: the unmasked-record encoder (None for static masking)."""
  if config.masking != "dynamic":
    return None
  return records.DynamicRecordEncoder(config.max_seq_length, config.do_whole_word_mask,
                                      v2_names=config.use_v2_feature_names,
                                      next_sentence=config.next_sentence)


def make_context(config: BertConfig, corpus: Corpus, mask: masking.MaskingParams,
                 encoder: records.BertRecordEncoder, clean: bool,
                 packed: Optional[packing.Packing] = None,
                 dynamic: Optional[records.DynamicRecordEncoder] = None) -> _Context:
  """The context a default-mode task runs in (both engines)."""
  return _Context(config, corpus, mask, encoder, clean=clean, packed=packed, dynamic=dynamic)


def pack(config: BertConfig, corpus: Corpus) -> Optional[packing.Packing]:
  """--packing: the packed instances of the corpus (None without packing)."""
  if not config.packing:
    return None
  return packing.pack(corpus.seg_starts, corpus.doc_starts, config.max_seq_length,
                      config.packing)


def _doc_instances(ctx: _Context, d: int, rng):
  c = ctx.config
  return instances_from_document(
      d, ctx.corpus.document(d), ctx.corpus, rng, c.max_num_tokens, c.short_seq_prob,
      ctx.mask.cls_id, ctx.mask.sep_id, ctx.mask, exact_draws=c.reference_compatible,
      clean_corpus=ctx.clean)


def document_digest(corpus: Corpus, d: int) -> int:
  """64-bit digest of document d's token ids (keys its default-mode draws)."""
  s0, s1 = int(corpus.doc_starts[d]), int(corpus.doc_starts[d + 1])
  return seeding.content_digest(
      corpus.tokens[int(corpus.seg_starts[s0]):int(corpus.seg_starts[s1])])


def default_task_records(ctx: _Context, dupe: int, d0: int, d1: int):
  """The (order keys, encoded records) of documents [d0, d1) in round `dupe`.

  The unit of work of both engines. Each document's instances are built with
  a `random.Random` keyed by (seed, dupe, document index, digest of the
  document's token ids); the k-th instance's order key is derived from the
  same key and k, and also keys its masking draws, so the
  task's instances are gathered, masked and encoded together as arrays
  without any draw depending on the task's extent.
  """
  c = ctx.config
  seed = c.random_seed
  corpus = ctx.corpus
  python_masking = c.do_whole_word_mask or not ctx.clean
  mask_params = None if ctx.dynamic else ctx.mask
  insts, spans, keys = [], [], []
  for d in range(d0, d1):
    digest = document_digest(corpus, d)
    rng = FastDraws(seeding.rng_for(seed, dupe, d, digest))
    if c.sentence_order:
      doc_spans = sop_spans_from_document(corpus.segment_bounds(d), rng, c.max_num_tokens,
                                          c.short_seq_prob)
      if python_masking and ctx.dynamic is None:
        insts.extend(instances_from_spans(corpus.tokens, doc_spans, rng, ctx.mask, ctx.clean))
      else:
        spans.extend(doc_spans)
      count = len(doc_spans)
    elif python_masking:
      doc_insts = instances_from_document(
          d, corpus.document(d), corpus, rng, c.max_num_tokens, c.short_seq_prob,
          ctx.mask.cls_id, ctx.mask.sep_id, mask_params, exact_draws=False,
          clean_corpus=ctx.clean)
      insts.extend(doc_insts)
      count = len(doc_insts)
    else:
      doc_spans = spans_from_document(d, corpus.segment_bounds(d), corpus, rng,
                                      c.max_num_tokens, c.short_seq_prob)
      spans.extend(doc_spans)
      count = len(doc_spans)
    keys.append(seeding.sub_keys(seeding.order_key(seed, dupe, d, digest), count))
  keys = np.concatenate(keys) if keys else np.zeros(0, np.uint64)
  if ctx.dynamic is not None:
    records_ = _dynamic_records(ctx, insts, spans, keys)
  elif python_masking:
    records_ = [ctx.encoder.encode(inst) for inst in insts]
  elif spans:
    span_arr = np.asarray([s[:4] for s in spans], np.int64)
    ids, lengths, num_as = masking.spans_to_ids(corpus.tokens, span_arr, ctx.mask.cls_id,
                                                ctx.mask.sep_id, c.max_seq_length)
    ids, lengths, positions, labels, counts = single_piece.mask_matrix(
        ids, lengths, num_as, keys, ctx.mask)
    records_ = ctx.encoder.encode_arrays(ids, lengths, num_as.tolist(),
                                         [s[4] for s in spans], positions, labels, counts)
  else:
    records_ = []
  return keys, records_


def _spill_task(task_records, task):
  """Worker: a task's records spilled to hash buckets by order key."""
  ctx: _Context = _STATE["ctx"]
  keys, records_ = task_records(ctx, *task)
  writer = spill.SpillWriter(ctx.spill_dir, f"w{os.getpid()}", ctx.num_buckets)
  for key, rec in zip(keys.tolist(), records_):
    writer.add(key, rec)
  writer.close()
  return writer.bucket_counts


def packed_task_records(ctx: _Context, dupe: int, k0: int, k1: int):
  """The (order keys, records) of packed instances [k0, k1) in round `dupe`.

  Packing has no randomness (`packing.pack`); instance k's masks and order
  key come from (seed, dupe, k, a digest of its token ids).
  """
  c = ctx.config
  corpus = ctx.corpus
  ids, lengths, special = packing.instance_ids(corpus.tokens, ctx.packed, range(k0, k1),
                                               ctx.mask.cls_id, ctx.mask.sep_id,
                                               c.max_seq_length)
  keys = np.asarray([seeding.order_key(c.random_seed, dupe, "packed", k,
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


def _dynamic_records(ctx: _Context, insts, spans, keys) -> list:
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


def task_records_fn(ctx: _Context):
  """The unit of work of a run: packed instances or (dupe, documents) tasks."""
  return packed_task_records if ctx.packed is not None else default_task_records


def run_tasks(ctx: _Context):
  """The (dupe, first, end) tasks of a run (both engines)."""
  if ctx.packed is not None:
    return tasks(ctx.config, ctx.packed.num_instances, _PACKED_PER_TASK)
  return tasks(ctx.config, ctx.corpus.num_docs)


def tasks(config: BertConfig, num_units: int, per_task: int = _DOCS_PER_TASK):
  """(dupe, first, end) ranges of documents (or packed instances)."""
  for dupe in range(config.dupe_factor):
    for d0 in range(0, num_units, per_task):
      yield dupe, d0, min(num_units, d0 + per_task)


def estimate_buckets(config: BertConfig, corpus: Corpus, num_shards: int) -> int:
  est_records = corpus.num_tokens * config.dupe_factor / max(1, config.max_num_tokens * 0.8)
  est_bytes = est_records * (config.max_seq_length * 3 + config.max_predictions_per_seq * 8 + 200)
  per_shard = max(1, math.ceil(est_bytes / _BUCKET_BYTES / num_shards))
  return num_shards * per_shard


def spill_default_mode(ctx: _Context, progress: cli.Progress) -> np.ndarray:
  """Builds all instances in workers, spilled to hash buckets; returns the
  number of records in each bucket."""
  _STATE["ctx"] = ctx
  per_bucket = np.zeros(ctx.num_buckets, np.int64)
  task_list = list(run_tasks(ctx))
  task_fn = functools.partial(_spill_task, task_records_fn(ctx))
  for n, counts in enumerate(parallel.ordered_map(task_fn, task_list,
                                                  ctx.config.num_workers)):
    per_bucket += counts
    progress.update(
        lambda: f"instances: {int(per_bucket.sum()):,} ({n + 1}/{len(task_list)} tasks)")
  return per_bucket


def check_instance_count(total: int, num_files: int):
  """Every output file must get an instance (UserError otherwise)."""
  if total < num_files:
    raise UserError(f"--num_shards={num_files} (or that many --output_file paths) "
                    f"but the input makes only {total} instances: every file would not "
                    "get one; use fewer shards or more input")


def _frame_bucket(task):
  """Worker: sorts bucket b into files of framed records, one per output file
  its records go to; returns their `local_engine.Part`s.

  Args:
    task: (bucket, its first record's index in the whole output order,
      number of round-robin output files or 0 for shards by bucket range,
      buckets per shard).
  """
  b, first, round_robin, per_shard = task
  ctx: _Context = _STATE["ctx"]
  items = spill.read_bucket(ctx.spill_dir, b)
  for path in spill.bucket_files(ctx.spill_dir, b):
    os.remove(path)
  frame = tfrecord.frame
  framed = [frame(rec) for _, rec in items]
  if round_robin:
    groups = local_engine.split_round_robin(framed, first, round_robin)
  else:
    groups = [(b // per_shard, framed)]
  return local_engine.spill_parts(ctx.spill_dir, f"framed-{b:05d}", groups)


def write_default_mode_files(ctx: _Context, targets, per_bucket: np.ndarray, compression: str,
                             round_robin: bool, progress: cli.Progress) -> int:
  """Sorts and frames buckets in workers; one writer process appends them.

  Args:
    targets: per output file, (DatasetWriter, path), or None if finished.
    per_bucket: records in each bucket.
    round_robin: instances go to the files round-robin (several
      --output_file), else file i holds the i-th range of buckets (shards).
  Returns:
    The number of records written.
  """
  nb, n_files = ctx.num_buckets, len(targets)
  per_shard = 0 if round_robin else nb // n_files
  firsts = np.concatenate([[0], np.cumsum(per_bucket)[:-1]]).tolist()
  tasks = [(b, firsts[b], n_files if round_robin else 0, per_shard) for b in range(nb)]

  def part_lists():
    for b, parts in enumerate(parallel.ordered_map(_frame_bucket, tasks,
                                                   ctx.config.num_workers)):
      if round_robin:
        finished = range(n_files) if b == nb - 1 else ()
      else:
        finished = [b // per_shard] if (b + 1) % per_shard == 0 else ()
      yield parts, finished
      progress.update(lambda: f"written {int(per_bucket[:b + 1].sum()):,} records")

  local_engine.append_parts(part_lists(), targets, compression, ctx.config.num_workers)
  return int(per_bucket.sum())


# Reference mode: this process walks the one RNG (instances, then the final
# shuffle); workers encode and frame the instances, then gather them in the
# shuffled order into part files that the writer process appends.

_REF_BATCH = 2048  # instances per encoding task


def _new_batch():
  # tokens, lengths, num_as, is_random_next, positions, labels, counts
  return (array.array("i"), array.array("i"), array.array("i"), array.array("b"),
          array.array("i"), array.array("i"), array.array("i"))


def _reference_batches(ctx: _Context, rng: random.Random, progress: cli.Progress):
  """The reference's RNG walk; yields (batch number, instances as flat arrays)."""
  k = total = 0
  batch = _new_batch()
  for _ in range(ctx.config.dupe_factor):
    for d in range(ctx.corpus.num_docs):
      tokens, lengths, num_as, is_random, positions, labels, counts = batch
      for inst in _doc_instances(ctx, d, rng):
        tokens.extend(inst.tokens)
        lengths.append(len(inst.tokens))
        num_as.append(inst.num_a)
        is_random.append(inst.is_random_next)
        positions.extend(inst.positions)
        labels.extend(inst.labels)
        counts.append(len(inst.positions))
      if len(lengths) >= _REF_BATCH:
        total += len(lengths)
        yield k, batch
        k += 1
        batch = _new_batch()
        progress.update(lambda: f"instances: {total:,}")
  if len(batch[1]):
    yield k, batch


def _compiled_batches(ctx: _Context, walk, rng: random.Random, progress: cli.Progress):
  """`_reference_batches` from the compiled walk (`reference_walk.Walk`): the
  same instances and draws; batches end anywhere (not at documents)."""
  k = total = 0
  while not walk.done:
    batch = walk.batch(rng, _REF_BATCH)
    if not len(batch[1]):
      break
    total += len(batch[1])
    yield k, batch
    k += 1
    progress.update(lambda: f"instances: {total:,}")


def _rows(flat, lengths: np.ndarray, width: int) -> np.ndarray:
  """A zero-padded [len(lengths), width] matrix of the concatenated rows `flat`."""
  out = np.zeros((len(lengths), width), np.int64)
  out[np.arange(width) < lengths[:, None]] = np.frombuffer(flat, np.int32)
  return out


def _encode_reference_batch(item):
  """Worker: encodes and frames a batch of instances into a scratch file;
  returns the framed records' sizes."""
  k, (tokens, lengths, num_as, is_random, positions, labels, counts) = item
  ctx: _Context = _STATE["ctx"]
  lengths = np.frombuffer(lengths, np.int32)
  counts = np.frombuffer(counts, np.int32)
  pred = ctx.config.max_predictions_per_seq
  recs = ctx.encoder.encode_arrays(
      _rows(tokens, lengths, ctx.config.max_seq_length), lengths, num_as.tolist(),
      is_random.tolist(), _rows(positions, counts, pred), _rows(labels, counts, pred), counts)
  framed = [tfrecord.frame(r) for r in recs]
  with open(os.path.join(ctx.spill_dir, f"ref-{k:06d}"), "wb") as f:
    f.write(b"".join(framed))
  return np.fromiter(map(len, framed), np.int64, len(framed))


def _gather_reference(task):
  """Worker: the framed records at positions [s, e) of the shuffled order, as
  part files (round-robin over the outputs)."""
  s, e, n_files = task
  st = _STATE["gather"]
  ctx: _Context = _STATE["ctx"]
  maps = {}  # mapped per task, so a worker's resident pages stay bounded
  idx = st["order"][s:e]
  out = []
  try:
    for b, o, n in zip(st["batch"][idx].tolist(), st["offset"][idx].tolist(),
                       st["size"][idx].tolist()):
      m = maps.get(b)
      if m is None:
        with open(os.path.join(ctx.spill_dir, f"ref-{b:06d}"), "rb") as f:
          m = maps[b] = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
      out.append(m[o:o + n])
  finally:
    for m in maps.values():
      m.close()
  return local_engine.spill_parts(ctx.spill_dir, f"gathered-{s:012d}",
                                  local_engine.split_round_robin(out, s, n_files))


def write_reference_mode_files(ctx: _Context, rng: random.Random, targets, compression: str,
                               progress: cli.Progress) -> int:
  """Reference mode: records in the reference's order, round-robin over the files.

  This process makes the reference's RNG calls (instances of every dupe
  round and document, then one shuffle of all instances); workers encode and
  frame batches of instances as they come, then gather them in the shuffled
  order (the shuffle's draws depend only on the count); one writer process
  appends the gathered parts and hashes the files.
  """
  _STATE["ctx"] = ctx
  c = ctx.config
  with cli.notice_if_slow(progress.sayer()):  # numba's first compile takes a minute
    # Imported here: numba (if installed) loads only for reference mode.
    from bert_data import reference_rng, reference_walk  # pylint: disable=import-outside-toplevel
    compiled = reference_walk.available()
    if compiled:
      walk = reference_walk.Walk(ctx.corpus, ctx.mask, c.max_seq_length, c.short_seq_prob,
                                 c.dupe_factor)
      walk.batch(rng, 0)  # compiles (or loads the cached kernel) before the workers start
      reference_rng.shuffled_range(random.Random(0), 2)  # its kernel too (another rng)
  if compiled:
    batches = _compiled_batches(ctx, walk, rng, progress)
  else:
    batches = _reference_batches(ctx, rng, progress)
  sizes = list(parallel.ordered_map(_encode_reference_batch, batches, c.num_workers,
                                    prefetch=4))
  total = sum(len(x) for x in sizes)
  if compiled:
    order = reference_rng.shuffled_range(rng, total)
  else:
    order = list(range(total))
    rng.shuffle(order)
    order = np.asarray(order, np.int64)
  size = np.concatenate(sizes) if sizes else np.zeros(0, np.int64)
  offset = np.concatenate([np.cumsum(x) - x for x in sizes]) if sizes else size
  _STATE["gather"] = {
      "order": order, "size": size, "offset": offset,
      "batch": np.repeat(np.arange(len(sizes)), [len(x) for x in sizes])}
  del order
  n_files = len(targets)
  tasks = [(s, min(total, s + _REF_BATCH), n_files) for s in range(0, total, _REF_BATCH)]

  def part_lists():
    for n, parts in enumerate(parallel.ordered_map(_gather_reference, tasks,
                                                   ctx.config.num_workers)):
      yield parts, (range(n_files) if n == len(tasks) - 1 else ())
      progress.update(lambda: f"written {min(total, (n + 1) * _REF_BATCH):,} records")

  local_engine.append_parts(part_lists(), targets, compression, ctx.config.num_workers)
  _STATE.pop("gather", None)
  return total


# ---------------------------------------------------------------- outputs

def fingerprint(config: BertConfig, vocab_sha: str) -> dict:
  """What determines the output bytes (`run.fingerprint`); local paths
  absolute, so --resume works from any working directory."""
  flags = config.identity_flags()
  flags["input_files"] = [storage.absolute(p) for p in config.input_files]
  flags["output_files"] = [storage.absolute(p) for p in config.output_files]
  for k in ("vocab_file", "spm_model_file"):
    if flags.get(k):
      flags[k] = storage.absolute(flags[k])
  return run_lib.fingerprint("bert_data", flags, config.input_files, vocab_sha256=vocab_sha)


def datasets(config: BertConfig):
  """The run's datasets: one per --output_file, each of --num_shards files."""
  return [run_lib.DatasetFiles(lay, tuple(lay.record_paths(num_shards=config.num_shards)),
                               compression=tfrecord.check_compression(config.compression))
          for lay in map(DatasetLayout.for_file, config.output_files)]


def create(config: BertConfig, engine: engine_lib.EngineOptions = engine_lib.LOCAL) -> dict:
  """Runs the whole job; returns a summary dict (also stored in the metadata).

  Runs in a `run.GeneratorRun` (locks, destination checks, resume, scratch,
  finalize) and leaves no corpus or tokenizer behind in module state.
  """
  config.validate()
  engine.validate(config.output_files)
  if engine.is_beam and config.reference_compatible:
    raise UserError("--reference_compatible with --engine=beam: the reference's order comes "
                    "from one sequential RNG; use --engine=local")
  try:
    return _create(config, engine)
  finally:
    _STATE.clear()


def _create(config: BertConfig, engine: engine_lib.EngineOptions) -> dict:
  progress = cli.Progress(config.quiet)
  tok = load_tokenizer(config)
  vocab_sha = storage.sha256(config.tokenizer_file)
  # Several --output_file paths are separate datasets, filled round-robin;
  # one path with --num_shards is one dataset of N shards.
  outputs = datasets(config)
  with run_lib.GeneratorRun("bert_data", outputs, fingerprint(config, vocab_sha), config,
                            flag="--output_file", engine=engine) as run:
    if run.already_complete:
      progress.update(lambda: f"{outputs[0].layout.meta_path} is already complete for these "
                      "inputs and flags", force=True)
      return summary_of(run.existing_meta())
    groups = [(d.layout.meta_path, list(d.record_paths)) for d in outputs]
    if engine.is_beam:
      from bert_data import beam_pipeline  # pylint: disable=import-outside-toplevel
      return beam_pipeline.create(config, tok, vocab_sha, groups, run.writers, engine)
    return _run_local(config, tok, vocab_sha, run, progress)


def _run_local(config: BertConfig, tok, vocab_sha: str, run: run_lib.GeneratorRun,
               progress: cli.Progress) -> dict:
  """The local engine's run inside the GeneratorRun."""
  compression = tfrecord.check_compression(config.compression)
  decode_errors = text_input.DecodeErrorCounts()
  corpus = build_corpus(config, tok, progress, decode_errors)
  progress.update(lambda: f"read {corpus.num_docs:,} documents, "
                  f"{corpus.num_tokens:,} tokens", force=True)
  mask = masking_params(config, tok)
  encoder = make_encoder(config, tok)
  dynamic = make_dynamic_encoder(config)
  clean = not np.isin(corpus.tokens, [mask.cls_id, mask.sep_id]).any()
  tmp = run.scratch_dir()
  targets = [None if w.is_finished(p) else (w, p)
             for w, d in zip(run.writers, run.datasets) for p in d.record_paths]
  if config.reference_compatible:
    rng = random.Random(config.random_seed)
    order = list(range(corpus.num_docs))
    rng.shuffle(order)
    ctx = _Context(config, corpus.reordered(order), mask, encoder, spill_dir=tmp, clean=clean)
    count = write_reference_mode_files(ctx, rng, targets, compression, progress)
  else:
    nb = estimate_buckets(config, corpus, config.num_shards)
    ctx = _Context(config, corpus, mask, encoder, spill_dir=tmp, num_buckets=nb, clean=clean,
                   dynamic=dynamic)
    ctx.packed = pack(config, corpus)
    per_bucket = spill_default_mode(ctx, progress)
    check_instance_count(int(per_bucket.sum()), len(targets))
    count = write_default_mode_files(ctx, targets, per_bucket, compression,
                                     len(config.output_files) > 1, progress)
  summary = run_summary(corpus, count, decode_errors)
  build = MetaBuilder(config, vocab_sha, tok.vocab_size,
                      features.schema_to_json((dynamic or encoder).schema),
                      masking_meta(config, mask), summary)
  run.finalize([build] * len(run.datasets))
  progress.update(lambda: f"wrote {count:,} instances to {len(targets)} file(s)", force=True)
  return summary


def run_summary(corpus: Corpus, instances: int,
                decode_errors: text_input.DecodeErrorCounts) -> dict:
  """A run's summary, also the metadata's `counts` (both engines)."""
  return {"documents": corpus.num_docs, "tokens": corpus.num_tokens, "instances": instances,
          **decode_errors.as_dict()}


def summary_of(meta: dict) -> dict:
  """The summary of a finished run, from its metadata."""
  return {k: v for k, v in meta["counts"].items() if k != "records"}


class MetaBuilder:
  """build_meta(file infos) -> one dataset's metadata (both engines; picklable)."""

  def __init__(self, config: BertConfig, vocab_sha: str, vocab_size: int, schema: list,
               masking_block: dict, summary: dict):
    self.config, self.vocab_sha, self.vocab_size = config, vocab_sha, vocab_size
    self.schema, self.masking_block, self.summary = schema, masking_block, summary

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
        "tokenizer": "sentencepiece" if config.spm_model_file else "wordpiece",
    })
    if config.spm_model_file:
      meta["spm_model_sha256"] = self.vocab_sha
    return metadata.set_files(meta, infos, {DEFAULT_SPLIT: [i["name"] for i in infos]})


