"""bert_data.create --pack_instances=N: packed rows, their packing, unpacking and errors."""

import random

import numpy as np
import pytest

from bert_data import instance_packing as ip
from bert_data import generator
from bert_data import records
from bert_data import schema as S
from bert_data.config import BertConfig
from conftest import (BUNDLED_TEXT, BUNDLED_VOCAB, SAMPLE_TEXT, VOCAB, error_lines, run_cli,
                      write_varied_corpus)
from textrecords.datasets import layout
from textrecords.files import tfrecord
from textrecords.wire import example_decoder
from textrecords.wire import example_encoder

MOD = "bert_data.create"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  """Short documents (the sample's, cut to their first three lines), varied."""
  long = write_varied_corpus(tmp_path_factory.mktemp("corpus") / "long.txt", 6)
  docs = open(long, encoding="utf-8").read().strip().split("\n\n")
  path = tmp_path_factory.mktemp("short") / "short.txt"
  path.write_text("\n\n".join("\n".join(d.split("\n")[:3]) for d in docs) + "\n",
                  encoding="utf-8")
  return str(path)


def _create(out, corpus, **kw):
  kw = {"dupe_factor": 2, "max_seq_length": 256, "max_predictions_per_seq": 20,
        "num_workers": 1, **kw}
  cfg = BertConfig(input_files=(corpus,), output_files=(str(out),), vocab_file=VOCAB,
                   quiet=True, **kw)
  return generator.create(cfg)


def _records(out, num_shards=1):
  paths = layout.shard_paths(str(out), num_shards) if num_shards > 1 else [str(out)]
  return [r for p in paths for r in tfrecord.read_records(p)]


def _unpacked_records(rows, seq, pred, task_records=True):
  """Every instance of the packed rows, re-encoded as an unpacked record."""
  enc = records.BertRecordEncoder(seq, pred, 30522, next_sentence=task_records)
  out = []
  for row in rows:
    for f in ip.unpack_row(example_decoder.decode_example(row), pred):
      n, m = sum(f[S.INPUT_MASK]), int(sum(f[S.MASKED_LM_WEIGHTS]))
      out.append(enc.encode_parts(f[S.INPUT_IDS][:n], n - sum(f[S.SEGMENT_IDS]),
                                  bool(f[S.NEXT_SENTENCE_LABELS][0]),
                                  f[S.MASKED_LM_POSITIONS][:m], f[S.MASKED_LM_IDS][:m]))
  return out


# ---------------------------------------------------------------- the packing algorithm

@pytest.mark.parametrize("seed", range(5))
def test_pack_lengths_fits_every_item_once_within_bounds(seed):
  rng = random.Random(seed)
  lengths = [rng.randint(1, 64) for _ in range(rng.randint(1, 300))]
  for n in (1, 2, 3, 8):
    rows = ip.pack_lengths(lengths, 64, n)
    assert sorted(i for r in rows for i in r) == list(range(len(lengths)))
    assert all(sum(lengths[i] for i in r) <= 64 and 1 <= len(r) <= n for r in rows)
    assert all(r == sorted(r) for r in rows)
    assert [r[0] for r in rows] == sorted(r[0] for r in rows)
    assert rows == ip.pack_lengths(list(lengths), 64, n)  # deterministic
    if n == 1:
      assert len(rows) == len(lengths)


def test_pack_lengths_fills_rows_of_short_items():
  # 100 items of 10 tokens in rows of 64, at most 4 each: 25 full rows of 4.
  rows = ip.pack_lengths([10] * 100, 64, 4)
  assert len(rows) == 25 and all(len(r) == 4 for r in rows)


