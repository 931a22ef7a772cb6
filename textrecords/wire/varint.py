"""Protobuf base-128 varints: one implementation, scalar and vectorized (numpy).

A varint stores 7 bits per byte, low bits first; the top bit of every byte
but the last is set. The scalar functions build and parse single records;
the numpy ones pack whole batches of ids (bert_data) or whole record layouts
(w2v_data), and unpack runs of packed varints, with a few array operations.
Both give the same bytes and values.

The compiled kernels (`example_kernels`, `w2v_data.kernels`) keep their own
few-line loops: numba's cache and w2v_data's ahead-of-time build key on
their own module's source, so they cannot call into this one.

>>> encode(300), decode(b"\\xac\\x02", 0)
(b'\\xac\\x02', (300, 2))
>>> pack(np.array([5, 300])).tolist()
[5, 172, 2]
"""

from typing import List, Optional, Tuple

import numpy as np


def _encode_slow(n: int) -> bytes:
  out = bytearray()
  while True:
    b = n & 0x7F
    n >>= 7
    if n:
      out.append(b | 0x80)
    else:
      out.append(b)
      return bytes(out)


# Varints of 0..16383: one byte below 128, else two (low 7 bits with the top
# bit set, then the rest); built without the loop above (import cost).
SMALL: List[bytes] = ([bytes((i,)) for i in range(128)]
                      + [bytes((i & 0x7F | 0x80, i >> 7)) for i in range(128, 1 << 14)])


def encode(n: int) -> bytes:
  """The varint of a non-negative int below 2**64."""
  return SMALL[n] if n < 16384 else _encode_slow(n)


def table(n: int) -> List[bytes]:
  """`table(n)[i]` = varint bytes of i, for 0 <= i < n (fast packing of ids)."""
  return [encode(i) for i in range(n)]


class TruncatedError(ValueError, IndexError):
  """The buffer ends inside a varint. An IndexError too, so that a parser
  walking a buffer catches it where it catches any other read past the end."""


def decode(buf: bytes, pos: int) -> Tuple[int, int]:
  """(value, position after it) of the varint at `buf[pos:]`.

  Raises:
    TruncatedError: the buffer ends inside the varint.
  """
  try:
    b = buf[pos]
    if b < 0x80:  # one byte: most lengths and ids
      return b, pos + 1
    result, shift = b & 0x7F, 7
    while True:
      pos += 1
      b = buf[pos]
      result |= (b & 0x7F) << shift
      if b < 0x80:
        return result, pos + 1
      shift += 7
  except IndexError:
    raise TruncatedError("truncated varint") from None


def lengths(values: np.ndarray) -> np.ndarray:
  """Bytes of the varint of each non-negative value (any shape).

  int32 input gives int32 lengths when all values are below 2**14 (word ids:
  one pass), else int64.

  >>> lengths(np.array([0, 127, 128, 16383, 16384])).tolist()
  [1, 1, 2, 2, 3]
  """
  values = narrow(values)
  top = int(values.max()) if values.size else 0
  if top < (1 << 14):  # one byte or two, computed in one pass
    return (values >= 128).view(np.int8).astype(
        np.int32 if values.dtype == np.int32 else np.int64) + 1
  n = np.ones(values.shape, dtype=np.int64)
  k = 1
  while k < 10 and top >= (1 << (7 * k)):
    n += values >= (1 << (7 * k))
    k += 1
  return n


def narrow(values) -> np.ndarray:
  """int32 arrays stay int32 (ids); anything else becomes int64."""
  values = np.asarray(values)
  return values if values.dtype == np.int32 else values.astype(np.int64, copy=False)


def scatter(buf: np.ndarray, pos: np.ndarray, values: np.ndarray, nbytes: np.ndarray):
  """Writes varint(values[i]) at buf[pos[i]:pos[i] + nbytes[i]] (1-D arrays)."""
  top = int(nbytes.max()) if len(nbytes) else 0
  if top <= 4:  # values < 2**28: cheaper arithmetic
    values = values.astype(np.int32)
  if top == 1:
    buf[pos] = values
    return
  if top == 2:  # the common case for word ids: one byte, or two
    big = values >= 128
    buf[pos] = (values & 0x7F).astype(np.uint8) | (big.view(np.uint8) << 7)
    buf[pos[big] + 1] = values[big] >> 7
    return
  for k in range(top):
    sel = nbytes > k
    v, p, n = (values, pos, nbytes) if k == 0 else (values[sel], pos[sel], nbytes[sel])
    byte = (v >> (7 * k)) & 0x7F
    byte |= (n > k + 1).astype(byte.dtype) << 7
    buf[p + k] = byte


