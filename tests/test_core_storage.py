"""Storage URLs: scheme handling, one-line errors, and generators reading and
writing memory:// (in-process, so through the API) and file:// (CLI)."""

import importlib.util
import json
import os
import subprocess
import sys
import uuid

import pytest

from textrecords.datasets import layout
from textrecords.datasets import publish
from textrecords.files import storage
from textrecords.errors import UserError

fsspec = pytest.importorskip("fsspec")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "tests", "testdata", "w2v_tiny.txt")
SAMPLE_TEXT = os.path.join(ROOT, "bert_data", "sample", "sample_corpus.txt")
VOCAB = os.path.join(ROOT, "bert_data", "sample", "vocab.txt")
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT)


def _noise(line: str) -> bool:
  return (line.startswith(("WARNING: All log messages", "I0000", "W0000", "E0000"))
          or "oneDNN" in line)


@pytest.fixture()
def staging(tmp_path, monkeypatch):
  d = tmp_path / "staging"
  monkeypatch.setenv("TEXTRECORDS_STAGING_DIR", str(d))
  return d


@pytest.fixture()
def mem():
  """A fresh memory:// folder (the filesystem is process-wide)."""
  root = f"memory://t{uuid.uuid4().hex[:12]}"
  yield root
  fs = fsspec.filesystem("memory")
  if fs.exists(root):
    fs.rm(root, recursive=True)


def _put(url: str, path: str):
  fsspec.filesystem("memory").put_file(path, url)


def _mem_bytes(url: str) -> bytes:
  with fsspec.filesystem("memory").open(url, "rb") as f:
    return f.read()


# --- paths -------------------------------------------------------------------------------------

def test_urls_are_never_relative_local_paths():
  assert storage.split_scheme("gs://b/x") == ("gs", "b/x")
  assert storage.split_scheme("out/gs:/b") == (None, "out/gs:/b")
  assert storage.is_url("s3://b/k") and not storage.is_url("file:///tmp/x")
  assert storage.local_path("file:///tmp/x") == "/tmp/x"
  lay = layout.DatasetLayout.for_file("gs://bucket/dir/t.tfrecord")
  assert lay.meta_path == "gs://bucket/dir/t.tfrecord.meta.json"
  assert lay.record_paths("train", 2)[1] == "gs://bucket/dir/t.tfrecord-00001-of-00002"
  assert layout.DatasetLayout.for_dir("s3://b/out/").meta_path == "s3://b/out/meta.json"
  assert layout.DatasetLayout.from_meta_path("memory://x/meta.json").root == "memory://x"


def test_check_names_extra_or_scheme():
  with pytest.raises(UserError, match=r"unknown storage scheme xyz://"):
    storage.check("xyz://b/k", "--output_dir")
  if importlib.util.find_spec("gcsfs") is None:
    with pytest.raises(UserError, match=r"pip install 'textrecords\[gcs\]'"):
      storage.check("gs://b/k", "--output_dir")
  assert storage.check("file:///tmp/x") == "/tmp/x"
  assert storage.check("memory://a/b") == "memory://a/b"


def test_glob_exists_list_on_memory(mem):
  for name in ("a.txt", "b.txt", "c.csv"):
    _put(f"{mem}/in/{name}", TINY)
  assert storage.glob(f"{mem}/in/*.txt") == [f"{mem}/in/a.txt", f"{mem}/in/b.txt"]
  assert storage.exists(f"{mem}/in/c.csv") and storage.is_dir(f"{mem}/in")
  assert storage.list_dir(f"{mem}/in") == ["a.txt", "b.txt", "c.csv"]
  assert storage.list_dir(f"{mem}/nothing") == []
  assert storage.size(f"{mem}/in/a.txt") == os.path.getsize(TINY)


# --- one-line errors, nothing written (CLI) ----------------------------------------------------

