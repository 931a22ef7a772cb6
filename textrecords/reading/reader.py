"""TensorFlow-free reading: random-access records -> numpy, grain and PyTorch.

A `RecordSource` is a random-access view of the records of one or many
uncompressed TFRecord files, through their offset indexes
(`textrecords.datasets.index`): `len(source)`, `source[i]` (serialized bytes, both
CRCs checked; a corrupt record raises naming its file and record index, or
is skipped with `skip_corrupt`); `source.read_batch(indices)` reads a batch
at once (one read per run of neighbouring records) into a `RecordBatch`. It
is picklable (file handles are reopened in each process), so grain and
PyTorch workers can share it.

Each package adds a batch decoder generated from its schema (a picklable
callable: a `RecordBatch` or list of serialized records -> `(x, y,
sample_weight)` numpy arrays, equal to its `make_dataset` batches); the
helpers here assemble them into:
  - `numpy_batches(...)`: an iterator of batches (eval order or a seeded
    global shuffle), also over GZIP files (sequentially, eval order only);
  - `GrainSource`: a grain `RandomAccessDataSource` of records;
    `grain_dataset(...)` / `grain_loader(...)`: a `MapDataset` and a
    `DataLoader` whose elements are whole batches (`BatchPlan`: seeded global
    shuffle, sharding, epochs), each read and decoded by one map (needs
    `textrecords[grain]`);
  - `torch_dataset(...)`: a `torch.utils.data.Dataset` of records with the
    decoder as `collate_fn`, or an `IterableDataset` of batches sharded over
    DataLoader workers (needs `textrecords[torch]`).
Nothing here imports TensorFlow.
"""

import inspect
import os
import pickle
import struct
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
from absl import flags

from textrecords.reading import locations as dataset_files
from textrecords.wire import example_decoder
from textrecords.datasets import index as index_lib
from textrecords.datasets import layout as L
from textrecords.datasets import metadata
from textrecords import seeding
from textrecords.files import storage
from textrecords.files import tfrecord
from textrecords.errors import UserError

INDEX_MODES = ("build", "require")


