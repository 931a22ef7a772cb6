"""Byte-stable `tf.train.Example` encoding without TensorFlow or protobuf.

The bytes are exactly those of `Example.SerializeToString(deterministic=True)`:
the feature map's entries sorted by key, each list packed. Writing the wire
format directly keeps worker processes free of TensorFlow and is faster than
building protobuf messages. `example_decoder` reads it back.

Two encoders, the same bytes:
  * `ExampleEncoder`: one record at a time, any schema (Python);
  * `encode_int64_records`: a whole batch of framed records whose features
    are all int64 lists (numpy, or a compiled kernel given by the caller):
    each record is a fixed sequence of pieces (constant bytes, varints,
    fixed-width integers, runs of payload bytes) whose per-record lengths
    give every piece's offset, and each piece is scattered into one output
    buffer; only the CRC32C of each record is a Python call. For the many
    tiny records of skip-gram data.

Wire format (field numbers from tensorflow/core/example/{example,feature}.proto):
Example.features = 1; Features.feature = 1 (map entry: key = 1, value = 2);
Feature.bytes_list = 1, float_list = 2, int64_list = 3; each list's value = 1.
"""

import struct
from typing import Callable, Mapping, Optional, Sequence, Tuple

import numpy as np

from textrecords.wire import features as F
from textrecords.files import tfrecord
from textrecords.wire import varint


_SMALL = varint.SMALL
_varint = varint.encode
_I64 = np.int64


def int64_payload(values) -> bytes:
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


def float_payload(values) -> bytes:
  """Packed little-endian float32 values."""
  return np.asarray(values, dtype="<f4").tobytes()


def bytes_payload(values) -> bytes:
  """The length-delimited values of a BytesList (str encoded as UTF-8)."""
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
  if dtype == F.INT64:  # as int64_feature_from_payload, inlined (per record, per feature)
    payload = int64_payload(values)
    inner = _len_delimited(0x0A, payload) if payload else b""
    return _len_delimited(0x1A, inner)
  if dtype == F.FLOAT:
    payload = float_payload(values)
    inner = _len_delimited(0x0A, payload) if payload else b""
    return _len_delimited(0x12, inner)
  return _len_delimited(0x0A, bytes_payload(values))


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


# ------------------------------------------------------------- batched int64 records

# A compiled `encode_int64_records` (w2v_data's kernels have one):
# (values, value_start, lengths, key_bytes, key_start) -> (buffer, record
# offsets), offsets[0] < 0 when a value is negative. See `_encode_compiled`.
Kernel = Callable[..., Tuple[np.ndarray, np.ndarray]]


class _Assembler:
  """Lays out records made of pieces and scatters the pieces' bytes."""

  def __init__(self, num_records: int):
    self.n = num_records
    self.pieces = []  # (kind, per-record lengths, data)

  def const(self, data: bytes):
    self.pieces.append(("const", np.full(self.n, len(data), dtype=_I64), data))

  def varint(self, values: np.ndarray, prefix: int, present: np.ndarray = None):
    """`prefix` byte then varint(values), or nothing where `present` is False."""
    lens = varint.lengths(values)
    total = 1 + lens
    if present is not None:
      total = np.where(present, total, 0)
    self.pieces.append(("varint", total, (values, lens, prefix, present)))

  def fixed(self, values: np.ndarray, width: int):
    """Little-endian unsigned `width`-byte integers."""
    self.pieces.append(("fixed", np.full(self.n, width, dtype=_I64), (values, width)))

  def varint_run(self, values: np.ndarray, vlens: np.ndarray, counts: np.ndarray,
                 nbytes: np.ndarray, first: np.ndarray):
    """Record r gets the varints of its counts[r] values (nbytes[r] bytes).

    first[i]: the byte offset of value i in the concatenated varints.
    """
    self.pieces.append(("varint_run", np.asarray(nbytes, dtype=_I64),
                        (values, vlens, counts, first)))

  def build(self) -> Tuple[np.ndarray, np.ndarray]:
    """Returns (buffer uint8, record start offsets [n + 1])."""
    lens = np.stack([p[1] for p in self.pieces], axis=1)
    rec_len = lens.sum(axis=1)
    rec_start = np.zeros(self.n + 1, dtype=_I64)
    np.cumsum(rec_len, out=rec_start[1:])
    piece_start = rec_start[:-1, None] + np.cumsum(lens, axis=1) - lens
    buf = np.zeros(int(rec_start[-1]), dtype=np.uint8)
    for j, (kind, _, data) in enumerate(self.pieces):
      _scatter_piece(buf, piece_start[:, j], kind, data)
    return buf, rec_start


