"""The training read order (issue 24): one signature, equal steps on every
host, start_step resume, elastic global batches, mixtures; tf.data and the
TF-free readers alike."""

import itertools
import json
import os
import subprocess
import sys

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import bert_data  # pylint: disable=wrong-import-position
import mt_data  # pylint: disable=wrong-import-position
from bert_data import generator  # pylint: disable=wrong-import-position
from bert_data.config import BertConfig  # pylint: disable=wrong-import-position
from conftest import SAMPLE_TEXT, VOCAB, free_port, write_three_datasets  # pylint: disable=wrong-import-position
from textrecords.reading import mixtures  # pylint: disable=wrong-import-position
from textrecords.reading import read_order as R  # pylint: disable=wrong-import-position
from textrecords.reading import tf_order  # pylint: disable=wrong-import-position
from textrecords.errors import UserError  # pylint: disable=wrong-import-position


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
  d = tmp_path_factory.mktemp("order")
  out = write_three_datasets(d)
  one = str(d / "one" / "train.tfrecord")  # a single record file
  generator.create(BertConfig(input_files=(SAMPLE_TEXT,), output_files=(one,), vocab_file=VOCAB,
                             max_seq_length=32, max_predictions_per_seq=5, dupe_factor=2,
                             num_shards=1, num_workers=1, quiet=True))
  out["one"] = one
  return out


def _ids(batches):
  return [x["input_ids"].numpy() if hasattr(x["input_ids"], "numpy") else x["input_ids"]
          for x, _, _ in batches]


def _ctx(pipelines, pipeline_id, replicas=None):
  return tf.distribute.InputContext(num_input_pipelines=pipelines,
                                    input_pipeline_id=pipeline_id,
                                    num_replicas_in_sync=replicas or pipelines)


# ----------------------------------------------------------------- the order itself

@pytest.mark.parametrize("training,drop,g,replicas,pipelines,start,repeat", [
    (True, True, 8, 4, 2, 0, False), (True, True, 8, 4, 2, 5, True),
    (False, False, 8, 2, 2, 0, False), (True, False, 12, 4, 4, 3, False)])
def test_tf_order_equals_numpy_order(training, drop, g, replicas, pipelines, start, repeat):
  counts = (37, 5, 60, 1)
  base = np.concatenate(([0], np.cumsum(counts)))
  read = lambda i: tf.data.Dataset.range(tf.gather(base, i), tf.gather(base, i + 1))  # noqa: E731
  stream = R.Stream(counts, training, 7, R.used_records(sum(counts), g, drop),
                    R.window_records(20, g))
  for p in range(pipelines):
    plan = R.Plan(stream, R.Sharing(g, replicas, pipelines, p), drop, start, repeat)
    want = list(itertools.islice(plan.batches(), 40))
    got = list(itertools.islice(tf_order.plan_dataset(plan, read), 40))
    assert [(e, b.tolist()) for e, b in want] == [(int(e), b.numpy().tolist()) for e, b in got]
    if not repeat:
      assert plan.num_batches() == len(want)


@pytest.mark.parametrize("training,g,replicas,pipelines,start,repeat", [
    (True, 8, 4, 2, 0, False), (True, 8, 4, 4, 5, True), (False, 6, 2, 1, 4, False),
    (True, 12, 4, 2, 3, False), (False, 8, 2, 2, 3, True), (True, 4, 2, 1, 30, True)])
def test_parallel_read_epochs_equal_numpy_order(training, g, replicas, pipelines, start,
                                                 repeat):
  # plan_dataset with read_files (drop_remainder): one pipeline for every
  # epoch (its number an input), each epoch's files read in parallel into
  # windows cut by positions drawn in-graph; without repeat, a training
  # dataset's second pass is the next whole epoch, an evaluation one's its
  # first pass again.
  counts = (37, 5, 60, 1)
  base = np.concatenate(([0], np.cumsum(counts)))
  read = lambda i: tf.data.Dataset.range(tf.gather(base, i), tf.gather(base, i + 1))  # noqa: E731
  read_files = lambda files: tf.data.Dataset.from_tensor_slices(files).flat_map(read)  # noqa: E731
  stream = R.Stream(counts, training, 7, R.used_records(sum(counts), g, True),
                    R.window_records(20, g))
  for p in range(pipelines):
    sharing = R.Sharing(g, replicas, pipelines, p)
    plan = R.Plan(stream, sharing, True, start, repeat)
    want = list(itertools.islice(plan.batches(), 40))
    ds = tf_order.plan_dataset(plan, read, read_files)
    got = list(itertools.islice(ds, 40))
    assert [(e, b.tolist()) for e, b in want] == [(int(e), b.numpy().tolist()) for e, b in got]
    if not repeat:
      e0, _ = plan.start()
      after = (R.Plan(stream, sharing, True, (e0 + 1) * plan.steps_per_epoch, False)
               if training else plan)
      assert ([(e, b.tolist()) for e, b in after.batches()]
              == [(int(e), b.numpy().tolist()) for e, b in ds])


