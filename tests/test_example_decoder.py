"""Batched Example decoding: the numba walk (`decode_compiled`) equals the
Python reference (`decode_general`) on the schemas the packages write, and
odd but valid encodings it cannot walk go to the reference."""

import numpy as np
import pytest

from bert_data import schema as bert_schema
from mt_data import schema as mt_schema
from textrecords.files import tfrecord
from textrecords.reading import record_source
from textrecords.wire import example_decoder as ED
from textrecords.wire import example_encoder
from textrecords.wire import example_kernels
from textrecords.wire import features as F
from textrecords.wire import varint
from w2v_data import schema as w2v_schema

SCHEMA = (
    F.FeatureSpec("ids", F.INT64, 6),
    F.FeatureSpec("var", F.INT64, None),
    F.FeatureSpec("w", F.FLOAT, 3),
    F.FeatureSpec("floats", F.FLOAT, None),
)

SCHEMAS = {
    "bert": bert_schema.bert_schema(128, 20),
    "w2v_sentence": w2v_schema.SENTENCE_SCHEMA,
    "w2v_center": w2v_schema.CENTER_SCHEMA,
    "mt": mt_schema.SCHEMA,
    "mixed": SCHEMA,
}

# int64 values of every varint width (1 to 10 bytes, negatives included).
_BIG = [0, 127, 128, 16383, 16384, (1 << 28) + 5, 1 << 62, -1, -(1 << 40)]

needs_numba = pytest.mark.skipif(not example_kernels.available(), reason="numba not installed")


def _random_list(rng, spec: F.FeatureSpec, i: int) -> list:
  """Values for one feature of record i: lengths so that payloads straddle
  varint widths (none, under and over 128 bytes)."""
  if spec.length is not None:
    n = spec.length
  else:
    n = [0, int(rng.integers(1, 90)), int(rng.integers(100, 1200))][i % 3]
  if spec.dtype == F.FLOAT:
    return (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4)).astype(np.float32).tolist()
  if i % 4 == 1:
    return rng.choice(_BIG, n).tolist()
  return rng.integers(0, 40000, n).tolist()


def _records(schema, n: int, seed: int = 0, key_order: str = "sorted"):
  rng = np.random.default_rng(seed)
  vals = [{s.name: _random_list(rng, s, i) for s in schema} for i in range(n)]
  enc = example_encoder.ExampleEncoder(schema, key_order)
  return [enc.encode(v) for v in vals], vals


def _same_columns(a, b):
  assert list(a) == list(b)
  for k in a:
    assert a[k].values.dtype == b[k].values.dtype, k
    np.testing.assert_array_equal(a[k].values, b[k].values, err_msg=k)
    np.testing.assert_array_equal(a[k].lengths, b[k].lengths, err_msg=k)


def _check_values(cols, schema, vals):
  """The columns hold `vals` (one dict of lists per record)."""
  for s in schema:
    dtype = np.float32 if s.dtype == F.FLOAT else np.int64
    want = [v[s.name] for v in vals]
    if s.length is None:
      want = [x for w in want for x in w]
    np.testing.assert_array_equal(cols[s.name].values, np.array(want, dtype).reshape(
        cols[s.name].values.shape), err_msg=s.name)
    assert cols[s.name].values.dtype == dtype, s.name
    assert cols[s.name].lengths.tolist() == [len(v[s.name]) for v in vals], s.name


# ------------------------------------------------------------- odd but valid encodings

def _ld(tag: int, body: bytes) -> bytes:
  """A length-delimited field."""
  return bytes([tag]) + varint.encode(len(body)) + body


def _entry(name: str, feature: bytes, value_first: bool = False) -> bytes:
  key, value = _ld(0x0A, name.encode("utf-8")), _ld(0x12, feature)
  return _ld(0x0A, value + key if value_first else key + value)


def _example(entries) -> bytes:
  return _ld(0x0A, b"".join(entries))


def _int64_runs(values, runs: int) -> bytes:
  """An Int64List feature packed in `runs` runs."""
  cut = np.array_split(np.arange(len(values)), runs)
  return _ld(0x1A, b"".join(_ld(0x0A, example_encoder.int64_payload([values[i] for i in c]))
                            for c in cut))


def _unpacked(spec: F.FeatureSpec, values) -> bytes:
  """A list feature with each value as its own field."""
  if spec.dtype == F.INT64:
    body = b"".join(b"\x08" + varint.encode(int(v) & (2**64 - 1)) for v in values)
    return _ld(0x1A, body)
  return _ld(0x12, b"".join(b"\x0d" + np.float32(v).tobytes() for v in values))


