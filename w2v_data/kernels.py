"""numba kernels for w2v_data's hot loops: counting, sampling and record encoding.

Used through `w2v_data.kernel_loader` (which decides whether they are used:
numba installed, the `fast` extra, and not turned off; and how: compiled
ahead of time by `python -m w2v_data.kernels OUT_DIR NAME`, or in numba's
JIT); importing this module imports numba. The Python and numpy code in
`corpus`, `sampling` and `records` is the reference: these loops give the
same arrays and the same bytes (tests run both and compare).

  count_kernel: a chunk of text split into tokens at whitespace (as
    `str.split()`), each numbered by first occurrence through a hash table
    of the token bytes, with counts; see `corpus.count_chunk`.
  sample_kernel: per sentence, subsampling with stream 1, window sizes with
    stream 2, contexts in sentence order, noise words from the alias table
    with stream 3 (redraws: stream 3 + (attempt << 8)), excluding the
    center's contexts (skip-gram), the center and its contexts (CBOW,
    PV-DM) or the target (PV-DBOW); see `sampling.SkipGramSampler.sample`.
  encode_kernel: framed tf.train.Example records of int64 lists; see
    `records.encode_int64_records`.
  alias_kernel: the noise distribution's alias table; see `sampling.AliasTable`.

Compiled code is cached on disk (numba's `cache=True`: the package's
__pycache__, or numba's cache folder where that is not writable).

>>> hex(crc32c_masked(np.frombuffer(b"123456789", np.uint8), 0, 9))  # CRC32C 0xe3069283
'0xc78ab0e5'
"""

import numba
import numpy as np

_ATTEMPTS_BEFORE_CHECK = 64  # sampling._MAX_ATTEMPTS_BEFORE_CHECK


def _crc_tables() -> np.ndarray:
  """CRC32C (Castagnoli, reflected) tables for slicing by 8: int64 [8, 256]."""
  t = np.zeros((8, 256), dtype=np.int64)
  for i in range(256):
    c = i
    for _ in range(8):
      c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    t[0, i] = c
  for k in range(1, 8):
    for i in range(256):
      prev = int(t[k - 1, i])
      t[k, i] = (prev >> 8) ^ int(t[0, prev & 0xFF])
  return t


def _njit(fn):
  try:
    return numba.njit(cache=True, nogil=True)(fn)
  except RuntimeError:  # no writable cache directory: compile in every process
    return numba.njit(nogil=True)(fn)


_CRC = _crc_tables()
_U = np.uint64
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_STREAM_MUL = np.uint64(0xD1B54A32D192ED03)
_S30, _S27, _S31, _S11, _S32 = _U(30), _U(27), _U(31), _U(11), _U(32)
_INV53 = 1.0 / (1 << 53)


@_njit
def _mix64(z):
  z = (z ^ (z >> _S30)) * _M1
  z = (z ^ (z >> _S27)) * _M2
  return z ^ (z >> _S31)


@_njit
def _stream_key(key, stream):
  return _mix64(key ^ (_U(stream) * _STREAM_MUL))


@_njit
def _unit(bits):
  return np.float64(bits >> _S11) * _INV53


@_njit
def _alias_draw(bits, shift, threshold, alias):
  col = np.int64(bits >> shift)
  low = bits & _U(0xFFFFFFFF)
  return np.int32(alias[col] + 1) if low >= threshold[col] else np.int32(col + 1)


@_njit
def _contains(arr, lo, hi, value):
  for i in range(lo, hi):
    if arr[i] == value:
      return True
  return False


@_njit
def _covers_noise(arr, lo, hi, noise_words):
  """True if arr[lo:hi] holds at least `noise_words` distinct positive ids."""
  vals = np.sort(arr[lo:hi])
  distinct = 0
  prev = -1
  for v in vals:
    if v > 0 and v != prev:
      distinct += 1
    prev = v
  return distinct >= noise_words