class RecordSource:
  """Random access to the records of uncompressed TFRecord files.

  Args:
    files: [(path, offsets)] with offsets as from `textrecords.datasets.index`
      (records + 1 values, the last being the file size).
    skip_corrupt: a record failing its CRC gives None (logged once per
      record) instead of raising.
    log: where skipped records are reported.
  """

  def __init__(self, files: Sequence[Tuple[str, np.ndarray]], *, skip_corrupt: bool = False,
               log: Callable = print):
    self.paths = [p for p, _ in files]
    offsets = [np.asarray(o, np.int64) for _, o in files]
    counts = [len(o) - 1 for o in offsets]
    self._starts = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    # All files' offsets in one array: file f's start at _flat[_base[f]].
    self._flat = np.concatenate(offsets) if offsets else np.zeros(0, np.int64)
    self._base = np.concatenate(([0], np.cumsum([len(o) for o in offsets])))[:-1].astype(
        np.int64)
    self._offsets = [self._flat[b:b + len(o)] for b, o in zip(self._base, offsets)]
    self.skip_corrupt = skip_corrupt
    self.log = log
    self._fds = {}

  def __len__(self) -> int:
    return int(self._starts[-1])

  def __repr__(self) -> str:
    first = self.paths[0] if self.paths else "-"
    return (f"RecordSource({len(self)} records in {len(self.paths)} files, first {first!r}, "
            f"skip_corrupt={self.skip_corrupt})")

  def __getstate__(self):
    state = dict(self.__dict__)
    state["_fds"] = {}
    if state.get("log") is print:
      state["log"] = None
    return state

  def __setstate__(self, state):
    self.__dict__.update(state)
    if self.log is None:
      self.log = print

  def __del__(self):
    for fd in getattr(self, "_fds", {}).values():
      try:
        if isinstance(fd, int):
          os.close(fd)
        else:
          fd.close()
      except Exception:  # pylint: disable=broad-except  (also at interpreter exit)
        pass

  def _fd(self, f: int):
    """This process's open file `f`: an fd, or a file object for a URL."""
    key = (os.getpid(), f)
    fd = self._fds.get(key)
    if fd is None:
      if storage.is_url(self.paths[f]):
        fd = storage.open_read(self.paths[f])
      else:
        try:
          fd = os.open(storage.local_path(self.paths[f]), os.O_RDONLY)
        except OSError as e:
          raise UserError(f"cannot read {self.paths[f]}: {e.strerror}") from e
      self._fds[key] = fd
    return fd

  def _read(self, f: int, start: int, n: int) -> bytes:
    fd = self._fd(f)
    if isinstance(fd, int):
      return os.pread(fd, n, start)
    fd.seek(start)
    return fd.read(n)

  def locate(self, i: int) -> Tuple[int, int]:
    """(file number, record number in that file) of global record `i`."""
    n = len(self)
    if not -n <= i < n:
      raise IndexError(f"record {i} out of range ({n} records)")
    i = int(i) % n
    f = int(np.searchsorted(self._starts, i, side="right")) - 1
    return f, i - int(self._starts[f])

  def __getitem__(self, i: int) -> Optional[bytes]:
    f, j = self.locate(i)
    start, stop = int(self._offsets[f][j]), int(self._offsets[f][j + 1])
    try:
      raw = self._read(f, start, stop - start)
    except OSError as e:
      raise UserError(f"cannot read {self.paths[f]}: {e.strerror}") from e
    problem = _check_framed(raw, stop - start)
    if problem is None:
      return raw[12:-4]
    msg = f"{self.paths[f]}: corrupt record {j} ({problem})"
    if not self.skip_corrupt:
      raise UserError(msg)
    self.log(f"skipping {msg}")
    return None

  def read(self, indices) -> List[bytes]:
    """The records at `indices`, corrupt ones left out when skip_corrupt."""
    out = []
    for i in indices:
      r = self[int(i)]
      if r is not None:
        out.append(r)
    return out

  def read_batch(self, indices, epoch: Optional[int] = None) -> example_decoder.RecordBatch:
    """The records at `indices` as one `RecordBatch` (of training epoch
    `epoch`, None in evaluation order): records next to each other in a file
    are read with one `pread` (a batch in file order: one read), the framing
    of all checked at once, both CRCs of each. Corrupt records raise, or are
    left out with skip_corrupt (as `read`)."""
    idx = np.asarray(indices, np.int64).reshape(-1)
    n = len(self)
    if idx.size and (idx.min() < -n or idx.max() >= n):
      bad = idx[(idx < -n) | (idx >= n)][0]
      raise IndexError(f"record {bad} out of range ({n} records)")
    if idx.size == 0:
      return example_decoder.RecordBatch(b"", idx, idx, epoch)
    idx = idx % n
    f = np.searchsorted(self._starts, idx, side="right") - 1
    at = self._base[f] + idx - self._starts[f]
    begin, end = self._flat[at], self._flat[at + 1]
    new_run = np.ones(idx.shape, bool)
    new_run[1:] = (f[1:] != f[:-1]) | (begin[1:] != end[:-1])
    first = np.flatnonzero(new_run)
    last = np.append(first[1:], idx.size) - 1
    chunks = []
    fi = int(f[0])
    try:
      files = f[first].tolist()
      fds = {k: self._fd(k) for k in set(files)}
      pread = os.pread
      for a, b, fi in zip(begin[first].tolist(), end[last].tolist(), files):
        fd = fds[fi]  # an fd, or a file object for a URL
        chunks.append(pread(fd, b - a, a) if isinstance(fd, int) else self._read(fi, a, b - a))
    except OSError as e:
      raise UserError(f"cannot read {self.paths[fi]}: {e.strerror}") from e
    data = b"".join(chunks) if len(chunks) > 1 else chunks[0]
    size = end - begin
    run_at = np.cumsum(size) - size  # each record's frame in `data`
    if len(data) != int(size.sum()) or not _frames_ok(data, run_at, size):
      # A short file or a bad record: record by record, for the exact
      # error (or the records skip_corrupt leaves).
      return example_decoder.RecordBatch.from_records(self.read(idx), epoch)
    return example_decoder.RecordBatch(data, run_at + 12, run_at + size - 4, epoch)