def test_elastic_global_batches_and_equal_steps():
  counts, g = (50, 3, 71), 8
  stream = R.Stream(counts, True, 11, R.used_records(sum(counts), g, True),
                    R.window_records(16, g))
  whole = [ids for _, ids in R.Plan(stream, R.Sharing(g), True).batches()]
  assert len(whole) == sum(counts) // g
  epoch = np.concatenate(whole)
  assert len(set(epoch.tolist())) == len(epoch)  # each record at most once an epoch
  for pipelines in (2, 4):
    per_host = [[ids for _, ids in R.Plan(stream, R.Sharing(g, 4, pipelines, p), True).batches()]
                for p in range(pipelines)]
    steps = {len(h) for h in per_host}
    assert steps == {len(whole) * 4 // pipelines}  # the same on every host
    local = 4 // pipelines
    for k, want in enumerate(whole):
      parts = [b for h in per_host for b in h[k * local:(k + 1) * local]]
      assert np.concatenate(parts).tolist() == want.tolist()  # disjoint; union = batch k


def test_order_is_shuffled_and_differs_per_epoch():
  counts, g = (400, 400), 10
  stream = R.Stream(counts, True, 3, 800, R.window_records(100, g))
  first, second = (stream.flat_ids(e * 800, 800) for e in (0, 1))
  assert sorted(first.tolist()) == list(range(800))
  assert not np.array_equal(first, second)
  # Neighbours on disk do not stay neighbours: few consecutive pairs kept.
  assert np.mean(np.diff(first) == 1) < 0.05


# ----------------------------------------------------------------- the packages

def test_one_signature_everywhere(datasets):
  import inspect  # pylint: disable=import-outside-toplevel
  from bert_data import reader as bert_reader  # pylint: disable=import-outside-toplevel
  from mt_data import reader as mt_reader  # pylint: disable=import-outside-toplevel
  from w2v_data import reader as w2v_reader  # pylint: disable=import-outside-toplevel
  import w2v_data  # pylint: disable=import-outside-toplevel
  names = ["location", "batch_size", "split", "training", "seed", "global_batch_size",
           "input_context", "start_step", "drop_remainder"]
  for fn in (bert_data.make_dataset, mt_data.make_dataset, w2v_data.make_dataset,
             bert_reader.numpy_batches, mt_reader.numpy_batches, w2v_reader.numpy_batches):
    params = inspect.signature(fn).parameters
    assert list(params)[:len(names)] == names, fn.__module__
    assert params["batch_size"].default is None and params["drop_remainder"].default is None
    assert params["split"].kind == inspect.Parameter.KEYWORD_ONLY
  loc = datasets["bert_data"]
  with pytest.raises(UserError, match="^pass batch_size .per replica. or global_batch_size, "
                     "not both$"):
    bert_data.make_dataset(loc, 4, global_batch_size=8)
  with pytest.raises(UserError, match="^batch_size or global_batch_size is required$"):
    mt_data.numpy_batches(datasets["mt_data"])
  with pytest.raises(UserError, match="^start_step=-1: must be an integer >= 0$"):
    bert_data.make_dataset(loc, 4, start_step=-1)
  # global_batch_size over an input context: ctx.get_per_replica_batch_size.
  ds = bert_data.make_dataset(loc, global_batch_size=8, input_context=_ctx(2, 0, 4), seed=1)
  assert ds.element_spec[0]["input_ids"].shape == (2, 32)


def test_training_defaults_give_static_shapes(datasets):
  ds = bert_data.make_dataset(datasets["bert_data"], 4, seed=0)
  assert ds.element_spec[0]["input_ids"].shape == (4, 32)
  ds = mt_data.make_dataset(datasets["mt_data"], 4, seed=0)
  assert ds.element_spec[0]["source"].shape == (4, 9)
  # Evaluation keeps the last partial batch.
  ds = mt_data.make_dataset(datasets["mt_data"], 4, split="valid")
  assert ds.element_spec[0]["source"].shape == (None, 9)
  assert sum(int(y.shape[0]) for _, y, _ in ds) == 12


@pytest.mark.parametrize("kw", [dict(seed=3), dict(seed=3, start_step=3),
                                dict(training=False),
                                dict(seed=2, drop_remainder=False)])
def test_numpy_batches_equal_make_dataset(datasets, kw):
  from bert_data import reader as bert_reader  # pylint: disable=import-outside-toplevel
  from mt_data import reader as mt_reader  # pylint: disable=import-outside-toplevel
  loc = datasets["bert_data"]
  a, b = _ids(bert_data.make_dataset(loc, 4, **kw)), _ids(bert_reader.numpy_batches(loc, 4, **kw))
  assert len(a) == len(b) > 0 and all(np.array_equal(x, y) for x, y in zip(a, b))
  for p in range(2):
    ctx = _ctx(2, p)
    a = _ids(bert_data.make_dataset(loc, 3, input_context=ctx, **kw))
    b = _ids(bert_reader.numpy_batches(loc, 3, shard_index=p, num_shards=2, **kw))
    assert len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))
  mt = datasets["mt_data"]
  a = [x["source"].numpy() for x, _, _ in mt_data.make_dataset(mt, 4, **kw)]
  b = [x["source"] for x, _, _ in mt_reader.numpy_batches(mt, 4, **kw)]
  assert len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


