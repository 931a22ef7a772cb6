"""bert_data.stats: numbers checked against a tiny hand-computed case, and the plot."""

import json

from conftest import error_lines, run_cli

from bert_data import stats
from bert_data.instances import Instance
from bert_data.records import BertRecordEncoder
from textrecords.files import atomic_file
from textrecords.files import tfrecord

# ids: 0 [PAD], 1 [UNK], 2 [CLS], 3 [SEP], 4 [MASK], 5 a, 6 b, 7 c
TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c"]


def _write_records(path, v2_names=False):
  enc = BertRecordEncoder(10, 3, len(TOKENS), v2_names=v2_names)
  instances = [
      # [CLS] a [MASK] [SEP] c [SEP]: A = 4 positions, B = 2; b masked at 2.
      Instance([2, 5, 4, 3, 7, 3], 4, False, [2], [6]),
      # [CLS] a a [SEP] [UNK] b c [SEP]: A = 4, B = 4; nothing masked.
      Instance([2, 5, 5, 3, 1, 6, 7, 3], 4, True, [], []),
      # [CLS] [MASK] [SEP] [MASK] [SEP]: A = 3, B = 2; c at 1 and [UNK] at 3 masked.
      Instance([2, 4, 3, 4, 3], 3, True, [1, 3], [7, 1]),
  ]
  with atomic_file.AtomicWriter(str(path)) as w:
    for inst in instances:
      w.write(tfrecord.frame(enc.encode(inst)), 1)
    w.commit()


def test_summary_matches_hand_count(tmp_path):
  path = tmp_path / "tiny.tfrecord"
  _write_records(path)
  summary = stats.summarize(stats.collect(str(path)), TOKENS, "nsp")
  assert summary["instances"] == 3
  assert summary["tokens_per_instance"] == {
      "count": 3, "mean": 6.333, "min": 5, "max": 8, "histogram": {5: 1, 6: 1, 8: 1}}
  assert summary["segment_a"]["histogram"] == {3: 1, 4: 2}
  assert summary["segment_b"] == {"count": 3, "mean": 2.667, "min": 2, "max": 4,
                                  "histogram": {2: 2, 4: 1}}
  assert summary["masked_per_instance"]["histogram"] == {0: 1, 1: 1, 2: 1}
  assert summary["labels"] == {"task": "nsp", "0": 1, "1": 2}
  # Original tokens: [CLS]x3, [SEP]x6, a x3, b x2, c x3, [UNK] x2 = 19 tokens.
  assert summary["unk_share"] == round(2 / 19, 6)
  assert summary["top_tokens"][:3] == [["[SEP]", 6], ["[CLS]", 3], ["a", 3]]
  assert dict(map(tuple, summary["top_tokens"])) == {
      "[SEP]": 6, "[CLS]": 3, "a": 3, "c": 3, "[UNK]": 2, "b": 2}
  # Records with Model Garden's names give the same numbers.
  _write_records(tmp_path / "v2.tfrecord", v2_names=True)
  assert stats.summarize(stats.collect(str(tmp_path / "v2.tfrecord")), TOKENS, "nsp") == summary
  # Without a vocab: ids, no [UNK] share.
  plain = stats.summarize(stats.collect(str(path), max_records=2))
  assert plain["instances"] == 2 and "unk_share" not in plain
  assert plain["top_tokens"][0] == ["3", 4]


def test_cli_prints_json_and_saves_one_png(tmp_path):
  path = tmp_path / "tiny.tfrecord"
  _write_records(path)
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("\n".join(TOKENS) + "\n")
  png = tmp_path / "stats.png"
  r = run_cli("bert_data.stats", f"--input_file={path}", f"--vocab_file={vocab}",
              f"--plot={png}")
  assert r.returncode == 0, r.stderr
  summary = json.loads(r.stdout)
  assert summary["instances"] == 3 and summary["labels"]["1"] == 2
  assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
  r = run_cli("bert_data.stats", f"--input_file={tmp_path}/missing.tfrecord")
  assert r.returncode == 2 and len(error_lines(r.stderr)) == 1


