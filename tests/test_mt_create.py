"""mt_data without TensorFlow: cleaning, splits, vocabularies, records, sharding."""

import json
import os

import pytest

from textrecords.wire import example_decoder
from textrecords.files import tfrecord
from textrecords.errors import UserError

from mt_data import config as mt_config
from mt_data import generator as mt_generator
from mt_data import preprocess
from mt_data import records
from mt_data import vocab as mt_vocab

HERE = os.path.dirname(os.path.abspath(__file__))
PAIRS = os.path.join(HERE, "testdata", "mt_pairs.txt")
MESSY = os.path.join(HERE, "testdata", "mt_messy.txt")


def run(tmp_path, name="out", **kw):
  kw.setdefault("input_file", PAIRS)
  cfg = mt_config.MTConfig(output_dir=str(tmp_path / name), **kw)
  return mt_generator.create(cfg, log=lambda m: None).meta, str(tmp_path / name)


def read_split(out, split):
  with open(os.path.join(out, "meta.json"), encoding="utf-8") as f:
    meta = json.load(f)
  recs = []
  for name in meta["splits"][split]["files"]:
    recs += [example_decoder.decode_example(r)
             for r in tfrecord.read_records(os.path.join(out, name), meta["compression"])]
  return [(r["source_ids"], r["target_ids"]) for r in recs]


# ----------------------------------------------------------------- cleaning
@pytest.mark.parametrize("raw, cleaned", [
    ("Va\u202f!", "va !"),                 # narrow no-break space
    ("Non\u00a0!", "non !"),               # no-break space
    ("A\u00a0\u00a0B", "a  b"),            # two spaces stay (tokenize drops the empty)
    ("Hi!!", "hi ! !"),                    # a run: each mark gets a space
    ("Well...", "well . . ."),
    ("Wait ?!", "wait ? !"),               # already spaced mark kept, next one spaced
    ("!Wow", "!wow"),                      # position 0: nothing inserted
    ("?", "?"),
    (".a.", ".a ."),
    ("", ""),
    ("ÉTÉ, OUI", "été , oui"),             # lowercase, non-ASCII
    ("a\u2009!", "a\u2009 !"),             # other spaces are not spaces (as d2l)
])
def test_clean(raw, cleaned):
  assert preprocess.clean(raw) == cleaned


@pytest.mark.parametrize("line, expected", [
    ("Go.\tVa !", (["go", ".", "<eos>"], ["va", "!", "<eos>"])),
    ("Go.\tVa !\tCC-BY 2.0 (France) Attribution", (["go", ".", "<eos>"], ["va", "!", "<eos>"])),
    ("A  b\t c ", (["a", "b", "<eos>"], ["c", "<eos>"])),
])
def test_parse_line_pairs(line, expected):
  assert preprocess.parse_line(line) == (expected, None)


@pytest.mark.parametrize("line, reason", [
    ("", preprocess.SKIP_BLANK),
    ("   ", preprocess.SKIP_BLANK),
    ("only one column", preprocess.SKIP_COLUMNS),
    ("Hi.\t", preprocess.SKIP_EMPTY),
    ("Hi.\t \u00a0 ", preprocess.SKIP_EMPTY),
    ("\tSalut.", preprocess.SKIP_EMPTY),
    ("\t", preprocess.SKIP_EMPTY),
])
def test_parse_line_skips(line, reason):
  assert preprocess.parse_line(line) == (None, reason)


def test_messy_file_counts_and_tokens(tmp_path):
  summary, out = run(tmp_path, input_file=MESSY, num_train=4, num_val=0, min_freq=1)
  assert summary["counts"]["lines_read"] == 11
  assert summary["counts"]["invalid_lines"] == {"blank_line": 1, "fewer_than_2_columns": 1,
                                                "empty_source_or_target": 3}
  assert summary["splits"]["train"]["pairs"] == 4
  assert summary["splits"]["valid"]["pairs"] == 2
  src, tgt = mt_vocab.load_codecs(out)
  got = [(src.id_tokens(s), tgt.id_tokens(t))
         for s, t in read_split(out, "train") + read_split(out, "valid")]
  assert got == [
      (["go", ".", "<eos>"], ["va", "!", "<eos>"]),
      (["!wow", "!", "!", "<eos>"], ["?quoi", "?", "!", "<eos>"]),
      (["well", ".", ".", ".", "ok", "?", "<eos>"], ["bon", ".", ".", ".", "d'accord", "?", "<eos>"]),
      (["a", "b", "c", ".", "<eos>"], ["d", "e", "!", "<eos>"]),
      (["yes", ".", "<eos>"], ["oui", ".", "<eos>"]),        # trailing \r removed
      (["no", "!", "<eos>"], ["non", "!", "<eos>"]),         # 4 columns: first two used
  ]


