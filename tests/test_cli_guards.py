"""The commands' guards against data loss and misleading or many-line errors
(issue 36, items 6, 7, 8, 11 and 15), through the command line as a user runs it.

- No run writes over its own input (text, vocab), with or without
  --overwrite: records, shards, indexes, metadata and --summary_json alike.
- `textrecords.index FILE` never replaces a FILE.index that is not an index.
- s3:// inputs without credentials: `cannot reach the storage`, exit 2.
- Ctrl-C while a command is still importing: one line, exit 130.
- Messages that say what the user met: a foreign metadata file, the flag
  that bounds another, the demo's file count, pv_dbow's progress line.
"""

import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys

import pytest

from conftest import (REPO, SAMPLE_TEXT, VOCAB, W2V_TINY, free_port, message_lines, run_cli,
                      sigint_as_in_a_terminal)
from textrecords.files import tfrecord

BERT_FLAGS = ("--max_seq_length=32", "--dupe_factor=1", "--num_workers=1", "--quiet")


def _digest(path) -> str:
  with open(path, "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()


def _copy(src, dst) -> str:
  shutil.copyfile(src, dst)
  return str(dst)


def _one_error(r) -> str:
  lines = message_lines(r.stderr)
  assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), \
      (r.returncode, r.stderr)
  return lines[0]


# ------------------------------------------------ item 6: an output is an input


def _bert_cases(d):
  text, vocab = _copy(SAMPLE_TEXT, d / "c.txt"), _copy(VOCAB, d / "vocab.txt")
  os.symlink(text, d / "link.txt")
  base = [f"--vocab_file={vocab}", *BERT_FLAGS]
  shard = _copy(SAMPLE_TEXT, d / "o.tfrecord-00001-of-00002")
  index = _copy(SAMPLE_TEXT, d / "p.tfrecord.index")
  meta = _copy(SAMPLE_TEXT, d / "q.tfrecord.meta.json")
  return {
      "text": (text, [f"--input_file={text}", f"--output_file={text}", *base]),
      "vocab": (vocab, [f"--input_file={text}", f"--output_file={vocab}", *base]),
      "symlink": (text, [f"--input_file={d / 'link.txt'}", f"--output_file={text}", *base]),
      "shard": (shard, [f"--input_file={shard}", f"--output_file={d / 'o.tfrecord'}",
                        "--num_shards=2", *base]),
      "index": (index, [f"--input_file={index}", f"--output_file={d / 'p.tfrecord'}", *base]),
      "metadata": (meta, [f"--input_file={meta}", f"--output_file={d / 'q.tfrecord'}", *base]),
      "summary_json": (text, [f"--input_file={text}", f"--output_file={d / 'r.tfrecord'}",
                              f"--summary_json={text}", *base]),
  }


@pytest.mark.parametrize("overwrite", [True, False])
@pytest.mark.parametrize("case", ["text", "vocab", "symlink", "shard", "index", "metadata",
                                  "summary_json"])
def test_bert_create_never_writes_over_its_input(tmp_path, case, overwrite):
  victim, args = _bert_cases(tmp_path)[case]
  before = _digest(victim)
  r = run_cli("bert_data.create", *args, *(["--overwrite"] if overwrite else []))
  line = _one_error(r)
  assert "the input --" in line and "--overwrite" in line, line
  assert _digest(victim) == before
  assert not [n for n in os.listdir(tmp_path) if n.endswith((".meta.json", ".index"))
              and n not in ("p.tfrecord.index", "q.tfrecord.meta.json")]


def _folder_run_over_input(tmp_path, module, source, name, *flags) -> str:
  """Runs `module` with --input_file=d/NAME (a file the run writes in d) and
  --output_dir=d --overwrite; checks that nothing changed; returns the error."""
  d = tmp_path / "d"
  d.mkdir()
  text = _copy(source, d / name)
  before = _digest(text)
  r = run_cli(module, f"--input_file={text}", f"--output_dir={d}", "--overwrite",
              "--num_workers=1", *flags)
  line = _one_error(r)
  assert f"would write {text}, which is the input --input_file={text}" in line, line
  assert _digest(text) == before and os.listdir(d) == [name]
  return line