def _dense_row(insts, seq, bound, n):
  """One packed row's features written out whole: the reference the
  encoder's slices must equal byte for byte."""
  f = {name: [0] * seq for name in (S.INPUT_IDS, S.INPUT_MASK, S.SEGMENT_IDS,
                                    S.INSTANCE_IDS, S.POSITION_IDS)}
  pos, ids, labels, start = [], [], [], 0
  for k, (tokens, num_a, rnd, positions, masked) in enumerate(insts):
    for j, t in enumerate(tokens):
      at = start + j
      f[S.INPUT_IDS][at], f[S.INPUT_MASK][at], f[S.INSTANCE_IDS][at] = t, 1, k + 1
      f[S.SEGMENT_IDS][at], f[S.POSITION_IDS][at] = int(j >= num_a), j
    pos += [p + start for p in positions]
    ids += masked
    labels.append(int(rnd))
    start += len(tokens)
  f[S.MASKED_LM_POSITIONS] = pos + [0] * (bound - len(pos))
  f[S.MASKED_LM_IDS] = ids + [0] * (bound - len(ids))
  f[S.MASKED_LM_WEIGHTS] = [1.0] * len(pos) + [0.0] * (bound - len(pos))
  f[S.NEXT_SENTENCE_LABELS] = labels + [0] * (n - len(labels))
  f[S.NEXT_SENTENCE_WEIGHTS] = [1.0] * len(labels) + [0.0] * (n - len(labels))
  return f


@pytest.mark.parametrize("seed", range(3))
def test_rows_are_the_dense_rows_encoded_generically(seed):
  """RowPacker's slices equal each row written out whole and encoded by the
  generic ExampleEncoder (3-byte ids, windows of 7, rows of 1..3 instances)."""
  rng = random.Random(seed)
  seq, n, window = 48, 3, 7
  bound = ip.predictions_per_row(seq, 8, n, 0.15)
  insts = []
  for _ in range(rng.randint(1, 40)):
    length = rng.randint(3, seq)
    m = rng.randint(0, max(1, round(length * 0.15)))
    insts.append(([rng.choice([0, 101, 127, 128, 16383, 16384, 30521, rng.randrange(30522)])
                   for _ in range(length)], rng.randint(1, length), rng.random() < 0.5,
                  sorted(rng.sample(range(length), m)), [rng.randrange(30522) for _ in range(m)]))
  got = ip.RowPacker(seq, bound, n, window=window).pack_records(
      [ip.compact_instance(*i) for i in insts])
  encoder = example_encoder.ExampleEncoder(S.packed_schema(seq, bound, n), "schema")
  want = []
  for w0 in range(0, len(insts), window):
    part = insts[w0:w0 + window]
    for members in ip.pack_lengths([len(i[0]) for i in part], seq, n):
      want.append(encoder.encode(_dense_row([part[i] for i in members], seq, bound, n)))
  assert got == want


def test_attention_mask_is_block_diagonal():
  ids = np.array([[1, 1, 1, 2, 2, 3, 0, 0]])
  mask = ip.attention_mask(ids)[0]
  for q in range(8):
    for k in range(8):
      assert mask[q, k] == (ids[0, q] == ids[0, k] != 0)


# ---------------------------------------------------------------- packed runs

@pytest.mark.parametrize("kw", [{}, {"do_whole_word_mask": True}, {"sentence_order": True}],
                         ids=["static", "whole_word", "sop"])
def test_unpacking_rows_gives_back_the_unpacked_instances(tmp_path, corpus, kw):
  plain = _create(tmp_path / "plain.tfrecord", corpus, **kw)
  packed = _create(tmp_path / "packed.tfrecord", corpus, pack_instances=4, **kw)
  rows = _records(tmp_path / "packed.tfrecord")
  unpacked = _records(tmp_path / "plain.tfrecord")
  assert packed.meta["counts"]["instances"] == plain.meta["counts"]["instances"] == len(unpacked)
  assert packed.meta["counts"]["records"] == len(rows) < len(unpacked) / 1.3
  assert sorted(_unpacked_records(rows, 256, 20)) == sorted(unpacked)
  assert packed.meta["pack_instances"] == 4 and plain.meta["pack_instances"] == 1


