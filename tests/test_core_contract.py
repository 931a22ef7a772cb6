"""The writer side of the dataset contract, shared by the three generators:
atomic temp files, normalized run options, BOM and decode-error handling."""

import gc
import json
import os
import time

import pytest

from mt_data import config as mt_config
from mt_data import generator as mt_generator
from textrecords.engine import local as local_engine
from textrecords.files import atomic_file
from textrecords.wire import example_decoder
from textrecords.files import text_input
from textrecords.files import tfrecord
from textrecords.errors import UserError
from w2v_data import generator as w2v_generator
from w2v_data.config import W2vConfig


def _open_fds():
  return set(os.listdir("/proc/self/fd"))


# ------------------------------------------------------------ AtomicWriter

def test_atomic_writer_with_block_without_commit_removes_temp_and_closes(tmp_path):
  path = tmp_path / "f.bin"
  fds = _open_fds()
  with atomic_file.AtomicWriter(str(path)) as w:
    w.write(b"abc")
    tmp = w.tmp
    assert os.path.exists(tmp)
  assert not os.path.exists(tmp)
  assert w._raw.closed  # pylint: disable=protected-access
  assert os.listdir(tmp_path) == []
  gc.collect()
  assert _open_fds() <= fds


def test_atomic_writer_with_block_committed_keeps_the_file(tmp_path):
  path = tmp_path / "f.bin"
  with atomic_file.AtomicWriter(str(path)) as w:
    w.write(b"abc")
    w.commit()
  assert path.read_bytes() == b"abc"
  assert os.listdir(tmp_path) == ["f.bin"]


def test_temp_names_are_unique_per_writer(tmp_path):
  a = atomic_file.AtomicWriter(str(tmp_path / "f"))
  b = atomic_file.AtomicWriter(str(tmp_path / "f"))
  try:
    assert a.tmp != b.tmp
    assert f".tmp-{os.getpid()}-" in a.tmp
    assert atomic_file.temp_owner_alive(os.path.basename(a.tmp))
    assert not atomic_file.temp_owner_alive(".f.tmp-999999999-0123abcd")
  finally:
    a.abort()
    b.abort()


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs Linux /proc")
def test_a_zombie_owner_counts_as_dead():
  """A killed run's orphaned workers stay zombies where init never reaps them
  (some containers): their temp files must still be removable."""
  pid = os.fork()
  if pid == 0:
    os._exit(0)
  try:
    deadline = time.time() + 10
    while atomic_file._process_state(pid) != "Z" and time.time() < deadline:
      time.sleep(0.01)
    assert atomic_file._process_state(pid) == "Z"
    os.kill(pid, 0)  # the kernel still knows the pid ...
    assert not atomic_file.pid_alive(pid)  # ... but its owner is gone
    assert not atomic_file.temp_owner_alive(f".f.tmp-{pid}-0123abcd")
  finally:
    os.waitpid(pid, 0)
  assert atomic_file.pid_alive(os.getpid())


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs Linux /proc")
def test_a_reused_pid_does_not_keep_an_old_temp_file(tmp_path):
  """A live process whose pid matches, but which started after the temp file
  was last written, is not its writer."""
  name = f".f.tmp-{os.getpid()}-0123abcd"
  (tmp_path / name).write_bytes(b"x")
  assert atomic_file.temp_owner_alive(name, str(tmp_path))  # written by us: ours
  day_ago = time.time() - 86400
  os.utime(tmp_path / name, (day_ago, day_ago))
  if atomic_file._process_start_time(os.getpid()) <= day_ago + 2:
    pytest.skip("this process is over a day old")
  assert not atomic_file.temp_owner_alive(name, str(tmp_path))
  assert atomic_file.temp_owner_alive(name)  # without the folder: the pid alone


# ------------------------------------------------------------ run options

def _w2v_config(tmp_path, text, **kw):
  src = tmp_path / "in.txt"
  src.write_bytes(text)
  kw.setdefault("min_freq", 1)
  return W2vConfig(input_file=str(src), output_dir=str(tmp_path / "out"),
                   subsample_t=1.0, max_window_size=2, num_noise_words=1,
                   num_workers=1, **kw)


@pytest.mark.parametrize("spelling", ["gzip", "Gzip", "GZIP"])
def test_w2v_lowercase_gzip_compresses_and_records_the_normal_name(tmp_path, spelling):
  cfg = _w2v_config(tmp_path, b"a b c d\nb c d a\n" * 20, compression=spelling)
  assert cfg.compression == "GZIP"
  meta = w2v_generator.create(cfg).meta
  assert meta["compression"] == "GZIP"
  assert meta["flags"]["compression"] == "GZIP"
  rec_file = tmp_path / "out" / [f["name"] for f in meta["files"] if f["role"] == "records"][0]
  assert rec_file.read_bytes()[:2] == b"\x1f\x8b"  # gzip magic
  assert len(list(tfrecord.read_records(str(rec_file), "GZIP"))) > 0


def test_run_options_normalize_none_and_keep_unknown_for_the_error(tmp_path):
  assert _w2v_config(tmp_path, b"a b\n", compression="none").compression == ""
  bad = _w2v_config(tmp_path, b"a b\n", compression="lz4")
  with pytest.raises(UserError, match="--compression='lz4'"):
    bad.validate()


# ------------------------------------------------------------ byte-order mark

def test_read_lines_drops_a_bom_at_the_start_only(tmp_path):
  p = tmp_path / "t.txt"
  p.write_bytes(text_input.BOM + "café x\n\ufeffy\n".encode())
  assert list(text_input.read_lines(str(p))) == [(1, "café x"), (2, "\ufeffy")]


