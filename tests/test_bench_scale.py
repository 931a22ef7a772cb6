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
  growth = report["growth"]["w2v/dask"]["sizes"]["0.1/0.05"]
  assert {"cpu_s", "worker_peak_mb", "steps"} <= set(growth)
  statuses = {c[0] for c in report["checks"]}
  assert report["checks"] and statuses <= {"PASS", "FAIL", "INFO"}
  assert "issue 37 targets" in proc.stdout
