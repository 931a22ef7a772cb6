"""The make_dataset contract shared by bert_data, w2v_data and mt_data."""

import dataclasses
import inspect
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import bert_data  # pylint: disable=wrong-import-position
from bert_data import dataset as bert_dataset  # pylint: disable=wrong-import-position
from mt_data import dataset as mt_dataset  # pylint: disable=wrong-import-position
from w2v_data import dataset as w2v_dataset  # pylint: disable=wrong-import-position
import mt_data  # pylint: disable=wrong-import-position
import w2v_data  # pylint: disable=wrong-import-position
from conftest import write_three_datasets  # pylint: disable=wrong-import-position
from textrecords.datasets import layout  # pylint: disable=wrong-import-position
from textrecords.datasets import metadata  # pylint: disable=wrong-import-position
from textrecords.errors import UserError  # pylint: disable=wrong-import-position
from textrecords.reading.read_options import ReadOptions  # pylint: disable=wrong-import-position

READERS = {
    "bert_data": lambda loc, b, **kw: bert_data.make_dataset(loc, b, **kw),
    "w2v_data": lambda loc, b, **kw: w2v_data.make_dataset(loc, b, **kw),
    "mt_data": lambda loc, b, **kw: mt_data.make_dataset(loc, b, split="train", **kw),
}
FUNCTIONS = {"bert_data": bert_dataset.make_dataset, "w2v_data": w2v_dataset.make_dataset,
             "mt_data": mt_dataset.make_dataset}


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
  return write_three_datasets(tmp_path_factory.mktemp("three"))


def test_same_defaults_in_every_package():
  fields = {f.name: f.default for f in dataclasses.fields(ReadOptions) if f.name != "batch_size"}
  for package, fn in FUNCTIONS.items():
    params = inspect.signature(fn).parameters
    assert "batch_size" in params, package
    for name, default in fields.items():
      assert params[name].kind == inspect.Parameter.KEYWORD_ONLY, (package, name)
      assert params[name].default == default, (package, name)


@pytest.mark.parametrize("kwargs, message", [
    ({"batch_size": 8.0}, "batch_size=8.0: must be a positive integer"),
    ({"batch_size": 0}, "batch_size=0: must be a positive integer"),
    ({"batch_size": True}, "batch_size=True: must be a positive integer"),
    ({"shuffle_buffer": 0}, "shuffle_buffer=0: must be a positive integer"),
    ({"seed": 1.5}, "seed=1.5: must be an integer or None"),
    ({"training": "yes"}, "training='yes': must be True, False or None"),
    ({"drop_remainder": 1}, "drop_remainder=1: must be True, False or None"),
    ({"start_step": -1}, "start_step=-1: must be an integer >= 0"),
    ({"global_batch_size": 0}, "pass batch_size (per replica) or global_batch_size, not both"),
    ({"repeat": None}, "repeat=None: must be True or False"),
    ({"verify": "sha1"}, "verify='sha1': must be one of checksum, size, none"),
    ({"skip_corrupt": "no"}, "skip_corrupt='no': must be True or False"),
    ({"input_context": 2}, "input_context=2: must be a tf.distribute.InputContext or None"),
])
def test_same_mistake_same_error_everywhere(datasets, kwargs, message):
  kwargs = dict(kwargs)
  batch_size = kwargs.pop("batch_size", 4)
  for package, read in READERS.items():
    with pytest.raises(UserError) as e:
      read(datasets[package], batch_size, **kwargs)
    assert str(e.value) == message, package


def _batches(ds):
  return sum(1 for _ in ds)


