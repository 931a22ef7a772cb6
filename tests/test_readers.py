"""TF-free readers: offset index, RecordSource, numpy batches == make_dataset's."""

import json
import os
import shutil

import numpy as np
import pytest

import bert_data
import mt_data
import w2v_data
from bert_data import generator as bert_generator
from bert_data import reader as bert_reader
from bert_data import schema as bert_schema
from bert_data.config import BertConfig
from conftest import GOLDEN, SAMPLE_TEXT, TESTDATA, VOCAB, run_cli
from mt_data import config as mt_config
from mt_data import generator as mt_generator
from textrecords.datasets import index, layout
from textrecords.files import atomic_file, tfrecord
from textrecords.reading import numpy_reader
from textrecords.reading import record_source
from textrecords.errors import UserError
from w2v_data import generator as w2v_generator
from w2v_data import reader as w2v_reader
from w2v_data.config import W2vConfig

tf = pytest.importorskip("tensorflow")


@pytest.fixture(scope="module")
def w2v_outs(tmp_path_factory):
  base = tmp_path_factory.mktemp("w2v")
  dirs = {}
  for layout in ("sentence", "center"):
    dirs[layout] = str(base / layout)
    w2v_generator.create(W2vConfig(
        input_file=os.path.join(TESTDATA, "w2v_tiny.txt"), output_dir=dirs[layout],
        min_freq=2, subsample_t=3e-2, max_window_size=3, num_noise_words=3, random_seed=3,
        num_workers=1, num_shards=2, layout=layout))
  return dirs


def _np(tree):
  if isinstance(tree, dict):
    return {k: _np(v) for k, v in tree.items()}
  if isinstance(tree, tuple):
    return tuple(_np(v) for v in tree)
  return tree.numpy() if hasattr(tree, "numpy") else tree


def assert_same_batches(tf_ds, np_batches):
  """Element for element: same keys, dtypes, shapes and values."""
  want = [_np(b) for b in tf_ds]
  got = list(np_batches)
  assert len(got) == len(want) > 1

  def same(a, b, where):
    if isinstance(a, dict):
      assert sorted(a) == sorted(b), where
      for k in a:
        same(a[k], b[k], f"{where}/{k}")
    elif isinstance(a, tuple):
      assert len(a) == len(b), where
      for i, (x, y) in enumerate(zip(a, b)):
        same(x, y, f"{where}[{i}]")
    else:
      assert (a.dtype, a.shape) == (b.dtype, b.shape), where
      np.testing.assert_array_equal(a, b, err_msg=where)

  for i, (w, g) in enumerate(zip(want, got)):
    same(w, g, f"batch {i}")


# ----------------------------------------------------------------- equality

@pytest.mark.parametrize("feature_names", ["bert", "v2", "keras_hub"])
def test_bert_numpy_batches_equal_make_dataset(bert_out, feature_names):
  kw = dict(feature_names=feature_names)
  assert_same_batches(bert_data.make_dataset(bert_out, 7, training=False, **kw),
                      bert_data.numpy_batches(bert_out, 7, **kw, training=False))
  if feature_names == "v2":
    assert_same_batches(bert_data.make_dataset(bert_out, 7, training=False, v2_names=True),
                        bert_data.numpy_batches(bert_out, 7, v2_names=True, training=False))


@pytest.mark.parametrize("layout", ["sentence", "center"])
@pytest.mark.parametrize("pad_to", [None, 40])
def test_w2v_numpy_batches_equal_make_dataset(w2v_outs, layout, pad_to):
  d = w2v_outs[layout]
  assert_same_batches(w2v_data.make_dataset(d, 5, training=False, pad_to=pad_to),
                      w2v_data.numpy_batches(d, 5, pad_to=pad_to, training=False))


def test_w2v_numpy_batches_expand_labels_as_make_dataset(w2v_outs):
  d = w2v_outs["sentence"]
  assert_same_batches(w2v_data.make_dataset(d, 5, training=False, expand_labels=True),
                      w2v_data.numpy_batches(d, 5, training=False, expand_labels=True))
  with pytest.raises(UserError, match="expand_labels='yes': must be True or False"):
    w2v_data.numpy_batches(d, 5, expand_labels="yes")


