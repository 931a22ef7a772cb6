"""The generator protocol (`textrecords.engine.protocol`) on every engine, with mt_data.

mt_data is declared once (`mt_data/generator.py`); the local engine must
write the bytes of the releases before the protocol (digests in
`testdata/mt_golden.json`, made by the earlier `mt_data/pipeline.py`), and
Beam (2 worker processes) and Dask (a scheduler and two workers started as
separate processes, and a local cluster) the local engine's bytes. Bad input
gives the local engine's one-line error on every engine.
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

from conftest import REPO, TESTDATA, error_lines, free_port, run_cli

from mt_data import config as mt_config
from mt_data import generator as mt_generator
from textrecords.engine import EngineOptions, check_scheduler
from textrecords.engine import protocol
from textrecords.errors import UserError

GOLDEN = os.path.join(TESTDATA, "mt_golden.json")
MULTI = "runner=DirectRunner,direct_num_workers=2,direct_running_mode=multi_processing"
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
      for i in meta["inputs"]:
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
  with pytest.raises(UserError, match="so far mt_data"):
    EngineOptions("dask").validate(["out"])  # bert_data / w2v_data's call
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
  r = run_cli("w2v_data.create", "--input_file=" + os.path.join(TESTDATA, "w2v_tiny.txt"),
              f"--output_dir={tmp_path}/w", "--engine=dask", "--quiet")
  assert r.returncode == 2 and error_lines(r.stderr) == [
      "error: --engine=dask runs the generators declared with textrecords.engine.protocol "
      "(so far mt_data); use --engine=local or --engine=beam"], r.stderr
  assert not os.path.exists(tmp_path / "w")


def test_mt_declares_its_generator_without_engines():
  """The package holds the declaration only: no Beam, no Dask, no engine module."""
  import ast  # pylint: disable=import-outside-toplevel
  folder = os.path.join(REPO, "mt_data")
  assert not os.path.exists(os.path.join(folder, "pipeline.py"))
  assert not os.path.exists(os.path.join(folder, "beam_pipeline.py"))
  for name in sorted(os.listdir(folder)):
    if not name.endswith(".py"):
      continue
    tree = ast.parse(open(os.path.join(folder, name), encoding="utf-8").read())
    for node in ast.walk(tree):
      if isinstance(node, ast.Import):
        mods = [a.name for a in node.names]
      elif isinstance(node, ast.ImportFrom):
        mods = [f"{node.module}.{a.name}" for a in node.names]
      else:
        continue
      for m in mods:
        assert not m.startswith(("apache_beam", "distributed", "dask")), (name, m)
        assert not m.startswith(("textrecords.engine.beam", "textrecords.engine.dask",
                                 "textrecords.engine.local")), (name, m)


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
