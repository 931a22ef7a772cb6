"""`textrecords.reading.read_order` as tf.data pipelines: the same records in the
same per-replica batches (no Python ops, any epoch).

The pipeline of an epoch: its (file, skip, take) segments, each file opened
at its start (a stream that starts inside a file, by an epoch's rotation or
a resume at `start_step`, skips records of that file with `Dataset.skip`:
TFRecordDataset reads their headers, no parsing, no CRC check) -> windows
(`batch(window)`) -> each window permuted (one gather) -> the window cut
into this pipeline's per-replica batches by slicing (one element per batch,
nothing record by record after the read). A resume opens no file before
its start and reads at most one file's record headers plus one window
before its first batch.

Readers use `plan_dataset` (records read from files; with drop_remainder,
one pipeline gives every pass, the epoch number as data), or, when they
hold their records and gather them by record number, `plan_id_windows`
(drop_remainder: the same, a window's record numbers computed in-graph)
or else `plan_windows` over `id_windows`;
`mixture_dataset` reads a `Mixture`. `plan_ids` (a plan's batches as record
numbers, `plan_windows` over `id_windows`) is the reference path the tests
compare against.
"""

from typing import Callable, List, Optional

import numpy as np

from textrecords.reading import read_order as R
from textrecords.tf_import import require_tf


_CONSTANT_STATES = 1 << 15  # window keys kept as graph constants (at most 256 kB)
_PARALLEL_READS = 4  # files an epoch reads at once
_READ_CHUNK = 256  # records a file's reader hands over at a time
_READ_AHEAD = 4  # chunks each of those readers reads ahead


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


def _folded(ops, prefix, more):
  """(state, parts): the hash state of the constant `prefix` and of the Python
  ints leading `more`, computed in numpy, and the rest as int64 tensors (so a
  traced hash has ops only for what varies)."""
  fixed, more = list(prefix), list(more)
  while more and isinstance(more[0], int):
    fixed.append(more.pop(0))
  np_ops = R.NumpyOps
  state = int(R.hash32(np_ops, *(np_ops.int64(v) for v in fixed))[0])
  return state, tuple(ops.int64(v) for v in more)


def _hash(ops, stream: R.Stream, kind: int, *more):
  """`hash32` of (seed, stream key, kind, *more) in-graph."""
  state, parts = _folded(ops, (*R.seed_parts(stream.seed), stream.key, kind), more)
  return R.hash32(ops, *parts, state=state)


def _permutation(ops, n, stream: R.Stream, kind: int, *more):
  """`permutation` keyed by (seed, stream key, kind, *more) in-graph."""
  state, parts = _folded(ops, (*R.seed_parts(stream.seed), stream.key, kind), more)
  return R.permutation(ops, n, *parts, state=state)


def _file_order(ops, stream: R.Stream, epoch):
  n = len(stream.counts)
  if not stream.training:
    return ops.arange(n)
  return _permutation(ops, n, stream, R.FILES, epoch)


def _rotation(ops, stream: R.Stream, epoch):
  if not stream.training:
    return ops.int64(0)
  hi = _hash(ops, stream, R.ROTATION, epoch, 0)
  lo = _hash(ops, stream, R.ROTATION, epoch, 1)
  return ops.tf.math.floormod(ops.xor(hi * (1 << 31), lo), max(1, stream.total))


def segments(tf, stream: R.Stream, epoch, first, length):
  """`Stream.segments` in-graph: (file, skip, take) rows, int64 [k, 3]. With
  Python ints they are computed now, in numpy (a constant)."""
  if all(isinstance(v, int) for v in (epoch, first, length)):
    return tf.constant(stream.segments(epoch, first, length).reshape(-1, 3), tf.int64)
  ops = TfOps(tf)
  return _cut_segments(tf, stream, _file_order(ops, stream, epoch), _rotation(ops, stream, epoch),
                       first, length)


def _cut_segments(tf, stream: R.Stream, order, rotation, first, length):
  """`segments` of an epoch whose files come in `order` and whose stream
  starts `rotation` records into them (int64 tensors, `_draws`')."""
  counts = tf.gather(tf.constant(stream.counts, tf.int64), order)
  ends = tf.cumsum(counts)
  a = tf.math.floormod(rotation + first, max(1, stream.total))
  # the files in order twice (the stream wraps round once at most), clipped
  # to [a, a + length): one vector op each
  twice = tf.concat([order, order], 0)
  begin = tf.concat([ends - counts, ends - counts + stream.total], 0)
  size = tf.concat([counts, counts], 0)
  skip = tf.clip_by_value(a - begin, 0, size)
  take = tf.clip_by_value(a + length - begin, 0, size) - skip
  return tf.boolean_mask(tf.stack([twice, skip, take], 1), take > 0)