def test_w2v_drops_the_bom(tmp_path):
  text = "café au lait\ncafé noir\n".encode()
  meta = w2v_generator.create(_w2v_config(tmp_path, text_input.BOM + text)).meta
  vocab = (tmp_path / "out" / "vocab.txt").read_text(encoding="utf-8").split("\n")
  assert "café" in vocab and not any("\ufeff" in t for t in vocab)
  assert meta["counts"]["raw_tokens"] == 5


def test_w2v_bom_in_a_file_with_invalid_utf8_is_dropped_too(tmp_path):
  text = text_input.BOM + "café au lait\n".encode() + b"bad \xff line\n"
  w2v_generator.create(_w2v_config(tmp_path, text, on_decode_error="replace"))
  vocab = (tmp_path / "out" / "vocab.txt").read_text(encoding="utf-8").split("\n")
  assert "café" in vocab and not any("\ufeff" in t for t in vocab)


def test_mt_drops_the_bom(tmp_path):
  src = tmp_path / "pairs.txt"
  src.write_bytes(text_input.BOM + ("café\tcoffee\n" * 4 + "tea\tthé\n" * 4).encode())
  cfg = mt_config.MTConfig(input_file=str(src), output_dir=str(tmp_path / "out"),
                           num_train=6, num_val=2, min_freq=1, num_workers=1)
  mt_generator.create(cfg, log=lambda m: None)
  src_vocab = (tmp_path / "out" / "src_vocab.txt").read_text(encoding="utf-8").split("\n")
  assert "café" in src_vocab and not any("\ufeff" in t for t in src_vocab)
  with open(tmp_path / "out" / "meta.json", encoding="utf-8") as f:
    meta = json.load(f)
  first = next(tfrecord.read_records(str(tmp_path / "out" / meta["splits"]["train"]["files"][0])))
  assert example_decoder.decode_example(first)["source_ids"][0] == src_vocab.index("café")
  assert meta["unk_tokens"]["source"] == 0


# ------------------------------------------------------------ module state

def test_no_module_state_is_left_after_create(tmp_path):
  import shutil  # pylint: disable=import-outside-toplevel
  import weakref  # pylint: disable=import-outside-toplevel
  from bert_data import generator as bert_generator  # pylint: disable=import-outside-toplevel
  from bert_data import units as bert_units  # pylint: disable=import-outside-toplevel
  from bert_data.config import BertConfig  # pylint: disable=import-outside-toplevel
  from conftest import SAMPLE_TEXT, VOCAB  # pylint: disable=import-outside-toplevel

  seen = {}
  real_load = bert_units.load_tokenizer

  def spy(config):
    tok = real_load(config)
    seen["tokenizer"] = weakref.ref(tok)
    return tok

  bert_units.load_tokenizer = spy
  try:
    bert_generator.create(BertConfig(input_files=(SAMPLE_TEXT,),
                                     output_files=(str(tmp_path / "b" / "t.tfrecord"),),
                                     vocab_file=VOCAB, dupe_factor=1, num_workers=1))
  finally:
    bert_units.load_tokenizer = real_load
  assert bert_generator._CACHE == {}  # pylint: disable=protected-access
  assert local_engine._GEN == {}  # pylint: disable=protected-access
  gc.collect()
  assert seen["tokenizer"]() is None  # the tokenizer is gone with the run

  w2v_generator.create(_w2v_config(tmp_path, b"a b c d\nb c d a\n" * 5))
  assert local_engine._GEN == {}  # pylint: disable=protected-access

  shutil.rmtree(tmp_path / "out")
  src = tmp_path / "pairs.txt"
  src.write_bytes(("a b\tc d\n" * 10).encode())
  mt_generator.create(mt_config.MTConfig(input_file=str(src), output_dir=str(tmp_path / "mt"),
                                          num_train=8, num_val=2, min_freq=1, num_workers=1),
                       log=lambda m: None)
  assert local_engine._GEN == {}  # pylint: disable=protected-access


# ------------------------------------------------------------ bert --resume

def test_bert_resume_does_not_depend_on_the_working_directory(tmp_path, monkeypatch):
  import shutil  # pylint: disable=import-outside-toplevel
  from bert_data import generator as bert_generator  # pylint: disable=import-outside-toplevel
  from bert_data.config import BertConfig  # pylint: disable=import-outside-toplevel
  from conftest import SAMPLE_TEXT, VOCAB  # pylint: disable=import-outside-toplevel

  job = tmp_path / "job"
  job.mkdir()
  shutil.copy(SAMPLE_TEXT, job / "corpus.txt")
  shutil.copy(VOCAB, job / "vocab.txt")

  def config(prefix, **kw):
    return BertConfig(input_files=(f"{prefix}corpus.txt",),
                      output_files=(f"{prefix}out/t.tfrecord",),
                      vocab_file=f"{prefix}vocab.txt", dupe_factor=1, num_workers=1,
                      num_shards=2, **kw)

  monkeypatch.chdir(job)
  first = bert_generator.create(config(""))
  before = {n: (job / "out" / n).read_bytes() for n in os.listdir(job / "out")}
  monkeypatch.chdir(tmp_path)
  again = bert_generator.create(config(f"{job}/", resume=True))  # already complete: kept
  assert again.already_complete and not first.already_complete
  assert {k: again.counts[k] for k in ("documents", "tokens", "instances")} == \
      {k: first.counts[k] for k in ("documents", "tokens", "instances")}
  assert {n: (job / "out" / n).read_bytes() for n in os.listdir(job / "out")} == before