def _frames_ok(data: bytes, at: np.ndarray, size: np.ndarray) -> bool:
  """Whether every frame data[at[i]:at[i] + size[i]] is intact: its length
  field says size - 16, both CRCs match."""
  buf = np.frombuffer(data, np.uint8)
  head = buf[at[:, None] + np.arange(12)]
  length = head[:, :8].copy().view("<u8")[:, 0]
  if np.any(length != (size - 16).astype(np.uint64)):
    return False
  want_head = head[:, 8:].copy().view("<u4")[:, 0]
  want_data = buf[(at + size - 4)[:, None] + np.arange(4)].view("<u4")[:, 0]
  crc, n = tfrecord.crc32c, len(at)
  starts, stops = at.tolist(), (at + size - 4).tolist()
  got_head = np.fromiter((crc(data[a:a + 8]) for a in starts), np.uint64, n)
  got_data = np.fromiter((crc(data[a + 12:b]) for a, b in zip(starts, stops)), np.uint64, n)
  return bool((tfrecord.mask_crc(got_head) == want_head).all() and
              (tfrecord.mask_crc(got_data) == want_data).all())


def _check_framed(raw: bytes, size: int) -> Optional[str]:
  """Why a framed record is bad, or None."""
  if len(raw) != size:
    return "file shorter than its index says"
  (length,) = struct.unpack_from("<Q", raw)
  if tfrecord.masked_crc(raw[:8]) != struct.unpack_from("<I", raw, 8)[0]:
    return "length checksum mismatch"
  if length != size - 16:
    return "length differs from the index: stale index"
  if tfrecord.masked_crc(raw[12:-4]) != struct.unpack_from("<I", raw, size - 4)[0]:
    return "data checksum mismatch"
  return None


# ----------------------------------------------------------------- opening files

def _offsets_for(rec: dataset_files.RecordFile, verify: str, index_mode: str,
                 log) -> np.ndarray:
  """The checked offsets of one record file: from its index, or rebuilt."""
  meta, lay = rec.found.meta, rec.found.layout
  idx_name = L.index_name(rec.name)
  idx_path = index_lib.index_path(rec.path)
  infos = metadata.file_infos(meta) if meta is not None else {}
  info = infos.get(rec.name)
  problem = None
  if not L.exists(idx_path):
    problem = f"{idx_path} is missing"
  else:
    try:
      if idx_name in infos:  # listed: its own size/sha256 are checked too
        metadata.verified_files(meta, lay, [idx_name], verify, companions=False)
      idx = index_lib.load(idx_path)
      size = info["bytes"] if info else storage.size(rec.path)
      if idx.header["bytes"] != size:
        problem = (f"{idx_path} is stale: made for {idx.header['bytes']} bytes, "
                   f"{rec.name} has {size}")
      elif info and idx.header["sha256"] != info["sha256"]:
        problem = f"{idx_path} is stale: made for another {rec.name} (sha256)"
      elif not info and verify == "checksum" and (
          tfrecord.file_sha256(rec.path) != idx.header["sha256"]):
        problem = f"{idx_path} is stale: {rec.name}'s sha256 differs"
      elif info and len(idx) != info.get("records", len(idx)):
        problem = f"{idx_path}: {len(idx)} records, the metadata says {info['records']}"
      else:
        return idx.offsets
    except UserError as e:
      problem = str(e)
  if index_mode == "require":
    raise UserError(f"{problem}; rebuild it with python -m textrecords.index {rec.path}")
  log(f"{problem}: scanning {rec.path} for record offsets (python -m textrecords.index "
      f"{rec.path} writes the index)")
  return index_lib.scan(rec.path)


def open_source(entries: Sequence[dataset_files.RecordFile], *, verify: str = "checksum",
                skip_corrupt: bool = False, index: str = "build",
                log=print) -> RecordSource:
  """A RecordSource over checked record files.

  Args:
    entries: record files as `dataset_files.record_files` gives them (their
      size/sha256 already checked against the metadata), or plain files.
    index: "build" (a missing or stale index is rebuilt in memory, with a
      log line) or "require" (refused).
  Raises:
    UserError: GZIP files (sequential only), stale indexes with
      index="require", unreadable files.
  """
  if index not in INDEX_MODES:
    raise UserError(f"index={index!r}: must be one of {', '.join(INDEX_MODES)}")
  files = []
  for rec in entries:
    meta = rec.found.meta
    if (meta is not None and meta.get("compression")) or (
        storage.size(rec.path) and index_lib.is_gzip(rec.path)):
      raise UserError(f"{rec.path}: GZIP-compressed records can only be read sequentially "
                      "(numpy_batches with training=False); write the dataset without "
                      "--compression for random access")
    files.append((rec.path, _offsets_for(rec, verify, index, log)))
  return RecordSource(files, skip_corrupt=skip_corrupt, log=log)


