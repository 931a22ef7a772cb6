"""Reference-compatible mode equals google-research/bert's output, record for record."""

import hashlib
import json
import os
import struct

import pytest

from bert_data import generator
from bert_data.config import BertConfig
from conftest import GOLDEN, SAMPLE_TEXT, VOCAB
from textrecords.files import tfrecord

CASES = {
    "sample_msl128_mp20_seed12345_dupe10": {},
    "sample_msl128_mp20_seed12345_dupe10_wwm": {"do_whole_word_mask": True},
    "sample_msl64_mp10_seed7_dupe1": dict(max_seq_length=64, max_predictions_per_seq=10,
                                          random_seed=7, dupe_factor=1),
}


def canonical_sha256(path):
  """The golden README's digest: 8-byte LE length + deterministic bytes, per record."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  h = hashlib.sha256()
  for rec in tfrecord.read_records(path):
    b = tf.train.Example.FromString(rec).SerializeToString(deterministic=True)
    h.update(struct.pack("<Q", len(b)))
    h.update(b)
  return h.hexdigest()


def _golden(name):
  with open(os.path.join(GOLDEN, name + ".json")) as f:
    return json.load(f)


def _run(tmp_path, outputs, num_workers=1, **kw):
  cfg = BertConfig(input_files=(SAMPLE_TEXT,), output_files=tuple(str(tmp_path / o) for o in outputs),
                   vocab_file=VOCAB, reference_compatible=True, num_workers=num_workers, **kw)
  return generator.create(cfg)


@pytest.mark.parametrize("name", sorted(CASES))
def test_equals_golden(tmp_path, name):
  summary = _run(tmp_path, ["out.tfrecord"], **CASES[name])
  golden = _golden(name)
  out = str(tmp_path / "out.tfrecord")
  assert summary.counts["instances"] == golden["record_count"]
  assert canonical_sha256(out) == golden["canonical_sha256"]
  # Features are written in the reference's order, so even raw bytes match.
  assert tfrecord.file_sha256(out) == golden["sha256"]


def test_two_output_files_round_robin(tmp_path):
  _run(tmp_path, ["a.tfrecord", "b.tfrecord"], num_workers=2)
  for i, name in enumerate(["a.tfrecord", "b.tfrecord"]):
    golden = _golden(f"sample_msl128_mp20_seed12345_dupe10_shard{i}of2")
    assert tfrecord.file_sha256(str(tmp_path / name)) == golden["sha256"]
    meta = json.load(open(str(tmp_path / name) + ".meta.json"))
    assert meta["counts"]["records"] == golden["record_count"]


def test_golden_fixture_matches_its_digest():
  """Guards the fixtures themselves (copied from ../shared/golden)."""
  for name in CASES:
    path = os.path.join(GOLDEN, name + ".tfrecord")
    assert tfrecord.file_sha256(path) == _golden(name)["sha256"]
