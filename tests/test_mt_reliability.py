"""mt_data failure handling: one-line CLI errors, no partial output, resume, corrupt files."""

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from textrecords.datasets import metadata
from textrecords.errors import UserError

from mt_data import config as mt_config
from mt_data import generator as mt_generator
from mt_data import preprocess

HERE = os.path.dirname(os.path.abspath(__file__))
PAIRS = os.path.join(HERE, "testdata", "mt_pairs.txt")
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
NOISE = ("WARNING: All log messages", "I0000", "W0000", "E0000")


def cli(*args, tool="mt_data.create", timeout=120):
  p = subprocess.run([sys.executable, "-m", tool, *args], capture_output=True, text=True,
                     env=ENV, timeout=timeout, cwd=HERE)
  return p.returncode, p.stdout, p.stderr


def assert_one_line_error(rc, stderr, *needles):
  lines = [l for l in stderr.splitlines() if l.strip() and not l.startswith(NOISE)]
  assert rc != 0, stderr
  assert "Traceback" not in stderr, stderr
  assert len(lines) == 1 and lines[0].startswith("error:"), stderr
  for n in needles:
    assert n in lines[0], (n, lines[0])
  return lines[0]


def visible(d):
  return sorted(n for n in os.listdir(d) if not n.startswith(".")) if os.path.isdir(d) else []


def write(path, data):
  with open(path, "wb") as f:
    f.write(data)
  return str(path)


# ----------------------------------------------------------------- bad input via the CLI
@pytest.mark.parametrize("given, expected", [
    (lambda d: f"{d}/nope.txt", ("--input_file", "nope.txt")),
    (lambda d: f"{d}/*.tsv", ("no file matches",)),
    (lambda d: write(d / "e.txt", b""), ("no valid pairs", "e.txt")),
], ids=["missing_file", "glob_matching_nothing", "empty_file"])
def test_unusable_input_file(tmp_path, given, expected):
  out = tmp_path / "out"
  rc, _, err = cli(f"--input_file={given(tmp_path)}", f"--output_dir={out}")
  assert_one_line_error(rc, err, *expected)
  assert not out.exists()


def test_no_valid_pairs(tmp_path):
  out = tmp_path / "out"
  f = write(tmp_path / "n.txt", b"one column\nHi.\t\n\n\tSalut.\n")
  rc, _, err = cli(f"--input_file={f}", f"--output_dir={out}")
  line = assert_one_line_error(rc, err, "no valid pairs", "4 lines read")
  assert '"fewer_than_2_columns": 1' in line and '"empty_source_or_target": 2' in line
  assert not out.exists()


def test_invalid_utf8_names_file_and_line(tmp_path):
  out = tmp_path / "out"
  f = write(tmp_path / "bad.txt", b"Go.\tVa !\nHi.\tSalut.\nCaf\xe9.\tCaf\xe9.\nRun!\tCours !\n")
  rc, _, err = cli(f"--input_file={f}", f"--output_dir={out}")
  assert_one_line_error(rc, err, "bad.txt:3:", "--on_decode_error")
  assert not out.exists()
  summary = tmp_path / "summary.json"
  rc, stdout, _ = cli(f"--input_file={f}", f"--output_dir={out}", "--on_decode_error=skip_line",
                      "--quiet", "--min_freq=1", f"--summary_json={summary}")
  assert rc == 0 and stdout == ""
  assert json.loads(summary.read_text())["splits"]["train"]["pairs"] == 3
  rc, stdout, _ = cli(f"--input_file={f}", f"--output_dir={out}", "--on_decode_error=replace",
                      "--quiet", "--overwrite", f"--summary_json={summary}")
  assert rc == 0 and json.loads(summary.read_text())["splits"]["train"]["pairs"] == 4


def test_binary_file(tmp_path):
  out = tmp_path / "out"
  f = write(tmp_path / "b.bin", bytes(range(256)) * 8)
  rc, _, err = cli(f"--input_file={f}", f"--output_dir={out}")
  assert_one_line_error(rc, err, "b.bin", "binary")
  assert not out.exists()


