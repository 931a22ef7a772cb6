"""make_dataset on a tf.data service, under MirroredStrategy, and without TF log lines.

Issue 24: item 6 (tf.data service, in-process dispatcher and worker), the
MirroredStrategy test (2 logical CPU devices, distribute_datasets_from_function,
in a subprocess: logical devices are set before TF starts) and item 8's "no TF
log line from our pipelines at the default log level" (a subprocess without
TF_CPP_MIN_LOG_LEVEL).
"""

import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO, write_three_datasets
from textrecords.errors import UserError

tf = pytest.importorskip("tensorflow")
import bert_data  # noqa: E402  pylint: disable=wrong-import-position
import mt_data  # noqa: E402  pylint: disable=wrong-import-position
import w2v_data  # noqa: E402  pylint: disable=wrong-import-position


@pytest.fixture(scope="module")
def locations(tmp_path_factory):
  return write_three_datasets(tmp_path_factory.mktemp("three"))


def _readers(locations):
  """name -> make_dataset(**kw) of each package's dataset, in file order."""
  return {
      "bert_data": lambda **kw: bert_data.make_dataset(locations["bert_data"], 4,
                                                       training=False, **kw),
      "w2v_data": lambda **kw: w2v_data.make_dataset(locations["w2v_data"], 8,
                                                     training=False, **kw),
      "mt_data": lambda **kw: mt_data.make_dataset(locations["mt_data"], 4, split="train",
                                                   training=False, **kw),
  }


def _flat(ds):
  return [[np.asarray(t) for t in tf.nest.flatten(e)] for e in ds]


def _equal(a, b):
  return len(a) == len(b) and all(
      len(x) == len(y) and all(np.array_equal(u, v) for u, v in zip(x, y))
      for x, y in zip(a, b))


@pytest.fixture(scope="module")
def service():
  """An in-process tf.data service: one dispatcher, one worker, on localhost."""
  svc = tf.data.experimental.service
  dispatcher = svc.DispatchServer(svc.DispatcherConfig(port=0))
  address = dispatcher.target.split("://")[1]
  worker = svc.WorkerServer(svc.WorkerConfig(dispatcher_address=address, port=0))
  yield dispatcher.target
  worker._stop()  # pylint: disable=protected-access
  dispatcher._stop()  # pylint: disable=protected-access


def test_data_service_gives_the_local_batches(locations, service):
  for name, make in _readers(locations).items():
    local = make()
    served = make(data_service=service)
    assert served.element_spec == local.element_spec, name
    assert _equal(_flat(served), _flat(local)), name
  # Two consumers of one named job share its batches (each batch to one of them).
  make = _readers(locations)["mt_data"]
  a = iter(make(data_service=service, job_name="shared"))
  b = iter(make(data_service=service, job_name="shared"))
  got = []
  for it in (a, b):
    got += [e for e in it]
  assert len(got) == len(_flat(make()))


def test_w2v_held_rows_on_the_service(locations, service):
  kw = dict(seed=4, in_memory=True)
  local = w2v_data.make_dataset(locations["w2v_data"], 8, **kw)
  served = w2v_data.make_dataset(locations["w2v_data"], 8, data_service=service, **kw)
  assert _equal(_flat(served), _flat(local))
  assert len(served._as_serialized_graph().numpy()) < 1 << 20  # pylint: disable=protected-access


@pytest.mark.parametrize("kwargs, text", [
    ({"job_name": "j"}, "job_name='j' needs data_service"),
    ({"data_service": "localhost"}, "data_service='localhost': must be"),
    ({"data_service": "grpc://host:port"}, "must be a tf.data service"),
    ({"data_service": "localhost:5050", "job_name": ""}, "job_name='': must be"),
])
def test_bad_data_service_arguments(locations, kwargs, text):
  for name, make in _readers(locations).items():
    with pytest.raises(UserError, match=text) as e:
      make(**kwargs)
    assert "\n" not in str(e.value), name


def _run_child(code, *args, env_drop=(), timeout=300):
  env = {k: v for k, v in os.environ.items() if k not in env_drop}
  env["PYTHONPATH"] = REPO
  return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                        timeout=timeout, env=env, cwd=REPO)


