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


def rng_for(seed: int, *key) -> random.Random:
  """A `random.Random` for one unit of work."""
  return random.Random(derive_seed(seed, *key))


def np_rng_for(seed: int, *key) -> np.random.Generator:
  """A numpy Generator (PCG64) for one unit of work."""
  return np.random.Generator(np.random.PCG64(derive_seed(seed, *key)))


def order_key(seed: int, *key) -> int:
  """A keyed 64-bit hash that fixes a record's place in the output order."""
  h = hashlib.blake2b(_key_bytes((seed,) + key), digest_size=8, person=b"tr-order")
  return int.from_bytes(h.digest(), "big")


def shard_of(key: int, num_shards: int) -> int:
  """The shard a record with this 64-bit order key lands in (range partition)."""
  return (key * num_shards) >> 64
