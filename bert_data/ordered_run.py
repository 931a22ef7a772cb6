"""bert_data on this machine: the generator's work, ordered in hash buckets.

The corpus and the instances are the generator's (`generator.BertGenerator`:
its pass "corpus" over the units and its tasks, in worker processes), one
input partition at a time (each partition's units tokenized in parallel,
then its tasks in parallel; only one partition's corpus is held); the
order is made here: instances spilled to hash buckets by order key
(`files/spill.py`), each bucket sorted and framed (or packed) by a worker,
its parts appended by one writer process per file
(`textrecords.engine.local.append_parts`). It gives the bytes of the
core's local engine (`engine.local.run_generator`, which merges every
unit's sorted run in one process) and of Beam and Dask, also for

  * several --output_file datasets: the ordered instances go round-robin
    over them, so a record's file is its rank in the global order (the
    other engines deal each order bucket's instances from its first rank:
    `generator.BertGenerator.deals_records`);
  * --pack_instances > 1: rows are packed from the ordered instances of
    each order bucket (`instance_packing.RowPacker`; the other engines in
    `generator.BertGenerator.finish_file`).

Besides, --reference_compatible, which the other engines refuse
(`generator.check_engine`): the reference's one RNG walks every document
in turn, then shuffles all instances (`reference_mode`): one partition
however large the input.

The bytes are those every earlier release wrote. No TensorFlow here.
"""

import bisect
import itertools
import os
import random
from typing import Dict, List, Optional

import numpy as np

from bert_data import reference_mode
from bert_data import units
from textrecords.datasets.layout import DatasetLayout
from textrecords.engine import file_segments
from textrecords.engine import generator_steps
from textrecords.engine import local as local_engine
from textrecords.engine import parallel
from textrecords.files import spill
from textrecords.files import tfrecord
from textrecords.runs import cli
from textrecords.runs import run as run_lib

# Per-process state of one run: set before forking the workers, cleared after.
_STATE: Dict[str, object] = {}


def datasets(config) -> List[run_lib.DatasetFiles]:
  """The run's datasets: one per --output_file, each of --num_shards files."""
  return [run_lib.DatasetFiles(lay, tuple(lay.record_paths(num_shards=config.num_shards)),
                               compression=tfrecord.check_compression(config.compression))
          for lay in map(DatasetLayout.for_file, config.output_files)]


def create(gen, segment_bytes: int = file_segments.SEGMENT_BYTES) -> run_lib.RunResult:
  """Runs generator `gen` (a `generator.BertGenerator`) on this machine,
  its output ordered here; returns the run's result. A record file over
  `segment_bytes` gets the metadata of its segments as Dask and Beam write
  them (`_segments`)."""
  config = gen.config
  progress = cli.Progress(config.quiet)
  outputs = datasets(config)
  with run_lib.GeneratorRun(gen.package, outputs, gen.fingerprint(), config,
                            flag="--output_file") as run:
    if run.already_complete:
      progress.update(lambda: f"{outputs[0].layout.meta_path} is already complete for these "
                      "inputs and flags", force=True)
      return run.result()
    try:
      return run.result(_run(gen, run, progress, segment_bytes))
    finally:
      _STATE.clear()


def _run(gen, run: run_lib.GeneratorRun, progress: cli.Progress,
         segment_bytes: int = file_segments.SEGMENT_BYTES) -> List[dict]:
  """The run inside the GeneratorRun; returns each dataset's metadata written."""
  config = gen.config
  compression = tfrecord.check_compression(config.compression)
  targets = [None if w.is_finished(p) else (w, p)
             for w, d in zip(run.writers, run.datasets) for p in d.record_paths]
  if config.reference_compatible:  # (one partition)
    value = _corpus_value(gen, gen.units(), config.num_workers)
    run.mark("read")  # (the pass's finish said what it read)
    rng = random.Random(config.random_seed)
    count = reference_mode.write_files(reference_mode.shuffled_context(gen.context(value), rng),
                                       rng, run.scratch_dir(), targets, compression, progress)
    stats = gen.stats(value)
  else:
    count, stats = _write_ordered(gen, run, targets, compression, progress, segment_bytes)
  run.mark("write")
  build = gen.meta_builder(stats, count)
  metas = run.finalize([build] * len(run.datasets))
  progress.update(lambda: f"wrote {count:,} instances to {len(targets)} file(s)", force=True)
  return metas