# ----------------------------------------------------------------- splits
@pytest.mark.parametrize("total, num_train, num_val, expected", [
    (50, 30, 12, (30, 12)),
    (50, 30, 0, (30, 20)),     # num_val=0: all the rest
    (50, 0, 12, (38, 12)),     # num_train=0: all but the last num_val
    (50, 0, 0, (50, 0)),       # both 0: everything is train
    (50, 60, 12, (50, 0)),     # short input
    (50, 45, 12, (45, 5)),
])
def test_split_sizes(total, num_train, num_val, expected):
  assert preprocess.split_sizes(total, num_train, num_val) == expected


def test_num_train_zero_keeps_last_pairs_for_validation(tmp_path):
  summary, out = run(tmp_path, num_train=0, num_val=5, min_freq=1)
  assert summary["splits"]["train"]["pairs"] == 45
  assert summary["splits"]["valid"]["pairs"] == 5
  _, tgt = mt_vocab.load_codecs(out)
  valid = read_split(out, "valid")
  assert tgt.decode(valid[-1][1]) == "je n'ai pas faim ."   # the file's last pair
  assert tgt.decode(read_split(out, "train")[0][1]) == "va !"


def test_exact_counts_no_off_by_one(tmp_path):
  summary, _ = run(tmp_path, num_train=7, num_val=3)
  assert summary["splits"]["train"]["pairs"] == 7
  assert summary["splits"]["valid"]["pairs"] == 3


def test_all_pairs_reserved_for_validation_is_an_error(tmp_path):
  with pytest.raises(UserError, match="--num_val"):
    run(tmp_path, num_train=0, num_val=50)
  assert not os.path.exists(tmp_path / "out")


# ----------------------------------------------------------------- vocab
def test_word_vocab_rule(tmp_path):
  assert mt_vocab.word_vocab([["b", "a", "b", "<eos>"], ["c", "a", "d", "<eos>"], ["d", "<eos>"]],
                             2) == ["<pad>", "<unk>", "<bos>", "<eos>", "b", "a", "d"]
  _, out = run(tmp_path, num_train=30, num_val=12)
  src = mt_vocab.load_tokens(os.path.join(out, "src_vocab.txt"))
  # Built from the 42 pairs written (train + valid), count >= 2.
  counts = preprocess.count_tokens(
      preprocess.parse_line(line.rstrip("\n"))[0][0]
      for line in list(open(PAIRS, encoding="utf-8"))[:42])
  expected = [t for t, c in sorted(counts.items(), key=lambda kv: -kv[1])
              if c >= 2 and t != "<eos>"]
  assert src == list(preprocess.RESERVED) + expected
  assert "go" not in src and "cat" in src        # "go" occurs once


def test_write_parse_round_trip_without_tf(tmp_path):
  _, out = run(tmp_path, num_train=30, num_val=12, min_freq=1)
  src, tgt = mt_vocab.load_codecs(out)
  lines = list(open(PAIRS, encoding="utf-8"))[:42]
  pairs = read_split(out, "train") + read_split(out, "valid")
  assert len(pairs) == 42
  for line, (s, t) in zip(lines, pairs):
    (s_tok, t_tok), _ = preprocess.parse_line(line.rstrip("\n"))
    assert src.id_tokens(s) == s_tok and tgt.id_tokens(t) == t_tok
    assert s[-1] == preprocess.EOS_ID and t[-1] == preprocess.EOS_ID


def test_codec_encode_decode(tmp_path):
  _, out = run(tmp_path, num_train=30, num_val=12)
  src, tgt = mt_vocab.load_codecs(out)
  assert src.id_tokens(src.encode("The CAT is black!")) == ["the", "cat", "is", "black", "!",
                                                             "<eos>"]
  assert src.id_tokens(src.encode("Zebra.")) == ["<unk>", ".", "<eos>"]
  assert tgt.decode([2] + tgt.encode("Le chat est noir.") + [0, 0]) == "le chat est noir ."


# ----------------------------------------------------------------- determinism, sharding
def tree_bytes(out):
  return {n: open(os.path.join(out, n), "rb").read() for n in sorted(os.listdir(out))}


