"""The read order of `make_dataset` and `numpy_batches`: which records each
input pipeline reads, step after step, computed from the files' record
counts alone (the metadata's), without reading any file.

One dataset (a `Stream`), epoch e:
  stream     training: the record files in a seeded permutation of epoch e,
             concatenated, then rotated by a seeded offset of epoch e;
             evaluation: the files in order. The first `used` records are
             read: steps * global batch with drop_remainder, else all.
  windows    the stream is cut into windows of `window` records (the
             shuffle buffer rounded to a multiple of the global batch);
             training permutes the records of each window (seeded by seed,
             epoch, window).
  steps      global step k of the epoch is stream records [kG, (k+1)G)
             (the last one partial without drop_remainder).
A `Sharing` then gives each replica and input pipeline its share of a
global batch (`Sharing.slices`): replica r of R takes [r*T//R, (r+1)*T//R)
of its T records, pipeline p of P the replicas [p*R/P, (p+1)*R/P). So a
global batch holds the same records for any number of pipelines; the
pipelines' slices are disjoint, and every pipeline gets the same number of
full batches per epoch.

A mixture of datasets (`Mixture`) takes `count(d, k)` records of step k
from dataset d's stream (repeating its epochs), those counts exact rounding
of the weights: `floor(k*G*cw_d)` records of datasets < d before step k.

Every draw is a 32-bit keyed hash (`hash32`) that numpy and TensorFlow
compute alike (int64 arithmetic), so `textrecords.reading.tf_order` builds the same
order in a tf.data graph.

Example:
  >>> s = Stream((5, 3), training=False, seed=0, used=8, window=4)
  >>> s.ids(0, 0, 8).tolist()
  [0, 1, 2, 3, 4, 5, 6, 7]
  >>> Sharing(4, replicas=2, pipelines=2, pipeline=1).slices(4)
  [(2, 4)]
"""

import dataclasses
from typing import List, Optional, Sequence, Tuple

import numpy as np

from textrecords.errors import UserError

M32 = 0xFFFFFFFF
_MUL, _ADD = 0x9E3779B1, 0x7F4A7C15
WEIGHT_SCALE = 1 << 24  # mixture weights are exact fractions of this

# Streams of the keyed hash (its first parts after the seed).
FILES, ROTATION, WINDOW, SALT, MIX = 1, 2, 3, 4, 5


class NumpyOps:
  """The integer ops `hash32` needs, on int64 numpy arrays."""
  xor = staticmethod(np.bitwise_xor)
  shr = staticmethod(np.right_shift)
  band = staticmethod(np.bitwise_and)

  @staticmethod
  def arange(n):
    return np.arange(n, dtype=np.int64)

  @staticmethod
  def argsort(keys):
    return np.argsort(keys, kind="stable")

  @staticmethod
  def int64(x):
    return np.atleast_1d(np.asarray(x, np.int64))


def _fmix(ops, h):
  h = ops.band(ops.xor(h, ops.shr(h, 16)) * 0x85EBCA6B, M32)
  h = ops.band(ops.xor(h, ops.shr(h, 13)) * 0xC2B2AE35, M32)
  return ops.xor(h, ops.shr(h, 16))


def hash32(ops, *parts, state=None):
  """A 32-bit hash (int64 in [0, 2**32)) of int64 parts (scalars or arrays,
  broadcast), the same in numpy and TF. `state`: the hash of the parts
  before these (so a constant prefix can be hashed once, in numpy).

  >>> int(hash32(NumpyOps, NumpyOps.int64(1), NumpyOps.int64(2))[0])
  584596323
  >>> h1 = int(hash32(NumpyOps, NumpyOps.int64(1))[0])
  >>> int(hash32(NumpyOps, NumpyOps.int64(2), state=h1)[0])
  584596323
  """
  h = ops.int64(0x2545F491 if state is None else state)
  for part in parts:
    h = _fmix(ops, ops.band(ops.xor(h, ops.band(part, M32)) * _MUL + _ADD, M32))
  return h


