"""`textrecords.reading.read_order` as tf.data pipelines: the same records in the
same per-replica batches, drawn in-graph (no Python ops, any epoch).

A record file is opened at its start; a stream that starts inside a file (an
epoch's rotation, a pipeline resuming at `start_step`) skips records of that
file with `Dataset.skip` (TFRecordDataset skips record by record, reading
their headers: no parsing and no CRC check). The files before it are not
opened, the records of the window before the start step are read and
dropped: a resume reads at most one file's records plus one window before
its first batch. `plan_ids` gives a plan's batches as record numbers,
computed a window at a time, for readers that hold their records.
"""

import itertools
from typing import Callable, List

from textrecords.reading import read_order as R
from textrecords.tf_import import require_tf


class TfOps:
  """`read_order.NumpyOps` in TensorFlow (int64 tensors)."""

  def __init__(self, tf):
    self.tf = tf
    self.xor = tf.bitwise.bitwise_xor
    self.shr = tf.bitwise.right_shift
    self.band = tf.bitwise.bitwise_and

  def arange(self, n):
    return self.tf.range(self.tf.cast(n, self.tf.int64), dtype=self.tf.int64)

  def argsort(self, keys):
    return self.tf.cast(self.tf.argsort(keys, stable=True), self.tf.int64)

  def int64(self, x):
    return self.tf.cast(x, self.tf.int64)


def _parts(ops, stream: R.Stream, kind: int, *more):
  return tuple(ops.int64(v) for v in (*R.seed_parts(stream.seed), stream.key, kind, *more))


def _file_order(ops, stream: R.Stream, epoch):
  n = len(stream.counts)
  if not stream.training:
    return ops.arange(n)
  return R.permutation(ops, n, *_parts(ops, stream, R.FILES, epoch))


def _rotation(ops, stream: R.Stream, epoch):
  if not stream.training:
    return ops.int64(0)
  hi = R.hash32(ops, *_parts(ops, stream, R.ROTATION, epoch, 0))
  lo = R.hash32(ops, *_parts(ops, stream, R.ROTATION, epoch, 1))
  return ops.tf.math.floormod(ops.xor(hi * (1 << 31), lo), max(1, stream.total))


def segments(tf, stream: R.Stream, epoch, first, length):
  """`Stream.segments` in-graph: (file, skip, take) rows, int64 [k, 3]."""
  ops = TfOps(tf)
  order = _file_order(ops, stream, epoch)
  counts = tf.gather(tf.constant(stream.counts, tf.int64), order)
  start = tf.concat([[0], tf.cumsum(counts)], 0)
  n = tf.constant(stream.total, tf.int64)
  a = tf.math.floormod(_rotation(ops, stream, epoch) + first, tf.maximum(n, 1))
  rows = []
  zero = tf.constant(0, tf.int64)
  for x, y in ((a, tf.minimum(n, a + length)), (zero, tf.maximum(zero, a + length - n))):
    skip = tf.maximum(zero, x - start[:-1])
    take = tf.minimum(start[1:], y) - start[:-1] - skip
    rows.append(tf.boolean_mask(tf.stack([order, skip, take], 1), take > 0))
  return tf.concat(rows, 0)


def epoch_records(tf, stream: R.Stream, read_file: Callable, epoch, first_window, skip):
  """The records of `epoch` in reading order, from window `first_window`
  on, its first `skip` records left out."""
  first = first_window * stream.window
  segs = segments(tf, stream, epoch, first, stream.used - first)
  recs = tf.data.Dataset.from_tensor_slices(segs).flat_map(
      lambda row: read_file(row[0]).skip(row[1]).take(row[2]))
  if not stream.training:
    return recs.skip(skip)
  ops = TfOps(tf)

  def permuted(window, j):
    size = tf.shape(tf.nest.flatten(window)[0], out_type=tf.int64)[0]
    order = R.permutation(ops, size, *_parts(ops, stream, R.WINDOW, epoch, j))
    return tf.nest.map_structure(lambda t: tf.gather(t, order), window)

  windows = tf.data.Dataset.zip((recs.batch(stream.window),
                                 tf.data.Dataset.range(first_window, stream.num_windows())))
  return windows.map(permuted).unbatch().skip(skip)


def _start_of(stream: R.Stream, position: int):
  """(epoch, window, records to skip in it) of a reading position."""
  if not stream.used:  # fewer records than one global batch, all dropped
    return 0, 0, 0
  epoch, at = divmod(position, stream.used)
  j, skip = divmod(at, stream.window)
  return epoch, j, skip