@pytest.mark.parametrize("split,num_steps", [("train", 9), ("valid", 4)])
def test_mt_numpy_batches_equal_make_dataset(mt_out, split, num_steps):
  assert_same_batches(mt_data.make_dataset(mt_out, 8, split=split, num_steps=num_steps,
                                           training=False),
                      mt_data.numpy_batches(mt_out, 8, split=split, num_steps=num_steps,
                                            training=False))


@pytest.mark.parametrize("bounds,drop", [([4, 7, 10], False), ([6], True)])
def test_mt_bucketing_equals_make_dataset(mt_out, bounds, drop):
  for split in ("train", "valid"):
    assert_same_batches(
        mt_data.make_dataset(mt_out, 5, split=split, num_steps=None, bucket_boundaries=bounds,
                             training=False, drop_remainder=drop),
        mt_data.numpy_batches(mt_out, 5, split=split, bucket_boundaries=bounds,
                              training=False, drop_remainder=drop))
  from mt_data import reader as mt_reader  # pylint: disable=import-outside-toplevel
  with pytest.raises(UserError, match="^bucket_boundaries: grain and torch batches"):
    mt_reader.grain_dataset(mt_out, 5, split="valid", bucket_boundaries=bounds)
  with pytest.raises(UserError, match="pass num_steps=None with it"):
    mt_data.numpy_batches(mt_out, 5, bucket_boundaries=bounds, num_steps=9, training=False)


def test_training_order_is_a_seeded_global_shuffle(bert_out):
  def ids(**kw):
    return np.concatenate([x["input_ids"] for x, _, _ in bert_data.numpy_batches(
        bert_out, 4, **{"training": False, **kw})])
  eval_ids = ids()
  a, b, c = ids(training=True, seed=1), ids(training=True, seed=1), ids(training=True, seed=2)
  np.testing.assert_array_equal(a, b)
  assert not np.array_equal(a, c) and not np.array_equal(a, eval_ids[:len(a)])
  assert len(a) == len(eval_ids) // 4 * 4  # the last partial batch dropped
  # Records of the epoch, each at most once.
  key = lambda m: sorted(map(bytes, m))
  assert set(key(a)) <= set(key(eval_ids)) and len(set(key(a))) == len(a)
  # Two shards together hold every record of the epoch once.
  s0 = ids(training=True, seed=1, num_shards=2, shard_index=0, drop_remainder=False)
  s1 = ids(training=True, seed=1, num_shards=2, shard_index=1, drop_remainder=False)
  assert key(np.concatenate([s0, s1])) == key(eval_ids)


# ----------------------------------------------------------------- index

def test_generators_write_a_listed_index_per_record_file(bert_out):
  meta = json.load(open(bert_out + ".meta.json"))
  by_name = {f["name"]: f for f in meta["files"]}
  for p in layout.shard_paths(bert_out, 2):
    name = os.path.basename(p) + ".index"
    assert by_name[name]["sha256"] == tfrecord.file_sha256(p + ".index")
    idx = index.load(p + ".index")
    assert idx.header["sha256"] == by_name[os.path.basename(p)]["sha256"]
    np.testing.assert_array_equal(idx.offsets, index.scan(p))
    assert len(idx) == by_name[os.path.basename(p)]["records"]


def test_index_cli_on_foreign_file_and_random_access(tmp_path):
  src = os.path.join(GOLDEN, "sample_msl64_mp10_seed7_dupe1.tfrecord")  # the reference's
  path = str(tmp_path / "ref.tfrecord")
  shutil.copy(src, path)
  r = run_cli("textrecords.index", path)
  assert r.returncode == 0, r.stderr
  records = list(tfrecord.read_records(path))
  assert f"{len(records)} records" in r.stdout
  source = record_source.source_from_paths([path], index="require")
  assert len(source) == len(records)
  for i in (0, len(records) - 1, 3):
    assert source[i] == records[i]
  assert source[-1] == records[-1]
  assert "1 files" in repr(source)


