"""The bert_data run: corpus -> instances -> records -> files + metadata.

No TensorFlow here. Worker processes (fork) tokenize line batches and, in the
default mode, build, encode and spill the instances of (dupe, document-range)
tasks; every draw depends only on (seed, dupe, document, a digest of its
tokens), so the output is the same for any number of workers.
"""

import array
import dataclasses
import hashlib
import math
import os
import random
import shutil
from typing import Dict, Optional

import numpy as np

from bert_data import masking
from bert_data import packing
from bert_data import records
from bert_data.config import BertConfig
from bert_data.documents import Corpus, encode_lines, read_corpus
from bert_data.instances import (FastDraws, instances_from_document, instances_from_spans,
                                 spans_from_document)
from bert_data.sentence_order import sop_spans_from_document
from textrecords import __version__
from textrecords import cli
from textrecords import dataset_writer
from textrecords import storage
from textrecords import features
from textrecords import metadata
from textrecords import parallel
from textrecords import seeding
from textrecords import spill
from textrecords import text_input
from textrecords import tfrecord
from textrecords.errors import UserError
from textrecords.layout import DEFAULT_SPLIT, DatasetLayout

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
  from bert_data.tokenizer import WordPieceTokenizer  # pylint: disable=import-outside-toplevel
  if storage.is_url(storage.check(config.vocab_file, "--vocab_file")):
    if not storage.exists(config.vocab_file) or storage.is_dir(config.vocab_file):
      raise UserError(f"--vocab_file: {config.vocab_file} not found")
  elif not os.path.isfile(storage.local_path(config.vocab_file)):
    raise UserError(f"--vocab_file: {config.vocab_file} not found")
  try:
    tok = WordPieceTokenizer(config.vocab_file, do_lower_case=config.do_lower_case)
  except (OSError, ValueError, UnicodeDecodeError) as e:
    raise UserError(f"--vocab_file: cannot load {config.vocab_file}: {e}") from e
  missing = [t for t in ("[CLS]", "[SEP]", "[MASK]", "[UNK]") if tok.token_to_id(t) is None]
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
  """Worker: reads, strips and tokenizes the lines of one input chunk."""
  lines, _ = text_input.chunk_lines(chunk, _STATE["on_decode_error"], drop_cr=True)
  return encode_lines([line.strip() for line in lines], _STATE["tokenizer"].encode_batch)


def _init_tokenizer(tok, on_decode_error):
  _STATE["tokenizer"] = tok
  _STATE["on_decode_error"] = on_decode_error


