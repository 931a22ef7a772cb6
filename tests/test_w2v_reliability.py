"""w2v_data failure handling: the CLI as a subprocess (one-line errors, nothing
left behind, --overwrite/--resume, SIGKILL + resume) and make_dataset's checks."""

import hashlib
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from textrecords.errors import UserError
from w2v_data import generator
from w2v_data import sampling
from w2v_data.config import W2vConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "tests", "testdata", "w2v_tiny.txt")
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT)
SMALL = ["--min_freq=2", "--subsample_t=1e-2", "--max_window_size=3", "--num_noise_words=3",
         "--num_workers=1"]


def _noise(line: str) -> bool:
  """TF/absl log lines that are not ours."""
  return (line.startswith(("WARNING: All log messages", "I0000", "W0000", "E0000"))
          or "oneDNN" in line)


def run_cli(*args, check=None):
  p = subprocess.run([sys.executable, "-m", "w2v_data.create", *args], cwd=ROOT, env=ENV,
                     capture_output=True, text=True, timeout=120)
  lines = [l for l in p.stderr.splitlines() if l.strip() and not _noise(l)]
  if check is not None:
    assert p.returncode == check, p.stderr
  return p.returncode, lines


def visible(d):
  return sorted(n for n in os.listdir(d) if not n.startswith(".")) if os.path.isdir(d) else []


def assert_one_line_error(args, match, out_dir):
  rc, lines = run_cli(*args, "--quiet")
  assert rc != 0
  assert len(lines) == 1 and lines[0].startswith("error:"), lines
  assert match in lines[0], lines
  assert "Traceback" not in "\n".join(lines)
  assert visible(out_dir) == [], visible(out_dir)


def test_bad_inputs_give_one_line_and_no_output(tmp_path):
  out = str(tmp_path / "out")
  o = f"--output_dir={out}"
  assert_one_line_error([f"--input_file={tmp_path}/missing.txt", o], "missing.txt", out)
  assert_one_line_error([f"--input_file={tmp_path}/nothing*.txt", o],
                        "no file matches", out)
  (tmp_path / "empty.txt").write_bytes(b"")
  assert_one_line_error([f"--input_file={tmp_path}/empty.txt", o], "empty.txt: empty file", out)
  (tmp_path / "bad.txt").write_bytes(b"a b c\nd \xff e\n")
  assert_one_line_error([f"--input_file={tmp_path}/bad.txt", o], "bad.txt:2: invalid UTF-8", out)
  (tmp_path / "bin.dat").write_bytes(b"\x00\x01\x02binary" * 50)
  assert_one_line_error([f"--input_file={tmp_path}/bin.dat", o], "binary file", out)
  assert_one_line_error([f"--input_file={TINY}", o, "--min_freq=100000"],
                        "--min_freq=100000 leaves an empty vocabulary", out)
  assert_one_line_error(["--input_file=", o], "--input_file is required", out)
  # --on_decode_error lets the invalid line through.
  run_cli(f"--input_file={tmp_path}/bad.txt", o, "--min_freq=1", "--quiet",
          "--on_decode_error=replace", check=0)
  assert visible(out) == ["meta.json", "train.tfrecord", "train.tfrecord.index", "vocab.txt"]
  # d2l's subsampling drops every token of so small a text: no records, and
  # an empty record file needs no index.
  run_cli(f"--input_file={tmp_path}/bad.txt", o, "--min_freq=1", "--quiet",
          "--on_decode_error=replace", "--subsample_t=1e-4", "--overwrite", check=0)
  assert visible(out) == ["meta.json", "train.tfrecord", "vocab.txt"]


@pytest.mark.parametrize("flag,match", [
    ("--max_window_size=0", "--max_window_size=0: must be in [1, 1000]"),
    ("--num_noise_words=-1", "--num_noise_words=-1: must be in [0, 1000]"),
    ("--min_freq=0", "--min_freq=0: must be in [1,"),
    ("--subsample_t=0", "--subsample_t=0.0: must be in (0, 1]"),
    ("--subsample_t=1.5", "--subsample_t=1.5: must be in (0, 1]"),
    ("--subsample_formula=cube", "--subsample_formula='cube'"),
    ("--num_shards=0", "--num_shards=0: must be in [1, 100000]"),
    ("--num_workers=0", "--num_workers=0: must be in [1, 1024]"),
    ("--random_seed=-2", "--random_seed=-2"),
    ("--layout=page", "--layout='page'"),
    ("--compression=zip", "--compression='zip'"),
    ("--max_window_size=abc", "max_window_size"),
])
def test_flag_ranges_checked_before_work(tmp_path, flag, match):
  out = str(tmp_path / "out")
  # The input does not exist: range errors must come first.
  assert_one_line_error([f"--input_file={tmp_path}/missing.txt", f"--output_dir={out}", flag],
                        match, out)
  assert not os.path.exists(out)


