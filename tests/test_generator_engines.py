"""The generator protocol (`textrecords.engine.protocol`) on every engine, with
mt_data, w2v_data and bert_data.

Each is declared once (`mt_data/generator.py`, `w2v_data/generator.py`,
`bert_data/generator.py`); the local engine must write the bytes of the
releases before the protocol (digests in `testdata/mt_golden.json` and
`testdata/w2v_golden.json`, made by the earlier `pipeline.py`s; bert_data's
goldens in `test_bert_golden.py`), and Beam (2 worker processes) and Dask (a
scheduler and two workers started as separate processes, and a local
cluster) the local engine's bytes. Bad input gives the local engine's
one-line error on every engine.
"""

import contextlib
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

from conftest import REPO, SAMPLE_TEXT as BERT_SAMPLE, TESTDATA, VOCAB as BERT_VOCAB, \
    error_lines, free_port, run_cli, write_varied_corpus

from bert_data import generator as bert_generator
from bert_data.config import BertConfig
from mt_data import config as mt_config
from mt_data import generator as mt_generator
from textrecords.engine import EngineOptions, check_scheduler
from textrecords.engine import generator_steps
from textrecords.engine import protocol
from textrecords.engine import record_runs
from textrecords.errors import UserError
from w2v_data import corpus as w2v_corpus
from w2v_data import generator as w2v_generator
from w2v_data.config import W2vConfig

GOLDEN = os.path.join(TESTDATA, "mt_golden.json")
W2V_GOLDEN = os.path.join(TESTDATA, "w2v_golden.json")
MULTI = "runner=DirectRunner,direct_num_workers=2,direct_running_mode=multi_processing"
IN_MEMORY_BEAM = "runner=DirectRunner"
CASES = {
    "limit_skip_gzip": dict(num_train=20, num_val=5, min_freq=1, num_shards=3,
                            compression="GZIP", on_decode_error="skip_line"),
    "all_replace": dict(num_train=0, num_val=7, num_shards=2, on_decode_error="replace"),
    "bpe": dict(num_train=30, num_val=0, tokenizer="bpe", vocab_size=80, min_freq=1,
                num_shards=2, on_decode_error="replace"),
}


