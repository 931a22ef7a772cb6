"""scripts/bench/estimate_requests.py: bert's requests from its write plan."""

from conftest import load_script

from textrecords.engine import file_segments
from textrecords.engine import record_runs


def test_estimate_counts_the_real_plan_and_stays_bounded_per_mb():
  """The estimate follows `file_segments.plan` and `group_levels`: at
  100 MB one level of merges, at 4 GB two; each merge reads
  `GROUP_FAN_IN` runs at most, `GROUP_MERGE_BUDGET` over them (64 MiB at
  most), and reads about the same bytes at every size; requests per
  input MB stay under issue 37's 40."""
  est = load_script("bench/estimate_requests")
  small, large = est.estimate(100), est.estimate(4096)
  assert (small["levels"], large["levels"]) == (1, 2)
  assert small["segments"] == file_segments.segment_count(
      int(est.RECORD_BYTES_PER_INPUT_BYTE * 100 * est.MB), file_segments.SEGMENT_BYTES)
  assert file_segments.GROUP_MERGE_BUDGET <= 64 << 20
  assert large["merge_chunk"] == record_runs.chunk_bytes(
      file_segments.GROUP_FAN_IN, file_segments.GROUP_MERGE_BUDGET)
  run = est.RECORD_BYTES_PER_INPUT_BYTE * est.UNIT_BYTES
  for r in (small, large):
    assert r["merge_bytes_max"] <= 1.1 * file_segments.GROUP_FAN_IN * run
    assert r["total"] == sum(r[k] for k in ("units", "merge_reads", "merge_writes",
                                            "segment_reads", "segment_writes"))
    assert r["per_mb"] < 40
  # more runs a merge at the same budget: smaller reads, more requests
  assert est.estimate(4096, fan_in=64)["merge_reads"] > large["merge_reads"]


def test_cost_model_and_bad_flags(capsys):
  est = load_script("bench/estimate_requests")
  assert est.write_requests(est.storage.WRITE_BLOCK_BYTES) == 1
  assert est.write_requests(est.storage.WRITE_BLOCK_BYTES + 1) == 4
  assert est.read_requests(1 << 20, 4 << 20) == 1  # one GET of all of it (short: its size)
  assert est.read_requests(1 << 20, 4 << 20, whole=False) == 4
  assert est.read_requests(8 << 20, 4 << 20) == 1 + est.read_requests(8 << 20, 4 << 20, sized=True)
  assert est.UNIT_READS == 1
  assert est.main(["--sizes_mb=25"]) == 0
  assert "25 MB:" in capsys.readouterr().out
  assert est.main(["--sizes_mb=a"]) == 2
  assert "--sizes_mb" in capsys.readouterr().err
  assert est.main(["--fan_in=1"]) == 2
