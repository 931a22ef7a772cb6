"""textrecords core: Example encoding and TFRecord framing against TensorFlow."""

import gzip
import os
import random
import struct

import numpy as np
import pytest
import tensorflow as tf

from textrecords.files import atomic_file
from textrecords.wire import example_decoder
from textrecords.wire import example_encoder as codec
from textrecords.wire import features as F
from textrecords.datasets import layout
from textrecords.files import tfrecord
from textrecords.errors import UserError

SCHEMA = (F.FeatureSpec("ids", F.INT64, None), F.FeatureSpec("w", F.FLOAT, 3),
          F.FeatureSpec("b", F.BYTES, None), F.FeatureSpec("a_first", F.INT64, 2))


def _random_values(rng):
  return {
      "ids": [rng.choice([0, 1, 127, 128, 300, 16383, 16384, 2**40, -1, -2**63])
              for _ in range(rng.randint(0, 40))],
      "w": [rng.uniform(-5, 5) for _ in range(3)],
      "b": [bytes(rng.randrange(256) for _ in range(rng.randint(0, 5)))
            for _ in range(rng.randint(0, 4))] + ["héllo"],
      "a_first": [rng.randint(0, 10**6), 0],
  }


def _tf_example(values):
  feat = {
      "ids": tf.train.Feature(int64_list=tf.train.Int64List(value=values["ids"])),
      "w": tf.train.Feature(float_list=tf.train.FloatList(value=values["w"])),
      "b": tf.train.Feature(bytes_list=tf.train.BytesList(
          value=[v.encode() if isinstance(v, str) else v for v in values["b"]])),
      "a_first": tf.train.Feature(int64_list=tf.train.Int64List(value=values["a_first"])),
  }
  return tf.train.Example(features=tf.train.Features(feature=feat))


@pytest.mark.parametrize("seed", range(30))
def test_encoder_equals_deterministic_protobuf(seed):
  values = _random_values(random.Random(seed))
  ours = codec.ExampleEncoder(SCHEMA).encode(values)
  assert ours == _tf_example(values).SerializeToString(deterministic=True)


def test_schema_order_parses_to_same_example():
  values = _random_values(random.Random(99))
  ours = codec.ExampleEncoder(SCHEMA, key_order="schema").encode(values)
  assert tf.train.Example.FromString(ours) == _tf_example(values)
  assert ours != codec.ExampleEncoder(SCHEMA).encode(values)  # different entry order


def test_decode_example_round_trip():
  values = _random_values(random.Random(5))
  dec = example_decoder.decode_example(codec.ExampleEncoder(SCHEMA).encode(values))
  assert dec["ids"] == values["ids"]
  assert dec["a_first"] == values["a_first"]
  assert dec["w"] == pytest.approx(values["w"], rel=1e-6)
  assert dec["b"][-1] == "héllo".encode()


def test_fixed_length_is_enforced():
  with pytest.raises(ValueError, match="a_first"):
    codec.ExampleEncoder(SCHEMA).encode(dict(_random_values(random.Random(1)), a_first=[1]))


@pytest.mark.parametrize("compression", ["", "GZIP"])
def test_framing_read_by_tensorflow(tmp_path, compression):
  path = str(tmp_path / "x.tfrecord")
  records = [os.urandom(n) for n in (0, 1, 100, 5000)]
  w = atomic_file.AtomicWriter(path, compression)
  for r in records:
    w.write(tfrecord.frame(r), 1)
  info = w.commit()
  assert info["records"] == 4 and info["bytes"] == os.path.getsize(path)
  assert info["sha256"] == tfrecord.file_sha256(path)
  got = [r.numpy() for r in tf.data.TFRecordDataset(path, compression_type=compression or None)]
  assert got == records
  assert list(tfrecord.read_records(path, compression)) == records


def test_gzip_bytes_are_stable(tmp_path):
  digests = []
  for name in ("a", "b"):
    w = atomic_file.AtomicWriter(str(tmp_path / name), "GZIP")
    w.write(tfrecord.frame(b"same"), 1)
    digests.append(w.commit()["sha256"])
  assert digests[0] == digests[1]
  assert gzip.decompress((tmp_path / "a").read_bytes())


def test_tensorflow_written_file_read_by_us(tmp_path):
  path = str(tmp_path / "tf.tfrecord")
  with tf.io.TFRecordWriter(path) as w:
    for i in range(5):
      w.write(b"r%d" % i)
  assert list(tfrecord.read_records(path)) == [b"r%d" % i for i in range(5)]


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_corruption_is_detected_with_file_name(tmp_path, damage):
  path = str(tmp_path / "x.tfrecord")
  w = atomic_file.AtomicWriter(path)
  for _ in range(3):
    w.write(tfrecord.frame(b"x" * 100), 1)
  w.commit()
  data = bytearray(open(path, "rb").read())
  if damage == "truncate":
    data = data[:-10]
  else:
    data[150] ^= 0x01
  open(path, "wb").write(bytes(data))
  with pytest.raises(UserError, match="x.tfrecord"):
    list(tfrecord.read_records(path))


