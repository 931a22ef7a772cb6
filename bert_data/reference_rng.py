"""CPython's `random.Random` (Mersenne Twister MT19937), replicated for numba.

The reference draws everything from one `random.Random`; compiled code makes
the same draws from the same state, and the state moves between the two
with `to_state` / `set_state` (`random.Random.getstate()` holds the 624-word
MT19937 state and the position in it). What CPython 3.11 does, and this
module mirrors:

- `getrandbits(k)`, 0 < k <= 32: the next 32-bit output >> (32 - k);
- `_randbelow(n)`: draw k = n.bit_length() bits, redraw while >= n;
- `randint(a, b)`: a + _randbelow(b - a + 1);
- `random()`: ((a >> 5) * 67108864 + (b >> 6)) / 2**53 from two outputs;
- `shuffle(x)`: for i = len(x) - 1 down to 1, swap x[i] and x[_randbelow(i + 1)].

The functions take the state as a uint32 array of 625 entries (624 words,
then the position) and update it in place. They are compiled with numba
when it is installed (the `fast` extra) and plain Python otherwise (slow;
tests only).

Example (the same numbers as Python's own RNG):
  >>> import random
  >>> r = random.Random(7)
  >>> st = to_state(r)
  >>> [randint(st, 1, 6) for _ in range(5)] == [r.randint(1, 6) for _ in range(5)]
  True
"""

import random as _random

import numpy as np

try:
  import numba
except ImportError:  # the `fast` extra is not installed
  numba = None

N = 624  # words of MT19937 state
_M = 397


def available() -> bool:
  """Whether numba is installed (compiled walks are possible)."""
  return numba is not None


def jit(fn=None, inline: bool = False):
  """numba.njit(cache=True) if numba is installed, else `fn` itself.

  inline: inline the function into its compiled callers (numba does not
  always do it for small functions, and a draw costs a few nanoseconds).
  """
  if fn is None:
    return lambda f: jit(f, inline)
  if numba is None:
    return fn
  options = dict(nogil=True, inline="always" if inline else "never")
  try:
    return numba.njit(cache=True, **options)(fn)
  except RuntimeError:  # no writable cache directory: compile in every process
    return numba.njit(**options)(fn)


def to_state(rng: _random.Random) -> np.ndarray:
  """`rng`'s MT19937 state as a uint32 array: 624 words, then the position.

  >>> to_state(_random.Random(0)).shape
  (625,)
  """
  version, internal, _ = rng.getstate()
  if version != 3 or len(internal) != N + 1:
    raise ValueError(f"unexpected random.Random state version {version}")
  return np.asarray(internal, np.uint32)


def set_state(rng: _random.Random, state: np.ndarray) -> None:
  """Puts the state back into `rng` (its gauss cache is kept)."""
  _, _, gauss = rng.getstate()
  rng.setstate((3, tuple(state.tolist()), gauss))


@jit(inline=True)
def _mix(st, k: int, k1: int, km: int) -> None:
  y = (np.uint32(st[k]) & np.uint32(0x80000000)) | (np.uint32(st[k1]) & np.uint32(0x7fffffff))
  v = np.uint32(st[km]) ^ (y >> np.uint32(1))
  if y & np.uint32(1):
    v ^= np.uint32(0x9908b0df)
  st[k] = v


@jit
def _twist(st) -> None:
  """The next 624 words, in place (word k mixes k, k + 1 and k + 397, mod 624,
  later words seeing the earlier ones' new values)."""
  for k in range(N - _M):
    _mix(st, k, k + 1, k + _M)
  for k in range(N - _M, N - 1):
    _mix(st, k, k + 1, k + _M - N)
  _mix(st, N - 1, 0, _M - 1)


@jit(inline=True)
def next32(st) -> int:
  """The next 32-bit output (CPython's genrand_uint32), as an int64."""
  i = np.int64(st[N])
  if i >= N:
    _twist(st)
    i = 0
  st[N] = i + 1
  return _temper(st[i])


@jit(inline=True)
def _temper(word) -> int:
  y = np.uint32(word)
  y ^= y >> np.uint32(11)
  y ^= (y << np.uint32(7)) & np.uint32(0x9d2c5680)
  y ^= (y << np.uint32(15)) & np.uint32(0xefc60000)
  y ^= y >> np.uint32(18)
  return np.int64(y)


@jit(inline=True)
def getrandbits(st, k: int) -> int:
  """`random.getrandbits(k)` for 0 < k <= 32."""
  return next32(st) >> (32 - k)


@jit(inline=True)
def _bit_length(n: int) -> int:
  k = 0
  while n >= 256:
    n >>= 8
    k += 8
  while n:
    n >>= 1
    k += 1
  return k


@jit(inline=True)
def randbelow(st, n: int) -> int:
  """`random.Random._randbelow(n)` for 0 < n < 2**32: uniform in [0, n)."""
  k = _bit_length(n)
  r = getrandbits(st, k)
  while r >= n:
    r = getrandbits(st, k)
  return r


@jit(inline=True)
def randint(st, a: int, b: int) -> int:
  """`random.randint(a, b)` (b - a < 2**32)."""
  return a + randbelow(st, b - a + 1)


@jit(inline=True)
def uniform(st) -> float:
  """`random.random()`: 53 random bits from two outputs."""
  a = next32(st) >> 5
  b = next32(st) >> 6
  return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0)


@jit
def shuffle(st, x) -> None:
  """`random.shuffle(x)` of a 1-D array, in place.

  Branch-free: every output either is accepted as j = randbelow(i + 1)
  (swap, next i) or rejected (swap of x[i] with itself, same i), which
  saves the mispredicted branches of the rejection loop.
  """
  i = len(x) - 1
  k = _bit_length(len(x))  # bit length of i + 1, kept up to date as i falls
  pos = np.int64(st[N])  # the position in the state, held here
  while i >= 1:
    m = i + 1
    k -= m < (np.int64(1) << (k - 1))
    if pos >= N:
      _twist(st)
      pos = 0
    j = _temper(st[pos]) >> (32 - k)
    pos += 1
    ok = j < m
    jj = j if ok else i
    t = x[i]
    x[i] = x[jj]
    x[jj] = t
    i -= ok
  st[N] = pos


def shuffled_range(rng: _random.Random, n: int) -> np.ndarray:
  """`list(range(n))` after `rng.shuffle`, as int64, and `rng` advanced alike.

  >>> r1, r2 = _random.Random(5), _random.Random(5)
  >>> want = list(range(9)); r1.shuffle(want)
  >>> shuffled_range(r2, 9).tolist() == want and r1.random() == r2.random()
  True
  """
  st = to_state(rng)
  out = np.arange(n, dtype=np.int64)
  shuffle(st, out)
  set_state(rng, st)
  return out
