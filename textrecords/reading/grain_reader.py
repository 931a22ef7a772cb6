"""Decoded batches through grain (needs `textrecords[grain]`), without TensorFlow.

`GrainSource`: a grain `RandomAccessDataSource` of records;
`grain_dataset(...)` / `grain_loader(...)`: a `MapDataset` and a
`DataLoader` whose elements are whole batches (`BatchPlan`: seeded global
shuffle, sharding, epochs, the batches of `numpy_reader.numpy_batches`),
each read and decoded by one map. A loader with workers receives its
batches packed in groups (`pack_tree`) and gives them back one by one.
"""

import pickle
import struct
from typing import Callable, Optional, Tuple

import numpy as np
from absl import flags

from textrecords.errors import UserError
from textrecords.reading.record_source import RecordSource
from textrecords.reading.numpy_reader import check_batch_size, epoch_order


def _require_grain():
  try:
    import grain  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise ImportError("grain is not installed: pip install 'textrecords[grain]'") from e
  return grain


class GrainSource:
  """A grain `RandomAccessDataSource` of serialized records (picklable).

  `source[i]` is record i's bytes (CRC-checked); grain's samplers and
  `MapDataset.source` take it as is.
  """

  def __init__(self, records: RecordSource):
    self.records = records

  def __len__(self) -> int:
    return len(self.records)

  def __getitem__(self, i):
    return self.records[i]

  def __repr__(self) -> str:
    return f"GrainSource({self.records!r})"


class BatchPlan:
  """The record numbers of each batch, epoch after epoch: a picklable
  random-access list (`plan[k]`: (training epoch or None, batch k's record
  numbers)), the
  element grain's samplers and workers hand out, so grain handles one
  element per batch, not per record.

  Epoch e's order is `epoch_order(...)` (a seeded global permutation per
  epoch when training; this shard's every `num_shards`-th record), batched
  `batch_size` at a time: the batches of `numpy_batches` with the same
  arguments. `num_epochs=None`: 2**31 epochs, read lazily.
  """

  def __init__(self, n: int, batch_size: int, *, training: bool, seed: Optional[int],
               drop_remainder: bool, shard_index: int = 0, num_shards: int = 1,
               num_epochs: Optional[int] = 1):
    if num_epochs is not None and (isinstance(num_epochs, bool) or num_epochs < 1):
      raise UserError(f"num_epochs={num_epochs!r}: must be an integer >= 1 or None")
    epoch_order(0, training=False, seed=None, shard_index=shard_index, num_shards=num_shards)
    self.n, self.batch_size, self.training, self.seed = n, batch_size, training, seed
    self.drop_remainder, self.shard_index, self.num_shards = drop_remainder, shard_index, num_shards
    rows = len(range(shard_index, n, num_shards))
    self.per_epoch = rows // batch_size if drop_remainder else -(-rows // batch_size)
    self.epochs = (1 << 31) if num_epochs is None else int(num_epochs)
    self._cached = (None, None)

  def __len__(self) -> int:
    return self.per_epoch * self.epochs

  def order(self, epoch: int) -> np.ndarray:
    """This shard's record numbers of one epoch, in reading order."""
    if self._cached[0] != epoch:
      self._cached = (epoch, epoch_order(self.n, training=self.training, seed=self.seed,
                                         epoch=epoch, shard_index=self.shard_index,
                                         num_shards=self.num_shards))
    return self._cached[1]

  def __getitem__(self, k) -> Tuple[Optional[int], np.ndarray]:
    """(training epoch or None, the record numbers of batch k)."""
    k = int(k)
    if not 0 <= k < len(self):
      raise IndexError(f"batch {k} out of range ({len(self)} batches)")
    epoch, j = divmod(k, self.per_epoch)
    rows = self.order(epoch)[j * self.batch_size:(j + 1) * self.batch_size]
    return (epoch if self.training else None), rows

  def __getstate__(self):
    return {**self.__dict__, "_cached": (None, None)}

  def __repr__(self) -> str:
    return (f"BatchPlan({self.n} records, batch {self.batch_size}, training={self.training}, "
            f"shard {self.shard_index}/{self.num_shards}, {self.per_epoch} batches per epoch)")