def _bert_cli(cwd, staging_dir, *flags, pythonpath=None):
  env = dict(ENV, TEXTRECORDS_STAGING_DIR=str(staging_dir))
  if pythonpath:
    env["PYTHONPATH"] = os.pathsep.join([pythonpath, ROOT])
  given = {f.split("=")[0] for f in flags}  # a flag given twice is an error: flags replace defaults
  defaults = [f for f in (f"--vocab_file={VOCAB}", "--max_seq_length=32", "--dupe_factor=1",
                          "--quiet") if f.split("=")[0] not in given]
  p = subprocess.run([sys.executable, "-m", "bert_data.create", *defaults, *flags],
                     cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
  return p.returncode, [l for l in p.stderr.splitlines() if l.strip() and not _noise(l)]


@pytest.mark.parametrize("flags, message", [
    ((f"--input_file={SAMPLE_TEXT}", "--output_file=xyz://bucket/t.tfrecord"),
     "unknown storage scheme xyz://"),
    (("--input_file=ftpx://host/c.txt", "--output_file=out/t.tfrecord"),
     "unknown storage scheme ftpx://"),
])
def test_cli_unknown_scheme(tmp_path, flags, message):
  rc, lines = _bert_cli(tmp_path, tmp_path / "staging", *flags)
  assert rc == 2 and len(lines) == 1 and message in lines[0], lines
  assert os.listdir(tmp_path) == []  # no ./xyz:/ folder, no staging


@pytest.mark.parametrize("flags", [
    (f"--input_file={SAMPLE_TEXT}", "--output_file=gs://bucket/t.tfrecord"),
    ("--input_file=gs://bucket/corpus/*.txt", "--output_file=out/t.tfrecord"),
])
def test_cli_missing_extra(tmp_path, flags):
  shadow = tmp_path / "shadow" / "gcsfs"  # gcsfs as if not installed
  shadow.mkdir(parents=True)
  (shadow / "__init__.py").write_text("raise ImportError('No module named gcsfs')\n")
  run_dir = tmp_path / "run"
  run_dir.mkdir()
  rc, lines = _bert_cli(run_dir, run_dir / "staging", *flags, pythonpath=str(shadow.parent))
  assert rc == 2 and len(lines) == 1, lines
  assert "gcsfs" in lines[0] and "pip install 'textrecords[gcs]'" in lines[0]
  assert os.listdir(run_dir) == []


def test_cli_file_urls_equal_local_paths(tmp_path):
  local, via_url = tmp_path / "a" / "t.tfrecord", tmp_path / "b" / "t.tfrecord"
  rc, lines = _bert_cli(tmp_path, tmp_path / "staging", f"--input_file={SAMPLE_TEXT}",
                        f"--output_file={local}")
  assert rc == 0, lines
  rc, lines = _bert_cli(tmp_path, tmp_path / "staging", f"--input_file=file://{SAMPLE_TEXT}",
                        f"--vocab_file=file://{VOCAB}", f"--output_file=file://{via_url}")
  assert rc == 0, lines
  assert via_url.read_bytes() == local.read_bytes() and len(local.read_bytes()) > 0
  assert not (tmp_path / "file:").exists() and not (tmp_path / "staging").exists()


# --- generators on memory:// (in-process) ------------------------------------------------------

def _w2v_config(inp, out, **kw):
  from w2v_data.config import W2vConfig  # pylint: disable=import-outside-toplevel
  args = dict(min_freq=2, subsample_t=3e-2, max_window_size=2, num_noise_words=2,
              num_workers=1, num_shards=2, quiet=True)
  args.update(kw)
  return W2vConfig(input_file=inp, output_dir=out, **args)


def _w2v(config):
  from w2v_data import generator  # pylint: disable=import-outside-toplevel
  return publish.run_staged(config, "output_dir", generator.create, folder=True,
                            flag="--output_dir")


def test_w2v_memory_in_and_out_equals_local(tmp_path, staging, mem):
  local = str(tmp_path / "local")
  _w2v(_w2v_config(TINY, local))
  _put(f"{mem}/in/tiny.txt", TINY)
  out = f"{mem}/out/w2v"
  _w2v(_w2v_config(f"{mem}/in/*.txt", out))
  meta = json.loads(_mem_bytes(f"{out}/meta.json"))
  names = [f["name"] for f in meta["files"]]
  assert any(n.startswith("train.tfrecord-00001-of-00002") for n in names)
  for f in meta["files"]:
    got = _mem_bytes(f"{out}/{f['name']}")
    assert len(got) == f["bytes"]
    with open(os.path.join(local, f["name"]), "rb") as h:
      assert got == h.read(), f["name"]
  assert not any(n.startswith(".") for n in storage.list_dir(out))  # no temp names left
  assert not staging.exists() or os.listdir(staging) == []  # staging removed
  # the TF-free reader reads memory:// and file:// as the local folder
  from w2v_data import reader  # pylint: disable=import-outside-toplevel
  want = list(reader.numpy_batches(local, 3, training=True, seed=1))
  for loc in (out, f"{out}/meta.json", "file://" + local):
    got = list(reader.numpy_batches(loc, 3, training=True, seed=1))
    assert len(got) == len(want) and all(
        (g[0][k] == w[0][k]).all() and (g[1] == w[1]).all()
        for g, w in zip(got, want) for k in w[0]), loc


def test_w2v_memory_exists_needs_overwrite(tmp_path, staging, mem):
  out = f"{mem}/out"
  _w2v(_w2v_config(TINY, out))
  before = _mem_bytes(f"{out}/meta.json")
  with pytest.raises(UserError, match="exists"):
    _w2v(_w2v_config(TINY, out))
  assert _mem_bytes(f"{out}/meta.json") == before
  _w2v(_w2v_config(TINY, out, overwrite=True, max_window_size=3))
  assert json.loads(_mem_bytes(f"{out}/meta.json")) != json.loads(before)


def _listed(out):
  return [f["name"] for f in json.loads(_mem_bytes(f"{out}/meta.json"))["files"]]


def _dataset_bytes(out):
  return {n: _mem_bytes(f"{out}/{n}") for n in _listed(out) + ["meta.json"]}


def test_overwrite_with_fewer_shards_removes_only_the_old_datasets_files(tmp_path, staging,
                                                                          mem):
  out = f"{mem}/out"
  _w2v(_w2v_config(TINY, out, num_shards=4))
  old = _listed(out)
  assert "train.tfrecord-00003-of-00004" in old
  fs = fsspec.filesystem("memory")
  fs.pipe_file(f"{out}/notes.txt", b"mine")          # the user's own files stay
  fs.pipe_file(f"{out}/train.tfrecord-extra", b"x")
  fs.pipe_file(f"{out}/.hidden", b"y")
  _w2v(_w2v_config(TINY, out, num_shards=2, overwrite=True))
  new = _listed(out)
  assert "train.tfrecord-00001-of-00002" in new and not set(new) & (set(old) - set(new))
  assert storage.list_dir(out) == sorted(new + ["meta.json", "notes.txt",
                                                "train.tfrecord-extra", ".hidden"])
  local = str(tmp_path / "local")
  _w2v(_w2v_config(TINY, local, num_shards=2))
  for n in new:
    with open(os.path.join(local, n), "rb") as h:
      assert _mem_bytes(f"{out}/{n}") == h.read(), n


def _failing(fs, method, after):
  """Patches fs's class so the `after`-th call of `method` on a data file raises."""
  real = getattr(type(fs), method)
  calls = []

  def dying(self, *a, **kw):
    calls.append(a)
    if len(calls) == after:
      raise OSError("connection reset")
    return real(self, *a, **kw)

  return real, dying


@pytest.mark.parametrize("method", ["put_file", "copy"])
def test_failed_upload_never_leaves_new_metadata(tmp_path, staging, mem, method):
  """A publish that dies while uploading keeps the earlier dataset whole; one
  that dies while moving uploads into place leaves no metadata. A rerun with
  fewer shards leaves none of either run's files behind."""
  out = f"{mem}/out"
  _w2v(_w2v_config(TINY, out, num_shards=4))
  before = _dataset_bytes(out)
  fs = fsspec.filesystem("memory")
  real, dying = _failing(fs, method, 2)
  setattr(type(fs), method, dying)
  try:
    with pytest.raises(UserError, match="cannot upload"):
      _w2v(_w2v_config(TINY, out, num_shards=3, overwrite=True, max_window_size=3))
  finally:
    setattr(type(fs), method, real)
  if method == "put_file":  # nothing of the earlier dataset was touched
    assert _dataset_bytes(out) == before
  else:
    assert not fs.exists(f"{out}/meta.json")
    assert storage.list_dir(out).count(".meta.json.publishing") == 1
  _w2v(_w2v_config(TINY, out, num_shards=2, overwrite=True, max_window_size=3))
  assert storage.list_dir(out) == sorted(_listed(out) + ["meta.json"])
  assert "train.tfrecord-00001-of-00002" in _listed(out)


def test_bert_memory_inputs_and_unreadable_scheme_for_tf(tmp_path, staging, mem):
  from bert_data import generator  # pylint: disable=import-outside-toplevel
  from bert_data.config import BertConfig  # pylint: disable=import-outside-toplevel
  _put(f"{mem}/c/corpus.txt", SAMPLE_TEXT)
  _put(f"{mem}/c/vocab.txt", VOCAB)
  common = dict(max_seq_length=32, max_predictions_per_seq=5, dupe_factor=1, quiet=True,
                num_workers=1)
  local = str(tmp_path / "t.tfrecord")
  generator.create(BertConfig(input_files=(SAMPLE_TEXT,), output_files=(local,),
                             vocab_file=VOCAB, **common))
  out = f"{mem}/o/t.tfrecord"
  from textrecords.files import text_input  # pylint: disable=import-outside-toplevel
  files = tuple(text_input.expand_patterns(f"{mem}/c/corpus*.txt"))
  publish.run_staged(BertConfig(input_files=files, output_files=(out,),
                                vocab_file=f"{mem}/c/vocab.txt", **common),
                     "output_files", generator.create, folder=False, flag="--output_file")
  with open(local, "rb") as f:
    assert _mem_bytes(out) == f.read()
  from bert_data.dataset import make_dataset  # pylint: disable=import-outside-toplevel
  with pytest.raises(UserError, match=r"tf.data cannot read memory://"):
    make_dataset(out, batch_size=2)