def test_existing_output_overwrite_and_resume(tmp_path):
  out = str(tmp_path / "out")
  args = [f"--input_file={TINY}", f"--output_dir={out}", *SMALL, "--quiet"]
  run_cli(*args, check=0)
  before = open(os.path.join(out, "meta.json"), "rb").read()
  rc, lines = run_cli(*args, "--random_seed=9")
  assert rc != 0 and len(lines) == 1 and "pass --overwrite" in lines[0]
  assert open(os.path.join(out, "meta.json"), "rb").read() == before
  rc, lines = run_cli(*args, "--random_seed=9", "--resume")
  assert rc != 0 and len(lines) == 1 and "pass --overwrite" in lines[0]
  rc, lines = run_cli(*[a for a in args if a != "--quiet"], "--resume", check=0)
  assert any("already complete" in l for l in lines)
  run_cli(*args, "--random_seed=9", "--overwrite", check=0)
  assert json.load(open(os.path.join(out, "meta.json")))["random_seed"] == 9
  assert visible(out) == ["meta.json", "train.tfrecord", "train.tfrecord.index", "vocab.txt"]


def test_unwritable_output_dir(tmp_path):
  blocker = tmp_path / "file.txt"
  blocker.write_text("x")
  rc, lines = run_cli(f"--input_file={TINY}", f"--output_dir={blocker}/out", "--quiet")
  assert rc != 0 and len(lines) == 1 and lines[0].startswith("error: cannot create output")


def _sha_tree(d):
  return {n: hashlib.sha256(open(os.path.join(d, n), "rb").read()).hexdigest()
          for n in visible(d)}


def test_sigkill_then_resume_is_byte_identical(tmp_path):
  rng = np.random.default_rng(0)
  words = np.array([f"w{i}" for i in range(3000)])
  ids = np.minimum(rng.zipf(1.3, size=(24000, 20)), 3000) - 1
  corpus = tmp_path / "big.txt"
  corpus.write_text("\n".join(" ".join(row) for row in words[ids]) + "\n")
  common = [f"--input_file={corpus}", "--min_freq=3", "--num_shards=8", "--num_workers=1"]
  ref = str(tmp_path / "ref")
  run_cli(*common, f"--output_dir={ref}", "--quiet", check=0)

  out = str(tmp_path / "out")
  proc = subprocess.Popen([sys.executable, "-m", "w2v_data.create", *common, f"--output_dir={out}",
                           "--quiet"], cwd=ROOT, env=ENV, stderr=subprocess.DEVNULL)
  progress = os.path.join(out, ".meta.json.progress")
  deadline = time.time() + 60
  while time.time() < deadline:
    try:
      with open(progress, "rb") as f:
        if f.read().count(b"train.tfrecord-") >= 2:   # vocab + one shard (+ its index)
          break
    except OSError:
      pass
    assert proc.poll() is None, "the run ended before it could be killed"
    time.sleep(0.002)
  proc.send_signal(signal.SIGKILL)
  proc.wait()
  assert visible(out) == []   # nothing looks complete
  rc, lines = run_cli(*common, f"--output_dir={out}", "--resume", check=0)
  kept = [l for l in lines if "resume: keeping" in l]
  assert kept and not kept[0].split("keeping ")[1].startswith("0 "), lines
  assert _sha_tree(out) == _sha_tree(ref)
  assert len(_sha_tree(ref)) == 18   # 8 shards, their offset indexes, vocab, metadata
  assert sorted(os.listdir(out)) == visible(out)   # no hidden leftovers


# --- make_dataset refuses bad data ---------------------------------------------------------