def test_row_features_describe_each_instance(tmp_path, corpus):
  _create(tmp_path / "p.tfrecord", corpus, pack_instances=3)
  spec = {s.name: s.length for s in S.packed_schema(256, 41, 3)}  # 41: floor(0.15 * 256) + 3
  for row in _records(tmp_path / "p.tfrecord"):
    f = example_decoder.decode_example(row)
    assert {k: len(v) for k, v in f.items()} == spec
    inst, pos, mask = (np.array(f[k]) for k in (S.INSTANCE_IDS, S.POSITION_IDS, S.INPUT_MASK))
    count = int(inst.max())
    assert 1 <= count <= 3 and (mask == (inst > 0)).all()
    assert f[S.NEXT_SENTENCE_WEIGHTS] == [1.0] * count + [0.0] * (3 - count)
    for k in range(1, count + 1):
      where = np.flatnonzero(inst == k)
      assert (np.diff(where) == 1).all() and (pos[where] == np.arange(len(where))).all()
      assert f[S.INPUT_IDS][where[0]] == 101  # [CLS] opens every instance
    used = np.array(f[S.MASKED_LM_WEIGHTS]) > 0
    assert (inst[np.array(f[S.MASKED_LM_POSITIONS])[used]] > 0).all()


def test_same_bytes_for_1_2_4_workers(tmp_path, corpus):
  digests = []
  for w in (1, 2, 4):
    out = tmp_path / f"w{w}" / "train.tfrecord"
    out.parent.mkdir()
    _create(out, corpus, pack_instances=4, num_workers=w, num_shards=2)
    digests.append([tfrecord.file_sha256(p) for p in layout.shard_paths(str(out), 2)])
  assert digests[0] == digests[1] == digests[2]


def test_bundled_sample_same_bytes_for_1_2_4_workers(tmp_path):
  """The documented create command on the bundled sample, --num_workers=1/2/4."""
  digests = []
  for w in (1, 2, 4):
    out = tmp_path / f"w{w}.tfrecord"
    r = run_cli(MOD, f"--input_file={BUNDLED_TEXT}", f"--output_file={out}",
                f"--vocab_file={BUNDLED_VOCAB}", "--max_seq_length=512",
                "--max_predictions_per_seq=76", "--pack_instances=4", f"--num_workers={w}",
                "--quiet")
    assert r.returncode == 0, r.stderr
    digests.append(tfrecord.file_sha256(str(out)))
  assert digests[0] == digests[1] == digests[2]


def test_one_instance_per_row_is_todays_records(tmp_path, corpus):
  _create(tmp_path / "a.tfrecord", corpus)
  _create(tmp_path / "b.tfrecord", corpus, pack_instances=1)
  assert tfrecord.file_sha256(str(tmp_path / "a.tfrecord")) == tfrecord.file_sha256(
      str(tmp_path / "b.tfrecord"))
  assert example_decoder.decode_example(_records(tmp_path / "b.tfrecord")[0]).keys() == {
      s.name for s in S.bert_schema(256, 20)}


# ---------------------------------------------------------------- bad values

@pytest.mark.parametrize("flags,text", [
    (["--pack_instances=0"], "--pack_instances=0: must be in [1, 8]"),
    (["--pack_instances=9"], "--pack_instances=9: must be in [1, 8]"),
    (["--pack_instances=2", "--reference_compatible"], "with --reference_compatible"),
    (["--pack_instances=2", "--next_sentence=false", "--packing=full_sentences"],
     "with --packing=full_sentences"),
    (["--pack_instances=2", "--masking=dynamic"], "with --masking=dynamic"),
])
def test_bad_pack_instances_is_one_line(tmp_path, flags, text):
  out = tmp_path / "out"
  out.mkdir()
  r = run_cli(MOD, f"--input_file={SAMPLE_TEXT}", f"--output_file={out}/x.tfrecord",
              f"--vocab_file={VOCAB}", "--dupe_factor=1", "--quiet", *flags)
  lines = error_lines(r.stderr)
  assert r.returncode == 2 and len(lines) == 1 and text in lines[0], r.stderr
  assert list(out.iterdir()) == []