@pytest.mark.parametrize("flag, needle", [
    ("--num_train=-1", "--num_train=-1: must be in [0,"),
    ("--num_shards=0", "--num_shards=0: must be in [1,"),
    ("--tokenizer=sentencepiece", "tokenizer"),
])
def test_bad_flags_cli(tmp_path, flag, needle):
  out = tmp_path / "out"
  rc, _, err = cli(f"--input_file={PAIRS}", f"--output_dir={out}", flag)
  assert_one_line_error(rc, err, needle)
  assert not out.exists()


@pytest.mark.parametrize("field, value, needle", [
    ("num_train", -1, "--num_train=-1: must be in [0, 1000000000]"),
    ("num_val", -2, "--num_val=-2"),
    ("min_freq", 0, "--min_freq=0: must be in [1,"),
    ("vocab_size", 3, "--vocab_size=3: must be in [16,"),
    ("num_workers", 0, "--num_workers=0"),
    ("num_shards", 0, "--num_shards=0"),
    ("num_shards", 10 ** 6, "--num_shards=1000000"),
    ("compression", "ZIP", "--compression='ZIP'"),
    ("tokenizer", "chars", "--tokenizer='chars'"),
    ("on_decode_error", "ignore", "--on_decode_error='ignore'"),
    ("input_file", "", "--input_file is required"),
    ("output_dir", " ", "--output_dir is required"),
])
def test_every_setting_range_checked_before_work(tmp_path, field, value, needle):
  kw = {"input_file": "/nonexistent/never-read.txt", "output_dir": str(tmp_path / "o")}
  kw[field] = value
  with pytest.raises(UserError) as e:
    mt_generator.create(mt_config.MTConfig(**kw), log=lambda m: None)
  assert needle in str(e.value) and "\n" not in str(e.value)
  assert not (tmp_path / "o").exists()


def test_existing_output_needs_overwrite(tmp_path):
  out = tmp_path / "out"
  args = (f"--input_file={PAIRS}", f"--output_dir={out}", "--quiet", "--num_train=30",
          "--num_val=12")
  assert cli(*args)[0] == 0
  before = {n: (out / n).read_bytes() for n in visible(out)}
  rc, _, err = cli(*args, "--num_shards=2")
  assert_one_line_error(rc, err, "meta.json exists", "--overwrite")
  assert {n: (out / n).read_bytes() for n in visible(out)} == before
  rc, _, _ = cli(*args, "--num_shards=2", "--overwrite")
  assert rc == 0
  assert "train.tfrecord" not in visible(out)               # stale single file removed
  assert "train.tfrecord-00001-of-00002" in visible(out)
  assert not [n for n in os.listdir(out) if n.startswith(".")]


def test_unwritable_output_dir(tmp_path):
  blocker = write(tmp_path / "file", b"x")
  rc, _, err = cli(f"--input_file={PAIRS}", f"--output_dir={blocker}/sub")
  assert_one_line_error(rc, err, "--output_dir", "not a folder")
  if os.geteuid() != 0:   # root ignores permission bits
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
      rc, _, err = cli(f"--input_file={PAIRS}", f"--output_dir={ro}/sub")
      assert_one_line_error(rc, err, "not writable")
    finally:
      ro.chmod(0o755)


def test_unexpected_argument(tmp_path):
  rc, _, err = cli(f"--input_file={PAIRS}", f"--output_dir={tmp_path}/o", "extra")
  assert_one_line_error(rc, err, "unexpected arguments")


# ----------------------------------------------------------------- kill and resume
def big_corpus(path, n):
  rng = random.Random(7)
  en = [f"w{i}" for i in range(3000)]
  fr = [f"m{i}" for i in range(4000)]
  with open(path, "w", encoding="utf-8") as f:
    for _ in range(n):
      s = " ".join(rng.choice(en) for _ in range(rng.randint(2, 12)))
      t = " ".join(rng.choice(fr) for _ in range(rng.randint(2, 14)))
      f.write(f"{s.capitalize()}.\t{t.capitalize()} !\n")
  return str(path)


