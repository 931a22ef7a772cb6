"""A package's checked dataset, ready for any TF-free reader.

`Opened` holds a package's record files, compression and batch decoder and
hands them to the numpy, grain or torch reader; `package_readers` makes a
package's `grain_source`, `grain_dataset` and `torch_dataset` from its
`open_dataset`. Nothing here imports TensorFlow.
"""

import inspect
from typing import Callable, Optional

from textrecords.errors import UserError
from textrecords.reading.record_source import RecordSource, open_source
from textrecords.reading.numpy_reader import (BatchDecoder, numpy_batches, record_batches,
                                              sequential_batches)
from textrecords.reading.grain_reader import GrainSource, grain_dataset, grain_loader
from textrecords.reading.torch_reader import torch_iterable_dataset, torch_map_dataset


class Opened:
  """A package's checked dataset, ready to read: its record files, compression
  and batch decoder, and how to open them (verify, skip_corrupt, index, log)."""

  def __init__(self, entries, compression: str, decoder: BatchDecoder, *,
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
