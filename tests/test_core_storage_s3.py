"""s3:// against a real S3 server on localhost (moto in server mode, started and
stopped here; no network): each generator writes there through s3fs and the
files equal a local run's byte for byte."""

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from textrecords import metadata

s3fs = pytest.importorskip("s3fs")
pytest.importorskip("moto.server")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "tests", "testdata", "w2v_tiny.txt")
PAIRS = os.path.join(ROOT, "tests", "testdata", "mt_pairs.txt")
SAMPLE_TEXT = os.path.join(ROOT, "bert_data", "sample", "sample_corpus.txt")
VOCAB = os.path.join(ROOT, "bert_data", "sample", "vocab.txt")
CREDS = dict(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
             AWS_DEFAULT_REGION="us-east-1", AWS_MAX_ATTEMPTS="1")
_LOG = re.compile(r"^[IWE]\d{4} ")  # absl-formatted log lines of boto


def _free_port() -> int:
  s = socket.socket()
  s.bind(("127.0.0.1", 0))
  port = s.getsockname()[1]
  s.close()
  return port


@pytest.fixture(scope="module")
def s3_server():
  port = _free_port()
  proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                           str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  endpoint = f"http://127.0.0.1:{port}"
  try:
    deadline = time.monotonic() + 30
    while True:
      try:
        urllib.request.urlopen(endpoint + "/moto-api/", timeout=1)
        break
      except OSError:
        if time.monotonic() > deadline or proc.poll() is not None:
          raise RuntimeError("moto server did not start")
        time.sleep(0.1)
    fs = s3fs.S3FileSystem(endpoint_url=endpoint, key="testing", secret="testing",
                           skip_instance_cache=True)
    fs.mkdir("bkt")
    with pytest.MonkeyPatch.context() as mp:  # for the project's own reads in this process
      for k, v in dict(CREDS, AWS_ENDPOINT_URL=endpoint).items():
        mp.setenv(k, v)
      yield endpoint, fs
  finally:
    proc.terminate()
    proc.wait(timeout=30)


def _cli(tool, endpoint, cwd, *flags):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT, AWS_ENDPOINT_URL=endpoint,
             TEXTRECORDS_STAGING_DIR=str(cwd / "staging"), **CREDS)
  p = subprocess.run([sys.executable, "-m", tool, "--quiet", *flags], cwd=cwd, env=env,
                     capture_output=True, text=True, timeout=180)
  lines = [l for l in p.stderr.splitlines()
           if l.strip() and not _LOG.match(l) and "oneDNN" not in l
           and not l.startswith("WARNING: All log messages")]
  return p.returncode, lines


def _same_files(fs, url_meta, local_meta):
  """Every file the URL metadata lists equals the local run's file."""
  meta = metadata.read(url_meta)  # through the project's reader (fsspec)
  assert meta["files"]
  url_dir, local_dir = url_meta.rsplit("/", 1)[0], os.path.dirname(local_meta)
  for f in meta["files"]:
    with open(os.path.join(local_dir, f["name"]), "rb") as h:
      assert fs.cat_file(f"{url_dir}/{f['name']}"[len("s3://"):]) == h.read(), f["name"]
  assert not [p for p in fs.ls(url_dir[len("s3://"):], detail=False)
              if p.rsplit("/", 1)[-1].startswith(".")]  # no temp names left


@pytest.mark.parametrize("tool, out_flag, name, meta, flags", [
    ("w2v_data.create", "--output_dir", "w2v", "meta.json",
     (f"--input_file={TINY}", "--min_freq=2", "--num_shards=2", "--num_workers=1")),
    ("bert_data.create", "--output_file", "t.tfrecord", "t.tfrecord.meta.json",
     (f"--input_file={SAMPLE_TEXT}", f"--vocab_file={VOCAB}", "--max_seq_length=32",
      "--dupe_factor=1", "--num_workers=1")),
    ("mt_data.create", "--output_dir", "mt", "meta.json",
     (f"--input_file={PAIRS}", "--num_train=30", "--num_val=12", "--num_workers=1")),
])
def test_generators_write_s3_like_local(s3_server, tmp_path, tool, out_flag, name, meta, flags):
  endpoint, fs = s3_server
  rc, lines = _cli(tool, endpoint, tmp_path, *flags, f"{out_flag}={tmp_path / 'local' / name}")
  assert rc == 0, lines
  url = f"s3://bkt/{tool}/{name}"
  rc, lines = _cli(tool, endpoint, tmp_path, *flags, f"{out_flag}={url}")
  assert rc == 0, lines
  fs.invalidate_cache()
  folder = url if meta == "meta.json" else url.rsplit("/", 1)[0]
  local_meta = os.path.join(tmp_path / "local" / (name if meta == "meta.json" else ""), meta)
  _same_files(fs, f"{folder}/{meta}", local_meta)
  # an existing URL output is refused without --overwrite, one line, exit 2
  rc, lines = _cli(tool, endpoint, tmp_path, *flags, f"{out_flag}={url}")
  assert rc == 2 and len(lines) == 1 and "pass --overwrite" in lines[0], lines


def test_unreachable_endpoint_one_line(tmp_path):
  rc, lines = _cli("w2v_data.create", f"http://127.0.0.1:{_free_port()}", tmp_path,
                   f"--input_file={TINY}", "--output_dir=s3://bkt/x")
  assert rc == 2 and len(lines) == 1 and "cannot reach the storage" in lines[0], lines
  assert os.listdir(tmp_path) == []