def test_start_step_resumes_the_uninterrupted_run(datasets):
  loc = datasets["bert_data"]
  run = _ids(bert_data.make_dataset(loc, 4, seed=5, repeat=True).take(40))
  for k in (1, 7, 19):  # 19: past the first epoch (of ~14 steps)
    resumed = _ids(bert_data.make_dataset(loc, 4, seed=5, repeat=True, start_step=k).take(8))
    assert all(np.array_equal(x, y) for x, y in zip(resumed, run[k:k + 8]))
  # Without repeat, pass 1 is the rest of start_step's epoch, pass 2 the whole
  # next epoch, as in the run: passes of two lengths, so the length is unknown.
  steps = len(bert_data.make_dataset(loc, 4, seed=5))
  resumed = bert_data.make_dataset(loc, 4, seed=5, start_step=3)
  assert int(resumed.cardinality()) == tf.data.UNKNOWN_CARDINALITY
  first, second = _ids(resumed), _ids(resumed)
  assert (len(first), len(second)) == (steps - 3, steps)
  assert all(np.array_equal(x, y) for x, y in zip(first + second, run[3:steps * 2]))
  at_epoch = bert_data.make_dataset(loc, 4, seed=5, start_step=steps)
  assert int(at_epoch.cardinality()) == steps == sum(1 for _ in at_epoch)


