"""Sharded passes: vocabularies from distributed counts, with no step that
holds every distinct token of the corpus.

A `protocol.Pass` whose partials are keyed by token (token counts) may
declare `shards=K`, `split` and `select`. The engines then run it as:

  1. map: each unit's partial, as for any pass;
  2. split: `split(partial, K)` cuts it into K partials by `shard_of` (a
     stable hash of the token, the same in every process; Python's `hash()`
     is salted per process), small per-unit data and sums going to one of
     them (shard 0);
  3. merge per shard: each shard's partials merged on their own (Beam: a
     CombinePerKey over the shard index; Dask: a tree per shard);
  4. select: `select(shard's merged partial)` keeps what can reach the
     value (tokens at or above the min count, the shard's top-k candidates)
     and the small sums, so it is bounded by the vocabulary, not the corpus;
  5. the selected parts merged (the one global step) and finished.

A token lives in one shard, so its count there is its corpus count: a
min-count filter per shard keeps exactly the tokens the global filter
keeps, and a token in the global top k is in its shard's top k. Each
partial carries every token's first occurrence, so ties still break in
first-seen order. `finish` must give the same value from the selected parts
as from one merge of every partial (`value_in_one_process` does both ways in
one process; the local engine merges every partial, as before).

The helpers here are engine-free; `engine.beam` and `engine.dask` call
`keyed_pieces`, `merge_split` and `select_pass`.
"""

import collections
import heapq
import zlib
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from textrecords.engine import protocol

SHARDS = 32  # shards of a token-count pass (the bytes do not depend on it)


def shard_of(token: str, shards: int) -> int:
  """The token's shard: crc32 of its UTF-8 bytes (lone surrogates kept), the
  same in every process and on every machine.

  >>> shard_of("the", 32), shard_of("a", 2), shard_of("d", 2)
  (6, 1, 0)
  """
  return zlib.crc32(token.encode("utf-8", "surrogatepass")) % shards


def shards_of(tokens: Sequence[str], shards: int) -> np.ndarray:
  """`shard_of` of each token, as an int64 array."""
  return np.fromiter((shard_of(t, shards) for t in tokens), np.int64, len(tokens))


def positions_by_shard(tokens: Sequence[str], shards: int) -> List[np.ndarray]:
  """For each shard, the positions of its tokens in `tokens` (ascending).

  >>> [p.tolist() for p in positions_by_shard(["a", "d", "a"], 2)]
  [[1], [0, 2]]
  """
  where = shards_of(tokens, shards)
  order = np.argsort(where, kind="stable")
  bounds = np.searchsorted(where[order], np.arange(shards + 1))
  return [order[bounds[s]:bounds[s + 1]] for s in range(shards)]


# -------------------------------------------------- first-seen counts (dicts)

def split_first_seen(entries: Dict[str, list], shards: int) -> List[Dict[str, list]]:
  """First-seen counts (token -> [count, first]) cut into `shards` dicts.

  >>> split_first_seen({"a": [1, (0, 0)], "d": [2, (0, 1)]}, 2)
  [{'d': [2, (0, 1)]}, {'a': [1, (0, 0)]}]
  """
  out: List[Dict[str, list]] = [{} for _ in range(shards)]
  for t, entry in entries.items():
    out[shard_of(t, shards)][t] = entry
  return out


def select_first_seen(entries: Dict[str, list], min_count: int,
                      top_k: Optional[int] = None) -> Dict[str, list]:
  """The entries that can be in a vocabulary of the tokens seen at least
  `min_count` times, at most `top_k` of them (most frequent first, ties by
  first occurrence).

  >>> e = {"a": [1, (0, 0)], "b": [3, (0, 1)], "c": [3, (0, 2)], "d": [2, (1, 0)]}
  >>> select_first_seen(e, 2), select_first_seen(e, 1, top_k=2)
  ({'b': [3, (0, 1)], 'c': [3, (0, 2)], 'd': [2, (1, 0)]}, {'b': [3, (0, 1)], 'c': [3, (0, 2)]})
  """
  kept = {t: e for t, e in entries.items() if e[0] >= min_count}
  if top_k is not None and len(kept) > top_k:
    kept = dict(heapq.nsmallest(top_k, kept.items(), key=lambda kv: (-kv[1][0], kv[1][1])))
  return kept


# -------------------------------------------------- first-seen counts (arrays)

_RANK_BITS = 32  # a first occurrence: (place << _RANK_BITS) + rank in the place


