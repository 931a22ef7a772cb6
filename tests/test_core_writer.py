"""textrecords core: DatasetWriter (atomic, resume, overwrite), seeding, input."""

import os
import time

import pytest

from textrecords.datasets import dataset_writer
from textrecords.datasets import metadata
from textrecords import seeding
from textrecords.files import spill
from textrecords.files import text_input
from textrecords.files import tfrecord
from textrecords.errors import UserError


def _write(tmp_path, fingerprint, records, overwrite=False, resume=False, stop_after=None):
  meta = str(tmp_path / "meta.json")
  dw = dataset_writer.DatasetWriter(meta, fingerprint, overwrite=overwrite, resume=resume)
  paths = [str(tmp_path / f"f{i}") for i in range(len(records))]
  written = []
  for i, (p, recs) in enumerate(zip(paths, records)):
    if stop_after is not None and i >= stop_after:
      return None, written
    if dw.is_finished(p):
      continue
    h = dw.open(p)
    for r in recs:
      h.write(tfrecord.frame(r), 1)
    h.commit()
    written.append(os.path.basename(p))
  return dw.finalize(paths, lambda infos: metadata.base_meta("test")), written


def test_complete_dataset_and_metadata(tmp_path):
  meta, _ = _write(tmp_path, {"a": 1}, [[b"1"], [b"2", b"3"]])
  # Each record file is followed (after all of them) by its offset index.
  assert [(f["name"], f["records"]) for f in meta["files"]] == [
      ("f0", 1), ("f1", 2), ("f0.index", 0), ("f1.index", 0)]
  assert sorted(os.listdir(tmp_path)) == ["f0", "f0.index", "f1", "f1.index", "meta.json"]
  read = metadata.read(str(tmp_path / "meta.json"), package="test")
  assert metadata.verified_files(read, str(tmp_path / "meta.json"), ["f0", "f1"]) == [
      str(tmp_path / "f0"), str(tmp_path / "f1")]


def test_interrupted_run_looks_incomplete_and_resumes(tmp_path):
  _, written = _write(tmp_path, {"a": 1}, [[b"1"], [b"2"], [b"3"]], stop_after=2)
  assert written == ["f0", "f1"]
  visible = [n for n in os.listdir(tmp_path) if not n.startswith(".")]
  assert visible == []  # nothing under a final name before finalize
  with pytest.raises(UserError, match="not found"):
    metadata.read(str(tmp_path / "meta.json"))
  meta, written = _write(tmp_path, {"a": 1}, [[b"1"], [b"2"], [b"3"]], resume=True)
  assert written == ["f2"]
  assert len(meta["files"]) == 6
  assert sorted(os.listdir(tmp_path)) == ["f0", "f0.index", "f1", "f1.index", "f2",
                                          "f2.index", "meta.json"]


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs Linux /proc")
def test_resume_removes_temp_files_of_workers_left_as_zombies(tmp_path):
  """A killed run's workers stay zombies where init never reaps them (CI's
  container): the resumed run must still remove their temp files."""
  _write(tmp_path, {"a": 1}, [[b"1"], [b"2"], [b"3"]], stop_after=1)
  zombie = os.fork()
  if zombie == 0:
    os._exit(0)
  try:
    for _ in range(10000):
      if open(f"/proc/{zombie}/stat").read().rsplit(")", 1)[1].split()[0] == "Z":
        break
      time.sleep(0.001)
    for name in ("f1", "f2"):
      (tmp_path / f".{name}.tmp-{zombie}-0123abcd").write_bytes(b"partial")
    meta, written = _write(tmp_path, {"a": 1}, [[b"1"], [b"2"], [b"3"]], resume=True)
  finally:
    os.waitpid(zombie, 0)
  assert written == ["f1", "f2"]
  assert sorted(os.listdir(tmp_path)) == ["f0", "f0.index", "f1", "f1.index", "f2",
                                          "f2.index", "meta.json"]


def test_resume_with_other_fingerprint_redoes_everything(tmp_path):
  _write(tmp_path, {"a": 1}, [[b"1"], [b"2"]], stop_after=1)
  _, written = _write(tmp_path, {"a": 2}, [[b"1"], [b"2"]], resume=True)
  assert written == ["f0", "f1"]


def test_existing_output_needs_overwrite(tmp_path):
  _write(tmp_path, {"a": 1}, [[b"1"]])
  with pytest.raises(UserError, match="--overwrite"):
    _write(tmp_path, {"a": 1}, [[b"1"]])
  meta, _ = _write(tmp_path, {"a": 1}, [[b"9", b"9"]], overwrite=True)
  assert meta["files"][0]["records"] == 2


