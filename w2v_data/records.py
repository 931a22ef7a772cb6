"""Vectorised encoding of many int64 `tf.train.Example`s into framed TFRecords.

`textrecords.example_codec.ExampleEncoder` builds one record at a time in
Python; skip-gram data has hundreds of thousands of tiny records, so here the
whole batch is assembled with numpy: each record is a fixed sequence of
pieces (constant bytes, varints, fixed-width integers, runs of payload bytes)
whose per-record lengths give every piece's offset, and each piece is
scattered into one output buffer. Only the CRC32C of each record is a Python
call. The bytes are identical to `ExampleEncoder.encode` + `tfrecord.frame`
(tests check this).

Example:
  >>> data = encode_int64_records([("a", np.array([5, 300]), np.array([2]))])
  >>> from textrecords import example_codec, features as F, tfrecord
  >>> enc = example_codec.ExampleEncoder((F.FeatureSpec("a", "int64", None),))
  >>> data == tfrecord.frame(enc.encode({"a": [5, 300]}))
  True
"""

import struct
from typing import List, Sequence, Tuple

import numpy as np

from textrecords import tfrecord
from textrecords import varint
from w2v_data import compiled

_I64 = np.int64
_I32 = np.int32


varint_lengths = varint.lengths
varint_bytes = varint.pack
_scatter_varints = varint.scatter


class _Assembler:
  """Lays out records made of pieces and scatters the pieces' bytes."""

  def __init__(self, num_records: int):
    self.n = num_records
    self.pieces = []  # (kind, per-record lengths, data)

  def const(self, data: bytes):
    self.pieces.append(("const", np.full(self.n, len(data), dtype=_I64), data))

  def varint(self, values: np.ndarray, prefix: int, present: np.ndarray = None):
    """`prefix` byte then varint(values), or nothing where `present` is False."""
    lens = varint_lengths(values)
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
    for j, (kind, plen, data) in enumerate(self.pieces):
      start = piece_start[:, j]
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
        _scatter_varints(buf, start + 1, values, vlens)
      else:
        values, vlens, counts, first = data
        if not len(values):  # every record's list is empty (e.g. --num_noise_words=0)
          continue
        if values.min() < 0:
          raise ValueError("negative values are not supported")
        # first: byte offset of each value in its feature's payload, all records.
        rec_first = np.cumsum(counts) - counts
        shift = start - np.where(counts > 0, first[np.minimum(rec_first, len(first) - 1)], 0)
        _scatter_varints(buf, first + np.repeat(shift.astype(first.dtype), counts), values,
                         vlens)
    return buf, rec_start


def encode_int64_records(features: Sequence[Tuple[str, np.ndarray, np.ndarray]],
                         with_starts: bool = False):
  """Framed TFRecords of Examples whose features are all int64 lists.

  Args:
    features: (name, values, lengths) per feature: `values` concatenates the
      records' lists, `lengths[r]` is record r's count. Values must be >= 0.
    with_starts: also return where each record starts.

  Returns:
    The records, each framed as in a TFRecord file, concatenated (bytes);
    with_starts: (those bytes, int64 [records] start offsets).

  Raises:
    ValueError: a negative value.
  """
  kern = compiled.kernels()
  if kern is not None:
    data, starts = _encode_compiled(kern, features)
    return (data, starts) if with_starts else data
  num = len(features[0][2])
  feats = []
  features_len = np.zeros(num, dtype=_I64)
  for name, values, lengths in sorted(features, key=lambda f: f[0].encode("utf-8")):
    values = varint.narrow(values)
    lengths = np.asarray(lengths, dtype=_I64)
    vlens = varint_lengths(values)
    # Offsets fit int32 unless a batch holds over 2**31 / 10 values.
    cs = np.zeros(len(values) + 1, dtype=_I32 if len(values) < (1 << 27) else _I64)
    np.cumsum(vlens, out=cs[1:])
    ends = np.cumsum(lengths)
    payload = (cs[ends] - cs[ends - lengths]).astype(_I64)
    packed = np.where(payload > 0, 1 + varint_lengths(payload) + payload, 0)
    feature = 1 + varint_lengths(packed) + packed
    key = name.encode("utf-8")
    key_piece = b"\x0a" + bytes(varint_bytes(np.array([len(key)]))) + key
    entry = len(key_piece) + 1 + varint_lengths(feature) + feature
    features_len += 1 + varint_lengths(entry) + entry
    feats.append((key_piece, entry, feature, packed, payload, (values, vlens, lengths, cs[:-1])))
  example_len = 1 + varint_lengths(features_len) + features_len

  asm = _Assembler(num)
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
  asm.fixed(np.zeros(num, dtype=np.uint64), 4)  # data CRC, filled in below
  buf, starts = asm.build()
  view = buf.tobytes()  # the CRC32C module takes bytes only
  data_start = (starts[:-1] + 12).tolist()
  data_end = (starts[1:] - 4).tolist()
  crc = tfrecord.crc32c
  raw = np.fromiter((crc(view[a:b]) for a, b in zip(data_start, data_end)),
                    dtype=np.uint64, count=num)
  crcs = tfrecord.mask_crc(raw)
  crc_bytes = crcs.astype("<u4").view(np.uint8).reshape(num, 4)
  pos = np.asarray(data_end, dtype=_I64)
  for i in range(4):
    buf[pos + i] = crc_bytes[:, i]
  return (buf.tobytes(), starts[:-1]) if with_starts else buf.tobytes()


def _encode_compiled(kern, features):
  """`encode_int64_records` in one compiled pass (w2v_data.kernels): the same bytes."""
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
  buf, offsets = kern.encode_kernel(values, value_start, lengths,
                                       np.frombuffer(b"".join(keys), np.uint8).copy(), key_start)
  if len(offsets) and offsets[0] < 0:
    raise ValueError("negative values are not supported")
  return buf.tobytes(), offsets[:-1]


def split_framed(data: bytes) -> List[bytes]:
  """The records (unframed) of a concatenation of framed records; for tests."""
  out, pos = [], 0
  while pos < len(data):
    (length,) = struct.unpack_from("<Q", data, pos)
    out.append(bytes(data[pos + 12:pos + 12 + length]))
    pos += 16 + length
  return out
