"""The mt_data run, local engine: pairs -> vocabularies -> records -> files + metadata.

`create` runs both engines inside one `run.GeneratorRun` (locks, destination
checks, resume, scratch, finalize); the Beam run is `beam_pipeline.create`.
Locally, worker processes (fork) read, clean, tokenize and count chunks of
whole lines (`preprocess.read_block`); this process merges them in input order
into the vocabularies and id sequences; workers then encode blocks of pairs
(`records.framed_block`) that this process appends to the record shards
(`textrecords.engine.local.PartWriter`). The output is the same for any
number of workers.

No TensorFlow here.
"""

import collections
import gc
import itertools
import json
import os
import sys
from typing import Callable, Dict, List, Optional

import numpy as np

from mt_data import config as config_lib
from mt_data import preprocess
from mt_data import records
from mt_data import schema
from mt_data import units
from mt_data import vocab as vocab_lib
from textrecords import engine as engine_lib
from textrecords.datasets.layout import DatasetLayout
from textrecords.engine import local as local_engine
from textrecords.engine import parallel
from textrecords.errors import UserError
from textrecords.files import text_input
from textrecords.runs import cli
from textrecords.runs import run as run_lib

BLOCK = 8192  # records per worker task
READ_CHUNK = 1 << 19  # input bytes per reading task

# Worker state (set by _init_worker; inherited by forked workers).
_W: Dict[str, list] = {}


# ---------------------------------------------------------------- workers

def _init_worker(sources: records.IdSequences, targets: records.IdSequences):
  _W["src"] = sources
  _W["tgt"] = targets


def _encode_block(task):
  start, stop = task
  return (records.framed_block(_W["src"].rows(start, stop), _W["tgt"].rows(start, stop),
                               0, stop - start), stop - start)


def _init_reader(on_decode_error: str):
  _W["on_decode_error"] = on_decode_error


def _read_block(chunk):
  return preprocess.read_block(chunk, _W["on_decode_error"])


# ---------------------------------------------------------------- reading

def read_blocks(cfg: config_lib.MTConfig, files: List[str],
                progress: cli.Progress) -> List[preprocess.PairBlock]:
  """Reads, cleans, tokenizes and counts the input, in worker processes.

  Workers each take a chunk of whole lines and return its pairs as ids into
  the chunk's own vocabulary with its counts; merging those in input order
  is exact. With --num_train and --num_val both set, only the pairs needed
  are read, in this process.
  """
  limit = preprocess.pairs_needed(cfg.num_train, cfg.num_val)
  if limit is not None:
    reader = preprocess.PairReader(files, cfg.on_decode_error, limit)
    return [preprocess.pair_block(list(reader), reader.lines, reader.skipped,
                                  reader.decode_errors)]
  blocks = []
  for block in parallel.ordered_map(_read_block, text_input.line_chunks(files, READ_CHUNK),
                                    cfg.num_workers, initializer=_init_reader,
                                    initargs=(cfg.on_decode_error,)):
    blocks.append(block)
    progress.update(lambda: f"read {sum(b.lines for b in blocks)} lines")
  return blocks


def _read_counts(blocks: List[preprocess.PairBlock]):
  """(lines read, skipped lines per reason, decode error counts) over all blocks."""
  skipped_counts = collections.Counter()
  decode_errors = text_input.DecodeErrorCounts()
  for b in blocks:
    skipped_counts.update(b.skipped)
    decode_errors.add(b.decode_errors)
  skipped = {r: skipped_counts.get(r, 0) for r in preprocess.SKIP_REASONS}
  return sum(b.lines for b in blocks), skipped, decode_errors


# ---------------------------------------------------------------- vocabularies