class FirstSeenCounts:
  """Token counts with each token's first occurrence, as arrays: what
  `split_first_seen`'s dicts hold, merged with one dict lookup a token and
  numpy, not a Python loop comparing (place, rank) tuples. A first
  occurrence is (place << 32) + rank: a place (unit or pair number) below
  2**31 and a rank below 2**32 order as the (place, rank) tuples do.

  >>> a = FirstSeenCounts.ranked(1, ["x", "y"], [1, 1])
  >>> a.add(FirstSeenCounts.ranked(0, ["y"], [2])).counter()
  Counter({'y': 3, 'x': 1})
  """

  def __init__(self, tokens: Sequence[str] = (), first=(), counts=()):
    self.slot: Dict[str, int] = dict(zip(tokens, range(len(tokens))))
    self.first = np.array(first, np.int64)
    self.total = np.array(counts, np.int64)

  @classmethod
  def ranked(cls, place: int, distinct: Sequence[str], counts) -> "FirstSeenCounts":
    """One place's distinct tokens, in first-occurrence order, and their counts."""
    ranks = np.arange(len(distinct), dtype=np.int64)
    return cls(distinct, (int(place) << _RANK_BITS) + ranks, counts)

  def __len__(self) -> int:
    return len(self.slot)

  def __getstate__(self) -> dict:
    n = len(self.slot)  # (pickled without the spare capacity)
    return dict(self.__dict__, first=self.first[:n], total=self.total[:n])

  def arrays(self) -> Tuple[List[str], np.ndarray, np.ndarray]:
    """(tokens, their first occurrences, their counts), in slot order."""
    n = len(self.slot)
    return list(self.slot), self.first[:n], self.total[:n]

  def add(self, other: "FirstSeenCounts") -> "FirstSeenCounts":
    """Merges `other` into this one (any order gives the same); returns it."""
    self._add(*other.arrays())
    return self

  def _add(self, tokens: Sequence[str], first: np.ndarray, counts: np.ndarray) -> None:
    """Adds distinct `tokens` with their first occurrences and counts."""
    slot = self.slot
    slots = np.fromiter([slot.setdefault(t, len(slot)) for t in tokens], np.int64, len(tokens))
    if len(slot) > len(self.total):
      size = max(len(slot), 2 * len(self.total), 1024)
      self.first = np.concatenate([self.first, np.full(size - len(self.first),
                                                       np.iinfo(np.int64).max)])
      self.total = np.concatenate([self.total, np.zeros(size - len(self.total), np.int64)])
    self.first[slots] = np.minimum(self.first[slots], first)  # (tokens are distinct)
    self.total[slots] += counts

  def take(self, where: np.ndarray) -> "FirstSeenCounts":
    """The entries at slots `where` (in that order)."""
    tokens, first, counts = self.arrays()
    return FirstSeenCounts([tokens[i] for i in where.tolist()], first[where], counts[where])

  def split(self, shards: int) -> List["FirstSeenCounts"]:
    """Cut into `shards` parts by `shard_of` (as `split_first_seen`)."""
    return [self.take(where) for where in positions_by_shard(list(self.slot), shards)]

  def select(self, min_count: int) -> "FirstSeenCounts":
    """The entries seen `min_count` times or more (as `select_first_seen`)."""
    return self.take(np.flatnonzero(self.arrays()[2] >= min_count))

  def counter(self) -> "collections.Counter":
    """The counts as a Counter filled in first-occurrence order (as
    `vocab.first_seen_counter`)."""
    tokens, first, counts = self.arrays()
    order = np.argsort(first, kind="stable").tolist()
    return collections.Counter(dict(zip([tokens[i] for i in order], counts[order].tolist())))


# -------------------------------------------------- what the engines call

def is_sharded(p: protocol.Pass) -> bool:
  """True when the pass declares shards (and so split and select)."""
  return p.shards > 0


def split_pieces(p: protocol.Pass, partial: Any) -> List[Any]:
  """`p.split` of a partial: `p.shards` partials (None: empty); all None
  for a None partial."""
  if partial is None:
    return [None] * p.shards
  pieces = list(p.split(partial, p.shards))
  if len(pieces) != p.shards:
    raise ValueError(f"pass {p.name}: split gave {len(pieces)} pieces, not {p.shards}")
  return pieces


def keyed_pieces(p: protocol.Pass, partial: Any) -> List[Tuple[int, Any]]:
  """(shard, piece) of a partial's pieces that are not None."""
  return [(s, x) for s, x in enumerate(split_pieces(p, partial)) if x is not None]


def merge_split(p: protocol.Pass, partials: Iterable[Any]) -> List[Any]:
  """Partials (e.g. a few units') merged, then split into shards."""
  return split_pieces(p, protocol.merge_all(p, partials))


def select_pass(p: protocol.Pass, merged: Any) -> Any:
  """`p.select` of a shard's merged partial (None stays None)."""
  return None if merged is None else p.select(merged)


def value_in_one_process(p: protocol.Pass, partials: Sequence[Any]) -> Any:
  """The pass's value the sharded way, in this process: every partial split,
  each shard merged and selected, the selected parts merged and finished
  (equal to `p.finish` of one merge of every partial)."""
  by_shard: List[List[Any]] = [[] for _ in range(p.shards)]
  for partial in partials:
    for s, piece in keyed_pieces(p, partial):
      by_shard[s].append(piece)
  selected = [select_pass(p, protocol.merge_all(p, pieces)) for pieces in by_shard]
  return p.finish(protocol.merge_all(p, selected))
