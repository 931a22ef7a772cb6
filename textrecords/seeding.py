"""The one place seeds are derived: per-unit RNGs and keyed-hash ordering.

Every unit of work (a document in a dupe round, a sentence, a pair) gets its
own RNG derived from (seed, unit key), so results never depend on which worker
handled the unit or in what order. Records are ordered by a keyed 64-bit hash
of (seed, unit key, index), as tensorflow_datasets orders examples.

>>> derive_seed(1, "doc", 3) == derive_seed(1, "doc", 3)
True
>>> rng_for(1, 0, 3).random() == rng_for(1, 0, 3).random()
True
"""

import hashlib
import random

import numpy as np


def _key_bytes(parts) -> bytes:
  return "\x1f".join(f"{type(p).__name__}:{p}" for p in parts).encode("utf-8")


def derive_seed(seed: int, *key) -> int:
  """A 64-bit seed that depends only on (seed, *key)."""
  h = hashlib.blake2b(_key_bytes((seed,) + key), digest_size=8, person=b"tr-seed")
  return int.from_bytes(h.digest(), "little")


def content_digest(data) -> int:
  """A 64-bit digest of a unit's content (bytes or a numpy array's bytes).

  Folded into a unit's key so that two different inputs never share draws
  (two corpora run with one seed get unrelated masks), while the same input
  still gets the same draws.

  >>> content_digest(np.arange(3, dtype=np.int32)) == content_digest(bytes([0,0,0,0,1,0,0,0,2,0,0,0]))
  True
  """
  if isinstance(data, np.ndarray):
    data = np.ascontiguousarray(data).tobytes()
  return int.from_bytes(hashlib.blake2b(data, digest_size=8, person=b"tr-content").digest(),
                        "little")


def rng_for(seed: int, *key) -> random.Random:
  """A `random.Random` for one unit of work."""
  return random.Random(derive_seed(seed, *key))


def order_key(seed: int, *key) -> int:
  """A keyed 64-bit hash that fixes a record's place in the output order."""
  h = hashlib.blake2b(_key_bytes((seed,) + key), digest_size=8, person=b"tr-order")
  return int.from_bytes(h.digest(), "big")


def shard_of(key: int, num_shards: int) -> int:
  """The shard a record with this 64-bit order key lands in (range partition)."""
  return (key * num_shards) >> 64


GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # SplitMix64's increment (2**64 / golden ratio)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def mix64(z: np.ndarray) -> np.ndarray:
  """SplitMix64's finalizer, elementwise on uint64 (a bijective 64-bit hash).

  The one counter-based RNG of the code base: SplitMix64(key, j) is
  mix64(key + j * GOLDEN), computed with wrapping arithmetic.

  >>> int(mix64(np.array([0], dtype=np.uint64))[0])
  0
  >>> int(mix64(np.array([1], dtype=np.uint64))[0]) == 0x5692161D100B05E5
  True
  """
  with np.errstate(over="ignore"):
    z = np.asarray(z, dtype=np.uint64)
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def to_unit(bits: np.ndarray) -> np.ndarray:
  """uint64 random bits -> float64 uniform on [0, 1) (the top 53 bits).

  >>> to_unit(np.array([0, 1 << 63, (1 << 64) - 1], np.uint64)).tolist()
  [0.0, 0.5, 0.9999999999999999]
  """
  return (bits >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def uniform_grid(keys: np.ndarray, stream: int, width: int) -> np.ndarray:
  """Counter-based uniforms in [0, 1): row i depends only on (keys[i], stream).

  A vectorized stand-in for one RNG per unit: unit i's numbers are
  SplitMix64(key_i, stream, j) for j < width, so any batch of units gives
  each unit the same numbers.

  >>> a = uniform_grid(np.array([5, 7], np.uint64), 0, 3)
  >>> b = uniform_grid(np.array([7], np.uint64), 0, 3)
  >>> bool((a[1] == b[0]).all()), a.shape, bool(((a >= 0) & (a < 1)).all())
  (True, (2, 3), True)
  """
  return to_unit(grid_bits(keys, stream, width))


def grid_bits(keys: np.ndarray, stream: int, width: int) -> np.ndarray:
  """The uint64 SplitMix64 bits behind `uniform_grid` (same rows, same streams)."""
  keys = np.asarray(keys, np.uint64)
  with np.errstate(over="ignore"):
    base = mix64(keys ^ (np.uint64(stream + 1) * GOLDEN))
    z = base[:, None] + (np.arange(1, width + 1, dtype=np.uint64) * GOLDEN)[None, :]
    return mix64(z)


def sub_keys(key: int, count: int) -> np.ndarray:
  """`count` 64-bit keys derived from one key: SplitMix64(key, k) for k < count.

  Used as the order keys of the k-th records of a unit whose own key comes
  from `order_key`, in one vectorized step.

  >>> ks = sub_keys(order_key(1, "doc", 3), 4)
  >>> ks.dtype, len(set(ks.tolist())), bool((sub_keys(order_key(1, "doc", 3), 2) == ks[:2]).all())
  (dtype('uint64'), 4, True)
  """
  with np.errstate(over="ignore"):
    z = np.uint64(key) + np.arange(1, count + 1, dtype=np.uint64) * GOLDEN
    return mix64(z)
