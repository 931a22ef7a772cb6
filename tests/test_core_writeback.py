"""Output files written to disk while they grow (`textrecords.files.writeback`)."""

import hashlib
import os
import threading

import pytest

from textrecords.files import atomic_file
from textrecords.files import writeback
from textrecords.errors import UserError


def _syncs_running():
  return [t for t in threading.enumerate() if t.name == "textrecords-writeback"]


def test_a_sync_starts_each_time_the_file_grew_by_every_bytes(tmp_path):
  with open(tmp_path / "f", "wb", buffering=0) as f:
    w = writeback.Writeback(f.fileno(), every=10)
    f.write(b"x" * 9)
    w.wrote(9)
    assert w.synced_to == 0  # not yet `every` bytes
    f.write(b"x" * 3)
    w.wrote(12)
    assert w.synced_to == 12
    w.wait()
    f.write(b"x" * 5)
    w.wrote(17)  # 5 bytes since the last sync began
    assert w.synced_to == 12
    f.write(b"x" * 20)
    w.wrote(37)
    w.wait()
    assert w.synced_to == 37
  assert not _syncs_running()


def test_a_failed_background_sync_is_raised_by_wait():
  read, write = os.pipe()  # a pipe cannot be synced (EINVAL)
  try:
    w = writeback.Writeback(write, every=1)
    w.wrote(1)
    with pytest.raises(OSError):
      w.wait()
    w.wait()  # reported once
  finally:
    os.close(read)
    os.close(write)


def _small_steps(writer):
  """Makes an AtomicWriter start a background sync every 100 bytes."""
  writer._writeback = writeback.Writeback(writer._raw.fileno(), every=100)  # pylint: disable=protected-access


@pytest.mark.parametrize("compression", ["", "GZIP"])
def test_atomic_writer_bytes_and_hash_unchanged_by_background_syncs(tmp_path, compression):
  chunks = [bytes([i % 251]) * (37 * i + 1) for i in range(60)]
  infos = []
  for name, steps in (("plain", False), ("synced", True)):
    w = atomic_file.AtomicWriter(str(tmp_path / name), compression)
    if steps:
      _small_steps(w)
    for c in chunks:
      w.write(c)
    part = tmp_path / f"{name}.part"
    part.write_bytes(b"".join(chunks[:7]))
    w.append_framed_file(str(part), 7)
    infos.append(w.commit())
  assert (tmp_path / "plain").read_bytes() == (tmp_path / "synced").read_bytes()
  assert infos[0]["sha256"] == infos[1]["sha256"] == \
      hashlib.sha256((tmp_path / "synced").read_bytes()).hexdigest()
  assert not _syncs_running()


def test_atomic_writer_abort_waits_for_the_sync_then_removes_the_temp(tmp_path):
  w = atomic_file.AtomicWriter(str(tmp_path / "f"))
  _small_steps(w)
  w.write(b"y" * 1000)
  w.abort()
  assert not _syncs_running()
  assert os.listdir(tmp_path) == []


def test_a_failed_background_sync_fails_the_commit_in_one_line(tmp_path):
  w = atomic_file.AtomicWriter(str(tmp_path / "f"))
  read, write = os.pipe()
  try:
    w._writeback = writeback.Writeback(write, every=1)  # pylint: disable=protected-access
    w.write(b"z" * 10)
    with pytest.raises(UserError, match=r"cannot write .*f: "):
      w.commit()
  finally:
    os.close(read)
    os.close(write)
  assert os.listdir(tmp_path) == []  # nothing half-written left
