"""Group merges of a segmented file's runs (`file_segments.group_levels`).

Where every unit's run spans the file's keys (bert's order buckets), each
segment would read every run: units x segments reads. The runs are first
merged in groups (a task each), so that the reads stay about units +
segments, and the file's bytes stay those of one writer.
"""

import os

import pytest

from conftest import SAMPLE_TEXT as BERT_SAMPLE, VOCAB as BERT_VOCAB

from bert_data import generator as bert_generator
from bert_data import units as bert_units
from bert_data.config import BertConfig
from textrecords.engine import EngineOptions
from textrecords.engine import file_segments
from textrecords.engine import generator_steps
from textrecords.engine import local
from textrecords.engine import record_runs
from textrecords.files import storage
from textrecords.files import tfrecord


def _spanning_runs(folder, units: int, keys: int):
  """Run objects of file 0, one per unit, each spanning keys [0, keys)
  (unit u has keys u, u + units, ... and, for ties, keys 0 and keys - 1
  again)."""
  entries = []
  for u in range(units):
    items = sorted([(0, tfrecord.frame(b"t%d" % u)), (keys - 1, tfrecord.frame(b"e%d" % u))]
                   + [(k, tfrecord.frame(b"r%d-%d" % (u, k))) for k in range(u, keys, units)])
    entries += generator_steps.keyed_runs(str(folder), u, {0: record_runs.from_keyed(items)})
  return entries


class _Opens:
  """Counts the run objects opened for reading (a ranged reader or a whole read)."""

  def __init__(self, monkeypatch):
    self.count = 0
    reader, whole = generator_steps.range_reader, storage.read_bytes

    def range_reader(path):
      self.count += 1
      return reader(path)

    def read_bytes(path):
      self.count += 1
      return whole(path)
    monkeypatch.setattr(generator_steps, "range_reader", range_reader)
    monkeypatch.setattr(storage, "read_bytes", read_bytes)


def _segments(entries, plan):
  return [b"".join(r.data for r in file_segments.segment_records(
      file_segments.touching(entries, b), *b)) for b in plan]


