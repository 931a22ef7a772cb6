"""PyTorch datasets of a package's records (needs `textrecords[torch]`).

`torch_map_dataset`: a map-style `Dataset` of serialized records with the
package's decoder as `collate_fn`; `torch_iterable_dataset`: an
`IterableDataset` of decoded batches (the order of
`numpy_reader.epoch_order`), sharded over DataLoader workers and hosts.
"""

from typing import Callable, Optional

import numpy as np

from textrecords.reading.record_source import RecordSource
from textrecords.reading.numpy_reader import check_batch_size, epoch_order


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
