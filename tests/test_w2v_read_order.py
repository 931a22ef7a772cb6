"""w2v_data in the training read order (issue 24 items 2-5): centers read in
`read_order`'s order over centers, in tf.data and numpy alike: equal steps
on every host (one record file too), elastic global batches, start_step
resume without reading what came before, mixtures."""

import itertools
import json
import os

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import w2v_data  # pylint: disable=wrong-import-position
from conftest import TESTDATA  # pylint: disable=wrong-import-position
from textrecords.errors import UserError  # pylint: disable=wrong-import-position
from textrecords.reading import mixtures  # pylint: disable=wrong-import-position
from textrecords.reading import read_order as R  # pylint: disable=wrong-import-position
from textrecords.reading import tf_order  # pylint: disable=wrong-import-position
from w2v_data import generator  # pylint: disable=wrong-import-position
from w2v_data import reader  # pylint: disable=wrong-import-position
from w2v_data import tf_centers  # pylint: disable=wrong-import-position
from w2v_data.config import W2vConfig  # pylint: disable=wrong-import-position

K = 3


@pytest.fixture(scope="module")
def w2v(tmp_path_factory):
  base = tmp_path_factory.mktemp("w2v_order")
  out = {}
  for name, kw in (("two", {}), ("one", dict(num_shards=1)), ("eight", dict(num_shards=8)),
                   ("center", dict(layout="center")), ("other_seed", dict(random_seed=4)),
                   ("gzip", dict(compression="GZIP"))):
    d = str(base / name)
    cfg = dict(input_file=os.path.join(TESTDATA, "w2v_tiny.txt"), output_dir=d, min_freq=2,
               subsample_t=3e-2, max_window_size=3, num_noise_words=K, random_seed=3,
               num_workers=1, num_shards=2)
    cfg.update(kw)
    generator.create(W2vConfig(**cfg))
    out[name] = d
  return out


def _centers(loc):
  return json.load(open(os.path.join(loc, "meta.json")))["counts"]["centers"]


def _ctx(pipelines, pipeline_id):
  return tf.distribute.InputContext(num_input_pipelines=pipelines,
                                    input_pipeline_id=pipeline_id,
                                    num_replicas_in_sync=pipelines)


def _arrays(batches):
  """[(center, contexts_negatives, y, w)] numpy arrays of each batch."""
  return [tuple(np.asarray(t) for t in (x["center"], x["contexts_negatives"], y, w))
          for x, y, w in batches]


def _same(a, b):
  return len(a) == len(b) and all(
      x.shape == y.shape and np.array_equal(x, y) for u, v in zip(a, b) for x, y in zip(u, v))


def _join(parts):
  """One global batch from the per-host (center, row, y, w) slices (rows padded alike)."""
  width = max(p[1].shape[1] for p in parts)
  pad = lambda a: np.pad(a, [(0, 0), (0, width - a.shape[1])])  # noqa: E731
  return (np.concatenate([p[0] for p in parts]),) + tuple(
      np.concatenate([pad(p[i]) for p in parts]) for i in (1, 2, 3))


@pytest.mark.parametrize("training,drop,g,pipelines,start,repeat", [
    (True, True, 8, 2, 0, False), (True, True, 8, 4, 5, True),
    (False, False, 8, 2, 0, False), (True, False, 12, 4, 3, False)])
def test_plan_ids_equal_the_numpy_order(training, drop, g, pipelines, start, repeat):
  # tf_order.plan_ids (a window at a time, held rows) = read_order's batches.
  counts = (37, 5, 60, 1)
  stream = R.Stream(counts, training, 7, R.used_records(sum(counts), g, drop),
                    R.window_records(20, g))
  for p in range(pipelines):
    plan = R.Plan(stream, R.Sharing(g, pipelines, pipelines, p), drop, start, repeat)
    want = list(itertools.islice(plan.batches(), 40))
    got = list(itertools.islice(tf_order.plan_ids(plan), 40))
    assert [(e, b.tolist()) for e, b in want] == [(int(e), b.numpy().tolist()) for e, b in got]


@pytest.mark.parametrize("training,pipelines,start,repeat", [
    (True, 1, 0, False), (True, 2, 3, False), (True, 4, 7, True), (False, 2, 3, False)])
