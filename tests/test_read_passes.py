"""Training datasets iterated again give the next epoch (issue 36 items 2, 3, 5).

Keras makes a new iterator of a finite dataset every epoch: each pass of a
training `make_dataset` without `repeat` is the next epoch of the read order
(new order, new dynamic masks, new fresh noise words), the batches that
`repeat=True` gives, deterministic in (seed, passes before). Also: the three
training defaults have fully static shapes, and fewer records than one batch
with drop_remainder is a one-line error naming both numbers.
"""

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import bert_data  # pylint: disable=wrong-import-position
import mt_data  # pylint: disable=wrong-import-position
import w2v_data  # pylint: disable=wrong-import-position
from bert_data import generator  # pylint: disable=wrong-import-position
from bert_data import reader as bert_reader  # pylint: disable=wrong-import-position
from bert_data.config import BertConfig  # pylint: disable=wrong-import-position
from conftest import SAMPLE_TEXT, VOCAB, write_three_datasets  # pylint: disable=wrong-import-position
from mt_data import reader as mt_reader  # pylint: disable=wrong-import-position
from textrecords.errors import UserError  # pylint: disable=wrong-import-position
from w2v_data import reader as w2v_reader  # pylint: disable=wrong-import-position

# The feature that shows a batch's records (and bert's dynamic masks).
KEY = {"bert_data": "input_ids", "w2v_data": "contexts_negatives", "mt_data": "source"}
MAKE = {"bert_data": bert_data.make_dataset, "w2v_data": w2v_data.make_dataset,
        "mt_data": mt_data.make_dataset}


@pytest.fixture(scope="module")
def locs(tmp_path_factory):
  d = tmp_path_factory.mktemp("passes")
  out = write_three_datasets(d)
  dynamic = str(d / "dynamic" / "train.tfrecord")
  generator.create(BertConfig(input_files=(SAMPLE_TEXT,), output_files=(dynamic,),
                             vocab_file=VOCAB, max_seq_length=32, max_predictions_per_seq=5,
                             dupe_factor=2, num_shards=2, num_workers=1, masking="dynamic",
                             quiet=True))
  out["dynamic"] = dynamic
  return out


def _pass(ds, package):
  return [np.asarray(x[KEY[package]]) for x, _, _ in ds]


def _same(a, b):
  return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


CASES = [("bert_data", "dynamic", {}), ("bert_data", "bert_data", {"drop_remainder": False}),
         ("w2v_data", "w2v_data", {}), ("w2v_data", "w2v_data", {"in_memory": False}),
         ("w2v_data", "w2v_data", {"negatives": "fresh", "drop_remainder": False}),
         ("mt_data", "mt_data", {}),
         ("mt_data", "mt_data", {"num_steps": None, "bucket_boundaries": [6, 9]})]


@pytest.mark.parametrize("package,which,kw", CASES)
def test_each_pass_is_the_next_epoch(locs, package, which, kw):
  loc, make = locs[which], MAKE[package]
  ds = make(loc, 4, seed=0, **kw)
  passes = [_pass(ds, package) for _ in range(3)]
  assert not _same(passes[0], passes[1]) and not _same(passes[1], passes[2])
  # Deterministic in (seed, passes before): a fresh dataset gives the same passes.
  again = make(loc, 4, seed=0, **kw)
  assert all(_same(p, _pass(again, package)) for p in passes)
  if "bucket_boundaries" in kw:  # epochs of bucketed batches have no fixed length
    return
  # The passes follow each other as repeat=True's epochs.
  run = _pass(make(loc, 4, seed=0, repeat=True, **kw).take(sum(map(len, passes))), package)
  assert _same(sum(passes, []), run)
  assert len(passes[0]) == int(ds.cardinality()) == len(passes[2])


def test_dynamic_masks_change_per_pass_on_the_same_records(locs):
  # Every record in every pass (drop_remainder=False): with the same masks the
  # passes would hold the same rows, in another order.
  ds = bert_data.make_dataset(locs["dynamic"], 4, seed=3, drop_remainder=False)
  one, two = (sorted(map(tuple, np.concatenate(_pass(ds, "bert_data")).tolist()))
              for _ in range(2))
  assert len(one) == len(two) and one != two
  static = bert_data.make_dataset(locs["bert_data"], 4, seed=3, drop_remainder=False)
  one, two = (sorted(map(tuple, np.concatenate(_pass(static, "bert_data")).tolist()))
              for _ in range(2))
  assert one == two  # masked at create time: the same rows, reordered


@pytest.mark.parametrize("seed", [None, 0])
def test_seed_none_and_zero_passes_differ(locs, seed):
  for package in ("bert_data", "w2v_data", "mt_data"):
    ds = MAKE[package](locs[package], 4, seed=seed)
    first, second = _pass(ds, package), _pass(ds, package)
    assert len(first) == len(second) > 0 and not _same(first, second), package