def test_several_output_files_refused(tmp_path):
  with pytest.raises(ValueError, match="--output_file paths: packed rows go to one dataset"):
    BertConfig(input_files=(SAMPLE_TEXT,), output_files=("a", "b"), vocab_file=VOCAB,
               pack_instances=2).validate()


# ---------------------------------------------------------------- reading packed rows

@pytest.fixture(scope="module")
def packed(tmp_path_factory, corpus):
  out = tmp_path_factory.mktemp("packed") / "p.tfrecord"
  _create(out, corpus, pack_instances=3, max_seq_length=128)
  return str(out)


def test_make_dataset_static_shapes_and_no_attention_across_instances(packed):
  import bert_data  # pylint: disable=import-outside-toplevel
  ds = bert_data.make_dataset(packed, 4, training=False, drop_remainder=True,
                              attention_mask=True)
  spec_x, spec_y, spec_w = ds.element_spec
  assert spec_x[S.ATTENTION_MASK].shape.as_list() == [4, 128, 128]
  assert spec_x[S.INSTANCE_IDS].shape.as_list() == [4, 128]
  assert spec_y["next_sentence"].shape.as_list() == spec_w["next_sentence"].shape.as_list() == [4, 3]
  assert spec_y["masked_lm"].shape.as_list() == [4, 22]  # floor(0.15 * 128) + 3
  crossed = 0
  for x, _, w in ds:
    ids, mask = x[S.INSTANCE_IDS].numpy(), x[S.ATTENTION_MASK].numpy()
    same = (ids[:, :, None] == ids[:, None, :]) & (ids[:, None, :] > 0)
    assert (mask == same).all()
    crossed += int((mask & (ids[:, :, None] != ids[:, None, :])).sum())
    assert (w["next_sentence"].numpy() == (np.arange(1, 4)[None] <= ids.max(axis=1)[:, None])).all()
  assert crossed == 0


def test_numpy_batches_equal_make_dataset_on_packed_rows(packed):
  import bert_data  # pylint: disable=import-outside-toplevel
  from bert_data import reader  # pylint: disable=import-outside-toplevel
  for (x, y, w), (xn, yn, wn) in zip(bert_data.make_dataset(packed, 4, training=False),
                                     reader.numpy_batches(packed, 4, training=False)):
    for got, want in ((xn, x), (yn, y), (wn, w)):
      assert got.keys() == want.keys()
      assert all((got[k] == want[k].numpy()).all() for k in got)


def test_keras_hub_names_carry_the_attention_mask(packed):
  import bert_data  # pylint: disable=import-outside-toplevel
  x, y, w = next(iter(bert_data.make_dataset(packed, 2, training=False,
                                             feature_names="keras_hub")))
  assert set(x) == {"token_ids", "padding_mask", "segment_ids", "position_ids",
                    "mask_positions", "attention_mask"}
  assert x["attention_mask"].shape == (2, 128, 128) and y.shape == w.shape == (2, 22)


def test_make_dataset_refuses_another_pack_instances(packed):
  import bert_data  # pylint: disable=import-outside-toplevel
  with pytest.raises(ValueError, match="records have pack_instances=3, but pack_instances=1"):
    bert_data.make_dataset(packed, 4, pack_instances=1)
  bert_data.make_dataset(packed, 4, pack_instances=3)


# ---------------------------------------------------------------- inspect and stats

def test_inspect_shows_each_instance_of_a_row(packed):
  r = run_cli("bert_data.inspect", f"--input_file={packed}", f"--vocab_file={VOCAB}",
              "--max_records=40")
  assert r.returncode == 0, r.stderr
  rows = r.stdout.split("*** record ")[1:]
  assert len(rows) == 40
  for text in rows:
    count = int(text.split("packed row: ")[1].split(" instances")[0])
    assert text.count("- instance ") == count == text.count("tokens: [CLS] ")
    assert text.count("next_sentence_label: ") == count
  assert any("- instance 2 " in text for text in rows)


