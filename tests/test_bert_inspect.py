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


def test_inspect_defects_give_one_line_errors(tmp_path):
  import gzip  # pylint: disable=import-outside-toplevel
  import shutil  # pylint: disable=import-outside-toplevel
  from w2v_data import pipeline as w2v_pipeline  # pylint: disable=import-outside-toplevel
  from w2v_data.config import W2vConfig  # pylint: disable=import-outside-toplevel
  out = str(tmp_path / "x.tfrecord")
  r = run_cli("bert_data.create", f"--input_file={SAMPLE_TEXT}", f"--output_file={out}",
              f"--vocab_file={VOCAB}", "--dupe_factor=1", "--quiet")
  assert r.returncode == 0, r.stderr
  small_vocab = tmp_path / "small_vocab.txt"
  small_vocab.write_text("\n".join(open(VOCAB).read().split("\n")[:200]) + "\n")
  w2v = str(tmp_path / "w2v")
  w2v_pipeline.create(W2vConfig(input_file=os.path.join(os.path.dirname(VOCAB), "w2v_tiny.txt"),
                                output_dir=w2v, min_freq=2, num_workers=1, quiet=True))
  plain_w2v = str(tmp_path / "plain_w2v.tfrecord")
  shutil.copy(os.path.join(w2v, "train.tfrecord"), plain_w2v)
  ref = os.path.join(GOLDEN, "sample_msl64_mp10_seed7_dupe1.tfrecord")
  ref_gz = str(tmp_path / "ref.tfrecord.gz")
  with open(ref, "rb") as src, gzip.open(ref_gz, "wb") as dst:
    dst.write(src.read())
  cases = [
      # another vocab: was an IndexError traceback
      ((f"--input_file={out}", f"--vocab_file={small_vocab}"),
       "is not the vocab the records were made with"),
      ((f"--input_file={ref}", f"--vocab_file={small_vocab}"),
       "but --vocab_file has 200 tokens"),
      # a w2v_data dataset / plain w2v file: was KeyError 'input_ids'
      ((f"--input_file={w2v}", f"--vocab_file={VOCAB}"),
       f"{w2v}: a w2v_data dataset; read it with w2v_data.make_dataset"),
      ((f"--input_file={plain_w2v}", f"--vocab_file={VOCAB}"),
       "record 0 is not a BERT pretraining record (no input_ids, input_mask, segment_ids)"),
      # --compression contradicting the metadata: was accepted and ignored
      ((f"--input_file={out}", f"--vocab_file={VOCAB}", "--compression=GZIP"),
       "--compression=GZIP: " + out + ".meta.json says the records have compression none"),
      ((f"--input_file={ref_gz}", f"--vocab_file={VOCAB}"), "ref.tfrecord.gz"),
  ]
  for args, message in cases:
    r = run_cli("bert_data.inspect", *args)
    lines = error_lines(r.stderr)
    assert r.returncode == 2 and len(lines) == 1, (args, r.stderr)
    assert lines[0].startswith("error: ") and message in lines[0], (args, lines)
  r = run_cli("bert_data.inspect", f"--input_file={ref_gz}", f"--vocab_file={VOCAB}",
              "--compression=gzip", "--max_records=1")
  assert r.returncode == 0, r.stderr
  plain = run_cli("bert_data.inspect", f"--input_file={ref}", f"--vocab_file={VOCAB}",
                  "--max_records=1")
  assert r.stdout.replace(ref_gz, ref) == plain.stdout and "*** record 0" in r.stdout