def test_index_cli_refuses_gzip_and_missing(tmp_path):
  gz = str(tmp_path / "g.tfrecord")
  w = atomic_file.AtomicWriter(gz, "GZIP")
  w.write(tfrecord.frame(b"x"), 1)
  w.commit()
  r = run_cli("textrecords.index", gz)
  assert r.returncode == 2 and "GZIP" in r.stderr and "sequentially" in r.stderr
  r = run_cli("textrecords.index", str(tmp_path / "nope"))
  assert r.returncode == 2 and "nope: no such file" in r.stderr


def _copy(out_dir_or_file, tmp_path):
  """A copy of a bert dataset (two shards) to break without touching the fixture."""
  d = tmp_path / "copy"
  shutil.copytree(os.path.dirname(out_dir_or_file), d)
  return str(d / os.path.basename(out_dir_or_file))


def test_missing_or_stale_index_rebuilt_or_refused(bert_out, tmp_path):
  out = _copy(bert_out, tmp_path)
  want = [x["input_ids"] for x, _, _ in bert_data.numpy_batches(out, 5, training=False)]
  first = layout.shard_paths(out, 2)[0]
  os.remove(first + ".index")
  logs = []
  got = [x["input_ids"] for x, _, _ in bert_data.numpy_batches(out, 5, log=logs.append, training=False)]
  assert all(np.array_equal(a, b) for a, b in zip(got, want)) and len(got) == len(want)
  assert any("index is missing" in m and "python -m textrecords.index" in m for m in logs)
  with pytest.raises(UserError, match=r"index is missing.*textrecords\.index"):
    bert_data.numpy_batches(out, 5, index="require", training=False)
  # An index of other bytes (here: the other shard's) is stale, never used.
  shutil.copy(layout.shard_paths(out, 2)[1] + ".index", first + ".index")
  with pytest.raises(UserError, match="stale"):
    bert_data.numpy_batches(out, 5, index="require", verify="none", training=False)
  logs = []
  got = [x["input_ids"] for x, _, _ in bert_data.numpy_batches(out, 5, verify="none",
                                                                log=logs.append, training=False)]
  assert all(np.array_equal(a, b) for a, b in zip(got, want)) and any("stale" in m for m in logs)


# ----------------------------------------------------------------- bad input

def _flip_record_byte(path, record):
  offsets = index.scan(path)
  pos = int(offsets[record]) + 20
  with open(path, "r+b") as f:
    f.seek(pos)
    b = f.read(1)
    f.seek(pos)
    f.write(bytes([b[0] ^ 0xFF]))


def test_corrupt_record_named_or_skipped(bert_out, tmp_path):
  out = _copy(bert_out, tmp_path)
  second = layout.shard_paths(out, 2)[1]
  _flip_record_byte(second, 2)
  with pytest.raises(UserError, match=rf"{second}: corrupt record 2 \(data checksum"):
    list(bert_data.numpy_batches(out, 4, verify="none", training=False))
  logs = []
  total = sum(len(y["masked_lm"]) for _, y, _ in bert_data.numpy_batches(
      out, 4, verify="none", skip_corrupt=True, log=logs.append, training=False))
  meta = json.load(open(out + ".meta.json"))
  assert total == meta["counts"]["records"] - 1
  assert any("skipping" in m and "corrupt record 2" in m for m in logs)
  # With checksums verified (the default), the changed file is refused up front.
  with pytest.raises(UserError, match="sha256 differs"):
    bert_data.numpy_batches(out, 4, training=False)


def test_other_packages_records_refused(bert_out, w2v_outs, mt_out):
  with pytest.raises(UserError, match="w2v_data"):
    mt_data.numpy_batches(w2v_outs["center"], 4, training=False)
  with pytest.raises(UserError, match="a w2v_data dataset"):
    bert_data.numpy_batches(os.path.join(w2v_outs["center"], "meta.json"), 4, training=False)
  with pytest.raises(UserError, match="a bert_data dataset"):
    w2v_reader.grain_source(bert_out)
  with pytest.raises(UserError, match="mt_data"):
    w2v_data.numpy_batches(mt_out, 4, training=False)
  # Plain files without metadata: the decoder itself refuses them.
  w2v_file = os.path.join(w2v_outs["center"], "train.tfrecord-00000-of-00002")
  source = record_source.source_from_paths([w2v_file])
  dec = bert_reader.BertDecoder(bert_schema.bert_schema(64, 10), {})
  with pytest.raises(UserError, match="not bert_data records.*input_ids"):
    dec(source.read(range(2)))


