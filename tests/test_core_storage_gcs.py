"""gs:// against a GCS emulator on localhost (gcp-storage-emulator, started and
stopped here; gcsfs pointed at it with STORAGE_EMULATOR_HOST; no network):
the generators write there byte-equal to a local run, an overwrite with fewer
shards leaves none of the old shards, and the TF-free readers read it back.
TensorFlow's own gs:// reader has no endpoint setting (TF 2.21), so
make_dataset is not run against the emulator."""

import os
import subprocess
import sys

import pytest

from conftest import BUNDLED_TEXT as SAMPLE_TEXT, BUNDLED_VOCAB as VOCAB, REPO as ROOT
from conftest import GCS_QUIET as QUIET, W2V_TINY as TINY, free_port, message_lines
from textrecords.datasets import metadata

pytest.importorskip("gcsfs")
pytest.importorskip("gcp_storage_emulator")

def _cli(host, cwd, tool, *flags):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT, STORAGE_EMULATOR_HOST=host,
             TEXTRECORDS_STAGING_DIR=str(cwd / "staging"), **QUIET)
  p = subprocess.run([sys.executable, "-m", tool, "--quiet", *flags], cwd=cwd, env=env,
                     capture_output=True, text=True, timeout=180)
  return p.returncode, message_lines(p.stderr)  # gcsfs logs nothing (storage._quiet_clients)


def _names(fs, url):
  fs.invalidate_cache()
  return sorted(p.rsplit("/", 1)[-1] for p in fs.ls(url[len("gs://"):], detail=False))


def _same_files(fs, url_meta, local_dir):
  fs.invalidate_cache()
  meta = metadata.read(url_meta)  # through the project's reader (fsspec)
  url_dir = url_meta.rsplit("/", 1)[0]
  for f in meta["files"]:
    with open(os.path.join(local_dir, f["name"]), "rb") as h:
      assert fs.cat_file(f"{url_dir}/{f['name']}"[len("gs://"):]) == h.read(), f["name"]
  assert _names(fs, url_dir) == sorted([f["name"] for f in meta["files"]] + [url_meta.rsplit(
      "/", 1)[1]])  # no temp names, no record, nothing of an earlier dataset


def test_w2v_on_gcs_like_local_and_overwrite_with_fewer_shards(gcs, tmp_path):
  host, fs = gcs
  flags = (f"--input_file={TINY}", "--min_freq=2", "--num_workers=1")
  url = "gs://bkt/w2v"
  rc, lines = _cli(host, tmp_path, "w2v_data.create", *flags, "--num_shards=4",
                   f"--output_dir={url}")
  assert rc == 0, lines
  assert "train.tfrecord-00003-of-00004" in _names(fs, url)
  fs.pipe_file("bkt/w2v/notes.txt", b"mine")  # not the dataset's: stays
  rc, lines = _cli(host, tmp_path, "w2v_data.create", *flags, "--num_shards=2",
                   f"--output_dir={url}", "--overwrite")
  assert rc == 0, lines
  assert fs.cat_file("bkt/w2v/notes.txt") == b"mine"
  fs.rm("bkt/w2v/notes.txt")
  local = tmp_path / "local"
  rc, lines = _cli(host, tmp_path, "w2v_data.create", *flags, "--num_shards=2",
                   f"--output_dir={local}")
  assert rc == 0, lines
  _same_files(fs, f"{url}/meta.json", local)
  from w2v_data import reader  # pylint: disable=import-outside-toplevel
  got = list(reader.numpy_batches(url, 5, training=True, seed=2))
  want = list(reader.numpy_batches(str(local), 5, training=True, seed=2))
  assert len(got) == len(want) > 0
  for g, w in zip(got, want):
    assert all((g[0][k] == w[0][k]).all() for k in w[0]) and (g[1] == w[1]).all()


def test_bert_on_gcs_like_local(gcs, tmp_path):
  host, fs = gcs
  flags = (f"--input_file={SAMPLE_TEXT}", f"--vocab_file={VOCAB}", "--max_seq_length=32",
           "--dupe_factor=1", "--num_workers=1", "--num_shards=2")
  for out in ("gs://bkt/bert/t.tfrecord", str(tmp_path / "local" / "t.tfrecord")):
    rc, lines = _cli(host, tmp_path, "bert_data.create", *flags, f"--output_file={out}")
    assert rc == 0, lines
  _same_files(fs, "gs://bkt/bert/t.tfrecord.meta.json", tmp_path / "local")
  # --resume on the complete output: nothing to do
  rc, lines = _cli(host, tmp_path, "bert_data.create", *flags, "--resume",
                   "--output_file=gs://bkt/bert/t.tfrecord")
  assert rc == 0, lines


@pytest.mark.parametrize("tool, flags, location", [
    ("bert_data.create", (f"--input_file={SAMPLE_TEXT}", f"--vocab_file={VOCAB}"),
     "--output_file=gs://no-such-bucket/t.tfrecord"),
    ("w2v_data.create", (f"--input_file={TINY}",), "--output_dir=gs://no-such-bucket/w2v"),
    ("bert_data.inspect", (f"--vocab_file={VOCAB}",),
     "--input_file=gs://no-such-bucket/t.tfrecord"),
])
def test_unreachable_storage_is_one_line_before_any_work(tmp_path, tool, flags, location):
  # issue 21 item 5: was a 40-line gcsfs retry traceback and absl-formatted gcsfs lines,
  # after ~45 s of retries. Nobody listens on the port: connection refused at once.
  port = free_port()
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT, **QUIET,
             STORAGE_EMULATOR_HOST=f"http://127.0.0.1:{port}",
             TEXTRECORDS_STAGING_DIR=str(tmp_path / "staging"))
  p = subprocess.run([sys.executable, "-m", tool, *flags, location] + (
      ["--quiet"] if tool.endswith("create") else []), cwd=tmp_path, env=env,
                     capture_output=True, text=True, timeout=120)
  assert p.returncode == 2 and p.stdout == "", p.stderr
  named = location if tool.endswith("create") else location.split("=", 1)[1]  # readers: the URL
  assert p.stderr.splitlines() == [
      f"error: {named}: cannot reach the storage at 127.0.0.1:{port} (Connection refused)"]
  assert sorted(os.listdir(tmp_path)) == []  # no staging folder, nothing written