class ReadDecode:
  """A `BatchPlan` element (epoch, record numbers) -> the decoded batch, the records read together
  (`RecordSource.read_batch`: one read per run of neighbouring records) and
  decoded together; grain's map over `BatchPlan` elements (picklable)."""

  def __init__(self, records: RecordSource, decode: Callable):
    self.records, self.decode = records, decode

  def __call__(self, planned):
    epoch, indices = planned
    return self.decode(self.records.read_batch(indices, epoch))

  def map(self, planned):  # grain.transforms.Map's method
    return self(planned)


class GroupedPlan:
  """`group` consecutive batches of a `BatchPlan` per element (the last
  element may hold fewer): what grain's worker processes hand over at once."""

  def __init__(self, plan: BatchPlan, group: int):
    self.plan, self.group = plan, group

  def __len__(self) -> int:
    return -(-len(self.plan) // self.group)

  def __getitem__(self, k):
    k = int(k)
    return [self.plan[j] for j in range(k * self.group,
                                        min(len(self.plan), (k + 1) * self.group))]

  def __repr__(self) -> str:
    return f"GroupedPlan({self.plan!r}, group={self.group})"


class ReadDecodePacked(ReadDecode):
  """`ReadDecode` over a `GroupedPlan` element in a grain worker: its
  batches leave as one uint8 array (`pack_tree`). grain moves each array
  through its own shared-memory block and each element through queues,
  which cost the main process as much as decoding and, on a busy machine,
  milliseconds of latency per element; `_Unpacking` splits them again."""

  def __call__(self, group):
    return pack_tree([super(ReadDecodePacked, self).__call__(planned) for planned in group])


def pack_tree(tree) -> np.ndarray:
  """A tree of numpy arrays (dicts, tuples, lists) as one uint8 array:
  uint64 length of a pickled (structure, dtypes, shapes, offsets), that
  pickle, then each array's bytes (8-aligned).

  >>> t = unpack_tree(pack_tree(({"a": np.arange(3)}, np.ones((2, 2), np.float32))))
  >>> t[0]["a"].tolist(), t[1].shape, t[1].dtype.name
  ([0, 1, 2], (2, 2), 'float32')
  """
  leaves = []

  def spec(node):
    if isinstance(node, dict):
      return ("dict", [(k, spec(v)) for k, v in node.items()])
    if isinstance(node, (tuple, list)):
      return (type(node).__name__, [spec(v) for v in node])
    arr = np.ascontiguousarray(node)
    leaves.append(arr)
    return ("leaf", len(leaves) - 1)

  structure = spec(tree)
  offsets, at = [], 0
  for arr in leaves:
    offsets.append(at)
    at += -(-arr.nbytes // 8) * 8
  meta = pickle.dumps((structure, [(a.dtype.str, a.shape) for a in leaves], offsets))
  head = 8 + -(-len(meta) // 8) * 8
  out = np.zeros(head + at, np.uint8)
  out[:8] = np.frombuffer(struct.pack("<Q", len(meta)), np.uint8)
  out[8:8 + len(meta)] = np.frombuffer(meta, np.uint8)
  for arr, off in zip(leaves, offsets):
    out[head + off:head + off + arr.nbytes] = arr.reshape(-1).view(np.uint8)
  return out


def unpack_tree(packed: np.ndarray):
  """The tree `pack_tree` packed, its arrays views into `packed`."""
  (n,) = struct.unpack("<Q", packed[:8].tobytes())
  structure, kinds, offsets = pickle.loads(packed[8:8 + n].tobytes())
  head = 8 + -(-n // 8) * 8

  def build(node):
    kind, body = node
    if kind == "dict":
      return {k: build(v) for k, v in body}
    if kind in ("tuple", "list"):
      items = [build(v) for v in body]
      return tuple(items) if kind == "tuple" else items
    dtype, shape = kinds[body]
    dtype = np.dtype(dtype)
    start = head + offsets[body]
    count = int(np.prod(shape, dtype=np.int64))
    return packed[start:start + count * dtype.itemsize].view(dtype).reshape(shape)

  return build(structure)


class _Unpacking:
  """A grain DataLoader whose workers send packed groups of batches:
  iterating gives the batches one by one; anything else is the DataLoader's."""

  def __init__(self, loader):
    self.loader = loader

  def __iter__(self):
    return _UnpackingIterator(iter(self.loader))

  def __getattr__(self, name):
    return getattr(self.loader, name)


class _UnpackingIterator:
  """grain's iterator, its groups unpacked into batches. `get_state()` is
  grain's state before the current group plus the batches taken from it;
  `set_state` resumes there."""

  def __init__(self, it):
    self.it = it
    self._state = it.get_state()  # before the pending group
    self._pending, self._taken = [], 0

  def __iter__(self):
    return self

  def __next__(self):
    if self._taken == len(self._pending):
      self._state = self.it.get_state()
      self._pending, self._taken = unpack_tree(next(self.it)), 0
    self._taken += 1
    return self._pending[self._taken - 1]

  def get_state(self):
    return {"grain": self._state, "taken": self._taken}

  def set_state(self, state):
    self.it.set_state(state["grain"])
    self._state, self._pending, self._taken = state["grain"], [], 0
    for _ in range(state["taken"]):
      next(self)

  def __getattr__(self, name):
    return getattr(self.it, name)


def _plan(source: GrainSource, batch_size: int, training: bool, seed: Optional[int],
          drop_remainder: Optional[bool], shard_index: int, num_shards: int,
          num_epochs: Optional[int]) -> BatchPlan:
  batch_size = check_batch_size(batch_size)
  if training and seed is None:
    raise UserError("grain needs a seed for its global shuffle: pass seed=...")
  drop = training if drop_remainder is None else drop_remainder
  return BatchPlan(len(source), batch_size, training=training, seed=seed, drop_remainder=drop,
                   shard_index=shard_index, num_shards=num_shards, num_epochs=num_epochs)


def grain_dataset(source: GrainSource, decode: Callable, batch_size: int, *,
                  training: bool = False, seed: Optional[int] = None,
                  drop_remainder: Optional[bool] = None, shard_index: int = 0,
                  num_shards: int = 1, num_epochs: Optional[int] = 1):
  """A `grain.MapDataset` of decoded `(x, y, sample_weight)` batches: element
  k is batch k of a `BatchPlan` (the batches of `numpy_batches` with the
  same arguments), read and decoded by a batch-level map.

  Training: a seeded global shuffle (a new order each epoch), the last
  partial batch dropped by default. Sharding takes every `num_shards`-th
  record (after the shuffle).
  """
  grain = _require_grain()
  plan = _plan(source, batch_size, training, seed, drop_remainder, shard_index, num_shards,
               num_epochs)
  return grain.MapDataset.source(plan).map(ReadDecode(source.records, decode))


TRANSFER_BATCHES = 8  # batches a grain worker hands over at once


def grain_loader(source: GrainSource, decode: Callable, batch_size: int, *,
                 training: bool = False, seed: Optional[int] = None,
                 drop_remainder: Optional[bool] = None, shard_index: int = 0,
                 num_shards: int = 1, num_epochs: Optional[int] = 1, worker_count: int = 0):
  """A `grain.DataLoader` (checkpointable, multi-process) of decoded batches,
  the same as `grain_dataset`'s: its elements are `BatchPlan` batches, each
  read and decoded by one map. With workers, each worker handles
  `TRANSFER_BATCHES` batches at a time and sends them packed in one array;
  the returned loader's iterator gives them one by one (its `get_state` /
  `set_state` count batches within a group)."""
  grain = _require_grain()
  plan = _plan(source, batch_size, training, seed, drop_remainder, shard_index, num_shards,
               num_epochs)
  packed = bool(worker_count)
  if packed:
    plan = GroupedPlan(plan, TRANSFER_BATCHES)
  sampler = grain.samplers.IndexSampler(len(plan), shuffle=False, num_epochs=1)
  ops = [_grain_map(grain, ReadDecodePacked if packed else ReadDecode)(source.records, decode)]
  if worker_count and not flags.FLAGS.is_parsed():
    # grain's worker processes read absl flags (defaults are fine): a program
    # not started by absl.app.run has not parsed them.
    flags.FLAGS.mark_as_parsed()
  # grain's default read-ahead (16 threads, 500 elements) polls its whole
  # buffer for every element; one thread, a few batches ahead, suffices here.
  read = grain.ReadOptions(num_threads=1, prefetch_buffer_size=4)
  loader = grain.DataLoader(data_source=plan, sampler=sampler, operations=ops,
                            worker_count=worker_count, read_options=read)
  return _Unpacking(loader) if packed else loader


def _grain_map(grain, cls=ReadDecode):
  """`cls` (a ReadDecode), registered as a (virtual) `grain.transforms.Map`."""
  if not issubclass(cls, grain.transforms.Map):
    grain.transforms.Map.register(cls)
  return cls
