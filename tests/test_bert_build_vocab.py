"""bert_data.build_vocab: BERT-format WordPiece vocabs, deterministic, streamed."""

import collections
import hashlib
import json
import os

from conftest import SAMPLE_TEXT, VOCAB, error_lines, run_cli

from bert_data import build_vocab
from bert_data import sentencepiece_tokenizer as spt
from textrecords.files import storage
from bert_data.tokenizer import WordPieceTokenizer, read_vocab_lines

SAMPLE_CORPUS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                             "bert_data", "sample", "sample_corpus.txt")


def test_reserved_lines_are_the_reference_vocabs():
  reference = read_vocab_lines(VOCAB)
  reserved = build_vocab.reserved_tokens()
  assert len(reserved) == 999
  assert reserved == reference[:999]
  assert reference[999] == "!"  # the first piece follows them
  assert build_vocab.reserved_tokens(0) == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def test_train_wordpiece_from_counts_learns_pieces_of_frequent_words():
  counts = collections.Counter({"lowest": 9, "lower": 7, "low": 5, "newest": 6, "widest": 3})
  pieces = build_vocab.train_wordpiece(counts, 40, min_frequency=2)
  chars = sorted(set("".join(counts)))
  assert pieces[:len(chars)] == chars
  assert pieces[len(chars):2 * len(chars)] == ["##" + c for c in chars]
  assert len(pieces) == len(set(pieces)) <= 40
  # Frequent words become whole pieces, more frequent ones first.
  assert {"low", "lower", "lowest", "newest"} <= set(pieces)
  assert pieces.index("lowest") < pieces.index("widest")
  assert pieces == build_vocab.train_wordpiece(counts, 40, min_frequency=2)
  # A small budget keeps the most frequent characters (at most a quarter of
  # it: e 31, w 30, l 21, o 21, s 18, t 18 of 24 // 4 = 6) and fewer merges.
  small = build_vocab.build_wordpiece_vocab(counts, 5 + 24, num_unused=0)
  assert small[5:17] == list("elostw") + ["##" + c for c in "elostw"]
  assert len(small) <= 29 and "widest" not in small and "lowest" in small


def test_cli_format_determinism_and_worker_count(tmp_path):
  outs = []
  for workers in (1, 2):
    out = str(tmp_path / f"vocab{workers}.txt")
    r = run_cli("bert_data.build_vocab", f"--input_file={SAMPLE_CORPUS}", f"--output_file={out}",
                "--vocab_size=1400", f"--num_workers={workers}")
    assert r.returncode == 0, r.stderr
    assert "distinct words" in r.stderr  # progress lines
    outs.append(open(out, "rb").read())
  assert outs[0] == outs[1]
  lines = outs[0].decode("utf-8").split("\n")
  assert lines[-1] == "" and "\r" not in outs[0].decode()
  lines = lines[:-1]
  assert len(lines) == 1400 and len(set(lines)) == 1400
  assert lines[:999] == build_vocab.reserved_tokens()
  pieces = lines[999:]
  assert any(p.startswith("##") and len(p) > 3 for p in pieces)
  # The tokenizer loads it; the corpus it was built from has no unknown pieces.
  tok = WordPieceTokenizer(str(tmp_path / "vocab1.txt"))
  unk = tok.token_to_id("[UNK]")
  assert unk == 100 and tok.token_to_id("[MASK]") == 103
  with open(SAMPLE_CORPUS, encoding="utf-8") as f:
    ids = [i for line in f for i in tok.encode(line)]
  assert len(ids) > 5000 and ids.count(unk) == 0
  # A corpus it was not built from (the test text) is mostly known pieces.
  with open(SAMPLE_TEXT, encoding="utf-8") as f:
    other = [i for line in f for i in tok.encode(line)]
  assert other.count(unk) < 0.01 * len(other)


def test_cli_errors_leave_nothing(tmp_path):
  out = tmp_path / "v.txt"
  r = run_cli("bert_data.build_vocab", f"--input_file={SAMPLE_TEXT}", f"--output_file={out}",
              "--vocab_size=999")
  assert r.returncode == 2 and len(error_lines(r.stderr)) == 1
  assert "--vocab_size=999" in r.stderr and "reserved" in r.stderr
  assert not out.exists() and os.listdir(tmp_path) == []
  out.write_text("keep me\n")
  r = run_cli("bert_data.build_vocab", f"--input_file={SAMPLE_TEXT}", f"--output_file={out}",
              "--vocab_size=1100")
  assert r.returncode == 2 and "--overwrite" in r.stderr
  assert out.read_text() == "keep me\n"
  r = run_cli("bert_data.build_vocab", f"--input_file={tmp_path}/none.txt",
              f"--output_file={tmp_path}/w.txt")
  assert r.returncode == 2 and len(error_lines(r.stderr)) == 1