def test_gzip_read_sequentially(tmp_path):
  out = str(tmp_path / "gz" / "train.tfrecord")
  bert_generator.create(BertConfig(
      input_files=(SAMPLE_TEXT,), output_files=(out,), vocab_file=VOCAB, max_seq_length=64,
      max_predictions_per_seq=10, dupe_factor=1, compression="GZIP"))
  meta = json.load(open(out + ".meta.json"))
  assert not [f for f in meta["files"] if f["role"] == "index"]
  assert_same_batches(bert_data.make_dataset(out, 3, training=False),
                      bert_data.numpy_batches(out, 3, training=False))
  with pytest.raises(UserError, match="GZIP.*sequentially"):
    bert_data.numpy_batches(out, 3, training=True, seed=0)
  with pytest.raises(UserError, match="GZIP.*sequentially"):
    bert_data.grain_source(out)


def test_index_survives_resume(tmp_path):
  base = dict(input_file=os.path.join(TESTDATA, "mt_pairs.txt"), num_train=30, num_val=12,
              num_shards=3)
  full = str(tmp_path / "full")
  mt_generator.create(mt_config.MTConfig(output_dir=full, **base), log=lambda m: None)
  part = str(tmp_path / "part")
  mt_generator.create(mt_config.MTConfig(output_dir=part, **base), log=lambda m: None)
  # Simulate a run killed after some files were finished: put the finished
  # files back under their hidden names, drop the metadata, resume.
  meta = json.load(open(os.path.join(part, "meta.json")))
  progress = [json.dumps({"fingerprint": meta["fingerprint"]}, sort_keys=True)]
  kept = ("train.tfrecord-00000-of-00003", "train.tfrecord-00000-of-00003.index")
  for f in meta["files"]:
    src = os.path.join(part, f["name"])
    if f["name"] in kept:
      os.replace(src, os.path.join(part, f".{f['name']}.done"))
      progress.append(json.dumps(f, sort_keys=True))
    else:
      os.remove(src)
  os.remove(os.path.join(part, "meta.json"))
  with open(os.path.join(part, ".meta.json.progress"), "w") as f:
    f.write("\n".join(progress) + "\n")
  mt_generator.create(mt_config.MTConfig(output_dir=part, resume=True, **base),
                      log=lambda m: None)
  for name in sorted(os.listdir(full)):
    assert open(os.path.join(part, name), "rb").read() == open(
        os.path.join(full, name), "rb").read(), name
  logs = []
  assert_same_batches(mt_data.make_dataset(part, 8, split="train", training=False),
                      mt_data.numpy_batches(part, 8, training=False, index="require",
                                            log=logs.append))
  assert not logs


def test_bert_v2_named_records(tmp_path):
  cfg = dict(input_files=(SAMPLE_TEXT,), vocab_file=VOCAB, max_seq_length=32,
             max_predictions_per_seq=5, dupe_factor=1)
  v2 = str(tmp_path / "v2" / "train.tfrecord")
  bert_generator.create(BertConfig(output_files=(v2,), use_v2_feature_names=True, **cfg))
  for names in ("bert", "keras_hub"):
    assert_same_batches(bert_data.make_dataset(v2, 4, training=False, feature_names=names),
                        bert_data.numpy_batches(v2, 4, feature_names=names, training=False))
  packed = str(tmp_path / "packed" / "train.tfrecord")  # no next-sentence label feature
  bert_generator.create(BertConfig(output_files=(packed,), next_sentence=False,
                                  packing="full_sentences", **cfg))
  assert_same_batches(bert_data.make_dataset(packed, 4, training=False),
                      bert_data.numpy_batches(packed, 4, training=False))


@pytest.fixture(scope="module")
def dynamic_outs(tmp_path_factory):
  """--masking=dynamic records: single pieces, whole words, whole-word 3-grams."""
  base = tmp_path_factory.mktemp("dynamic")
  outs = {}
  for name, kw in (("pieces", {}), ("words", dict(do_whole_word_mask=True)),
                   ("ngrams", dict(do_whole_word_mask=True, max_ngram_size=3))):
    outs[name] = str(base / name / "train.tfrecord")
    bert_generator.create(BertConfig(
        input_files=(SAMPLE_TEXT,), output_files=(outs[name],), vocab_file=VOCAB,
        max_seq_length=48, max_predictions_per_seq=8, dupe_factor=2, num_shards=2,
        masking="dynamic", **kw))
  return outs