def _scatter_piece(buf: np.ndarray, start: np.ndarray, kind: str, data):
  """Writes one piece of every record (at `start`) into `buf`."""
  if kind == "const":
    for i, byte in enumerate(data):
      buf[start + i] = byte
  elif kind == "fixed":
    values, width = data
    v = np.asarray(values, dtype=np.uint64)
    for i in range(width):
      buf[start + i] = ((v >> np.uint64(8 * i)) & np.uint64(0xFF)).astype(np.uint8)
  elif kind == "varint":
    values, vlens, prefix, present = data
    if present is not None:
      values, vlens, start = values[present], vlens[present], start[present]
    buf[start] = prefix
    varint.scatter(buf, start + 1, values, vlens)
  else:
    values, vlens, counts, first = data
    if not len(values):  # every record's list is empty (e.g. --num_noise_words=0)
      return
    if values.min() < 0:
      raise ValueError("negative values are not supported")
    # first: byte offset of each value in its feature's payload, all records.
    rec_first = np.cumsum(counts) - counts
    shift = start - np.where(counts > 0, first[np.minimum(rec_first, len(first) - 1)], 0)
    varint.scatter(buf, first + np.repeat(shift.astype(first.dtype), counts), values, vlens)


def encode_int64_records(features: Sequence[Tuple[str, np.ndarray, np.ndarray]],
                         with_starts: bool = False, kernel: Optional[Kernel] = None):
  """Framed TFRecords of Examples whose features are all int64 lists.

  The bytes equal `ExampleEncoder.encode` + `tfrecord.frame` of each record.

  >>> data = encode_int64_records([("a", np.array([5, 300]), np.array([2]))])
  >>> data == tfrecord.frame(ExampleEncoder((F.FeatureSpec("a", "int64", None),)).encode(
  ...     {"a": [5, 300]}))
  True

  Args:
    features: (name, values, lengths) per feature: `values` concatenates the
      records' lists, `lengths[r]` is record r's count. Values must be >= 0.
    with_starts: also return where each record starts.
    kernel: a compiled form of this function (`Kernel`), or None: numpy.

  Returns:
    The records, each framed as in a TFRecord file, concatenated (bytes);
    with_starts: (those bytes, int64 [records] start offsets).

  Raises:
    ValueError: a negative value.
  """
  if kernel is not None:
    data, starts = _encode_compiled(kernel, features)
    return (data, starts) if with_starts else data
  num = len(features[0][2])
  asm = _Assembler(num)
  _add_example(asm, num, sorted(features, key=lambda f: f[0].encode("utf-8")))
  buf, starts = asm.build()
  _fill_data_crcs(buf, starts)
  return (buf.tobytes(), starts[:-1]) if with_starts else buf.tobytes()


