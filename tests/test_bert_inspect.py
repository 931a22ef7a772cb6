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
  from w2v_data import generator as w2v_generator  # pylint: disable=import-outside-toplevel
  from w2v_data.config import W2vConfig  # pylint: disable=import-outside-toplevel
  out = str(tmp_path / "x.tfrecord")
  r = run_cli("bert_data.create", f"--input_file={SAMPLE_TEXT}", f"--output_file={out}",
              f"--vocab_file={VOCAB}", "--dupe_factor=1", "--quiet")
  assert r.returncode == 0, r.stderr
  small_vocab = tmp_path / "small_vocab.txt"
  small_vocab.write_text("\n".join(open(VOCAB).read().split("\n")[:200]) + "\n")
  w2v = str(tmp_path / "w2v")
  w2v_generator.create(W2vConfig(input_file=os.path.join(os.path.dirname(VOCAB), "w2v_tiny.txt"),
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


def _create(tmp_path, *flags, text=SAMPLE_TEXT, vocab=VOCAB) -> str:
  """bert_data records made from `text` under tmp_path; returns the output path."""
  out = str(tmp_path / "x.tfrecord")
  r = run_cli("bert_data.create", f"--input_file={text}", f"--output_file={out}",
              f"--vocab_file={vocab}", "--quiet", *flags)
  assert r.returncode == 0, r.stderr
  return out


def test_inspect_names_what_sop_labels_mean(tmp_path):
  # issue 21 item 8: label 1 of --sentence_order records is "swapped", not "random next".
  out = _create(tmp_path, "--dupe_factor=1", "--sentence_order")
  r = run_cli("bert_data.inspect", f"--input_file={out}", f"--vocab_file={VOCAB}",
              "--max_records=40")
  assert r.returncode == 0, r.stderr
  labels = [l for l in r.stdout.splitlines() if l.startswith("next_sentence_label: ")]
  assert len(labels) == r.stdout.count("*** record") > 4
  assert set(labels) == {"next_sentence_label: 0 (in order)",
                         "next_sentence_label: 1 (swapped)"}


def test_inspect_into_a_closed_pipe_ends_quietly(tmp_path):
  # issue 21 item 9: `inspect ... | head -1` ended with a BrokenPipeError, exit 1.
  import subprocess  # pylint: disable=import-outside-toplevel
  import sys  # pylint: disable=import-outside-toplevel
  from conftest import REPO  # pylint: disable=import-outside-toplevel
  from conftest import BUNDLED_TEXT, BUNDLED_VOCAB  # pylint: disable=import-outside-toplevel
  out = _create(tmp_path, "--dupe_factor=2", text=BUNDLED_TEXT, vocab=BUNDLED_VOCAB)
  proc = subprocess.Popen(  # ~230 KB of text: far more than a pipe holds
      [sys.executable, "-m", "bert_data.inspect", f"--input_file={out}",
       f"--vocab_file={BUNDLED_VOCAB}", "--max_records=100000"], stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO,
                                                 TF_CPP_MIN_LOG_LEVEL="3"))
  assert proc.stdout.readline().startswith(b"*** record 0 ")
  proc.stdout.close()  # as `head -1` exits
  stderr = proc.stderr.read().decode()
  assert proc.wait(timeout=300) == 141 and error_lines(stderr) == [], stderr


def test_inspect_and_stats_read_gzip_records(tmp_path):
  # issue 21 item 9: gzipped files read by their metadata's compression; a plain
  # gzipped file without --compression gets a hint (was "corrupt record length").
  import gzip  # pylint: disable=import-outside-toplevel
  import json  # pylint: disable=import-outside-toplevel
  gz = _create(tmp_path, "--dupe_factor=2", "--compression=GZIP")
  plain = str(tmp_path / "plain.tfrecord.gz")
  with open(gz, "rb") as src, open(plain, "wb") as dst:
    dst.write(src.read())
  with gzip.open(plain) as f:
    assert f.read(1)  # it is a gzip file
  r = run_cli("bert_data.inspect", f"--input_file={gz}", f"--vocab_file={VOCAB}",
              "--max_records=1")
  assert r.returncode == 0 and "*** record 0" in r.stdout, r.stderr
  r = run_cli("bert_data.stats", f"--input_file={gz}")
  assert r.returncode == 0, r.stderr
  instances = json.loads(r.stdout)["instances"]
  assert instances == json.load(open(gz + ".meta.json"))["counts"]["records"]
  for tool, args in (("bert_data.inspect", [f"--vocab_file={VOCAB}"]), ("bert_data.stats", [])):
    r = run_cli(tool, f"--input_file={plain}", *args)
    assert r.returncode == 2 and error_lines(r.stderr) == [
        f"error: {plain}: looks GZIP-compressed: pass --compression=GZIP"], (tool, r.stderr)
    r = run_cli(tool, f"--input_file={plain}", "--compression=GZIP", *args)
    assert r.returncode == 0, (tool, r.stderr)
  assert json.loads(r.stdout)["instances"] == instances


def test_closed_pipe_only_silences_our_own_output():
  # The same for plain scripts (cli.run_script); a BrokenPipeError from anything else
  # (a worker's pipe) is still an error.
  import subprocess  # pylint: disable=import-outside-toplevel
  import sys  # pylint: disable=import-outside-toplevel
  from conftest import REPO  # pylint: disable=import-outside-toplevel
  env = dict(os.environ, PYTHONPATH=REPO)
  script = ("import sys\nfrom textrecords.runs import cli\n"
            "sys.exit(cli.run_script(lambda: print('x' * 1000000)))\n")
  proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=env)
  proc.stdout.read(10)
  proc.stdout.close()
  stderr = proc.stderr.read().decode()
  assert proc.wait(timeout=60) == 141 and stderr == "", stderr
  other = ("from textrecords.runs import cli\n"
           "def main(argv):\n  raise BrokenPipeError(32, 'Broken pipe')\n"
           "cli.run(main)\n")
  r = subprocess.run([sys.executable, "-c", other], capture_output=True, text=True, env=env,
                     timeout=60)
  # (no "rerun with --verbose": this program defines no such flag)
  assert r.returncode == 1 and error_lines(r.stderr) == [
      "error: BrokenPipeError: [Errno 32] Broken pipe"], r.stderr
