"""The create run: corpus -> vocab -> sharded records + vocab.txt + meta.json."""

import bisect
import dataclasses
import functools
import os
import sys
from typing import List, Sequence

import numpy as np

from textrecords.runs import cli
from textrecords import engine as engine_lib
from textrecords.engine import parallel
from textrecords.runs import run as run_lib
from textrecords.engine import local as local_engine
from textrecords.files import text_input
from textrecords.datasets import vocab as vocab_lib
from textrecords.errors import UserError
from textrecords.datasets.layout import DatasetLayout
from w2v_data import corpus as corpus_lib
from w2v_data import kernel_loader
from w2v_data import sampling
from w2v_data import schema
from w2v_data import units
from w2v_data.config import W2vConfig

CHUNK_SENTENCES = 2048  # sentences per work item (output bytes do not depend on it)


@dataclasses.dataclass(frozen=True)
class _Item:
  """Sentences lo..hi-1 (global indices) of read piece `piece` (first: its first sentence)."""
  index: int
  shard: int
  piece: int     # -1: an empty shard
  first: int
  lo: int
  hi: int
  last: bool     # the shard's last item
  write: bool    # False: shard already finished (resume), only count


_STATE = {}


def _init_worker(counted, sampler, layout, parts_dir):
  _STATE.clear()
  _STATE.update(pieces=counted.pieces, sampler=sampler, layout=layout, parts_dir=parts_dir)


def _work(item: _Item):
  """Maps one range of sentences to global ids, samples and encodes it; runs in a worker.

  Returns (item, framed records: bytes, or the path of a part file holding
  them when the run has a parts folder, their start offsets, counts).
  """
  st = _STATE
  sampler: sampling.SkipGramSampler = st["sampler"]
  if item.piece < 0:
    ids, lengths = np.zeros(0, np.int32), np.zeros(0, np.int64)
  else:
    cached = st.get("piece")
    if cached is None or cached[0] != item.piece:  # a piece's items come one after the other
      cached = st["piece"] = (item.piece, corpus_lib.PieceIds(*st["pieces"][item.piece]))
    ids, lengths = cached[1].lines(item.lo - item.first, item.hi - item.first)
  out, counts = units.sample_chunk(sampler, ids, lengths, item.lo, st["layout"], item.write,
                                   with_starts=True)
  data, starts = out if out is not None else (None, None)
  if data and st["parts_dir"]:
    path = os.path.join(st["parts_dir"], f"part-{item.index:07d}")
    with open(path, "wb") as f:
      f.write(data)
    data = path
  return item, data, starts, counts


