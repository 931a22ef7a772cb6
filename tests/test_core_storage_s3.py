"""s3:// against a real S3 server on localhost (moto in server mode, started and
stopped here; no network): each generator writes there through s3fs and the
files equal a local run's byte for byte."""

import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from conftest import BUNDLED_TEXT as SAMPLE_TEXT, BUNDLED_VOCAB as VOCAB, REPO as ROOT
from conftest import CREDS, TESTDATA, W2V_TINY as TINY, free_port, message_lines
from textrecords.datasets import metadata

pytest.importorskip("s3fs")
pytest.importorskip("moto.server")

PAIRS = os.path.join(TESTDATA, "mt_pairs.txt")
def _env(endpoint, cwd):
  return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT, AWS_ENDPOINT_URL=endpoint,
              TEXTRECORDS_STAGING_DIR=str(cwd / "staging"), **CREDS)


def _cli(tool, endpoint, cwd, *flags):
  p = subprocess.run([sys.executable, "-m", tool, "--quiet", *flags], cwd=cwd,
                     env=_env(endpoint, cwd), capture_output=True, text=True, timeout=180)
  assert "Found credentials" not in p.stderr, p.stderr  # boto's INFO lines are not shown
  return p.returncode, message_lines(p.stderr)


class _Gate:
  """A TCP proxy in front of the S3 server that stalls the first connection
  whose request stream contains `marker` (that request never reaches the
  server), so a test can kill the client at an exact step of an upload."""

  def __init__(self, port: int, marker: bytes):
    self._target = port
    self._marker = marker
    self.hit = threading.Event()
    self._socks = []
    self._listener = socket.create_server(("127.0.0.1", 0))
    self.endpoint = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
    threading.Thread(target=self._accept, daemon=True).start()

  def _accept(self):
    while True:
      try:
        client, _ = self._listener.accept()
      except OSError:
        return
      upstream = socket.create_connection(("127.0.0.1", self._target))
      self._socks += [client, upstream]
      threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()
      threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()

  def _pump(self, src, dst, watch):
    tail = b""
    while True:
      try:
        data = src.recv(65536)
      except OSError:
        return
      if not data:
        break
      if watch:
        tail = (tail + data)[-(len(data) + len(self._marker)):]
        if self.hit.is_set() or self._marker in tail:
          self.hit.set()
          return  # stalled: the client waits for a reply that never comes
      try:
        dst.sendall(data)
      except OSError:
        return
    try:
      dst.shutdown(socket.SHUT_WR)
    except OSError:
      pass

  def close(self):
    self._listener.close()
    for s in self._socks:
      s.close()


def _same_files(fs, url_meta, local_meta):
  """Every file the URL metadata lists equals the local run's file."""
  fs.invalidate_cache()
  meta = metadata.read(url_meta)  # through the project's reader (fsspec)
  assert meta["files"]
  url_dir, local_dir = url_meta.rsplit("/", 1)[0], os.path.dirname(local_meta)
  for f in meta["files"]:
    with open(os.path.join(local_dir, f["name"]), "rb") as h:
      assert fs.cat_file(f"{url_dir}/{f['name']}"[len("s3://"):]) == h.read(), f["name"]
  assert not [p for p in fs.ls(url_dir[len("s3://"):], detail=False)
              if p.rsplit("/", 1)[-1].startswith(".")]  # no temp names left


TOOLS = {
    "w2v": ("w2v_data.create", "--output_dir", "w2v", "meta.json",
            (f"--input_file={TINY}", "--min_freq=2", "--num_shards=2", "--num_workers=1")),
    "bert": ("bert_data.create", "--output_file", "t.tfrecord", "t.tfrecord.meta.json",
             (f"--input_file={SAMPLE_TEXT}", f"--vocab_file={VOCAB}", "--max_seq_length=32",
              "--dupe_factor=1", "--num_workers=1")),
    "mt": ("mt_data.create", "--output_dir", "mt", "meta.json",
           (f"--input_file={PAIRS}", "--num_train=30", "--num_val=12", "--num_workers=1")),
}


