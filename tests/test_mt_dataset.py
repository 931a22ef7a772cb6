"""mt_data.make_dataset: d2l's arrays, bucketing, shuffling, argument checks."""

import os

import numpy as np
import pytest

from conftest import load_script
from textrecords.errors import UserError

from mt_data import config as mt_config
from mt_data import generator as mt_generator
from mt_data import vocab as mt_vocab

tf = pytest.importorskip("tensorflow")
import mt_data  # pylint: disable=wrong-import-position

HERE = os.path.dirname(os.path.abspath(__file__))
PAIRS = os.path.join(HERE, "testdata", "mt_pairs.txt")
ROOT = os.path.dirname(HERE)


@pytest.fixture(scope="module")
def out(tmp_path_factory):
  d = str(tmp_path_factory.mktemp("mt") / "out")
  mt_generator.create(mt_config.MTConfig(input_file=PAIRS, output_dir=d, num_train=30,
                                         num_val=12, num_shards=2), log=lambda m: None)
  return d


def all_batches(ds):
  return [({k: v.numpy() for k, v in x.items()}, y.numpy(), w.numpy()) for x, y, w in ds]


def test_arrays_equal_d2l_reimplementation(tmp_path):
  check = load_script("bench/check_mt_d2l")
  report = check.run_check(PAIRS, num_train=30, num_val=12, num_steps=9, min_freq=2,
                           work_dir=str(tmp_path))
  assert report["pairs_compared"] == 42 and report["d2l_pairs_kept"] == 43  # d2l's extra pair
  assert report["train"]["rows"] == 30 and report["valid"]["rows"] == 12
  assert report["equal"], report


def test_first_rows_by_hand(out):
  src, tgt = mt_vocab.load_codecs(out)
  (x, y, w), = all_batches(mt_data.make_dataset(out, 64, split="train", training=False))
  assert x["source"].shape == (30, 9) and x["decoder_input"].shape == (30, 9)
  assert x["source"].dtype == np.int32 and w.dtype == np.float32
  pad = ["<pad>"] * 6
  # "Go.\tVa !": "go" and "va" occur once in the 42 pairs -> <unk>.
  assert src.id_tokens(x["source"][0]) == ["<unk>", ".", "<eos>"] + pad
  assert tgt.id_tokens(x["decoder_input"][0]) == ["<bos>", "<unk>", "!", "<eos>"] + pad[1:]
  assert tgt.id_tokens(y[0]) == ["<unk>", "!", "<eos>"] + pad
  assert x["source_valid_len"][0] == 3
  assert w[0].tolist() == [1, 1, 1, 0, 0, 0, 0, 0, 0]
  # Row 39 is longer than 9 tokens: trimmed, no <eos>, valid_len 9 (valid split row 9).
  (xv, yv, wv), = all_batches(mt_data.make_dataset(out, 64, split="valid"))
  assert src.id_tokens(xv["source"][9]) == "i <unk> the cat is <unk> , <unk> the".split()
  assert xv["source_valid_len"][9] == 9 and wv[9].sum() == 9
  assert tgt.id_tokens(xv["decoder_input"][9])[1:] == tgt.id_tokens(yv[9])[:-1]


def test_num_steps_longer_than_sequences(out):
  (x, y, w), = all_batches(mt_data.make_dataset(out, 64, split="valid", num_steps=30))
  assert x["source"].shape == (12, 30)
  assert (y[:, -1] == 0).all() and (w.sum(axis=1) == (y != 0).sum(axis=1)).all()


def record_rows(out, split):
  """Untrimmed (source, target) id rows via a fixed T larger than any sequence."""
  (x, y, _), = all_batches(mt_data.make_dataset(out, 1000, split=split, num_steps=64, training=False))
  rows = []
  for s, t in zip(x["source"], y):
    rows.append((tuple(s[s != 0]), tuple(t[t != 0])))
  return rows


@pytest.mark.parametrize("split", ["train", "valid"])
def test_bucketing_bounds_and_nothing_dropped(out, split):
  bounds = [5, 7, 10]
  edges = [0] + bounds + [10 ** 9]
  ds = mt_data.make_dataset(out, 4, split=split, num_steps=None, bucket_boundaries=bounds,
                            training=False)
  seen = []
  for x, y, w in all_batches(ds):
    steps = y.shape[1]
    assert x["source"].shape[1] == steps and x["decoder_input"].shape[1] == steps
    assert x["source"].shape[0] <= 4
    lens = [max((s != 0).sum(), (t != 0).sum()) for s, t in zip(x["source"], y)]
    assert steps == max(lens)                             # padded to the batch's longest
    bucket = [i for i in range(len(edges) - 1) if edges[i] <= lens[0] < edges[i + 1]][0]
    assert all(edges[bucket] <= n < edges[bucket + 1] for n in lens), (lens, bucket)
    assert (x["decoder_input"][:, 0] == 2).all()
    assert (x["decoder_input"][:, 1:] == y[:, :-1]).all()
    assert (w == (y != 0)).all()
    assert (x["source_valid_len"] == (x["source"] != 0).sum(axis=1)).all()
    seen += [(tuple(s[s != 0]), tuple(t[t != 0])) for s, t in zip(x["source"], y)]
  assert sorted(seen) == sorted(record_rows(out, split))   # every pair, once


def test_training_shuffle_is_seeded_and_complete(out):
  def order(seed):
    return [tuple(r) for x, _, _ in all_batches(
        mt_data.make_dataset(out, 8, split="train", seed=seed, drop_remainder=False)) for r in x["source"]]
  a, b, c = order(1), order(1), order(2)
  assert a == b and a != c
  assert sorted(a) == sorted(order(None))
  assert len(a) == 30