@_njit
def _draw_slots(out, out_pos, count, noise_key, counter0, key, excl, elo, ehi,
                shift, threshold, alias, noise_words):
  """Fills out[out_pos:out_pos + count] with noise words not in excl[elo:ehi].

  Slot j draws from position counter0 + j of the noise stream, and on a hit
  from the same position of stream 3 + (attempt << 8). Returns False if the
  excluded words cover every noise word (nothing can be drawn).
  """
  # First every slot's first draw (a loop without branches), then the checks.
  for j in range(count):
    bits = _mix64(noise_key + _U(counter0 + j) * _GOLDEN)
    out[out_pos + j] = _alias_draw(bits, shift, threshold, alias)
  for j in range(count):
    draw = out[out_pos + j]
    hit = False
    for i in range(elo, ehi):
      hit |= excl[i] == draw
    if not hit:
      continue
    counter = _U(counter0 + j) * _GOLDEN
    attempt = 0
    while _contains(excl, elo, ehi, draw):
      attempt += 1
      if attempt % _ATTEMPTS_BEFORE_CHECK == 0 and _covers_noise(excl, elo, ehi, noise_words):
        return False
      retry_key = _stream_key(key, 3 + (attempt << 8))
      draw = _alias_draw(_mix64(retry_key + counter), shift, threshold, alias)
    out[out_pos + j] = draw
  return True


@_njit
def sample_kernel(ids, lengths, keys, keep_prob, threshold, alias, log2_size, width, k,
                  model, with_negatives, noise_words):
  """Samples a group of sentences; see `sampling.SkipGramSampler.sample`.

  Returns (centers int32, owner int64 (sentence within the group),
  num_contexts int64, contexts int32, negatives int32, subsampled tokens,
  failed sentence within the group or -1).
  """
  num_s = len(lengths)
  toks = np.empty(len(ids), dtype=np.int32)
  tlen = np.zeros(num_s, dtype=np.int64)
  pos = 0
  kept = 0
  for s in range(num_s):
    keep_key = _stream_key(keys[s], 1)
    for p in range(lengths[s]):
      w = ids[pos + p]
      if _unit(_mix64(keep_key + _U(p) * _GOLDEN)) < keep_prob[w]:
        toks[kept] = w
        kept += 1
        tlen[s] += 1
    pos += lengths[s]
  subsampled = kept
  shift = _U(64 - log2_size)
  empty32 = np.zeros(0, dtype=np.int32)
  if model == 3:  # PV-DBOW: every kept token is a target
    owner = np.empty(kept, dtype=np.int64)
    negatives = np.empty(kept * k if with_negatives else 0, dtype=np.int32)
    t = 0
    for s in range(num_s):
      noise_key = _stream_key(keys[s], 3)
      for p in range(tlen[s]):
        owner[t] = s
        if with_negatives and k > 0:
          if not _draw_slots(negatives, t * k, k, noise_key, p * k, keys[s], toks, t, t + 1,
                             shift, threshold, alias, noise_words):
            return (toks[:0], owner[:0], np.zeros(0, np.int64), empty32, empty32,
                    subsampled, s)
        t += 1
    return (toks[:kept].copy(), owner, np.zeros(kept, np.int64), empty32, negatives,
            subsampled, -1)
  # Sentences with fewer than 2 kept tokens give no centers.
  num_c = 0
  for s in range(num_s):
    if tlen[s] >= 2:
      num_c += tlen[s]
  centers = np.empty(num_c, dtype=np.int32)
  owner = np.empty(num_c, dtype=np.int64)
  num_ctx = np.empty(num_c, dtype=np.int64)
  contexts = np.empty(num_c * 2 * width, dtype=np.int32)  # at most 2W per center
  draw = with_negatives and k > 0
  # Skip-gram: K per context, excluding the contexts; CBOW, PV-DM: K per
  # center, excluding the center and its contexts.
  per_center = k * 2 * width if model == 0 else k
  negatives = np.empty(num_c * per_center if draw else 0, dtype=np.int32)
  excl = np.empty(2 * width + 1, dtype=np.int32)
  c = 0
  t0 = 0
  q = 0
  for s in range(num_s):
    n = tlen[s]
    if n >= 2:
      win_key = _stream_key(keys[s], 2)
      noise_key = _stream_key(keys[s], 3)
      for p in range(n):
        win = 1 + np.int64(_unit(_mix64(win_key + _U(p) * _GOLDEN)) * width)
        lo = max(p - win, 0)
        hi = min(p + win + 1, n)
        centers[c] = toks[t0 + p]
        owner[c] = s
        m = hi - lo - 1
        num_ctx[c] = m
        for j in range(lo, hi):
          if j != p:
            contexts[q] = toks[t0 + j]
            q += 1
        if draw:
          if model == 0:
            ok = _draw_slots(negatives, (q - m) * k, k * m, noise_key, p * (2 * width * k),
                             keys[s], contexts, q - m, q, shift, threshold, alias, noise_words)
          else:
            excl[0] = centers[c]
            excl[1:m + 1] = contexts[q - m:q]
            ok = _draw_slots(negatives, c * k, k, noise_key, p * k, keys[s], excl, 0, m + 1,
                             shift, threshold, alias, noise_words)
          if not ok:
            return centers, owner, num_ctx, contexts[:0], empty32, subsampled, s
        c += 1
    t0 += n
  contexts = contexts[:q].copy()
  if not draw:
    negatives = empty32
  elif model == 0:
    negatives = negatives[:q * k].copy()
  return centers, owner, num_ctx, contexts, negatives, subsampled, -1