def source_from_paths(paths: Sequence[str], *, verify: str = "size",
                      skip_corrupt: bool = False, index: str = "build",
                      log=print) -> RecordSource:
  """A RecordSource over plain TFRecord files (no metadata), e.g. others' files."""
  entries = []
  for p in paths:
    if not L.exists(p):
      raise UserError(f"{p}: no such file")
    found = dataset_files.Found(p, None, None, [p])
    entries.append(dataset_files.RecordFile(p, L.basename(p), 0, found))
  return open_source(entries, verify=verify, skip_corrupt=skip_corrupt, index=index, log=log)


# ----------------------------------------------------------------- batching

class BatchDecoder:
  """Base of the packages' decoders: records -> `(x, y, sample_weight)`.

  Calling it drops records skipped as corrupt (None) and decodes the rest
  with `decode` (subclasses define it). Instances are picklable.
  """

  package = "textrecords"

  def __call__(self, records):
    if not isinstance(records, example_decoder.RecordBatch):
      records = [r for r in records if r is not None]
    if not len(records):
      raise UserError("a batch with no readable record left (all skipped as corrupt)")
    return self.checked(self.decode, records)

  def checked(self, fn: Callable, records):
    """fn(records), a DecodeError turned into a one-line UserError."""
    try:
      return fn(records)
    except example_decoder.DecodeError as e:
      raise UserError(f"not {self.package} records ({e}); read them with the package "
                      "that wrote them") from e

  def decode(self, records: List[bytes]):
    raise NotImplementedError


def epoch_order(n: int, *, training: bool, seed: Optional[int], epoch: int = 0,
                shard_index: int = 0, num_shards: int = 1) -> np.ndarray:
  """Record indices of one epoch: in order, or a seeded global permutation
  (different per epoch), then this shard's every `num_shards`-th."""
  if not 0 <= shard_index < num_shards:
    raise UserError(f"shard_index={shard_index}: must be in [0, {num_shards})")
  order = np.arange(n, dtype=np.int64)
  if training:
    rng = (np.random.default_rng() if seed is None
           else np.random.default_rng(seeding.derive_seed(int(seed), "reader", epoch)))
    order = rng.permutation(n)
  return order[shard_index::num_shards]


def check_batch_size(batch_size) -> int:
  if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or (
      batch_size < 1):
    raise UserError(f"batch_size={batch_size!r}: must be an integer >= 1")
  return int(batch_size)


def record_batches(source, batch_size: int, *, training: bool, seed: Optional[int],
                   drop_remainder: bool, shard_index: int = 0, num_shards: int = 1,
                   epochs: Optional[int] = 1) -> Iterator[List[bytes]]:
  """Lists of serialized records, `batch_size` at a time (corrupt ones skipped
  when the source skips them), for `epochs` epochs (None: forever)."""
  epoch = 0
  while epochs is None or epoch < epochs:
    order = epoch_order(len(source), training=training, seed=seed, epoch=epoch,
                        shard_index=shard_index, num_shards=num_shards)
    stop = len(order) - len(order) % batch_size if drop_remainder else len(order)
    for start in range(0, stop, batch_size):
      recs = source.read_batch(order[start:start + batch_size], epoch if training else None)
      if len(recs):
        yield recs
    epoch += 1


def numpy_batches(entries, compression: str, decode: Callable, batch_size: int, *,
                  training: bool, seed: Optional[int], drop_remainder: bool,
                  shard_index: int = 0, num_shards: int = 1, verify: str = "checksum",
                  skip_corrupt: bool = False, index: str = "build", log=print):
  """An iterator of decoded batches of one epoch over checked files (see
  `open_source`); bad arguments and files raise here, before iterating.

  GZIP files are read sequentially: eval order only, no sharding.
  """
  batch_size = check_batch_size(batch_size)
  if compression:
    if training or num_shards > 1:
      raise UserError(f"{entries[0].path}: {compression}-compressed records can only be read "
                      "sequentially: training=False and no sharding (write the dataset "
                      "without --compression for shuffled or sharded reading)")
    batches = sequential_batches([e.path for e in entries], compression, batch_size,
                                 drop_remainder=drop_remainder)
  else:
    source = open_source(entries, verify=verify, skip_corrupt=skip_corrupt, index=index,
                         log=log)
    batches = record_batches(source, batch_size, training=training, seed=seed,
                             drop_remainder=drop_remainder, shard_index=shard_index,
                             num_shards=num_shards)
  return (decode(recs) for recs in batches)


