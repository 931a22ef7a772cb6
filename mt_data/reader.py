"""mt_data records without TensorFlow: numpy batches, grain and PyTorch.

With `num_steps=T` the batches equal `mt_data.make_dataset(..., training=False)`'s
element for element: x = {"source", "decoder_input": int32 (B, T),
"source_valid_len": int32 (B,)}, y = int32 (B, T), sample_weight = float32
(B, T). Reading options as in `bert_data.reader` (`verify`, `skip_corrupt`,
`index`, `log`). Bucketing (`bucket_boundaries`) is tf.data-only.

Example:
  >>> for x, y, w in numpy_batches("out/mt", 64, split="valid"):  # doctest: +SKIP
  ...   x["source"].shape                                          # (64, 9)
"""

from typing import Optional

import numpy as np

from mt_data import dataset
from mt_data import preprocess
from mt_data import schema
from textrecords import example_decoder
from textrecords import reader


def pad_or_trim(values: np.ndarray, lengths: np.ndarray, steps: int) -> np.ndarray:
  """Rows of a flat ragged array, padded with <pad> or cut to `steps` (int32).

  >>> pad_or_trim(np.array([5, 6, 7, 8]), np.array([3, 1]), 2).tolist()
  [[5, 6], [8, 0]]
  """
  out = np.full((len(lengths), steps), preprocess.PAD_ID, np.int32)
  starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
  col = np.arange(steps)
  take = col[None, :] < lengths[:, None]
  src = (starts[:, None] + col[None, :])[take]
  out[take] = values[src]
  return out


class MtDecoder(reader.BatchDecoder):
  """Serialized mt_data records -> `(x, y, sample_weight)` padded to `num_steps`."""

  package = "mt_data"

  def __init__(self, num_steps: int):
    self.num_steps = num_steps
    self._decoder = example_decoder.ExampleDecoder(schema.SCHEMA)

  def decode(self, records):
    cols = self._decoder.decode(records)
    src_col, tgt_col = cols[schema.SOURCE_IDS.name], cols[schema.TARGET_IDS.name]
    src = pad_or_trim(src_col.values, src_col.lengths, self.num_steps)
    label = pad_or_trim(tgt_col.values, tgt_col.lengths, self.num_steps)
    bos = np.full((len(records), 1), preprocess.BOS_ID, np.int32)
    decoder_input = np.concatenate([bos, label], axis=1)[:, :self.num_steps]
    x = {schema.X_SOURCE: src, schema.X_DECODER_INPUT: decoder_input,
         schema.X_SOURCE_VALID_LEN: (src != preprocess.PAD_ID).sum(axis=1, dtype=np.int32)}
    return x, label, (label != preprocess.PAD_ID).astype(np.float32)


def open_dataset(location: str, *, split: str = "train", num_steps: int = 9,
                 verify: str = "checksum", skip_corrupt: bool = False, index: str = "build",
                 log=print) -> reader.Opened:
  """The checked split of the mt_data output folder `location`."""
  dataset._check_args(num_steps, None)  # pylint: disable=protected-access
  meta, entries = dataset.record_files(location, split, verify=verify,
                                       skip_corrupt=skip_corrupt, log=log)
  return reader.Opened(entries, meta.get("compression", ""), MtDecoder(num_steps), verify=verify, skip_corrupt=skip_corrupt,
                       index=index, log=log)


def numpy_batches(location: str, batch_size: int, *, split: str = "train",
                  training: Optional[bool] = None, seed: Optional[int] = None,
                  drop_remainder: bool = False, shard_index: int = 0, num_shards: int = 1,
                  **options):
  """An iterator of one epoch of `(x, y, sample_weight)` numpy batches.

  training: default split == "train" (as `make_dataset`): a seeded global
  shuffle of the pairs. `options`: `num_steps` and the reading options.
  """
  training = split == "train" if training is None else training
  return open_dataset(location, split=split, **options).numpy_batches(
      batch_size, training=training, seed=seed, drop_remainder=drop_remainder,
      shard_index=shard_index, num_shards=num_shards)


grain_source, grain_dataset, torch_dataset = reader.package_readers(open_dataset)