def _odd_records(schema, vals: dict) -> dict:
  """{kind: one record of `vals` encoded validly in a way the walk refuses}."""
  plain = {s.name: example_encoder.encode_feature(s.dtype, vals[s.name]) for s in schema}
  names = sorted(plain)
  longest = max(schema, key=lambda s: (len(vals[s.name]), s.dtype == F.INT64))

  def example(feature_of=plain.get, order=names, **kw):
    return _example([_entry(n, feature_of(n), **kw) for n in order])

  out = {
      "entries in reverse order": example(order=names[::-1]),
      "value before key": example(value_first=True),
      "unpacked list": example(lambda n: _unpacked(longest, vals[n]) if n == longest.name
                               else plain[n]),
      # protobuf map semantics: the last entry of a key wins.
      "a feature twice": _example([_entry(longest.name, _unpacked(longest, [1] * 3))]
                                  + [_entry(n, plain[n]) for n in names]),
      "a key over 127 bytes": _example([_entry("k" * 200, plain[names[0]])]
                                       + [_entry(n, plain[n]) for n in names]),
  }
  if longest.dtype == F.INT64 and len(vals[longest.name]) > 1:
    out["a list in two packed runs"] = example(
        lambda n: _int64_runs(vals[n], 2) if n == longest.name else plain[n])
  return out


@needs_numba
@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_numba_walk_equals_general_path(name):
  schema = SCHEMAS[name]
  recs, vals = _records(schema, 300, seed=sorted(SCHEMAS).index(name))
  dec = ED.ExampleDecoder(schema)
  assert dec.compiled
  # The walk takes every record the packages write; its layout is learned
  # from a batch's first record and serves the next batches.
  for lo, hi in ((0, 300), (0, 1), (5, 37), (299, 300)):
    fast = dec.decode_compiled(ED.RecordBatch.from_records(recs[lo:hi]))
    assert fast is not None, "records we write must take the compiled walk"
    general = dec.decode_general(recs[lo:hi])
    _same_columns(fast, general)
    _check_values(general, schema, vals[lo:hi])
  # Features outside the schema are skipped by the walk.
  wide = schema + (F.FeatureSpec("aaa_extra", F.INT64, None), F.FeatureSpec("zzz", F.FLOAT, None))
  extra = [example_encoder.ExampleEncoder(wide).encode(
      dict(v, aaa_extra=[1, 2, 300][:i % 4], zzz=[0.5] * (i % 2))) for i, v in enumerate(vals)]
  fast = dec.decode_compiled(ED.RecordBatch.from_records(extra))
  assert fast is not None
  _same_columns(fast, dec.decode_general(extra))
  _check_values(fast, schema, vals)
  # Odd but valid encodings, first in a batch or later: the walk refuses the
  # batch, `decode` gives the reference's arrays.
  for kind, odd in _odd_records(schema, vals[1]).items():
    for at in (0, 2):
      batch = recs[:5]
      batch[at] = odd
      want = vals[:5]
      want[at] = vals[1]
      assert dec.decode_compiled(ED.RecordBatch.from_records(batch)) is None, kind
      got = dec.decode(batch)
      _same_columns(got, dec.decode_general(batch))
      _check_values(got, schema, want)


def test_odd_encodings_decode_by_the_general_path():
  recs, vals = _records(SCHEMA, 6, seed=5)
  dec = ED.ExampleDecoder(SCHEMA, compiled=False)
  for kind, odd in _odd_records(SCHEMA, vals[1]).items():
    _check_values(dec.decode([recs[0], odd]), SCHEMA, [vals[0], vals[1]])
    one = ED.decode_example(odd)
    assert {s.name: one[s.name] for s in SCHEMA} == ED.decode_example(recs[1]), kind


def test_without_numba_every_batch_takes_the_general_path(monkeypatch):
  monkeypatch.setattr(example_kernels, "numba", None)
  recs, vals = _records(SCHEMA, 20, seed=2)
  dec = ED.ExampleDecoder(SCHEMA)
  assert not dec.compiled
  _check_values(dec.decode(ED.RecordBatch.from_records(recs)), SCHEMA, vals)
  with pytest.raises(ImportError, match=r"numba: pip install 'textrecords\[fast\]'"):
    ED.ExampleDecoder(SCHEMA, compiled=True)


PATHS = [False] + ([True] if example_kernels.available() else [])


@pytest.mark.parametrize("compiled", PATHS)
def test_bad_records_raise_decode_errors(compiled):
  recs, _ = _records(SCHEMA, 4)
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
  recs, _ = _records(SCHEMA, 40, seed=3)
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