def test_stats_report_padding_rows_and_pack_sizes(tmp_path, corpus, packed):
  from bert_data import stats  # pylint: disable=import-outside-toplevel
  plain = tmp_path / "plain.tfrecord"
  _create(plain, corpus, max_seq_length=128)
  unpacked, rows = (stats.summarize(stats.collect(str(p))) for p in (plain, packed))
  assert rows["instances"] == unpacked["instances"] == unpacked["rows"]
  assert rows["rows"] == sum(rows["instances_per_row"]["histogram"].values()) < rows["instances"]
  assert sum(k * v for k, v in rows["instances_per_row"]["histogram"].items()) == rows["instances"]
  assert rows["tokens_per_instance"] == unpacked["tokens_per_instance"]
  assert rows["masked_per_instance"] == unpacked["masked_per_instance"]
  assert "instances_per_row" not in unpacked
  tokens = unpacked["tokens_per_instance"]["mean"] * unpacked["instances"]
  assert unpacked["padding_share"] == pytest.approx(1 - tokens / (128 * unpacked["rows"]), abs=1e-4)
  assert rows["padding_share"] == pytest.approx(1 - tokens / (128 * rows["rows"]), abs=1e-4)
  assert rows["padding_share"] < unpacked["padding_share"]


# ---------------------------------------------------------------- a model of packed rows

def _train_script():
  from conftest import load_script  # pylint: disable=import-outside-toplevel
  return load_script("train_bert_tiny")