def test_w2v_create_never_writes_over_its_input(tmp_path):
  _folder_run_over_input(tmp_path, "w2v_data.create", W2V_TINY, "vocab.txt", "--min_freq=1")


def test_mt_create_never_writes_over_its_input(tmp_path):
  _folder_run_over_input(tmp_path, "mt_data.create",
                         os.path.join(REPO, "tests", "testdata", "mt_pairs.txt"),
                         "src_vocab.txt", "--quiet")


@pytest.mark.parametrize("flag", ["--output_file", "--summary_json"])
def test_build_vocab_never_writes_over_its_input(tmp_path, flag):
  text = _copy(SAMPLE_TEXT, tmp_path / "c.txt")
  os.symlink(text, tmp_path / "link.txt")
  before = _digest(text)
  out = {"--output_file": str(tmp_path / "link.txt"), "--summary_json": text}[flag]
  args = [f"--input_file={text}", f"{flag}={out}", "--overwrite", "--vocab_size=200",
          "--num_workers=1"]
  if flag != "--output_file":
    args.append(f"--output_file={tmp_path / 'v.txt'}")
  line = _one_error(run_cli("bert_data.build_vocab", *args))
  assert f"{flag}={out}: is the input --input_file={text}" in line, line
  assert _digest(text) == before and not os.path.exists(tmp_path / "v.txt")


# ------------------------------------ item 7: the index command's foreign file


def _record_file(path) -> str:
  with open(path, "wb") as f:
    f.write(tfrecord.frame(b"ab") + tfrecord.frame(b"cde"))
  return str(path)


def test_index_command_keeps_an_unrelated_index_file(tmp_path):
  records = _record_file(tmp_path / "r.tfrecord")
  with open(tmp_path / "r.tfrecord.index", "w", encoding="utf-8") as f:
    f.write("my notes\n")
  line = _one_error(run_cli("textrecords.index", records))
  assert "r.tfrecord.index exists and is not a textrecords index" in line, line
  assert (tmp_path / "r.tfrecord.index").read_text(encoding="utf-8") == "my notes\n"


def test_index_command_rebuilds_its_own_stale_index(tmp_path):
  records = _record_file(tmp_path / "r.tfrecord")
  assert run_cli("textrecords.index", records).returncode == 0
  with open(records, "ab") as f:
    f.write(tfrecord.frame(b"f"))
  r = run_cli("textrecords.index", records)
  assert r.returncode == 0 and r.stdout.strip().endswith("r.tfrecord.index: 3 records"), r


# ------------------------------------------ item 8: s3:// without credentials


def _no_credentials_env(endpoint: str) -> dict:
  """AWS settings with no credentials anywhere (no instance-metadata lookup)
  and a localhost endpoint: nothing can leave the machine."""
  env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
  env.update(AWS_SHARED_CREDENTIALS_FILE="/nonexistent", AWS_CONFIG_FILE="/nonexistent",
             AWS_EC2_METADATA_DISABLED="true", AWS_ENDPOINT_URL=endpoint,
             AWS_MAX_ATTEMPTS="1", AWS_DEFAULT_REGION="us-east-1",
             TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO)
  return env