def _bad_utf8_file(path, lines) -> str:
  """`lines` with invalid UTF-8 lines added at the start, inside and last."""
  data = [line.encode() for line in lines]
  for i in (len(data), len(data) // 2, 0):
    data.insert(i, data[min(i, len(data) - 1)] + b" caf\xe9")
  path.write_bytes(b"\n".join(data) + b"\n")
  return str(path)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> str:
  d = tmp_path_factory.mktemp("mt_inputs")
  pairs = open(os.path.join(TESTDATA, "mt_pairs.txt"), encoding="utf-8").read().split("\n")
  return ",".join([os.path.join(TESTDATA, "mt_messy.txt"),
                   _bad_utf8_file(d / "before.txt", pairs[:4]),
                   os.path.join(TESTDATA, "mt_pairs.txt"),
                   _bad_utf8_file(d / "after.txt", pairs[4:8])])


def _digests(out, normalized=False) -> dict:
  """sha256 of every file; `normalized`: the metadata without what depends on
  the machine (fingerprint: mtimes; input paths; the version)."""
  got = {}
  for n in sorted(os.listdir(out)):
    data = open(os.path.join(out, n), "rb").read()
    if n == "meta.json" and normalized:
      meta = json.loads(data)
      meta.pop("fingerprint")
      meta.pop("version")
      for i in meta.get("inputs", []):
        i["path"] = os.path.basename(i["path"])
      data = json.dumps(meta, sort_keys=True).encode()
    got[n] = hashlib.sha256(data).hexdigest()
  return got


def _create(out, inputs_, engine=EngineOptions(), **kw):
  return mt_generator.create(mt_config.MTConfig(input_file=inputs_, output_dir=str(out), **kw),
                             log=lambda _: None, engine=engine)


@pytest.mark.parametrize("case", sorted(CASES))
def test_mt_local_bytes_are_the_earlier_releases(tmp_path, monkeypatch, inputs, case):
  """Whole units and 7-byte units (lines cut anywhere), 1 and 2 workers: the
  digests the pipeline before the protocol wrote."""
  golden = json.load(open(GOLDEN, encoding="utf-8"))[case]
  _create(tmp_path / "a", inputs, num_workers=1, **CASES[case])
  assert _digests(tmp_path / "a", normalized=True) == golden
  monkeypatch.setattr(mt_generator, "UNIT_BYTES", 7)
  _create(tmp_path / "b", inputs, num_workers=2, **CASES[case])
  assert _digests(tmp_path / "b", normalized=True) == golden


def test_units_come_from_sizes_and_tile_the_lines(tmp_path):
  """Ranges cut anywhere read each line once, in order (a line belongs to the
  range it starts in), without reading to list them."""
  text = "ab\ncd\n\nefgh\ni"
  p = tmp_path / "t.txt"
  p.write_text(text)
  from textrecords.files import text_input  # pylint: disable=import-outside-toplevel
  for size in range(1, 15):
    lines = []
    for u in protocol.units_from_sizes([str(p)], size):
      lines += text_input.chunk_lines(u.chunk())[0]
    assert lines == text.split("\n"), size


# ---------------------------------------------------------------- Beam and Dask

def test_mt_beam_two_workers_equals_local(tmp_path, inputs, monkeypatch):
  pytest.importorskip("apache_beam")
  from apache_beam.runners.portability import prism_runner  # pylint: disable=import-outside-toplevel

  def refuse(*_, **__):
    raise AssertionError("Prism use")

  monkeypatch.setattr(prism_runner.PrismRunner, "run_pipeline", refuse)
  monkeypatch.setattr(mt_generator, "UNIT_BYTES", 300)  # many units (launcher-side)
  kw = CASES["limit_skip_gzip"]
  _create(tmp_path / "local", inputs, **kw)
  _create(tmp_path / "beam", inputs, EngineOptions("beam", MULTI), **kw)
  assert _digests(tmp_path / "local") == _digests(tmp_path / "beam")


def _wait_port(port: int, proc, what: str):
  deadline = time.monotonic() + 60
  while True:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
      return
    if proc.poll() is not None or time.monotonic() > deadline:
      raise RuntimeError(f"{what} did not start")
    time.sleep(0.2)


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory):
  """A scheduler and two single-threaded workers, each its own process, on 127.0.0.1."""
  pytest.importorskip("distributed")
  port = free_port()
  env = dict(os.environ, PYTHONPATH=REPO)
  cwd = str(tmp_path_factory.mktemp("dask"))  # workers run elsewhere: absolute paths only
  procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler",
                             "--host", "127.0.0.1", "--port", str(port),
                             "--dashboard-address", ":0"],
                            env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)]
  try:
    _wait_port(port, procs[0], "dask scheduler")
    for _ in range(2):
      procs.append(subprocess.Popen(
          [sys.executable, "-m", "distributed.cli.dask_worker", f"tcp://127.0.0.1:{port}",
           "--nthreads", "1", "--nworkers", "1", "--no-dashboard", "--host", "127.0.0.1"],
          env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    import distributed  # pylint: disable=import-outside-toplevel
    with distributed.Client(f"tcp://127.0.0.1:{port}", timeout="30s") as client:
      client.wait_for_workers(2, timeout=60)
    yield f"127.0.0.1:{port}"
  finally:
    for p in reversed(procs):
      p.terminate()
    for p in procs:
      try:
        p.wait(timeout=30)
      except subprocess.TimeoutExpired:
        p.kill()


def _worker_pids(scheduler: str) -> dict:
  """Each worker's pid -> tasks it ran (its transitions to memory)."""
  import distributed  # pylint: disable=import-outside-toplevel
  with distributed.Client(f"tcp://{scheduler}", timeout="30s") as client:
    return client.run(lambda dask_worker: (os.getpid(), sum(
        1 for entry in dask_worker.state.log if len(entry) > 2 and entry[2] == "memory")))


def test_mt_dask_cluster_and_local_cluster_equal_local(tmp_path, inputs, dask_cluster,
                                                        monkeypatch):
  monkeypatch.setattr(mt_generator, "UNIT_BYTES", 300)
  kw = CASES["all_replace"]
  _create(tmp_path / "local", inputs, **kw)
  local = _digests(tmp_path / "local")
  _create(tmp_path / "dask", inputs, EngineOptions("dask", dask_scheduler=dask_cluster), **kw)
  assert _digests(tmp_path / "dask") == local
  ran = _worker_pids(dask_cluster)
  assert len(ran) == 2 and all(n > 0 for _, n in ran.values()), ran  # both workers worked
  assert os.getpid() not in {pid for pid, _ in ran.values()}
  _create(tmp_path / "lc", inputs, EngineOptions("dask"), num_workers=2, **kw)
  assert _digests(tmp_path / "lc") == local


def test_mt_bad_input_on_dask_is_the_local_one_line_error(tmp_path, inputs, dask_cluster):
  bad = tmp_path / "bad.txt"
  bad.write_bytes(b"Go.\tVa !\n" * 40 + b"Hi.\tSalut caf\xe9 !\n")
  errors = []
  for name, engine in (("local", EngineOptions()),
                       ("dask", EngineOptions("dask", dask_scheduler=dask_cluster))):
    with pytest.raises(UserError) as e:
      _create(tmp_path / name, str(bad), engine, num_train=0, num_val=2)
    errors.append(str(e.value))
    assert not os.path.exists(tmp_path / name / "meta.json")
    assert not [n for n in os.listdir(tmp_path / name) if not n.startswith(".")] \
        if os.path.exists(tmp_path / name) else True
  assert errors[0] == errors[1] and f"{bad}:41: invalid UTF-8" in errors[0]
  assert "\n" not in errors[0]


def test_dask_flags_and_missing_extra(tmp_path):
  """--dask_scheduler checked; without dask.distributed: one line naming the
  extra, exit 2, nothing written; the generators not yet declared refuse Dask."""
  with pytest.raises(UserError, match="expected HOST:PORT"):
    check_scheduler("localhost")
  with pytest.raises(UserError, match="needs --engine=dask"):
    EngineOptions("local", dask_scheduler="127.0.0.1:8786").validate()
  with pytest.raises(UserError, match=r"runs only generators declared with "
                     r"textrecords\.engine\.protocol \(bert_data, w2v_data, mt_data\)"):
    EngineOptions("dask").validate(["out"])  # a generator not declared
  shadow = tmp_path / "shadow" / "distributed"
  shadow.mkdir(parents=True)
  (shadow / "__init__.py").write_text("raise ImportError('No module named distributed')\n")
  env = {"PYTHONPATH": os.pathsep.join([str(shadow.parent), REPO])}
  r = run_cli("mt_data.create", "--input_file=" + os.path.join(TESTDATA, "mt_pairs.txt"),
              f"--output_dir={tmp_path}/x", "--engine=dask", "--quiet", env_extra=env)
  assert r.returncode == 2, r.stderr
  lines = error_lines(r.stderr)
  assert len(lines) == 1 and "pip install 'textrecords[dask]'" in lines[0], lines
  assert not os.path.exists(tmp_path / "x")
  shutil.rmtree(shadow.parent)


@pytest.mark.parametrize("package", ["mt_data", "w2v_data"])
def test_packages_declare_their_generator_without_engines(package):
  """The package holds the declaration only: no Beam, no Dask, no engine module."""
  folder = os.path.join(REPO, package)
  assert not os.path.exists(os.path.join(folder, "pipeline.py"))
  assert not os.path.exists(os.path.join(folder, "beam_pipeline.py"))
  for name, m in _package_imports(folder):
    assert not m.startswith(("apache_beam", "distributed", "dask")), (name, m)
    assert not m.startswith(("textrecords.engine.beam", "textrecords.engine.dask",
                             "textrecords.engine.local")), (name, m)


def _package_imports(folder: str):
  """(module file name, imported name) of every import in the folder's modules."""
  import ast  # pylint: disable=import-outside-toplevel
  for name in sorted(os.listdir(folder)):
    if not name.endswith(".py"):
      continue
    tree = ast.parse(open(os.path.join(folder, name), encoding="utf-8").read())
    for node in ast.walk(tree):
      if isinstance(node, ast.Import):
        yield from ((name, a.name) for a in node.names)
      elif isinstance(node, ast.ImportFrom):
        yield from ((name, f"{node.module}.{a.name}") for a in node.names)


def test_mt_local_examples_reuse_the_pass_reading(tmp_path, monkeypatch, inputs):
  """Every pair kept: the local engine hands each unit's tokenized pairs
  (`protocol.Carry`) from the counting pass to its examples, so each unit is
  read once; with no room to keep them (budget 0) each is read twice, and
  the bytes are the golden ones either way."""
  golden = json.load(open(GOLDEN, encoding="utf-8"))["all_replace"]
  reads = []
  chunk = protocol.Unit.chunk
  monkeypatch.setattr(protocol.Unit, "chunk", lambda u: reads.append(u.index) or chunk(u))
  monkeypatch.setattr(mt_generator, "UNIT_BYTES", 64)
  n_units = len(protocol.units_from_sizes(inputs.split(","), 64))
  for budget, times in ((protocol.CARRY_BUDGET, 1), (0, 2)):
    monkeypatch.setattr(protocol, "CARRY_BUDGET", budget)
    reads.clear()
    out = tmp_path / str(budget)
    _create(out, inputs, num_workers=1, **CASES["all_replace"])
    assert sorted(reads) == sorted(list(range(n_units)) * times)
    assert _digests(out, normalized=True) == golden


# ---------------------------------------------------------------- w2v_data

W2V_CASES = {
    "sentence_replace": dict(min_freq=2, subsample_t=3e-2, num_shards=3,
                             on_decode_error="replace"),
    "center_skip_gzip": dict(min_freq=1, layout="center", num_shards=2, compression="GZIP",
                             on_decode_error="skip_line", max_window_size=2),
    "cbow_word2vec": dict(min_freq=2, model="cbow", subsample_t=1e-2,
                          subsample_formula="word2vec", num_shards=4, on_decode_error="replace"),
    "pv_dbow_ids": dict(min_freq=1, model="pv_dbow", doc_id_column=True, num_shards=3),
}
W2V_TINY = os.path.join(TESTDATA, "w2v_tiny.txt")


@pytest.fixture(scope="module")
def w2v_inputs(tmp_path_factory) -> dict:
  """Sentences: the tiny corpus with invalid UTF-8 lines added (first,
  middle, last; no final newline), the tiny corpus, its first 50 lines.
  Documents: ids and the tiny corpus's first 150 non-blank lines."""
  d = tmp_path_factory.mktemp("w2v_inputs")
  lines = open(W2V_TINY, "rb").read().split(b"\n")
  bad = list(lines[:120])
  for i in (len(bad) - 1, len(bad) // 2, 0):
    bad.insert(i, bad[i] + b" caf\xe9")
  (d / "bad.txt").write_bytes(b"\n".join(bad).rstrip(b"\n"))
  (d / "head.txt").write_bytes(b"\n".join(lines[:50]) + b"\n")
  texts = [l for l in open(W2V_TINY, encoding="utf-8").read().split("\n") if l.strip()]
  (d / "docs.tsv").write_text("".join(f"doc{i}\t{t}\n" for i, t in enumerate(texts[:150])),
                              encoding="utf-8")
  return {"sentences": ",".join([str(d / "bad.txt"), W2V_TINY, str(d / "head.txt")]),
          "documents": str(d / "docs.tsv")}


def _w2v_create(out, inputs_, case, engine=EngineOptions(), **kw):
  source = inputs_["documents" if case.startswith("pv") else "sentences"]
  return w2v_generator.create(W2vConfig(input_file=source, output_dir=str(out), quiet=True,
                                        **W2V_CASES[case], **kw), engine)


def _small_units(monkeypatch, size: int):
  """w2v units of `size` bytes (lines cut anywhere; launcher-side)."""
  monkeypatch.setattr(w2v_corpus, "read_chunk_bytes", lambda *_: size)


@pytest.mark.parametrize("case", sorted(W2V_CASES))
def test_w2v_local_bytes_are_the_earlier_releases(tmp_path, monkeypatch, w2v_inputs, case):
  """Default units with 1 worker, 61-byte units (lines cut anywhere, empty
  units) with 2: the digests the pipeline before the protocol wrote."""
  golden = json.load(open(W2V_GOLDEN, encoding="utf-8"))[case]
  _w2v_create(tmp_path / "a", w2v_inputs, case, num_workers=1)
  assert _digests(tmp_path / "a", normalized=True) == golden
  _small_units(monkeypatch, 61)
  _w2v_create(tmp_path / "b", w2v_inputs, case, num_workers=2)
  assert _digests(tmp_path / "b", normalized=True) == golden


def test_w2v_local_examples_reuse_the_pass_reading(tmp_path, monkeypatch, w2v_inputs):
  """The counting pass carries each unit's counted tokens to its examples
  (each unit read once); with no room to keep them each is read twice;
  the bytes are the golden ones either way."""
  golden = json.load(open(W2V_GOLDEN, encoding="utf-8"))["sentence_replace"]
  reads = []
  read_unit = w2v_corpus.read_unit
  monkeypatch.setattr(w2v_corpus, "read_unit", lambda *a: reads.append(a[1]) or read_unit(*a))
  _small_units(monkeypatch, 500)
  n_units = len(protocol.units_from_sizes(w2v_inputs["sentences"].split(","), 500))
  for budget, times in ((protocol.CARRY_BUDGET, 1), (0, 2)):
    monkeypatch.setattr(protocol, "CARRY_BUDGET", budget)
    reads.clear()
    out = tmp_path / str(budget)
    _w2v_create(out, w2v_inputs, "sentence_replace", num_workers=1)
    assert len(reads) == n_units * times
    assert _digests(out, normalized=True) == golden


def test_w2v_beam_two_workers_equals_local(tmp_path, w2v_inputs, monkeypatch):
  pytest.importorskip("apache_beam")
  from apache_beam.runners.portability import prism_runner  # pylint: disable=import-outside-toplevel

  def refuse(*_, **__):
    raise AssertionError("Prism use")

  monkeypatch.setattr(prism_runner.PrismRunner, "run_pipeline", refuse)
  _small_units(monkeypatch, 700)  # many units
  _w2v_create(tmp_path / "local", w2v_inputs, "center_skip_gzip")
  _w2v_create(tmp_path / "beam", w2v_inputs, "center_skip_gzip", EngineOptions("beam", MULTI))
  assert _digests(tmp_path / "local") == _digests(tmp_path / "beam")


def test_w2v_dask_cluster_and_local_cluster_equal_local(tmp_path, w2v_inputs, dask_cluster,
                                                         monkeypatch):
  _small_units(monkeypatch, 700)
  _w2v_create(tmp_path / "local", w2v_inputs, "cbow_word2vec")
  local = _digests(tmp_path / "local")
  _w2v_create(tmp_path / "dask", w2v_inputs, "cbow_word2vec",
              EngineOptions("dask", dask_scheduler=dask_cluster))
  assert _digests(tmp_path / "dask") == local
  _w2v_create(tmp_path / "lc", w2v_inputs, "sentence_replace", EngineOptions("dask"),
              num_workers=2)
  _w2v_create(tmp_path / "lc_local", w2v_inputs, "sentence_replace")
  assert _digests(tmp_path / "lc") == _digests(tmp_path / "lc_local")


def _w2v_error(tmp_path, name, engine, text: bytes, **kw) -> str:
  bad = tmp_path / "bad.txt"
  bad.write_bytes(text)
  out = tmp_path / name
  kw.setdefault("min_freq", 1)
  with pytest.raises(UserError) as e:
    w2v_generator.create(W2vConfig(input_file=str(bad), output_dir=str(out), quiet=True, **kw),
                         engine)
  assert not os.path.exists(out / "meta.json")
  assert not [n for n in os.listdir(out) if not n.startswith(".")] \
      if os.path.exists(out) else True
  return str(e.value)


def test_w2v_bad_input_on_beam_and_dask_is_the_local_one_line_error(tmp_path, monkeypatch,
                                                                     dask_cluster):
  """Invalid UTF-8, a NUL byte (past the binary probe), a center whose
  contexts cover every noise word (lines skipped before it), a --min_freq
  above every count, an empty file: the local engine's line on Beam and
  Dask; pv_* refused in one line."""
  pytest.importorskip("apache_beam")
  _small_units(monkeypatch, 64)
  engines = [("local", EngineOptions()), ("beam", EngineOptions("beam", IN_MEMORY_BEAM)),
             ("dask", EngineOptions("dask", dask_scheduler=dask_cluster))]
  bad = f"{tmp_path}/bad.txt"
  cases = [(b"a b c\n" * 40 + b"d caf\xe9\n" + b"a b\n" * 5, {}, f"{bad}:41: invalid UTF-8"),
           (b"a b c\n" * 1700 + b"d \x00 e\n", {}, f"{bad}:1701: NUL byte in the line"),
           (b"a\nbad \xff\n" * 20 + b"a b a b a\n", dict(on_decode_error="skip_line"),
            f"{bad}:41: a center's contexts cover every one of the 2 noise words"),
           (b"a b c\n" * 5, dict(min_freq=9), "--min_freq=9 leaves an empty vocabulary"),
           (b"", {}, f"{bad}: empty file")]
  for i, (text, kw, expected) in enumerate(cases):
    errors = [_w2v_error(tmp_path, f"{name}{i}", engine, text, **kw)
              for name, engine in engines]
    assert errors[0] == errors[1] == errors[2], errors
    assert expected in errors[0] and "\n" not in errors[0], errors
  with pytest.raises(UserError, match=r"^--model=pv_dbow with --engine=dask: document ids "
                     "must be checked for uniqueness in one pass; use --engine=local$"):
    w2v_generator.create(W2vConfig(input_file=W2V_TINY, output_dir=str(tmp_path / "pv"),
                                   model="pv_dbow"), EngineOptions("dask"))


def test_record_runs_merge_in_key_order():
  """Runs of disjoint key ranges pass through whole, in key order; runs that
  overlap merge record by record as sorting (key, record) pairs would."""
  a = record_runs.from_keyed([(1, b"a1"), (5, b"a5"), (9, b"a9")])
  b = record_runs.from_keyed([(2, b"b2"), (5, b"b5"), (12, b"b12")])
  c = record_runs.from_keyed([(20, b"c20")])
  assert [r is c for r in record_runs.merged([c, a])] == [False, True]
  got = [rec for r in record_runs.merged([b, c, a]) for rec in r.records()]
  assert got == sorted([*a.records(), *b.records(), *c.records()])
  assert list(record_runs.from_bytes(record_runs.to_bytes(b)).records()) == list(b.records())


def test_staged_runs_merge_a_chunk_at_a_time(tmp_path, monkeypatch):
  """A file's overlapping staged runs merge as the runs read whole would,
  each read through ranged reads of about `chunk_bytes` (the budget over
  the runs), never a whole run: the file writer's memory is bounded."""
  monkeypatch.setattr(record_runs, "MERGE_BUDGET", 4096)
  monkeypatch.setattr(record_runs, "MIN_CHUNK", 512)
  runs = [record_runs.from_keyed(sorted((k * 7 % 1000, b"r%d-%d" % (u, k) * (k % 7 + 1))
                                        for k in range(u, 3000, 5))) for u in range(5)]
  entries = []
  for u, run in enumerate(runs):
    path = str(tmp_path / f"run-{u}")
    with open(path, "wb") as f:
      f.write(record_runs.to_bytes(run))
    entries.append((0, path, *record_runs.bounds(run), len(run.data)))  # a RunEntry
  got = [rec for r in generator_steps.merged_run(entries) for rec in r.records()]
  assert got == sorted(rec for r in runs for rec in r.records())
  blob = record_runs.to_bytes(runs[0])
  reads = []

  def read_at(a, b):
    reads.append(b - a)
    return blob[a:b]
  chunk = record_runs.chunk_bytes(len(runs))
  assert chunk == 819
  assert list(record_runs.chunked_records(read_at, len(blob), chunk)) == list(runs[0].records())
  assert len(reads) > 30 and max(reads) < 2 * chunk < len(blob) // 10


# ---------------------------------------------------------------- bert_data

@pytest.fixture(scope="module")
def bert_inputs(tmp_path_factory) -> tuple:
  """A varied corpus, a file with invalid UTF-8 lines (documents continue
  across files), the sample text."""
  d = tmp_path_factory.mktemp("bert_inputs")
  corpus = write_varied_corpus(d / "corpus.txt", 3)
  return corpus, _bad_utf8_file(d / "messy.txt", ["a cat sat", "", "a dog sat on a mat"]), \
      BERT_SAMPLE


def _bert_create(out, inputs_, engine=EngineOptions(), **kw):
  os.makedirs(out, exist_ok=True)
  cfg = BertConfig(input_files=tuple(inputs_), output_files=(f"{out}/t.tfrecord",),
                   vocab_file=BERT_VOCAB, dupe_factor=2, quiet=True,
                   on_decode_error="replace", **kw)
  return bert_generator.create(cfg, engine)


def _bert_digests(out) -> dict:
  """sha256 of every file; the metadata without its output paths (the runs
  write to different folders)."""
  got = {}
  for n in sorted(os.listdir(out)):
    data = open(os.path.join(out, n), "rb").read()
    if n.endswith(".meta.json"):
      data = data.replace(str(out).encode(), b"OUT")
    got[n] = hashlib.sha256(data).hexdigest()
  return got


def test_bert_beam_two_workers_equals_local(tmp_path, bert_inputs, monkeypatch):
  """Whole-word masks over many small units (launcher-side), Beam's
  multi-processing runner: the local engine's bytes."""
  pytest.importorskip("apache_beam")
  kw = dict(num_shards=3, do_whole_word_mask=True, max_ngram_size=2)
  _bert_create(tmp_path / "local", bert_inputs, **kw)
  monkeypatch.setattr(bert_generator, "UNIT_BYTES", 500)
  _bert_create(tmp_path / "beam", bert_inputs, EngineOptions("beam", MULTI), **kw)
  assert _bert_digests(tmp_path / "local") == _bert_digests(tmp_path / "beam")


def test_bert_dask_cluster_and_local_cluster_equal_local(tmp_path, bert_inputs, dask_cluster,
                                                          monkeypatch):
  """Dynamic masks of RoBERTa's packing on a Dask cluster, sentence order on a
  local cluster: the local engine's bytes."""
  cases = (("cluster", EngineOptions("dask", dask_scheduler=dask_cluster),
            dict(num_shards=2, masking="dynamic", packing="full_sentences",
                 next_sentence=False)),
           ("lc", EngineOptions("dask"), dict(num_shards=2, sentence_order=True,
                                              use_v2_feature_names=True, num_workers=2)))
  for name, engine, kw in cases:
    monkeypatch.setattr(bert_generator, "UNIT_BYTES", 1 << 20)
    _bert_create(tmp_path / f"{name}_local", bert_inputs, **kw)
    monkeypatch.setattr(bert_generator, "UNIT_BYTES", 700)
    _bert_create(tmp_path / name, bert_inputs, engine, **kw)
    assert _bert_digests(tmp_path / f"{name}_local") == _bert_digests(tmp_path / name), name


def test_bert_packed_rows_on_beam_and_dask_equal_local(tmp_path, bert_inputs, dask_cluster,
                                                      monkeypatch):
  """--pack_instances=3: rows packed from each order bucket's sorted
  instances after the sort (`BertGenerator.finish_file`) on Beam's
  multi-processing runner and a Dask cluster: the local engine's bytes."""
  pytest.importorskip("apache_beam")
  kw = dict(num_shards=2, pack_instances=3)
  _bert_create(tmp_path / "local", bert_inputs, **kw)
  want = _bert_digests(tmp_path / "local")
  monkeypatch.setattr(bert_generator, "UNIT_BYTES", 700)
  for name, engine in (("beam", EngineOptions("beam", MULTI)),
                       ("dask", EngineOptions("dask", dask_scheduler=dask_cluster))):
    _bert_create(tmp_path / name, bert_inputs, engine, **kw)
    assert _bert_digests(tmp_path / name) == want, name


def _several_outputs(out, inputs_, engine=EngineOptions()):
  """bert_data with three --output_file datasets (two in one folder, two
  of one file name); returns every file's sha256 by relative path."""
  outputs = (f"{out}/x/t.tfrecord", f"{out}/y/t.tfrecord", f"{out}/y/u.tfrecord")
  bert_generator.create(BertConfig(input_files=tuple(inputs_), output_files=outputs,
                                   vocab_file=BERT_VOCAB, dupe_factor=2, quiet=True,
                                   on_decode_error="replace"), engine)
  got = {}
  for root, _, names in os.walk(out):
    for n in names:
      data = open(os.path.join(root, n), "rb").read().replace(str(out).encode(), b"OUT")
      got[os.path.relpath(os.path.join(root, n), out)] = hashlib.sha256(data).hexdigest()
  return got


@contextlib.contextmanager
def _threads_client(scheduler, num_workers):  # pylint: disable=unused-argument
  """A Dask client of two worker threads in this process (they see monkeypatches)."""
  import distributed  # pylint: disable=import-outside-toplevel
  with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                dashboard_address=None) as cluster, \
      distributed.Client(cluster) as client:
    yield client


def test_bert_several_output_files_on_beam_and_dask_equal_local(tmp_path, bert_inputs,
                                                                dask_cluster, monkeypatch):
  """Several --output_file datasets: the instances in key order dealt over
  them in turn (`deals_records`), on Beam's multi-processing runner and a
  Dask cluster (one order bucket), and with many buckets (groups) on Beam's
  and Dask's runners in this process: the local engine's bytes."""
  pytest.importorskip("apache_beam")
  from textrecords.engine import dask as dask_engine  # pylint: disable=import-outside-toplevel
  from textrecords.engine import record_files  # pylint: disable=import-outside-toplevel
  from bert_data import units as bert_units  # pylint: disable=import-outside-toplevel
  want = _several_outputs(tmp_path / "local", bert_inputs)
  assert len(want) == 9
  monkeypatch.setattr(bert_generator, "UNIT_BYTES", 700)
  for name, engine in (("beam", EngineOptions("beam", MULTI)),
                       ("dask", EngineOptions("dask", dask_scheduler=dask_cluster))):
    assert _several_outputs(tmp_path / name, bert_inputs, engine) == want, name
  monkeypatch.setattr(bert_units, "_BUCKET_BYTES", 3000)
  monkeypatch.setattr(bert_generator, "UNIT_BYTES", 1 << 20)
  want = _several_outputs(tmp_path / "local_groups", bert_inputs)
  monkeypatch.setattr(bert_generator, "UNIT_BYTES", 700)
  monkeypatch.setattr(dask_engine, "client_for", _threads_client)
  dealt = []
  real_lanes = record_files.lanes
  monkeypatch.setattr(record_files, "lanes", lambda runs, n: dealt.append(n) or real_lanes(runs, n))
  for name, engine in (("beam_groups", EngineOptions("beam", IN_MEMORY_BEAM)),
                       ("dask_groups", EngineOptions("dask"))):
    dealt.clear()
    assert _several_outputs(tmp_path / name, bert_inputs, engine) == want, name
    assert len(dealt) > 3 and set(dealt) == {3}, name  # a group (order bucket) at a time


def test_bert_bad_input_on_beam_and_dask_is_the_local_one_line_error(tmp_path, dask_cluster):
  """Invalid UTF-8 (read in a worker), no text (the corpus pass), too few
  instances for the shards (known once every unit is done): the local
  engine's line on Beam and Dask, nothing left; runs ordered in one machine
  refused in one line."""
  pytest.importorskip("apache_beam")
  engines = [("local", EngineOptions()), ("beam", EngineOptions("beam", IN_MEMORY_BEAM)),
             ("dask", EngineOptions("dask", dask_scheduler=dask_cluster))]
  cases = [(b"a cat sat\n" * 40 + b"a dog caf\xe9\n", {}, "bad.txt:41: invalid UTF-8"),
           (b"\n \n\t\n", {}, "bad.txt holds no text"),
           (b"a cat sat on the mat\n" * 4, dict(num_shards=50), "--num_shards=50 ")]
  bad = tmp_path / "bad.txt"
  for text, kw, expected in cases:
    bad.write_bytes(text)
    errors = []
    for name, engine in engines:
      out = tmp_path / f"{name}{len(errors)}{len(kw)}"
      with pytest.raises(UserError) as e:
        bert_generator.create(BertConfig(input_files=(str(bad),),
                                         output_files=(f"{out}/t.tfrecord",),
                                         vocab_file=BERT_VOCAB, quiet=True, **kw), engine)
      errors.append(str(e.value))
      assert not os.path.exists(out) or not [n for n in os.listdir(out)
                                             if not n.startswith(".")], name
    assert errors[0] == errors[1] == errors[2] and expected in errors[0], errors
    assert "\n" not in errors[0]
  with pytest.raises(UserError, match="^--reference_compatible runs on the local engine only"):
    bert_generator.create(BertConfig(input_files=(BERT_SAMPLE,), vocab_file=BERT_VOCAB,
                                     output_files=(f"{tmp_path}/r/t.tfrecord",),
                                     reference_compatible=True), EngineOptions("dask"))


def test_bert_declares_its_generator_without_engines():
  """bert_data imports no Beam and no Dask; of the engines only the local
  one, in the runs ordered in one machine (`ordered_run`, `reference_mode`)."""
  folder = os.path.join(REPO, "bert_data")
  for name in ("pipeline.py", "beam_pipeline.py", "chunked_index.py"):
    assert not os.path.exists(os.path.join(folder, name)), name
  for name, m in _package_imports(folder):
    assert not m.startswith(("apache_beam", "distributed", "dask")), (name, m)
    assert not m.startswith(("textrecords.engine.beam", "textrecords.engine.dask")), (name, m)
    if m.startswith("textrecords.engine.local"):
      assert name in ("ordered_run.py", "reference_mode.py"), (name, m)


def test_staged_state_is_looked_for_after_a_carrying_pass_only(tmp_path, monkeypatch):
  """A unit's staged `Carry` state is looked for (one request on a store,
  a miss where the unit had none) only where the last pass may carry one
  (bert's `corpus` pass declares it never does)."""
  from textrecords.files import storage
  asked = []
  monkeypatch.setattr(storage, "read_bytes_if_any", lambda p: asked.append(p))
  unit = protocol.Unit(3, 0, str(tmp_path / "in.txt"), 0, 10)
  for carries, want in ((False, []), (True, [generator_steps.carry_path(str(tmp_path), "p", 3)])):
    gen = type("Gen", (), {"passes": (protocol.Pass("p", None, None, None, carries=carries),)})
    asked.clear()
    assert generator_steps.staged_state(gen, str(tmp_path), unit) is None
    assert asked == want