def _map_corpus(unit):
  """Worker: the generator's pass "corpus" on one unit."""
  return generator_steps.map_pass(_STATE["gen"], "corpus", unit, {})


def _corpus_value(gen, units_, num_workers: int) -> dict:
  """The value of the generator's pass "corpus", its units mapped in worker
  processes."""
  _STATE["gen"] = gen
  partials = list(parallel.ordered_map(_map_corpus, units_, num_workers))
  return generator_steps.finish_pass(gen, "corpus",
                                     generator_steps.merge_pass(gen, "corpus", partials))


def _spill_task(task):
  """Worker: a task's instances spilled to hash buckets by order key;
  returns how many went to each bucket."""
  keys, records = _STATE["gen"].task_records(_STATE["value"], task)
  writer = spill.SpillWriter(_STATE["spill_dir"], f"w{os.getpid()}", _STATE["num_buckets"])
  for key, rec in zip(keys.tolist(), records):
    writer.add(key, rec)
  writer.close()
  return writer.bucket_counts, writer.bucket_bytes


def _frame_bucket(task):
  """Worker: sorts bucket b into parts of framed records (rows, with a row
  packer), one per output file its records go to.

  Args:
    task: (bucket, its first record's index in the whole output order,
      number of round-robin output files or 0 for shards by bucket range,
      buckets per shard, the uint64 keys in it where segments start).
  Returns:
    (the parts, the byte offset in the bucket's part of each cut key: of
    its first record with a key at or after it).
  """
  b, first, round_robin, per_shard, cuts = task
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
  ends = np.cumsum([0] + [len(x) for x in framed]).tolist()
  keys = [key for key, _ in items]
  offsets = [ends[bisect.bisect_left(keys, k)] for k in cuts]
  return local_engine.spill_parts(spill_dir, f"framed-{b:05d}", groups), offsets


def _write_ordered(gen, run: run_lib.GeneratorRun, targets, compression: str,
                   progress: cli.Progress, segment_bytes: int = file_segments.SEGMENT_BYTES):
  """Every instance spilled to the order buckets, partition by partition,
  then the buckets sorted, framed (packed into rows with --pack_instances)
  and written; returns (the number of instances, the corpus counts summed
  over the partitions: `BertGenerator.stats`)."""
  config = gen.config
  per_bucket, stats = None, np.zeros(4, np.int64)
  bucket_bytes = None
  partitions = itertools.groupby(gen.units(), key=lambda u: u.partition)
  for _, part_units in partitions:
    value = _corpus_value(gen, list(part_units), config.num_workers)
    if gen.num_partitions == 1:
      run.mark("read")  # (the pass's finish said what it read)
    if per_bucket is None:  # (every partition's value has the run's bucket count)
      per_bucket = np.zeros(value["buckets"], np.int64)
      bucket_bytes = np.zeros(value["buckets"], np.int64)
      _STATE.update(gen=gen, spill_dir=run.scratch_dir(), num_buckets=value["buckets"])
    _STATE["value"] = value
    stats += gen.stats(value)
    tasks = gen.all_tasks(value)
    for n, (counts, nbytes) in enumerate(parallel.ordered_map(_spill_task, tasks,
                                                              config.num_workers)):
      per_bucket += counts
      bucket_bytes += nbytes
      progress.update(
          lambda: f"instances: {int(per_bucket.sum()):,} ({n + 1}/{len(tasks)} tasks)")
    _STATE["value"] = value = None  # (one partition's corpus held at a time)
  if gen.num_partitions > 1:
    run.mark("read")
  stats = tuple(int(x) for x in stats)
  total = int(per_bucket.sum()) if per_bucket is not None else 0
  gen.check_counts(stats, total, len(targets))
  _STATE["row_packer"] = units.make_row_packer(config)
  # What the engines' file steps get of the pass (global when not partitioned),
  # as far as `BertGenerator.cut_keys` reads it: the run's bucket count.
  file_values = generator_steps.global_values(gen, {"corpus": {"buckets": len(per_bucket)}}
                                              if per_bucket is not None else {})
  cuts = ({} if compression or per_bucket is None else
          _segments(gen, file_values, per_bucket, bucket_bytes, len(targets), segment_bytes))
  _write_buckets(config.num_workers, targets, per_bucket, compression,
                 len(config.output_files) > 1, progress, cuts)
  return total, stats


