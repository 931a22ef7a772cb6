"""grain and PyTorch readers: same batches as numpy_batches, shuffling, sharding.

torch tests skip where torch is not importable (scripts/check_torch.sh makes
a venv with the CPU wheel and runs them).
"""

import pickle

import numpy as np
import pytest

import bert_data
import mt_data
from bert_data import reader as bert_reader
from mt_data import reader as mt_reader
from textrecords.errors import UserError


def _ids(batches, key="input_ids"):
  return np.concatenate([np.asarray(x[key]) for x, _, _ in batches])


def _same(a, b):
  if isinstance(a, dict):
    assert sorted(a) == sorted(b)
    for k in a:
      _same(a[k], b[k])
  elif isinstance(a, (tuple, list)):
    assert len(a) == len(b)
    for x, y in zip(a, b):
      _same(x, y)
  else:
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a, b)


# ----------------------------------------------------------------- grain

def test_grain_source_is_a_picklable_random_access_source(bert_out):
  pytest.importorskip("grain")
  src = bert_data.grain_source(bert_out)
  n = sum(len(x["input_ids"]) for x, _, _ in bert_data.numpy_batches(bert_out, 50, training=False))
  assert len(src) == n and "RecordSource" in repr(src)
  copy = pickle.loads(pickle.dumps(src))
  assert copy[n - 1] == src[n - 1] and copy[0] == src[0]


def test_grain_eval_batches_equal_numpy_batches(bert_out, mt_out):
  pytest.importorskip("grain")
  _same(list(bert_reader.grain_dataset(bert_out, 6)),
        list(bert_data.numpy_batches(bert_out, 6, training=False)))
  _same(list(mt_reader.grain_dataset(mt_out, 4, split="valid", num_steps=5)),
        list(mt_data.numpy_batches(mt_out, 4, split="valid", num_steps=5, training=False)))
  loader = bert_reader.grain_dataset(bert_out, 6, loader=True)
  _same(list(loader), list(bert_data.numpy_batches(bert_out, 6, training=False)))


def test_grain_training_shuffle_is_seeded_global_and_sharded(bert_out):
  pytest.importorskip("grain")
  eval_ids = _ids(bert_data.numpy_batches(bert_out, 50, training=False))
  run = lambda **kw: _ids(bert_reader.grain_dataset(bert_out, 4, training=True, **kw))
  a, b, c = run(seed=1), run(seed=1), run(seed=2)
  np.testing.assert_array_equal(a, b)
  assert not np.array_equal(a, c) and len(a) == len(eval_ids) // 4 * 4
  s = [run(seed=1, shard_index=i, num_shards=2, drop_remainder=False) for i in range(2)]
  key = lambda m: sorted(map(bytes, m))
  assert key(np.concatenate(s)) == key(eval_ids)
  with pytest.raises(UserError, match="seed"):
    bert_reader.grain_dataset(bert_out, 4, training=True)


def test_grain_training_batches_equal_numpy_batches(bert_out):
  pytest.importorskip("grain")
  # grain keeps its seeded global shuffle (BatchPlan): the reader's epoch_order,
  # not make_dataset's read order.
  plain = bert_reader.open_dataset(bert_out, seed=7)
  want = list(plain.numpy_batches(4, training=True, seed=7, drop_remainder=True))
  _same(list(bert_reader.grain_dataset(bert_out, 4, training=True, seed=7)), want)
  _same(list(bert_reader.grain_dataset(bert_out, 4, training=True, seed=7, loader=True)), want)
  # Each epoch a new order of all records.
  whole = list(plain.numpy_batches(4, training=True, seed=7, drop_remainder=False))
  two = bert_reader.grain_dataset(bert_out, 4, training=True, seed=7, num_epochs=2,
                                  drop_remainder=False)
  assert len(two) == 2 * len(whole)
  _same([two[i] for i in range(len(whole))], whole)
  second = _ids([two[i] for i in range(len(whole), 2 * len(whole))])
  assert not np.array_equal(second, _ids(whole))
  assert sorted(map(bytes, second)) == sorted(map(bytes, _ids(whole)))


def test_grain_loader_with_workers_equals_numpy_and_resumes(bert_out):
  pytest.importorskip("grain")
  want = list(bert_reader.open_dataset(bert_out, seed=3).numpy_batches(
      4, training=True, seed=3, drop_remainder=False))
  assert len(want) > 12  # more than one group of batches per worker transfer
  make = lambda: bert_reader.grain_dataset(  # noqa: E731
      bert_out, 4, training=True, seed=3, loader=True, worker_count=2, drop_remainder=False)
  it = iter(make())
  got = [next(it) for _ in range(11)]  # into the second group of 8
  state = it.get_state()
  got += list(it)
  _same(got, want)
  again = iter(make())
  again.set_state(state)
  _same(list(again), want[11:])


# ----------------------------------------------------------------- torch

def test_torch_map_and_iterable_datasets(bert_out):
  torch = pytest.importorskip("torch")
  want = list(bert_data.numpy_batches(bert_out, 6, training=False))
  ds = bert_data.torch_dataset(bert_out)
  loader = torch.utils.data.DataLoader(ds, batch_size=6, collate_fn=ds.collate_fn)
  got = [tuple({k: v.numpy() for k, v in d.items()} for d in b) for b in loader]
  _same(got, want)
  it = bert_data.torch_dataset(bert_out, 6)
  assert len(it) == len(want)
  got = [tuple({k: v.numpy() for k, v in d.items()} for d in b) for b in it]
  _same(got, want)


def test_torch_iterable_shards_over_workers(bert_out):
  torch = pytest.importorskip("torch")
  eval_ids = _ids(bert_data.numpy_batches(bert_out, 50, training=False))
  it = bert_data.torch_dataset(bert_out, 4, training=True, seed=5, drop_remainder=False)
  loader = torch.utils.data.DataLoader(it, batch_size=None, num_workers=2)
  got = np.concatenate([x["input_ids"].numpy() for x, _, _ in loader])
  key = lambda m: sorted(map(bytes, m))
  assert key(got) == key(eval_ids)
  first = np.concatenate([x["input_ids"].numpy() for x, _, _ in it])
  it.set_epoch(0)
  again = np.concatenate([x["input_ids"].numpy() for x, _, _ in it])
  np.testing.assert_array_equal(first, again)
  assert not np.array_equal(first, np.concatenate([x["input_ids"].numpy() for x, _, _ in it]))