def _vocab(*args):
  size = [] if any(a.startswith("--vocab_size=") for a in args) else ["--vocab_size=1100"]
  return run_cli("bert_data.build_vocab", f"--input_file={SAMPLE_CORPUS}", *size, *args)


def test_url_and_new_folder_outputs_are_written_summary_json_as_the_generators(tmp_path):
  """Issue 21 item 4: file:// and memory:// outputs, missing parent folders."""
  want = None
  for out, shown in ((f"file://{tmp_path}/f.txt", f"{tmp_path}/f.txt"),
                     (str(tmp_path / "newdir4" / "sub" / "v.txt"), None),
                     ("memory://b/v.txt", "memory://b/v.txt")):
    summary = tmp_path / "s.json"
    r = _vocab(f"--output_file={out}", f"--summary_json={summary}")
    assert r.returncode == 0, r.stderr
    assert error_lines(r.stderr)[-1].endswith(f"-> {shown or out}"), r.stderr
    doc = json.loads(summary.read_text())
    counts = doc["counts"]  # the generators' shape (cli.summary)
    assert doc["package"] == "bert_data" and doc["tool"] == "build_vocab"
    assert counts["entries"] == doc["vocab_size"] == 1100 and doc["kind"] == "wordpiece"
    assert doc["input_files"] == [SAMPLE_CORPUS] and doc["outputs"] == [shown or out]
    assert doc["decode_errors"] == {"replaced_lines": 0, "skipped_lines": 0}
    assert counts["words"] > counts["distinct_words"] > 1000
    [written] = doc["files"]
    if not out.startswith("memory"):
      data = open(shown or out, "rb").read()
      assert written == {"name": os.path.basename(shown or out), "bytes": len(data),
                         "sha256": hashlib.sha256(data).hexdigest()}
      assert want in (None, data)
      want = data
  assert sorted(os.listdir(tmp_path / "newdir4" / "sub")) == ["v.txt"]
  # memory:// lives in the process: the same bytes through the storage layer.
  storage.write_file("memory://b/w.txt", want)
  assert storage.read_bytes("memory://b/w.txt") == want
  assert not [p for p in storage.list_dir("memory://b") if ".tmp-" in p]


def test_a_bad_destination_fails_before_any_reading_and_changes_nothing(tmp_path):
  """Issue 21 item 4: the destination is checked first, not after training."""
  (tmp_path / "adir").mkdir()
  (tmp_path / "afile").write_text("keep\n")
  (tmp_path / "v.txt").write_text("keep me\n")
  before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
  for out, words in ((tmp_path / "adir", "is a folder"),
                     (f"{tmp_path}/adir/", "is a folder"),
                     (tmp_path / "afile" / "v.txt", "afile is not a folder"),
                     (tmp_path / "v.txt", "pass --overwrite"),
                     ("xyz://b/v.txt", "unknown storage scheme")):
    r = _vocab(f"--output_file={out}")
    lines = error_lines(r.stderr)
    assert r.returncode == 2 and len(lines) == 1 and words in lines[0], r.stderr
    assert lines[0].startswith(f"error: --output_file={out}")
  assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
  assert sorted(os.listdir(tmp_path)) == ["adir", "afile", "v.txt"]
  assert os.listdir(tmp_path / "adir") == []


def test_sentencepiece_vocab_size_above_the_input_is_capped_with_a_note(tmp_path):
  """Issue 21 item 4: not SentencePiece's raw `INTERNAL: ... <= N`."""
  out = tmp_path / "big.model"
  r = _vocab(f"--output_file={out}", "--kind=sentencepiece", "--vocab_size=30000")
  assert r.returncode == 0, r.stderr
  assert "INTERNAL" not in r.stderr and "trainer_interface" not in r.stderr
  last = error_lines(r.stderr)[-1]
  size = spt.SentencePieceTokenizer(str(out)).vocab_size
  assert 100 < size < 30000
  assert last == (f"build_vocab: {size:,} sentencepiece entries -> {out} (asked for 30,000: "
                  "the input has no more pieces to learn)")
  # The same model as asking for that many.
  assert out.read_bytes() == build_vocab.build_sentencepiece_model([SAMPLE_CORPUS], size, True)


def test_min_freq_is_the_flag_min_frequency_a_deprecated_alias(tmp_path):
  """Issue 21 item 14: one name across packages; the old one still works."""
  outs = {}
  for flag in ("--min_freq=50", "--min_frequency=50", "--min_freq=2"):
    out = tmp_path / f"{flag[2:].replace('=', '')}.txt"
    r = _vocab(f"--output_file={out}", "--quiet", flag, "--vocab_size=1400")
    assert r.returncode == 0, r.stderr
    assert error_lines(r.stderr) == (["warning: --min_frequency is deprecated; use --min_freq"]
                                     if "frequency" in flag else [])
    outs[flag] = out.read_bytes()
  assert outs["--min_freq=50"] == outs["--min_frequency=50"] != outs["--min_freq=2"]
