"""`--reference_compatible`: records equal to google-research/bert's, in its order.

The reference makes every draw from one `random.Random`: the document
shuffle, then per dupe round and document the instances and their masks,
then one shuffle of all instances. That walk is sequential, so this process
makes it (compiled by `reference_walk` when numba is installed, else the
Python walk of `instances.instances_from_document`); workers encode and frame
the instances batch by batch into scratch files as they come, then gather
them in the shuffled order (the shuffle's draws depend only on the count)
into parts, round-robin over the output files, that one writer process per
file appends (`textrecords.engine.local.append_parts`). Local engine only.
"""

import array
import mmap
import os
import random
from typing import Dict

import numpy as np

from bert_data import units
from bert_data.instances import instances_from_document
from textrecords.engine import local as local_engine
from textrecords.engine import parallel
from textrecords.files import tfrecord
from textrecords.runs import cli
from bert_data import reference_rng, reference_walk

_REF_BATCH = 2048  # instances per encoding (and gathering) task

# Per-process state of one run: set before forking the workers, cleared after.
_STATE: Dict[str, object] = {}


def shuffled_context(ctx: units.TaskContext, rng: random.Random) -> units.TaskContext:
  """The reference's first draws: the documents shuffled with `rng`."""
  order = list(range(ctx.corpus.num_docs))
  rng.shuffle(order)
  return units.TaskContext(ctx.config, ctx.corpus.reordered(order), ctx.mask, ctx.encoder,
                           clean=ctx.clean)


def write_files(ctx: units.TaskContext, rng: random.Random, spill_dir: str, targets,
                compression: str, progress: cli.Progress) -> int:
  """Records in the reference's order, round-robin over the files.

  Args:
    ctx: the run's context, its documents already in the reference's order
      (`shuffled_context`).
    rng: the reference's one RNG, after the document shuffle.
    spill_dir: scratch folder for the encoded batches and gathered parts.
    targets: per output file, (DatasetWriter, path), or None if finished.
  Returns:
    The number of records written.
  """
  _STATE.update(ctx=ctx, spill_dir=spill_dir)
  try:
    batches, compiled = _batches(ctx, rng, progress)
    sizes = list(parallel.ordered_map(_encode_batch, batches, ctx.config.num_workers,
                                      prefetch=4))
    total = sum(len(x) for x in sizes)
    _STATE["gather"] = _gather_plan(_final_order(rng, total, compiled), sizes)
    _append_gathered(total, targets, compression, ctx.config.num_workers, progress)
    return total
  finally:
    _STATE.clear()


def _batches(ctx: units.TaskContext, rng: random.Random, progress: cli.Progress):
  """The instances of the reference's walk in batches, from the compiled walk
  when numba is installed (the same instances and draws); returns (the
  batches, whether the walk is the compiled one)."""
  c = ctx.config
  with cli.notice_if_slow(progress.sayer()):  # numba's first compile takes a minute
    # Imported here: numba (if installed) loads only for reference mode.
    if not reference_walk.available():
      return _python_batches(ctx, rng, progress), False
    walk = reference_walk.Walk(ctx.corpus, ctx.mask, c.max_seq_length, c.short_seq_prob,
                               c.dupe_factor)
    walk.batch(rng, 0)  # compiles (or loads the cached kernel) before the workers start
    reference_rng.shuffled_range(random.Random(0), 2)  # its kernel too (another rng)
  return _compiled_batches(walk, rng, progress), True


def _final_order(rng: random.Random, total: int, compiled: bool) -> np.ndarray:
  """The reference's final shuffle of all `total` instances."""
  if compiled:
    return reference_rng.shuffled_range(rng, total)
  order = list(range(total))
  rng.shuffle(order)
  return np.asarray(order, np.int64)


def _new_batch():
  # tokens, lengths, num_as, is_random_next, positions, labels, counts
  return (array.array("i"), array.array("i"), array.array("i"), array.array("b"),
          array.array("i"), array.array("i"), array.array("i"))


def _doc_instances(ctx: units.TaskContext, d: int, rng):
  c = ctx.config
  return instances_from_document(
      d, ctx.corpus.document(d), ctx.corpus, rng, c.max_num_tokens, c.short_seq_prob,
      ctx.mask.cls_id, ctx.mask.sep_id, ctx.mask, exact_draws=True, clean_corpus=ctx.clean)


def _python_batches(ctx: units.TaskContext, rng: random.Random, progress: cli.Progress):
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


def _compiled_batches(walk, rng: random.Random, progress: cli.Progress):
  """`_python_batches` from the compiled walk (`reference_walk.Walk`): the
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


def _encode_batch(item):
  """Worker: encodes and frames a batch of instances into a scratch file;
  returns the framed records' sizes."""
  k, (tokens, lengths, num_as, is_random, positions, labels, counts) = item
  ctx: units.TaskContext = _STATE["ctx"]
  lengths = np.frombuffer(lengths, np.int32)
  counts = np.frombuffer(counts, np.int32)
  pred = ctx.config.max_predictions_per_seq
  recs = ctx.encoder.encode_arrays(
      _rows(tokens, lengths, ctx.config.max_seq_length), lengths, num_as.tolist(),
      is_random.tolist(), _rows(positions, counts, pred), _rows(labels, counts, pred), counts)
  framed = [tfrecord.frame(r) for r in recs]
  with open(os.path.join(_STATE["spill_dir"], f"ref-{k:06d}"), "wb") as f:
    f.write(b"".join(framed))
  return np.fromiter(map(len, framed), np.int64, len(framed))


def _gather_plan(order: np.ndarray, sizes) -> dict:
  """Where each record of the shuffled order lies: its batch file, offset and size."""
  size = np.concatenate(sizes) if sizes else np.zeros(0, np.int64)
  offset = np.concatenate([np.cumsum(x) - x for x in sizes]) if sizes else size
  return {"order": order, "size": size, "offset": offset,
          "batch": np.repeat(np.arange(len(sizes)), [len(x) for x in sizes])}


def _gather(task):
  """Worker: the framed records at positions [s, e) of the shuffled order, as
  part files (round-robin over the outputs)."""
  s, e, n_files = task
  st = _STATE["gather"]
  spill_dir = _STATE["spill_dir"]
  maps = {}  # mapped per task, so a worker's resident pages stay bounded
  idx = st["order"][s:e]
  out = []
  try:
    for b, o, n in zip(st["batch"][idx].tolist(), st["offset"][idx].tolist(),
                       st["size"][idx].tolist()):
      m = maps.get(b)
      if m is None:
        with open(os.path.join(spill_dir, f"ref-{b:06d}"), "rb") as f:
          m = maps[b] = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
      out.append(m[o:o + n])
  finally:
    for m in maps.values():
      m.close()
  return local_engine.spill_parts(spill_dir, f"gathered-{s:012d}",
                                  local_engine.split_round_robin(out, s, n_files))


def _append_gathered(total: int, targets, compression: str, num_workers: int,
                     progress: cli.Progress):
  """Gathers the records in the shuffled order in workers; one writer process
  per file appends the parts."""
  n_files = len(targets)
  tasks = [(s, min(total, s + _REF_BATCH), n_files) for s in range(0, total, _REF_BATCH)]

  def part_lists():
    for n, parts in enumerate(parallel.ordered_map(_gather, tasks, num_workers)):
      yield parts, (range(n_files) if n == len(tasks) - 1 else ())
      progress.update(lambda: f"written {min(total, (n + 1) * _REF_BATCH):,} records")

  local_engine.append_parts(part_lists(), targets, compression, num_workers)
