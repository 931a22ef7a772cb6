"""w2v_data.make_dataset: round trip, padding, labels/masks, fresh noise words."""

import json
import os

import numpy as np
import pytest

from textrecords.errors import UserError
from w2v_data import generator
from w2v_data.config import W2vConfig

tf = pytest.importorskip("tensorflow")
import w2v_data  # noqa: E402  pylint: disable=wrong-import-position

TINY = os.path.join(os.path.dirname(__file__), "testdata", "w2v_tiny.txt")
K = 3


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
  base = tmp_path_factory.mktemp("w2v_ds")
  dirs = {}
  for layout in ("sentence", "center"):
    d = str(base / layout)
    generator.create(W2vConfig(input_file=TINY, output_dir=d, min_freq=2, subsample_t=3e-2,
                              max_window_size=3, num_noise_words=K, random_seed=3,
                              num_workers=1, num_shards=2, layout=layout))
    dirs[layout] = d
  return dirs


def _rows(ds):
  """[(center, contexts, noise)] of every batch, checking labels and masks."""
  out = []
  for x, y, w in ds:
    center = x["center"].numpy()
    row = x["contexts_negatives"].numpy()
    y, w = y.numpy(), w.numpy()
    assert center.shape == (row.shape[0], 1) and y.shape == w.shape == row.shape
    assert x["center"].dtype == tf.int32 and y.dtype == tf.float32
    for i in range(row.shape[0]):
      n, m = int(y[i].sum()), int(w[i].sum())
      assert m == (1 + K) * n and n >= 1
      assert (y[i, :n] == 1).all() and (y[i, n:] == 0).all()
      assert (w[i, :m] == 1).all() and (w[i, m:] == 0).all()
      assert (row[i, m:] == 0).all() and (row[i, :m] > 0).all()
      out.append((int(center[i, 0]), tuple(row[i, :n]), tuple(row[i, n:m])))
  return out


def test_eval_round_trip_both_layouts_agree(outputs):
  rows = {layout: _rows(w2v_data.make_dataset(d, 16, training=False))
          for layout, d in outputs.items()}
  meta = json.load(open(os.path.join(outputs["sentence"], "meta.json")))
  assert len(rows["sentence"]) == meta["counts"]["centers"]
  assert rows["sentence"] == rows["center"]
  assert sum(len(r[1]) for r in rows["sentence"]) == meta["counts"]["pairs"]


def test_batch_max_padding_and_static_pad_to(outputs):
  d = outputs["sentence"]
  longest = json.load(open(os.path.join(d, "meta.json")))["counts"]["max_row_length"]
  for x, y, _ in w2v_data.make_dataset(d, 8, training=False).take(5):
    assert x["contexts_negatives"].shape[1] == (1 + K) * int(tf.reduce_max(tf.reduce_sum(y, 1)))
  ds = w2v_data.make_dataset(d, 8, pad_to=longest + 4, drop_remainder=True)
  assert ds.element_spec[0]["contexts_negatives"].shape.as_list() == [8, longest + 4]
  _rows(ds)
  with pytest.raises(UserError, match=f"pad_to={longest - 1} is shorter than the longest row"):
    w2v_data.make_dataset(d, 8, pad_to=longest - 1)


def test_training_shuffles_all_centers_deterministically(outputs):
  d = outputs["sentence"]
  ordered = sorted(_rows(w2v_data.make_dataset(d, 16, training=False)))
  ds = w2v_data.make_dataset(d, 16, seed=1, shuffle_buffer=64, drop_remainder=False)
  steps = len(ds)
  both = _rows(w2v_data.make_dataset(d, 16, seed=1, shuffle_buffer=64, drop_remainder=False,
                                     repeat=True).take(2 * steps))
  epoch1, epoch2 = both[:len(ordered)], both[len(ordered):]
  assert sorted(epoch1) == sorted(epoch2) == ordered
  assert epoch1 != epoch2  # reshuffled each epoch
  # Iterated again (a Keras epoch), the dataset gives the next epoch.
  assert _rows(ds) == epoch1 and _rows(ds) == epoch2


