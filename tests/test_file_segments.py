"""Record files written in parallel segments (`textrecords.engine.file_segments`).

A file over `EngineOptions.segment_bytes` is cut into segments that workers
write apart and one step joins: the record bytes are one writer's, and the
metadata (its segments' offsets, sizes and sha256s) is the same on every
engine, worker count and unit size. The segment size is set small here
through `EngineOptions(segment_bytes=...)`.
"""

import hashlib
import json
import os

import numpy as np
import pytest

from conftest import SAMPLE_TEXT as BERT_SAMPLE, TESTDATA, VOCAB as BERT_VOCAB

from bert_data import generator as bert_generator
from bert_data import units as bert_units
from bert_data.config import BertConfig
from mt_data import config as mt_config
from mt_data import generator as mt_generator
from textrecords.datasets import direct_output
from textrecords.datasets import index
from textrecords.datasets import metadata
from textrecords.engine import EngineOptions
from textrecords.engine import file_segments
from textrecords.engine import generator_steps
from textrecords.engine import record_runs
from textrecords.errors import UserError
from textrecords.files import hashing
from textrecords.files import tfrecord
from w2v_data import corpus as w2v_corpus
from w2v_data import generator as w2v_generator
from w2v_data import reader as w2v_reader
from w2v_data.config import W2vConfig

W2V_TINY = os.path.join(TESTDATA, "w2v_tiny.txt")
MULTI = "runner=DirectRunner,direct_num_workers=2,direct_running_mode=multi_processing"


def _files(out) -> dict:
  """Every file's bytes by name; metadata as JSON without the fingerprint
  (input mtimes) and with the output folder replaced."""
  got = {}
  for n in sorted(os.listdir(out)):
    data = open(os.path.join(out, n), "rb").read()
    if n.endswith("meta.json"):
      meta = json.loads(data.decode().replace(str(out), "OUT"))
      meta.pop("fingerprint", None)
      got[n] = meta
    else:
      got[n] = hashlib.sha256(data).hexdigest()
  return got


def _records_only(files: dict) -> dict:
  return {n: v for n, v in files.items() if not n.endswith((".json", ".index"))}


def _segmented(meta: dict) -> list:
  """The record files listed with segments."""
  return [f for f in meta["files"] if f.get("segments") and f.get("role") != "index"]


def _index_is_one_writers(out, meta: dict) -> None:
  """Each segmented record file's offset index holds the bytes one writer
  gives it (`index.encode` of a scan of the file, with its metadata's size
  and sha256), and its metadata entry lists the index's parts (one per
  segment), whose hashes the reader's check accepts."""
  files = {f["name"]: f for f in meta["files"]}
  for entry in _segmented(meta):
    path = os.path.join(out, entry["name"])
    ipath = index.index_path(path)
    want = index.encode(index.scan(path), entry["name"], entry["bytes"], entry["sha256"])
    assert open(ipath, "rb").read() == want, entry["name"]
    listed = files[os.path.basename(ipath)]
    assert listed["bytes"] == len(want)
    assert len(listed["segments"]) == len(entry["segments"])
    assert listed["sha256"] == hashing.segments_sha256(listed["segments"])
    assert hashing.content_matches(ipath, listed)


# ---------------------------------------------------------------- the plan

def _runs(tmp_path, keyed_runs):
  """Run objects of file 0 (one per unit) and their entries."""
  entries = []
  for u, items in enumerate(keyed_runs):
    run = record_runs.from_keyed([(k, tfrecord.frame(b"x" * n)) for k, n in items])
    entries += generator_steps.keyed_runs(str(tmp_path), u, {0: run})
  return entries


