"""The bert_data run, local engine: corpus -> instances -> records -> files + metadata.

`create` runs both engines inside one `run.GeneratorRun` (locks, destination
checks, resume, scratch, finalize); the Beam run is `beam_pipeline.create`.
Locally, worker processes (fork) tokenize chunks of input lines
(`units.tokenize_chunk`) and, in the default mode, run the tasks of
`units.run_tasks` and spill their records to hash buckets by order key; then
workers sort and frame the buckets into parts that one writer process per
output file appends (`textrecords.engine.local`). Every draw depends only on
(seed, dupe, document, a digest of its tokens), so the output is the same for
any number of workers. `--reference_compatible` runs `reference_mode`.

No TensorFlow here.
"""

import functools
import os
import random
from typing import Dict, List, Optional

import numpy as np

from bert_data import reference_mode
from bert_data import units
from bert_data.config import BertConfig
from bert_data.documents import Corpus, read_corpus
from textrecords import engine as engine_lib
from textrecords.datasets.layout import DatasetLayout
from textrecords.engine import local as local_engine
from textrecords.engine import parallel
from textrecords.errors import UserError
from textrecords.files import spill
from textrecords.files import storage
from textrecords.files import text_input
from textrecords.files import tfrecord
from textrecords.runs import cli
from textrecords.runs import run as run_lib
from textrecords.wire import features

_CHUNK_BYTES = 1 << 20  # input bytes a tokenizing task reads

# Per-process state: set before forking workers, or by the initializer.
_STATE: Dict[str, object] = {}


# ---------------------------------------------------------------- tokenizing

def _tokenize_chunk(chunk):
  """Worker: `units.tokenize_chunk` with this process's tokenizer.

  Returns (flat ids, line lengths, (lines replaced, lines skipped) as invalid UTF-8).
  """
  flat, lengths, decode_errors = units.tokenize_chunk(chunk, _STATE["tokenizer"],
                                                      _STATE["on_decode_error"])
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


# ---------------------------------------------------------------- default mode

def _spill_task(task_records, task):
  """Worker: a task's records spilled to hash buckets by order key."""
  keys, records_ = task_records(_STATE["ctx"], *task)
  writer = spill.SpillWriter(_STATE["spill_dir"], f"w{os.getpid()}", _STATE["num_buckets"])
  for key, rec in zip(keys.tolist(), records_):
    writer.add(key, rec)
  writer.close()
  return writer.bucket_counts


def spill_default_mode(ctx: units.TaskContext, spill_dir: str, num_buckets: int,
                       progress: cli.Progress) -> np.ndarray:
  """Builds all instances in workers, spilled to `num_buckets` hash buckets
  under `spill_dir`; returns the number of records in each bucket."""
  _STATE.update(ctx=ctx, spill_dir=spill_dir, num_buckets=num_buckets)
  per_bucket = np.zeros(num_buckets, np.int64)
  task_list = list(units.run_tasks(ctx))
  task_fn = functools.partial(_spill_task, units.task_records_fn(ctx))
  for n, counts in enumerate(parallel.ordered_map(task_fn, task_list,
                                                  ctx.config.num_workers)):
    per_bucket += counts
    progress.update(
        lambda: f"instances: {int(per_bucket.sum()):,} ({n + 1}/{len(task_list)} tasks)")
  return per_bucket