def test_plan_id_windows_equal_the_numpy_order(training, pipelines, start, repeat):
  # tf_order.plan_id_windows (drop_remainder: one pipeline for every epoch,
  # a window's record numbers computed in-graph) = read_order's batches; a
  # training dataset's second pass is the next whole epoch, an evaluation
  # one's its first pass again.
  counts, g = (37, 5, 60, 1), 8
  stream = R.Stream(counts, training, 7, R.used_records(sum(counts), g, True),
                    R.window_records(20, g))
  for p in range(pipelines):
    sharing = R.Sharing(g, pipelines, pipelines, p)
    plan = R.Plan(stream, sharing, True, start, repeat)
    ds = tf_order.plan_id_windows(plan, lambda e, rows: rows)
    want = [(e, b.tolist()) for e, b in itertools.islice(plan.batches(), 40)]
    assert want == [(int(e), b.numpy().tolist()) for e, b in itertools.islice(ds, 40)]
    if not repeat:
      e0, _ = plan.start()
      after = (R.Plan(stream, sharing, True, (e0 + 1) * plan.steps_per_epoch, False)
               if training else plan)
      assert [(e, b.tolist()) for e, b in after.batches()] == [
          (int(e), b.numpy().tolist()) for e, b in ds]
  plan = R.Plan(stream, R.Sharing(g, 1, 1, 0), False, 0, False)
  assert tf_order.plan_id_windows(plan, lambda e, rows: rows) is None  # batches may be partial


def test_held_rows_one_pipeline_or_window_at_a_time(w2v, monkeypatch):
  # The held rows' batches from one pipeline for every epoch
  # (HeldRows.batches) are those of the window-at-a-time path
  # (tf_order.id_windows), on the first pass and the next.
  for kw in (dict(seed=3), dict(seed=3, start_step=4, negatives="fresh"),
             dict(seed=3, start_step=2, repeat=True)):
    ds = w2v_data.make_dataset(w2v["two"], 8, **kw)
    one = [_arrays(ds.take(40)) for _ in range(2)]
    monkeypatch.setattr(tf_centers.HeldRows, "batches", lambda *a, **k: None)
    ds = w2v_data.make_dataset(w2v["two"], 8, **kw)
    monkeypatch.undo()
    want = [_arrays(ds.take(40)) for _ in range(2)]  # without repeat, pass 2: the next epoch
    assert len(want[0]) > 5 and _same(one[0], want[0]) and _same(one[1], want[1]), kw