@pytest.fixture(scope="module")
def made(s3_server, tmp_path_factory):
  """Each generator's output written locally and to s3:// by CLI:
  {package: (local location, URL, local metadata, URL metadata)}."""
  endpoint, _ = s3_server
  out = {}
  for pkg, (tool, out_flag, name, meta, flags) in TOOLS.items():
    tmp = tmp_path_factory.mktemp(pkg)
    local, url = str(tmp / "local" / name), f"s3://bkt/{pkg}/{name}"
    for loc in (local, url):
      rc, lines = _cli(tool, endpoint, tmp, *flags, f"{out_flag}={loc}")
      assert rc == 0, lines
    folder = meta == "meta.json"
    out[pkg] = (local, url, os.path.join(local if folder else os.path.dirname(local), meta),
                f"{url if folder else url.rsplit('/', 1)[0]}/{meta}")
  return out


@pytest.mark.parametrize("pkg", sorted(TOOLS))
def test_generators_write_s3_like_local(s3_server, made, tmp_path, pkg):
  endpoint, fs = s3_server
  tool, out_flag, _, _, flags = TOOLS[pkg]
  local, url, local_meta, url_meta = made[pkg]
  _same_files(fs, url_meta, local_meta)
  # an existing URL output is refused without --overwrite, one line, exit 2
  rc, lines = _cli(tool, endpoint, tmp_path, *flags, f"{out_flag}={url}")
  assert rc == 2 and len(lines) == 1 and "pass --overwrite" in lines[0], lines


def _tool_out(endpoint, cwd, tool, *flags):
  p = subprocess.run([sys.executable, "-m", tool, *flags], cwd=cwd, env=_env(endpoint, cwd),
                     capture_output=True, text=True, timeout=180)
  assert p.returncode == 0, p.stderr
  return p.stdout


def test_inspect_and_stats_read_s3(s3_server, made, tmp_path):
  """bert_data.inspect/stats and mt_data.stats on s3:// print what they print
  for the local copy (paths aside)."""
  endpoint, _ = s3_server
  local, url, _, _ = made["bert"]
  for tool, extra in (("bert_data.inspect", ["--max_records=4", f"--vocab_file={VOCAB}"]),
                      ("bert_data.stats", [f"--vocab_file={VOCAB}"])):
    got = _tool_out(endpoint, tmp_path, tool, f"--input_file={url}", *extra)
    want = _tool_out(endpoint, tmp_path, tool, f"--input_file={local}", *extra)
    assert "record 3" in got or "tokens_per_instance" in got, got
    assert got.replace(url, "LOC") == want.replace(local, "LOC")
  local, url, _, _ = made["mt"]
  got = json.loads(_tool_out(endpoint, tmp_path, "mt_data.stats", f"--output_dir={url}"))
  want = json.loads(_tool_out(endpoint, tmp_path, "mt_data.stats", f"--output_dir={local}"))
  assert got == want and got["source"]["sequences"] == 42


def _batches(pkg, location, **kw):
  import importlib  # pylint: disable=import-outside-toplevel
  reader = importlib.import_module(f"{pkg}_data.reader")
  return list(reader.numpy_batches(location, 4, **kw))


def _equal(a, b):
  import numpy as np  # pylint: disable=import-outside-toplevel
  if isinstance(a, dict):
    return sorted(a) == sorted(b) and all(_equal(a[k], b[k]) for k in a)
  if isinstance(a, (tuple, list)):
    return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
  return np.array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("pkg", sorted(TOOLS))
def test_numpy_batches_read_s3_like_local(made, pkg):
  local, url, _, _ = made[pkg]
  for kw in ({"training": False}, {"training": True, "seed": 3}):
    want = _batches(pkg, local, **kw)
    assert want
    assert _equal(_batches(pkg, url, **kw), want)