def test_byte_identical_for_any_num_workers_and_contiguous_shards(tmp_path):
  _, one = run(tmp_path, "one", num_train=30, num_val=12, num_shards=3, num_workers=1)
  _, three = run(tmp_path, "three", num_train=30, num_val=12, num_shards=3, num_workers=3)
  assert tree_bytes(one) == tree_bytes(three)
  assert not [n for n in os.listdir(one) if n.startswith(".")]   # no hidden leftovers
  meta = json.load(open(os.path.join(one, "meta.json"), encoding="utf-8"))
  assert meta["splits"]["train"]["files"] == [f"train.tfrecord-0000{i}-of-00003" for i in range(3)]
  counts = [f["records"] for f in meta["files"] if f["name"].startswith("train")
            and not f["name"].endswith(".index")]
  assert counts == [10, 10, 10]
  # Every non-empty uncompressed record file has its offset index, listed and hashed.
  assert {f["name"] for f in meta["files"] if f["name"].endswith(".index")} == {
      f"{split}.tfrecord-0000{i}-of-00003.index" for split in ("train", "valid")
      for i in range(3)}
  _, single = run(tmp_path, "single", num_train=30, num_val=12)
  assert read_split(one, "train") == read_split(single, "train")   # shards in order = input order


@pytest.mark.parametrize("tokenizer", ["word", "bpe"])
def test_chunked_parallel_reading_gives_the_same_bytes(tmp_path, monkeypatch, tokenizer):
  # All pairs (num_train=0) are read in chunks by workers; tiny chunks make
  # many, each with its own vocab and counts, merged in input order.
  two_files = f"{MESSY},{PAIRS}"
  kw = dict(input_file=two_files, num_train=0, num_val=5, min_freq=1, tokenizer=tokenizer,
            vocab_size=60)
  s1, whole = run(tmp_path, "whole", num_workers=1, **kw)
  monkeypatch.setattr(mt_generator, "UNIT_BYTES", 40)
  s2, chunked = run(tmp_path, "chunked", num_workers=3, **kw)
  assert tree_bytes(whole) == tree_bytes(chunked)
  assert s1["counts"]["lines_read"] == s2["counts"]["lines_read"] == 61
  assert s1["counts"]["invalid_lines"] == s2["counts"]["invalid_lines"]
  # Counts over all pairs: a sequential count gives the same vocabulary.
  reader = preprocess.PairReader([MESSY, PAIRS])
  pairs = list(reader)
  if tokenizer == "word":
    assert open(os.path.join(whole, "src_vocab.txt"), encoding="utf-8").read().split("\n")[:-1] == \
        mt_vocab.word_vocab([p[0] for p in pairs], 1)


def test_gzip_round_trip(tmp_path):
  _, plain = run(tmp_path, "plain", num_train=30, num_val=12)
  _, gz = run(tmp_path, "gz", num_train=30, num_val=12, compression="GZIP")
  assert read_split(plain, "valid") == read_split(gz, "valid")
  assert tree_bytes(gz) == tree_bytes(run(tmp_path, "gz2", num_train=30, num_val=12,
                                          compression="gzip")[1])


def test_record_encoding_matches_core_encoder():
  from textrecords.wire.example_encoder import ExampleEncoder
  from mt_data import schema
  ids = ([5, 300, 3], [70000, 2, 3])
  assert records.encode_pair(*ids) == ExampleEncoder(schema.SCHEMA).encode(
      {"source_ids": ids[0], "target_ids": ids[1]})


# ----------------------------------------------------------------- bpe
def test_bpe_vocab_reserved_ids_and_determinism(tmp_path):
  summary, out = run(tmp_path, "a", num_train=40, num_val=10, tokenizer="bpe", vocab_size=120,
                     min_freq=1)
  _, out2 = run(tmp_path, "b", num_train=40, num_val=10, tokenizer="bpe", vocab_size=120,
                min_freq=1, num_workers=2)
  assert tree_bytes(out) == tree_bytes(out2)
  tokens = mt_vocab.load_tokens(os.path.join(out, "src_vocab.txt"))
  assert tokens[:4] == list(preprocess.RESERVED)
  assert len(tokens) <= 120 and summary["vocab"]["source"]["size"] == len(tokens)
  assert os.path.exists(os.path.join(out, "src_tokenizer.json"))
  src, tgt = mt_vocab.load_codecs(out)
  assert src.kind == "bpe"
  # Subwords decode back to the cleaned text of seen words.
  for s, t in read_split(out, "train")[:10]:
    assert s[-1] == preprocess.EOS_ID
  assert src.decode(src.encode("The cat is black.")) == "the cat is black ."
  assert tgt.decode(tgt.encode("Le chien est noir.")) == "le chien est noir ."


def test_skip_reason_is_parse_lines_without_tokenizing():
  """The counting pass classifies lines without tokenizing: always as parse_line."""
  lines = ["", " ", "\t", "a", "a\t", "\tb", "a\tb", "a\t\u00a0\u202f ", "\u00a0\tb", "A.\tB !\tC",
           "a\u2009\tb", "\u2009\t\u2009", " \t \t x", "É\tÉ", "!\t?", "a\t\u3000"]
  for path in (PAIRS, MESSY):
    lines += open(path, encoding="utf-8").read().split("\n")
  for line in lines:
    assert preprocess.skip_reason(line) == preprocess.parse_line(line)[1], repr(line)