@_njit
def _crc32c(buf, start, end):
  crc = np.int64(0xFFFFFFFF)
  i = start
  while i + 8 <= end:
    one = crc ^ (np.int64(buf[i]) | (np.int64(buf[i + 1]) << 8)
                 | (np.int64(buf[i + 2]) << 16) | (np.int64(buf[i + 3]) << 24))
    two = (np.int64(buf[i + 4]) | (np.int64(buf[i + 5]) << 8)
           | (np.int64(buf[i + 6]) << 16) | (np.int64(buf[i + 7]) << 24))
    crc = (_CRC[7, one & 0xFF] ^ _CRC[6, (one >> 8) & 0xFF] ^ _CRC[5, (one >> 16) & 0xFF]
           ^ _CRC[4, (one >> 24) & 0xFF] ^ _CRC[3, two & 0xFF] ^ _CRC[2, (two >> 8) & 0xFF]
           ^ _CRC[1, (two >> 16) & 0xFF] ^ _CRC[0, (two >> 24) & 0xFF])
    i += 8
  while i < end:
    crc = _CRC[0, (crc ^ np.int64(buf[i])) & 0xFF] ^ (crc >> 8)
    i += 1
  return crc ^ 0xFFFFFFFF


@_njit
def crc32c_masked(buf, start, end):
  """TFRecord's masked CRC32C of buf[start:end]."""
  crc = _crc32c(buf, start, end)
  return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


@_njit
def _vlen(v):
  n = 1
  while v >= 128:
    v >>= 7
    n += 1
  return n


@_njit
def _put_varint(buf, pos, v):
  while v >= 128:
    buf[pos] = np.uint8((v & 0x7F) | 0x80)
    v >>= 7
    pos += 1
  buf[pos] = np.uint8(v)
  return pos + 1


@_njit
def _put_fixed(buf, pos, v, width):
  for i in range(width):
    buf[pos + i] = np.uint8((v >> (8 * i)) & 0xFF)
  return pos + width


@_njit
def encode_kernel(values, value_start, lengths, key_bytes, key_start):
  """Framed records; feature f of record r holds lengths[f, r] values.

  values: int64, the features' values concatenated, feature f's from
  value_start[f]; key_bytes: each feature's key piece (0x0A, varint(len),
  name), from key_start[f]. Returns (bytes uint8, record offsets [n + 1]),
  or an empty buffer and offsets [-1] for a negative value.
  """
  nf, n = lengths.shape
  payload = np.zeros((nf, n), dtype=np.int64)
  rec_off = np.zeros(n + 1, dtype=np.int64)
  features_len = np.empty(n, dtype=np.int64)
  for f in range(nf):
    v = value_start[f]
    for r in range(n):
      p = 0
      for _ in range(lengths[f, r]):
        x = values[v]
        if x < 0:
          return np.zeros(0, np.uint8), np.full(1, -1, np.int64)
        p += _vlen(x)
        v += 1
      payload[f, r] = p
  for r in range(n):
    flen = 0
    for f in range(nf):
      p = payload[f, r]
      packed = 1 + _vlen(p) + p if p > 0 else 0
      feature = 1 + _vlen(packed) + packed
      entry = key_start[f + 1] - key_start[f] + 1 + _vlen(feature) + feature
      flen += 1 + _vlen(entry) + entry
    features_len[r] = flen
    rec_off[r + 1] = rec_off[r] + 16 + 1 + _vlen(flen) + flen
  buf = np.empty(rec_off[n], dtype=np.uint8)
  vpos = value_start[:nf].copy()
  for r in range(n):
    pos = rec_off[r]
    ex = rec_off[r + 1] - pos - 16
    pos = _put_fixed(buf, pos, ex, 8)
    pos = _put_fixed(buf, pos, crc32c_masked(buf, pos - 8, pos), 4)
    data = pos
    buf[pos] = 0x0A
    pos = _put_varint(buf, pos + 1, features_len[r])
    for f in range(nf):
      p = payload[f, r]
      packed = 1 + _vlen(p) + p if p > 0 else 0
      feature = 1 + _vlen(packed) + packed
      entry = key_start[f + 1] - key_start[f] + 1 + _vlen(feature) + feature
      buf[pos] = 0x0A
      pos = _put_varint(buf, pos + 1, entry)
      for i in range(key_start[f], key_start[f + 1]):
        buf[pos] = key_bytes[i]
        pos += 1
      buf[pos] = 0x12
      pos = _put_varint(buf, pos + 1, feature)
      buf[pos] = 0x1A
      pos = _put_varint(buf, pos + 1, packed)
      if p > 0:
        buf[pos] = 0x0A
        pos = _put_varint(buf, pos + 1, p)
        v = vpos[f]
        for _ in range(lengths[f, r]):
          pos = _put_varint(buf, pos, values[v])
          v += 1
        vpos[f] = v
    pos = _put_fixed(buf, pos, crc32c_masked(buf, data, pos), 4)
  return buf, rec_off