def _summed_losses(outputs, y, w):
  """(masked-LM, next-sentence) cross-entropy summed over weighted slots, per row."""
  out = []
  for key in ("masked_lm", "next_sentence"):
    logits = np.asarray(outputs[key], np.float64)
    logits = logits - logits.max(axis=-1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
    labels = np.asarray(y[key]).reshape(logp.shape[:-1])
    nll = -np.take_along_axis(logp, labels[..., None], axis=-1)[..., 0]
    weights = np.asarray(w[key], np.float64).reshape(nll.shape)
    out.append((nll * weights).reshape(len(nll), -1).sum(axis=1))
  return out


def test_packed_row_loss_is_the_sum_of_its_instances_losses(packed):
  import bert_data  # pylint: disable=import-outside-toplevel
  import keras  # pylint: disable=import-outside-toplevel
  tiny = _train_script()
  keras.utils.set_random_seed(3)
  row_model = tiny.build_model(30522, 128, 22, hidden=32, num_heads=2, dropout=0.0,
                               pack_instances=3)
  one_model = tiny.build_model(30522, 128, 20, hidden=32, num_heads=2, dropout=0.0)
  one_model.set_weights(row_model.get_weights())
  x, y, w = next(iter(bert_data.make_dataset(packed, 16, training=False)))
  assert int(np.max(x[S.INSTANCE_IDS])) >= 2  # rows of several instances are checked
  row_mlm, row_nsp = _summed_losses(row_model(x, training=False), y, w)
  for r in range(16):
    row = {k: v[r].numpy().tolist() for k, v in x.items()}
    row.update({S.MASKED_LM_IDS: y["masked_lm"][r].numpy().tolist(),
                S.MASKED_LM_WEIGHTS: w["masked_lm"][r].numpy().tolist(),
                S.NEXT_SENTENCE_LABELS: y["next_sentence"][r].numpy().tolist()})
    insts = ip.unpack_row(row, 20)
    xi = {k: np.array([i[k] for i in insts], np.int32) for k in tiny.INPUT_NAMES}
    yi = {"masked_lm": np.array([i[S.MASKED_LM_IDS] for i in insts]),
          "next_sentence": np.array([i[S.NEXT_SENTENCE_LABELS] for i in insts])}
    wi = {"masked_lm": np.array([i[S.MASKED_LM_WEIGHTS] for i in insts]),
          "next_sentence": np.ones(len(insts))}
    mlm, nsp = _summed_losses(one_model(xi, training=False), yi, wi)
    assert row_mlm[r] == pytest.approx(mlm.sum(), rel=1e-4, abs=1e-4)
    assert row_nsp[r] == pytest.approx(nsp.sum(), rel=1e-4, abs=1e-4)


def test_attention_never_crosses_instances_in_the_model(packed):
  """Changing one instance's tokens leaves the other instances' outputs as they were."""
  import bert_data  # pylint: disable=import-outside-toplevel
  import keras  # pylint: disable=import-outside-toplevel
  tiny = _train_script()
  keras.utils.set_random_seed(4)
  model = tiny.build_model(30522, 128, 22, hidden=32, num_heads=2, dropout=0.0,
                           pack_instances=3)
  x, _, _ = next(iter(bert_data.make_dataset(packed, 16, training=False)))
  x = {k: v.numpy() for k, v in x.items()}
  r = int(np.argmax(x[S.INSTANCE_IDS].max(axis=1)))
  changed = {k: v.copy() for k, v in x.items()}
  first = changed[S.INSTANCE_IDS][r] == 1
  changed[S.INPUT_IDS][r, first] = (changed[S.INPUT_IDS][r, first] + 7) % 30000 + 1000
  before, after = model(x, training=False), model(changed, training=False)
  nsp_b, nsp_a = np.asarray(before["next_sentence"]), np.asarray(after["next_sentence"])
  assert not np.allclose(nsp_b[r, 0], nsp_a[r, 0])
  count = int(x[S.INSTANCE_IDS][r].max())  # empty slots read position 0: not compared
  np.testing.assert_allclose(nsp_b[r, 1:count], nsp_a[r, 1:count], rtol=1e-5, atol=1e-5)
  others = x[S.INSTANCE_IDS][r][x[S.MASKED_LM_POSITIONS][r]] > 1
  mlm_b, mlm_a = np.asarray(before["masked_lm"])[r], np.asarray(after["masked_lm"])[r]
  np.testing.assert_allclose(mlm_b[others], mlm_a[others], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("packed_flag", [False, True])
def test_train_script_asks_for_packed_exactly_on_packed_rows(tmp_path, corpus, packed,
                                                             packed_flag):
  import os  # pylint: disable=import-outside-toplevel
  import subprocess  # pylint: disable=import-outside-toplevel
  import sys  # pylint: disable=import-outside-toplevel
  from conftest import REPO  # pylint: disable=import-outside-toplevel
  records = packed
  if packed_flag:
    records = str(tmp_path / "plain.tfrecord")
    _create(records, corpus, max_seq_length=128)
  r = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "train_bert_tiny.py"),
                      f"--input={records}", "--steps=1", "--batch_size=2"]
                     + (["--packed"] if packed_flag else []),
                     capture_output=True, text=True, timeout=300)
  lines = error_lines(r.stderr)
  assert r.returncode == 2 and len(lines) == 1, r.stderr
  assert ("drop --packed" if packed_flag else "add --packed") in lines[0]


def test_v2_names_on_packed_rows(tmp_path, corpus):
  import bert_data  # pylint: disable=import-outside-toplevel
  from bert_data import stats  # pylint: disable=import-outside-toplevel
  out = tmp_path / "v2.tfrecord"
  _create(out, corpus, pack_instances=2, max_seq_length=128, use_v2_feature_names=True)
  assert "input_word_ids" in example_decoder.decode_example(_records(out)[0])
  x, y, _ = next(iter(bert_data.make_dataset(str(out), 2, training=False, feature_names="v2")))
  assert {"input_word_ids", "input_type_ids", "instance_ids", "position_ids"} <= set(x)
  assert y["next_sentence"].shape == (2, 2)
  assert stats.summarize(stats.collect(str(out)))["instances_per_row"]["max"] == 2