@pytest.mark.parametrize("units,segments,fan_in,levels", [(48, 8, 64, 1), (64, 16, 4, 2)])
def test_group_merges_keep_bytes_and_reads_linear(tmp_path, monkeypatch, units, segments,
                                                 fan_in, levels):
  """Segments read from the group runs give each segment's bytes as read
  from the units' runs; runs opened: units x segments without the
  groups, units per level (log_fan_in(segments) levels) + units +
  segments with them, one or several levels (a capped fan-in)."""
  entries = _spanning_runs(tmp_path, units, 4 * units)
  total = sum(e[4] for e in entries)
  plan = file_segments.plan(entries, list(range(1, 4 * units)), -(-total // segments))
  assert len(plan) == segments
  opens = _Opens(monkeypatch)
  plain = _segments(entries, plan)
  assert opens.count == units * segments
  opens.count = 0
  found = file_segments.group_levels(entries, plan, fan_in)
  assert len(found) == levels
  for level in found:
    for outs, part in level:
      assert len(part) <= fan_in and len(outs) <= fan_in
      assert file_segments.merge_group((outs, part)) == outs
  grouped = file_segments.grouped(entries, found)
  assert file_segments.segment_reads(grouped, plan) <= units + segments
  assert _segments(grouped, plan) == plain
  # each level reads every record once; the segments about units runs in all
  assert opens.count <= units * (levels + 1) + segments


def test_local_engine_merges_groups_in_worker_processes(tmp_path):
  """The local engine's segmented files (`local._merged_groups`): the
  groups merged by two worker processes, the segments' bytes unchanged."""
  entries = _spanning_runs(tmp_path, 24, 96)
  total = sum(e[4] for e in entries)
  plan = file_segments.plan(entries, list(range(1, 96)), -(-total // 6))
  plain = _segments(entries, plan)
  read = local._merged_groups({0: entries}, {0: plan}, 2)[0]  # pylint: disable=protected-access
  assert file_segments.segment_reads(read, plan) <= len(entries) + len(plan)
  assert _segments(read, plan) == plain


def test_narrow_runs_are_not_grouped(tmp_path):
  """Runs in key order (w2v, mt): each segment reads its own, no group."""
  entries = []
  for u in range(8):
    run = record_runs.from_keyed([(10 * u + k, tfrecord.frame(b"x" * 20)) for k in range(10)])
    entries += generator_steps.keyed_runs(str(tmp_path), u, {0: run})
  plan = file_segments.plan(entries, None, 500)
  assert len(plan) > 2
  assert file_segments.group_levels(entries, plan) == []


# ---------------------------------------------------------------- engines

from test_file_segments import _files  # noqa: E402  pylint: disable=wrong-import-position


@pytest.fixture
def bert_corpus(tmp_path, monkeypatch):
  """bert's sample as 12 documents' copies (36 documents), units of 4 kB
  and order buckets of 3 kB: 14 runs, each spanning the file's buckets."""
  text = open(BERT_SAMPLE).read().strip() + "\n\n"
  path = tmp_path / "corpus.txt"
  path.write_text(text * 12)
  monkeypatch.setattr(bert_units, "_BUCKET_BYTES", 3000)
  monkeypatch.setattr(bert_generator, "UNIT_BYTES", 4000)
  return str(path)


def _bert(corpus, out, engine):
  os.makedirs(out, exist_ok=True)
  bert_generator.create(BertConfig(
      input_files=(corpus,), output_files=(f"{out}/t.tfrecord",), vocab_file=BERT_VOCAB,
      dupe_factor=2, num_shards=1, num_workers=2, quiet=True), engine)
  return _files(out)


def _grouping(monkeypatch) -> list:
  """The group levels the engine plans (recorded as it asks)."""
  seen = []
  plan_levels = file_segments.group_levels

  def group_levels(*args, **kw):
    seen.append(plan_levels(*args, **kw))
    return seen[-1]
  monkeypatch.setattr(file_segments, "group_levels", group_levels)
  return seen


def test_bert_grouped_segments_dask_equal_local(tmp_path, monkeypatch, bert_corpus):
  """Dask (worker threads, so the small buckets reach them): runs merged
  in groups before the segments; the local engine's bytes and metadata,
  the records those of one writer."""
  distributed = pytest.importorskip("distributed")
  seen = _grouping(monkeypatch)
  small = dict(segment_bytes=20000)
  local = _bert(bert_corpus, tmp_path / "local", EngineOptions(**small))
  seen.clear()  # (the local engine writes bert's file whole, in bucket order)
  with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                protocol="tcp", host="127.0.0.1",
                                dashboard_address=None) as cluster:
    address = cluster.scheduler_address.replace("tcp://", "")
    dask = _bert(bert_corpus, tmp_path / "dask",
                 EngineOptions("dask", dask_scheduler=address, **small))
  assert any(seen), "no group merge planned"
  assert dask == local
  assert local["t.tfrecord.meta.json"]["files"][0].get("segments")
  whole = _bert(bert_corpus, tmp_path / "whole", EngineOptions())
  assert whole["t.tfrecord"] == local["t.tfrecord"]


def test_bert_grouped_segments_beam_equal_local(tmp_path, monkeypatch, bert_corpus):
  """Beam (in this process, so the small buckets reach its workers): runs
  merged in groups before the segments, the local engine's bytes."""
  pytest.importorskip("apache_beam")
  seen = _grouping(monkeypatch)
  small = dict(segment_bytes=20000)
  local = _bert(bert_corpus, tmp_path / "local", EngineOptions(**small))
  seen.clear()
  beam = _bert(bert_corpus, tmp_path / "beam", EngineOptions(
      "beam", "runner=DirectRunner,direct_num_workers=1,direct_running_mode=in_memory",
      **small))
  assert any(seen), "no group merge planned"
  assert beam == local


def test_group_merge_on_s3_equals_local(tmp_path, s3_server, monkeypatch):
  """S3 (moto): runs read a chunk at a time through ranged reads (the first
  read holding the count, keys and starts) and band runs uploaded in
  `BAND_WRITE_BLOCK` parts give the bytes of the same merge on disk."""
  _, fs = s3_server
  monkeypatch.setattr(file_segments, "GROUP_MERGE_BUDGET", 4096)
  monkeypatch.setattr(record_runs, "MIN_CHUNK", 256)
  got = {}
  for where in (str(tmp_path / "runs"), "s3://bkt/groups"):
    entries = _spanning_runs(where, 6, 600)
    plan = [(None, 150), (150, 300), (300, 450), (450, None)]
    levels = file_segments.group_levels(entries, plan, 3)
    assert levels
    got[where[:2]] = [storage.read_bytes(o[1]) for level in levels for g in level
                      for o in file_segments.merge_group(g)]
  assert got["s3"] == got[str(tmp_path)[:2]] and any(got["s3"])
  assert fs.ls("bkt/groups")


def test_unit_runs_read_without_asking_their_size(tmp_path, monkeypatch):
  """A unit's run is read by a group merge or a segment with its size from
  its entry's data bytes (no HEAD on a store); only band runs, planned before
  they are written, are asked theirs."""
  monkeypatch.setattr(file_segments, "GROUP_MERGE_BUDGET", 4096)
  monkeypatch.setattr(record_runs, "MIN_CHUNK", 256)
  entries = _spanning_runs(tmp_path / "runs", 6, 600)
  plan = [(None, 150), (150, 300), (300, 450), (450, None)]
  levels = file_segments.group_levels(entries, plan, 3)
  want = _segments(entries, plan)  # the runs merged in one go
  for e in entries:
    run = record_runs.from_bytes(storage.read_bytes(e[1]))
    assert record_runs.object_bytes(len(run.keys), e[4]) == os.path.getsize(e[1])
  asked = []
  size = storage.size
  monkeypatch.setattr(storage, "size", lambda p: asked.append(p) or size(p))
  for level in levels:
    for g in level:
      file_segments.merge_group(g)
  got = _segments(file_segments.grouped(entries, levels), plan)
  units = {e[1] for e in entries}
  assert got == want and any(got)
  assert asked and not units & set(asked)