def test_bucketing_training(out):
  ds = mt_data.make_dataset(out, 4, split="train", num_steps=None, bucket_boundaries=[6], seed=3,
                            drop_remainder=False)
  assert sum(x["source"].shape[0] for x, _, _ in all_batches(ds)) == 30


@pytest.mark.parametrize("kwargs, match", [
    ({"num_steps": 0}, "num_steps=0"),
    ({"num_steps": -3}, "num_steps=-3"),
    ({"num_steps": None}, "num_steps=None"),
    ({"bucket_boundaries": [5, 8]}, "num_steps=None"),
    ({"num_steps": None, "bucket_boundaries": [8, 5]}, "strictly increasing"),
    ({"num_steps": None, "bucket_boundaries": []}, "non-empty"),
    ({"bucket_batch_sizes": [4, 4]}, "need bucket_boundaries"),
    ({"pad_to_bucket_boundary": True}, "need bucket_boundaries"),
])
def test_bad_arguments(out, kwargs, match):
  with pytest.raises(ValueError, match=match) as e:
    mt_data.make_dataset(out, 4, split="train", **kwargs)
  assert "\n" not in str(e.value)


def test_bad_split_and_batch_size(out):
  with pytest.raises(ValueError, match="split='test'"):
    mt_data.make_dataset(out, 4, split="test")
  with pytest.raises(ValueError, match="batch_size=0"):
    mt_data.make_dataset(out, 0, split="train")


def test_empty_valid_split_refused(tmp_path):
  d = str(tmp_path / "o")
  mt_generator.create(mt_config.MTConfig(input_file=PAIRS, output_dir=d, num_train=0, num_val=0),
                      log=lambda m: None)
  with pytest.raises(UserError, match="'valid' split has no pairs"):
    mt_data.make_dataset(d, 4, split="valid")
  ds = mt_data.make_dataset(d, 16, split="train", drop_remainder=False)
  assert sum(y.shape[0] for _, y, _ in all_batches(ds)) == 50


def test_gzip_and_bpe_read(tmp_path):
  d = str(tmp_path / "o")
  mt_generator.create(mt_config.MTConfig(input_file=PAIRS, output_dir=d, num_train=40, num_val=10,
                                         tokenizer="bpe", vocab_size=100, min_freq=1,
                                         compression="GZIP"), log=lambda m: None)
  src, _ = mt_vocab.load_codecs(d)
  (x, _, _), = all_batches(mt_data.make_dataset(d, 16, split="valid", num_steps=40))
  assert x["source"].shape == (10, 40)
  assert src.decode(x["source"][-1]) == "i am not hungry ."


def test_bucketing_with_drop_remainder_static_batch_and_known_length(out):
  # Issue 24 item 7: each bucket pads to its boundary (boundary - 1; the last
  # to the split's longest pair) and batches of 4: static batch dimension,
  # cardinality known (counted from the pairs' lengths).
  bounds, longest = [4, 5, 6], 6  # train split: max_len 6 (source and target)
  ds = mt_data.make_dataset(out, 4, split="train", num_steps=None, bucket_boundaries=bounds, seed=2,
                            drop_remainder=True)
  x_spec, y_spec, w_spec = ds.element_spec
  assert all(s.shape.as_list() == [4, None] for s in (x_spec["source"], y_spec, w_spec))
  assert x_spec["source_valid_len"].shape.as_list() == [4]
  lens = [max(len(s), len(t)) for s, t in record_rows(out, "train")]
  per_bucket = np.bincount(np.searchsorted(bounds, lens, side="right"), minlength=4)
  assert ds.cardinality().numpy() == (per_bucket // 4).sum()
  batches = all_batches(ds)
  assert len(batches) == (per_bucket // 4).sum()
  widths = {3, 4, 5, longest}
  for x, y, w in batches:
    assert y.shape[0] == 4 and y.shape[1] in widths and x["source"].shape == y.shape
    n = [max((s != 0).sum(), (t != 0).sum()) for s, t in zip(x["source"], y)]
    bucket = np.searchsorted(bounds, n, side="right")
    assert len(set(bucket)) == 1 and y.shape[1] == ([3, 4, 5, longest][bucket[0]])
  # Per-bucket batch sizes (a token budget): batch dimension no longer static.
  ds = mt_data.make_dataset(out, 4, split="train", num_steps=None, bucket_boundaries=bounds, seed=2,
                            drop_remainder=True, bucket_batch_sizes=[4, 3, 2, 2])
  assert ds.element_spec[1].shape.as_list() == [None, None]
  sizes = [4, 3, 2, 2]
  got = all_batches(ds)
  assert len(got) == ds.cardinality().numpy() == sum(c // s for c, s in zip(per_bucket, sizes))
  for x, y, _ in got:
    n = max((x["source"][0] != 0).sum(), (y[0] != 0).sum())
    assert y.shape[0] == sizes[np.searchsorted(bounds, n, side="right")]
  # Without drop_remainder: every pair, known length too.
  ds = mt_data.make_dataset(out, 4, split="train", num_steps=None, bucket_boundaries=bounds, seed=2,
                            drop_remainder=False)
  assert ds.cardinality().numpy() == len(all_batches(ds)) == (-(-per_bucket // 4)).sum()


@pytest.mark.parametrize("sizes", [[4, 4], [4, 0, 4], [4, 2.0, 4]])
def test_bad_bucket_batch_sizes(out, sizes):
  with pytest.raises(ValueError, match="bucket_batch_sizes=.*must be 3 ints") as e:
    mt_data.make_dataset(out, 4, split="train", num_steps=None, bucket_boundaries=[4, 6],
                         bucket_batch_sizes=sizes)
  assert "\n" not in str(e.value)
