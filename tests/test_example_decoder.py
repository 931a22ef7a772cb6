"""Batched Example decoding: the vectorized fast path equals the general
record-by-record path; records it cannot walk go to the general path."""

import numpy as np
import pytest

from textrecords.wire import example_encoder
from textrecords.wire import example_decoder as ED
from textrecords.wire import example_kernels
from textrecords.wire import features as F
from textrecords.reading import record_source
from textrecords.files import tfrecord
from textrecords.wire import varint

SCHEMA = (
    F.FeatureSpec("ids", F.INT64, 6),
    F.FeatureSpec("var", F.INT64, None),
    F.FeatureSpec("w", F.FLOAT, 3),
    F.FeatureSpec("floats", F.FLOAT, None),
)


def _values(rng, i):
  # Lengths vary so that payloads straddle 128 bytes (other varint widths:
  # several templates per entry in one batch); values span 1..10 varint bytes.
  n = int(rng.integers(0, 90)) if i % 3 else 0
  big = [0, 127, 128, 16383, 16384, (1 << 28) + 5, (1 << 62), -1, -(1 << 40)]
  var = rng.choice(big, n).tolist() if i % 2 else rng.integers(0, 30000, n).tolist()
  return {"ids": rng.integers(0, 40000, 6).tolist(), "var": var,
          "w": rng.random(3).tolist(), "floats": rng.random(int(rng.integers(0, 40))).tolist()}


def _records(n, seed=0, key_order="sorted"):
  rng = np.random.default_rng(seed)
  enc = example_encoder.ExampleEncoder(SCHEMA, key_order)
  vals = [_values(rng, i) for i in range(n)]
  return [enc.encode(v) for v in vals], vals


def _same_columns(a, b):
  assert list(a) == list(b)
  for k in a:
    assert a[k].values.dtype == b[k].values.dtype, k
    np.testing.assert_array_equal(a[k].values, b[k].values, err_msg=k)
    np.testing.assert_array_equal(a[k].lengths, b[k].lengths, err_msg=k)


def _check_values(cols, vals):
  np.testing.assert_array_equal(cols["ids"].values, [v["ids"] for v in vals])
  np.testing.assert_array_equal(cols["var"].values, [x for v in vals for x in v["var"]])
  assert cols["var"].lengths.tolist() == [len(v["var"]) for v in vals]
  np.testing.assert_array_equal(cols["w"].values, np.float32([v["w"] for v in vals]))
  np.testing.assert_array_equal(cols["floats"].values,
                                np.float32([x for v in vals for x in v["floats"]]))


# The fast path runs through the numba kernels when numba is installed,
# else through the numpy walk: both are tested where numba is.
PATHS = [False] + ([True] if example_kernels.available() else [])


@pytest.mark.parametrize("compiled", PATHS)
def test_fast_path_equals_general_path_on_varied_records(compiled):
  recs, vals = _records(200)
  dec = ED.ExampleDecoder(SCHEMA, compiled=compiled)
  batch = ED.RecordBatch.from_records(recs)
  fast = dec.decode_fast(batch)
  assert fast is not None, "records we write must take the fast path"
  _same_columns(fast, dec.decode_general(recs))
  _check_values(fast, vals)
  if not compiled:  # several templates were needed (lengths of other varint widths)
    assert max(len(known) for known in dec._layout[1]) > 1  # pylint: disable=protected-access
  # The cached layout serves the next batch; small batches and one record too.
  for lo, hi in ((0, 1), (5, 37), (199, 200)):
    part = dec.decode(recs[lo:hi])
    _same_columns(part, dec.decode_general(recs[lo:hi]))
    _check_values(part, vals[lo:hi])