def test_plan_cuts_at_the_first_record_after_each_share(tmp_path):
  """Runs in key order: a segment starts at the first record starting at or
  after j * bytes / n, wherever the units end; the records of each key
  range are the file's, in order."""
  entries = _runs(tmp_path, [[(1, 4), (2, 30)], [(5, 4), (6, 4), (7, 4)], [(9, 40)]])
  total = sum(e[4] for e in entries)  # framed (+16 each): 66 + 60 + 56 = 182
  plan = file_segments.plan(entries, None, total // 3 + 1)  # shares at 60 and 121
  assert plan == [(None, 5), (5, 9), (9, None)]
  whole = b"".join(r.data for r in generator_steps.merged_run(entries))
  parts = [b"".join(r.data for r in file_segments.segment_records(entries, *b)) for b in plan]
  assert b"".join(parts) == whole and all(parts)
  # Overlapping runs without allowed keys stay whole; with them, evenly spaced ones.
  mixed = _runs(tmp_path / "m", [[(1, 4), (8, 4)], [(2, 4), (9, 4)]])
  assert file_segments.plan(mixed, None, 1) == file_segments.WHOLE
  assert file_segments.plan(mixed, [3, 5, 7], 40) == [(None, 5), (5, None)]
  got = [[k for r in file_segments.segment_records(mixed, *b) for k, _ in r.records()]
         for b in [(None, 5), (5, None)]]
  assert got == [[1, 2], [8, 9]]


def test_segments_sha256_and_content_check(tmp_path):
  """A segmented entry's sha256 is that of its segments' lines; the check
  hashes each range and catches a changed byte."""
  path = tmp_path / "f"
  path.write_bytes(b"abcdef")
  segs = [{"offset": 0, "bytes": 2, "sha256": hashing.sha256_bytes(b"ab")},
          {"offset": 2, "bytes": 4, "sha256": hashing.sha256_bytes(b"cdef")}]
  info = {"sha256": hashing.segments_sha256(segs), "segments": segs}
  assert hashing.content_matches(str(path), info)
  path.write_bytes(b"abcdeF")
  assert not hashing.content_matches(str(path), info)


# ---------------------------------------------------------------- engines

def _w2v(out, engine, **kw):
  return w2v_generator.create(W2vConfig(input_file=W2V_TINY, output_dir=str(out), quiet=True,
                                        **kw), engine)


def _mt(out, engine, **kw):
  return mt_generator.create(mt_config.MTConfig(
      input_file=os.path.join(TESTDATA, "mt_pairs.txt"), output_dir=str(out), **kw),
      log=lambda _: None, engine=engine)


@pytest.mark.parametrize("create,patch", [(_w2v, "w2v"), (_mt, "mt")])
def test_segmented_file_equals_one_writer_local_and_dask(tmp_path, monkeypatch, create, patch):
  """w2v (records appended as units come) and mt (sorted runs merged): the
  record bytes of one writer; the same metadata, listing the segments, for
  1 and 2 local workers, small units and a Dask cluster."""
  pytest.importorskip("distributed")
  create(tmp_path / "whole", EngineOptions())
  small = EngineOptions(segment_bytes=1000)
  create(tmp_path / "one", small)
  create(tmp_path / "two", small, num_workers=2)
  if patch == "w2v":  # units of 900 bytes (launcher-side): segments do not follow units
    monkeypatch.setattr(w2v_corpus, "read_chunk_bytes", lambda *_: 900)
  else:
    monkeypatch.setattr(mt_generator, "UNIT_BYTES", 900)
  create(tmp_path / "units", small, num_workers=2)
  create(tmp_path / "dask", EngineOptions("dask", segment_bytes=1000), num_workers=2)
  whole, one = _files(tmp_path / "whole"), _files(tmp_path / "one")
  assert _records_only(one) == _records_only(whole)
  for name in ("two", "units", "dask"):
    assert _files(tmp_path / name) == one, name
  _index_is_one_writers(tmp_path / "one", one["meta.json"])
  meta = one["meta.json"]
  assert meta["format"] == metadata.SEGMENTED_FORMAT
  assert whole["meta.json"]["format"] == metadata.FORMAT
  (entry,) = _segmented(meta)
  assert len(entry["segments"]) >= 3
  assert entry["sha256"] == hashing.segments_sha256(entry["segments"])
  assert sum(s["bytes"] for s in entry["segments"]) == entry["bytes"]


def _bert(out, engine, **kw):
  os.makedirs(out, exist_ok=True)
  return bert_generator.create(BertConfig(
      input_files=(BERT_SAMPLE,), output_files=(f"{out}/t.tfrecord",), vocab_file=BERT_VOCAB,
      dupe_factor=2, quiet=True, **kw), engine)


@pytest.fixture
def threads_cluster():
  """A Dask cluster of worker threads in this process (so the tests' small
  bert buckets reach the workers)."""
  distributed = pytest.importorskip("distributed")
  with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                protocol="tcp", host="127.0.0.1",
                                dashboard_address=None) as cluster:
    yield cluster.scheduler_address.replace("tcp://", "")