@pytest.mark.parametrize("which", ["bert_data", "one"])
def test_equal_steps_on_every_host(datasets, which):
  loc = datasets[which]
  meta = json.load(open(loc + ".meta.json"))
  total = meta["counts"]["records"]
  for pipelines in (1, 2, 4):
    counts = []
    for p in range(pipelines):
      ds = bert_data.make_dataset(loc, 2, input_context=_ctx(pipelines, p), seed=0)
      counts.append((int(ds.cardinality()), sum(1 for _ in ds)))
    assert set(counts) == {(total // (2 * pipelines),) * 2}, (which, pipelines)
  # Elastic: global batch k holds the same records for 1, 2 and 4 pipelines.
  whole = _ids(bert_data.make_dataset(loc, 4, seed=9))
  for pipelines in (2, 4):
    hosts = [_ids(bert_data.make_dataset(loc, global_batch_size=4, seed=9,
                                         input_context=_ctx(pipelines, p)))
             for p in range(pipelines)]
    for k, want in enumerate(whole):
      np.testing.assert_array_equal(np.concatenate([h[k] for h in hosts]), want)


def test_mixture_proportions_determinism_and_schemas(datasets, tmp_path):
  from bert_data import reader as bert_reader  # pylint: disable=import-outside-toplevel
  got = mixtures.proportions([0.7, 0.3], global_batch_size=32, steps=10000)
  assert abs(got[0] - 0.7) < 0.01 and abs(got[1] - 0.3) < 0.01
  assert abs(mixtures.proportions([1, 2, 1], 6, 10000)[1] - 0.5) < 0.01
  a, b = datasets["bert_data"], datasets["one"]
  kw = dict(weights=[0.75, 0.25], seed=4)
  first = _ids(bert_data.make_dataset([a, b], 8, **kw).take(12))
  again = _ids(bert_data.make_dataset([a, b], 8, **kw).take(12))
  assert all(np.array_equal(x, y) for x, y in zip(first, again))
  plain = list(itertools.islice(bert_reader.numpy_batches([a, b], 8, **kw), 12))
  assert all(np.array_equal(x, y) for x, y in zip(first, _ids(plain)))
  resumed = _ids(bert_data.make_dataset([a, b], 8, start_step=5, **kw).take(7))
  assert all(np.array_equal(x, y) for x, y in zip(resumed, first[5:]))
  halves = [_ids(bert_data.make_dataset([a, b], global_batch_size=8, input_context=_ctx(2, p),
                                        **kw).take(12)) for p in range(2)]
  for k in range(12):
    np.testing.assert_array_equal(np.concatenate([halves[0][k], halves[1][k]]), first[k])
  other = str(tmp_path / "long" / "train.tfrecord")
  generator.create(BertConfig(input_files=(SAMPLE_TEXT,), output_files=(other,),
                             vocab_file=VOCAB, max_seq_length=48, max_predictions_per_seq=5,
                             dupe_factor=1, num_workers=1, quiet=True))
  with pytest.raises(UserError, match=f"^{other}: another schema than {a}; a mixture reads"):
    bert_data.make_dataset([a, other], 8, **kw)
  with pytest.raises(UserError, match="pass weights"):
    bert_data.make_dataset([a, b], 8, seed=1)
  with pytest.raises(UserError, match=r"weights=\[1\]: must be 2 non-negative numbers"):
    bert_data.make_dataset([a, b], 8, weights=[1])


# Weights whose G-scaled cumulative sums are not integers (unlike 0.75/0.25
# at G=8): a per-dataset floor in place of the difference of floors loses rows.
_AWKWARD_MIXTURES = [([0.7, 0.3], 32), ([0.7, 0.3], 7), ([0.1, 0.2, 0.7], 32),
                     ([1, 1, 1], 32), ([0.55, 0.45], 10), ([0.9, 0.05, 0.05], 64),
                     ([0.999, 0.001], 8), ([0.25, 0, 0.75], 12), ([7, 3], 1)]


@pytest.mark.parametrize("weights,g", _AWKWARD_MIXTURES)
def test_every_mixture_step_has_exactly_g_rows(weights, g):
  n = len(weights)
  mix = R.Mixture(tuple(R.Stream((1,), True, 0, 1, 1, d) for d in range(n)),
                  R.mixture_weights(weights, n), R.Sharing(g), seed=3)
  share = np.diff(mix.cumulative) / R.WEIGHT_SCALE  # the weights as stored, exact
  for step in itertools.chain(range(400), range(10**9, 10**9 + 40)):
    counts = mix.counts(step)
    assert sum(counts) == g and min(counts) >= 0, (step, counts)
    before = [mix.before(d, step) for d in range(n)]
    assert sum(before) == step * g, (step, before)
    assert np.all(np.abs(np.array(before) - step * g * share) < 1), (step, before)
    assert np.bincount(mix.choices(step), minlength=n).tolist() == counts
  batches = itertools.islice(mix.batches(), 50)
  assert [len(which) for _, which, _ in batches] == [g] * 50


def test_tf_and_numpy_mixtures_have_g_rows_and_agree_on_awkward_weights(datasets):
  from bert_data import reader as bert_reader  # pylint: disable=import-outside-toplevel
  kw = dict(weights=[0.7, 0.3], seed=4)
  loc = [datasets["bert_data"], datasets["one"]]
  via_tf = _ids(bert_data.make_dataset(loc, 32, **kw).take(40))
  plain = _ids(itertools.islice(bert_reader.numpy_batches(loc, 32, **kw), 40))
  assert [len(x) for x in via_tf] == [len(x) for x in plain] == [32] * 40
  for k, (x, y) in enumerate(zip(via_tf, plain)):
    np.testing.assert_array_equal(x, y, err_msg=f"step {k}")


_WORKER = r"""
import json, os, sys
import tensorflow as tf
import bert_data
strategy = tf.distribute.MultiWorkerMirroredStrategy()
ds = strategy.distribute_datasets_from_function(
    lambda ctx: bert_data.make_dataset(sys.argv[1], global_batch_size=4, input_context=ctx,
                                       seed=0))
sizes = []
@tf.function
def step(x):
  return strategy.run(lambda b: tf.shape(b["input_ids"])[0], args=(x,))
for x, _, _ in ds:
  sizes.append(int(strategy.experimental_local_results(step(x))[0]))
print(json.dumps(sizes))
"""


def test_multi_worker_mirrored_equal_steps(datasets, tmp_path):
  ports = [free_port(), free_port()]
  cluster = {"worker": [f"localhost:{p}" for p in ports]}
  script = tmp_path / "worker.py"
  script.write_text(_WORKER)
  procs = []
  for i in range(2):
    env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": cluster,
                                                 "task": {"type": "worker", "index": i}}),
               TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    procs.append(subprocess.Popen([sys.executable, str(script), datasets["one"]], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
  outs = [p.communicate(timeout=300) for p in procs]
  for p, (out, err) in zip(procs, outs):
    assert p.returncode == 0, err[-2000:]
  sizes = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
  meta = json.load(open(datasets["one"] + ".meta.json"))
  assert sizes[0] == sizes[1] == [2] * (meta["counts"]["records"] // 4)