@pytest.mark.parametrize("compiled", PATHS)
def test_extra_features_are_skipped_by_the_fast_path(compiled):
  wide = SCHEMA + (F.FeatureSpec("aaa_extra", F.INT64, None),
                   F.FeatureSpec("zzz", F.FLOAT, None))
  rng = np.random.default_rng(1)
  enc = example_encoder.ExampleEncoder(wide)
  vals = [dict(_values(rng, i), aaa_extra=[1, 2, 300][:i % 4], zzz=[0.5] * (i % 2))
          for i in range(30)]
  recs = [enc.encode(v) for v in vals]
  dec = ED.ExampleDecoder(SCHEMA, compiled=compiled)
  fast = dec.decode_fast(ED.RecordBatch.from_records(recs))
  assert fast is not None
  _same_columns(fast, dec.decode_general(recs))
  _check_values(fast, vals)


def _unpacked(values):
  """An int64 Feature with each value as its own (unpacked) field."""
  body = b"".join(b"\x08" + varint.encode(v) for v in values)
  return example_encoder._len_delimited(0x1A, body)  # pylint: disable=protected-access


@pytest.mark.parametrize("compiled", PATHS)
def test_other_encodings_take_the_general_path(compiled):
  recs, vals = _records(12)
  schema_order, _ = _records(12, key_order="schema")
  dec = ED.ExampleDecoder(SCHEMA, compiled=compiled)
  # Entries in another order (as protobuf's pure-Python backend writes them)
  # mixed into one batch: the fast walk refuses the batch, the general path
  # decodes it.
  mixed = recs[:6] + schema_order[6:]
  assert dec.decode_fast(ED.RecordBatch.from_records(mixed)) is None
  _check_values(dec.decode(mixed), vals[:6] + _records(12)[1][6:])
  # A record whose int64 list is not packed.
  enc = example_encoder.ExampleEncoder(SCHEMA)
  feats = {s.name: example_encoder.encode_feature(s.dtype, vals[0][s.name]) for s in SCHEMA}
  feats["var"] = _unpacked(vals[0]["var"] or [7, 300])
  odd = enc.encode_features(feats)
  want = dict(vals[0], var=vals[0]["var"] or [7, 300])
  assert dec.decode_fast(ED.RecordBatch.from_records([odd] + recs[1:3])) is None
  _check_values(dec.decode([odd] + recs[1:3]), [want] + vals[1:3])


@pytest.mark.parametrize("compiled", PATHS)
def test_bad_records_raise_decode_errors(compiled):
  recs, _ = _records(4)
  dec = ED.ExampleDecoder(SCHEMA, compiled=compiled)
  short = example_encoder.ExampleEncoder(SCHEMA[:3]).encode(
      {"ids": [1] * 6, "var": [], "w": [0.0] * 3})
  with pytest.raises(ED.DecodeError, match="no feature 'floats'"):
    dec.decode(recs[:2] + [short])
  with pytest.raises(ED.DecodeError, match="truncated|not a tf.train.Example"):
    dec.decode(recs[:2] + [recs[2][:-3]])
  wrong_len = example_encoder.ExampleEncoder(
      (F.FeatureSpec("ids", F.INT64, 5),) + SCHEMA[1:]).encode(
          {"ids": [1] * 5, "var": [], "w": [0.0] * 3, "floats": []})
  with pytest.raises(ED.DecodeError, match="'ids' has 5 values in record 2"):
    dec.decode(recs[:2] + [wrong_len])


def test_read_batch_equals_record_by_record_reads(tmp_path):
  recs, _ = _records(40, seed=3)
  paths = []
  for k in range(2):
    p = tmp_path / f"r{k}.tfrecord"
    p.write_bytes(b"".join(tfrecord.frame(r) for r in recs[k * 20:(k + 1) * 20]))
    paths.append(str(p))
  src = record_source.source_from_paths(paths, log=lambda m: None)
  rng = np.random.default_rng(0)
  for idx in (np.arange(40), np.arange(15, 27), rng.permutation(40)[:17], [39, 0, 20, 19],
              [-1, 5]):
    got = src.read_batch(idx)
    assert list(got) == [recs[i] for i in idx]
    assert list(got) == src.read(idx)
  assert len(src.read_batch([])) == 0
  with pytest.raises(IndexError, match="record 40 out of range"):
    src.read_batch([3, 40])
