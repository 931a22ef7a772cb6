"""bert_data.make_dataset: write -> parse round trip, Keras structure, clear errors."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

import bert_data
from bert_data import generator
from bert_data.config import BertConfig
from conftest import SAMPLE_TEXT, VOCAB
from textrecords.datasets import layout
from textrecords.files import tfrecord
from textrecords.wire import example_decoder


@pytest.fixture(scope="module")
def records(tmp_path_factory):
  d = tmp_path_factory.mktemp("bert")
  out = str(d / "train.tfrecord")
  generator.create(BertConfig(input_files=(SAMPLE_TEXT,), output_files=(out,), vocab_file=VOCAB,
                             max_seq_length=64, max_predictions_per_seq=10, dupe_factor=3,
                             num_shards=2))
  return out


def _decoded(out, n):
  return [example_decoder.decode_example(r)
          for p in layout.shard_paths(out, n) for r in tfrecord.read_records(p)]


def test_round_trip_in_order(records):
  want = _decoded(records, 2)
  ds = bert_data.make_dataset(records, 7, training=False)
  got = []
  for x, y, w in ds:
    for i in range(x["input_ids"].shape[0]):
      got.append((x["input_ids"][i].numpy().tolist(), x["segment_ids"][i].numpy().tolist(),
                  x["masked_lm_positions"][i].numpy().tolist(), y["masked_lm"][i].numpy().tolist(),
                  int(y["next_sentence"][i, 0]), w["masked_lm"][i].numpy().tolist()))
  assert len(got) == len(want)  # eval keeps the last partial batch
  for g, e in zip(got, want):
    assert g[0] == e["input_ids"] and g[1] == e["segment_ids"]
    assert g[2] == e["masked_lm_positions"] and g[3] == e["masked_lm_ids"]
    assert g[4] == e["next_sentence_labels"][0] and g[5] == e["masked_lm_weights"]


def test_training_batches_static_int32_and_seeded(records):
  ds = bert_data.make_dataset(records, 8, training=True, seed=3, drop_remainder=True)
  spec_x, spec_y, spec_w = ds.element_spec
  assert spec_x["input_ids"].shape == (8, 64) and spec_x["input_ids"].dtype == tf.int32
  assert spec_x["masked_lm_positions"].shape == (8, 10)
  assert spec_y["masked_lm"].dtype == tf.int32 and spec_y["next_sentence"].shape == (8, 1)
  assert spec_w["masked_lm"].dtype == tf.float32 and spec_w["next_sentence"].shape == (8,)
  first = lambda: next(iter(bert_data.make_dataset(records, 8, seed=3)))[0]["input_ids"].numpy()
  np.testing.assert_array_equal(first(), first())
  total = sum(1 for _ in ds)
  meta = json.load(open(records + ".meta.json"))
  assert total == meta["counts"]["records"] // 8


def test_v2_names_and_input_context(records):
  ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=1)
  ds = bert_data.make_dataset(records, 4, v2_names=True, input_context=ctx, seed=0,
                              drop_remainder=True)
  x, _, _ = next(iter(ds))
  assert set(x) == {"input_word_ids", "input_mask", "input_type_ids", "masked_lm_positions"}
  # Each of the 2 pipelines gets its half of every global batch of 8.
  total = sum(1 for p in layout.shard_paths(records, 2) for _ in tfrecord.read_records(p))
  assert sum(1 for _ in ds) == total // 8


def test_shard_glob_and_meta_path(records):
  n = sum(f["records"] for f in json.load(open(records + ".meta.json"))["files"])
  for pattern in (records + "-*", records + ".meta.json", records + "-00000-of-00002"):
    got = sum(int(x["input_ids"].shape[0]) for x, _, _ in
              bert_data.make_dataset(pattern, 5, training=False))
    assert got == (n if "*" in pattern or "meta" in pattern else
                   json.load(open(records + ".meta.json"))["files"][0]["records"])


def test_length_mismatch_is_clear(records):
  with pytest.raises(ValueError, match="max_seq_length=64.*128"):
    bert_data.make_dataset(records, 4, max_seq_length=128)


def test_missing_metadata_and_corrupt_file(records, tmp_path):
  import shutil
  d = tmp_path / "copy"
  d.mkdir()
  for name in os.listdir(os.path.dirname(records)):
    shutil.copy(os.path.join(os.path.dirname(records), name), d / name)
  out = str(d / "train.tfrecord")
  shard = layout.shard_paths(out, 2)[1]
  data = bytearray(open(shard, "rb").read())
  data[len(data) // 2] ^= 0xFF
  open(shard, "wb").write(bytes(data))
  with pytest.raises(ValueError, match="00001-of-00002.*sha256"):
    bert_data.make_dataset(out, 4)  # checksums are verified by default
  # Every input pipeline reads (and so checks) every file: its share of
  # each global batch comes from all of them.
  ctx0 = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=0)
  with pytest.raises(ValueError, match="00001-of-00002.*sha256"):
    bert_data.make_dataset(out, 1, input_context=ctx0, seed=0)
  logged = []
  ds = bert_data.make_dataset(out, 1, training=False, verify="checksum", skip_corrupt=True,
                              log=logged.append)
  assert len(logged) == 1 and "00001-of-00002" in logged[0]
  assert sum(1 for _ in ds) == sum(1 for _ in tfrecord.read_records(layout.shard_paths(out, 2)[0]))
  open(shard, "wb").write(bytes(data[:100]))
  with pytest.raises(ValueError, match="truncated"):
    bert_data.make_dataset(out, 4)
  os.remove(out + ".meta.json")
  with pytest.raises(ValueError, match="incomplete"):
    bert_data.make_dataset(out, 4)


def test_other_package_refused(tmp_path):
  from textrecords.datasets import metadata
  meta = metadata.base_meta("w2v_data")
  meta["files"] = []
  metadata.write(str(tmp_path / "x.tfrecord.meta.json"), meta)
  with pytest.raises(ValueError, match="w2v_data"):
    bert_data.make_dataset(str(tmp_path / "x.tfrecord"), 4)


def test_keras_fit_accepts_batches(records):
  import keras
  ds = bert_data.make_dataset(records, 8, seed=0)
  ids = keras.Input((64,), dtype="int32", name="input_ids")
  mask = keras.Input((64,), dtype="int32", name="input_mask")
  seg = keras.Input((64,), dtype="int32", name="segment_ids")
  pos = keras.Input((10,), dtype="int32", name="masked_lm_positions")
  h = keras.layers.Embedding(30522, 8)(ids)
  mlm = keras.layers.Dense(30522, name="masked_lm")(
      keras.ops.take_along_axis(h, keras.ops.expand_dims(pos, -1), axis=1))
  nsp = keras.layers.Dense(2, name="next_sentence")(keras.ops.mean(h, axis=1))
  model = keras.Model({"input_ids": ids, "input_mask": mask, "segment_ids": seg,
                       "masked_lm_positions": pos}, {"masked_lm": mlm, "next_sentence": nsp})
  model.compile("adam", loss={"masked_lm": keras.losses.SparseCategoricalCrossentropy(True),
                              "next_sentence": keras.losses.SparseCategoricalCrossentropy(True)})
  hist = model.fit(ds, steps_per_epoch=2, epochs=1, verbose=0)
  assert np.isfinite(hist.history["loss"][0])


def test_gzip_records_are_detected_from_metadata(tmp_path):
  out = str(tmp_path / "z.tfrecord")
  generator.create(BertConfig(input_files=(SAMPLE_TEXT,), output_files=(out,), vocab_file=VOCAB,
                             max_seq_length=64, max_predictions_per_seq=10, dupe_factor=2,
                             compression="GZIP"))
  meta = json.load(open(out + ".meta.json"))
  got = [x["input_ids"].numpy() for x, _, _ in bert_data.make_dataset(out, 1, training=False)]
  want = [example_decoder.decode_example(r)["input_ids"]
          for r in tfrecord.read_records(out, "GZIP")]
  assert len(got) == meta["counts"]["records"] == len(want)
  assert all(g[0].tolist() == w for g, w in zip(got, want))


def test_feature_names_keras_hub_and_v2(records):
  ref_x, ref_y, ref_w = next(iter(bert_data.make_dataset(records, 4, training=False)))
  x, y, w = next(iter(bert_data.make_dataset(records, 4, training=False,
                                             feature_names="keras_hub")))
  assert set(x) == {"token_ids", "padding_mask", "segment_ids", "mask_positions"}
  assert x["padding_mask"].dtype == tf.bool and y.dtype == tf.int32 and w.dtype == tf.float32
  np.testing.assert_array_equal(x["token_ids"], ref_x["input_ids"])
  np.testing.assert_array_equal(x["padding_mask"], ref_x["input_mask"] == 1)
  np.testing.assert_array_equal(x["mask_positions"], ref_x["masked_lm_positions"])
  np.testing.assert_array_equal(y, ref_y["masked_lm"])
  np.testing.assert_array_equal(w, ref_w["masked_lm"])
  x2, _, _ = next(iter(bert_data.make_dataset(records, 4, training=False, feature_names="v2")))
  np.testing.assert_array_equal(x2["input_word_ids"], ref_x["input_ids"])
  np.testing.assert_array_equal(x2["input_type_ids"], ref_x["segment_ids"])


@pytest.mark.parametrize("kwargs,text", [
    (dict(feature_names="hub"), "feature_names='hub'"),
    (dict(feature_names="keras_hub", v2_names=True), "v2_names"),
    (dict(max_predictions_per_seq=12), "max_predictions_per_seq=12"),
    (dict(masked_lm_prob=0.2), "--masking=dynamic"),
])
def test_bad_read_options(records, kwargs, text):
  with pytest.raises(ValueError, match=text.replace("[", r"\[")):
    bert_data.make_dataset(records, 4, **kwargs)


def test_v2_named_records_read_as_either(tmp_path, records):
  out = str(tmp_path / "v2.tfrecord")
  generator.create(BertConfig(input_files=(SAMPLE_TEXT,), output_files=(out,), vocab_file=VOCAB,
                             max_seq_length=64, max_predictions_per_seq=10, dupe_factor=3,
                             num_shards=2, use_v2_feature_names=True))
  recs = [r for p in layout.shard_paths(out, 2) for r in tfrecord.read_records(p)]
  ex = example_decoder.decode_example(recs[0])
  assert "input_word_ids" in ex and "input_type_ids" in ex and "input_ids" not in ex
  # Same instances as the bert-named run, only the names differ.
  want = _decoded(records, 2)
  got = [example_decoder.decode_example(r) for r in recs]
  assert [g["input_word_ids"] for g in got] == [e["input_ids"] for e in want]
  for names in ("bert", "v2"):
    a = next(iter(bert_data.make_dataset(out, 5, training=False, feature_names=names)))
    b = next(iter(bert_data.make_dataset(records, 5, training=False, feature_names=names)))
    for k in a[0]:
      np.testing.assert_array_equal(a[0][k], b[0][k])