def permutation(ops, n, *parts, state=None):
  """A permutation of range(n) keyed by parts (n < 2**31; `state` as `hash32`'s)."""
  i = ops.arange(n)
  return ops.argsort(hash32(ops, *parts, i, state=state) * (1 << 31) + i)


def seed_parts(seed: int) -> Tuple[int, int]:
  seed = int(seed) % (1 << 64)
  return seed & M32, seed >> 32


def resolve_seed(seed: Optional[int]) -> int:
  """`seed`, or one drawn now (a training order without a seed is random)."""
  if seed is None:
    return int(np.random.default_rng().integers(1 << 62))
  return int(seed)


def epoch_salt(seed: int, epoch: int) -> int:
  """A per-epoch 31-bit number (e.g. the salt of epoch e's dynamic masks)."""
  ops = NumpyOps
  return int(hash32(ops, *map(ops.int64, (*seed_parts(seed), SALT, epoch)))[0]) >> 1


@dataclasses.dataclass(frozen=True)
class Sharing:
  """How a global batch of `global_batch` records is shared out over
  `replicas` replicas fed by `pipelines` input pipelines; this is `pipeline`'s."""
  global_batch: int
  replicas: int = 1
  pipelines: int = 1
  pipeline: int = 0

  def __post_init__(self):
    g, r, n, p = self.global_batch, self.replicas, self.pipelines, self.pipeline
    if g % r:
      raise UserError(f"global_batch_size={g} is not divisible by the {r} replicas")
    if r % n or not 0 <= p < n:
      raise UserError(f"input pipeline {p} of {n} cannot feed {r} replicas "
                      "(they must divide evenly)")

  @property
  def per_replica(self) -> int:
    return self.global_batch // self.replicas

  @property
  def local_replicas(self) -> range:
    k = self.replicas // self.pipelines
    return range(self.pipeline * k, (self.pipeline + 1) * k)

  def slices(self, size: int) -> List[Tuple[int, int]]:
    """This pipeline's replicas' [start, stop) in a global batch of `size`
    records (all of a full one; empty slices of a partial one left out)."""
    r = self.replicas
    out = [(i * size // r, (i + 1) * size // r) for i in self.local_replicas]
    return [(a, b) for a, b in out if b > a]


def window_records(shuffle_buffer: int, global_batch: int) -> int:
  """Records per shuffle window: the buffer rounded up to whole global batches."""
  return max(1, -(-int(shuffle_buffer) // global_batch)) * global_batch


@dataclasses.dataclass(frozen=True)
class Stream:
  """The epochs of one dataset's records (see the module doc).

  Attributes:
    counts: records per file, in the dataset's file order.
    training: permute files, rotate and permute windows (else in order).
    seed: the order's seed.
    used: records read per epoch (<= the total).
    window: records per shuffle window.
    key: folded into every draw (a mixture's dataset number).
  """
  counts: Tuple[int, ...]
  training: bool
  seed: int
  used: int
  window: int
  key: int = 0

  @property
  def total(self) -> int:
    return int(sum(self.counts))

  def _parts(self, stream: int, *more):
    ops = NumpyOps
    return tuple(ops.int64(v) for v in (*seed_parts(self.seed), self.key, stream, *more))

  def file_order(self, epoch: int) -> np.ndarray:
    n = len(self.counts)
    if not self.training:
      return np.arange(n, dtype=np.int64)
    return permutation(NumpyOps, n, *self._parts(FILES, epoch))

  def rotation(self, epoch: int) -> int:
    if not self.training:
      return 0
    ops = NumpyOps
    hi = hash32(ops, *self._parts(ROTATION, epoch, 0))[0]
    lo = hash32(ops, *self._parts(ROTATION, epoch, 1))[0]
    return int((int(hi) << 31) ^ int(lo)) % max(1, self.total)

  def segments(self, epoch: int, first: int, length: int) -> np.ndarray:
    """(file, skip, take) rows reading stream records [first, first + length)
    of `epoch` in order (before the window permutation)."""
    order = self.file_order(epoch)
    counts = np.asarray(self.counts, np.int64)[order]
    start = np.concatenate(([0], np.cumsum(counts)))
    n = self.total
    a = (self.rotation(epoch) + first) % max(1, n)
    rows = []
    for x, y in ((a, min(n, a + length)), (0, max(0, a + length - n))):
      skip = np.maximum(0, x - start[:-1])
      take = np.minimum(start[1:], y) - start[:-1] - skip
      rows.append(np.stack([order, skip, take], 1)[take > 0])
    return np.concatenate(rows)

  def ids(self, epoch: int, first: int, length: int) -> np.ndarray:
    """Global record numbers (file starts + record) of those stream records."""
    base = np.concatenate(([0], np.cumsum(np.asarray(self.counts, np.int64))))
    segs = self.segments(epoch, first, length)
    return np.concatenate([np.arange(base[f] + s, base[f] + s + t, dtype=np.int64)
                           for f, s, t in segs] or [np.zeros(0, np.int64)])

  def num_windows(self) -> int:
    return -(-self.used // self.window)

  def window_order(self, epoch: int, j: int, size: int):
    """The permutation of window j's `size` records (training; else None)."""
    if not self.training:
      return None
    return permutation(NumpyOps, size, *self._parts(WINDOW, epoch, j))

  def window_ids(self, epoch: int, j: int) -> np.ndarray:
    """Record numbers of window j of `epoch`, in reading order."""
    first = j * self.window
    ids = self.ids(epoch, first, min(self.window, self.used - first))
    order = self.window_order(epoch, j, len(ids))
    return ids if order is None else ids[order]

  def flat_ids(self, position: int, count: int, cache: Optional[dict] = None) -> np.ndarray:
    """Record numbers of reading positions [position, position + count),
    epochs following each other (`used` records each)."""
    out = []
    cache = {} if cache is None else cache
    while count > 0:
      epoch, at = divmod(position, self.used)
      j, skip = divmod(at, self.window)
      key = (epoch, j)
      if key not in cache:
        cache.clear()
        cache[key] = self.window_ids(epoch, j)
      ids = cache[key][skip:skip + count]
      out.append(ids)
      position += len(ids)
      count -= len(ids)
    return np.concatenate(out) if out else np.zeros(0, np.int64)


def used_records(total: int, global_batch: int, drop_remainder: bool) -> int:
  return total - total % global_batch if drop_remainder else total


def steps_per_epoch(total: int, global_batch: int, drop_remainder: bool) -> int:
  return total // global_batch if drop_remainder else -(-total // global_batch)


@dataclasses.dataclass(frozen=True)
class Plan:
  """One dataset read by steps: the stream, how batches are shared out, and
  where reading starts (`start_step`, a global step)."""
  stream: Stream
  sharing: Sharing
  drop_remainder: bool
  start_step: int = 0
  repeat: bool = False

  @property
  def steps_per_epoch(self) -> int:
    return steps_per_epoch(self.stream.used, self.sharing.global_batch, False)

  def start(self) -> Tuple[int, int]:
    """(epoch, step within it) where reading starts."""
    return divmod(self.start_step, max(1, self.steps_per_epoch))

  @property
  def passes_alike(self) -> bool:
    """Whether every pass over the dataset (each new iterator) yields
    `num_batches()` batches. A training plan without repeat gives epoch
    e0 + n on its pass n (`tf_order.passes`): pass 0 from start_step's step
    of e0, later passes whole, so a start_step inside an epoch makes the
    first pass shorter."""
    return self.repeat or not self.stream.training or self.start()[1] == 0

  def num_batches(self) -> Optional[int]:
    """Per-replica batches this pipeline yields on its first pass (None: forever)."""
    if self.repeat:
      return None
    g, used = self.sharing.global_batch, self.stream.used
    _, k0 = self.start()
    full = used // g - min(k0, used // g)
    n = full * len(self.sharing.local_replicas)
    if used % g and k0 <= used // g:
      n += len(self.sharing.slices(used % g))
    return n

  def batches(self):
    """(epoch, record numbers) of each per-replica batch of this pipeline."""
    epoch, k = self.start()
    g = self.sharing.global_batch
    while True:
      cache = {}
      for step in range(k, self.steps_per_epoch):
        first = step * g
        size = min(g, self.stream.used - first)
        ids = self.stream.flat_ids(epoch * self.stream.used + first, size, cache)
        for a, b in self.sharing.slices(size):
          yield epoch, ids[a:b]
      if not self.repeat:
        return
      epoch, k = epoch + 1, 0


def mixture_weights(weights: Sequence[float], n: int) -> Tuple[int, ...]:
  """Cumulative weights as exact integers out of WEIGHT_SCALE (n + 1 values).

  >>> mixture_weights([0.7, 0.3], 2)
  (0, 11744051, 16777216)
  """
  w = [float(x) for x in weights]
  if len(w) != n or any(not np.isfinite(x) or x < 0 for x in w) or sum(w) <= 0:
    raise UserError(f"weights={list(weights)!r}: must be {n} non-negative numbers, not all 0 "
                    "(one per dataset)")
  total = sum(w)
  cum = np.cumsum([0.0] + w) / total
  out = [int(round(c * WEIGHT_SCALE)) for c in cum]
  out[-1] = WEIGHT_SCALE
  return tuple(out)


@dataclasses.dataclass(frozen=True)
class Mixture:
  """Several datasets' streams mixed by steps (see the module doc). Every
  stream repeats its epochs (`used` = all its records); the mixture is
  infinite."""
  streams: Tuple[Stream, ...]
  cumulative: Tuple[int, ...]
  sharing: Sharing
  seed: int
  start_step: int = 0

  def before(self, d: int, step: int) -> int:
    """Records of dataset d in the global batches before `step`."""
    g = self.sharing.global_batch
    c = self.cumulative
    return (step * g * c[d + 1]) // WEIGHT_SCALE - (step * g * c[d]) // WEIGHT_SCALE

  def counts(self, step: int) -> List[int]:
    """Records of each dataset in global batch `step` (they sum to G)."""
    return [self.before(d, step + 1) - self.before(d, step) for d in range(len(self.streams))]

  def proportions(self, steps: int, start: int = 0) -> List[float]:
    """The share of each dataset's records over global batches [start, start + steps)."""
    g = self.sharing.global_batch
    return [(self.before(d, start + steps) - self.before(d, start)) / (steps * g)
            for d in range(len(self.streams))]

  def choices(self, step: int) -> np.ndarray:
    """The dataset of each slot of global batch `step`: `counts(step)` of
    each, in a seeded order (so every replica gets a mix)."""
    counts = self.counts(step)
    which = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    ops = NumpyOps
    parts = (*seed_parts(self.seed), MIX, step)
    return which[permutation(ops, len(which), *(ops.int64(v) for v in parts))]

  def global_ids(self, step: int, caches: List[dict]) -> Tuple[np.ndarray, np.ndarray]:
    """(dataset number, record number) of each record of global batch `step`."""
    which = self.choices(step)
    ids = np.zeros(len(which), np.int64)
    for d, n in enumerate(self.counts(step)):
      ids[which == d] = self.streams[d].flat_ids(self.before(d, step), n, caches[d])
    return which, ids

  def batches(self):
    """(step, dataset numbers, record numbers) of each per-replica batch."""
    caches = [{} for _ in self.streams]
    step = self.start_step
    while True:
      which, ids = self.global_ids(step, caches)
      for a, b in self.sharing.slices(self.sharing.global_batch):
        yield step, which[a:b], ids[a:b]
      step += 1
