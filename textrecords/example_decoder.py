"""Batched `tf.train.Example` decoding into numpy arrays, without TensorFlow.

`ExampleDecoder(schema)` turns a list of serialized Examples into one array
per feature: the values of all records concatenated plus each record's
length (fixed-length features come back as a (B, length) matrix). Python
only finds each feature's packed payload in each record; the varints of a
whole batch are then decoded at once in numpy.

Example:
  >>> from textrecords import example_codec, features as F
  >>> schema = (F.FeatureSpec("ids", "int64", None), F.FeatureSpec("w", "float", 1))
  >>> enc = example_codec.ExampleEncoder(schema)
  >>> recs = [enc.encode({"ids": [5, 300], "w": [0.5]}), enc.encode({"ids": [7], "w": [1.0]})]
  >>> out = ExampleDecoder(schema).decode(recs)
  >>> out["ids"].values.tolist(), out["ids"].lengths.tolist(), out["w"].values.tolist()
  ([5, 300, 7], [2, 1], [[0.5], [1.0]])
"""

import dataclasses
from typing import Dict, List, Sequence

import numpy as np

from textrecords import example_codec
from textrecords import features as F

# Feature message field tags: bytes_list = 1, float_list = 2, int64_list = 3.
_LIST_TAG = {F.BYTES: 0x0A, F.FLOAT: 0x12, F.INT64: 0x1A}


class DecodeError(ValueError):
  """A record that is not an Example of the expected schema (message says why)."""


@dataclasses.dataclass
class Column:
  """One feature over a batch: `values` (flat, or (B, length) if fixed) and
  `lengths` (values per record, int64)."""
  values: np.ndarray
  lengths: np.ndarray


def _varint(buf, pos: int):
  b = buf[pos]
  if b < 0x80:
    return b, pos + 1
  result, shift = b & 0x7F, 7
  while True:
    pos += 1
    b = buf[pos]
    result |= (b & 0x7F) << shift
    if b < 0x80:
      return result, pos + 1
    shift += 7


def decode_varints(data: np.ndarray) -> np.ndarray:
  """All varints in `data` (uint8), as int64 (two's complement for negatives).

  >>> decode_varints(np.frombuffer(bytes([5, 0xAC, 0x02]), np.uint8)).tolist()
  [5, 300]
  """
  if data.size == 0:
    return np.zeros(0, np.int64)
  ends = data < 0x80
  if not ends[-1]:
    raise DecodeError("truncated varint")
  if ends.all():
    return data.astype(np.int64)
  starts = np.flatnonzero(np.concatenate(([True], ends[:-1])))
  owner = np.cumsum(ends) - ends
  shift = (np.arange(data.size) - starts[owner]) * 7
  if shift.max() > 63:
    raise DecodeError("varint longer than 10 bytes")
  contrib = (data & 0x7F).astype(np.uint64) << shift.astype(np.uint64)
  return np.add.reduceat(contrib, starts).view(np.int64)