_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)


@_njit
def count_kernel(data, space):
  """Splits UTF-8 text into tokens as `str.split()` does and numbers them.

  data: the text's bytes (valid UTF-8, no NUL); "\\n" ends a line. space:
  bool per code point below len(space), True for whitespace (`str.isspace`;
  none lies above). Returns (local_ids int32: per token its index among the
  distinct tokens in first-occurrence order, and -1 after every line, the
  last included; first int64: byte offset of each distinct token's first
  occurrence; length int64: its bytes; counts int64: its occurrences).
  See `corpus.count_chunk` (the same result from Python strings). One loop
  with no calls inside: a call that passes an array costs two atomic
  reference count updates, more than the work per byte.

  >>> ids, first, length, counts = count_kernel(np.frombuffer(b"a bb\\na", np.uint8).copy(),
  ...                                           np.array([c in (10, 32) for c in range(128)]))
  >>> ids.tolist(), first.tolist(), length.tolist(), counts.tolist()
  ([0, 1, -1, 0, -1], [0, 2], [1, 2], [2, 1])
  """
  n = len(data)
  num_space = len(space)
  ids = np.empty(n + 1, dtype=np.int32)
  most = n // 2 + 1  # distinct tokens at most
  first = np.empty(most, dtype=np.int64)
  length = np.empty(most, dtype=np.int64)
  hashes = np.empty(most, dtype=np.uint64)
  counts = np.zeros(most, dtype=np.int64)
  mask = np.int64(1023)
  table = np.full(mask + 1, -1, dtype=np.int32)
  distinct = 0
  m = 0
  start = np.int64(-1)
  h = _FNV_OFFSET
  i = np.int64(0)
  while i <= n:
    # The width in bytes of the whitespace character at i (0: not whitespace).
    width = np.int64(1)
    newline = True
    if i < n:
      b = np.int64(data[i])
      newline = b == 10
      if b < 0x80:
        width = np.int64(1) if b < num_space and space[b] else np.int64(0)
      elif b < 0xC0 or b >= 0xF0:  # inside a character, or above every space
        width = np.int64(0)
      else:
        if b < 0xE0:
          cp = ((b & 0x1F) << 6) | (np.int64(data[i + 1]) & 0x3F)
          width = np.int64(2)
        else:
          cp = (((b & 0x0F) << 12) | ((np.int64(data[i + 1]) & 0x3F) << 6)
                | (np.int64(data[i + 2]) & 0x3F))
          width = np.int64(3)
        if cp >= num_space or not space[cp]:
          width = np.int64(0)
      if width == 0:
        if start < 0:
          start = i
          h = _FNV_OFFSET
        h = (h ^ _U(b)) * _FNV_PRIME
        i += 1
        continue
    if start >= 0:  # the token data[start:i] ends
      size = i - start
      slot = np.int64(h & _U(mask))
      while True:
        t = table[slot]
        if t < 0:
          t = distinct
          table[slot] = t
          first[t] = start
          length[t] = size
          hashes[t] = h
          distinct += 1
          if 2 * distinct > mask:  # grow and re-insert
            mask = 2 * mask + 1
            table = np.full(mask + 1, -1, dtype=np.int32)
            for u in range(distinct):
              slot = np.int64(hashes[u] & _U(mask))
              while table[slot] >= 0:
                slot = (slot + 1) & mask
              table[slot] = u
          break
        if hashes[t] == h and length[t] == size:
          same = True
          a = first[t]
          for j in range(size):
            if data[a + j] != data[start + j]:
              same = False
              break
          if same:
            break
        slot = (slot + 1) & mask
      counts[t] += 1
      ids[m] = t
      m += 1
      start = -1
    if newline:
      ids[m] = -1
      m += 1
    i += width
  return ids[:m].copy(), first[:distinct].copy(), length[:distinct].copy(), \
      counts[:distinct].copy()