def _items(piece_lines: Sequence[int], num_shards: int, finished) -> List[_Item]:
  """Work items: each read piece cut at shard bounds and every CHUNK_SENTENCES sentences."""
  total = sum(piece_lines)
  bounds = [s * total // num_shards for s in range(num_shards + 1)]
  raw = []  # (shard, piece, first, lo, hi)
  first = 0
  for p, n in enumerate(piece_lines):
    g = first
    while g < first + n:
      shard = bisect.bisect_right(bounds, g) - 1
      stop = min(first + n, bounds[shard + 1], g + CHUNK_SENTENCES)
      raw.append((shard, p, first, g, stop))
      g = stop
    first += n
  out, j = [], 0
  for shard in range(num_shards):
    mine = []
    while j < len(raw) and raw[j][0] == shard:
      mine.append(raw[j])
      j += 1
    if not mine:  # an empty shard still gets its (empty) file
      mine = [(shard, -1, bounds[shard], bounds[shard], bounds[shard])]
    for i, (_, p, f, lo, hi) in enumerate(mine):
      out.append(_Item(len(out), shard, p, f, lo, hi, i == len(mine) - 1, not finished[shard]))
  return out


def fingerprint_of(config: W2vConfig, files) -> dict:
  """Everything that determines the output bytes (`run.fingerprint`)."""
  return run_lib.fingerprint(schema.PACKAGE, config.output_flags(), files)


def dataset_files(config: W2vConfig) -> run_lib.DatasetFiles:
  """The run's files: vocab.txt (docs.txt for pv_*), then the record shards."""
  out = DatasetLayout.for_dir(config.output_dir)
  others = [out.path(schema.VOCAB_NAME)]
  if config.model in schema.PV_MODELS:
    others.append(out.path(schema.DOCS_NAME))
  return run_lib.DatasetFiles(out, tuple(out.record_paths(schema.SPLIT, config.num_shards)),
                              tuple(others), config.compression)


def _log(config: W2vConfig, msg: str):
  if not config.quiet:
    print(msg, file=sys.stderr, flush=True)


def create(config: W2vConfig,
           engine: engine_lib.EngineOptions = engine_lib.LOCAL) -> run_lib.RunResult:
  """Runs the whole generation; returns the run's result (its `meta`: the
  metadata written).

  Raises:
    UserError: bad flags or input, or an existing output (see --overwrite), or
      another run writing the same output.
  """
  config.validate()
  engine.validate([config.output_dir])
  if engine.is_beam and config.model in schema.PV_MODELS:
    raise UserError(f"--model={config.model} with --engine=beam: document ids must be checked "
                    "for uniqueness in one pass; use --engine=local")
  try:
    return _create(config, engine)
  finally:
    _STATE.clear()
    kernel_loader.wait_loading()  # no thread left loading numba when this returns


def _create(config: W2vConfig, engine: engine_lib.EngineOptions) -> run_lib.RunResult:
  files = config.input_files()
  fingerprint = fingerprint_of(config, files)
  with run_lib.GeneratorRun(schema.PACKAGE, [dataset_files(config)], fingerprint, config,
                            flag="--output_dir", engine=engine) as run:
    if run.already_complete:
      _log(config, f"w2v_data: {run.datasets[0].layout.meta_path} is already complete for "
           "these inputs and flags")
      return run.result()
    if engine.is_beam:
      from w2v_data import beam_pipeline  # pylint: disable=import-outside-toplevel
      return run.result([beam_pipeline.create(config, files, run.writers[0], fingerprint,
                                              engine)])
    mode = (corpus_lib.ReadMode("documents", config.doc_id_column)
            if config.model in schema.PV_MODELS else corpus_lib.SENTENCES)
    # Kernels built ahead of time load in a few ms, before the read workers
    # fork (they count with them); numba's JIT (or a first build) loads in a
    # thread while the read workers count in Python.
    compiled_now = kernel_loader.load_if_built()
    # With workers, a scratch folder holds each read chunk's ids (written by
    # the worker that counted it, read by those that sample it) and the
    # workers' part files.
    scratch = run.scratch_dir() if config.num_workers > 1 else None
    return run.result([_count_and_write(config, files, run, fingerprint, mode, compiled_now,
                                        scratch)])


def _count_and_write(config, files, run, fingerprint, mode, compiled_now, scratch):
  """The local engine's run after the checks: count, then sample, encode and write."""
  progress = cli.Progress(config.quiet)
  decode_errors = text_input.DecodeErrorCounts()
  start_loading = functools.partial(kernel_loader.start_loading, progress.sayer("w2v_data: "))
  corpus = corpus_lib.count_corpus(files, config.min_freq, config.on_decode_error,
                                   num_workers=config.num_workers, mode=mode,
                                   counts=decode_errors,
                                   started=None if compiled_now else start_loading,
                                   ids_dir=scratch)
  num_sentences = corpus.num_sentences
  progress.update(lambda: f"w2v_data: read {num_sentences:,} {units.text_unit(config.model)}, "
                  f"{corpus.raw_tokens:,} tokens, vocab {len(corpus.tokens):,}", force=True)
  run.mark("read")
  vocab_bytes, docs_bytes = _write_vocab_files(run, corpus)
  totals, file_centers = _write_records(config, run, corpus, scratch, progress)
  run.mark("write")
  record_paths = list(run.datasets[0].record_paths)
  counts = {**units.summary_counts(config, num_sentences, corpus.raw_tokens,
                                   corpus.num_tokens, totals),
            **decode_errors.as_dict()}

  def build_meta(infos):
    return units.build_meta(config, fingerprint, record_paths, file_centers, corpus.tokens,
                            corpus.counts, vocab_bytes, counts, infos, corpus.doc_names,
                            docs_bytes)

  meta, = run.finalize([build_meta])
  progress.update(lambda: f"w2v_data: done: {units.examples_text(config.model, counts)}",
                  force=True)
  return meta


def _write_vocab_files(run: run_lib.GeneratorRun, corpus) -> tuple:
  """Writes vocab.txt (and docs.txt for paragraph vectors) unless a resumed
  run finished them; returns their bytes (docs: b"" when there is none)."""
  out, writer = run.datasets[0].layout, run.writers[0]
  vocab_path = out.path(schema.VOCAB_NAME)
  vocab_bytes = vocab_lib.tokens_file_bytes(corpus.tokens)
  if not writer.is_finished(vocab_path):
    writer.write_bytes(vocab_path, vocab_bytes)
  docs_bytes = b""
  if corpus.doc_names is not None:
    docs_path = out.path(schema.DOCS_NAME)
    docs_bytes = vocab_lib.tokens_file_bytes(corpus.doc_names)
    if not writer.is_finished(docs_path):
      writer.write_bytes(docs_path, docs_bytes)
  return vocab_bytes, docs_bytes


def _write_records(config: W2vConfig, run: run_lib.GeneratorRun, corpus, scratch,
                   progress: cli.Progress) -> tuple:
  """Samples, encodes and writes every record shard (resumed shards only
  counted). Workers map their sentences to global ids, sample, encode and
  write part files (in the scratch folder); this process appends the parts
  (copied in the kernel) and hashes.

  Returns:
    (the summed counts, each shard's number of centers).
  """
  writer = run.writers[0]
  record_paths = list(run.datasets[0].record_paths)
  finished = [writer.is_finished(p) for p in record_paths]
  if config.resume and any(finished):
    _log(config, f"w2v_data: resume: keeping {sum(finished)} of {len(finished)} finished "
         "record files")
  sampler = sampling.SkipGramSampler.build(
      corpus.counts, subsample_t=config.subsample_t, max_window_size=config.max_window_size,
      num_noise_words=config.num_noise_words, seed=config.random_seed,
      subsample_formula=config.subsample_formula, model=config.model)
  totals = {"centers": 0, "pairs": 0, "subsampled_tokens": 0, "max_contexts": 0, "records": 0}
  file_centers = [0] * config.num_shards
  files_out = local_engine.PartWriter(
      lambda f: writer.open(record_paths[f], config.compression))
  done = 0
  if not kernel_loader.AVAILABLE:
    _log(config, "w2v_data: numba is not installed (extra `fast`): sampling with numpy")
  kernel_loader.prepare(progress.sayer("w2v_data: "))  # loaded once here; workers inherit it
  try:
    for item, data, starts, counts in parallel.ordered_map(
        _work, _items(corpus.piece_lines, config.num_shards, finished), config.num_workers,
        initializer=_init_worker,
        initargs=(corpus, sampler, config.layout, scratch), reuse_memory=True):
      units.add_counts(totals, counts)
      file_centers[item.shard] += counts["centers"]
      done += item.hi - item.lo
      if item.write:
        n = counts["centers" if config.layout == "center" else "records"]
        if data:
          files_out.append(local_engine.Part(item.shard, data, n, starts))
        if item.last:
          files_out.finish(item.shard)
      progress.update(lambda: f"w2v_data: {done:,}/{corpus.num_sentences:,} "
                      f"{units.text_unit(config.model)}, "
                      f"{totals['centers']:,} centers")
  except sampling.NoNoiseWordError as e:
    raise units.no_noise_error(*corpus.line_of[e.sentence_index], len(corpus.tokens)) from None
  finally:
    files_out.abort()
    _STATE.clear()
  return totals, file_centers