@pytest.fixture()
def two_shards(tmp_path):
  d = str(tmp_path / "ds")
  generator.create(W2vConfig(input_file=TINY, output_dir=d, min_freq=2, subsample_t=3e-2,
                            max_window_size=2, num_noise_words=2, num_workers=1, num_shards=2))
  return d


def _count(ds):
  return sum(int(y.shape[0]) for _, y, _ in ds)


def test_make_dataset_refuses_corrupt_files(two_shards):
  pytest.importorskip("tensorflow")
  import w2v_data  # pylint: disable=import-outside-toplevel
  meta = json.load(open(os.path.join(two_shards, "meta.json")))
  shard0 = os.path.join(two_shards, "train.tfrecord-00000-of-00002")
  data = bytearray(open(shard0, "rb").read())
  data[len(data) // 2] ^= 0x10
  open(shard0, "wb").write(bytes(data))
  with pytest.raises(UserError, match="train.tfrecord-00000-of-00002: sha256 differs"):
    w2v_data.make_dataset(two_shards, 8)
  logged = []
  ds = w2v_data.make_dataset(two_shards, 8, training=False, skip_corrupt=True, log=logged.append)
  assert "00000-of-00002" in logged[0]
  assert 0 < _count(ds) < meta["counts"]["centers"]
  open(shard0, "wb").write(bytes(data[:-7]))   # truncated
  with pytest.raises(UserError, match="00000-of-00002 has .* bytes, metadata says"):
    w2v_data.make_dataset(two_shards, 8)
  os.remove(shard0)
  with pytest.raises(UserError, match="00000-of-00002 is missing"):
    w2v_data.make_dataset(two_shards, 8)


def test_make_dataset_refuses_bad_metadata(two_shards, tmp_path):
  import w2v_data  # pylint: disable=import-outside-toplevel
  with pytest.raises(UserError, match="nowhere not found"):
    w2v_data.make_dataset(str(tmp_path / "nowhere"), 8)
  meta_path = os.path.join(two_shards, "meta.json")
  meta = json.load(open(meta_path))
  meta["package"] = "bert_data"
  json.dump(meta, open(meta_path, "w"))
  with pytest.raises(UserError, match="a bert_data dataset; read it with bert_data.make_dataset"):
    w2v_data.make_dataset(two_shards, 8)
  meta["package"] = "w2v_data"
  meta["schema"] = meta["schema"][:2]
  json.dump(meta, open(meta_path, "w"))
  with pytest.raises(UserError, match="another schema"):
    w2v_data.make_dataset(two_shards, 8)


# --- property test: windows and noise words --------------------------------------------

@settings(max_examples=40, deadline=None)
@given(sentences=st.lists(st.lists(st.integers(1, 9), max_size=12), min_size=1, max_size=8),
       width=st.integers(1, 4), k=st.integers(0, 4), seed=st.integers(0, 2**63 - 1),
       t=st.sampled_from([1e-3, 0.05, 1.0]))
def test_property_windows_and_negatives(sentences, width, k, seed, t):
  counts = np.r_[0, np.arange(1, 10) * 7]
  s = sampling.SkipGramSampler.build(counts, subsample_t=t, max_window_size=width,
                                     num_noise_words=k, seed=seed)
  ids = np.array([i for sent in sentences for i in sent], dtype=np.int32)
  lengths = np.array([len(sent) for sent in sentences])
  b = s.sample(ids, lengths, np.arange(len(sentences)))
  cs = np.r_[0, np.cumsum(b.num_contexts)]
  assert len(b.negatives) == k * cs[-1]
  for sent_index in np.unique(b.sentence):
    rows = np.flatnonzero(b.sentence == sent_index)
    toks = b.centers[rows].tolist()
    it = iter(sentences[sent_index])
    assert len(toks) >= 2 and all(x in it for x in toks)
    for i, r in enumerate(rows):
      ctx = b.contexts[cs[r]:cs[r + 1]].tolist()
      assert any(ctx == toks[max(0, i - w):i] + toks[i + 1:i + w + 1] for w in range(1, width + 1))
      neg = b.negatives[k * cs[r]:k * cs[r + 1]].tolist()
      assert all(1 <= x <= 9 and x not in ctx for x in neg)
  assert set(np.unique(b.sentence)) == {i for i in range(len(sentences))
                                        if (b.sentence == i).sum() >= 2}
