"""`tf.train.Example` decoding without TensorFlow: batched into numpy arrays, or one record.

`ExampleDecoder(schema)` turns a batch of serialized Examples into one array
per feature: the values of all records concatenated plus each record's
length (fixed-length features come back as a (B, length) matrix).
`decode_example(record)` gives one record as {name: list} (any schema; for
tests and inspection).

Two paths of `ExampleDecoder` give the same arrays:
  * general (`decode_general`, the reference: any valid encoding, such as
    other entry orders or field orders, unpacked lists, extra features):
    Python finds each feature's payload in each record;
  * compiled (`decode_compiled`, when numba is installed: the `fast`, `cpu`,
    `grain`, `torch`, `jax` and `test` extras bring it): a numba loop
    (`example_kernels.walk`) checks every record of the batch against the
    entry layout of its first record (the same keys in the same order, key
    before value, each list packed in one run, as every record our
    `example_encoder` writes) and locates each feature's payload; the int64
    payloads are decoded by a second loop. A batch it does not validate in
    full goes to the general path.
Without numba (the core install alone) every batch takes the general path:
the same arrays, several times slower (BENCHMARKS.md), and nothing is printed.

Example:
  >>> from textrecords.wire import example_encoder, features as F
  >>> schema = (F.FeatureSpec("ids", "int64", None), F.FeatureSpec("w", "float", 1))
  >>> enc = example_encoder.ExampleEncoder(schema)
  >>> recs = [enc.encode({"ids": [5, 300], "w": [0.5]}), enc.encode({"ids": [7], "w": [1.0]})]
  >>> out = ExampleDecoder(schema).decode(recs)
  >>> out["ids"].values.tolist(), out["ids"].lengths.tolist(), out["w"].values.tolist()
  ([5, 300, 7], [2, 1], [[0.5], [1.0]])
  >>> decode_example(recs[0])
  {'ids': [5, 300], 'w': [0.5]}
"""

import dataclasses
import struct
from typing import Dict, List, Optional, Sequence

import numpy as np

from textrecords.wire import example_encoder
from textrecords.wire import features as F
from textrecords.wire import varint
from textrecords.wire import example_kernels

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


class RecordBatch:
  """A batch of serialized records in one buffer: record i is
  `data[starts[i]:ends[i]]` (so a batch read in one piece needs no copies).

  Sequence-like: `len(batch)`, `batch[i]` (bytes), iteration. `epoch`: the
  training epoch it was read for (None: evaluation order), for decoders
  whose output depends on it (dynamic masking).

  >>> b = RecordBatch.from_records([b"ab", b"", b"c"])
  >>> len(b), list(b), b.starts.tolist()
  (3, [b'ab', b'', b'c'], [0, 2, 2])
  """

  def __init__(self, data: bytes, starts: np.ndarray, ends: np.ndarray,
               epoch: Optional[int] = None):
    self.data = data
    self.starts = np.asarray(starts, np.int64)
    self.ends = np.asarray(ends, np.int64)
    self.epoch = epoch  # the training epoch read, None for evaluation order

  @classmethod
  def from_records(cls, records: Sequence[bytes], epoch: Optional[int] = None
                   ) -> "RecordBatch":
    sizes = np.fromiter(map(len, records), np.int64, len(records))
    ends = np.cumsum(sizes)
    return cls(b"".join(records), ends - sizes, ends, epoch)

  def __len__(self) -> int:
    return len(self.starts)

  def __getitem__(self, i: int) -> bytes:
    return bytes(self.data[int(self.starts[i]):int(self.ends[i])])

  def __iter__(self):
    data = self.data
    for a, b in zip(self.starts.tolist(), self.ends.tolist()):
      yield bytes(data[a:b])

  def __repr__(self) -> str:
    return f"RecordBatch({len(self)} records, {len(self.data)} bytes)"


def as_batch(records) -> RecordBatch:
  """`records` (a RecordBatch or a sequence of bytes) as a RecordBatch."""
  return records if isinstance(records, RecordBatch) else RecordBatch.from_records(records)


_varint = varint.decode


def _unpack(data: np.ndarray, sizes: np.ndarray, count: Optional[int] = None):
  """`varint.unpack`, its errors as DecodeError."""
  try:
    return varint.unpack(data, sizes, count)
  except ValueError as e:
    raise DecodeError(str(e)) from e


