"""bert_data.inspect: records shown as tokens, for our files and the reference's."""

import os

from conftest import GOLDEN, SAMPLE_TEXT, VOCAB, error_lines, run_cli


def test_inspect_reference_file_without_metadata():
  path = os.path.join(GOLDEN, "sample_msl64_mp10_seed7_dupe1.tfrecord")
  r = run_cli("bert_data.inspect", f"--input_file={path}", f"--vocab_file={VOCAB}",
              "--max_records=2")
  assert r.returncode == 0, r.stderr
  assert r.stdout.count("*** record") == 2
  first = r.stdout.split("*** record 1")[0]
  assert "tokens: [CLS]" in first and "[SEP]" in first
  # Masked positions show the label: [MASK](word); labels list those words.
  labels = first.split("masked_lm_labels: ")[1].splitlines()[0].split()
  shown = [t for t in first.split("tokens: ")[1].splitlines()[0].split() if "(" in t]
  assert [t[t.index("(") + 1:-1] for t in shown] == labels
  assert "next_sentence_label: " in first


def test_inspect_our_output_and_bad_input(tmp_path):
  out = str(tmp_path / "x.tfrecord")
  r = run_cli("bert_data.create", f"--input_file={SAMPLE_TEXT}", f"--output_file={out}",
              f"--vocab_file={VOCAB}", "--dupe_factor=1", "--quiet", "--num_shards=2")
  assert r.returncode == 0, r.stderr
  r = run_cli("bert_data.inspect", f"--input_file={out}", f"--vocab_file={VOCAB}",
              "--max_records=3")
  assert r.returncode == 0 and r.stdout.count("*** record") == 3
  r = run_cli("bert_data.inspect", f"--input_file={tmp_path}/nope.tfrecord",
              f"--vocab_file={VOCAB}")
  assert r.returncode == 2 and error_lines(r.stderr)[0].startswith("error: ")
  assert len(error_lines(r.stderr)) == 1