def sequential_batches(paths: Sequence[str], compression: str, batch_size: int, *,
                       drop_remainder: bool) -> Iterator[List[bytes]]:
  """Lists of records read file after file (GZIP or not), CRCs checked."""
  batch = []
  for path in paths:
    for rec in tfrecord.read_records(path, compression):
      batch.append(rec)
      if len(batch) == batch_size:
        yield batch
        batch = []
  if batch and not drop_remainder:
    yield batch


class ShardContext:
  """An input context of `num_shards` pipelines with one replica each (the
  TF-free readers' shard_index/num_shards)."""

  def __init__(self, num_shards: int, shard_index: int):
    self.num_input_pipelines = self.num_replicas_in_sync = num_shards
    self.input_pipeline_id = shard_index


def read_options(batch_size, *, split: str, shard_index: int = 0, num_shards: int = 1,
                 options: Optional[dict] = None, **kw):
  """The `ReadOptions` of a package's `numpy_batches`, decided for `split`
  (verify, skip_corrupt and log taken from its reading `options`)."""
  from textrecords.reading.read_options import ReadOptions  # pylint: disable=import-outside-toplevel
  options = options or {}
  if (shard_index, num_shards) != (0, 1):
    if kw.get("input_context") is not None:
      raise UserError("pass input_context or shard_index/num_shards, not both")
    if isinstance(num_shards, bool) or not isinstance(num_shards, (int, np.integer)) or (
        num_shards < 1):
      raise UserError(f"num_shards={num_shards!r}: must be an integer >= 1")
    if not 0 <= shard_index < num_shards:
      raise UserError(f"shard_index={shard_index}: must be in [0, {num_shards})")
    kw["input_context"] = ShardContext(int(num_shards), int(shard_index))
  return ReadOptions(batch_size, verify=options.get("verify", "checksum"),
                     skip_corrupt=options.get("skip_corrupt", False),
                     log=options.get("log", print), **kw).for_split(split)


READ_ARGUMENTS = ("split", "training", "seed", "global_batch_size", "input_context",
                  "start_step", "drop_remainder", "shuffle_buffer", "repeat", "shard_index",
                  "num_shards", "options")


def read_options_from(args: dict):
  """`read_options` from a `numpy_batches`'s arguments (its `locals()`)."""
  return read_options(args["batch_size"], **{k: args[k] for k in READ_ARGUMENTS})


def planned_batches(opened: "Opened", opts) -> Iterator:
  """Decoded batches in the read order of `textrecords.reading.read_order` (the
  batches of `make_dataset` with the same options; `opts`: a
  `read_options.ReadOptions` decided for its split). Errors raise here,
  before iterating."""
  return map(opened.decoder, planned_records(opened, opts))


def planned_records(opened: "Opened", opts) -> Iterator:
  """The undecoded per-replica batches of `planned_batches`.

  GZIP files are read sequentially: evaluation order from step 0, one
  input pipeline.
  """
  plan = opts.plan([e.records for e in opened.entries])
  if opened.compression:
    if opts.training or plan.sharing.pipelines > 1 or opts.start_step:
      raise UserError(f"{opened.entries[0].path}: {opened.compression}-compressed records can "
                      "only be read sequentially: training=False, one input pipeline, "
                      "start_step=0 (write the dataset without --compression for more)")
    return sequential_batches([e.path for e in opened.entries], opened.compression,
                              plan.sharing.per_replica, drop_remainder=plan.drop_remainder)
  source = opened.source()
  opened.decoder.order_seed = plan.stream.seed  # a training order's salts (dynamic masks)
  return _read_plan(source, plan)


def _read_plan(source: RecordSource, plan):
  training = plan.stream.training
  for epoch, ids in plan.batches():
    recs = source.read_batch(ids, epoch if training else None)
    if len(recs):
      yield recs


