"""Compiled kernels of the batched Example decoder (numba: the fast, cpu, grain, torch, jax extras).

Two loops over a whole batch, for `example_decoder.ExampleDecoder`'s
compiled path when numba is installed (without it every batch takes the
decoder's general Python path, the reference):
  * `walk`: every record checked against one entry layout (each entry's
    key bytes, tags and four lengths), each schema feature's packed payload
    located; any difference and the batch goes to the general path;
  * `varints`: the packed varints of many byte ranges decoded into one
    array, with the count per range.
"""

import numpy as np

try:
  import numba
except ImportError:  # the `fast` extra is not installed
  numba = None


def available() -> bool:
  """Whether numba is installed (the kernels are compiled)."""
  return numba is not None


def _compiled(fn):
  """fn compiled by numba (cached beside the module when it can be), or fn."""
  if numba is None:
    return fn
  try:
    return numba.njit(cache=True, nogil=True)(fn)
  except RuntimeError:  # no writable cache directory: compile in each process
    return numba.njit(nogil=True)(fn)


@_compiled
def _varint(buf, pos, end):
  """(value, position after it), or (-1, -1) if it runs past `end` or is
  longer than 10 bytes."""
  value = 0
  shift = 0
  while pos < end and shift < 70:
    b = buf[pos]
    pos += 1
    value |= (b & 0x7F) << shift
    if b < 0x80:
      return value, pos
    shift += 7
  return -1, -1


@_compiled
def walk(buf, starts, ends, prefixes, prefix_at, feature_of, tags, out_start, out_size):
  """Locates the payloads of a batch laid out as one entry list.

  Args:
    buf: uint8 batch buffer; record r is buf[starts[r]:ends[r]].
    prefixes, prefix_at: entry k's body begins with
      prefixes[prefix_at[k]:prefix_at[k + 1]] (0x0A, key length, key, 0x12).
    feature_of: entry k's schema feature number, or -1 (skipped).
    tags: entry k's list tag (0x1A int64, 0x12 float).
    out_start, out_size: (features, records) int64, filled.
  Returns:
    True if every record has exactly this layout, each list packed in one run.
  """
  for r in range(starts.shape[0]):
    p = starts[r]
    e = ends[r]
    if p >= e or buf[p] != 0x0A:
      return False
    n, p = _varint(buf, p + 1, e)
    if p < 0 or p + n != e:
      return False
    for k in range(feature_of.shape[0]):
      if p >= e or buf[p] != 0x0A:
        return False
      n, p = _varint(buf, p + 1, e)
      if p < 0:
        return False
      entry_end = p + n
      if entry_end > e:
        return False
      a = prefix_at[k]
      b = prefix_at[k + 1]
      if p + (b - a) > entry_end:
        return False
      for j in range(b - a):
        if buf[p + j] != prefixes[a + j]:
          return False
      n, q = _varint(buf, p + (b - a), entry_end)
      if q < 0 or q + n != entry_end:
        return False
      f = feature_of[k]
      if f >= 0:
        if q >= entry_end or buf[q] != tags[k]:
          return False
        n, s = _varint(buf, q + 1, entry_end)
        if s < 0 or s + n != entry_end:
          return False
        if n == 0:
          out_start[f, r] = s
          out_size[f, r] = 0
        else:
          if buf[s] != 0x0A:
            return False
          n, t = _varint(buf, s + 1, entry_end)
          if t < 0 or t + n != entry_end:
            return False
          out_start[f, r] = t
          out_size[f, r] = n
      p = entry_end
    if p != e:
      return False
  return True


@_compiled
def varints(buf, starts, sizes, out, counts):
  """Decodes the varints of buf[starts[i]:starts[i] + sizes[i]] into `out`
  (consecutively) and their number into counts[i].

  Returns:
    The number of values, or -1 if a range ends inside a varint.
  """
  k = 0
  for i in range(starts.shape[0]):
    p = starts[i]
    e = p + sizes[i]
    c = 0
    while p < e:
      v, p = _varint(buf, p, e)
      if p < 0:
        return -1
      out[k] = v
      k += 1
      c += 1
    counts[i] = c
  return k


def decode_ranges(buf: np.ndarray, starts: np.ndarray, sizes: np.ndarray):
  """(values int64, count per range) of the varints in each range, or None
  if one is truncated.

  >>> buf = np.frombuffer(bytes([5, 0xAC, 0x02, 7]), np.uint8)
  >>> v, c = decode_ranges(buf, np.array([0, 3]), np.array([3, 1]))
  >>> v.tolist(), c.tolist()
  ([5, 300, 7], [2, 1])
  """
  out = np.empty(int(sizes.sum()), np.int64)
  counts = np.empty(len(sizes), np.int64)
  n = varints(buf, starts, sizes, out, counts)
  if n < 0:
    return None
  return out[:n], counts
