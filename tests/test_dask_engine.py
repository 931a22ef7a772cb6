"""The Dask engine's pass merge (`textrecords.engine.dask._merged_pass`):
a tree that grows as the maps finish, a few groups of units mapped ahead,
so workers hold a bounded number of partials, whatever the corpus.

The generators' bytes on Dask are tested in test_generator_engines.py and
test_sharded_pass.py."""

import types

import pytest

from textrecords.engine import protocol
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


def test_growing_tree_holds_fewer_than_fan_in_per_level_and_merges_all():
  gen, client = _gen(), _EagerClient()
  tree = dask_engine._GrowingTree(client, gen, "ids")
  n = 1000
  for i in range(n):
    tree.add([i])
    assert all(len(level) < dask_engine.TREE_FAN_IN for level in tree.levels)
  assert len(tree.levels) <= 4  # log_8(1000) levels, not one future per partial
  assert tree.merged() == list(range(n))
  assert client.tasks < n / (dask_engine.TREE_FAN_IN - 1) + len(tree.levels)


@pytest.fixture(scope="module")
def client():
  with dask_engine.client_for("", 1) as c:
    yield c


def test_merged_pass_of_many_units_equals_one_merge(client, monkeypatch):
  monkeypatch.setattr(dask_engine, "TREE_FAN_IN", 3)  # several levels and groups in flight
  units = list(range(100))
  assert dask_engine._pass_value(client, _gen(), "ids", units, {}) == units
  assert dask_engine._pass_value(client, _gen(), "ids", [], {}) is None


def test_merged_pass_raises_the_first_failed_unit_in_order(client, monkeypatch):
  monkeypatch.setattr(dask_engine, "TREE_FAN_IN", 3)
  with pytest.raises(UserError, match="^unit 40: bad$"):
    dask_engine._pass_value(client, _gen(fail_at=(95, 40, 41)), "ids", list(range(100)), {})