# ----------------------------------------------------------------- a package's dataset

class Opened:
  """A package's checked dataset, ready to read: its record files, compression
  and batch decoder, and how to open them (verify, skip_corrupt, index, log)."""

  def __init__(self, entries, compression: str, decoder: "BatchDecoder", *,
               verify: str = "checksum", skip_corrupt: bool = False, index: str = "build",
               log=print):
    self.entries, self.compression, self.decoder = entries, compression, decoder
    self.verify, self.skip_corrupt, self.index, self.log = verify, skip_corrupt, index, log

  def source(self) -> RecordSource:
    return open_source(self.entries, verify=self.verify, skip_corrupt=self.skip_corrupt,
                       index=self.index, log=self.log)

  def numpy_batches(self, batch_size: int, *, training: bool = False,
                    seed: Optional[int] = None, drop_remainder: bool = False,
                    shard_index: int = 0, num_shards: int = 1):
    return numpy_batches(self.entries, self.compression, self.decoder, batch_size,
                         training=training, seed=seed, drop_remainder=drop_remainder,
                         shard_index=shard_index, num_shards=num_shards, verify=self.verify,
                         skip_corrupt=self.skip_corrupt, index=self.index, log=self.log)

  def chunks(self, records: int, *, training: bool, seed: Optional[int],
             shard_index: int = 0, num_shards: int = 1):
    """Undecoded records, `records` at a time, in one epoch's order (GZIP:
    sequentially, eval order only), for readers that regroup what they
    decode (w2v's centers, mt's buckets)."""
    if self.compression:
      if training or num_shards > 1:
        raise UserError(f"{self.entries[0].path}: GZIP-compressed records can only be read "
                        "sequentially: training=False and no sharding")
      return sequential_batches([e.path for e in self.entries], self.compression, records,
                                drop_remainder=False)
    return record_batches(self.source(), records, training=training, seed=seed,
                          drop_remainder=False, shard_index=shard_index,
                          num_shards=num_shards)

  def grain(self, batch_size: int, *, loader: bool = False, worker_count: int = 0, **kw):
    """A grain MapDataset (or DataLoader with `loader=True`) of decoded batches."""
    src = GrainSource(self.source())
    if loader:
      return grain_loader(src, self.decoder, batch_size, worker_count=worker_count, **kw)
    return grain_dataset(src, self.decoder, batch_size, **kw)

  def torch(self, batch_size: Optional[int] = None, **kw):
    """A map-style torch Dataset of records (batch_size None) or an
    IterableDataset of decoded batches."""
    if batch_size is None:
      return torch_map_dataset(self.source(), self.decoder)
    return torch_iterable_dataset(self.source(), self.decoder, batch_size, **kw)


def package_readers(open_dataset: Callable[..., Opened]):
  """(grain_source, grain_dataset, torch_dataset) of a package, from its
  `open_dataset(location, **options)` (given the readers' `seed` too when
  it takes one: its decoder's draws depend on it)."""
  takes_seed = "seed" in inspect.signature(open_dataset).parameters

  def opened(location, seed, options):
    return open_dataset(location, **(dict(options, seed=seed) if takes_seed else options))

  def grain_source(location: str, **options) -> GrainSource:
    """A grain RandomAccessDataSource of the serialized records at `location`
    (`options`: those of the package's `open_dataset`)."""
    return GrainSource(open_dataset(location, **options).source())

  def grain_dataset(location: str, batch_size: int, *, training: bool = False,
                    seed: Optional[int] = None, loader: bool = False, worker_count: int = 0,
                    shard_index: int = 0, num_shards: int = 1, num_epochs: Optional[int] = 1,
                    drop_remainder: Optional[bool] = None, **options):
    """Decoded batches through grain: a `MapDataset`, or a `DataLoader` with
    `loader=True` (`worker_count` processes). Training: a seeded global shuffle,
    the last partial batch dropped unless `drop_remainder=False`; sharding
    takes every `num_shards`-th record."""
    return opened(location, seed, options).grain(
        batch_size, loader=loader, worker_count=worker_count, training=training, seed=seed,
        drop_remainder=drop_remainder, shard_index=shard_index, num_shards=num_shards,
        num_epochs=num_epochs)

  def torch_dataset(location: str, batch_size: Optional[int] = None, *,
                    training: bool = False, seed: Optional[int] = None, shard_index: int = 0,
                    num_shards: int = 1, drop_remainder: Optional[bool] = None, **options):
    """PyTorch: without `batch_size`, a map-style Dataset of records (give its
    `collate_fn` to the DataLoader); with it, an IterableDataset of decoded
    batches sharded over DataLoader workers (use `batch_size=None` there)."""
    ds = opened(location, seed, options)
    if batch_size is None:
      return ds.torch()
    return ds.torch(batch_size, training=training, seed=seed,
                        drop_remainder=drop_remainder, shard_index=shard_index,
                        num_shards=num_shards)

  return grain_source, grain_dataset, torch_dataset