def test_fresh_negatives(outputs):
  d = outputs["center"]
  stored = sorted(_rows(w2v_data.make_dataset(d, 32, training=False)))
  ds = w2v_data.make_dataset(d, 32, training=False, negatives="fresh", seed=4, repeat=True)
  two_epochs = 2 * -(-len(stored) // 32)
  both = _rows(ds.take(two_epochs))
  e1, e2 = both[:len(stored)], both[len(stored):]
  for rows in (e1, e2):
    assert sorted((c, ctx) for c, ctx, _ in rows) == [(c, ctx) for c, ctx, _ in stored]
    for _, ctx, noise in rows:
      assert len(noise) == K * len(ctx) and not set(noise) & set(ctx)
  assert e1 != e2  # new draws every epoch
  assert _rows(w2v_data.make_dataset(d, 32, training=False, negatives="fresh", seed=4)) == e1
  assert _rows(ds.take(two_epochs)) == both
  # Same distribution as the stored noise words (both count**0.75 minus contexts).
  meta = json.load(open(os.path.join(d, "meta.json")))
  v = meta["vocab"]["size"]
  fresh = np.bincount([t for _, _, noise in e1 + e2 for t in noise], minlength=v)
  kept = np.bincount([t for _, _, noise in stored for t in noise], minlength=v) * 2
  top = np.argsort(-kept)[:8]
  rel = np.abs(fresh[top] - kept[top]) / np.sqrt(kept[top] + fresh[top])
  assert rel.max() < 5, (fresh[top], kept[top])


def test_fresh_draws_are_keyed_by_seed_epoch_center_and_slot():
  # fresh_noise's first-round draws: hash32(seed, 16, epoch, center, slot,
  # round 0, 0 | 1) picks an alias-table column and decides it or its alias
  # (computed here in numpy from the whole key; contexts outside the
  # vocabulary, so no draw is redrawn).
  from textrecords.reading import read_order as R  # pylint: disable=import-outside-toplevel
  from w2v_data import fresh_noise  # pylint: disable=import-outside-toplevel
  from w2v_data import sampling  # pylint: disable=import-outside-toplevel
  counts = np.array([0, 5, 40, 7, 300, 1, 60, 2])
  weights = counts ** 0.75
  table = sampling.AliasTable(weights / weights.sum())
  n, ids, seed, epoch, k = np.array([2, 0, 3]), np.array([7, 1 << 33, 12]), 3 << 40, 5, 2
  row = np.where(np.arange(9)[None, :] < n[:, None], 99, 0).astype(np.int32)
  got = fresh_noise.fresh_row(tf, tf.constant(row), tf.constant(n, tf.int64), k,
                              fresh_noise.noise_table(tf, counts, 0.75), seed, epoch,
                              tf.constant(ids, tf.int64)).numpy()
  ops = R.NumpyOps
  for b in range(3):
    for slot in range(k * n[b]):
      key = [ops.int64(v) for v in (*R.seed_parts(seed), 16, epoch, ids[b], slot, 0)]
      col = int(R.hash32(ops, *key, ops.int64(0))[0]) * len(counts) >> 32
      frac = int(R.hash32(ops, *key, ops.int64(1))[0]) / float(1 << 32)
      assert got[b, n[b] + slot] == (col if frac < table.prob[col] else table.alias[col])
    assert (got[b, :n[b]] == 99).all() and (got[b, (1 + k) * n[b]:] == 0).all()


def _batches(ds):
  return [(x["center"].numpy(), x["contexts_negatives"].numpy(), y.numpy(), w.numpy())
          for x, y, w in ds]


_HELD_CASES = (dict(training=False), dict(seed=5), dict(seed=5, shuffle_buffer=16,
                                                        drop_remainder=True),
               dict(seed=5, pad_to=40), dict(seed=6, negatives="fresh"),
               dict(seed=7, repeat=True))


@pytest.mark.parametrize("layout", ["sentence", "center"])
def test_in_memory_gives_the_streaming_batches(outputs, layout):
  # Records parsed once and held in memory: the same batches, epoch after
  # epoch (files and records reshuffled the same way; 2 shards interleaved).
  d = outputs[layout]
  for kw in _HELD_CASES:
    streamed = w2v_data.make_dataset(d, 8, in_memory=False, **kw)
    held = w2v_data.make_dataset(d, 8, in_memory=True, **kw)
    if kw.get("repeat"):  # two and a half epochs
      streamed, held = streamed.take(150), held.take(150)
    epochs = [(_batches(streamed), _batches(held)) for _ in range(2)]
    for a, b in epochs:
      assert len(a) == len(b) > 1, kw
      for x, y in zip(a, b):
        assert all(u.dtype == v.dtype and np.array_equal(u, v) for u, v in zip(x, y)), kw
    if kw.get("repeat"):  # epochs reshuffled (a dataset iterated again: the same batches)
      per_epoch = len(w2v_data.make_dataset(d, 8, **dict(kw, repeat=False)))
      two = _batches(w2v_data.make_dataset(d, 8, in_memory=True, **kw).take(2 * per_epoch))
      assert not all(np.array_equal(x[1], y[1]) for x, y in zip(two[:per_epoch],
                                                                two[per_epoch:]))


def test_in_memory_with_gzip_and_empty_shards(tmp_path):
  # 40 shards of 31 sentences: some empty files; GZIP records.
  src = tmp_path / "in.txt"
  with open(TINY, encoding="utf-8") as f:
    src.write_text("".join(f.readlines()[:30]), encoding="utf-8")
  d = str(tmp_path / "gz")
  generator.create(W2vConfig(input_file=str(src), output_dir=d, min_freq=2, subsample_t=3e-2,
                            max_window_size=3, num_noise_words=K, random_seed=3,
                            num_workers=1, num_shards=40, compression="GZIP"))
  meta = json.load(open(os.path.join(d, "meta.json")))
  assert 0 in meta["file_centers"].values()
  for kw in (dict(training=False), dict(seed=2)):
    a = _batches(w2v_data.make_dataset(d, 8, in_memory=False, **kw))
    b = _batches(w2v_data.make_dataset(d, 8, in_memory=True, **kw))
    assert len(a) == len(b) > 1
    assert all(np.array_equal(u, v) for x, y in zip(a, b) for u, v in zip(x, y))


def test_in_memory_by_default_for_small_data_only(outputs, monkeypatch):
  from w2v_data import dataset as dataset_lib  # pylint: disable=import-outside-toplevel
  from w2v_data import tf_centers  # pylint: disable=import-outside-toplevel
  made = []

  class Spy(tf_centers.HeldRows):
    def __init__(self, *a):
      made.append(1)
      super().__init__(*a)

  monkeypatch.setattr(tf_centers, "HeldRows", Spy)
  d = outputs["sentence"]
  w2v_data.make_dataset(d, 8, seed=1)
  assert made == [1]  # a few kB: held
  monkeypatch.setattr(dataset_lib, "IN_MEMORY_BYTES", 100)
  w2v_data.make_dataset(d, 8, seed=1)
  assert made == [1]  # over the limit: streamed
  w2v_data.make_dataset(d, 8, seed=1, in_memory=True)
  assert made == [1, 1]


def test_bad_arguments(outputs):
  d = outputs["sentence"]
  with pytest.raises(UserError, match="batch_size"):
    w2v_data.make_dataset(d, 0)
  with pytest.raises(UserError, match="negatives='new'"):
    w2v_data.make_dataset(d, 4, negatives="new")


def test_known_epoch_length(outputs):
  for d in outputs.values():
    meta = json.load(open(os.path.join(d, "meta.json")))
    centers = meta["counts"]["centers"]
    assert sum(meta["file_centers"].values()) == centers
    ds = w2v_data.make_dataset(d, 10, seed=0, drop_remainder=False)
    assert int(ds.cardinality()) == -(-centers // 10) == sum(1 for _ in ds)
    ds = w2v_data.make_dataset(d, 10, seed=0, drop_remainder=True)
    assert int(ds.cardinality()) == centers // 10 == sum(1 for _ in ds)
    # tf.data's autotuning is off (steady epochs on few cores; see _with_cardinality).
    assert ds.options().autotune.enabled is False


@pytest.mark.parametrize("model", ["cbow", "pv_dm", "pv_dbow"])
def test_cbow_and_pv_batches_match_the_records(tmp_path, model):
  """Eval batches hold every center once, in record order, with its contexts,
  noise words and document id; training batches are a seeded permutation."""
  from textrecords.files import tfrecord  # pylint: disable=import-outside-toplevel
  from textrecords.wire import example_decoder
  from textrecords.datasets import layout  # pylint: disable=import-outside-toplevel
  from textrecords.datasets.layout import DatasetLayout  # pylint: disable=import-outside-toplevel
  from w2v_data import schema  # pylint: disable=import-outside-toplevel
  src = tmp_path / "docs.txt"
  with open(TINY, encoding="utf-8") as f:
    src.write_text("\n".join(l for l in f.read().split("\n") if l.strip()) + "\n")
  d = str(tmp_path / model)
  meta = generator.create(W2vConfig(input_file=str(src), output_dir=d, min_freq=2,
                                   subsample_t=3e-2, max_window_size=3, num_noise_words=K,
                                   random_seed=3, num_workers=1, num_shards=2, model=model)).meta
  expected = []
  stem = DatasetLayout.for_dir(d).record_stem(schema.SPLIT)
  for name in sorted(n for n in os.listdir(d) if n.startswith(stem)
                     and not layout.is_index_name(n)):
    for rec in tfrecord.read_records(os.path.join(d, name)):
      r = example_decoder.decode_example(rec)
      n = r.get(schema.NUM_CONTEXTS, [0] * len(r[schema.CENTERS]))
      cs = np.r_[0, np.cumsum(n)]
      for i, c in enumerate(r[schema.CENTERS]):
        expected.append((r.get(schema.DOC_ID, [-1])[0], c,
                         tuple(r.get(schema.CONTEXTS, [])[cs[i]:cs[i + 1]]),
                         tuple(r[schema.NEGATIVES][K * i:K * (i + 1)])))
  assert len(expected) == meta["counts"]["centers"] > 100

  def rows(ds):
    out = []
    for x, y, w in ds:
      cn = x[schema.X_CENTER_AND_NOISE].numpy()
      assert cn.shape[1] == 1 + K and cn.dtype == np.int32
      assert (y.numpy() == [[1.0] + [0.0] * K]).all() and (w.numpy() == 1).all()
      has_ctx = schema.X_CONTEXTS in x
      assert has_ctx == (model != "pv_dbow") and (schema.X_DOC_ID in x) == (model != "cbow")
      for i in range(cn.shape[0]):
        ctx = ()
        if has_ctx:
          row, mask = x[schema.X_CONTEXTS].numpy()[i], x[schema.X_CONTEXTS_MASK].numpy()[i]
          assert row.shape == mask.shape == (6,)
          n = int(mask.sum())
          assert (mask[:n] == 1).all() and (row[n:] == 0).all() and (row[:n] > 0).all()
          ctx = tuple(row[:n])
        doc = int(x[schema.X_DOC_ID].numpy()[i, 0]) if schema.X_DOC_ID in x else -1
        out.append((doc, int(cn[i, 0]), ctx, tuple(cn[i, 1:])))
    return out

  assert rows(w2v_data.make_dataset(d, 16, training=False)) == expected
  shuffled = rows(w2v_data.make_dataset(d, 16, seed=1, drop_remainder=False))
  assert sorted(shuffled) == sorted(expected) and shuffled != expected
  assert shuffled == rows(w2v_data.make_dataset(d, 16, seed=1, drop_remainder=False))
  with pytest.raises(UserError, match="pad_to=None"):
    w2v_data.make_dataset(d, 16, pad_to=60)
  with pytest.raises(UserError, match="in_memory=None"):
    w2v_data.make_dataset(d, 16, in_memory=True)


def test_held_rows_are_not_in_the_dataset_graph(outputs, tmp_path):
  # Issue 24 item 6: the held rows once made the graph grow with the data
  # (195 MiB for PTB). Now 30x the centers give the same graph size (file
  # names, the read order and parsing ops), well under what embedding them would take.
  from w2v_data import dataset as dataset_lib  # pylint: disable=import-outside-toplevel
  src = tmp_path / "x30.txt"
  with open(TINY, encoding="utf-8") as f:
    src.write_text(f.read() * 30, encoding="utf-8")
  big = str(tmp_path / "big")
  generator.create(W2vConfig(input_file=str(src), output_dir=big, min_freq=2, subsample_t=3e-2,
                            max_window_size=3, num_noise_words=K, random_seed=3,
                            num_workers=1, num_shards=2, layout="sentence"))
  sizes = {}
  for name, d in (("small", outputs["sentence"]), ("big", big)):
    ds = w2v_data.make_dataset(d, 8, seed=1, in_memory=True)
    sizes[name] = len(ds._as_serialized_graph().numpy())  # pylint: disable=protected-access
  meta = dataset_lib.open_dataset(big).meta
  held = meta["counts"]["centers"] * (meta["counts"]["max_row_length"] * 4 + 16)
  # (about 100 kB: the read order's in-graph hashes, whatever the data's size)
  assert held > 7_000_000 and sizes["big"] < 200_000
  assert abs(sizes["big"] - sizes["small"]) < 2_000, sizes


@pytest.mark.parametrize("layout", ["center", "sentence"])
def test_expand_labels_for_keras_losses(outputs, layout):
  # y and sample_weight (B, L, 1): keras.losses.BinaryCrossentropy weights each entry.
  keras = pytest.importorskip("keras")
  d = outputs[layout]
  plain = _batches(w2v_data.make_dataset(d, 8, seed=3))
  expanded = _batches(w2v_data.make_dataset(d, 8, seed=3, expand_labels=True))
  assert len(plain) == len(expanded) > 1
  for (c, r, y, w), (c2, r2, y2, w2) in zip(plain, expanded):
    assert y2.shape == w2.shape == r.shape + (1,)
    assert np.array_equal(c, c2) and np.array_equal(r, r2)
    assert np.array_equal(y2[..., 0], y) and np.array_equal(w2[..., 0], w)
  logits = np.random.default_rng(0).normal(size=y2.shape).astype(np.float32)
  loss = keras.losses.BinaryCrossentropy(from_logits=True)(y2, logits, sample_weight=w2)
  elementwise = np.maximum(logits, 0) - logits * y2 + np.log1p(np.exp(-np.abs(logits)))
  assert np.isclose(float(loss), (elementwise * w2).sum() / w2.size, rtol=1e-5)
  with pytest.raises(UserError, match="expand_labels=1: must be True or False"):
    w2v_data.make_dataset(d, 8, expand_labels=1)


def test_held_rows_iterator_checkpoint_restores(outputs, tmp_path):
  # The held rows' dataset must stay serializable (no stateful op in it): an
  # iterator checkpoint restores into a new make_dataset's iterator.
  d = outputs["sentence"]
  it = iter(w2v_data.make_dataset(d, 8, seed=1, in_memory=True))
  for _ in range(3):
    next(it)
  path = tf.train.Checkpoint(it=it).write(str(tmp_path / "ckpt"))
  want = [next(it) for _ in range(4)]
  it2 = iter(w2v_data.make_dataset(d, 8, seed=1, in_memory=True))
  tf.train.Checkpoint(it=it2).read(path).assert_consumed()
  got = [next(it2) for _ in range(4)]
  for a, b in zip(want, got):
    assert all(np.array_equal(u, v) for u, v in zip(tf.nest.flatten(a), tf.nest.flatten(b)))