# ------------------------------------------------------------- one record, any schema

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


def _fields(buf: bytes):
  """Yields (field_number, value) with value an int (varint) or bytes."""
  pos = 0
  while pos < len(buf):
    key, pos = _varint(buf, pos)
    field, wire = key >> 3, key & 7
    if wire == 0:
      v, pos = _varint(buf, pos)
      yield field, ("varint", v)
    elif wire == 2:
      n, pos = _varint(buf, pos)
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
            x, pos = _varint(v, pos)
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


# ------------------------------------------------------------- batches, one schema

class ExampleDecoder:
  """Decodes batches of serialized Examples of one schema into numpy columns."""

  def __init__(self, schema: Sequence[F.FeatureSpec], compiled: Optional[bool] = None):
    """Args:
      schema: the features to decode.
      compiled: batches through the numba walk (`decode_compiled`) first;
        default: when numba is installed. False: every batch through
        `decode_general` (same arrays).

    Raises:
      ImportError: compiled=True without numba.
    """
    self.schema = tuple(schema)
    self._want = {s.name.encode("utf-8"): s for s in self.schema}
    self.compiled = example_kernels.available() if compiled is None else compiled
    if self.compiled:
      _need_numba()

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
    values = _decode_feature(record[start:stop])
    if spec.dtype == F.INT64:
      return example_encoder.int64_payload(values)
    if spec.dtype == F.FLOAT:
      return example_encoder.float_payload(values)
    return example_encoder.bytes_payload(values)

  def decode(self, records) -> Dict[str, Column]:
    """{feature name: Column} for a batch of serialized Examples (a list of
    bytes or a `RecordBatch`): the compiled walk when numba is installed
    and the whole batch has one layout, else record by record (same arrays).

    Raises:
      DecodeError: a record that does not hold this schema's features, or a
        fixed-length feature of another length.
    """
    batch = as_batch(records)
    if self.compiled and len(batch):
      out = self.decode_compiled(batch)
      if out is not None:
        return out
    return self.decode_general(list(batch))

  def decode_general(self, records: Sequence[bytes]) -> Dict[str, Column]:
    """`decode` record by record (any valid encoding): the reference."""
    per = [self.payloads(r) for r in records]
    out = {}
    for spec in self.schema:
      parts = [p[spec.name] for p in per]
      out[spec.name] = self._column(spec, parts)
    return out

  # ------------------------------------------------------------- compiled path

  def layout(self, record: bytes):
    """The map entries of one record, in order: [(key prefix, spec or None)],
    the prefix being the entry body's bytes up to its Feature's length
    (0x0A, key length, key, 0x12). None when the record is not laid out
    simply (key not first, a long key, a feature twice, one missing)."""
    try:
      if not record or record[0] != 0x0A:
        return None
      n, pos = _varint(record, 1)
      end = len(record)
      if pos + n != end:
        return None
      entries, seen = [], set()
      while pos < end:
        if record[pos] != 0x0A:
          return None
        n, pos = _varint(record, pos + 1)
        k = record[pos + 1]
        if record[pos] != 0x0A or k >= 0x80 or record[pos + 2 + k] != 0x12:
          return None
        key = record[pos + 2:pos + 2 + k]
        spec = self._want.get(key)
        if spec is not None:
          if spec.name in seen or spec.dtype == F.BYTES:
            return None
          seen.add(spec.name)
        entries.append((np.frombuffer(record[pos:pos + 3 + k], np.uint8), spec))
        pos += n
    except IndexError:
      return None
    if len(seen) != len(self._want):
      return None
    return entries

  def decode_compiled(self, batch: RecordBatch) -> Optional[Dict[str, Column]]:
    """`decode` through the numba walk (`example_kernels`), or None when some
    record of the batch does not have the layout of the last batch or of its
    own first record (then `decode_general` gives the answer or the error).

    Raises:
      ImportError: numba is not installed.
    """
    _need_numba()
    buf = np.frombuffer(batch.data, np.uint8)
    if buf.size == 0:
      return None
    b = len(batch)
    out_start = np.empty((len(self.schema), b), np.int64)
    out_size = np.empty((len(self.schema), b), np.int64)
    for attempt in range(2):  # the last batch's layout, then this batch's own
      kernel_layout = getattr(self, "_kernel_layout", None)
      if kernel_layout is None or attempt:
        kernel_layout = self._kernel_layout = self._kernel_layout_of(batch[0])
        if kernel_layout is None:
          return None
      if example_kernels.walk(buf, batch.starts, batch.ends, *kernel_layout, out_start,
                              out_size):
        break
    else:
      return None
    out = {}
    for i, spec in enumerate(self.schema):
      starts, sizes = out_start[i], out_size[i]
      if spec.dtype == F.INT64:
        got = example_kernels.decode_ranges(buf, starts, sizes)
        if got is None:
          raise DecodeError("truncated varint")
        values, lengths = got
      else:
        values, lengths = _floats(buf, spec, starts, sizes)
      out[spec.name] = _shaped(spec, values, lengths, b)
    return out

  def _kernel_layout_of(self, record: bytes):
    """`layout(record)` as `example_kernels.walk`'s arrays (prefixes,
    prefix_at, feature_of, tags), or None."""
    layout = self.layout(record)
    if layout is None:
      return None
    number = {s.name: i for i, s in enumerate(self.schema)}
    prefixes = [p for p, _ in layout]
    return (np.concatenate(prefixes),
            np.concatenate(([0], np.cumsum([p.size for p in prefixes]))).astype(np.int64),
            np.array([-1 if spec is None else number[spec.name] for _, spec in layout],
                     np.int64),
            np.array([0 if spec is None else _LIST_TAG[spec.dtype] for _, spec in layout],
                     np.uint8))

  def __getstate__(self):
    state = dict(self.__dict__)
    state.pop("_kernel_layout", None)
    return state

  @staticmethod
  def _column(spec: F.FeatureSpec, parts: List[bytes]) -> Column:
    sizes = np.fromiter(map(len, parts), np.int64, len(parts))
    raw = np.frombuffer(b"".join(parts), np.uint8)
    if spec.dtype == F.INT64:
      values, lengths = _unpack(raw, sizes)
    elif spec.dtype == F.FLOAT:
      if np.any(sizes % 4):
        raise DecodeError(f"feature {spec.name!r}: float payload not a multiple of 4 bytes")
      values = raw.view("<f4").astype(np.float32)
      lengths = sizes // 4
    else:
      lists = [[v for _, v in _fields(p)] for p in parts]
      values = np.array([v for l in lists for v in l], dtype=object)
      lengths = np.fromiter(map(len, lists), np.int64, len(lists))
    return _shaped(spec, values, lengths, len(parts))