def _frame_bucket(task):
  """Worker: sorts bucket b into files of framed records, one per output file
  its records go to; returns their `local_engine.Part`s.

  Args:
    task: (bucket, its first record's index in the whole output order,
      number of round-robin output files or 0 for shards by bucket range,
      buckets per shard).
  """
  b, first, round_robin, per_shard = task
  spill_dir = _STATE["spill_dir"]
  items = spill.read_bucket(spill_dir, b)
  for path in spill.bucket_files(spill_dir, b):
    os.remove(path)
  frame = tfrecord.frame
  packer = _STATE.get("row_packer")
  if packer is not None:  # --pack_instances: rows of the bucket's ordered instances
    framed = [frame(row) for row in packer.pack_records([rec for _, rec in items])]
  else:
    framed = [frame(rec) for _, rec in items]
  if round_robin:
    groups = local_engine.split_round_robin(framed, first, round_robin)
  else:
    groups = [(b // per_shard, framed)]
  return local_engine.spill_parts(spill_dir, f"framed-{b:05d}", groups)


def write_default_mode_files(num_workers: int, targets, per_bucket: np.ndarray,
                             compression: str, round_robin: bool,
                             progress: cli.Progress) -> int:
  """Sorts and frames the spilled buckets in workers; one writer process appends them.

  Args:
    num_workers: worker processes.
    targets: per output file, (DatasetWriter, path), or None if finished.
    per_bucket: records in each bucket (`spill_default_mode`).
    round_robin: instances go to the files round-robin (several
      --output_file), else file i holds the i-th range of buckets (shards).
  Returns:
    The number of records written (rows, with a row packer in `_STATE`).
  """
  nb, n_files = len(per_bucket), len(targets)
  per_shard = 0 if round_robin else nb // n_files
  firsts = np.concatenate([[0], np.cumsum(per_bucket)[:-1]]).tolist()
  tasks = [(b, firsts[b], n_files if round_robin else 0, per_shard) for b in range(nb)]

  written = [0]

  def part_lists():
    for b, parts in enumerate(parallel.ordered_map(_frame_bucket, tasks, num_workers)):
      written[0] += sum(p.records for p in parts)
      if round_robin:
        finished = range(n_files) if b == nb - 1 else ()
      else:
        finished = [b // per_shard] if (b + 1) % per_shard == 0 else ()
      yield parts, finished
      progress.update(lambda: f"written {int(per_bucket[:b + 1].sum()):,} records")

  local_engine.append_parts(part_lists(), targets, compression, num_workers)
  return written[0]


def _write_default_mode(ctx: units.TaskContext, spill_dir: str, targets, compression: str,
                        progress: cli.Progress) -> int:
  """The default mode: tasks spilled to buckets, then the buckets written
  (packed into rows with --pack_instances); returns the number of instances."""
  config = ctx.config
  num_buckets = units.estimate_buckets(config, ctx.corpus, config.num_shards)
  per_bucket = spill_default_mode(ctx, spill_dir, num_buckets, progress)
  units.check_instance_count(int(per_bucket.sum()), len(targets))
  _STATE["row_packer"] = units.make_row_packer(config)
  write_default_mode_files(config.num_workers, targets, per_bucket, compression,
                           len(config.output_files) > 1, progress)
  return int(per_bucket.sum())


# ---------------------------------------------------------------- the run

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


def create(config: BertConfig,
           engine: engine_lib.EngineOptions = engine_lib.LOCAL) -> run_lib.RunResult:
  """Runs the whole job; returns the run's result (`metas`: one metadata per
  --output_file; `units.summary_of(result.meta)`: the summary).

  Runs in a `run.GeneratorRun` (locks, destination checks, resume, scratch,
  finalize) and leaves no corpus or tokenizer behind in module state.
  """
  config.validate()
  if engine.is_beam and config.pack_instances > 1:
    raise UserError(f"--pack_instances={config.pack_instances} with --engine=beam: packed "
                    "rows are made by the local engine only; use --engine=local")
  engine.validate(config.output_files)
  if engine.is_beam and config.reference_compatible:
    raise UserError("--reference_compatible with --engine=beam: the reference's order comes "
                    "from one sequential RNG; use --engine=local")
  try:
    return _create(config, engine)
  finally:
    _STATE.clear()


def _create(config: BertConfig, engine: engine_lib.EngineOptions) -> run_lib.RunResult:
  progress = cli.Progress(config.quiet)
  tok = units.load_tokenizer(config)
  vocab_sha = storage.sha256(config.tokenizer_file)
  # Several --output_file paths are separate datasets, filled round-robin;
  # one path with --num_shards is one dataset of N shards.
  outputs = datasets(config)
  with run_lib.GeneratorRun("bert_data", outputs, fingerprint(config, vocab_sha), config,
                            flag="--output_file", engine=engine) as run:
    if run.already_complete:
      progress.update(lambda: f"{outputs[0].layout.meta_path} is already complete for these "
                      "inputs and flags", force=True)
      return run.result()
    groups = [(d.layout.meta_path, list(d.record_paths)) for d in outputs]
    if engine.is_beam:
      from bert_data import beam_pipeline  # pylint: disable=import-outside-toplevel
      return run.result(beam_pipeline.create(config, tok, vocab_sha, groups, run.writers,
                                             engine))
    return run.result(_run_local(config, tok, vocab_sha, run, progress))


def _run_local(config: BertConfig, tok, vocab_sha: str, run: run_lib.GeneratorRun,
               progress: cli.Progress) -> List[dict]:
  """The local engine's run inside the GeneratorRun; returns each dataset's
  metadata written."""
  compression = tfrecord.check_compression(config.compression)
  decode_errors = text_input.DecodeErrorCounts()
  corpus = build_corpus(config, tok, progress, decode_errors)
  progress.update(lambda: f"read {corpus.num_docs:,} documents, "
                  f"{corpus.num_tokens:,} tokens", force=True)
  run.mark("read")
  mask = units.masking_params(config, tok)
  encoder = units.make_encoder(config, tok)
  dynamic = units.make_dynamic_encoder(config)
  ctx = units.TaskContext(config, corpus, mask, encoder, clean=units.is_clean(corpus, mask))
  targets = [None if w.is_finished(p) else (w, p)
             for w, d in zip(run.writers, run.datasets) for p in d.record_paths]
  if config.reference_compatible:
    rng = random.Random(config.random_seed)
    count = reference_mode.write_files(reference_mode.shuffled_context(ctx, rng), rng,
                                       run.scratch_dir(), targets, compression, progress)
  else:
    ctx.dynamic, ctx.packed = dynamic, units.pack(config, corpus)
    count = _write_default_mode(ctx, run.scratch_dir(), targets, compression, progress)
  run.mark("write")
  summary = units.run_summary(corpus, count, decode_errors)
  build = units.MetaBuilder(config, vocab_sha, tok.vocab_size,
                            features.schema_to_json((dynamic or encoder).schema),
                            units.masking_meta(config, mask), summary)
  metas = run.finalize([build] * len(run.datasets))
  progress.update(lambda: f"wrote {count:,} instances to {len(targets)} file(s)", force=True)
  return metas