def pack(values: np.ndarray, nbytes: np.ndarray = None) -> np.ndarray:
  """The concatenated varints of `values` (row-major) as uint8.

  >>> pack(np.array([[1, 300], [0, 20000]])).tobytes().hex()
  '01ac0200a09c01'
  """
  values = np.asarray(values, dtype=np.int64).ravel()
  if values.size and values.min() < 0:
    raise ValueError("negative values are not supported")
  if nbytes is None:
    nbytes = lengths(values)
  nbytes = np.asarray(nbytes).ravel()
  top = int(nbytes.max()) if nbytes.size else 0
  if 2 <= top <= 4:
    return _pack_columns(values, top)
  out = np.zeros(int(nbytes.sum()), dtype=np.uint8)
  scatter(out, np.cumsum(nbytes) - nbytes, values, nbytes)
  return out


def _pack_columns(values: np.ndarray, top: int) -> np.ndarray:
  """`pack` of values below 2**(7 * top), top <= 4: each value's varint
  built in one little-endian uint32 (byte k: bits 7k.., continuation bit
  if the value needs byte k + 1), then the bytes it uses kept in order (no
  scattered writes; about 2x faster than `scatter` for 3-byte ids).

  >>> _pack_columns(np.array([1, 300, 0, 20000]), 3).tobytes().hex()
  '01ac0200a09c01'
  """
  v = values.astype(np.int32)
  code = v & 0x7F
  used = np.ones(len(v), np.int32)  # byte k of `used` is 1 where byte k is written
  for k in range(1, top):
    more = (v >= (1 << (7 * k))).view(np.int8).astype(np.int32)
    code |= (more << (8 * k - 1)) | (((v >> (7 * k)) & 0x7F) << (8 * k))
    used |= more << (8 * k)
  return np.compress(used.astype("<i4", copy=False).view(np.bool_),
                     code.astype("<i4", copy=False).view(np.uint8))


def unpack(data: np.ndarray, sizes: np.ndarray, count: Optional[int] = None):
  """The varints packed in consecutive runs of `data` (uint8): run i is the
  next sizes[i] bytes. Returns (values int64, two's complement for negatives;
  number of values per run). `count`: the number each run should hold, when
  all hold the same (a shortcut, not a check).

  >>> v, n = unpack(np.frombuffer(bytes([5, 0xAC, 0x02, 7]), np.uint8), np.array([3, 1]))
  >>> v.tolist(), n.tolist()
  ([5, 300, 7], [2, 1])

  Raises:
    TruncatedError: a run ends inside a varint.
    ValueError: a varint longer than 10 bytes.
  """
  sizes = np.asarray(sizes, np.int64)
  term = data < 0x80
  if term.all():
    return data.astype(np.int64), sizes
  ends = np.cumsum(sizes)
  if np.any(data[ends[sizes > 0] - 1] >= 0x80):
    raise TruncatedError("truncated varint")
  stops = np.flatnonzero(term)
  # The byte before a varint's last byte is its own iff it has the
  # continuation bit (the previous varint ends in a byte without it; the
  # wrap-around at -1 reads the buffer's last byte, which ends a varint).
  val = (data[stops] & 0x7F).astype(np.int64)
  back = stops
  has = np.ones(stops.shape, bool)
  for _ in range(1, 10):
    back = back - 1
    b = data[back]
    has &= b >= 0x80
    if not has.any():
      break
    val = np.where(has, (val << 7) | (b & 0x7F), val)  # the last byte is the top 7 bits
  else:
    if (has & (data[back - 1] >= 0x80)).any():
      raise ValueError("varint longer than 10 bytes")
  if count is not None and stops.size == count * sizes.size:
    last = stops[count - 1::count]
    if (last == ends - 1).all():
      return val, np.full(sizes.shape, count, np.int64)
  done = np.searchsorted(stops, ends, side="left")
  return val, np.diff(done, prepend=0)