_QUIET_CHILD = r"""
import sys
import tensorflow as tf
import bert_data, mt_data, w2v_data
locs = dict(zip(["bert_data", "w2v_data", "mt_data"], sys.argv[1:]))
print("PIPELINES START", file=sys.stderr, flush=True)
for ds in (bert_data.make_dataset(locs["bert_data"], 4, seed=1),
           w2v_data.make_dataset(locs["w2v_data"], 8, seed=1),
           w2v_data.make_dataset(locs["w2v_data"], 8, seed=1, in_memory=False),
           mt_data.make_dataset(locs["mt_data"], 4, split="train", seed=1),
           mt_data.make_dataset(locs["mt_data"], 4, split="valid", num_steps=None,
                                bucket_boundaries=[5, 8])):
  for _ in ds:
    pass
print("PIPELINES END", file=sys.stderr, flush=True)
"""


def test_no_tf_log_line_at_the_default_log_level(locations):
  # TF's TFRecordDataset kernel logs "The default buffer size is 262144, which is
  # overridden ..." (INFO) once per process unless TF_CPP_MIN_LOG_LEVEL is set.
  proc = _run_child(_QUIET_CHILD, locations["bert_data"], locations["w2v_data"],
                    locations["mt_data"], env_drop=("TF_CPP_MIN_LOG_LEVEL",))
  assert proc.returncode == 0, proc.stderr[-3000:]
  between = proc.stderr.split("PIPELINES START\n", 1)[1].split("PIPELINES END", 1)[0]
  assert between == "", between


_MIRRORED_CHILD = r"""
import sys
import numpy as np
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
import bert_data, mt_data, w2v_data
from w2v_data.train import models
locs = dict(zip(["bert_data", "w2v_data", "mt_data"], sys.argv[1:]))
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
assert strategy.num_replicas_in_sync == 2
GLOBAL = 8
makers = {
    "bert_data": lambda ctx, b: bert_data.make_dataset(
        locs["bert_data"], b, seed=1, drop_remainder=True, input_context=ctx),
    "w2v_data": lambda ctx, b: w2v_data.make_dataset(
        locs["w2v_data"], b, seed=1, drop_remainder=True, input_context=ctx),
    "mt_data": lambda ctx, b: mt_data.make_dataset(
        locs["mt_data"], b, split="train", seed=1, drop_remainder=True, input_context=ctx),
}
for name, make in makers.items():
  def dataset_fn(ctx, make=make):
    return make(ctx, ctx.get_per_replica_batch_size(GLOBAL))
  dist = strategy.distribute_datasets_from_function(dataset_fn)
  steps = 0
  for batch in dist:
    for part in strategy.experimental_local_results(batch):
      for t in tf.nest.flatten(part):
        assert t.shape[0] == GLOBAL // 2, (name, t.shape)
    steps += 1
    if steps == 3:
      break
  # One input pipeline feeds both replicas: a step takes two of its batches.
  expected = min(3, int(make(None, GLOBAL // 2).cardinality()) // 2)
  assert steps == expected >= 2, (name, steps, expected)
  print(name, "iterated", flush=True)
# A few steps of Keras fit on the distributed w2v batches.
vocab = len(models.read_tokens(locs["w2v_data"]))
with strategy.scope():
  model = models.skipgram(vocab, 8)
dist = strategy.distribute_datasets_from_function(
    lambda ctx: makers["w2v_data"](ctx, ctx.get_per_replica_batch_size(GLOBAL)).repeat())
history = model.fit(dist, epochs=1, steps_per_epoch=3, verbose=0)
assert np.isfinite(history.history["loss"][0])
print("fit ok", flush=True)
"""


def test_mirrored_strategy_two_cpus_all_packages(locations):
  proc = _run_child(_MIRRORED_CHILD, locations["bert_data"], locations["w2v_data"],
                    locations["mt_data"])
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert proc.stdout.split() == ("bert_data iterated w2v_data iterated mt_data iterated "
                                 "fit ok").split()