def _add_example(asm: _Assembler, num: int, features):
  """The pieces of `num` framed Examples of int64 `features` (sorted by
  key), their data CRCs left zero."""
  feats = []
  features_len = np.zeros(num, dtype=_I64)
  lengths_of = varint.lengths
  for name, values, lengths in features:
    values = varint.narrow(values)
    lengths = np.asarray(lengths, dtype=_I64)
    vlens = lengths_of(values)
    # Offsets fit int32 unless a batch holds over 2**31 / 10 values.
    cs = np.zeros(len(values) + 1, dtype=np.int32 if len(values) < (1 << 27) else _I64)
    np.cumsum(vlens, out=cs[1:])
    ends = np.cumsum(lengths)
    payload = (cs[ends] - cs[ends - lengths]).astype(_I64)
    packed = np.where(payload > 0, 1 + lengths_of(payload) + payload, 0)
    feature = 1 + lengths_of(packed) + packed
    key = name.encode("utf-8")
    key_piece = b"\x0a" + varint.encode(len(key)) + key
    entry = len(key_piece) + 1 + lengths_of(feature) + feature
    features_len += 1 + lengths_of(entry) + entry
    feats.append((key_piece, entry, feature, packed, payload, (values, vlens, lengths, cs[:-1])))
  example_len = 1 + lengths_of(features_len) + features_len
  asm.fixed(example_len, 8)
  unique_len, inverse = np.unique(example_len, return_inverse=True)
  header_crc = np.array([tfrecord.masked_crc(struct.pack("<Q", int(v))) for v in unique_len],
                        dtype=np.uint64)[inverse.reshape(-1)]
  asm.fixed(header_crc, 4)
  asm.varint(features_len, 0x0A)
  for key_piece, entry, feature, packed, payload, payload_values in feats:
    asm.varint(entry, 0x0A)
    asm.const(key_piece)
    asm.varint(feature, 0x12)
    asm.varint(packed, 0x1A)
    asm.varint(payload, 0x0A, present=payload > 0)
    values, vlens, lengths, first = payload_values
    asm.varint_run(values, vlens, lengths, payload, first)
  asm.fixed(np.zeros(num, dtype=np.uint64), 4)  # data CRC, filled in by _fill_data_crcs


def _fill_data_crcs(buf: np.ndarray, starts: np.ndarray):
  """Writes each framed record's masked data CRC32C (its last 4 bytes)."""
  num = len(starts) - 1
  view = buf.tobytes()  # the CRC32C module takes bytes only
  data_start = (starts[:-1] + 12).tolist()
  data_end = (starts[1:] - 4).tolist()
  crc = tfrecord.crc32c
  raw = np.fromiter((crc(view[a:b]) for a, b in zip(data_start, data_end)),
                    dtype=np.uint64, count=num)
  crc_bytes = tfrecord.mask_crc(raw).astype("<u4").view(np.uint8).reshape(num, 4)
  pos = np.asarray(data_end, dtype=_I64)
  for i in range(4):
    buf[pos + i] = crc_bytes[:, i]


def _encode_compiled(kernel: Kernel, features):
  """`encode_int64_records` in one compiled pass: the same bytes."""
  feats = sorted(features, key=lambda f: f[0].encode("utf-8"))
  keys = []
  for name, _, _ in feats:
    key = name.encode("utf-8")
    keys.append(b"\x0a" + varint.encode(len(key)) + key)
  sizes = [len(f[1]) for f in feats]
  value_start = np.zeros(len(feats) + 1, dtype=_I64)
  np.cumsum(sizes, out=value_start[1:])
  values = np.empty(int(value_start[-1]), dtype=_I64)
  for f, (_, v, _) in enumerate(feats):
    values[value_start[f]:value_start[f + 1]] = v
  lengths = np.stack([np.asarray(f[2], dtype=_I64) for f in feats])
  key_start = np.zeros(len(keys) + 1, dtype=_I64)
  np.cumsum([len(k) for k in keys], out=key_start[1:])
  buf, offsets = kernel(values, value_start, lengths,
                        np.frombuffer(b"".join(keys), np.uint8).copy(), key_start)
  if len(offsets) and offsets[0] < 0:
    raise ValueError("negative values are not supported")
  return buf.tobytes(), offsets[:-1]