def test_failed_overwrite_keeps_earlier_output(tmp_path):
  _write(tmp_path, {"a": 1}, [[b"1"]])
  before = (tmp_path / "f0").read_bytes()
  _write(tmp_path, {"a": 1}, [[b"2"], [b"3"]], overwrite=True, stop_after=1)
  assert (tmp_path / "f0").read_bytes() == before
  assert metadata.read(str(tmp_path / "meta.json"))["files"][0]["records"] == 1


def test_verified_files_catches_changes(tmp_path):
  _write(tmp_path, {"a": 1}, [[b"1" * 50], [b"2" * 50]])
  meta_path = str(tmp_path / "meta.json")
  meta = metadata.read(meta_path)
  data = bytearray((tmp_path / "f1").read_bytes())
  data[20] ^= 1
  (tmp_path / "f1").write_bytes(bytes(data))
  with pytest.raises(UserError, match="f1"):
    metadata.verified_files(meta, meta_path, ["f0", "f1"], "checksum")
  logged = []
  assert metadata.verified_files(meta, meta_path, ["f0", "f1"], "checksum",
                                 skip_corrupt=True, log=logged.append) == [str(tmp_path / "f0")]
  assert "f1" in logged[0]
  with pytest.raises(UserError, match="a test dataset; read it with test.make_dataset"):
    metadata.read(meta_path, package="bert_data")


def test_seeding_is_keyed_and_stable():
  assert seeding.derive_seed(1, 2, 3) == seeding.derive_seed(1, 2, 3)
  assert seeding.derive_seed(1, 2, 3) != seeding.derive_seed(1, 3, 2)
  assert seeding.derive_seed(1, "2") != seeding.derive_seed(1, 2)
  keys = [seeding.order_key(7, 0, d, 0) for d in range(4000)]
  shards = [seeding.shard_of(k, 4) for k in keys]
  assert all(800 < shards.count(s) < 1200 for s in range(4))


def test_spill_orders_globally(tmp_path):
  writers = [spill.SpillWriter(str(tmp_path), f"w{i}", 4, buffer_bytes=64, compress=i == 1)
             for i in range(2)]
  items = [(seeding.order_key(1, i), b"r%d" % i) for i in range(300)]
  for i, (k, r) in enumerate(items):
    writers[i % 2].add(k, r)
  for w in writers:
    w.close()
  got = [kr for b in range(4) for kr in spill.read_bucket(str(tmp_path), b)]
  assert got == sorted(items)


def test_read_lines_errors(tmp_path):
  bad = tmp_path / "bad.txt"
  bad.write_bytes(b"ok\nfine\xff\xfe here\n")
  with pytest.raises(UserError, match=r"bad.txt:2: invalid UTF-8"):
    list(text_input.read_lines(str(bad)))
  assert [t for _, t in text_input.read_lines(str(bad), "skip_line")] == ["ok"]
  assert list(text_input.read_lines(str(bad), "replace"))[1][1].startswith("fine\ufffd")
  binary = tmp_path / "bin.dat"
  binary.write_bytes(b"\x00\x01\x02abc")
  with pytest.raises(UserError, match="binary"):
    list(text_input.read_lines(str(binary)))
  crlf = tmp_path / "crlf.txt"
  crlf.write_bytes(b"a\r\nb\rc\n")
  assert [t for _, t in text_input.read_lines(str(crlf), drop_cr=True)] == ["a", "bc"]


def test_expand_patterns(tmp_path):
  for n in ("b.txt", "a.txt"):
    (tmp_path / n).write_text("x\n")
  got = text_input.expand_patterns(f"{tmp_path}/*.txt,{tmp_path}/b.txt")
  assert [os.path.basename(p) for p in got] == ["a.txt", "b.txt", "b.txt"]
  with pytest.raises(UserError, match="no file matches"):
    text_input.expand_patterns(f"{tmp_path}/*.md")


def test_resume_on_complete_output(tmp_path):
  _write(tmp_path, {"a": 1}, [[b"1"]])
  meta = str(tmp_path / "meta.json")
  dw = dataset_writer.DatasetWriter(meta, {"a": 1}, resume=True)
  assert dw.already_complete
  with pytest.raises(UserError, match="other inputs or flags"):
    dataset_writer.DatasetWriter(meta, {"a": 2}, resume=True)
