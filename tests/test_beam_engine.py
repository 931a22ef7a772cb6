"""--engine=beam: the same bytes as --engine=local, on Beam's local runners.

Each generator runs twice on a tiny input, once per engine, into the same
path (bert's metadata records its output paths), and every file, metadata
included, must be byte-identical. One case per generator runs Beam's
in-memory runner, one its multi-processing runner with 2 workers (a real
second process; slower, so only one configuration each). No case may reach
the network: Beam's DirectRunner would try to download Prism first.
"""

import collections
import hashlib
import json
import os
import pickle
import shutil

import pytest

from conftest import REPO, SAMPLE_TEXT, TESTDATA, VOCAB, error_lines, run_cli, \
    write_varied_corpus

pytest.importorskip("apache_beam")

# pylint: disable=wrong-import-position
import apache_beam as beam

from bert_data import generator as bert_generator
from bert_data.config import BertConfig
from mt_data import config as mt_config
from mt_data import generator as mt_generator
from textrecords.datasets import direct_output
from textrecords.engine import EngineOptions, parse_pipeline_options
from textrecords.engine import protocol
from textrecords.engine import record_files
from textrecords.errors import UserError
from textrecords.files import storage
from textrecords.files import tfrecord
from w2v_data import generator as w2v_generator
from w2v_data.config import W2vConfig

IN_MEMORY = "runner=DirectRunner"
MULTI = "runner=DirectRunner,direct_num_workers=2,direct_running_mode=multi_processing"
LOCAL = EngineOptions()


@pytest.fixture(autouse=True)
def no_prism_no_network(monkeypatch):
  """Fails the test if Beam tries Prism or opens a URL."""
  from apache_beam.runners.portability import prism_runner  # pylint: disable=import-outside-toplevel
  import urllib.request  # pylint: disable=import-outside-toplevel
  calls = []

  def refuse(*args, **kwargs):
    calls.append(args)
    raise AssertionError("network or Prism use")

  monkeypatch.setattr(prism_runner.PrismRunner, "run_pipeline", refuse)
  monkeypatch.setattr(urllib.request, "urlopen", refuse)
  yield
  assert not calls


def _digests(folder):
  return {n: hashlib.sha256(open(os.path.join(folder, n), "rb").read()).hexdigest()
          for n in sorted(os.listdir(folder))}


def _without_indexes(digests, compressed):
  """How many files are not offset indexes; checks the indexes are there.

  Every non-empty uncompressed record file has its `.index` beside it (and
  `local == beam` checks their bytes); GZIP files have none.
  """
  indexes = [n for n in digests if n.endswith(".index")]
  assert bool(indexes) != compressed
  assert all(n[:-len(".index")] in digests for n in indexes)
  return len(digests) - len(indexes)


def _both(tmp_path, run, options):
  """Runs local then beam into the same folder; returns both digests."""
  out = tmp_path / "out"
  run(str(out), LOCAL)
  local = _digests(out)
  shutil.rmtree(out)
  run(str(out), EngineOptions("beam", options))
  return local, _digests(out)