def _shared(tf, batches, sharing: R.Sharing, drop_remainder: bool):
  """Global batches -> this pipeline's per-replica batches (`Sharing.slices`);
  a batch may be a structure of tensors of one length (records per element)."""
  lo, hi = sharing.local_replicas.start, sharing.local_replicas.stop
  r, b = sharing.replicas, sharing.per_replica
  each = tf.nest.map_structure
  whole = lambda *g: g[0] if len(g) == 1 else g  # noqa: E731  (tuples arrive unpacked)
  if drop_remainder:
    return batches.map(lambda *g: each(
        lambda t: tf.reshape(t, tf.concat([[r, b], tf.shape(t)[1:]], 0))[lo:hi],
        whole(*g))).unbatch()

  def slices(g):
    size = tf.shape(tf.nest.flatten(g)[0], out_type=tf.int64)[0]
    i = tf.range(lo, hi, dtype=tf.int64)
    bounds = tf.stack([i * size // r, (i + 1) * size // r], 1)
    return tf.data.Dataset.from_tensor_slices(bounds).filter(
        lambda ab: ab[1] > ab[0]).map(lambda ab: each(lambda t: t[ab[0]:ab[1]], g))

  return batches.flat_map(lambda *g: slices(whole(*g)))


def _by_epoch(tf, plan: R.Plan, global_batches: Callable):
  """(epoch, per-replica batch) of `plan`'s epochs; global_batches(e, window,
  skip): the global batches of epoch e from that window, `skip` records
  into it."""
  stream, g = plan.stream, plan.sharing.global_batch
  e0, k0 = plan.start()
  _, j0, s0 = _start_of(stream, k0 * g)
  stop = tf.int64.max if plan.repeat else e0 + 1

  def one_epoch(e):
    first = tf.where(e == e0, tf.constant(j0, tf.int64), 0)
    skip = tf.where(e == e0, tf.constant(s0, tf.int64), 0)
    batches = _shared(tf, global_batches(e, first, skip), plan.sharing, plan.drop_remainder)
    return batches.map(lambda *b: (e, b[0] if len(b) == 1 else b))

  return tf.data.Dataset.range(e0, stop).flat_map(one_epoch)


def plan_dataset(plan: R.Plan, read_file: Callable):
  """(epoch, serialized records) per-replica batches of one dataset's `Plan`."""
  tf = require_tf()
  return _by_epoch(tf, plan, lambda e, first, skip: epoch_records(
      tf, plan.stream, read_file, e, first, skip).batch(plan.sharing.global_batch,
                                                        drop_remainder=plan.drop_remainder))


def window_ids(tf, stream: R.Stream, epoch, j):
  """`Stream.window_ids` in-graph: the record numbers of window j of
  `epoch` in reading order (an int64 vector)."""
  first = j * stream.window
  segs = segments(tf, stream, epoch, first,
                  tf.minimum(tf.constant(stream.window, tf.int64), stream.used - first))
  base = tf.constant([0] + list(itertools.accumulate(stream.counts))[:-1], tf.int64)
  starts = tf.gather(base, segs[:, 0]) + segs[:, 1]
  ids = tf.ragged.range(starts, starts + segs[:, 2]).flat_values
  if not stream.training:
    return ids
  ops = TfOps(tf)
  return tf.gather(ids, R.permutation(ops, tf.size(ids, out_type=tf.int64),
                                      *_parts(ops, stream, R.WINDOW, epoch, j)))


def plan_ids(plan: R.Plan):
  """(epoch, record numbers) per-replica batches of a `Plan`: the batches of
  `plan_dataset` as numbers, a window at a time (no element per record),
  for readers that hold their records in memory and gather them."""
  tf = require_tf()
  stream = plan.stream

  def global_batches(e, first, skip):
    ids = tf.data.Dataset.range(first, stream.num_windows()).map(
        lambda j: window_ids(tf, stream, e, j)[tf.where(j == first, skip, 0):])
    return ids.rebatch(plan.sharing.global_batch, drop_remainder=plan.drop_remainder)

  return _by_epoch(tf, plan, global_batches)


def mixture_dataset(mix: R.Mixture, read_files: List[Callable]):
  """(step, serialized records) per-replica batches of a `Mixture` (infinite).

  Also gives each record's dataset number: elements are (step, dataset
  numbers, records)."""
  tf = require_tf()
  ops = TfOps(tf)
  g = mix.sharing.global_batch
  streams = []
  for d, (stream, read_file) in enumerate(zip(mix.streams, read_files)):
    e0, j0, s0 = _start_of(stream, mix.before(d, mix.start_step))

    def one_epoch(e, stream=stream, read_file=read_file, e0=e0, j0=j0, s0=s0):
      first = tf.where(e == e0, tf.constant(j0, tf.int64), 0)
      skip = tf.where(e == e0, tf.constant(s0, tf.int64), 0)
      return epoch_records(tf, stream, read_file, e, first, skip)

    recs = tf.data.Dataset.range(e0, tf.int64.max).flat_map(one_epoch)
    streams.append(recs.map(lambda r, d=d: (tf.constant(d, tf.int64), r)))
  cum = tf.constant(mix.cumulative, tf.int64)
  scale = R.WEIGHT_SCALE

  def choices(step):
    before = (step * g * cum) // scale
    counts = (((step + 1) * g * cum) // scale - before)
    counts = counts[1:] - counts[:-1]
    which = tf.repeat(tf.range(len(mix.streams), dtype=tf.int64), counts)
    parts = tuple(ops.int64(v) for v in (*R.seed_parts(mix.seed), R.MIX)) + (step,)
    return tf.data.Dataset.from_tensor_slices(
        tf.gather(which, R.permutation(ops, tf.size(which, tf.int64), *parts)))

  steps = tf.data.Dataset.range(mix.start_step, tf.int64.max)
  slots = steps.flat_map(choices)
  mixed = tf.data.Dataset.choose_from_datasets(streams, slots, stop_on_empty_dataset=True)
  batches = mixed.batch(g, drop_remainder=True)
  batches = tf.data.Dataset.zip((steps, batches)).map(
      lambda k, b: (tf.fill([g], k), b[0], b[1]))
  lo, hi = mix.sharing.local_replicas.start, mix.sharing.local_replicas.stop
  r, b = mix.sharing.replicas, mix.sharing.per_replica
  return batches.map(lambda k, d, s: (tf.reshape(k, [r, b])[lo:hi, 0],
                                      tf.reshape(d, [r, b])[lo:hi],
                                      tf.reshape(s, [r, b])[lo:hi])).unbatch()


def epoch_salt(tf, seed: int, epoch):
  """`read_order.epoch_salt` in-graph (int64 scalar)."""
  ops = TfOps(tf)
  parts = tuple(ops.int64(v) for v in (*R.seed_parts(seed), R.SALT)) + (ops.int64(epoch),)
  return tf.bitwise.right_shift(R.hash32(ops, *parts), 1)