@pytest.mark.parametrize("which,in_memory", [("one", None), ("two", False), ("center", None)])
def test_equal_steps_on_every_host(w2v, which, in_memory):
  loc = w2v[which]
  total = _centers(loc)
  for pipelines in (1, 2, 4):
    counts = set()
    for p in range(pipelines):
      ds = w2v_data.make_dataset(loc, 4, input_context=_ctx(pipelines, p), seed=0,
                                 in_memory=in_memory)
      counts.add((int(ds.cardinality()), sum(1 for _ in ds)))
    assert counts == {(total // (4 * pipelines),) * 2}, (which, pipelines)
  # The TF-free reader: the same counts.
  for p in range(4):
    assert sum(1 for _ in reader.numpy_batches(loc, 4, shard_index=p, num_shards=4,
                                               seed=0)) == total // 16


@pytest.mark.parametrize("kw", [dict(), dict(in_memory=False), dict(negatives="fresh"),
                                dict(drop_remainder=False)])
def test_elastic_global_batches(w2v, kw):
  # Global batch k holds the same centers (and fresh noise words) for 1, 2
  # and 4 input pipelines; the host slices are disjoint and make it up.
  loc = w2v["one"]
  whole = _arrays(w2v_data.make_dataset(loc, 16, seed=9, **kw))
  assert len(whole) == -(-_centers(loc) // 16) if kw.get("drop_remainder") is False else (
      _centers(loc) // 16)
  for pipelines in (2, 4):
    hosts = [_arrays(w2v_data.make_dataset(loc, global_batch_size=16, seed=9,
                                           input_context=_ctx(pipelines, p), **kw))
             for p in range(pipelines)]
    for k, want in enumerate(whole):
      got = _join([h[k] for h in hosts if k < len(h)])
      width = (1 + K) * int(want[2].sum(1).max())
      assert np.array_equal(got[0], want[0])
      assert all(np.array_equal(g[:, :width], w[:, :width]) for g, w in zip(got[1:], want[1:]))


def test_gzip_streamed_resume_reads_through_with_a_note(w2v):
  # GZIP records cannot be entered at an offset: a streamed resume says so
  # in one line and still gives the uncompressed dataset's batches.
  plain = _arrays(w2v_data.make_dataset(w2v["two"], 8, seed=5, in_memory=False).take(8))
  for in_memory, notes in ((False, 1), (None, 0)):  # held rows read everything anyway
    logged = []
    resumed = _arrays(w2v_data.make_dataset(w2v["gzip"], 8, seed=5, in_memory=in_memory,
                                            start_step=5, log=logged.append).take(3))
    assert _same(resumed, plain[5:8]), in_memory
    lines = [m for m in logged if m.startswith("note: GZIP")]
    assert len(lines) == notes and all("step 5" in m and "\n" not in m for m in lines), logged


def test_start_step_resumes_without_reading_what_came_before(w2v, monkeypatch):
  loc = w2v["eight"]
  for kw in (dict(), dict(in_memory=False)):
    run = _arrays(w2v_data.make_dataset(loc, 8, seed=5, repeat=True, **kw).take(300))
    for k in (1, 150, 270):  # 270: past the first epoch (of 264 steps)
      resumed = _arrays(w2v_data.make_dataset(loc, 8, seed=5, repeat=True, start_step=k,
                                              **kw).take(6))
      assert _same(resumed, run[k:k + 6]), (kw, k)
  one_epoch = w2v_data.make_dataset(loc, 8, seed=5, start_step=3)
  # Its first pass is the rest of the epoch, later passes whole epochs: no one length.
  assert int(one_epoch.cardinality()) == tf.data.UNKNOWN_CARDINALITY
  assert sum(1 for _ in one_epoch) == _centers(loc) // 8 - 3
  # The TF-free reader gives them too, decoding only the files it needs.
  read = []
  original = reader.FileRows._records  # pylint: disable=protected-access

  def counted(self, f):
    recs = original(self, f)
    read.append(len(recs))
    return recs

  monkeypatch.setattr(reader.FileRows, "_records", counted)
  files = [f["records"] for f in json.load(open(os.path.join(loc, "meta.json")))["files"]
           if f["role"] == "records"]
  records, one_file = sum(files), max(files)
  for training in (False, True):
    kw = dict(seed=5, shuffle_buffer=16, training=training)
    steps = len(_arrays(w2v_data.make_dataset(loc, 8, **kw)))
    start = steps * 9 // 10
    read.clear()
    batches = reader.numpy_batches(loc, 8, start_step=start, **kw)
    first = next(batches)
    assert sum(read) <= 2 * one_file, (training, read)  # the files of its window
    assert _same(_arrays([first]), _arrays(w2v_data.make_dataset(loc, 8, start_step=start, **kw)
                                  .take(1)))
  assert sum(read) < records / 2


def test_numpy_batches_equal_make_dataset(w2v):
  for loc, kw in ((w2v["two"], dict(seed=3)), (w2v["center"], dict(seed=3, start_step=4)),
                  (w2v["two"], dict(seed=2, drop_remainder=False, pad_to=40)),
                  (w2v["two"], dict(training=False))):
    assert _same(_arrays(w2v_data.make_dataset(loc, 8, **kw)),
                 _arrays(reader.numpy_batches(loc, 8, **kw)))
    for p in range(2):
      assert _same(_arrays(w2v_data.make_dataset(loc, 4, input_context=_ctx(2, p), **kw)),
                   _arrays(reader.numpy_batches(loc, 4, shard_index=p, num_shards=2, **kw)))


def test_mixture_proportions_determinism_and_schemas(w2v):
  a, b = w2v["two"], w2v["other_seed"]
  kw = dict(weights=[0.7, 0.3], seed=4)
  first = _arrays(w2v_data.make_dataset([a, b], 32, **kw).take(30))
  assert _same(first, _arrays(w2v_data.make_dataset([a, b], 32, **kw).take(30)))
  assert _same(first, _arrays(itertools.islice(reader.numpy_batches([a, b], 32, **kw), 30)))
  assert _same(_arrays(w2v_data.make_dataset([a, b], 32, start_step=7, **kw).take(5)),
               first[7:12])
  halves = [_arrays(w2v_data.make_dataset([a, b], global_batch_size=32, **kw,
                                          input_context=_ctx(2, p)).take(30)) for p in range(2)]
  for k in range(30):
    got, want = _join([halves[0][k], halves[1][k]]), first[k]
    assert np.array_equal(got[0], want[0]) and np.array_equal(
        got[1][:, :want[1].shape[1]], want[1])
  # Proportions: which dataset each center came from (its row, with the
  # stored noise words of that dataset), over 1,000 batches of 32.
  rows = {}
  for d, loc in enumerate((a, b)):
    for c, r, y, w in _arrays(reader.numpy_batches(loc, 64, training=False)):
      for i in range(len(c)):
        rows.setdefault((int(c[i, 0]),) + tuple(r[i, :int(w[i].sum())]), set()).add(d)
  seen = np.zeros(2)
  for c, r, y, w in _arrays(itertools.islice(reader.numpy_batches([a, b], 32, **kw), 1000)):
    for i in range(len(c)):
      origin = rows[(int(c[i, 0]),) + tuple(r[i, :int(w[i].sum())])]
      if len(origin) == 1:
        seen[next(iter(origin))] += 1
  assert seen.sum() > 0.99 * 32000
  share = seen / seen.sum()
  assert abs(share[0] - 0.7) < 0.01 and abs(share[1] - 0.3) < 0.01, share
  got = mixtures.proportions([0.7, 0.3], global_batch_size=32, steps=10000)
  assert abs(got[0] - 0.7) < 0.01
  # Another schema (the center layout) is refused in one line.
  with pytest.raises(UserError, match=f"^{w2v['center']}: another schema than {a}; a mixture "
                     "reads datasets of one package and schema$"):
    w2v_data.make_dataset([a, w2v["center"]], 8, **kw)
  with pytest.raises(UserError, match=f"^{w2v['center']}: another schema than {a}"):
    reader.numpy_batches([a, w2v["center"]], 8, **kw)
  with pytest.raises(UserError, match="pass weights"):
    w2v_data.make_dataset([a, b], 8, seed=1)


def test_static_element_spec_with_default_training_options(w2v):
  spec = w2v_data.make_dataset(w2v["two"], 8, seed=0).element_spec
  assert spec[0]["center"].shape == (8, 1)
  longest = json.load(open(os.path.join(w2v["two"], "meta.json")))["counts"]["max_row_length"]
  assert spec[0]["contexts_negatives"].shape.as_list() == [8, longest]  # issue 36 item 3
  assert spec[1].shape.as_list() == spec[2].shape.as_list() == [8, longest]
  for kw in (dict(in_memory=False), dict(negatives="fresh"), dict(weights=[1, 1])):
    loc = [w2v["two"], w2v["other_seed"]] if "weights" in kw else w2v["center"]
    spec = w2v_data.make_dataset(loc, 8, seed=0, pad_to=40, **kw).element_spec
    assert spec[0]["contexts_negatives"].shape == (8, 40), kw
    assert spec[0]["center"].shape == (8, 1) and spec[1].shape == (8, 40), kw


def test_fresh_draws_elastic_equal_steps_and_resumed(w2v):
  # w2v_data.train.draws' fresh draws shared out by draw_batches: the same global
  # batches for 1 and 2 pipelines, equal steps, start_step = the run from k.
  from w2v_data.train.draws import draw_batches  # pylint: disable=import-outside-toplevel
  loc = w2v["two"]
  flat = lambda ds: [[np.asarray(t) for t in tf.nest.flatten(e)] for e in ds]  # noqa: E731
  whole = flat(draw_batches(loc, 64, epochs=2, seed=3))
  assert len(whole) > 10
  hosts = [flat(draw_batches(loc, 64, epochs=2, seed=3, input_context=_ctx(2, p)))
           for p in range(2)]
  assert len(hosts[0]) == len(hosts[1]) == len(whole)
  for k, want in enumerate(whole):
    got = [np.concatenate([hosts[0][k][i], hosts[1][k][i]]) for i in range(len(want))]
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
  resumed = flat(draw_batches(loc, 64, epochs=2, seed=3, start_step=7))
  assert len(resumed) == len(whole) - 7
  assert all(np.array_equal(a, b) for u, v in zip(resumed, whole[7:]) for a, b in zip(u, v))