def digests(d):
  return {n: hashlib.sha256((d / n).read_bytes()).hexdigest() for n in visible(d)}


def test_sigkill_then_resume_is_byte_identical(tmp_path):
  corpus = big_corpus(tmp_path / "big.txt", 30000)
  flags = [f"--input_file={corpus}", "--num_train=0", "--num_val=1000", "--num_shards=100",
           "--quiet"]
  killed = tmp_path / "killed"
  proc = subprocess.Popen([sys.executable, "-m", "mt_data.create", *flags,
                           f"--output_dir={killed}", "--num_workers=1"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV, cwd=HERE)
  deadline = time.monotonic() + 60
  done = 0
  while time.monotonic() < deadline and proc.poll() is None:
    if killed.is_dir():
      done = sum(1 for n in os.listdir(killed) if n.startswith(".train")
                 and n.endswith(".done") and not n.endswith(".index.done"))
      if done >= 10:
        break
    time.sleep(0.002)
  proc.send_signal(signal.SIGKILL)
  proc.wait()
  assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed mid-way"
  assert done >= 10
  assert visible(killed) == []                              # nothing looks complete
  summary = tmp_path / "summary.json"
  rc, stdout, err = cli(*flags, f"--output_dir={killed}", "--resume", "--num_workers=2",
                        f"--summary_json={summary}")
  assert rc == 0, err
  assert json.loads(summary.read_text())["files_kept_from_earlier_run"] >= 10
  reference = tmp_path / "reference"
  rc, _, err = cli(*flags, f"--output_dir={reference}", "--num_workers=1")
  assert rc == 0, err
  assert digests(killed) == digests(reference)
  assert len(visible(reference)) == 2 * 2 * 100 + 3   # shards, their offset indexes, 3 more
  assert [n for n in os.listdir(killed) if n.startswith(".")] == []


def test_resume_with_other_flags_refuses_to_replace_complete_output(tmp_path):
  out = tmp_path / "o"
  cfg = dict(input_file=PAIRS, output_dir=str(out), num_train=30, num_val=12, num_shards=2)
  mt_generator.create(mt_config.MTConfig(**cfg), log=lambda m: None)
  before = (out / "meta.json").read_bytes()
  with pytest.raises(UserError, match="--overwrite"):
    mt_generator.create(mt_config.MTConfig(**dict(cfg, min_freq=1, resume=True)),
                        log=lambda m: None)
  assert (out / "meta.json").read_bytes() == before
  s = mt_generator.create(mt_config.MTConfig(**dict(cfg, min_freq=1, overwrite=True)),
                          log=lambda m: None)
  assert s.files_kept == 0 and not s.already_complete
  assert json.loads((out / "meta.json").read_text())["flags"]["min_freq"] == 1


# ----------------------------------------------------------------- make_dataset refusals
@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
  d = tmp_path_factory.mktemp("mtrel") / "out"
  mt_generator.create(mt_config.MTConfig(input_file=PAIRS, output_dir=str(d), num_train=30,
                                         num_val=12, num_shards=3), log=lambda m: None)
  return d


def copy_dir(src, dst):
  dst.mkdir()
  for n in os.listdir(src):
    (dst / n).write_bytes((src / n).read_bytes())
  return dst


def n_rows(ds):
  return sum(int(y.shape[0]) for _, y, _ in ds)


@pytest.mark.parametrize("damage", ["truncate", "bitflip"])
def test_corrupt_record_file(sharded, tmp_path, damage):
  pytest.importorskip("tensorflow")
  import mt_data  # pylint: disable=import-outside-toplevel
  d = copy_dir(sharded, tmp_path / "c")
  victim = d / "train.tfrecord-00001-of-00003"
  data = bytearray(victim.read_bytes())
  if damage == "truncate":
    data = data[:-7]
  else:
    data[len(data) // 2] ^= 0x10
  victim.write_bytes(bytes(data))
  with pytest.raises(UserError, match="train.tfrecord-00001-of-00003") as e:
    mt_data.make_dataset(str(d), 8, split="train")
  assert "\n" not in str(e.value)
  logged = []
  # drop_remainder=False: every record of the two intact files (training drops
  # the last partial batch by default).
  ds = mt_data.make_dataset(str(d), 8, split="train", skip_corrupt=True, log=logged.append,
                            drop_remainder=False)
  assert n_rows(ds) == 20 and "train.tfrecord-00001-of-00003" in logged[0]
  if damage == "bitflip":   # same size: only the checksum notices; TF's record CRC then
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    with pytest.raises(tf.errors.DataLossError):
      n_rows(mt_data.make_dataset(str(d), 8, split="train", verify="size", training=False))


def test_missing_metadata_and_missing_file(sharded, tmp_path):
  pytest.importorskip("tensorflow")
  import mt_data  # pylint: disable=import-outside-toplevel
  d = copy_dir(sharded, tmp_path / "m")
  (d / "valid.tfrecord-00002-of-00003").unlink()
  with pytest.raises(UserError, match="valid.tfrecord-00002-of-00003 is missing"):
    mt_data.make_dataset(str(d), 8, split="valid")
  (d / "meta.json").unlink()
  with pytest.raises(UserError, match="meta.json not found"):
    mt_data.make_dataset(str(d), 8, split="train")
  with pytest.raises(UserError, match="not found"):
    mt_data.make_dataset(str(tmp_path / "nowhere"), 8, split="train")


@pytest.mark.parametrize("package", ["w2v_data", "bert_data"])
def test_other_package_metadata_refused(tmp_path, package):
  pytest.importorskip("tensorflow")
  import mt_data  # pylint: disable=import-outside-toplevel
  meta = metadata.base_meta(package)
  meta["files"] = []
  metadata.write(str(tmp_path / "meta.json"), meta)
  with pytest.raises(UserError, match=f"a {package} dataset; read it with") as e:
    mt_data.make_dataset(str(tmp_path), 8, split="train")
  assert f"{package}.make_dataset" in str(e.value)


def test_not_textrecords_metadata(tmp_path):
  pytest.importorskip("tensorflow")
  import mt_data  # pylint: disable=import-outside-toplevel
  (tmp_path / "meta.json").write_text('{"hello": 1}')
  with pytest.raises(UserError, match="not a textrecords metadata file"):
    mt_data.make_dataset(str(tmp_path), 8, split="train")


# ----------------------------------------------------------------- properties
TEXT = st.text(alphabet=st.sampled_from(list("aZé ,.!?\u202f\u00a0\t\u2009İß") + ["x", "É"]),
               max_size=40) | st.text(max_size=40)


@settings(max_examples=300, deadline=None)
@given(TEXT)
def test_clean_is_idempotent(text):
  once = preprocess.clean(text)
  assert preprocess.clean(once) == once


@settings(max_examples=300, deadline=None)
@given(TEXT)
def test_tokenize_never_yields_empty_tokens(text):
  tokens = preprocess.tokenize(preprocess.clean(text))
  assert tokens[-1] == "<eos>" and all(tokens) and all(" " not in t for t in tokens)
  for mark in ",.!?":   # every mark not at the start of a token is its own token
    assert all(t == mark or mark not in t[1:] for t in tokens[:-1])


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=30), st.text(max_size=30), st.text(max_size=10))
def test_parse_line_uses_first_two_columns(src, tgt, extra):
  src, tgt = src.replace("\t", " "), tgt.replace("\t", " ")
  assert preprocess.parse_line(f"{src}\t{tgt}") == preprocess.parse_line(
      f"{src}\t{tgt}\t{extra}")