def _segments(gen, values, per_bucket: np.ndarray, bucket_bytes: np.ndarray, n_files: int,
              segment_bytes: int) -> Dict[int, List[int]]:
  """{file: the uint64 order keys its segments start at, after its first}
  of the record files Dask and Beam write in segments (`file_segments.plan`:
  from the file's framed records' bytes and `BertGenerator.cut_keys` of
  `values`, what their file steps get). With --pack_instances a file whose
  cuts are not where this run's buckets start is left whole (a check: they
  are)."""
  if gen.deals_records:
    return {}
  nb = len(per_bucket)
  per_shard = nb // n_files
  framed = bucket_bytes + tfrecord.FRAME_BYTES * per_bucket
  starts = set(spill_bucket_starts(nb))
  packed = _STATE.get("row_packer") is not None
  out = {}
  for f in range(n_files):
    total = int(framed[f * per_shard:(f + 1) * per_shard].sum())
    keys = [k + (1 << 63) for k in
            file_segments.allowed_cuts(total, gen.cut_keys(f, values), segment_bytes)]
    if keys and not (packed and not starts.issuperset(keys)):
      out[f] = keys
  return out


def spill_bucket_starts(num_buckets: int) -> List[int]:
  """The first uint64 order key of buckets 1 .. num_buckets - 1 (`spill`'s
  bucket (key * num_buckets) >> 64).

  >>> spill_bucket_starts(4) == [1 << 62, 2 << 62, 3 << 62]
  True
  """
  return [-(-(j << 64) // num_buckets) for j in range(1, num_buckets)]


def _write_buckets(num_workers: int, targets, per_bucket: np.ndarray, compression: str,
                   round_robin: bool, progress: cli.Progress,
                   cuts: Optional[Dict[int, List[int]]] = None) -> None:
  """Sorts and frames the spilled buckets in workers; writer processes append them.

  Args:
    num_workers: worker processes.
    targets: per output file, (DatasetWriter, path), or None if finished.
    per_bucket: records in each bucket.
    round_robin: instances go to the files round-robin (several
      --output_file), else file i holds the i-th range of buckets (shards).
    cuts: {file: the uint64 order keys where its segments start} (`_segments`).
  """
  cuts = cuts or {}
  written = [0] * len(targets)  # bytes appended to each file so far
  at: Dict[int, List[int]] = {f: [] for f in cuts}  # the byte offsets of those keys
  nb, n_files = len(per_bucket), len(targets)
  per_shard = 0 if round_robin else nb // n_files
  firsts = np.concatenate([[0], np.cumsum(per_bucket)[:-1]]).tolist()
  in_bucket: Dict[int, List[int]] = {}
  for keys in cuts.values():
    for k in keys:
      in_bucket.setdefault((k * nb) >> 64, []).append(k)
  tasks = [(b, firsts[b], n_files if round_robin else 0, per_shard, in_bucket.get(b, []))
           for b in range(nb)]

  def part_lists():
    for b, (parts, offsets) in enumerate(parallel.ordered_map(_frame_bucket, tasks,
                                                              num_workers)):
      if offsets:
        at[b // per_shard].extend(written[b // per_shard] + o for o in offsets)
      for p in parts:
        written[p.file] += os.path.getsize(p.data)
      if round_robin:
        finished = range(n_files) if b == nb - 1 else ()
      else:
        finished = [b // per_shard] if (b + 1) % per_shard == 0 else ()
      yield parts, finished
      progress.update(lambda: f"written {int(per_bucket[:b + 1].sum()):,} records")

  local_engine.append_parts(
      part_lists(), targets, compression, num_workers,
      lambda f, info: (local_engine.segmented_info(info, at[f], num_workers) if f in at
                       else info))