def _run_in(cwd, *args):
  """`python -m bert_data.<tool> args` from folder `cwd` (this checkout's code)."""
  import os  # pylint: disable=import-outside-toplevel
  import subprocess  # pylint: disable=import-outside-toplevel
  import sys  # pylint: disable=import-outside-toplevel
  from conftest import REPO  # pylint: disable=import-outside-toplevel
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO)
  return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True,
                        timeout=300, env=env, cwd=str(cwd))


def test_stats_uses_only_the_records_vocab(tmp_path):
  # issue 21 item 7: the metadata's relative vocab.txt was looked up from the current
  # folder, and --vocab_file was not checked: other words with exit 0.
  import shutil  # pylint: disable=import-outside-toplevel
  from conftest import SAMPLE_TEXT, VOCAB  # pylint: disable=import-outside-toplevel
  data, elsewhere = tmp_path / "data", tmp_path / "elsewhere"
  data.mkdir()
  elsewhere.mkdir()
  shutil.copy(VOCAB, data / "vocab.txt")
  words = open(VOCAB, encoding="utf-8").read().splitlines()
  (elsewhere / "vocab.txt").write_text("\n".join(words[1:] + words[:1]) + "\n")
  r = _run_in(data, "bert_data.create", f"--input_file={SAMPLE_TEXT}", "--vocab_file=vocab.txt",
              "--output_file=out.tfrecord", "--dupe_factor=1", "--quiet")
  assert r.returncode == 0, r.stderr
  out = str(data / "out.tfrecord")
  files = lambda: {str(p): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}  # noqa: E731
  before = files()
  r = _run_in(data, "bert_data.stats", f"--input_file={out}", "--vocab_file=vocab.txt")
  assert r.returncode == 0, r.stderr
  expected = json.loads(r.stdout)
  assert expected["top_tokens"][0][0] in words
  for cwd in (tmp_path, elsewhere):  # elsewhere holds another vocab.txt
    r = _run_in(cwd, "bert_data.stats", f"--input_file={out}")
    assert r.returncode == 0 and error_lines(r.stderr) == [], r.stderr
    summary = json.loads(r.stdout)
    assert summary["vocab"] == str(data / "vocab.txt")
    assert summary["top_tokens"] == expected["top_tokens"]
  r = _run_in(elsewhere, "bert_data.stats", f"--input_file={out}", "--vocab_file=vocab.txt")
  lines = error_lines(r.stderr)
  assert r.returncode == 2 and r.stdout == "" and len(lines) == 1, r.stderr
  assert lines[0] == ("error: --vocab_file=vocab.txt is not the vocab the records were made "
                      f"with (sha256 differs from {out}.meta.json); pass the one given to "
                      "bert_data.create")
  assert files() == before  # nothing the user had changed
  with open(data / "vocab.txt", "a", encoding="utf-8") as f:
    f.write("extra\n")  # the vocab beside the records changed: ids, with a warning
  r = _run_in(tmp_path, "bert_data.stats", f"--input_file={out}")
  assert r.returncode == 0, r.stderr
  assert error_lines(r.stderr) == [
      f"warning: {data / 'vocab.txt'} (named by {out}.meta.json) is not the vocab the "
      "records were made with (sha256 differs): token ids shown; pass --vocab_file"]
  summary = json.loads(r.stdout)
  assert "vocab" not in summary and summary["top_tokens"][0][0].isdigit()
  # Made from another folder: found where create found it (the fingerprint's path).
  elsewhere_out = str(elsewhere / "out2.tfrecord")
  r = _run_in(tmp_path, "bert_data.create", f"--input_file={SAMPLE_TEXT}",
              "--vocab_file=elsewhere/vocab.txt", f"--output_file={elsewhere_out}",
              "--dupe_factor=1", "--quiet")
  assert r.returncode == 0, r.stderr
  r = _run_in(data, "bert_data.stats", f"--input_file={elsewhere_out}")
  assert r.returncode == 0 and error_lines(r.stderr) == [], r.stderr
  assert json.loads(r.stdout)["vocab"] == str(elsewhere / "vocab.txt")
  (elsewhere / "vocab.txt").rename(elsewhere / "moved.txt")
  r = _run_in(data, "bert_data.stats", f"--input_file={elsewhere_out}")
  assert r.returncode == 0 and error_lines(r.stderr) == [
      f"warning: elsewhere/vocab.txt, the vocab {elsewhere_out}.meta.json names, is not "
      "found: token ids shown; pass --vocab_file"], r.stderr