def _vocabularies(cfg, blocks, n_train: int) -> dict:
  """{"tokens": (source, target), "ids": (IdSequences, IdSequences), "files": {name: bytes}}."""
  tokenizer_json: Dict[str, bytes] = {}
  if cfg.tokenizer == "word":
    src_tokens = vocab_lib.word_vocab_from_counts(
        preprocess.merge_counts(b.source for b in blocks), cfg.min_freq)
    tgt_tokens = vocab_lib.word_vocab_from_counts(
        preprocess.merge_counts(b.target for b in blocks), cfg.min_freq)
    src_codec, tgt_codec = vocab_lib.WordCodec(src_tokens), vocab_lib.WordCodec(tgt_tokens)
    src_ids = records.IdSequences(
        _concat([b.source.global_ids(src_codec.ids(b.source.tokens)) for b in blocks]),
        _concat([b.source.lengths for b in blocks]))
    tgt_ids = records.IdSequences(
        _concat([b.target.global_ids(tgt_codec.ids(b.target.tokens)) for b in blocks]),
        _concat([b.target.lengths for b in blocks]))
  else:
    sources = [s for b in blocks for s in b.source.sentences()]
    targets = [t for b in blocks for t in b.target.sentences()]
    src_tok = vocab_lib.train_bpe(sources[:n_train], cfg.vocab_size, cfg.min_freq)
    tgt_tok = vocab_lib.train_bpe(targets[:n_train], cfg.vocab_size, cfg.min_freq)
    src_tokens, tgt_tokens = vocab_lib.bpe_tokens(src_tok), vocab_lib.bpe_tokens(tgt_tok)
    src_ids = _id_sequences(vocab_lib.bpe_encode_all(src_tok, sources))
    tgt_ids = _id_sequences(vocab_lib.bpe_encode_all(tgt_tok, targets))
    tokenizer_json[schema.TOKENIZER_FILE["source"]] = vocab_lib.tokenizer_json(src_tok)
    tokenizer_json[schema.TOKENIZER_FILE["target"]] = vocab_lib.tokenizer_json(tgt_tok)
  return {"tokens": (src_tokens, tgt_tokens), "ids": (src_ids, tgt_ids),
          "files": units.vocab_files(cfg.tokenizer, src_tokens, tgt_tokens, tokenizer_json)}


def _concat(arrays: List[np.ndarray]) -> np.ndarray:
  return np.concatenate(arrays).astype(np.int32, copy=False) if arrays else np.zeros(0, np.int32)


def _id_sequences(seqs: List[List[int]]) -> records.IdSequences:
  flat = np.fromiter(itertools.chain.from_iterable(seqs), np.int32)
  return records.IdSequences(flat, np.fromiter(map(len, seqs), np.int32, len(seqs)))


# ---------------------------------------------------------------- writing

def _write_files(cfg, run: run_lib.GeneratorRun, vocab_files: Dict[str, bytes], src_ids,
                 tgt_ids, n_train: int, n_val: int, progress: cli.Progress):
  """Writes the vocab files and the record shards (workers encode blocks, this
  process appends them); returns split -> file names."""
  dw, lay = run.writers[0], run.datasets[0].layout
  for name in sorted(vocab_files):
    path = lay.path(name)
    if not dw.is_finished(path):
      dw.write_bytes(path, vocab_files[name])
  split_names: Dict[str, List[str]] = {}
  tasks, plan = [], []  # plan: (path, first task, end task) per unfinished shard
  offsets = {"train": (0, n_train), "valid": (n_train, n_train + n_val)}
  for split, paths in units.record_paths(lay, cfg.num_shards).items():
    lo, hi = offsets[split]
    split_names[split] = [os.path.basename(p) for p in paths]
    for path, (s, e) in zip(paths, records.shard_ranges(hi - lo, cfg.num_shards)):
      if dw.is_finished(path):
        continue
      first = len(tasks)
      tasks.extend(records.blocks(lo + s, lo + e, BLOCK))
      plan.append((path, first, len(tasks)))
  results = parallel.ordered_map(_encode_block, tasks, cfg.num_workers,
                                 initializer=_init_worker, initargs=(src_ids, tgt_ids))
  out = local_engine.PartWriter(lambda f: dw.open(plan[f][0], cfg.compression_name))
  try:
    for f, (_, first, last) in enumerate(plan):
      for _ in range(first, last):
        blob, count = next(results)
        out.append(local_engine.Part(f, blob, count))
      out.finish(f)
      progress.update(lambda: f"wrote {f + 1}/{len(plan)} record files")
  finally:
    out.abort()
  return split_names


# ---------------------------------------------------------------- the run

def dataset_files(cfg: config_lib.MTConfig) -> run_lib.DatasetFiles:
  """The run's files: vocabularies (and bpe tokenizers), then every split's shards."""
  lay = DatasetLayout.for_dir(cfg.output_dir)
  names = sorted(schema.VOCAB_FILE.values())
  if cfg.tokenizer == "bpe":
    names = sorted(names + list(schema.TOKENIZER_FILE.values()))
  shards = units.record_paths(lay, cfg.num_shards)
  return run_lib.DatasetFiles(lay, tuple(p for split in schema.SPLITS for p in shards[split]),
                              tuple(lay.path(n) for n in names), cfg.compression_name)