def test_bert_packed_rows_cut_between_order_buckets_local_and_dask(tmp_path, monkeypatch,
                                                                 threads_cluster):
  """--pack_instances=3 with order buckets of ~3 kB: files cut only where
  a bucket starts (`BertGenerator.cut_keys`), the local engine's
  bucket-ordered run and Dask give the bytes and metadata of each other,
  the records those of one writer."""
  monkeypatch.setattr(bert_units, "_BUCKET_BYTES", 3000)
  monkeypatch.setattr(bert_generator, "UNIT_BYTES", 700)
  kw = dict(pack_instances=3, num_shards=2, num_workers=2)
  _bert(tmp_path / "whole", EngineOptions(), **kw)
  _bert(tmp_path / "local", EngineOptions(segment_bytes=5000), **kw)
  _bert(tmp_path / "dask", EngineOptions("dask", dask_scheduler=threads_cluster,
                                         segment_bytes=5000), **kw)
  local = _files(tmp_path / "local")
  assert _records_only(local) == _records_only(_files(tmp_path / "whole"))
  assert _files(tmp_path / "dask") == local
  assert _segmented(local["t.tfrecord.meta.json"])
  _index_is_one_writers(tmp_path / "local", local["t.tfrecord.meta.json"])


def test_w2v_beam_segmented_equals_local(tmp_path):
  """Beam's multi-processing runner: the local run's segmented file,
  index and metadata."""
  pytest.importorskip("apache_beam")
  _w2v(tmp_path / "local", EngineOptions(segment_bytes=2000))
  _w2v(tmp_path / "beam", EngineOptions("beam", MULTI, segment_bytes=2000))
  local = _files(tmp_path / "local")
  assert _segmented(local["meta.json"])
  assert _files(tmp_path / "beam") == local
  _index_is_one_writers(tmp_path / "beam", local["meta.json"])


# ---------------------------------------------------------------- failures and reading

def test_a_missing_segment_fails_the_join_and_leaves_nothing(tmp_path):
  """A segment object gone at the join: one line naming it, no finished
  file, index or info of the record file left."""
  out = tmp_path / "out"
  dataset = direct_output.DirectDataset(str(out / "meta.json"), {"x": 1})
  parts = dataset.parts_dir()
  segments = []
  for j, keys in enumerate([[1, 2], [3]]):
    run = record_runs.from_keyed([(k, tfrecord.frame(b"r%d" % k)) for k in keys])
    segments.append(file_segments.write_segment(file_segments.segment_path(parts, 0, j), [run]))
  os.remove(segments[1]["path"])
  with pytest.raises(UserError, match="segment 1 .* is missing"):
    file_segments.join_direct(dataset, str(out / "t.tfrecord"), segments)
  assert [n for n in os.listdir(out) if not n.startswith(".meta.json.parts")] == []