def _epoch_draws(tf, stream: R.Stream, epoch):
  """(file order, rotation, window keys) of an epoch tensor, training: the
  draws of `_file_order`, `_rotation` and `_window_states` (the same
  numbers), all made by one vector hash of (kind, epoch, i), its kind folded
  into the state in numpy (fewer ops to trace than one hash each)."""
  ops = TfOps(tf)
  nf, nw = len(stream.counts), stream.num_windows()
  states = [_folded(ops, (*R.seed_parts(stream.seed), stream.key, kind), ())[0]
            for kind in (R.FILES, R.ROTATION, R.WINDOW)]
  state = tf.concat([tf.fill([n], tf.constant(s, tf.int64))
                     for n, s in zip((nf, 2, nw), states)], 0)
  i = tf.concat([ops.arange(nf), ops.arange(2), ops.arange(nw)], 0)
  h = R.hash32(ops, ops.int64(epoch), i, state=state)
  order = ops.argsort(h[:nf] * (1 << 31) + ops.arange(nf))
  rotation = tf.math.floormod(ops.xor(h[nf] * (1 << 31), h[nf + 1]), max(1, stream.total))
  return order, rotation, h[nf + 2:]


def _stream_records(tf, stream: R.Stream, read_file: Callable, epoch, first: int):
  """The records of `epoch` in stream order (before the window permutation),
  from stream record `first` on: each file opened once, at its first record."""
  segs = segments(tf, stream, epoch, first, stream.used - first)
  return tf.data.Dataset.from_tensor_slices(segs).flat_map(_plain(
      lambda row: read_file(row[0]).skip(row[1]).take(row[2])))


def _window_states(tf, stream: R.Stream, epoch, first_window: int):
  """The hash state keying each window's permutation, windows `first_window`
  on (a dataset of int64 scalars): numpy constants for a Python epoch (a
  bounded number), else drawn in-graph, all windows at once."""
  ops = TfOps(tf)
  state, parts = _folded(ops, (*R.seed_parts(stream.seed), stream.key, R.WINDOW), (epoch,))
  n = stream.num_windows()
  if parts:
    js = tf.range(first_window, n, dtype=tf.int64)
    return tf.data.Dataset.from_tensor_slices(R.hash32(ops, *parts, js, state=state))
  if n - first_window <= _CONSTANT_STATES:
    js = np.arange(first_window, n, dtype=np.int64)
    return tf.data.Dataset.from_tensor_slices(
        tf.constant(R.hash32(R.NumpyOps, js, state=state), tf.int64))
  return tf.data.Dataset.range(first_window, n).batch(_CONSTANT_STATES).map(
      _plain(lambda js: R.hash32(ops, js, state=state))).unbatch()


def _windows(tf, stream: R.Stream, read_file: Callable, epoch, first_window: int):
  """The windows of `epoch` from `first_window` on, their records in reading
  order: `stream.window` records each (the last maybe fewer), permuted when
  training."""
  recs = _stream_records(tf, stream, read_file, epoch, first_window * stream.window)
  windows = recs.batch(stream.window)
  if not stream.training:
    return windows
  ops = TfOps(tf)

  def permuted(state, window):
    order = R.permutation(ops, _length(tf, window), state=state)
    return tf.nest.map_structure(lambda t: tf.gather(t, order), window)

  return tf.data.Dataset.zip((_window_states(tf, stream, epoch, first_window),
                              windows)).map(_plain(permuted))


def epoch_records(tf, stream: R.Stream, read_file: Callable, epoch, first_window, skip):
  """The records of `epoch` in reading order, from window `first_window` on,
  its first `skip` records left out (record by record: a mixture's streams)."""
  return _windows(tf, stream, read_file, epoch, first_window).unbatch().skip(skip)


def _start_of(stream: R.Stream, position: int):
  """(epoch, window, records to skip in it) of a reading position."""
  if not stream.used:  # fewer records than one global batch, all dropped
    return 0, 0, 0
  epoch, at = divmod(position, stream.used)
  j, skip = divmod(at, stream.window)
  return epoch, j, skip


def _plan_start(plan: R.Plan):
  """Where `plan` starts reading.

  Args:
    plan: the read order.

  Returns:
    (epoch, window, global batches of that window to skip) of its start step.
  """
  g = plan.sharing.global_batch
  e0, k0 = plan.start()
  _, j0, s0 = _start_of(plan.stream, k0 * g)
  return e0, j0, s0 // g


def _local_rows(xp, ids, sharing: R.Sharing, rest=None):
  """This pipeline's per-replica batches of whole global batches.

  Args:
    xp: `tf` or `np` (their `reshape` alike).
    ids: whole global batches of rows, [n * global_batch, *rest].
    sharing: the replicas and those of this pipeline.
    rest: the trailing dims of `ids` (an int64 tensor), when it has any.

  Returns:
    The rows of this pipeline's replicas, [n * local replicas, per_replica, *rest].
  """
  lo, hi = sharing.local_replicas.start, sharing.local_replicas.stop
  grid, flat = [-1, sharing.replicas, sharing.per_replica], [-1, sharing.per_replica]
  if rest is not None:
    grid, flat = xp.concat([grid, rest], 0), xp.concat([flat, rest], 0)
  return xp.reshape(xp.reshape(ids, grid)[:, lo:hi], flat)


