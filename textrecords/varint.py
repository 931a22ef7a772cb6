"""Protobuf base-128 varints: one implementation, scalar and vectorized (numpy).

A varint stores 7 bits per byte, low bits first; the top bit of every byte
but the last is set. The scalar functions build single records; the numpy
ones pack whole batches of ids (bert_data) or whole record layouts (w2v_data)
with a few array operations. Both give the same bytes.

>>> encode(300), decode(b"\\xac\\x02", 0)
(b'\\xac\\x02', (300, 2))
>>> pack(np.array([5, 300])).tolist()
[5, 172, 2]
"""

from typing import List, Tuple

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


def decode(buf: bytes, pos: int) -> Tuple[int, int]:
  """(value, position after it) of the varint at `buf[pos:]`.

  Raises:
    ValueError: the buffer ends inside the varint.
  """
  result = shift = 0
  while True:
    if pos >= len(buf):
      raise ValueError("truncated varint")
    b = buf[pos]
    pos += 1
    result |= (b & 0x7F) << shift
    if not b & 0x80:
      return result, pos
    shift += 7


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
  out = np.zeros(int(nbytes.sum()), dtype=np.uint8)
  scatter(out, np.cumsum(nbytes) - nbytes, values, nbytes)
  return out