def _bad_utf8_file(path, lines):
  """`lines` with invalid UTF-8 in some (at the start, inside, last); returns the path
  and how many lines are bad."""
  data = [line.encode() for line in lines]
  for i in (len(data), len(data) // 2, 0):
    data.insert(i, data[min(i, len(data) - 1)] + b" caf\xe9")
  path.write_bytes(b"\n".join(data) + b"\n")
  return str(path), 3


@pytest.mark.parametrize("options,shards,extra", [
    (IN_MEMORY, 4, dict(compression="GZIP", on_decode_error="replace")),
    (MULTI, 1, dict(do_whole_word_mask=True, on_decode_error="skip_line")),
    (IN_MEMORY, 2, dict(packing="full_sentences", next_sentence=False)),
    (IN_MEMORY, 3, dict(masking="dynamic", do_whole_word_mask=True)),
])
def test_bert_beam_equals_local(tmp_path, options, shards, extra):
  corpus = write_varied_corpus(tmp_path / "corpus.txt", 4)
  inputs = (corpus, SAMPLE_TEXT)
  bad = 0
  if "on_decode_error" in extra:  # decode-error counts: the metadata must still be equal
    messy, bad = _bad_utf8_file(tmp_path / "messy.txt",
                                ["a cat sat", "", "a dog sat on a mat", "the end"])
    inputs = (corpus, messy, SAMPLE_TEXT)

  def run(out, engine):
    os.makedirs(out)
    cfg = BertConfig(input_files=inputs, output_files=(f"{out}/t.tfrecord",),
                     vocab_file=VOCAB, dupe_factor=2, num_shards=shards, **extra)
    bert_generator.create(cfg, engine)

  local, beam = _both(tmp_path, run, options)
  gzip = extra.get("compression") == "GZIP"
  assert _without_indexes(local, gzip) == shards + 1 and local == beam
  counts = json.load(open(tmp_path / "out" / "t.tfrecord.meta.json", encoding="utf-8"))["counts"]
  word = {"replace": "replaced", "skip_line": "skipped"}.get(extra.get("on_decode_error"))
  assert counts[f"{word or 'replaced'}_lines"] == bad


def test_bert_beam_refusals_and_errors(tmp_path):
  """--reference_compatible (its order made in one machine) is refused in
  one line; too few instances for the shards, or for several --output_file
  datasets: the local error, and nothing left."""
  beam_engine = EngineOptions("beam", IN_MEMORY)
  out = tmp_path / "few"
  tiny = tmp_path / "tiny.txt"
  tiny.write_text("a cat sat on the mat\n" * 4)
  with pytest.raises(UserError, match="^--num_shards=30 .* makes only"):
    bert_generator.create(BertConfig(input_files=(str(tiny),),
                                     output_files=tuple(f"{out}/d{i}/t.tfrecord"
                                                        for i in range(30)),
                                     vocab_file=VOCAB, dupe_factor=1), beam_engine)
  with pytest.raises(UserError, match="--num_shards=500 .* makes only"):
    bert_generator.create(BertConfig(input_files=(SAMPLE_TEXT,),
                                     output_files=(f"{out}/t.tfrecord",), vocab_file=VOCAB,
                                     dupe_factor=1, num_shards=500), beam_engine)
  # nothing left, not even hidden finished files: the folder the run made is removed
  assert not out.exists()
  with pytest.raises(UserError, match="^--reference_compatible runs on the local engine only"):
    bert_generator.create(BertConfig(input_files=(SAMPLE_TEXT,),
                                     output_files=(f"{out}/r.tfrecord",), vocab_file=VOCAB,
                                     reference_compatible=True), beam_engine)


@pytest.mark.parametrize("options,extra", [
    (IN_MEMORY, dict(num_shards=3, compression="GZIP", min_freq=1, on_decode_error="replace")),
    (MULTI, dict(num_shards=2, model="cbow", min_freq=2, on_decode_error="skip_line")),
])
def test_w2v_beam_equals_local(tmp_path, options, extra):
  messy = tmp_path / "messy.txt"  # invalid UTF-8: this file is read line by line
  messy.write_bytes(b"the cat sat\nthe dog \xff sat on the mat\n\nthe cat\n")
  inputs = os.path.join(TESTDATA, "w2v_tiny.txt") + "," + str(messy)

  def run(out, engine):
    w2v_generator.create(W2vConfig(input_file=inputs, output_dir=out, **extra), engine)

  local, beam = _both(tmp_path, run, options)
  gzip = extra.get("compression") == "GZIP"
  assert _without_indexes(local, gzip) == extra["num_shards"] + 2 and local == beam


def test_w2v_beam_user_error_is_the_local_one(tmp_path):
  out = tmp_path / "w"
  cfg = W2vConfig(input_file=os.path.join(TESTDATA, "w2v_tiny.txt"), output_dir=str(out),
                  min_freq=100000)
  with pytest.raises(UserError) as local_error:
    w2v_generator.create(cfg)
  with pytest.raises(UserError) as beam_error:
    w2v_generator.create(cfg, EngineOptions("beam", IN_MEMORY))
  assert str(beam_error.value) == str(local_error.value)
  assert "leaves an empty vocabulary" in str(beam_error.value)
  assert not out.exists()  # nothing left: the folder the run made is removed
  with pytest.raises(UserError, match="--model=pv_dbow with --engine=beam"):
    w2v_generator.create(W2vConfig(input_file=cfg.input_file, output_dir=str(out),
                                  model="pv_dbow"), EngineOptions("beam", IN_MEMORY))


@pytest.mark.parametrize("options,extra,counted", [
    # reading stops after 25 pairs (in mt_pairs.txt): the bad lines after it are not read
    (IN_MEMORY, dict(num_train=20, num_val=5, min_freq=1, num_shards=3, compression="GZIP",
                     on_decode_error="skip_line"), {"skipped_lines": 3}),
    (MULTI, dict(num_train=0, num_val=7, num_shards=2, on_decode_error="replace"),
     {"replaced_lines": 6}),
])
def test_mt_beam_equals_local(tmp_path, options, extra, counted):
  pairs = open(os.path.join(TESTDATA, "mt_pairs.txt"), encoding="utf-8").read().split("\n")
  before, _ = _bad_utf8_file(tmp_path / "before.txt", pairs[:4])
  after, _ = _bad_utf8_file(tmp_path / "after.txt", pairs[4:8])
  inputs = ",".join([os.path.join(TESTDATA, "mt_messy.txt"), before,
                     os.path.join(TESTDATA, "mt_pairs.txt"), after])

  def run(out, engine):
    mt_generator.create(mt_config.MTConfig(input_file=inputs, output_dir=out, **extra),
                        log=lambda _: None, engine=engine)

  local, beam = _both(tmp_path, run, options)
  gzip = extra.get("compression") == "GZIP"
  assert _without_indexes(local, gzip) == 2 * extra["num_shards"] + 3 and local == beam
  meta = json.load(open(tmp_path / "out" / "meta.json", encoding="utf-8"))
  assert {k: meta["counts"][k] for k in ("replaced_lines", "skipped_lines")} == dict(
      {"replaced_lines": 0, "skipped_lines": 0}, **counted)


def test_pipeline_options_form():
  assert parse_pipeline_options(MULTI) == [
      "--runner=DirectRunner", "--direct_num_workers=2",
      "--direct_running_mode=multi_processing"]
  with pytest.raises(UserError, match="not key=value"):
    parse_pipeline_options("runner")
  with pytest.raises(UserError, match="needs --engine=beam"):
    EngineOptions("local", IN_MEMORY).validate()


def test_job_service_runs_are_not_cut_at_beams_300_s_stream_deadline():
  """Beam opens a portable job's state and message streams with
  job_server_timeout (300 s by default) as their deadline: longer jobs
  failed with DEADLINE_EXCEEDED. Unless given, it is a week."""
  from apache_beam.options.pipeline_options import PortableOptions  # pylint: disable=import-outside-toplevel
  from textrecords.engine import beam as beam_engine  # pylint: disable=import-outside-toplevel
  portable = "runner=PortableRunner,job_endpoint=localhost:8099"
  got = beam_engine.pipeline_options(portable).view_as(PortableOptions).job_server_timeout
  assert got == beam_engine.JOB_SERVER_TIMEOUT_S == 7 * 24 * 3600
  given = beam_engine.pipeline_options(portable + ",job_server_timeout=60")
  assert given.view_as(PortableOptions).job_server_timeout == 60


def test_cli_engine_flag_and_missing_extra(tmp_path):
  """The CLI flags reach the engine; without apache_beam: one line, exit 2, nothing written."""
  args = ["--input_file=" + os.path.join(TESTDATA, "mt_pairs.txt"), "--num_train=20",
          "--num_val=5", "--min_freq=1", "--quiet", "--engine=beam",
          "--beam_pipeline_options=" + IN_MEMORY]
  r = run_cli("mt_data.create", *args, f"--output_dir={tmp_path}/m")
  assert r.returncode == 0, r.stderr
  assert os.path.exists(tmp_path / "m" / "meta.json")

  shadow = tmp_path / "shadow" / "apache_beam"
  shadow.mkdir(parents=True)
  (shadow / "__init__.py").write_text("raise ImportError('No module named apache_beam')\n")
  env = {"PYTHONPATH": os.pathsep.join([str(shadow.parent), REPO])}
  for module, more in (("mt_data.create", args + [f"--output_dir={tmp_path}/x"]),
                       ("w2v_data.create", [f"--input_file={SAMPLE_TEXT}", "--engine=beam",
                                            f"--output_dir={tmp_path}/x"]),
                       ("bert_data.create", [f"--input_file={SAMPLE_TEXT}", "--engine=beam",
                                             f"--output_file={tmp_path}/x/t.tfrecord",
                                             f"--vocab_file={VOCAB}"])):
    r = run_cli(module, *more, env_extra=env)
    assert r.returncode == 2, (module, r.stderr)
    lines = error_lines(r.stderr)
    assert len(lines) == 1 and "pip install 'textrecords[beam]'" in lines[0], lines
    assert not os.path.exists(tmp_path / "x"), module


def _create_with(package, out, engine, **kw):
  if package == "bert_data":
    return bert_generator.create(BertConfig(input_files=(SAMPLE_TEXT,),
                                           output_files=(f"{out}/train.tfrecord",),
                                           vocab_file=VOCAB, dupe_factor=1, **kw), engine)
  if package == "w2v_data":
    return w2v_generator.create(W2vConfig(input_file=os.path.join(TESTDATA, "w2v_tiny.txt"),
                                         output_dir=out, min_freq=1, **kw), engine)
  return mt_generator.create(mt_config.MTConfig(input_file=os.path.join(TESTDATA, "mt_pairs.txt"),
                                                output_dir=out, num_train=8, num_val=2, min_freq=1,
                                                **kw), log=lambda _: None, engine=engine)


@pytest.mark.parametrize("package", ["bert_data", "w2v_data", "mt_data"])
def test_both_engines_run_in_the_one_skeleton(tmp_path, package):
  """textrecords.runs.run.GeneratorRun for both engines: a foreign file at an output
  path is refused before any work, --resume on the complete output (written by
  the other engine) changes nothing."""
  out = tmp_path / "out"
  out.mkdir()
  (out / "train.tfrecord").write_bytes(b"notes\n")
  beam = EngineOptions("beam", IN_MEMORY)
  for engine in (LOCAL, beam):
    with pytest.raises(UserError, match=f"{out}/train.tfrecord exists and is not a file of a "
                                        "textrecords dataset"):
      _create_with(package, str(out), engine)
    assert os.listdir(out) == ["train.tfrecord"]
  (out / "train.tfrecord").unlink()
  _create_with(package, str(out), beam)
  stats = {n: os.stat(out / n) for n in os.listdir(out)}
  for engine in (LOCAL, beam):
    _create_with(package, str(out), engine, resume=True)
    assert {n: (s.st_ino, s.st_mtime_ns) for n, s in stats.items()} == {
        n: (os.stat(out / n).st_ino, os.stat(out / n).st_mtime_ns) for n in os.listdir(out)}


def test_mt_beam_reads_byte_ranges_like_local(tmp_path, monkeypatch):
  """Files cut into many byte ranges of whole lines (64-byte chunks), read by
  different bundles: still the local run's bytes, with decode errors inside
  chunks and reading stopped after --num_train + --num_val pairs."""
  monkeypatch.setattr(mt_generator, "UNIT_BYTES", 64)
  pairs = open(os.path.join(TESTDATA, "mt_pairs.txt"), encoding="utf-8").read().split("\n")
  messy, _ = _bad_utf8_file(tmp_path / "messy.txt", pairs[:12])
  inputs = ",".join([messy, os.path.join(TESTDATA, "mt_pairs.txt")])

  def run(out, engine):
    mt_generator.create(mt_config.MTConfig(input_file=inputs, output_dir=out, num_train=20,
                                           num_val=6, min_freq=1, num_shards=2,
                                           on_decode_error="skip_line"),
                        log=lambda _: None, engine=engine)

  local, beam = _both(tmp_path, run, IN_MEMORY)
  assert _without_indexes(local, False) == 7 and local == beam
  meta = json.load(open(tmp_path / "out" / "meta.json", encoding="utf-8"))
  assert meta["counts"]["skipped_lines"] == 3


@pytest.mark.parametrize("mode", ["replace", "skip_line"])
def test_w2v_beam_reads_invalid_utf8_in_byte_ranges_like_local(tmp_path, monkeypatch, mode):
  """A file with invalid UTF-8 in many 64-byte ranges (each decoded line by
  line where it is read): the local run's bytes (read in one range) and
  decode counts; a line with no noise word left is named by its line in the file."""
  from w2v_data import corpus as corpus_lib  # pylint: disable=import-outside-toplevel
  tiny = open(os.path.join(TESTDATA, "w2v_tiny.txt"), encoding="utf-8").read().split("\n")
  messy, _ = _bad_utf8_file(tmp_path / "messy.txt", [l for l in tiny if l][:40])
  data = open(messy, "rb").read().split(b"\n")
  data[10] += b" \xff\xfe"
  open(messy, "wb").write(b"\n".join(data))
  inputs = ",".join([os.path.join(TESTDATA, "w2v_tiny.txt"), messy])

  def run(out, engine):
    if engine is not LOCAL:
      monkeypatch.setattr(corpus_lib, "CHUNK_BYTES", 64)
    w2v_generator.create(W2vConfig(input_file=inputs, output_dir=out, num_shards=2, min_freq=1,
                                  on_decode_error=mode), engine)

  local, beam = _both(tmp_path, run, IN_MEMORY)
  assert _without_indexes(local, False) == 4 and local == beam
  meta = json.load(open(tmp_path / "out" / "meta.json", encoding="utf-8"))
  assert meta["counts"]["replaced_lines" if mode == "replace" else "skipped_lines"] == 4
  if mode == "skip_line":
    two = tmp_path / "two.txt"
    two.write_bytes(b"a\nbad \xff\n" * 20 + b"a b a b a\n")
    with pytest.raises(UserError, match=r"two.txt:41: a center.s contexts cover every one"):
      w2v_generator.create(W2vConfig(input_file=str(two), output_dir=str(tmp_path / "o"),
                                    min_freq=1, subsample_t=1.0, on_decode_error=mode),
                          EngineOptions("beam", IN_MEMORY))


def test_bert_beam_units_from_byte_ranges_like_local(tmp_path, monkeypatch):
  """Files cut into many byte ranges (300-byte units: documents and runs of
  blank lines cross unit ends): the corpus of the units' pieces in order and
  the examples of each unit's share of it give the local run's bytes
  (read in 1 MiB units), packing included."""
  corpus = write_varied_corpus(tmp_path / "corpus.txt", 2)
  blanks = tmp_path / "blanks.txt"
  blanks.write_text("\n\nthe cat sat\n\n\n\na dog ran\nand sat\n\n" * 8 + "the end", encoding="utf-8")
  for packing in ("", "full_sentences", "doc_sentences"):

    def run(out, engine, packing=packing):
      os.makedirs(out)
      monkeypatch.setattr(bert_generator, "UNIT_BYTES", 1 << 20 if engine is LOCAL else 300)
      extra = dict(packing=packing, next_sentence=False) if packing else {}
      cfg = BertConfig(input_files=(corpus, str(blanks)), output_files=(f"{out}/t.tfrecord",),
                       vocab_file=VOCAB, dupe_factor=2, num_shards=2, **extra)
      bert_generator.create(cfg, engine)

    case = tmp_path / (packing or "default")
    case.mkdir()
    local, beam = _both(case, run, IN_MEMORY)
    assert _without_indexes(local, False) == 3 and local == beam


class _Interleaved(protocol.Generator):
  """Three records per unit for each of two files, keys interleaved across
  units (their runs overlap, so a writer merges them record by record)."""

  def examples(self, unit, values, state=None):
    return [(f, unit.index + 4 * k, b"f%d-u%d-k%d" % (f, unit.index, k))
            for k in range(3) for f in (0, 1)], None

  def merge_totals(self, partials):
    return None


def _outputs(items):
  """A step's outputs, a tagged one as (tag, value)."""
  return [(x.tag, x.value) if isinstance(x, beam.pvalue.TaggedOutput) else x for x in items]


def _parts(ds):
  folder = storage.local_path(ds.parts_dir())
  return {n: open(os.path.join(folder, n), "rb").read() for n in sorted(os.listdir(folder))}


def test_retried_steps_write_the_same_objects_and_only_references_travel(tmp_path):
  """A bundle that runs twice (Beam's retry, or a speculative copy) writes
  the same run objects, lane objects and file; what the examples and deal
  steps hand on is a reference (path, first key, last key), not records."""
  from textrecords.engine import beam as beam_engine  # pylint: disable=import-outside-toplevel
  ds = direct_output.DirectDataset(str(tmp_path / "out" / "meta.json"), {"x": 1})
  gen, units = _Interleaved(), [protocol.Unit(i, 0, "in.txt", i, i + 1) for i in range(3)]
  attempts = []
  for _ in range(2):
    out = [x for u in units for x in beam_engine._staged_unit(gen, u, {}, ds.parts_dir())]  # pylint: disable=protected-access
    attempts.append((_outputs(out), _parts(ds)))
  assert attempts[0] == attempts[1]
  refs = [x for x in attempts[0][0] if x[0] != beam_engine.TOTALS]
  assert len(refs) == 6 and all(f == ref[0] and isinstance(ref[1], str) for f, ref in refs)
  assert sorted(ref[2:4] for f, ref in refs if f == 0) == [(0, 8), (1, 9), (2, 10)]

  paths = [str(tmp_path / "out" / n) for n in ("a.tfrecord", "b.tfrecord")]
  files = [record_files.Target(0, p, "") for p in paths]
  infos = []
  for _ in range(2):
    for f in (0, 1):
      item = (f, {"records": [ref for g, ref in refs if g == f], "file": [None]})
      jobs = list(beam_engine._plan_segments(item, gen, [ds], files, 1 << 20, 1, []))  # pylint: disable=protected-access
      segments = [x for job in jobs for x in beam_engine._segment_items(job)]  # pylint: disable=protected-access
      written = [beam_engine._write_sorted(x, gen, [ds], files, []) for x in segments]  # pylint: disable=protected-access
      placed = []
      for x in _outputs(beam_engine._start_join((f, [x[1] for x in written]), [ds], files)):  # pylint: disable=protected-access
        if x[0] == beam_engine.JOINED:
          infos.append(x[1])
        else:
          placed.append(beam_engine._place_segment(x)[1])  # pylint: disable=protected-access
      if placed:
        infos += list(beam_engine._finished_file((f, placed), [ds], files))  # pylint: disable=protected-access
  assert infos[:2] == infos[2:] and all(info[1]["records"] == 9 for info in infos)
  dealt = []
  for _ in range(2):
    item = (0, [ref for g, ref in refs if g == 0])
    dealt.append((_outputs(beam_engine._deal_group(item, gen, 2, ds.parts_dir(), [])),  # pylint: disable=protected-access
                  _parts(ds)))
  assert dealt[0] == dealt[1]
  assert dealt[0][0][0] == (beam_engine.COUNTS, (0, 9))
  assert [(g, lane) for g, (lane, _) in dealt[0][0][1:]] == [(0, 0), (0, 1)]
  ds.finalize(paths, lambda infos: {"files": infos}, [info for _, info in infos[2:]])
  expected = sorted((u + 4 * k, b"f0-u%d-k%d" % (u, k)) for u in range(3) for k in range(3))
  assert list(tfrecord.read_records(paths[0])) == [r for _, r in expected]
  assert sorted(os.listdir(tmp_path / "out")) == [  # (finalize removes the parts folder)
      "a.tfrecord", "a.tfrecord.index", "b.tfrecord", "b.tfrecord.index", "meta.json"]


class _UnitList(protocol.Generator):
  """A partitioned pass whose value is its partition's unit indexes."""
  passes = (protocol.Pass("index", lambda unit, values: [unit.index],
                          lambda parts: sorted(sum(parts, [])), lambda merged: {"units": merged},
                          partitioned=True),)


def test_partition_value_is_staged_once_and_loaded_a_slot_at_a_time(tmp_path, monkeypatch):
  """A partitioned pass: each unit's partial and each partition's value are
  one object (the same on a retry), only paths go on; the units go in slots
  of `UNITS_PER_LOAD` consecutive units; a worker process keeps the last
  `VALUES_KEPT` values it loaded."""
  from textrecords.engine import beam as beam_engine  # pylint: disable=import-outside-toplevel
  gen, parts = _UnitList(), str(tmp_path / "parts")
  units = [protocol.Unit(i, 0, "in.txt", i, i + 1, partition=2) for i in range(6)]
  staged = [beam_engine._staged_partial(u, gen, "index", [], parts) for u in units]  # pylint: disable=protected-access
  assert staged[1] == (2, (units[1], storage.join(parts, "partial-u00000001")))
  attempts = [list(beam_engine._partition_value((2, [x for _, x in staged[::-1]]), gen, "index",  # pylint: disable=protected-access
                                                parts)) for _ in range(2)]
  path, n = storage.join(parts, "value-p000002"), beam_engine.UNITS_PER_LOAD
  assert attempts[0] == attempts[1] == [((2, i // n), (u, path)) for i, u in enumerate(units)]
  assert pickle.loads(storage.read_bytes(path)) == {"units": list(range(6))}

  paths = [storage.join(parts, "value-p%06d" % p) for p in range(3)]
  for p in (0, 1):
    storage.write_file(paths[p], pickle.dumps({"units": [p]}))
  reads = []
  real = storage.read_bytes
  monkeypatch.setattr(storage, "read_bytes", lambda p: reads.append(p) or real(p))
  monkeypatch.setattr(beam_engine, "_LOADED", collections.OrderedDict())
  loaded = [beam_engine._loaded_value(paths[p])["units"][0] for p in (0, 0, 1, 0, 2, 1, 0)]  # pylint: disable=protected-access
  assert loaded == [0, 0, 1, 0, 0, 1, 0] and beam_engine.VALUES_KEPT == 2
  assert [os.path.basename(p) for p in reads] == ["value-p%06d" % p for p in (0, 1, 2, 1, 0)]


def test_beam_examples_reuse_the_pass_reading(tmp_path, monkeypatch):
  """Every pair kept (mt): the counting pass's carried state (each unit's
  tokenized pairs) reaches the unit's examples as an object under the parts
  folder, so Beam reads each unit once, as the local engine does; the bytes
  are the local ones."""
  reads = []
  chunk = protocol.Unit.chunk
  monkeypatch.setattr(protocol.Unit, "chunk", lambda u: reads.append(u.index) or chunk(u))
  monkeypatch.setattr(mt_generator, "UNIT_BYTES", 200)
  inputs = os.path.join(TESTDATA, "mt_pairs.txt")
  n_units = len(protocol.units_from_sizes([inputs], 200))

  def run(out, engine):
    mt_generator.create(mt_config.MTConfig(input_file=inputs, output_dir=str(out), num_train=0,
                                           num_val=7, num_shards=2, num_workers=1),
                        log=lambda _: None, engine=engine)

  run(tmp_path / "local", LOCAL)
  reads.clear()
  run(tmp_path / "beam", EngineOptions("beam", IN_MEMORY))
  assert n_units > 3 and sorted(reads) == list(range(n_units))
  assert _digests(tmp_path / "local") == _digests(tmp_path / "beam")