S3_READS = {
    "bert_text": ("bert_data.create", "s3://bkt/c.txt", "--input_file=s3://bkt/c.txt",
                  "--output_file=o.tfrecord", f"--vocab_file={VOCAB}"),
    "bert_vocab": ("bert_data.create", "s3://bkt/vocab.txt", f"--input_file={SAMPLE_TEXT}",
                   "--output_file=o.tfrecord", "--vocab_file=s3://bkt/vocab.txt"),
    "w2v": ("w2v_data.create", "s3://bkt/*.txt", "--input_file=s3://bkt/*.txt",
            "--output_dir=w2v"),
    "mt": ("mt_data.create", "s3://bkt/p.txt", "--input_file=s3://bkt/p.txt",
           "--output_dir=mt"),
    "build_vocab": ("bert_data.build_vocab", "s3://bkt/c.txt", "--input_file=s3://bkt/c.txt",
                    "--output_file=v.txt"),
    "stats": ("bert_data.stats", "s3://bkt/t.tfrecord", "--input_file=s3://bkt/t.tfrecord"),
    "inspect": ("bert_data.inspect", "s3://bkt/t.tfrecord", "--input_file=s3://bkt/t.tfrecord",
                f"--vocab_file={VOCAB}"),
    "mt_stats": ("mt_data.stats", "s3://bkt/mt", "--output_dir=s3://bkt/mt"),
    "index": ("textrecords.index", "s3://bkt/t.tfrecord", "s3://bkt/t.tfrecord"),
}


@pytest.mark.parametrize("case", sorted(S3_READS))
def test_s3_reads_without_credentials_are_one_line(tmp_path, case):
  pytest.importorskip("s3fs")
  module, url, *args = S3_READS[case]
  r = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                     timeout=120, cwd=tmp_path,
                     env=_no_credentials_env(f"http://127.0.0.1:{free_port()}"))
  line = _one_error(r)
  assert line.startswith(f"error: {url}: cannot reach the storage: "), line
  assert "credentials" in line and "NoCredentialsError" not in line, line
  assert os.listdir(tmp_path) == []


def test_s3_input_on_an_unreachable_endpoint_is_one_line(tmp_path):
  pytest.importorskip("s3fs")
  env = dict(_no_credentials_env(f"http://127.0.0.1:{free_port()}"),
             AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing")
  r = subprocess.run([sys.executable, "-m", "w2v_data.create", "--input_file=s3://bkt/c.txt",
                      "--output_dir=w2v"], capture_output=True, text=True, timeout=120,
                     cwd=tmp_path, env=env)
  assert "error: s3://bkt/c.txt: cannot reach the storage: " in _one_error(r)


# ------------------------------------------- item 11: Ctrl-C during the imports

COMMANDS = ["bert_data.create", "bert_data.inspect", "bert_data.stats", "bert_data.build_vocab",
            "w2v_data.create", "mt_data.create", "mt_data.stats", "textrecords.index"]


def _interrupt_while_importing(argv, cwd) -> tuple:
  """Starts `argv`, sends SIGINT as soon as `textrecords` is imported (the
  command's first import; numpy and the package's modules still load), and
  returns (exit status, stderr lines other than -X importtime's)."""
  env = dict(os.environ, PYTHONPROFILEIMPORTTIME="1", PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="3")
  p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd,
                       env=env, preexec_fn=sigint_as_in_a_terminal)
  seen = []
  for raw in p.stderr:
    seen.append(raw.decode("utf-8", "replace"))
    if seen[-1].split("|")[-1].strip() == "textrecords":
      p.send_signal(signal.SIGINT)
      break
  seen.append(p.stderr.read().decode("utf-8", "replace"))
  p.stderr.close()
  p.wait(timeout=60)
  lines = "".join(seen).splitlines()
  return p.returncode, [l for l in lines if l.strip() and not l.startswith("import time:")]


@pytest.mark.parametrize("module", COMMANDS)
def test_ctrl_c_while_a_command_imports_is_one_line(tmp_path, module):
  rc, lines = _interrupt_while_importing([sys.executable, "-m", module, "--help"], tmp_path)
  assert not any("Traceback" in l for l in lines), lines
  assert (rc, lines) == (130, ["error: interrupted"])


def test_ctrl_c_while_a_console_script_imports_is_one_line(tmp_path):
  script = os.path.join(os.path.dirname(sys.executable), "bert-data-create")
  if not os.path.exists(script):
    pytest.skip("the console scripts are not installed (pip install -e .)")
  rc, lines = _interrupt_while_importing([script, "--help"], tmp_path)
  assert (rc, lines) == (130, ["error: interrupted"])