def test_reader_checks_a_segmented_file_and_catches_a_flipped_byte(tmp_path):
  """verify="checksum" hashes each segment: a segmented w2v dataset opens
  (its index is not stale) and reads every record; one flipped byte (same
  size) is a one-line error naming the file."""
  out = tmp_path / "w2v"
  _w2v(out, EngineOptions(segment_bytes=2000))
  meta = metadata.load(str(out / "meta.json"))
  (entry,) = _segmented(meta)
  source = w2v_reader.open_dataset(str(out), verify="checksum").source()
  assert len(source) == entry["records"]
  path = out / entry["name"]
  data = bytearray(path.read_bytes())
  data[entry["segments"][1]["offset"] + 20] ^= 1
  path.write_bytes(bytes(data))
  with pytest.raises(UserError, match="sha256 differs"):
    w2v_reader.open_dataset(str(out), verify="checksum")
  assert np.all(np.diff([s["offset"] for s in entry["segments"]]) > 0)


def test_segments_join_on_s3(s3_server):
  """S3 (moto): segments of 5 MiB and more join as a multipart upload of
  part copies, smaller ones through a streamed copy: the records end to
  end either way, the segments listed; the offset index joined from the
  parts each placement wrote, one writer's bytes."""
  _, fs = s3_server
  for name, sizes in (("big", [(6 << 20) // 1000, 30]), ("small", [30, 30])):
    dataset = direct_output.DirectDataset(f"s3://bkt/{name}/meta.json", {"x": 1})
    segments, whole = _segment_objects(dataset.parts_dir(), sizes, 977)
    info = file_segments.join_direct(dataset, f"s3://bkt/{name}/t.tfrecord", segments)
    assert fs.cat_file(f"bkt/{name}/.t.tfrecord.done-{dataset.run}") == whole, name
    assert [s["offset"] for s in info["segments"]] == [0, segments[0]["bytes"]]
    assert info["records"] == sum(sizes)
    got = fs.cat_file(f"bkt/{name}/.t.tfrecord.index.done-{dataset.run}")
    framed = len(tfrecord.frame(b"x" * (7 + 977)))  # (every record's size)
    assert got == index.encode(np.arange(sum(sizes) + 1) * framed, "t.tfrecord", len(whole),
                               info["sha256"]), name
    assert len(info["_index_info"]["segments"]) == 2  # its parts, joined on the store


def test_resume_keeps_a_segmented_file(tmp_path):
  """A complete segmented dataset turned back into finished files (a killed
  upload's staged copy, `dataset_writer.reopen`): --resume checks each
  segment's sha256 and keeps the file (the same inode), metadata equal."""
  from textrecords.datasets import dataset_writer  # pylint: disable=import-outside-toplevel
  out = tmp_path / "w2v"
  _w2v(out, EngineOptions(segment_bytes=2000))
  before = _files(out)
  (entry,) = _segmented(before["meta.json"])
  inode = os.stat(out / entry["name"]).st_ino
  dataset_writer.reopen(str(out / "meta.json"))
  _w2v(out, EngineOptions(segment_bytes=2000), resume=True)
  assert _files(out) == before
  assert os.stat(out / entry["name"]).st_ino == inode


def _segment_objects(parts, sizes=(3, 2, 4), pad=93):
  """Segment objects of file 0 under `parts`, of `sizes` records (keys
  0, 1, ... in order; 7 digits and `pad` bytes each), and the bytes of
  the file they make."""
  segments, whole, key = [], [], 0
  for j, n in enumerate(sizes):
    recs = [(key + i, tfrecord.frame(b"%07d" % (key + i) + b"x" * pad)) for i in range(n)]
    key += n
    whole += [r for _, r in recs]
    segments.append(file_segments.write_segment(
        file_segments.segment_path(parts, 0, j), [record_runs.from_keyed(recs)]))
  return segments, b"".join(whole)


@pytest.mark.parametrize("link", [True, False])
def test_local_placement_copies_each_segment_at_its_offset(tmp_path, monkeypatch, link):
  """A local join as the engines run it: a small first step (segment 0
  linked as the temp file, or the temp file made empty where links are
  refused), one placement per segment copying only that segment's bytes
  to its offset (counted at os.copy_file_range), a last step: the file of
  one writer, its index, its segments listed."""
  from textrecords.files import storage  # pylint: disable=import-outside-toplevel
  if not link:
    monkeypatch.setattr(storage, "link_local", lambda *_: False)
  out = tmp_path / "out"
  dataset = direct_output.DirectDataset(str(out / "meta.json"), {"x": 1})
  segments, whole = _segment_objects(dataset.parts_dir())
  started = file_segments.start_direct(dataset, str(out / "t.tfrecord"), segments)
  offsets = [0, segments[0]["bytes"], segments[0]["bytes"] + segments[1]["bytes"]]
  assert [p["offset"] for p in started] == offsets
  real, calls = os.copy_file_range, []

  def counted(src, dst, count, offset_src=None, offset_dst=None):
    n = real(src, dst, count, offset_src, offset_dst)
    calls[-1].append((offset_dst, n))
    return n
  monkeypatch.setattr(os, "copy_file_range", counted)
  reader, reads = generator_steps.range_reader, []

  def counted_reader(path):
    reads[-1].append(path)
    return reader(path)
  monkeypatch.setattr(generator_steps, "range_reader", counted_reader)
  placed = []
  for p in reversed(started):  # (any order, any worker)
    calls.append([])
    reads.append([])
    placed.append(file_segments.place(p))
  placed.reverse()
  calls.reverse()
  for j, (p, s) in enumerate(zip(placed, segments)):
    copied = 0 if (link and j == 0) else s["bytes"]
    assert p["copied"] == copied
    assert sum(n for _, n in calls[j]) == copied
    assert all(offsets[j] <= at and at + n <= offsets[j] + s["bytes"] for at, n in calls[j])
  assert [len(r) for r in reads] == [1, 1, 1]  # each placement read its own starts
  assert not any(os.path.exists(s["path"]) for s in segments)  # removed as placed
  reads.append([])
  assert file_segments.place(started[1])["copied"] == 0  # a retry: found in place
  reads.append([])
  info = file_segments.finish_direct(dataset, str(out / "t.tfrecord"), placed)
  assert reads[-1] == []  # the last step read no segment's starts
  assert (out / f".t.tfrecord.done-{dataset.run}").read_bytes() == whole
  assert [s["offset"] for s in info["segments"]] == offsets and info["records"] == 9
  index_info = info["_index_info"]
  got = (out / f".t.tfrecord.index.done-{dataset.run}").read_bytes()
  assert got == index.encode(index.scan(str(out / f".t.tfrecord.done-{dataset.run}")),
                             "t.tfrecord", len(whole), info["sha256"])
  assert len(got) == index_info["bytes"] and len(index_info["segments"]) == 3
  assert not any(".tmp-" in n for n in os.listdir(out))
  assert not any(os.path.exists(s["path"]) for s in segments)


@pytest.mark.parametrize("fault", ["missing", "short"])
def test_a_failed_placement_leaves_nothing(tmp_path, fault):
  """A segment gone or cut short after the first step: its placement fails
  in one line naming it, the temp file is removed, later placements and
  the last step fail too, and no finished file, index or info is left."""
  out = tmp_path / "out"
  dataset = direct_output.DirectDataset(str(out / "meta.json"), {"x": 1})
  segments, _ = _segment_objects(dataset.parts_dir())
  started = file_segments.start_direct(dataset, str(out / "t.tfrecord"), segments)
  placed = [file_segments.place(started[0])]
  if fault == "missing":
    os.remove(segments[1]["path"])
  else:
    with open(segments[1]["path"], "r+b") as f:
      f.truncate(segments[1]["bytes"] - 5)
  with pytest.raises(UserError, match="segment-f00000-s00001"):
    file_segments.place(started[1])
  with pytest.raises(UserError, match="cannot write"):
    file_segments.place(started[2])
  assert [n for n in os.listdir(out) if not n.startswith(".meta.json.parts")] == []
  with pytest.raises(UserError, match="2 of its 3 segments placed"):
    file_segments.finish_direct(dataset, str(out / "t.tfrecord"),
                                placed + [dict(started[2], copied=0)])
  assert [n for n in os.listdir(out) if not n.startswith(".meta.json.parts")] == []