def fingerprint_of(cfg: config_lib.MTConfig, files: List[str]) -> dict:
  """Everything that determines the output bytes (`run.fingerprint`)."""
  return run_lib.fingerprint(schema.PACKAGE, cfg.output_flags(), files)


def create(cfg: config_lib.MTConfig, log: Optional[Callable[[str], None]] = None,
           engine: engine_lib.EngineOptions = engine_lib.LOCAL) -> run_lib.RunResult:
  """Runs the whole pipeline for one config; returns the run's result (its
  `meta`: the metadata written; `seconds`: read, vocab, write, total).

  Raises:
    UserError: bad settings, unreadable or unusable input, or an output that
      exists (without overwrite/resume) or cannot be written, or another run
      writing it. Nothing is left in the output folder on failure.
  """
  if log is None:
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # pylint: disable=unnecessary-lambda-assignment
  cfg.validate()
  engine.validate([cfg.output_dir])
  if engine.is_beam and cfg.tokenizer != "word":
    raise UserError(f"--tokenizer={cfg.tokenizer} with --engine=beam: BPE training needs "
                    "every train pair in one process; use --engine=local")
  files = text_input.expand_patterns(cfg.input_file, flag="--input_file")
  # Millions of small token lists stay alive until the end: the cyclic GC
  # would rescan them over and over (it more than doubles the run time).
  gc_was_enabled = gc.isenabled()
  gc.disable()
  try:
    with run_lib.GeneratorRun(schema.PACKAGE, [dataset_files(cfg)], fingerprint_of(cfg, files),
                              cfg, flag="--output_dir", engine=engine) as run:
      if run.already_complete:
        if not cfg.quiet:
          log(f"mt_data: {run.datasets[0].layout.meta_path} is already complete for these "
              "inputs and flags")
        return run.result()
      if engine.is_beam:
        from mt_data import beam_pipeline  # pylint: disable=import-outside-toplevel
        return run.result([beam_pipeline.create(cfg, files, log, engine, run)])
      return run.result([_run_local(cfg, files, log, run)])
  finally:
    _W.clear()
    if gc_was_enabled:
      gc.enable()


def _run_local(cfg, files, log, run: run_lib.GeneratorRun) -> dict:
  """The local engine's run inside the GeneratorRun: read, vocab, write;
  returns the metadata written."""
  progress = cli.Progress(cfg.quiet)

  # 1. Read, clean, tokenize and count the pairs (in workers).
  blocks = read_blocks(cfg, files, progress)
  lines_read, skipped, decode_errors = _read_counts(blocks)
  num_pairs = sum(b.num_pairs for b in blocks)
  n_train, n_val = units.split_sizes_or_error(num_pairs, lines_read, json.dumps(skipped),
                                              cfg.num_train, cfg.num_val, files)
  for warning in units.split_warnings(n_train, n_val, cfg.num_train, cfg.num_val):
    log(warning)
  assert n_train + n_val == num_pairs  # every pair read is written
  run.mark("read")

  # 2. Vocabularies and ids.
  vocab = _vocabularies(cfg, blocks, n_train)
  del blocks
  src_ids, tgt_ids = vocab["ids"]
  split_stats = units.split_length_stats(src_ids.lengths, tgt_ids.lengths, n_train)
  unk = {"source": int(np.count_nonzero(src_ids.flat == preprocess.UNK_ID)),
         "target": int(np.count_nonzero(tgt_ids.flat == preprocess.UNK_ID))}
  run.mark("vocab")

  # 3. Write everything through the run's DatasetWriter (atomic, resumable).
  split_names = _write_files(cfg, run, vocab["files"], src_ids, tgt_ids, n_train, n_val,
                             progress)
  run.mark("write")
  inputs = units.inputs_info(files)

  def build_meta(infos):
    return units.build_meta(cfg, inputs, lines_read, skipped, decode_errors, n_train, n_val,
                            split_names, split_stats, len(vocab["tokens"][0]),
                            len(vocab["tokens"][1]), vocab["files"], unk, infos)

  meta, = run.finalize([build_meta])
  return meta