def test_a_program_importing_the_packages_keeps_pythons_ctrl_c(tmp_path):
  code = "import sys, bert_data; print(sys.excepthook is sys.__excepthook__)"
  r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                     env=dict(os.environ, PYTHONPATH=REPO), cwd=tmp_path)
  assert r.stdout.strip() == "True", r


# ------------------------------------------------- item 15: misleading messages


@pytest.mark.parametrize("resume", [False, True])
def test_a_foreign_metadata_file_is_not_called_an_earlier_output(tmp_path, resume):
  (tmp_path / "t.tfrecord.meta.json").write_text("my notes\n", encoding="utf-8")
  r = run_cli("bert_data.create", f"--input_file={SAMPLE_TEXT}", f"--vocab_file={VOCAB}",
              f"--output_file={tmp_path / 't.tfrecord'}", *BERT_FLAGS,
              *(["--resume"] if resume else []))
  line = _one_error(r)
  assert "t.tfrecord.meta.json exists and is not textrecords metadata (not JSON)" in line, line
  assert "earlier output" not in line and "other inputs" not in line
  assert (tmp_path / "t.tfrecord.meta.json").read_text(encoding="utf-8") == "my notes\n"


def test_a_bound_from_another_flag_names_both_flags(tmp_path):
  r = run_cli("bert_data.create", f"--input_file={SAMPLE_TEXT}", f"--vocab_file={VOCAB}",
              f"--output_file={tmp_path / 't.tfrecord'}", "--max_seq_length=5")
  line = _one_error(r)
  assert line.startswith("error: --max_predictions_per_seq=20: must be in [0, 5]"), line
  assert "--max_seq_length=5" in line, line


def _demo_summary_script() -> str:
  """The Python step of scripts/demo that prints the summary of the metadata."""
  with open(os.path.join(REPO, "scripts", "demo"), encoding="utf-8") as f:
    text = f.read()
  return re.search(r"<<'PYEOF'\n(.*?)\nPYEOF", text, re.S).group(1)


def test_demo_summary_counts_the_files_create_wrote(tmp_path):
  out = tmp_path / "sample.tfrecord"
  r = run_cli("bert_data.create", f"--input_file={SAMPLE_TEXT}", f"--vocab_file={VOCAB}",
              f"--output_file={out}", "--max_seq_length=32", "--dupe_factor=1",
              "--num_workers=1")
  assert r.returncode == 0, r.stderr
  said = re.search(r"to (\d+) file\(s\)", r.stderr).group(1)
  summary = subprocess.run([sys.executable, "-", f"{out}.meta.json"], input=_demo_summary_script(),
                           capture_output=True, text=True, timeout=60, check=True).stdout
  files = re.search(r"files +(\d+) record file", summary)
  assert files and files.group(1) == said == "1", summary
  assert "1 offset index" in summary, summary


def test_pv_dbow_progress_counts_what_the_summary_counts(tmp_path):
  with open(SAMPLE_TEXT, encoding="utf-8") as f:  # one document a line
    docs = [l for l in f.read().splitlines() if l.strip()]
  (tmp_path / "docs.txt").write_text("\n".join(docs) + "\n", encoding="utf-8")
  r = run_cli("w2v_data.create", f"--input_file={tmp_path / 'docs.txt'}",
              f"--output_dir={tmp_path / 'pv'}",
              "--model=pv_dbow", "--min_freq=1", "--num_workers=1")
  assert r.returncode == 0, r.stderr
  lines = r.stderr.strip().splitlines()
  summary = lines[-1]
  examples = re.search(r"([\d,]+) \(document, word\) examples", summary).group(1)
  assert int(examples.replace(",", "")) > 0
  # Every line that counts what was written (progress lines too) counts the
  # summary's examples, never (skip-gram) pairs.
  for line in lines:
    assert "pairs" not in line, r.stderr
    if line != summary and "examples" in line:
      assert f"{examples} (document, word) examples" in line, r.stderr