@pytest.mark.parametrize("pkg", sorted(TOOLS))
def test_make_dataset_on_s3_is_one_line(made, pkg):
  import importlib  # pylint: disable=import-outside-toplevel
  from textrecords.errors import UserError  # pylint: disable=import-outside-toplevel
  make_dataset = importlib.import_module(f"{pkg}_data").make_dataset
  _, url, _, _ = made[pkg]
  with pytest.raises(UserError, match=r"tf.data cannot read s3:// URLs .*copy the dataset"):
    make_dataset(url, 2)  # one signature for the three packages (mt: split="train")


def test_unreachable_endpoint_one_line(tmp_path):
  rc, lines = _cli("w2v_data.create", f"http://127.0.0.1:{free_port()}", tmp_path,
                   f"--input_file={TINY}", "--output_dir=s3://bkt/x")
  assert rc == 2 and len(lines) == 1 and "cannot reach the storage" in lines[0], lines
  assert os.listdir(tmp_path) == []


def _mt_corpus(path, n):
  rng = random.Random(3)
  with open(path, "w", encoding="utf-8") as f:
    for _ in range(n):
      src = " ".join(f"w{rng.randrange(400)}" for _ in range(rng.randint(2, 9)))
      tgt = " ".join(f"m{rng.randrange(500)}" for _ in range(rng.randint(2, 9)))
      f.write(f"{src.capitalize()}.\t{tgt.capitalize()} !\n")
  return str(path)


def _url_names(fs, url):
  fs.invalidate_cache()
  return sorted(p.rsplit("/", 1)[-1] for p in fs.ls(url[len("s3://"):], detail=False))


def _kill(proc):
  proc.send_signal(signal.SIGKILL)
  proc.wait()
  assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"