def test_evaluation_passes_are_alike(locs):
  for package in ("bert_data", "w2v_data", "mt_data"):
    ds = MAKE[package](locs[package], 4, training=False)
    assert _same(_pass(ds, package), _pass(ds, package)), package
  ds = bert_data.make_dataset(locs["dynamic"], 4, training=False, seed=1)
  assert _same(_pass(ds, "bert_data"), _pass(ds, "bert_data"))


def test_keras_fit_epochs_see_new_batches_and_runs_repeat(locs):
  keras = pytest.importorskip("keras")

  def run():
    seen = []

    class Recording(keras.Model):  # pylint: disable=abstract-method

      def train_step(self, data):
        seen.append(keras.ops.convert_to_numpy(data[0]))
        return super().train_step(data)

    keras.utils.set_random_seed(1)
    ds = bert_data.make_dataset(locs["dynamic"], 4, seed=7)
    ds = ds.map(lambda x, y, w: (x["input_ids"], y["next_sentence"]))
    ids = keras.Input((32,), dtype="int32")
    h = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(30522, 4)(ids))
    model = Recording(ids, keras.layers.Dense(2)(h))
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  run_eagerly=True)
    model.fit(ds, epochs=2, verbose=0, shuffle=False)
    return seen, int(ds.cardinality())

  seen, steps = run()
  assert len(seen) == 2 * steps
  epoch1, epoch2 = seen[:steps], seen[steps:]
  assert not _same(epoch1, epoch2)  # new order and new dynamic masks
  assert _same(seen, run()[0])  # two fresh runs: the same batches
  want = bert_data.make_dataset(locs["dynamic"], 4, seed=7, repeat=True).take(2 * steps)
  assert _same(seen, _pass(want, "bert_data"))


def test_training_defaults_have_static_shapes(locs):
  for package in ("bert_data", "w2v_data", "mt_data"):
    spec = MAKE[package](locs[package], 8, training=True, seed=0).element_spec
    for s in tf.nest.flatten(spec):
      assert s.shape.is_fully_defined(), (package, spec)
  x, y, w = w2v_data.make_dataset(locs["w2v_data"], 8, training=True, seed=0).element_spec
  assert x["contexts_negatives"].shape == y.shape == w.shape == (8, 60)
  # d2l's padding to each batch's longest row: on request, and in evaluation.
  for kw in (dict(pad_to="batch", seed=0), dict(training=False)):
    spec = w2v_data.make_dataset(locs["w2v_data"], 8, **kw).element_spec
    assert spec[0]["contexts_negatives"].shape[1] is None
  # numpy_batches gives make_dataset's rows, by default as wide.
  a = next(iter(w2v_data.make_dataset(locs["w2v_data"], 8, seed=0)))
  b = next(iter(w2v_reader.numpy_batches(locs["w2v_data"], 8, seed=0)))
  np.testing.assert_array_equal(a[0]["contexts_negatives"].numpy(), b[0]["contexts_negatives"])
  with pytest.raises(UserError, match="^pad_to='wide': must be a positive integer, \"batch\" "
                     "or None$"):
    w2v_data.make_dataset(locs["w2v_data"], 8, pad_to="wide")


@pytest.mark.parametrize("package,read,unit,kw", [
    ("bert_data", bert_data.make_dataset, "records", {}),
    ("bert_data", bert_reader.numpy_batches, "records", {}),
    ("w2v_data", w2v_data.make_dataset, "centers", {}),
    ("w2v_data", w2v_reader.numpy_batches, "centers", {}),
    ("mt_data", mt_data.make_dataset, "records", {}),
    ("mt_data", mt_reader.numpy_batches, "records", {}),
    ("mt_data", mt_data.make_dataset, "records",
     {"num_steps": None, "bucket_boundaries": [6, 9]}),
    ("bert_data", bert_data.make_dataset, "records", {"repeat": True})])
def test_fewer_records_than_a_batch_is_one_line(locs, package, read, unit, kw):
  loc = locs[package]
  n = int(sum(1 for _ in MAKE[package](loc, 1, training=False, **(
      {"num_steps": 9} if package == "mt_data" else {}))))
  big = n + 1
  with pytest.raises(UserError) as err:
    read(loc, big, seed=0, **kw)
  msg = str(err.value)
  assert "\n" not in msg and msg.startswith(f"{loc}: {n} {unit}, fewer than one batch of {big}:")
  assert f"at most {n} or drop_remainder=False" in msg
  # Exactly one batch is fine (bucketed: the buckets may still hold less); without
  # drop_remainder any size is.
  if "bucket_boundaries" not in kw:
    assert sum(1 for _ in read(loc, n, seed=0, **dict(kw, repeat=False))) == 1
  assert sum(1 for _ in read(loc, big, seed=0, drop_remainder=False,
                             **dict(kw, repeat=False))) >= 1