def _need_numba():
  """Raises the one-line ImportError when numba is not installed."""
  if not example_kernels.available():
    raise ImportError("compiled decoding needs numba: pip install 'textrecords[fast]'")


def _floats(buf: np.ndarray, spec: F.FeatureSpec, starts: np.ndarray, sizes: np.ndarray):
  """(float32 values, count per record) of packed float payloads."""
  if np.any(sizes % 4):
    raise DecodeError(f"feature {spec.name!r}: float payload not a multiple of 4 bytes")
  return buf[_ranges(starts, sizes)].view("<f4").astype(np.float32), sizes // 4


def _shaped(spec: F.FeatureSpec, values: np.ndarray, lengths: np.ndarray, b: int) -> Column:
  """A Column, fixed-length features checked and reshaped to (b, length)."""
  if spec.length is not None:
    bad = np.flatnonzero(lengths != spec.length)
    if bad.size:
      raise DecodeError(f"feature {spec.name!r} has {lengths[bad[0]]} values in record "
                        f"{bad[0]} of the batch, the schema says {spec.length}")
    values = values.reshape(b, spec.length)
  return Column(values, np.asarray(lengths, np.int64))


def _ranges(starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
  """Indices of the concatenated ranges [starts[i], starts[i] + sizes[i]).

  >>> _ranges(np.array([5, 0, 9]), np.array([2, 0, 3])).tolist()
  [5, 6, 9, 10, 11]
  """
  if sizes.size and (sizes == sizes[0]).all():
    return (starts[:, None] + np.arange(sizes[0])).ravel()
  total = int(sizes.sum())
  before = np.cumsum(sizes) - sizes
  return np.repeat(starts - before, sizes) + np.arange(total)