def _length(tf, structure):
  """Records in a batch: the first dimension of a (structure of) tensor(s)."""
  return tf.shape(tf.nest.flatten(structure)[0], out_type=tf.int64)[0]


def _whole(*parts):
  """A dataset element as one structure (map and flat_map unpack tuples)."""
  return parts[0] if len(parts) == 1 else parts


def _replica_batches(tf, window, epoch, sharing: R.Sharing, drop_remainder: bool):
  """(epoch, per-replica batch) of this pipeline from a window's records (a
  structure of tensors of one length: whole global batches, the last maybe
  partial): a slice per batch, no step record by record."""
  lo, hi = sharing.local_replicas.start, sharing.local_replicas.stop
  r, g = sharing.replicas, sharing.global_batch
  epoch = tf.cast(epoch, tf.int64)
  size = _length(tf, window)
  full = size // g

  def mine(t):  # [full * g, ...] -> this pipeline's [full * (hi - lo), b, ...]
    return _local_rows(tf, t[:full * g], sharing, tf.shape(t, out_type=tf.int64)[1:])

  batches = tf.nest.map_structure(mine, window)
  count = tf.shape(tf.nest.flatten(batches)[0])[:1]
  out = tf.data.Dataset.from_tensor_slices((tf.fill(count, epoch), batches))
  if drop_remainder:  # every window is whole global batches
    return out
  rest = tf.nest.map_structure(lambda t: t[full * g:], window)
  n = size - full * g
  i = tf.range(lo, hi, dtype=tf.int64)
  bounds = tf.boolean_mask(tf.stack([i * n // r, (i + 1) * n // r], 1),
                           (i + 1) * n // r > i * n // r)
  return out.concatenate(tf.data.Dataset.from_tensor_slices(bounds).map(_plain(
      lambda ab: (epoch, tf.nest.map_structure(lambda t: t[ab[0]:ab[1]], rest)))))


def _epoch_batches(tf, plan: R.Plan, windows_of: Callable, epoch, first_window: int,
                   skip_batches: int):
  """(epoch, per-replica batch) of one epoch of `plan`, from window
  `first_window` on, its first `skip_batches` global batches left out."""
  windows = windows_of(epoch, first_window).prefetch(1)
  batches = windows.flat_map(_plain(lambda *w: _replica_batches(
      tf, _whole(*w), epoch, plan.sharing, plan.drop_remainder)))
  if not skip_batches:
    return batches
  return batches.skip(skip_batches * len(plan.sharing.local_replicas))


def _read_windows(tf, stream: R.Stream, read_file: Callable, segs):
  """The records of segments `segs` ((file, skip, take) rows, an int64
  [k, 3] tensor) in windows of `stream.window` records, the last maybe
  fewer: the segments' files read in parallel, `_PARALLEL_READS` at a
  time, each up to `_READ_AHEAD` chunks of `_READ_CHUNK` records ahead,
  handed over in sequence (a whole segment before the next: a block is
  the longest segment's chunks) and re-cut into windows."""
  longest = tf.reduce_max(tf.concat([segs[:, 2], [1]], 0))
  chunks = (longest + _READ_CHUNK - 1) // _READ_CHUNK

  def chunked(row):
    return read_file(row[0]).skip(row[1]).take(row[2]).batch(_READ_CHUNK).prefetch(_READ_AHEAD)

  return tf.data.Dataset.from_tensor_slices(segs).interleave(
      _plain(chunked), cycle_length=_PARALLEL_READS, block_length=chunks,
      num_parallel_calls=_PARALLEL_READS, deterministic=True).rebatch(stream.window)


def _read_epoch(tf, plan: R.Plan, read_file: Callable, e, first_window, skip_batches):
  """(epoch, per-replica batch) of epoch `e` of a drop_remainder `plan`
  from window `first_window` on, its first `skip_batches` global batches
  left out (int64 tensors): the epoch's draws made at once (`_draws`), its
  segments' files read in parallel into windows (`_read_windows`), each
  window permuted and cut into this pipeline's batches by one gather, the
  windows cut in parallel (in order)."""
  stream, ops = plan.stream, TfOps(tf)
  first = first_window * stream.window

  def windows(e, order, rotation, keys):
    segs = _cut_segments(tf, stream, order, rotation, first, stream.used - first)
    return tf.data.Dataset.zip((tf.data.Dataset.from_tensors((e, keys)).repeat(),
                                tf.data.Dataset.range(first_window, stream.num_windows()),
                                _read_windows(tf, stream, read_file, segs)))

  def cut(head, j, *w):
    e, keys = head
    window = _whole(*w)
    size = _length(tf, window)
    order = (R.permutation(ops, size, state=tf.gather(keys, j)) if stream.training
             else ops.arange(size))
    at = _local_rows(tf, order, plan.sharing)
    return tf.fill(tf.shape(at)[:1], e), tf.nest.map_structure(lambda t: tf.gather(t, at),
                                                               window)

  ds = tf.data.Dataset.from_tensors(e).map(_plain(
      lambda e: (e, *_draws(tf, stream, e)))).flat_map(_plain(windows))
  ds = ds.map(_plain(cut), num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  return ds.unbatch().skip(skip_batches * len(plan.sharing.local_replicas))


def _pass_records(tf, plan: R.Plan, read_file: Callable):
  """(epochs, stream positions, records) in chunks of up to `_READ_CHUNK`:
  the records a pass of a drop_remainder plan without repeat reads, in
  stream order, from its start window on (a training dataset iterated
  again: the next whole epoch). Its segments' files are read in parallel,
  `_PARALLEL_READS` at a time, each up to `_READ_AHEAD` chunks ahead,
  handed over in sequence (a block is a whole file's chunks). A pass's own
  part is made of datasets without functions."""
  stream = plan.stream
  e0, j0, _ = _plan_start(plan)
  ops = TfOps(tf)

  def segment_rows(e):
    if stream.training:
      order, rotation, _ = _window_draws(tf, stream, e, ops.int64(0))
    else:
      order, rotation = ops.arange(len(stream.counts)), ops.int64(0)
    first = tf.where(tf.equal(e, e0), tf.constant(j0, tf.int64), ops.int64(0)) * stream.window
    segs = _cut_segments(tf, stream, order, rotation, first, stream.used - first)
    at = first + tf.cumsum(segs[:, 2], exclusive=True)
    return tf.data.Dataset.from_tensor_slices((tf.fill(tf.shape(at), e), segs, at))

  def chunked(e, seg, at):
    return tf.data.Dataset.zip((tf.data.Dataset.from_tensors(e).repeat(),
                                tf.data.Dataset.range(at, at + seg[2]),
                                read_file(seg[0]).skip(seg[1]).take(seg[2]))).batch(
                                    _READ_CHUNK).prefetch(_READ_AHEAD)

  if stream.training:
    rows = pass_numbers().flat_map(_plain(lambda n: segment_rows(n + e0)))
  else:
    rows = segment_rows(tf.constant(e0, tf.int64))
  block = max(1, -(-max(stream.counts, default=1) // _READ_CHUNK))
  return rows.interleave(_plain(chunked), cycle_length=_PARALLEL_READS, block_length=block,
                         num_parallel_calls=_PARALLEL_READS, deterministic=True)


def _pass_batches(tf, plan: R.Plan, read_file: Callable):
  """(epoch, per-replica batch) of a drop_remainder plan without repeat, as
  `passes` gives them, from one flat pipeline (the epoch number is data):
  a pass's records (`_pass_records`) cut into windows, each window
  permuted and cut into this pipeline's batches by one gather (less the
  global batches before the start step), windows in parallel, in order."""
  stream, ops = plan.stream, TfOps(tf)
  e0, j0, skip = _plan_start(plan)
  skip_rows = skip * len(plan.sharing.local_replicas)

  def cut(e, at, *w):
    window = _whole(*w)
    e, j, size = e[0], at[0] // stream.window, _length(tf, window)
    if stream.training:
      order = R.permutation(ops, size, state=_window_key(tf, stream, e, j))
    else:
      order = ops.arange(size)
    rows = _local_rows(tf, order, plan.sharing)
    if skip_rows:
      rows = rows[tf.where(tf.logical_and(tf.equal(e, e0), tf.equal(j, j0)), skip_rows, 0):]
    return tf.fill(tf.shape(rows)[:1], e), tf.nest.map_structure(
        lambda t: tf.gather(t, rows), window)

  windows = _pass_records(tf, plan, read_file).rebatch(stream.window)
  return windows.map(_plain(cut), num_parallel_calls=tf.data.AUTOTUNE,
                     deterministic=True).unbatch()


def plan_dataset(plan: R.Plan, read_file: Callable, read_files: Optional[Callable] = None):
  """(epoch, serialized records) per-replica batches of one dataset's `Plan`
  (`plan_windows` over the records read by `read_file`).

  With `read_files` (file numbers, an int64 vector -> the records of those
  files in sequence) and drop_remainder, a pass's files are read in
  parallel and each window cut by one gather of positions drawn in-graph,
  windows in parallel: without repeat one flat pipeline gives every pass,
  the epoch number as data (`_pass_batches`); a repeating plan's epochs
  come from one epoch pipeline traced once (`each_pass` over
  `_read_epoch`).
  An evaluation plan for one replica is read as a plain batched sequence
  (`_sequential_batches`).

  Args:
    plan: the read order.
    read_file: file number (int64 scalar tensor) -> a dataset of its records.
    read_files: optional, as above.
  """
  tf = require_tf()
  if read_files is not None and _read_in_sequence(plan):
    return _sequential_batches(tf, plan, read_files)
  windows_of = lambda e, j: _windows(tf, plan.stream, read_file, e, j)  # noqa: E731
  if read_files is None or not plan.drop_remainder:
    return plan_windows(plan, windows_of)
  if not plan.repeat:
    return _pass_batches(tf, plan, read_file)
  return each_pass(plan, lambda e, j, skip: _read_epoch(tf, plan, read_file, e, j, skip))


def _read_in_sequence(plan: R.Plan) -> bool:
  """Whether `plan`'s batches are its records read in file order and cut in
  turn: evaluation (no permutation, no rotation) for a single replica (its
  per-replica batch is the global batch), with records to read."""
  _, k0 = plan.start()
  return (not plan.stream.training and plan.sharing.replicas == 1
          and plan.stream.used > k0 * plan.sharing.global_batch)


def _sequential_batches(tf, plan: R.Plan, read_files: Callable):
  """(epoch, batch) of a `_read_in_sequence` plan: its files read as one
  sequence from its start record and batched, nothing between the read and
  the batch (the records and batches of `plan_windows`, a tf.data pipeline
  as plain as a hand-written `TFRecordDataset(files).batch(n)`; the epoch
  zipped on, as a map function call per batch costs more)."""
  stream, g = plan.stream, plan.sharing.global_batch
  e0, k0 = plan.start()

  def epoch(e, first: int):
    segs = stream.segments(0, first, stream.used - first).reshape(-1, 3)
    records = read_files(tf.constant(segs[:, 0], tf.int64)).skip(int(segs[0, 1])).take(
        stream.used - first)
    batches = records.batch(g, drop_remainder=plan.drop_remainder)
    return tf.data.Dataset.zip((tf.data.Dataset.from_tensors(e).repeat(), batches))

  ds = epoch(tf.constant(e0, tf.int64), k0 * g)
  if not plan.repeat:
    return ds
  return ds.concatenate(tf.data.Dataset.range(e0 + 1, tf.int64.max).flat_map(
      _plain(lambda e: epoch(e, 0))))


def plan_windows(plan: R.Plan, windows_of: Callable):
  """(epoch, per-replica batch) of a `Plan` whose windows come whole.

  `windows_of(epoch, first_window)`: a dataset of `epoch`'s windows from
  `first_window` on, each a structure of tensors of its records in reading
  order (permuted when training; e.g. `_windows`, or a window's record
  numbers with what a reader holds for them); each is cut into this
  pipeline's per-replica batches by slicing. The first epoch's file order
  and rotation are computed here (numpy); the epochs after it draw those
  in-graph (`passes`)."""
  tf = require_tf()
  e0, j0, skip = _plan_start(plan)
  ds = _epoch_batches(tf, plan, windows_of, e0, j0, skip)
  later = lambda e: _epoch_batches(tf, plan, windows_of, e, 0, 0)  # noqa: E731
  if not plan.repeat:
    return passes(plan, ds, later)
  return ds.concatenate(tf.data.Dataset.range(e0 + 1, tf.int64.max).flat_map(_plain(later)))


def pass_numbers():
  """A dataset of one int64 scalar: the number of iterators of it (and of
  the datasets made from it) that read it before this one: 0, then 1, 2, ...

  The count is kept by the dataset (a hash table made now, with it) and
  advanced when an iterator reads the element, so a dataset iterated again
  (Keras makes an iterator per epoch) can give its next epoch,
  deterministically in the number of passes (as tf.data's
  `reshuffle_each_iteration` does, which draws instead). Every pipeline
  keeps its own count; on a tf.data service the workers rebuild the
  pipeline, and so the count, for each job. An iterator checkpoint
  (`tf.train.Checkpoint(iterator=...)`) saves the position in the pass,
  not the count (the table is external state, ignored when saving)."""
  tf = require_tf()
  with tf.init_scope():
    table = tf.lookup.experimental.MutableHashTable(tf.int64, tf.int64, default_value=0)

  def advance(_):
    key = tf.constant(0, tf.int64)
    before = tf.reshape(table.lookup(key), [])
    with tf.control_dependencies([table.insert(key, before + 1)]):
      return tf.identity(before)

  options = tf.data.Options()
  options.experimental_external_state_policy = tf.data.experimental.ExternalStatePolicy.IGNORE
  return tf.data.Dataset.from_tensors(tf.constant(0, tf.int64)).map(
      _plain(advance)).with_options(options)


def passes(plan: R.Plan, first, whole_epoch: Callable):
  """A plan's batches pass after pass: `first` (its batches from
  start_step to the end of its epoch e0) on the dataset's first pass; on
  pass n > 0 (its n-th new iterator, `pass_numbers`) of a training plan
  without repeat, the whole epoch e0 + n (`whole_epoch(e)`, e an int64
  tensor; it must give those of `plan.batches()`). So the passes of a
  training dataset follow each other as `repeat=True` gives them
  (new order, new per-epoch draws), however many passes came before in
  this process. Evaluation plans give `first` on every pass; repeating
  plans are one infinite pass (not wrapped). A pass makes no iterator of
  the pipeline it does not read (`take(0)`)."""
  if plan.repeat or not plan.stream.training:
    return first
  tf = require_tf()
  e0, _ = plan.start()
  zero = tf.constant(0, tf.int64)

  def one_pass(n):
    later = tf.data.Dataset.from_tensors(e0 + n).flat_map(_plain(whole_epoch))
    return first.take(tf.where(n > 0, zero, zero - 1)).concatenate(
        later.take(tf.where(n > 0, zero - 1, zero)))

  return pass_numbers().flat_map(_plain(one_pass))


def _plain(fn: Callable) -> Callable:
  """`fn` traced as written (no autograph: plain Python control flow on
  Python values only, so tracing is cheaper)."""
  return require_tf().autograph.experimental.do_not_convert(fn)


def _record_positions(tf, stream: R.Stream, epoch):
  """(stream position where each segment of `epoch` starts, its first
  record number, positions in all): the epoch's reading order as int64
  vectors, numpy constants for a Python epoch."""
  base = np.concatenate(([0], np.cumsum(np.asarray(stream.counts, np.int64))))[:-1]
  if isinstance(epoch, int):
    segs = stream.segments(epoch, 0, stream.used).reshape(-1, 3)
    at = np.concatenate(([0], np.cumsum(segs[:, 2])))[:-1]
    return tf.constant(at, tf.int64), tf.constant(base[segs[:, 0]] + segs[:, 1], tf.int64)
  segs = segments(tf, stream, epoch, 0, stream.used)
  at = tf.cumsum(segs[:, 2], exclusive=True)
  return at, tf.gather(tf.constant(base, tf.int64), segs[:, 0]) + segs[:, 1]


def _window_split(stream: R.Stream, first_window: int):
  """(whole windows, records of a last partial one: 0 if none) of an
  epoch's windows from `first_window` on."""
  whole = stream.used // stream.window
  last = stream.used - whole * stream.window if first_window <= whole else 0
  return max(0, whole - first_window), last


def epoch_ids(tf, stream: R.Stream, epoch, first_window: int):
  """`Stream.window_ids` of `epoch`'s windows from `first_window` on,
  concatenated: one int64 vector of record numbers in reading order.

  Computed for the whole epoch at once, in a few vector ops: the stream's
  record numbers from its segments (numpy constants for a Python epoch),
  then the whole windows permuted by one batched sort of their keys (the
  same keys as `R.permutation`), the last partial window by its own."""
  w = stream.window
  whole, last = _window_split(stream, first_window)
  pos = tf.range(first_window * w, stream.used, dtype=tf.int64)
  js = np.arange(first_window, first_window + whole + (1 if last else 0), dtype=np.int64)
  ops = TfOps(tf)
  if stream.training and not isinstance(epoch, int):  # one vector hash draws all
    order, rotation, keys = _epoch_draws(tf, stream, epoch)
    ids, states = _rotated_ids(tf, stream, order, rotation, pos), tf.gather(keys, js)
  else:
    at, first_id = _record_positions(tf, stream, epoch)
    seg = tf.searchsorted(at, pos, side="right") - 1
    ids = tf.gather(first_id, seg) + pos - tf.gather(at, seg)
    if not stream.training:
      return ids
    state, _ = _folded(ops, (*R.seed_parts(stream.seed), stream.key, R.WINDOW), (epoch,))
    states = tf.constant(R.hash32(R.NumpyOps, js, state=state), tf.int64)
  i = tf.range(w, dtype=tf.int64)[tf.newaxis, :]
  order = ops.argsort(R.hash32(ops, i, state=states[:whole, tf.newaxis]) * (1 << 31) + i)
  out = [tf.reshape(tf.gather(tf.reshape(ids[:whole * w], [whole, w]), order, batch_dims=1),
                    [-1])]
  if last:
    out.append(tf.gather(ids[whole * w:], R.permutation(ops, last, state=states[whole])))
  return tf.concat(out, 0)


def _rotated_ids(tf, stream: R.Stream, order, rotation, pos):
  """Record numbers at stream positions `pos` of an epoch whose files come
  in `order` and whose stream starts `rotation` records into them (int64
  tensors; what `segments` gives, position by position)."""
  counts = tf.gather(tf.constant(stream.counts, tf.int64), order)
  ends = tf.cumsum(counts)
  at = tf.math.floormod(rotation + pos, max(1, stream.total))
  k = tf.searchsorted(ends, at, side="right")
  base = np.concatenate(([0], np.cumsum(np.asarray(stream.counts, np.int64))))[:-1]
  return (tf.gather(tf.constant(base, tf.int64), tf.gather(order, k)) + at
          - tf.gather(ends - counts, k))


def id_windows(tf, stream: R.Stream, epoch, first_window):
  """`Stream.window_ids` of `epoch`'s windows from `first_window` on: a
  dataset of int64 vectors, a window's record numbers in reading order
  (cut from `epoch_ids`, computed once per iterator)."""
  w = stream.window
  whole, last = _window_split(stream, first_window)

  def windows(_):
    ids = epoch_ids(tf, stream, epoch, first_window)
    out = tf.data.Dataset.from_tensor_slices(tf.reshape(ids[:whole * w], [whole, w]))
    return out.concatenate(tf.data.Dataset.from_tensors(ids[whole * w:])) if last else out

  return tf.data.Dataset.from_tensors(tf.constant(0, tf.int64)).flat_map(_plain(windows))


def _draws(tf, stream: R.Stream, epoch):
  """(file order, rotation, window keys) of `epoch` (an int64 tensor): the
  training draws of `_epoch_draws`; an evaluation stream's files in order,
  unrotated, its keys unused."""
  if stream.training:
    return _epoch_draws(tf, stream, epoch)
  ops = TfOps(tf)
  return ops.arange(len(stream.counts)), ops.int64(0), ops.arange(stream.num_windows())


def _window_draws(tf, stream: R.Stream, epoch, j):
  """(file order, rotation, key of window j) of `epoch` (int64 tensors,
  training): `_epoch_draws`' numbers for one window, one vector hash of
  nf + 3 values (its states numpy constants)."""
  ops, nf = TfOps(tf), len(stream.counts)
  states = [_folded(ops, (*R.seed_parts(stream.seed), stream.key, kind), ())[0]
            for kind in (R.FILES, R.ROTATION, R.WINDOW)]
  state = np.repeat(np.asarray(states, np.int64), [nf, 2, 1])
  i = tf.concat([tf.constant(np.r_[np.arange(nf), 0, 1], tf.int64), tf.reshape(j, [1])], 0)
  h = R.hash32(ops, ops.int64(epoch), i, state=tf.constant(state, tf.int64))
  order = ops.argsort(h[:nf] * (1 << 31) + ops.arange(nf))
  rotation = tf.math.floormod(ops.xor(h[nf] * (1 << 31), h[nf + 1]), max(1, stream.total))
  return order, rotation, h[nf + 2]


def _window_key(tf, stream: R.Stream, epoch, j):
  """The key of window `j`'s permutation in `epoch` (int64 tensors):
  `_epoch_draws`' window key alone, one hash."""
  ops = TfOps(tf)
  state, _ = _folded(ops, (*R.seed_parts(stream.seed), stream.key, R.WINDOW), ())
  return R.hash32(ops, ops.int64(epoch), ops.int64(j), state=state)


def _window_id_rows(tf, plan: R.Plan, epoch, j):
  """This pipeline's per-replica batches of window `j` of `epoch` (int64
  tensors), as rows of record numbers (int64 [k, per_replica];
  `Stream.window_ids` cut as `plan_ids` cuts them): drop_remainder plans,
  whose windows are whole global batches."""
  stream, ops = plan.stream, TfOps(tf)
  size = tf.minimum(tf.constant(stream.window, tf.int64), stream.used - j * stream.window)
  pos = j * stream.window + ops.arange(size)
  if not stream.training:
    return _local_rows(tf, pos, plan.sharing)
  order, rotation, key = _window_draws(tf, stream, epoch, j)
  ids = _rotated_ids(tf, stream, order, rotation, pos)
  return _local_rows(tf, tf.gather(ids, R.permutation(ops, size, state=key)), plan.sharing)


def _window_tags(tf, plan: R.Plan):
  """(epoch, window) int64 pairs: the windows `plan` reads, pass after pass
  as `passes` gives them (the first pass from the start window; a training
  dataset iterated again: the next whole epoch; repeat: epoch after
  epoch). A pass's own part is made of datasets without functions (a
  pass instantiates nothing more than its iterator's)."""
  e0, j0, _ = _plan_start(plan)
  nw = plan.stream.num_windows()

  def windows(e):
    first = tf.where(tf.equal(e, e0), tf.constant(j0, tf.int64), tf.constant(0, tf.int64))
    return tf.data.Dataset.zip((tf.data.Dataset.from_tensors(e).repeat(),
                                tf.data.Dataset.range(first, nw)))

  if plan.repeat:
    return tf.data.Dataset.range(e0, tf.int64.max).flat_map(_plain(windows))
  if not plan.stream.training:
    return windows(tf.constant(e0, tf.int64))
  return pass_numbers().flat_map(_plain(lambda n: windows(n + e0)))


def plan_id_windows(plan: R.Plan, gather: Callable, held=None):
  """(epoch, per-replica batch) of a drop_remainder `Plan` whose records a
  reader holds, a window at a time.

  One flat pipeline gives every pass (`_window_tags`: the epoch number is
  data): per window, its rows of record numbers (`_window_id_rows`: the
  epoch's draws for that window, int64 [k, per_replica], less the global
  batches before the start step) turned into k batches by
  `gather(epoch, rows[, element])`, element being `held`'s (a dataset of
  one element, e.g. cached parsed rows; none if None): a structure of
  tensors with k rows. Windows are computed and gathered in parallel, in
  order, so a pass waits for one window before its first batch.

  Returns:
    None unless `plan.drop_remainder` (batches may be partial).
  """
  if not plan.drop_remainder:
    return None
  tf = require_tf()
  e0, j0, skip = _plan_start(plan)
  skip_rows = skip * len(plan.sharing.local_replicas)

  def cut(tag, *element):
    e, j = tag
    rows = _window_id_rows(tf, plan, e, j)
    if skip_rows:
      rows = rows[tf.where(tf.logical_and(tf.equal(e, e0), tf.equal(j, j0)), skip_rows, 0):]
    return tf.fill(tf.shape(rows)[:1], e), gather(e, rows, *element)

  ds = _window_tags(tf, plan)
  if held is not None:
    ds = tf.data.Dataset.zip((ds, held.repeat()))
  ds = ds.map(_plain(lambda *a: cut(*a) if held is not None else cut(a)),
              num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  return ds.unbatch()


def each_pass(plan: R.Plan, epoch: Callable):
  """`plan`'s passes from one epoch pipeline, `epoch(e, first window, global
  batches to skip)` (int64 tensors; traced once): the first pass from
  `plan.start()` on; a training plan iterated again gives the whole next
  epoch (`pass_numbers`), an evaluation plan its first pass again; a
  repeating plan is one pass over epoch after epoch."""
  tf = require_tf()
  e0, j0, skip = _plan_start(plan)
  zero = tf.constant(0, tf.int64)

  def from_start(e, first):  # epoch e, from the start step on its first pass
    return epoch(e, tf.where(first, tf.constant(j0, tf.int64), zero),
                 tf.where(first, tf.constant(skip, tf.int64), zero))

  if plan.repeat:
    return tf.data.Dataset.range(e0, tf.int64.max).flat_map(_plain(
        lambda e: from_start(e, tf.equal(e, e0))))
  if not plan.stream.training:
    return from_start(tf.constant(e0, tf.int64), tf.constant(True))
  return pass_numbers().flat_map(_plain(lambda n: from_start(e0 + n, tf.equal(n, 0))))


def plan_ids(plan: R.Plan):
  """(epoch, record numbers) per-replica batches of a `Plan`: the batches of
  `plan_dataset` as numbers, a window at a time (no element per record).
  The reference the tests compare the readers' paths against (readers that
  hold their records use `plan_id_windows`, or `plan_windows` over
  `id_windows` without drop_remainder)."""
  tf = require_tf()
  return plan_windows(plan, lambda e, j: id_windows(tf, plan.stream, e, j))


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
    later = tf.data.Dataset.range(e0 + 1, tf.int64.max).flat_map(_plain(
        lambda e, stream=stream, read_file=read_file: epoch_records(tf, stream, read_file,
                                                                   e, 0, 0)))
    recs = epoch_records(tf, stream, read_file, e0, j0, s0).concatenate(later)
    streams.append(recs.map(_plain(lambda r, d=d: (tf.constant(d, tf.int64), r))))
  cum = tf.constant(mix.cumulative, tf.int64)
  scale = R.WEIGHT_SCALE

  def choices(step):
    before = (step * g * cum) // scale
    counts = (((step + 1) * g * cum) // scale - before)
    counts = counts[1:] - counts[:-1]
    which = tf.repeat(tf.range(len(mix.streams), dtype=tf.int64), counts)
    state, parts = _folded(ops, (*R.seed_parts(mix.seed), R.MIX), (step,))
    return tf.data.Dataset.from_tensor_slices(
        tf.gather(which, R.permutation(ops, tf.size(which, tf.int64), *parts, state=state)))

  steps = tf.data.Dataset.range(mix.start_step, tf.int64.max)
  slots = steps.flat_map(_plain(choices))
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
  state, parts = _folded(ops, (*R.seed_parts(seed), R.SALT), (epoch,))
  return tf.bitwise.right_shift(R.hash32(ops, *parts, state=state), 1)