@_njit
def alias_kernel(scaled):
  """Vose's alias construction of `sampling.AliasTable`, step for step (same floats).

  scaled: float64 column weights summing to the number of columns.
  Returns (prob float64, alias int64).
  """
  size = len(scaled)
  scaled = scaled.copy()
  prob = np.ones(size)
  alias = np.arange(size)
  small = np.empty(size, dtype=np.int64)
  large = np.empty(size, dtype=np.int64)
  ns = 0
  nl = 0
  for i in range(size):
    ns, nl = _file_column(i, scaled, small, large, ns, nl)
  while ns > 0 and nl > 0:
    ns -= 1
    nl -= 1
    sm = small[ns]
    lg = large[nl]
    prob[sm] = scaled[sm]
    alias[sm] = lg
    scaled[lg] = scaled[lg] + scaled[sm] - 1.0
    ns, nl = _file_column(lg, scaled, small, large, ns, nl)
  return prob, alias


@_njit
def _file_column(col, scaled, small, large, ns, nl):
  """Pushes column `col` on the small (weight below 1) or the large stack; returns
  the stacks' new sizes."""
  if scaled[col] < 1.0:
    small[ns] = col
    return ns + 1, nl
  large[nl] = col
  return ns, nl + 1


def prepare():
  """Compiles (or loads from the cache) every kernel with the argument types
  the callers use, so that forked workers inherit them."""
  ids = np.array([1, 2, 1, 2], dtype=np.int32)
  lengths = np.array([4], dtype=np.int64)
  keys = np.array([1], dtype=np.uint64)
  keep = np.ones(3, dtype=np.float64)
  threshold = np.full(2, 1 << 31, dtype=np.uint32)
  alias = np.array([1, 0], dtype=np.int32)
  for model in (0, 1, 3):
    sample_kernel(ids, lengths, keys, keep, threshold, alias, 1, 2, 1, model, True, 2)
  alias_kernel(np.array([0.5, 1.5]))
  count_kernel(np.frombuffer(b"a b\n", np.uint8).copy(), np.array([c <= 32 for c in range(128)]))
  encode_kernel(np.array([1, 300], dtype=np.int64), np.array([0, 2], dtype=np.int64),
                np.array([[2]], dtype=np.int64), np.frombuffer(b"\x0a\x01a", np.uint8).copy(),
                np.array([0, 3], dtype=np.int64))


SAMPLE_SIGNATURE = ("Tuple((int32[:], int64[:], int64[:], int32[:], int32[:], int64, int64))"
                    "(int32[:], int64[:], uint64[:], float64[:], uint32[:], int32[:], int64, "
                    "int64, int64, int64, boolean, int64)")
ENCODE_SIGNATURE = "Tuple((uint8[:], int64[:]))(int64[:], int64[:], int64[:, :], uint8[:], int64[:])"
ALIAS_SIGNATURE = "Tuple((float64[:], int64[:]))(float64[:])"
COUNT_SIGNATURE = "Tuple((int32[:], int64[:], int64[:], int64[:]))(uint8[:], boolean[:])"


def build_module(output_dir: str, name: str):
  """Compiles the kernels ahead of time (numba.pycc) into extension module `name`.

  The module has sample_kernel and encode_kernel with the signatures above
  and imports without numba (see `w2v_data.kernel_loader`).
  """
  import warnings  # pylint: disable=import-outside-toplevel
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from numba.pycc import CC  # pylint: disable=import-outside-toplevel
    cc = CC(name)
    cc.output_dir = output_dir
    cc.verbose = False
    cc.export("sample_kernel", SAMPLE_SIGNATURE)(sample_kernel.py_func)
    cc.export("encode_kernel", ENCODE_SIGNATURE)(encode_kernel.py_func)
    cc.export("alias_kernel", ALIAS_SIGNATURE)(alias_kernel.py_func)
    cc.export("count_kernel", COUNT_SIGNATURE)(count_kernel.py_func)
    cc.compile()


if __name__ == "__main__":  # python -m w2v_data.kernels OUTPUT_DIR MODULE_NAME
  import sys  # pylint: disable=import-outside-toplevel
  build_module(sys.argv[1], sys.argv[2])