@pytest.mark.parametrize("kind", ["pieces", "words", "ngrams"])
def test_bert_dynamic_masking_equals_make_dataset(dynamic_outs, kind):
  loc = dynamic_outs[kind]
  assert_same_batches(bert_data.make_dataset(loc, 8, training=False),
                      bert_data.numpy_batches(loc, 8, training=False))
  kw = dict(seed=5, masked_lm_prob=0.3, max_predictions_per_seq=12, feature_names="keras_hub")
  assert_same_batches(bert_data.make_dataset(loc, 8, training=False, **kw),
                      bert_data.numpy_batches(loc, 8, **kw, training=False))


def test_bert_dynamic_masking_in_training(dynamic_outs):
  loc = dynamic_outs["pieces"]
  ids = lambda bs: np.concatenate([x["input_ids"] for x, _, _ in bs])  # noqa: E731
  eval_ids = ids(bert_data.numpy_batches(loc, 8, seed=1, training=False))
  run = lambda **kw: list(bert_data.numpy_batches(loc, 8, training=True, **kw))  # noqa: E731
  a, b = run(seed=1), run(seed=1)
  np.testing.assert_array_equal(ids(a), ids(b))
  # Training masks: seeded per epoch, not the evaluation masks.
  order = numpy_reader.epoch_order(len(eval_ids), training=True, seed=1)[:len(ids(a))]
  assert not np.array_equal(ids(a), eval_ids[order])
  with pytest.raises(UserError, match="max_predictions_per_seq=49: must be in"):
    bert_data.numpy_batches(loc, 8, max_predictions_per_seq=49, training=False)
  static = dynamic_outs["pieces"].replace("pieces", "static")
  bert_generator.create(BertConfig(input_files=(SAMPLE_TEXT,), output_files=(static,),
                                  vocab_file=VOCAB, max_seq_length=48,
                                  max_predictions_per_seq=8, dupe_factor=1))
  with pytest.raises(UserError, match="masked_lm_prob=0.2 needs records written with "
                     "--masking=dynamic"):
    bert_data.numpy_batches(static, 8, masked_lm_prob=0.2, training=False)


@pytest.mark.parametrize("model", ["cbow", "pv_dm", "pv_dbow"])
def test_w2v_cbow_and_pv_equal_make_dataset(tmp_path, model):
  d = str(tmp_path / model)
  with open(os.path.join(TESTDATA, "w2v_tiny.txt"), encoding="utf-8") as f:
    lines = [l for l in f.read().split("\n") if l.strip()]  # PV: one document a line
  src = tmp_path / "docs.txt"
  src.write_text("\n".join(lines) + "\n", encoding="utf-8")
  w2v_generator.create(W2vConfig(
      input_file=str(src), output_dir=d, min_freq=2,
      subsample_t=3e-2, max_window_size=3, num_noise_words=2, random_seed=3, num_workers=1,
      num_shards=2, model=model))
  assert_same_batches(w2v_data.make_dataset(d, 7, training=False),
                      w2v_data.numpy_batches(d, 7, training=False))
  assert_same_batches(w2v_data.make_dataset(d, 7, training=False, drop_remainder=True),
                      w2v_data.numpy_batches(d, 7, drop_remainder=True, training=False))
  with pytest.raises(UserError, match=f"model={model} records take pad_to=None"):
    w2v_data.numpy_batches(d, 4, pad_to=40, training=False)


def test_w2v_fresh_negatives_refused(w2v_outs):
  # Fresh noise words are drawn with TF's stateless Philox ops seeded from
  # tf.data.Dataset.random: not reproducible outside TensorFlow.
  with pytest.raises(UserError, match="^negatives='fresh': the TF-free readers give the "
                     "stored noise words only"):
    w2v_data.numpy_batches(w2v_outs["sentence"], 4, negatives="fresh", training=False)
