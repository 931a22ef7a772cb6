"""bert_data under failure: a SIGKILLed run looks incomplete; --resume finishes it
with bytes identical to an uninterrupted run."""

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import REPO, SAMPLE_TEXT, VOCAB, run_cli, write_varied_corpus
from textrecords.files import atomic_file
from textrecords.datasets import layout
from textrecords.files import tfrecord

SHARDS = 24


@pytest.fixture(scope="module")
def big_corpus(tmp_path_factory):
  return write_varied_corpus(tmp_path_factory.mktemp("big") / "corpus.txt", 150)


def _args(corpus, out):
  return [f"--input_file={corpus}", f"--output_file={out}", f"--vocab_file={VOCAB}",
          "--dupe_factor=3", f"--num_shards={SHARDS}", "--num_workers=2", "--quiet"]


def _visible(d):
  return sorted(n for n in os.listdir(d) if not n.startswith("."))


def _zombie_children():
  """Pids of this process's children that exited and were not reaped."""
  me, found = os.getpid(), []
  for entry in os.listdir("/proc"):
    fields = atomic_file._proc_stat_fields(entry) if entry.isdigit() else None  # pylint: disable=protected-access
    if fields and fields[0] == "Z" and int(fields[1]) == me:
      found.append(int(entry))
  return found


@contextlib.contextmanager
def _orphans_stay_zombies():
  """Makes this process the reaper of orphans that never reaps them, as the
  init of some containers (CI's) is: a killed run's workers stay zombies."""
  if not sys.platform.startswith("linux"):
    yield
    return
  libc = ctypes.CDLL(None, use_errno=True)
  PR_SET_CHILD_SUBREAPER = 36
  before = set(_zombie_children())
  libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
  try:
    yield
  finally:
    libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
    for pid in set(_zombie_children()) - before:
      try:
        os.waitpid(pid, 0)
      except ChildProcessError:
        pass


def test_kill_then_resume_is_byte_identical(tmp_path, big_corpus):
  with _orphans_stay_zombies():
    _kill_then_resume(tmp_path, big_corpus)


def _kill_then_resume(tmp_path, big_corpus):
  ref_dir, dir_ = tmp_path / "ref", tmp_path / "killed"
  ref_dir.mkdir()
  dir_.mkdir()
  r = run_cli("bert_data.create", *_args(big_corpus, ref_dir / "t.tfrecord"))
  assert r.returncode == 0, r.stderr
  want = [tfrecord.file_sha256(p) for p in layout.shard_paths(str(ref_dir / "t.tfrecord"), SHARDS)]

  env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="3")
  proc = subprocess.Popen([sys.executable, "-m", "bert_data.create",
                           *_args(big_corpus, dir_ / "t.tfrecord")], env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          start_new_session=True)
  deadline = time.time() + 120
  killed = False
  while time.time() < deadline and proc.poll() is None:
    done = [n for n in os.listdir(dir_) if n.endswith(".done")]
    if len(done) >= 2:  # mid-way through writing the shards
      os.killpg(proc.pid, signal.SIGKILL)
      killed = True
      break
    time.sleep(0.005)
  proc.wait()
  if not killed:
    pytest.skip("the run finished before it could be killed")
  assert _visible(dir_) == []  # nothing looks complete

  # Without --resume or --overwrite a rerun would start over; with --resume it
  # keeps the finished shards.
  r = run_cli("bert_data.create", *_args(big_corpus, dir_ / "t.tfrecord"), "--resume")
  assert r.returncode == 0, r.stderr
  got = [tfrecord.file_sha256(p) for p in layout.shard_paths(str(dir_ / "t.tfrecord"), SHARDS)]
  assert got == want
  assert _visible(dir_) == _visible(ref_dir)
  assert [n for n in os.listdir(dir_) if n.startswith(".")] == []


def test_resume_of_complete_output_keeps_it(tmp_path, big_corpus):
  out = tmp_path / "t.tfrecord"
  assert run_cli("bert_data.create", *_args(SAMPLE_TEXT, out)).returncode == 0
  before = [tfrecord.file_sha256(p) for p in layout.shard_paths(str(out), SHARDS)]
  r = run_cli("bert_data.create", *_args(SAMPLE_TEXT, out), "--resume")
  assert r.returncode == 0, r.stderr
  assert [tfrecord.file_sha256(p) for p in layout.shard_paths(str(out), SHARDS)] == before


def test_disk_full_keeps_earlier_output_and_leaves_no_partial_file(tmp_path, monkeypatch):
  """ENOSPC while writing: one clear error, earlier complete output untouched."""
  import errno
  from bert_data import generator
  from bert_data.config import BertConfig
  from textrecords.errors import UserError
  out = str(tmp_path / "t.tfrecord")
  cfg = BertConfig(input_files=(SAMPLE_TEXT,), output_files=(out,), vocab_file=VOCAB,
                   dupe_factor=2, num_shards=2)
  generator.create(cfg)
  before = {n: (tmp_path / n).read_bytes() for n in _visible(tmp_path)}

  def full(self, data):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

  def full_copy(*args):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

  monkeypatch.setattr(atomic_file.AtomicWriter, "_raw_write", full)
  monkeypatch.setattr(os, "copy_file_range", full_copy, raising=False)
  import dataclasses
  with pytest.raises(UserError, match="No space left"):
    generator.create(dataclasses.replace(cfg, overwrite=True, random_seed=7))
  monkeypatch.undo()
  assert {n: (tmp_path / n).read_bytes() for n in _visible(tmp_path)} == before
  assert [n for n in os.listdir(tmp_path) if ".tmp-" in n or "scratch" in n] == []