class ExampleDecoder:
  """Decodes batches of serialized Examples of one schema into numpy columns."""

  def __init__(self, schema: Sequence[F.FeatureSpec]):
    self.schema = tuple(schema)
    self._want = {s.name.encode("utf-8"): s for s in self.schema}

  def payloads(self, record: bytes) -> Dict[str, bytes]:
    """Each schema feature's packed payload in one record.

    Raises:
      DecodeError: not an Example, a missing feature or another value type.
    """
    found = {}
    want = self._want
    try:
      end = len(record)
      if end == 0 or record[0] != 0x0A:
        raise DecodeError("not a tf.train.Example")
      n, pos = _varint(record, 1)
      if pos + n != end:
        raise DecodeError("not a tf.train.Example")
      while pos < end:
        if record[pos] != 0x0A:
          raise DecodeError("not a tf.train.Example")
        n = record[pos + 1]
        if n < 0x80:
          pos += 2
        else:
          n, pos = _varint(record, pos + 1)
        entry_start, entry_end = pos, pos + n
        # Fast path: key first (as every encoder writes it), one-byte key length.
        k = record[pos + 1]
        if record[pos] == 0x0A and k < 0x80 and record[pos + 2 + k] == 0x12:
          key = record[pos + 2:pos + 2 + k]
          pos += 3 + k
          n = record[pos]
          if n < 0x80:
            pos += 1
          else:
            n, pos = _varint(record, pos)
          feat = (pos, pos + n)
          if pos + n != entry_end:
            key, feat = self._entry(record, entry_start, entry_end)
        else:
          key, feat = self._entry(record, pos, entry_end)
        spec = want.get(key)
        if spec is not None:
          found[spec.name] = self._payload(record, feat, spec)
        pos = entry_end
    except IndexError as e:
      raise DecodeError("truncated tf.train.Example") from e
    if len(found) != len(want):
      missing = [s.name for s in self.schema if s.name not in found]
      raise DecodeError(f"no feature {missing[0]!r}")
    return found

  @staticmethod
  def _entry(record: bytes, pos: int, entry_end: int):
    """(key, (start, stop) of the Feature) of a map entry in any field order."""
    key = feat = None
    while pos < entry_end:
      tag = record[pos]
      n, pos = _varint(record, pos + 1)
      if tag == 0x0A:
        key = record[pos:pos + n]
      elif tag == 0x12:
        feat = (pos, pos + n)
      pos += n
    return key, feat

  @staticmethod
  def _payload(record: bytes, feat, spec: F.FeatureSpec) -> bytes:
    if feat is None or feat[0] == feat[1]:
      return b""
    start, stop = feat
    if record[start] != _LIST_TAG[spec.dtype]:
      raise DecodeError(f"feature {spec.name!r} is not of type {spec.dtype}")
    n, pos = _varint(record, start + 1)
    if pos + n != stop:
      raise DecodeError(f"feature {spec.name!r}: bad length")
    if n == 0:
      return b""
    if spec.dtype != F.BYTES and record[pos] == 0x0A:
      m, p2 = _varint(record, pos + 1)
      if p2 + m == stop:  # one packed field: the common case
        return record[p2:stop]
    # Unpacked (or several packed runs): decode the slow way, re-pack.
    values = example_codec._decode_feature(record[start:stop])  # pylint: disable=protected-access
    if spec.dtype == F.INT64:
      return example_codec._int64_payload(values)  # pylint: disable=protected-access
    if spec.dtype == F.FLOAT:
      return example_codec._float_payload(values)  # pylint: disable=protected-access
    return example_codec._bytes_payload(values)  # pylint: disable=protected-access

  def decode(self, records: List[bytes]) -> Dict[str, Column]:
    """{feature name: Column} for a batch of serialized Examples.

    Raises:
      DecodeError: a record that does not hold this schema's features, or a
        fixed-length feature of another length.
    """
    per = [self.payloads(r) for r in records]
    out = {}
    for spec in self.schema:
      parts = [p[spec.name] for p in per]
      out[spec.name] = self._column(spec, parts)
    return out

  @staticmethod
  def _column(spec: F.FeatureSpec, parts: List[bytes]) -> Column:
    sizes = np.fromiter(map(len, parts), np.int64, len(parts))
    raw = np.frombuffer(b"".join(parts), np.uint8)
    if spec.dtype == F.INT64:
      values = decode_varints(raw)
      if values.size == raw.size:
        lengths = sizes
      else:
        bounds = np.concatenate(([0], np.cumsum(sizes)))
        ends = np.concatenate(([0], np.cumsum(raw < 0x80)))
        lengths = ends[bounds[1:]] - ends[bounds[:-1]]
    elif spec.dtype == F.FLOAT:
      if np.any(sizes % 4):
        raise DecodeError(f"feature {spec.name!r}: float payload not a multiple of 4 bytes")
      values = raw.view("<f4").astype(np.float32)
      lengths = sizes // 4
    else:
      lists = [[v for _, v in example_codec._fields(p)] for p in parts]  # pylint: disable=protected-access
      values = np.array([v for l in lists for v in l], dtype=object)
      lengths = np.fromiter(map(len, lists), np.int64, len(lists))
    if spec.length is not None:
      bad = np.flatnonzero(lengths != spec.length)
      if bad.size:
        raise DecodeError(f"feature {spec.name!r} has {lengths[bad[0]]} values in record "
                          f"{bad[0]} of the batch, the schema says {spec.length}")
      values = values.reshape(len(parts), spec.length)
    return Column(values, lengths)