def build_corpus(config: BertConfig, tok, progress: cli.Progress) -> Corpus:
  """Reads and tokenizes all input files in worker processes.

  This process only cuts the files into chunks of whole lines and joins the
  workers' (ids, line lengths) arrays in order.
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

  return read_corpus(results, config.input_files, report)


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


def _default_task(task):
  """Worker: instances of documents [d0, d1) in round `dupe`, spilled by order key.

  Returns the number of records spilled to each bucket.

  Each document's instances are built with a `random.Random` keyed by
  (seed, dupe, document index, digest of the document's token ids); the
  k-th instance's order key is derived from the same key and k, and also keys its masking draws, so the
  task's instances are gathered, masked and encoded together as arrays
  without any draw depending on the task's extent.
  """
  dupe, d0, d1 = task
  ctx: _Context = _STATE["ctx"]
  c = ctx.config
  seed = c.random_seed
  corpus = ctx.corpus
  writer = spill.SpillWriter(ctx.spill_dir, f"w{os.getpid()}", ctx.num_buckets)
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
    ids, lengths, positions, labels, counts = masking.mask_matrix(
        ids, lengths, num_as, keys, ctx.mask)
    records_ = ctx.encoder.encode_arrays(ids, lengths, num_as.tolist(),
                                         [s[4] for s in spans], positions, labels, counts)
  else:
    records_ = []
  for key, rec in zip(keys.tolist(), records_):
    writer.add(key, rec)
  writer.close()
  return writer.bucket_counts


def _packed_task(task):
  """Worker: packed instances [k0, k1) in round `dupe`, spilled by order key.

  Packing has no randomness (`packing.pack`); instance k's masks and order
  key come from (seed, dupe, k, a digest of its token ids).
  """
  dupe, k0, k1 = task
  ctx: _Context = _STATE["ctx"]
  c = ctx.config
  corpus = ctx.corpus
  writer = spill.SpillWriter(ctx.spill_dir, f"w{os.getpid()}", ctx.num_buckets)
  ids, lengths, special = packing.instance_ids(corpus.tokens, ctx.packed, range(k0, k1),
                                               ctx.mask.cls_id, ctx.mask.sep_id,
                                               c.max_seq_length)
  keys = np.asarray([seeding.order_key(c.random_seed, dupe, "packed", k,
                                       seeding.content_digest(ids[k - k0]))
                     for k in range(k0, k1)], np.uint64)
  if ctx.dynamic is not None:   # unmasked; make_dataset masks (never [CLS]/[SEP])
    starts = masking.word_starts(ids, lengths, ctx.mask) if c.do_whole_word_mask else None
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
    ids, lengths, positions, labels, counts = masking.mask_matrix(
        ids, lengths, lengths.copy(), keys, ctx.mask, special=special)
    records_ = ctx.encoder.encode_arrays(ids, lengths, lengths.tolist(),
                                         [False] * len(keys), positions, labels, counts)
  for key, rec in zip(keys.tolist(), records_):
    writer.add(key, rec)
  writer.close()
  return writer.bucket_counts


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
  starts = masking.word_starts(ids, lengths, ctx.mask) if c.do_whole_word_mask else None
  return ctx.dynamic.encode_arrays(ids, lengths, num_as, is_random_next, keys, starts)


def masking_meta(config: BertConfig, mask: masking.MaskingParams) -> dict:
  """The metadata's "masking" block: the settings `make_dataset` needs to mask
  dynamic records (and a record of how static ones were masked)."""
  out = {"mode": config.masking, "masked_lm_prob": config.masked_lm_prob,
         "max_predictions_per_seq": config.max_predictions_per_seq,
         "whole_word": config.do_whole_word_mask, "max_ngram_size": config.max_ngram_size}
  if config.masking == "dynamic":
    pool = list(mask.random_ids)
    out.update({"cls_id": mask.cls_id, "sep_id": mask.sep_id, "mask_id": mask.mask_id,
                # The pool of the 10% random replacements: usually all ids in order.
                "random_ids": ({"range": len(pool)} if pool == list(range(len(pool)))
                               else pool)})
  return out


def _tasks(config: BertConfig, num_units: int, per_task: int = _DOCS_PER_TASK):
  """(dupe, first, end) ranges of documents (or packed instances)."""
  for dupe in range(config.dupe_factor):
    for d0 in range(0, num_units, per_task):
      yield dupe, d0, min(num_units, d0 + per_task)


def _estimate_buckets(config: BertConfig, corpus: Corpus, num_shards: int) -> int:
  est_records = corpus.num_tokens * config.dupe_factor / max(1, config.max_num_tokens * 0.8)
  est_bytes = est_records * (config.max_seq_length * 3 + config.max_predictions_per_seq * 8 + 200)
  per_shard = max(1, math.ceil(est_bytes / _BUCKET_BYTES / num_shards))
  return num_shards * per_shard


def spill_default_mode(ctx: _Context, progress: cli.Progress) -> np.ndarray:
  """Builds all instances in workers, spilled to hash buckets; returns the
  number of records in each bucket."""
  _STATE["ctx"] = ctx
  per_bucket = np.zeros(ctx.num_buckets, np.int64)
  if ctx.packed is not None:
    task_fn, tasks = _packed_task, list(_tasks(ctx.config, ctx.packed.num_instances,
                                               _PACKED_PER_TASK))
  else:
    task_fn, tasks = _default_task, list(_tasks(ctx.config, ctx.corpus.num_docs))
  for n, counts in enumerate(parallel.ordered_map(task_fn, tasks,
                                                  ctx.config.num_workers)):
    per_bucket += counts
    progress.update(lambda: f"instances: {int(per_bucket.sum()):,} ({n + 1}/{len(tasks)} tasks)")
  return per_bucket


def _framed_path(ctx: _Context, b: int, f: int) -> str:
  return os.path.join(ctx.spill_dir, f"framed-{b:05d}-{f:05d}")


def _frame_bucket(task):
  """Worker: sorts bucket b into files of framed records, one per output file
  its records go to; returns [(output file index, framed path, records)].

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
    # Record `first + j` goes to file (first + j) % n: file f takes every n-th.
    parts = [(f, framed[(f - first) % round_robin::round_robin]) for f in range(round_robin)]
  else:
    parts = [(b // per_shard, framed)]
  out = []
  for f, recs in parts:
    if not recs:
      continue
    path = _framed_path(ctx, b, f)
    with open(path, "wb") as fh:
      fh.write(b"".join(recs))
    out.append((f, path, len(recs)))
  return out


_FILES: Dict[int, object] = {}  # the shard-writer process's open files


def _init_file_writer(targets, compression):
  _STATE["targets"] = targets
  _STATE["compression"] = compression
  _FILES.clear()


def _file_writer(msg):
  """Shard-writer process: appends framed files to outputs, hashing as it goes.

  ("append", f, framed path, records) appends to output f (opened at its
  first append); ("finish", f) completes output f and returns its info for
  `DatasetWriter.record_finished`. Outputs already finished by a resumed
  run are skipped (target None).
  """
  f = msg[1]
  target = _STATE["targets"][f]
  h = _FILES.get(f)
  if h is None and target is not None:
    writer, out_path = target
    h = _FILES[f] = writer.open(out_path, _STATE["compression"])
  if msg[0] == "append":
    _, _, path, count = msg
    if h is not None:
      h.append_framed_file(path, count)
    os.remove(path)
    return None
  _FILES.pop(f, None)
  return None if h is None else h.finish()


def write_default_mode_files(ctx: _Context, targets, per_bucket: np.ndarray, compression: str,
                             round_robin: bool, progress: cli.Progress) -> int:
  """Frames buckets in workers; a writer process appends them to the outputs.

  This process only passes file names along: records are sorted and framed
  by the workers, copied and hashed (sha256 for the metadata) by one writer
  process while later buckets are framed.

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
  framed = parallel.ordered_map(_frame_bucket, tasks, ctx.config.num_workers)

  def messages():
    for b, parts in enumerate(framed):
      for f, path, count in parts:
        yield ("append", f, path, count)
      if round_robin and b == nb - 1:
        for f in range(n_files):
          yield ("finish", f)
      elif not round_robin and (b + 1) % per_shard == 0:
        yield ("finish", b // per_shard)
      progress.update(lambda: f"written {int(sum(per_bucket[:b + 1])):,} records")

  infos = {}
  try:
    for info in parallel.ordered_map(_file_writer, messages(), 1, in_process=False,
                                     prefetch=256, initializer=_init_file_writer,
                                     initargs=(targets, compression)):
      if info is not None:
        infos[info["name"]] = info
  except BaseException:
    for t in targets:
      if t is not None:
        t[0].remove_temps(t[1])
    raise
  for t in targets:
    if t is not None:
      writer, path = t
      writer.record_finished(path, infos[os.path.basename(path)])
  return int(per_bucket.sum())


def reference_mode_records(ctx: _Context, rng: random.Random, spill_path: str,
                           progress: cli.Progress):
  """Yields records in the reference's order (one RNG, all instances shuffled).

  Records are spilled to one file as they are made; the final shuffle permutes
  indices (shuffle draws depend only on the length), then records are read
  back in that order.
  """
  c = ctx.config
  offsets = array.array("q", [0])  # 8 bytes an instance
  encode = ctx.encoder.encode
  with open(spill_path, "wb") as f:
    for _ in range(c.dupe_factor):
      for d in range(ctx.corpus.num_docs):
        for inst in _doc_instances(ctx, d, rng):
          rec = encode(inst)
          f.write(rec)
          offsets.append(offsets[-1] + len(rec))
        progress.update(lambda: f"instances: {len(offsets) - 1:,}")
  order = list(range(len(offsets) - 1))
  rng.shuffle(order)
  offs = np.frombuffer(offsets, np.int64)
  fd = os.open(spill_path, os.O_RDONLY)
  try:
    pread = os.pread
    for i in order:
      a, b = int(offs[i]), int(offs[i + 1])
      yield pread(fd, b - a, a)
  finally:
    os.close(fd)


# ---------------------------------------------------------------- outputs

def _fingerprint(config: BertConfig, vocab_sha: str) -> dict:
  inputs = [[p, *storage.stat(p)] for p in config.input_files]
  flags = dataclasses.asdict(config)
  for k in ("num_workers", "overwrite", "resume", "quiet"):
    flags.pop(k)
  return {"inputs": inputs, "flags": flags, "vocab_sha256": vocab_sha, "version": __version__}


def create(config: BertConfig) -> dict:
  """Runs the whole job; returns a summary dict (also stored in the metadata)."""
  config.validate()
  progress = cli.Progress(config.quiet)
  tok = load_tokenizer(config)
  vocab_sha = storage.sha256(config.tokenizer_file)
  compression = tfrecord.check_compression(config.compression)
  fingerprint = _fingerprint(config, vocab_sha)

  # Destinations: several --output_file paths are separate datasets, filled
  # round-robin; one path with --num_shards is one dataset of N shards.
  layouts = [DatasetLayout.for_file(p) for p in config.output_files]
  groups = [(lay.meta_path, lay.record_paths(num_shards=config.num_shards))
            for lay in layouts]
  writers = [dataset_writer.DatasetWriter(m, dict(fingerprint, meta=m),
                                          overwrite=config.overwrite, resume=config.resume)
             for m, _ in groups]
  all_paths = [p for _, ps in groups for p in ps]
  if all(w.already_complete for w in writers):
    meta = metadata.read(groups[0][0], package="bert_data")
    progress.update(lambda: f"{groups[0][0]} is already complete for these inputs and flags",
                    force=True)
    return {k: meta["counts"][k] for k in ("documents", "tokens", "instances")}

  corpus = build_corpus(config, tok, progress)
  progress.update(lambda: f"read {corpus.num_docs:,} documents, "
                  f"{corpus.num_tokens:,} tokens", force=True)
  mask = masking_params(config, tok)
  encoder = records.BertRecordEncoder(config.max_seq_length,
                                      config.max_predictions_per_seq, tok.vocab_size,
                                      v2_names=config.use_v2_feature_names,
                                      next_sentence=config.next_sentence)
  dynamic = (records.DynamicRecordEncoder(config.max_seq_length, config.do_whole_word_mask,
                                          v2_names=config.use_v2_feature_names,
                                          next_sentence=config.next_sentence)
             if config.masking == "dynamic" else None)
  clean = not np.isin(corpus.tokens, [mask.cls_id, mask.sep_id]).any()
  tmp = writers[0].scratch_dir()
  handles = []
  try:
    if config.reference_compatible:
      rng = random.Random(config.random_seed)
      order = list(range(corpus.num_docs))
      rng.shuffle(order)
      ctx = _Context(config, corpus.reordered(order), mask, encoder, clean=clean)
      stream = ((None, r) for r in reference_mode_records(
          ctx, rng, os.path.join(tmp, "records"), progress))
      handles = [None if w.is_finished(p) else w.open(p, compression)
                 for w, (_, ps) in zip(writers, groups) for p in ps]
      count = _write_round_robin(stream, handles, progress)
      handles = []
    else:
      nb = _estimate_buckets(config, corpus, config.num_shards)
      ctx = _Context(config, corpus, mask, encoder, spill_dir=tmp, num_buckets=nb, clean=clean,
                     dynamic=dynamic)
      if config.packing:
        ctx.packed = packing.pack(corpus.seg_starts, corpus.doc_starts,
                                   config.max_seq_length, config.packing)
      per_bucket = spill_default_mode(ctx, progress)
      total = int(per_bucket.sum())
      if total < len(all_paths):
        raise UserError(f"--num_shards={len(all_paths)} (or that many --output_file paths) "
                        f"but the input makes only {total} instances: every file would not "
                        "get one; use fewer shards or more input")
      targets = [None if w.is_finished(p) else (w, p)
                 for w, (_, ps) in zip(writers, groups) for p in ps]
      count = write_default_mode_files(ctx, targets, per_bucket, compression,
                                       len(config.output_files) > 1, progress)
  finally:
    for h in handles:
      if h is not None:
        h.abort()
    shutil.rmtree(tmp, ignore_errors=True)

  summary = {"documents": corpus.num_docs, "tokens": corpus.num_tokens,
             "instances": count}
  schema = features.schema_to_json((dynamic or encoder).schema)
  masking_block = masking_meta(config, mask)
  flags = dataclasses.asdict(config)
  for w, (m, ps) in zip(writers, groups):
    def build(infos, ps=ps):
      meta = metadata.base_meta("bert_data")
      meta.update({
          "schema": schema, "max_seq_length": config.max_seq_length,
          "max_predictions_per_seq": config.max_predictions_per_seq,
          "compression": compression, "vocab_sha256": vocab_sha,
          "vocab_size": tok.vocab_size, "random_seed": config.random_seed,
          "mode": "reference" if config.reference_compatible else "default",
          "masking": masking_block,
          "flags": flags, "counts": dict(summary, records=sum(i["records"] for i in infos)),
          "datasets": [os.path.basename(p) for p in config.output_files],
          "sentence_task": config.sentence_task,
          "packing": config.packing or None,
          "tokenizer": "sentencepiece" if config.spm_model_file else "wordpiece",
      })
      if config.spm_model_file:
        meta["spm_model_sha256"] = vocab_sha
      return metadata.set_files(meta, infos, {DEFAULT_SPLIT: [os.path.basename(p) for p in ps]})
    w.finalize(ps, build)
  progress.update(lambda: f"wrote {count:,} instances to {len(all_paths)} file(s)",
                  force=True)
  return summary


def _write_round_robin(stream, handles, progress: cli.Progress) -> int:
  """Writes records to the files round-robin (reference mode)."""
  count = 0
  n_files = len(handles)
  for _, rec in stream:
    h = handles[count % n_files]
    if h is not None:
      h.write_record(rec)
    count += 1
    if count % 10000 == 0:
      progress.update(lambda: f"written {count:,} records")
  for h in handles:
    if h is not None:
      h.commit()
  return count
