"""The Dask engine's pass merge (`textrecords.engine.dask._merged_pass`):
each group of units' merge folded into a running merge as it comes, a few
groups mapped ahead, so workers hold a bounded number of partials,
whatever the corpus.

The generators' bytes on Dask are tested in test_generator_engines.py and
test_sharded_pass.py."""

import os
import types

import pytest

from textrecords.engine import protocol
from textrecords.engine import sharded_pass
from textrecords.errors import UserError

pytest.importorskip("distributed")
from textrecords.engine import dask as dask_engine  # noqa: E402 (deferred: the dask extra)


def _gen(fail_at=()):
  """A generator with one pass over int units: each unit's partial is
  [unit]; merged, the sorted union; units in `fail_at` raise their own
  UserError. Closures, so they pickle by value to the workers."""
  failing = frozenset(fail_at)

  def map_unit(unit, _values):
    if unit in failing:
      raise UserError(f"unit {unit}: bad")
    return [unit]

  p = protocol.Pass(name="ids", map=map_unit, merge=lambda parts: sorted(sum(parts, [])),
                    finish=lambda merged: merged)
  return types.SimpleNamespace(passes=(p,))


class _EagerClient:
  """Runs each submitted task at once; counts the tasks."""

  def __init__(self):
    self.tasks = 0

  def submit(self, fn, *args, pure=True):
    del pure
    self.tasks += 1
    return fn(*args)


def test_fold_holds_one_running_merge_and_merges_all():
  gen, client = _gen(), _EagerClient()
  fold = dask_engine._Fold(client, gen, "ids")
  assert fold.merged is None
  for i in range(100):
    fold.add([i])
    assert fold.merged == list(range(i + 1))  # one value held, whatever was added
  assert client.tasks == 99


@pytest.fixture(scope="module")
def client():
  with dask_engine.client_for("", 1) as c:
    yield c


def test_merged_pass_of_many_units_equals_one_merge(client, monkeypatch):
  monkeypatch.setattr(dask_engine, "TREE_FAN_IN", 3)  # many groups, several in flight
  units = list(range(100))
  assert dask_engine._pass_value(client, _gen(), "ids", units, {}) == units
  assert dask_engine._pass_value(client, _gen(), "ids", [], {}) is None


def test_merged_pass_raises_the_first_failed_unit_in_order(client, monkeypatch):
  monkeypatch.setattr(dask_engine, "TREE_FAN_IN", 3)
  with pytest.raises(UserError, match="^unit 40: bad$"):
    dask_engine._pass_value(client, _gen(fail_at=(95, 40, 41)), "ids", list(range(100)), {})


def test_released_results_in_order_and_futures_dropped(client, monkeypatch):
  monkeypatch.setattr(dask_engine, "RESULTS_AT_ONCE", 4)
  futures = client.map(lambda x: x * x, range(10), pure=False)
  assert dask_engine._released_results(client, futures) == [x * x for x in range(10)]
  assert futures == [None] * 10

  def square_but_3_and_7(x):
    if x in (7, 3):
      raise UserError(f"unit {x}: bad")
    return x * x

  with pytest.raises(UserError, match="^unit 3: bad$"):
    dask_engine._released_results(client, client.map(square_but_3_and_7, range(10), pure=False))


def _sharded_gen(shards=4):
  """A sharded pass over int units: unit u counts tokens t<u % 7>, t<u % 13>
  and t<u % 13> again; select keeps the tokens seen 10 times or more and
  checks that it was given one shard's tokens."""

  def count(unit, _values):
    out = {}
    for t in (f"t{unit % 7}", f"t{unit % 13}", f"t{unit % 13}"):
      out[t] = out.get(t, 0) + 1
    return out

  def merge(parts):
    out = parts[0]
    for part in parts[1:]:
      for t, n in part.items():
        out[t] = out.get(t, 0) + n
    return out

  def split(part, k):
    pieces = [{} for _ in range(k)]
    for t, n in part.items():
      pieces[sharded_pass.shard_of(t, k)][t] = n
    return [x or None for x in pieces]

  def select(merged):
    assert len({sharded_pass.shard_of(t, shards) for t in merged}) == 1, merged
    return {t: n for t, n in merged.items() if n >= 10}

  p = protocol.Pass(name="counts", map=count, merge=merge,
                    finish=lambda m: sorted((m or {}).items()), shards=shards, split=split,
                    select=select)
  return types.SimpleNamespace(passes=(p,)), p


def test_sharded_pass_staged_by_group_merged_a_shard_a_task(client, monkeypatch, tmp_path):
  monkeypatch.setattr(dask_engine, "TREE_FAN_IN", 3)
  gen, p = _sharded_gen()
  units = list(range(100))
  merged = p.merge([p.map(u, {}) for u in units])
  whole = p.finish({t: n for t, n in merged.items() if n >= 10})
  parts = tmp_path / "parts"
  parts.mkdir()
  assert dask_engine._pass_value(client, gen, "counts", units, {}, str(parts)) == whole
  assert sorted(os.listdir(parts)) == [f"shards-counts-g{g:06d}" for g in range(34)]
  assert dask_engine._pass_value(client, gen, "counts", units, {}) == whole  # (folds)
  assert dask_engine._pass_value(client, gen, "counts", [], {}, str(parts)) == []