# ----------------------------------------------------------------- grain

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


# ----------------------------------------------------------------- PyTorch

def _require_torch():
  try:
    import torch  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise ImportError("PyTorch is not installed: pip install 'textrecords[torch]'") from e
  return torch


def to_torch(batch):
  """numpy arrays (in nested dicts/tuples) -> torch tensors."""
  torch = _require_torch()
  if isinstance(batch, dict):
    return {k: to_torch(v) for k, v in batch.items()}
  if isinstance(batch, (tuple, list)):
    return type(batch)(to_torch(v) for v in batch)
  return torch.from_numpy(np.ascontiguousarray(batch))


class TorchCollate:
  """collate_fn: records -> decoded batch as torch tensors (picklable)."""

  def __init__(self, decode: Callable):
    self.decode = decode

  def __call__(self, records):
    return to_torch(self.decode(records))


def torch_map_dataset(source: RecordSource, decode: Callable):
  """A map-style `torch.utils.data.Dataset` of serialized records.

  Use its `collate_fn` with a DataLoader: `DataLoader(ds, batch_size=32,
  shuffle=True, num_workers=2, collate_fn=ds.collate_fn)`.
  """
  torch = _require_torch()

  class RecordDataset(torch.utils.data.Dataset):
    """Records by index; `collate_fn` decodes a list of them into a batch."""

    def __init__(self):
      self.source = source
      self.collate_fn = TorchCollate(decode)

    def __len__(self):
      return len(self.source)

    def __getitem__(self, i):
      return self.source[i]

    def __repr__(self):
      return f"RecordDataset({self.source!r})"

  return RecordDataset()


def torch_iterable_dataset(source: RecordSource, decode: Callable, batch_size: int, *,
                           training: bool = False, seed: Optional[int] = None,
                           drop_remainder: Optional[bool] = None, shard_index: int = 0,
                           num_shards: int = 1):
  """An `IterableDataset` of decoded batches (torch tensors), sharded over
  DataLoader workers and over `num_shards` hosts; use `batch_size=None` in
  the DataLoader. Each iteration is one epoch; training reshuffles each epoch
  (seeded: epoch e's order depends on (seed, e) only)."""
  torch = _require_torch()
  batch_size = check_batch_size(batch_size)
  drop = training if drop_remainder is None else drop_remainder

  class BatchDataset(torch.utils.data.IterableDataset):
    """Decoded batches; worker w of W takes every W-th batch of this shard."""

    def __init__(self):
      super().__init__()
      self.source = source
      self.epoch = 0

    def set_epoch(self, epoch: int):
      """The epoch whose order the next iteration gives (call it before each
      epoch when the DataLoader has workers: they get a copy of the dataset)."""
      self.epoch = epoch

    def __iter__(self):
      info = torch.utils.data.get_worker_info()
      worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
      epoch = self.epoch
      order = epoch_order(len(self.source), training=training, seed=seed, epoch=epoch,
                          shard_index=shard_index, num_shards=num_shards)
      self.epoch += 1
      stop = len(order) - len(order) % batch_size if drop else len(order)
      starts = range(0, stop, batch_size)
      for start in starts[worker::workers]:
        recs = self.source.read_batch(order[start:start + batch_size],
                                      epoch if training else None)
        if len(recs):
          yield to_torch(decode(recs))

    def __len__(self):
      n = len(range(shard_index, len(self.source), num_shards))
      return n // batch_size if drop else -(-n // batch_size)

    def __repr__(self):
      return f"BatchDataset({self.source!r}, batch_size={batch_size}, training={training})"

  return BatchDataset()
