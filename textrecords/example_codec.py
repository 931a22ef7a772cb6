"""Byte-stable `tf.train.Example` encoding without TensorFlow or protobuf.

The bytes are exactly those of `Example.SerializeToString(deterministic=True)`:
the feature map's entries sorted by key, each list packed. Writing the wire
format directly keeps worker processes free of TensorFlow and is several times
faster than building protobuf messages.

Wire format (field numbers from tensorflow/core/example/{example,feature}.proto):
Example.features = 1; Features.feature = 1 (map entry: key = 1, value = 2);
Feature.bytes_list = 1, float_list = 2, int64_list = 3; each list's value = 1.
"""

import struct
from typing import Mapping, Sequence

import numpy as np

from textrecords import features as F
from textrecords import varint


_SMALL = varint.SMALL
_varint = varint.encode


def _int64_payload(values) -> bytes:
  """Packed varints of int64 values (negatives as 10-byte two's complement)."""
  if isinstance(values, (list, tuple)):
    if not values:
      return b""
    try:
      if min(values) >= 0 and max(values) < 16384:
        return b"".join([_SMALL[v] for v in values])
    except TypeError:  # not plain ints: let numpy convert
      pass
  arr = np.asarray(values, dtype=np.int64)
  if arr.size and arr.min() >= 0 and arr.max() < 128:
    return arr.astype(np.uint8).tobytes()
  return b"".join(_varint(int(v) & 0xFFFFFFFFFFFFFFFF) for v in arr.tolist())


def _float_payload(values) -> bytes:
  return np.asarray(values, dtype="<f4").tobytes()


def _bytes_payload(values) -> bytes:
  out = []
  for v in values:
    if isinstance(v, str):
      v = v.encode("utf-8")
    out.append(b"\x0a" + _varint(len(v)) + v)
  return b"".join(out)


def _len_delimited(tag: int, payload: bytes) -> bytes:
  return bytes([tag]) + _varint(len(payload)) + payload


def int64_feature_from_payload(payload: bytes) -> bytes:
  """A serialized Int64 `Feature` from already-packed varint bytes."""
  inner = _len_delimited(0x0A, payload) if payload else b""
  return _len_delimited(0x1A, inner)


def float_feature_from_payload(payload: bytes) -> bytes:
  """A serialized Float `Feature` from little-endian float32 bytes."""
  inner = _len_delimited(0x0A, payload) if payload else b""
  return _len_delimited(0x12, inner)


def encode_feature(dtype: str, values) -> bytes:
  """Serialized `tf.train.Feature` holding `values` of the given dtype."""
  if dtype == F.INT64:
    payload = _int64_payload(values)
    inner = _len_delimited(0x0A, payload) if payload else b""
    return _len_delimited(0x1A, inner)
  if dtype == F.FLOAT:
    payload = _float_payload(values)
    inner = _len_delimited(0x0A, payload) if payload else b""
    return _len_delimited(0x12, inner)
  return _len_delimited(0x0A, _bytes_payload(values))


class ExampleEncoder:
  """Encodes dicts of feature values into serialized Examples for one schema.

  Example:
    >>> enc = ExampleEncoder((F.FeatureSpec("ids", "int64", 2),))
    >>> enc.encode({"ids": [5, 300]}).hex()
    '0a100a0e0a0369647312071a050a0305ac02'

  Fixed-length features are checked: a wrong length raises ValueError.
  """

  def __init__(self, schema: Sequence[F.FeatureSpec], key_order: str = "sorted"):
    """Args:
      schema: the features, in schema order.
      key_order: "sorted" (as `SerializeToString(deterministic=True)`) or
        "schema" (map entries in schema order, as the pure-Python protobuf
        backend writes a map filled in that order). Both are byte-stable.
    """
    if key_order not in ("sorted", "schema"):
      raise ValueError(f"key_order={key_order!r}")
    self.schema = tuple(schema)
    self._sorted = (sorted(self.schema, key=lambda s: s.name.encode("utf-8"))
                    if key_order == "sorted" else list(self.schema))
    self._keys = {s.name: _len_delimited(0x0A, s.name.encode("utf-8"))
                  for s in self.schema}
    # Per feature, in output order: the map-entry prefix up to the Feature bytes.
    self._order = [s.name for s in self._sorted]

  def encode_features(self, encoded: Mapping[str, bytes]) -> bytes:
    """Assembles an Example from already-serialized Feature messages."""
    keys = self._keys
    entries = []
    for name in self._order:
      body = keys[name] + _len_delimited(0x12, encoded[name])
      entries.append(_len_delimited(0x0A, body))
    return _len_delimited(0x0A, b"".join(entries))

  def encode(self, values: Mapping[str, Sequence]) -> bytes:
    """Serialized Example for `values` (a dict: feature name -> sequence)."""
    encoded = {}
    for s in self.schema:
      v = values[s.name]
      if s.length is not None and len(v) != s.length:
        raise ValueError(f"feature {s.name!r}: {len(v)} values, schema says {s.length}")
      encoded[s.name] = encode_feature(s.dtype, v)
    return self.encode_features(encoded)


def decode_example(data: bytes) -> dict:
  """Decodes a serialized Example into {name: list}; for tests and inspection.

  Accepts any valid encoding (packed or not, any entry order).
  """
  out = {}
  for field, value in _fields(_only(data, 1)):
    if field != 1:
      continue
    key, feat = None, b""
    for f2, v2 in _fields(value):
      if f2 == 1:
        key = v2.decode("utf-8")
      elif f2 == 2:
        feat = v2
    out[key] = _decode_feature(feat)
  return out


def _only(data: bytes, field: int) -> bytes:
  for f, v in _fields(data):
    if f == field:
      return v
  return b""


_read_varint = varint.decode


def _fields(buf: bytes):
  """Yields (field_number, value) with value an int (varint) or bytes."""
  pos = 0
  while pos < len(buf):
    key, pos = _read_varint(buf, pos)
    field, wire = key >> 3, key & 7
    if wire == 0:
      v, pos = _read_varint(buf, pos)
      yield field, ("varint", v)
    elif wire == 2:
      n, pos = _read_varint(buf, pos)
      if pos + n > len(buf):
        raise ValueError("truncated field")
      yield field, buf[pos:pos + n]
      pos += n
    elif wire == 5:
      yield field, ("fixed32", buf[pos:pos + 4])
      pos += 4
    else:
      raise ValueError(f"unsupported wire type {wire}")


def _decode_feature(feat: bytes):
  for field, value in _fields(feat):
    if field == 3:
      vals = []
      for f, v in _fields(value):
        if isinstance(v, tuple):
          vals.append(_signed(v[1]))
        else:
          pos = 0
          while pos < len(v):
            x, pos = _read_varint(v, pos)
            vals.append(_signed(x))
      return vals
    if field == 2:
      vals = []
      for f, v in _fields(value):
        raw = v[1] if isinstance(v, tuple) else v
        vals.extend(struct.unpack(f"<{len(raw) // 4}f", raw))
      return vals
    if field == 1:
      return [v for f, v in _fields(value)]
  return []


def _signed(x: int) -> int:
  return x - (1 << 64) if x >= 1 << 63 else x