@pytest.mark.parametrize("stall_at", ["upload", "move"])
def test_resume_after_kill_mid_upload(s3_server, tmp_path, stall_at):
  """SIGKILL of an --overwrite run while it uploads (the earlier dataset stays
  whole and complete) or while it moves uploads into place (no metadata at
  all; --resume finishes from the staged files). The finished output has the
  bytes of a run never killed and nothing of the earlier dataset or of the
  killed run's uploads left over."""
  endpoint, fs = s3_server
  flags = (f"--input_file={PAIRS}", "--num_train=30", "--num_val=12", "--num_workers=1")
  url = f"s3://bkt/kill-{stall_at}/mt"
  rc, lines = _cli("mt_data.create", endpoint, tmp_path, *flags, "--num_shards=2",
                   f"--output_dir={url}")
  assert rc == 0, lines
  before = _url_names(fs, url)
  old_meta = fs.cat_file(f"{url}/meta.json"[len("s3://"):])
  shards = "--num_shards=3"
  rc, lines = _cli("mt_data.create", endpoint, tmp_path, *flags, shards,
                   f"--output_dir={tmp_path / 'local'}")
  assert rc == 0, lines
  marker = (b"PUT /bkt/kill-upload/mt/.train.tfrecord-00001-of-00003.tmp-" if stall_at == "upload"
            else b"PUT /bkt/kill-move/mt/train.tfrecord-00001-of-00003 ")
  gate = _Gate(int(endpoint.rsplit(":", 1)[1]), marker)
  try:
    proc = subprocess.Popen([sys.executable, "-m", "mt_data.create", "--quiet", *flags, shards,
                             f"--output_dir={url}", "--overwrite"], cwd=tmp_path,
                            env=_env(gate.endpoint, tmp_path), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    assert gate.hit.wait(120), "the upload never reached the marked request"
    _kill(proc)
  finally:
    gate.close()
  names = _url_names(fs, url)
  if stall_at == "upload":  # the earlier complete dataset is untouched
    assert fs.cat_file(f"{url}/meta.json"[len("s3://"):]) == old_meta
    assert set(before) <= set(names)
  else:
    assert "meta.json" not in names and "train.tfrecord-00000-of-00003" in names
  assert ".meta.json.publishing" in names
  summary = tmp_path / "summary.json"
  rc, lines = _cli("mt_data.create", endpoint, tmp_path, *flags, shards, f"--output_dir={url}",
                   "--resume", f"--summary_json={summary}")
  if stall_at == "upload":
    # as for a local output: --resume does not replace a complete dataset of
    # other flags (one line naming the URL); the killed --overwrite is redone
    assert rc == 2 and len(lines) == 1 and f"{url}/meta.json exists" in lines[0], lines
    assert fs.cat_file(f"{url}/meta.json"[len("s3://"):]) == old_meta
    rc, lines = _cli("mt_data.create", endpoint, tmp_path, *flags, shards,
                     f"--output_dir={url}", "--overwrite")
    assert rc == 0, lines
  else:  # no metadata at the URL: the staged files are kept and uploaded again
    assert rc == 0, lines
    assert json.loads(summary.read_text())["files_kept_from_earlier_run"] > 0
  _same_files(fs, f"{url}/meta.json", str(tmp_path / "local" / "meta.json"))
  listed = [f["name"] for f in metadata.read(f"{url}/meta.json")["files"]]
  assert _url_names(fs, url) == sorted(listed + ["meta.json"])
  assert not os.listdir(tmp_path / "staging")


def test_resume_after_kill_mid_run(s3_server, tmp_path):
  """SIGKILL while the generator writes its staged shards: nothing at the URL;
  --resume keeps the finished shards and publishes the same bytes."""
  endpoint, fs = s3_server
  corpus = _mt_corpus(tmp_path / "big.txt", 6000)
  flags = (f"--input_file={corpus}", "--num_train=0", "--num_val=500", "--num_shards=40",
           "--num_workers=1")
  url = "s3://bkt/kill-run/mt"
  proc = subprocess.Popen([sys.executable, "-m", "mt_data.create", "--quiet", *flags,
                           f"--output_dir={url}"], cwd=tmp_path, env=_env(endpoint, tmp_path),
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  deadline, done = time.monotonic() + 120, 0
  while time.monotonic() < deadline and proc.poll() is None and done < 5:
    done = sum(1 for _, _, files in os.walk(tmp_path / "staging") for n in files
               if n.startswith(".train") and n.endswith(".done") and ".index" not in n)
    time.sleep(0.002)
  _kill(proc)
  assert done >= 5
  fs.invalidate_cache()
  assert not fs.exists("bkt/kill-run")  # nothing uploaded yet
  summary = tmp_path / "summary.json"
  rc, lines = _cli("mt_data.create", endpoint, tmp_path, *flags, f"--output_dir={url}",
                   "--resume", f"--summary_json={summary}")
  assert rc == 0, lines
  assert json.loads(summary.read_text())["files_kept_from_earlier_run"] >= 5
  rc, lines = _cli("mt_data.create", endpoint, tmp_path, *flags,
                   f"--output_dir={tmp_path / 'local'}")
  assert rc == 0, lines
  _same_files(fs, f"{url}/meta.json", str(tmp_path / "local" / "meta.json"))
  # --resume on the complete URL output: nothing to do, nothing uploaded
  rc, lines = _cli("mt_data.create", endpoint, tmp_path, *flags, f"--output_dir={url}",
                   "--resume", f"--summary_json={summary}")
  assert rc == 0, lines
  # other flags with --resume: refused in one line naming the URL
  rc, lines = _cli("mt_data.create", endpoint, tmp_path, *flags[:-1], "--num_workers=1",
                   "--min_freq=3", f"--output_dir={url}", "--resume")
  assert rc == 2 and len(lines) == 1 and url in lines[0] and "--overwrite" in lines[0], lines
