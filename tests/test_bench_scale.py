"""scripts/bench/bench_scale.py: its corpora and one tiny run on local and Dask."""

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO, TESTDATA, VOCAB, load_script

SCRIPT = os.path.join(REPO, "scripts", "bench", "bench_scale.py")
TEXT = os.path.join(REPO, "w2v_data", "sample", "sample_text.txt")
PAIRS = os.path.join(TESTDATA, "mt_pairs.txt")


def _types(path):
  with open(path, encoding="utf-8") as f:
    return len(set(f.read().split()))


def test_corpora_reach_their_size_and_grow_in_distinct_tokens(tmp_path):
  bench = load_script("bench/bench_scale")
  small = bench.make_corpus("w2v", TEXT, 0.1, str(tmp_path / "a.txt"))
  large = bench.make_corpus("w2v", TEXT, 0.3, str(tmp_path / "b.txt"))
  docs = bench.make_corpus("bert", TEXT, 0.1, str(tmp_path / "c.txt"))
  for path, mb in ((small, 0.1), (large, 0.3), (docs, 0.1)):
    size = os.path.getsize(path)
    assert 0.95 * mb * bench.MB <= size <= mb * bench.MB
    with open(path, "rb") as f:
      assert f.read().endswith(b"\n")
  assert _types(large) > _types(small) > _types(TEXT)
  with open(docs, encoding="utf-8") as f:
    assert "\n\n" in f.read()  # documents, a blank line between


def test_a_tiny_run_on_local_and_dask_writes_every_field(tmp_path):
  pytest.importorskip("distributed")
  pytest.importorskip("psutil")
  out = tmp_path / "out"
  proc = subprocess.run(
      [sys.executable, SCRIPT, f"--out={out}", "--sizes_mb=0.05,0.1", "--generators=w2v",
       "--engines=local,dask", "--nos3", f"--ptb={TEXT}", f"--fra={PAIRS}",
       f"--vocab={VOCAB}"],
      capture_output=True, text=True, timeout=240, cwd=REPO, check=False)
  assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
  with open(out / "bench_scale.json", encoding="utf-8") as f:
    report = json.load(f)
  runs = report["results"]
  assert {(r["engine"], r["size_mb"]) for r in runs} == {
      ("local", 0.05), ("local", 0.1), ("dask", 0.05), ("dask", 0.1)}
  for r in runs:
    assert r["rc"] == 0 and r["commit"] and r["tree_peak_mb"] > 0
    assert r["cpu_s"] > 0 and r["worker_peak_mb"] > 0 and r["launcher_peak_mb"] > 0
    steps = r["steps"]
    assert {"counts: map", "counts: finish", "examples"} <= set(steps)
    assert steps["counts: finish"]["side_bytes"] > 0
    assert steps["examples"]["shuffle_bytes"] > 0 and steps["examples"]["records"] > 0
    for s in steps.values():
      assert 0 <= s["share"] <= 1 and s["serial_cpu_s"] >= 0
  assert r["workers"] >= 2  # the Dask run's 2 worker processes (the last run)
  growth = report["growth"]["w2v/dask (disk)"]["sizes"]["0.1/0.05"]
  assert {"cpu_s", "worker_peak_mb", "steps"} <= set(growth)
  statuses = {c[0] for c in report["checks"]}
  assert report["checks"] and statuses <= {"PASS", "FAIL", "INFO"}
  assert "issue 37 targets" in proc.stdout


def test_sizes_over_the_s3_limit_get_a_disk_baseline():
  bench = load_script("bench/bench_scale")
  assert bench.plan_sizes([25, 100, 400], True, 100) == [
      (25, False), (25, True), (100, True), (400, False)]
  assert bench.plan_sizes([25, 100], True, 100) == [(25, True), (100, True)]
  assert bench.plan_sizes([25, 400], False, 100) == [(25, False), (400, False)]


def test_growth_is_compared_on_one_storage():
  bench = load_script("bench/bench_scale")

  def run(size, storage, peak):
    return dict(rc=0, generator="w2v", engine="dask", size_mb=size, storage=storage,
                cpu_s=size, worker_peak_mb=peak, launcher_peak_mb=100, requests={},
                steps={"examples": dict(serial_cpu_s=0.01, share=0.01, side_bytes=0,
                                        shuffle_bytes=0, partial_bytes=0)})
  results = [run(25, "s3", 400), run(100, "s3", 440), run(25, "disk", 100),
             run(400, "disk", 130)]
  lines = [line for _, line in bench.checks(results) if "per-worker" in line]
  assert lines == [
      "w2v/dask (disk): per-worker peak memory 100 MB at 25 MB -> 130 MB at 400 MB: 1.3x "
      "(<= 1.2x)",
      "w2v/dask: per-worker peak memory 400 MB at 25 MB -> 440 MB at 100 MB: 1.1x (<= 1.2x)"]
  assert set(bench.growth(results)) == {"w2v/dask", "w2v/dask (disk)"}


def test_requests_count_coloured_log_lines(tmp_path):
  """moto's werkzeug log colours a ranged GET's line (206): still one request."""
  bench = load_script("bench/bench_scale")
  log = tmp_path / "moto.log"
  log.write_bytes(b'127.0.0.1 - - [x] "GET /bkt?list-type=2 HTTP/1.1" 200 -\n'
                  b'127.0.0.1 - - [x] "\x1b[35m\x1b[1mGET /bkt/in/a.txt HTTP/1.1\x1b[0m" 206 -\n'
                  b'127.0.0.1 - - [x] "PUT /bkt/out/b HTTP/1.1" 200 -\n')
  s3 = object.__new__(bench.S3)
  s3.log_path = str(log)
  assert s3.requests(0, log.stat().st_size) == {"GET": 2, "PUT": 1, "total": 3}
