"""Pairs of token-id sequences -> serialized, framed TFRecord bytes (no TF).

Sharding: the records of a split are cut into `num_shards` contiguous ranges,
shard i holding records [i*n//N, (i+1)*n//N) in input order, so reading the
shards in name order gives the pairs in input order.
"""

from typing import List, Sequence, Tuple

import numpy as np

from textrecords.wire import example_encoder
from textrecords.files import tfrecord

from mt_data import schema

_ENCODER = example_encoder.ExampleEncoder(schema.SCHEMA)


def encode_pair(source_ids: Sequence[int], target_ids: Sequence[int]) -> bytes:
  """The serialized tf.train.Example of one pair.

  >>> rec = encode_pair([4, 3], [5, 6, 3])
  >>> from textrecords.wire import example_decoder
  >>> example_decoder.decode_example(rec)
  {'source_ids': [4, 3], 'target_ids': [5, 6, 3]}
  """
  return _ENCODER.encode_features({
      schema.SOURCE_IDS.name: example_encoder.encode_feature(schema.SOURCE_IDS.dtype, source_ids),
      schema.TARGET_IDS.name: example_encoder.encode_feature(schema.TARGET_IDS.dtype, target_ids),
  })


def encode_pairs(source: Tuple[np.ndarray, np.ndarray],
                 target: Tuple[np.ndarray, np.ndarray]) -> List[bytes]:
  """`encode_pair` of many pairs at once (numpy), each side given as (its
  sentences' ids concatenated, each sentence's length).

  >>> side = lambda *s: (np.array([i for x in s for i in x]), np.array([len(x) for x in s]))
  >>> encode_pairs(side([4, 3], [300, 3]), side([5, 6, 3], [7, 3])) == [
  ...     encode_pair([4, 3], [5, 6, 3]), encode_pair([300, 3], [7, 3])]
  True
  """
  if not len(source[1]):
    return []
  data, starts = example_encoder.encode_int64_records(
      [(schema.SOURCE_IDS.name, *source), (schema.TARGET_IDS.name, *target)], with_starts=True)
  ends = starts.tolist()[1:] + [len(data)]
  # each framed record: 8-byte length, 4-byte CRC, the Example, 4-byte CRC
  return [data[s + 12:e - 4] for s, e in zip(starts.tolist(), ends)]


def framed_block(sources: Sequence[Sequence[int]], targets: Sequence[Sequence[int]],
                 start: int, stop: int) -> bytes:
  """TFRecord-framed records for pairs[start:stop], concatenated."""
  frame = tfrecord.frame
  return b"".join(frame(encode_pair(sources[i], targets[i])) for i in range(start, stop))


class IdSequences:
  """Token-id sequences held as one flat int32 array and offsets (no lists).

  >>> seqs = IdSequences(np.array([4, 3, 5, 6, 3], np.int32), np.array([2, 3]))
  >>> len(seqs), seqs.rows(0, 2), seqs.lengths.tolist()
  (2, [[4, 3], [5, 6, 3]], [2, 3])
  """

  def __init__(self, flat: np.ndarray, lengths: np.ndarray):
    self.flat = flat
    self.offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=self.offsets[1:])

  def __len__(self) -> int:
    return len(self.offsets) - 1

  @property
  def lengths(self) -> np.ndarray:
    return np.diff(self.offsets)

  def rows(self, start: int, stop: int) -> List[List[int]]:
    """Sequences start..stop-1 as lists."""
    off = self.offsets[start:stop + 1].tolist()
    flat = self.flat[off[0]:off[-1]].tolist()
    base = off[0]
    return [flat[a - base:b - base] for a, b in zip(off[:-1], off[1:])]


def shard_ranges(n: int, num_shards: int) -> List[Tuple[int, int]]:
  """Contiguous [start, stop) ranges of n records over num_shards shards.

  >>> shard_ranges(10, 3)
  [(0, 3), (3, 6), (6, 10)]
  """
  return [(i * n // num_shards, (i + 1) * n // num_shards) for i in range(num_shards)]


def blocks(start: int, stop: int, block: int) -> List[Tuple[int, int]]:
  """[start, stop) cut into pieces of at most `block` records (at least one piece).

  >>> blocks(0, 5, 2)
  [(0, 2), (2, 4), (4, 5)]
  >>> blocks(3, 3, 2)
  [(3, 3)]
  """
  if stop <= start:
    return [(start, start)]
  return [(s, min(s + block, stop)) for s in range(start, stop, block)]