@pytest.mark.parametrize("package", ["bert_data", "w2v_data", "mt_data"])
def test_cardinality_is_known_and_true(datasets, package):
  read, loc = READERS[package], datasets[package]
  lay = layout.DatasetLayout.for_dir(loc) if os.path.isdir(loc) else (
      layout.DatasetLayout.for_file(loc))
  meta = json.load(open(lay.meta_path))
  if package == "w2v_data":   # batches of centers
    per_file = [meta["file_centers"][n] for n in meta["splits"]["train"]["files"]]
  else:
    per_file = [f["records"] for f in meta["files"] if f.get("split") == "train"]
  total, b = sum(per_file), 3
  for kw, want in (({}, total // b),               # training drops the partial batch
                   ({"training": False}, -(-total // b)),  # evaluation keeps it
                   ({"drop_remainder": False}, -(-total // b)),
                   ({"training": False, "drop_remainder": True}, total // b)):
    ds = read(loc, b, seed=1, **kw)
    assert int(ds.cardinality()) == want, kw
    assert _batches(ds) == want, kw
  rows = 0
  for i in range(2):
    ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=i)
    ds = read(loc, b, training=False, input_context=ctx)
    n = _batches(ds)
    assert int(ds.cardinality()) == n
    # each pipeline's slice of every global batch of 2 * b (w2v: of centers)
    assert n >= total // (2 * b)
    rows += sum(int(next(iter(x.values())).shape[0]) for x, _, _ in ds)
  assert rows == total
  ds = read(loc, b, seed=1, repeat=True)
  assert int(ds.cardinality()) == tf.data.INFINITE_CARDINALITY
  assert len(list(ds.take(total // b + 2))) == total // b + 2


def test_bert_keras_knows_the_steps(datasets):
  ds = bert_data.make_dataset(datasets["bert_data"], 4, seed=0)
  assert int(ds.cardinality()) > 0   # Keras shows a step total; no "ran out of data"


def test_checksum_log_line_above_threshold(datasets, monkeypatch):
  loc = datasets["w2v_data"]
  metadata._CHECKED.clear()  # pylint: disable=protected-access
  monkeypatch.setattr(metadata, "VERIFY_LOG_BYTES", 1)
  logged = []
  w2v_data.make_dataset(loc, 4, log=logged.append)
  assert len(logged) == 1
  assert logged[0].startswith("verifying sha256 of 3 files (0.0 GB) from ")  # 2 shards + vocab
  logged.clear()
  w2v_data.make_dataset(loc, 4, log=logged.append)   # hashed once per process
  assert logged == []
  metadata._CHECKED.clear()  # pylint: disable=protected-access
  monkeypatch.setattr(metadata, "VERIFY_LOG_BYTES", 1 << 40)
  w2v_data.make_dataset(loc, 4, log=logged.append)
  assert logged == []


def test_bert_reader_on_a_w2v_dataset_names_the_w2v_reader(datasets):
  meta_path = os.path.join(datasets["w2v_data"], "meta.json")
  with pytest.raises(UserError) as e:
    bert_data.make_dataset(meta_path, 4)
  assert str(e.value) == f"{meta_path}: a w2v_data dataset; read it with w2v_data.make_dataset"
  with pytest.raises(UserError, match="a bert_data dataset; read it with bert_data"):
    mt_data.make_dataset(datasets["bert_data"], 4, split="train")


def test_every_reader_takes_every_location_form(datasets):
  for package, read in READERS.items():
    loc = datasets[package]
    lay = layout.DatasetLayout.for_dir(loc) if os.path.isdir(loc) else (
        layout.DatasetLayout.for_file(loc))
    want = _batches(read(loc, 2, training=False))
    for form in (lay.meta_path, lay.path(lay.record_stem() + "-*")):
      assert _batches(read(form, 2, training=False)) == want, (package, form)


def test_mt_split_must_match_the_files_given(datasets):
  loc = datasets["mt_data"]
  valid = os.path.join(loc, "valid.tfrecord-*")
  assert _batches(mt_data.make_dataset(valid, 2, split="valid")) > 0
  with pytest.raises(UserError, match="of the 'valid' split, but split='train'"):
    mt_data.make_dataset(valid, 2, split="train")


def test_100000_shard_dataset_reads_back(datasets, tmp_path):
  src = layout.DatasetLayout.for_file(datasets["bert_data"])
  meta = json.load(open(src.meta_path))
  real = meta["files"][0]
  lay = layout.DatasetLayout.for_file(str(tmp_path / "big.tfrecord"))
  names = lay.record_names(num_shards=100000)
  shutil.copy(src.path(real["name"]), lay.path(names[7]))
  infos = [dict(real, name=n) if i == 7 else {"name": n, "bytes": 0, "sha256": "", "records": 0}
           for i, n in enumerate(names)]
  meta = metadata.set_files(meta, infos, {"train": names})
  metadata.write(lay.meta_path, meta)
  ds = bert_data.make_dataset(lay.path(names[7]), 1, training=False)
  assert _batches(ds) == real["records"]
  first = next(iter(ds))[0]["input_ids"].numpy()
  want = next(iter(bert_data.make_dataset(src.path(real["name"]), 1, training=False)))
  np.testing.assert_array_equal(first, want[0]["input_ids"].numpy())


@pytest.mark.parametrize("package, name", [("w2v_data", "vocab.txt"),
                                           ("mt_data", "tgt_vocab.txt")])
def test_changed_vocab_is_refused_by_every_reader(datasets, tmp_path, package, name):
  # issue 21 item 6: the vocab files the metadata lists are checked like the records.
  from conftest import REPO, run_cli  # pylint: disable=import-outside-toplevel
  loc = str(tmp_path / "copy")
  shutil.copytree(datasets[package], loc)
  vocab = os.path.join(loc, name)
  numpy_batches = {"w2v_data": lambda **kw: list(w2v_data.numpy_batches(loc, 4, **kw)),
                   "mt_data": lambda **kw: list(mt_data.numpy_batches(loc, 4, num_steps=9,
                                                                      **kw))}[package]
  assert numpy_batches()  # reads before the change
  with open(vocab, "a", encoding="utf-8") as f:
    f.write("extra\n")
  changed = open(vocab, "rb").read()
  readers = [lambda **kw: READERS[package](loc, 4, num_steps=9, **kw) if package == "mt_data"
             else READERS[package](loc, 4, **kw), numpy_batches]
  for read in readers:
    for verify in ("checksum", "size"):
      with pytest.raises(UserError, match=f"^{vocab} has .* bytes, metadata says .*: changed"):
        read(verify=verify)
  if package == "mt_data":
    r = run_cli("mt_data.stats", f"--output_dir={loc}")
  else:  # a training script
    r = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "train_skipgram.py"),
                        f"--data_dir={loc}", "--epochs=1"], capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  lines = [l for l in r.stderr.splitlines() if l.startswith("error")]
  assert r.returncode == 2 and lines == [r.stderr.strip().splitlines()[-1]], r.stderr
  assert vocab in lines[0] and "metadata says" in lines[0]
  # A same-size edit: the sizes match, the sha256 (verify="checksum", the default) does not.
  original = changed[:-len(b"extra\n")]
  edited = original[:-2] + (b"Z" if original[-2:-1] != b"Z" else b"Y") + original[-1:]
  open(vocab, "wb").write(edited)
  with pytest.raises(UserError, match=f"^{vocab}: sha256 differs from "):
    readers[0]()
  if package == "mt_data":
    with pytest.raises(UserError, match="sha256 differs"):
      mt_data.load_codecs(loc)
  else:
    from w2v_data.train import models  # pylint: disable=import-outside-toplevel
    with pytest.raises(UserError, match="sha256 differs"):
      models.read_tokens(loc)
  assert open(vocab, "rb").read() == edited  # the reader changed nothing
  open(vocab, "wb").write(original)
  assert numpy_batches() and readers[0]() is not None  # restored: reads again