def test_atomic_writer_leaves_nothing_on_error(tmp_path):
  path = tmp_path / "out.tfrecord"
  with pytest.raises(RuntimeError):
    with atomic_file.AtomicWriter(str(path)) as w:
      w.write(tfrecord.frame(b"partial"), 1)
      raise RuntimeError("boom")
  assert os.listdir(tmp_path) == []


def test_shard_names():
  assert layout.shard_paths("d/x", 1) == ["d/x"]
  assert layout.shard_paths("d/x", 3)[2] == "d/x-00002-of-00003"


def test_parse_spec_matches_schema():
  spec = F.parse_spec(SCHEMA)
  assert isinstance(spec["ids"], tf.io.RaggedFeature)
  assert spec["w"].shape == [3] and spec["w"].dtype == tf.float32
  assert F.schema_from_json(F.schema_to_json(SCHEMA)) == SCHEMA


# --- batched int64 records (numpy; the compiled kernel is checked against it in
# test_w2v_kernels) ----------------------------------------------------------------

def _split_framed(data: bytes):
  """The records (unframed) of a concatenation of framed records."""
  out, pos = [], 0
  while pos < len(data):
    (length,) = struct.unpack_from("<Q", data, pos)
    out.append(bytes(data[pos + 12:pos + 12 + length]))
    pos += 16 + length
  return out


def test_vectorised_records_match_example_encoder():
  rng = np.random.default_rng(3)
  n = 50
  lens_a = rng.integers(0, 4, size=n)
  lens_b = rng.integers(0, 30, size=n)
  vals_a = rng.integers(0, 1 << 62, size=int(lens_a.sum()))
  vals_b = rng.integers(0, 20000, size=int(lens_b.sum()))
  data = codec.encode_int64_records([("zeta", vals_b, lens_b), ("alpha", vals_a, lens_a)])
  enc = codec.ExampleEncoder((F.FeatureSpec("alpha", "int64", None),
                              F.FeatureSpec("zeta", "int64", None)))
  ca, cb = np.r_[0, np.cumsum(lens_a)], np.r_[0, np.cumsum(lens_b)]
  expected = b"".join(tfrecord.frame(enc.encode({
      "alpha": vals_a[ca[i]:ca[i + 1]].tolist(), "zeta": vals_b[cb[i]:cb[i + 1]].tolist()}))
                      for i in range(n))
  assert data == expected


@pytest.mark.parametrize("high", [100, 16000])
def test_vectorised_records_small_values(high):
  rng = np.random.default_rng(high)
  lens = rng.integers(0, 6, size=40)
  vals = rng.integers(0, high, size=int(lens.sum()))
  data = codec.encode_int64_records([("v", vals, lens)])
  enc = codec.ExampleEncoder((F.FeatureSpec("v", "int64", None),))
  cs = np.r_[0, np.cumsum(lens)]
  assert _split_framed(data) == [enc.encode({"v": vals[cs[i]:cs[i + 1]].tolist()})
                                 for i in range(40)]


def _long_multibyte_lists(rng, num, low=64, high=200):
  """(values, lengths): lists of 64-200 values in [128, 2**20), 2-3 bytes each,
  so a list's packed payload is 128+ bytes from fewer than 128 values too."""
  lens = rng.integers(low, high + 1, size=num)
  return rng.integers(128, 1 << 20, size=int(lens.sum())), lens


def test_vectorised_records_long_lists_of_multibyte_values():
  # The packed length is the payload's byte count, not the value count: a
  # length varint sized from the count would be one byte short here.
  rng = np.random.default_rng(18)
  vals_a, lens_a = _long_multibyte_lists(rng, 30)
  vals_b, lens_b = _long_multibyte_lists(rng, 30, low=1, high=3)
  assert (lens_a < 128).any() and (lens_a >= 128).any()
  data = codec.encode_int64_records([("long", vals_a, lens_a), ("b", vals_b, lens_b)])
  enc = codec.ExampleEncoder((F.FeatureSpec("long", "int64", None),
                              F.FeatureSpec("b", "int64", None)))
  ca, cb = np.r_[0, np.cumsum(lens_a)], np.r_[0, np.cumsum(lens_b)]
  assert _split_framed(data) == [enc.encode({
      "long": vals_a[ca[i]:ca[i + 1]].tolist(), "b": vals_b[cb[i]:cb[i + 1]].tolist()})
                                 for i in range(30)]


@pytest.mark.parametrize("seed", range(3))
def test_encoder_long_int64_and_float_lists_equal_protobuf(seed):
  rng = np.random.default_rng(seed)
  schema = (F.FeatureSpec("ids", F.INT64, None), F.FeatureSpec("w", F.FLOAT, None))
  for n in rng.integers(64, 201, size=5).tolist():
    ids = rng.integers(128, 1 << 20, size=n).tolist()
    w = rng.uniform(-5, 5, size=n).astype(np.float32).tolist()
    proto = tf.train.Example(features=tf.train.Features(feature={
        "ids": tf.train.Feature(int64_list=tf.train.Int64List(value=ids)),
        "w": tf.train.Feature(float_list=tf.train.FloatList(value=w))}))
    ours = codec.ExampleEncoder(schema).encode({"ids": ids, "w": w})
    assert ours == proto.SerializeToString(deterministic=True)
