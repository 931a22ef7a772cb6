"""The packages' command lines agree with each other (issue 21 items 10, 11, 14,
15): console scripts for every tool, paths printed as given, one name per
flag, flags that would have no effect refused, messages. Real subprocesses,
tiny inputs."""

import os
import re
import subprocess
import sys
import time

import pytest

from conftest import (BUNDLED_TEXT, BUNDLED_VOCAB, REPO, SAMPLE_TEXT, TESTDATA, W2V_TINY, error_lines,
                      run_cli)
from textrecords.runs import cli
from textrecords.datasets import metadata

MT_PAIRS = os.path.join(TESTDATA, "mt_pairs.txt")


def _run(cwd, *argv, timeout=300):
  """`python argv...` in folder `cwd`, importing this checkout."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO)
  return subprocess.run([sys.executable, *argv], capture_output=True, text=True,
                        timeout=timeout, env=env, cwd=str(cwd))


def _console_scripts():
  """{script name: "module:function"} of setup.py."""
  with open(os.path.join(REPO, "setup.py"), encoding="utf-8") as f:
    text = f.read()
  return dict(re.findall(r'"([a-z0-9-]+) = ([a-z0-9_.]+:[a-z_]+)"', text))


def test_every_tool_has_a_console_script_that_runs():
  scripts = _console_scripts()
  for module in ("bert_data.create", "bert_data.inspect", "bert_data.stats",
                 "bert_data.build_vocab", "w2v_data.create", "mt_data.create",
                 "mt_data.stats", "textrecords.index"):
    assert f"{module}:entry_point" in scripts.values(), module
  readme = open(os.path.join(REPO, "README.md"), encoding="utf-8").read()
  for name, target in sorted(scripts.items()):
    module, function = target.split(":")
    assert f"| `{name}` | `python -m {module}` |" in readme, name
    code = (f"import sys; sys.argv = [{name!r}, '--help']; "
            f"from {module} import {function}; {function}()")
    r = _run(REPO, "-c", code)
    assert r.returncode == 0, (name, r.stderr)
    assert "--" in r.stdout or "usage" in r.stdout, name


def test_index_help_flags_print_usage_an_option_is_one_line(tmp_path):
  for flag in ("--help", "--helpfull", "-h", "--helpshort"):
    r = _run(tmp_path, "-m", "textrecords.index", flag)
    assert r.returncode == 0 and r.stdout.startswith("usage: "), (flag, r.stderr)
    assert "no such file" not in r.stdout + r.stderr
  r = _run(tmp_path, "-m", "textrecords.index", "--verbose", "x.tfrecord")
  assert r.returncode == 2 and error_lines(r.stderr) == [
      "error: --verbose: unknown option (textrecords.index takes record files only; "
      "--help for usage)"]
  assert os.listdir(tmp_path) == []


def test_mt_prints_the_output_folder_as_given(tmp_path):
  args = ("-m", "mt_data.create", f"--input_file={MT_PAIRS}", "--output_dir=out/mt",
          "--num_train=8", "--num_val=2", "--min_freq=1", "--num_workers=1")
  r = _run(tmp_path, *args)
  assert r.returncode == 0, r.stderr
  assert error_lines(r.stderr)[-1].endswith(" -> out/mt"), r.stderr
  before = (tmp_path / "out" / "mt" / "meta.json").read_bytes()
  r = _run(tmp_path, *args)
  assert r.returncode == 2 and error_lines(r.stderr) == [
      "error: out/mt/meta.json exists (a complete earlier output); pass --overwrite to "
      "replace it"]
  assert (tmp_path / "out" / "mt" / "meta.json").read_bytes() == before


# ------------------------------------------------------------ messages (item 15)

def _bert(tmp_path, *args):
  out = tmp_path / "out"
  out.mkdir(exist_ok=True)
  r = run_cli("bert_data.create", f"--input_file={SAMPLE_TEXT}",
              f"--output_file={out}/t.tfrecord", "--dupe_factor=1", "--quiet", *args)
  assert os.listdir(out) == []
  return r


def test_a_vocab_folder_is_named_a_folder_missing_specials_all_listed(tmp_path):
  folder = tmp_path / "adir"
  folder.mkdir()
  r = _bert(tmp_path, f"--vocab_file={folder}")
  assert r.returncode == 2 and error_lines(r.stderr) == [
      f"error: --vocab_file: {folder} is a folder, expected a vocab file"]
  words = tmp_path / "words.txt"
  words.write_text("".join(f"{w}\n" for w in ("the", "a", "##s", "cat")))
  r = _bert(tmp_path, f"--vocab_file={words}")
  assert r.returncode == 2 and error_lines(r.stderr) == [
      f"error: --vocab_file: {words} lacks [UNK], [CLS], [SEP], [MASK]"]
  no_mask = tmp_path / "no_mask.txt"
  no_mask.write_text("".join(f"{w}\n" for w in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "the")))
  r = _bert(tmp_path, f"--vocab_file={no_mask}")
  assert r.returncode == 2 and error_lines(r.stderr) == [
      f"error: --vocab_file: {no_mask} lacks [MASK]"]
  assert sorted(os.listdir(tmp_path)) == ["adir", "no_mask.txt", "out", "words.txt"]
  assert words.read_text() == "the\na\n##s\ncat\n"


def test_another_packages_dataset_is_named_with_the_right_article():
  assert metadata.foreign_message("d", {"package": "mt_data"}) == (
      "d: an mt_data dataset; read it with mt_data.make_dataset")
  assert metadata.foreign_message("d", {"package": "w2v_data"}).startswith("d: a w2v_data ")


@pytest.mark.parametrize("module,args,refused", [
    ("mt_data.create", ["--tokenizer=word", "--vocab_size=50"],
     "--vocab_size=50: has no effect with --tokenizer=word (bpe only); drop it"),
    ("bert_data.build_vocab", ["--kind=sentencepiece", "--min_freq=3"],
     "--min_freq=3: has no effect with --kind=sentencepiece; drop it"),
    ("bert_data.build_vocab", ["--num_unused=10"], None),
    ("bert_data.build_vocab", ["--input_sentence_size=100"],
     "--input_sentence_size=100: has no effect with --kind=wordpiece; drop it"),
])
def test_a_flag_without_effect_is_refused(tmp_path, module, args, refused):
  if module == "mt_data.create":
    io = [f"--input_file={MT_PAIRS}", f"--output_dir={tmp_path}/out", "--num_train=8",
          "--num_val=2", "--min_freq=1"]
  else:
    io = [f"--input_file={BUNDLED_TEXT}", f"--output_file={tmp_path}/out/v.txt",
          "--vocab_size=1100"]
  r = run_cli(module, *io, "--num_workers=1", "--quiet", *args)
  if refused is None:
    assert r.returncode == 0, r.stderr
    return
  assert r.returncode == 2 and error_lines(r.stderr) == [f"error: {refused}"]
  assert os.listdir(tmp_path) == []


def test_pv_dbow_summary_counts_documents_and_document_word_examples(tmp_path):
  docs = tmp_path / "docs.txt"
  with open(W2V_TINY, encoding="utf-8") as f:
    docs.write_text("".join(l for l in f if l.strip()))
  n = len(docs.read_text().splitlines())
  for model, words in (("pv_dbow", r"\(document, word\) examples"),
                       ("pv_dm", r"centers, \d+ pairs")):
    r = run_cli("w2v_data.create", f"--input_file={docs}", f"--output_dir={tmp_path}/{model}",
                "--min_freq=1", "--num_workers=1", f"--model={model}",
                "--subsample_t=1e-4")  # d2l's draw: counts below 1,000, as before
    assert r.returncode == 0, r.stderr
    last = error_lines(r.stderr)[-1]
    assert re.fullmatch(rf"w2v_data: {n} documents, vocab \d+, \d+ {words} -> .*{model}",
                        last), last
    assert "sentences" not in r.stderr


# ------------------------------------------------------------ first-run compile notice (item 11)

def test_a_slow_step_is_announced_once_a_quick_one_or_quiet_not(capsys):
  said = []
  with cli.notice_if_slow(said.append, after_s=0.05):
    time.sleep(0.5)
  assert said == [cli.BUILD_NOTICE] == ["building compiled kernels once, ~1 min (later runs "
                                        "reuse them)"]
  with cli.notice_if_slow(said.append, after_s=0.2):
    pass
  time.sleep(0.4)
  assert len(said) == 1
  with cli.notice_if_slow(None, after_s=0.01):
    time.sleep(0.1)
  assert cli.Progress(quiet=True).sayer() is None
  cli.Progress().sayer("w2v_data: ")(cli.BUILD_NOTICE)
  err = capsys.readouterr().err
  assert re.fullmatch(r"\[ +\d+\.\ds\] w2v_data: building compiled kernels once, ~1 min "
                      r"\(later runs reuse them\)\n", err), err


def test_w2v_kernels_built_ahead_of_time_announce_the_build_only(tmp_path, monkeypatch):
  from w2v_data import kernel_loader  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(kernel_loader, "_cache_dirs", lambda: [str(tmp_path)])
  runs = []

  def failed_build(argv, **kwargs):
    runs.append(argv)
    return subprocess.CompletedProcess(argv, 1, "", "no C compiler")

  monkeypatch.setattr(kernel_loader.subprocess, "run", failed_build)
  said = []
  assert kernel_loader._ahead_of_time_module(said.append) is None  # pylint: disable=protected-access
  assert said == [cli.BUILD_NOTICE] and len(runs) == 1
  # The build failed once (its .failed record kept): later runs neither build nor say so.
  assert [n for n in os.listdir(tmp_path) if n.endswith(".failed")]
  assert kernel_loader._ahead_of_time_module(said.append) is None  # pylint: disable=protected-access
  assert said == [cli.BUILD_NOTICE] and len(runs) == 1


def test_a_run_with_built_kernels_says_nothing_about_building(tmp_path):
  r = run_cli("w2v_data.create", f"--input_file={W2V_TINY}", f"--output_dir={tmp_path}/w",
              "--min_freq=1", "--num_workers=2")
  assert r.returncode == 0, r.stderr
  assert "building compiled kernels" not in r.stderr


# ------------------------------------------------------------ training scripts (item 10)

@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
  """One dataset of each kind a script might be handed by mistake."""
  d = tmp_path_factory.mktemp("kinds")
  runs = {
      "cbow": ("w2v_data.create", f"--input_file={W2V_TINY}", f"--output_dir={d}/cbow",
               "--model=cbow", "--min_freq=1"),
      "skipgram": ("w2v_data.create", f"--input_file={W2V_TINY}", f"--output_dir={d}/skipgram",
                   "--min_freq=1"),
      "packed": ("bert_data.create", f"--input_file={BUNDLED_TEXT}",
                 f"--output_file={d}/packed.tfrecord", f"--vocab_file={BUNDLED_VOCAB}",
                 "--next_sentence=false", "--packing=full_sentences", "--dupe_factor=1"),
      "mt": ("mt_data.create", f"--input_file={MT_PAIRS}", f"--output_dir={d}/mt",
             "--num_train=8", "--num_val=2", "--min_freq=1"),
  }
  out = {}
  for kind, (module, *args) in runs.items():
    r = run_cli(module, *args, "--num_workers=1", "--quiet")
    assert r.returncode == 0, r.stderr
    out[kind] = args[1].split("=", 1)[1]
  return out


@pytest.mark.parametrize("script,flag,kind,right", [
    ("train_skipgram.py", "--data_dir", "cbow",
     "a w2v_data dataset of --model=cbow records; train on it with scripts/train_cbow.py"),
    ("train_bert_tiny.py", "--input", "skipgram",
     "a w2v_data dataset of --model=skipgram records; train on it with "
     "scripts/train_skipgram.py"),
    ("train_seq2seq.py", "--data_dir", "packed",
     "a bert_data dataset; train on it with scripts/train_bert_tiny.py"),
    ("train_cbow.py", "--data_dir", "mt",
     "an mt_data dataset; train on it with scripts/train_seq2seq.py"),
    ("train_pv.py", "--data_dir", "skipgram",
     "a w2v_data dataset of --model=skipgram records; train on it with "
     "scripts/train_skipgram.py"),
])
def test_a_script_given_another_kind_of_records_names_the_right_script(
    datasets, script, flag, kind, right):
  pytest.importorskip("tensorflow")
  location = datasets[kind]
  before = sorted(os.listdir(os.path.dirname(location)))
  r = _run(REPO, os.path.join(REPO, "scripts", script), f"{flag}={location}")
  assert r.returncode == 2, r.stderr[-2000:]
  assert error_lines(r.stderr) == [f"error: {flag}={location}: {right}"]
  assert "Traceback" not in r.stderr
  assert sorted(os.listdir(os.path.dirname(location))) == before


# ------------------------------------------------------------ samples and setup (item 16)

W2V_SAMPLE = os.path.join(REPO, "w2v_data", "sample", "sample_text.txt")


def test_the_w2v_sample_is_the_bert_samples_text_and_the_readme_example_runs(tmp_path):
  with open(BUNDLED_TEXT, encoding="utf-8") as f:
    want = [" ".join(re.findall(r"[a-z0-9]+(?:'[a-z]+)?", l.lower())) for l in f]
  with open(W2V_SAMPLE, encoding="utf-8") as f:
    assert f.read().splitlines() == [l for l in want if l]
  readme = open(os.path.join(REPO, "README.md"), encoding="utf-8").read()
  for where in ("bert_data/sample/sample_corpus.txt", "bert_data/sample/vocab.txt",
                "mt_data/sample/mt_sample.txt", "d2l-data.s3-accelerate.amazonaws.com/ptb.zip",
                "fra-eng.zip", "download.pytorch.org/whl/cpu"):
    assert where in readme, where
  assert '"w2v_data": ["sample/*"]' in open(os.path.join(REPO, "setup.py")).read()
  r = _run(tmp_path, "-m", "w2v_data.create", f"--input_file={W2V_SAMPLE}",
           "--output_dir=out/sample_w2v", "--min_freq=2")  # the README's command
  assert r.returncode == 0, r.stderr
  assert re.fullmatch(r"w2v_data: 364 sentences, vocab \d{3}, [\d,]+ centers, [\d,]+ pairs -> "
                      r"out/sample_w2v", error_lines(r.stderr)[-1]), r.stderr


def test_venv_setup_says_each_install_step_in_one_line_and_only_when_it_installs(tmp_path):
  """scripts/_venv.sh on a fresh machine: a fake python records the pip calls."""
  repo = tmp_path / "repo"
  (repo / "scripts").mkdir(parents=True)
  (repo / "setup.py").write_text("")
  (repo / "scripts" / "_venv.sh").write_text(
      open(os.path.join(REPO, "scripts", "_venv.sh"), encoding="utf-8").read())
  (repo / "scripts" / "caller").write_text(
      '#!/usr/bin/env bash\nsource "$(dirname "$0")/_venv.sh" cpu .venv "torch==1 --no-deps"\n'
      'echo ran\n')
  log = tmp_path / "pip.log"
  fake = tmp_path / "python3"
  fake.write_text(  # `-m venv DIR` makes DIR/bin/python, which logs its arguments
      "#!/usr/bin/env bash\nmkdir -p \"$3/bin\"\n"
      f"printf '#!/usr/bin/env bash\\necho \"$*\" >> {log}\\n' > \"$3/bin/python\"\n"
      "sed -i 's/\\$\\*/$*/' \"$3/bin/python\"; chmod +x \"$3/bin/python\"\n")
  fake.chmod(0o755)
  env = dict(os.environ, PYTHON=str(fake))
  first = subprocess.run(["bash", str(repo / "scripts" / "caller")], capture_output=True,
                         text=True, env=env, timeout=60)
  assert first.returncode == 0, first.stderr
  assert first.stdout == "ran\n"
  assert first.stderr.splitlines() == [
      "setup: creating the virtual environment .venv",
      "setup: .venv: pip install --upgrade pip",
      "setup: .venv: pip install torch==1 --no-deps",
      "setup: .venv: pip install -e '.[cpu]' (the first time: TensorFlow and the other "
      "dependencies, a few minutes)"]
  assert log.read_text().splitlines() == [
      "-m pip install -q --upgrade pip", "-m pip install -q torch==1 --no-deps",
      "-m pip install -q -e .[cpu]"]
  again = subprocess.run(["bash", str(repo / "scripts" / "caller")], capture_output=True,
                         text=True, env=env, timeout=60)
  assert again.returncode == 0 and again.stdout == "ran\n" and again.stderr == ""
  assert len(log.read_text().splitlines()) == 3


def test_a_two_line_file_counts_three_sentences_as_d2l_and_the_readme_says_so(tmp_path):
  two = tmp_path / "two.txt"
  two.write_text("a b c\nd e f\n")
  r = run_cli("w2v_data.create", f"--input_file={two}", f"--output_dir={tmp_path}/w",
              "--min_freq=1", "--num_workers=1")
  assert r.returncode == 0, r.stderr
  assert error_lines(r.stderr)[-1].startswith("w2v_data: 3 sentences, ")
  readme = " ".join(open(os.path.join(REPO, "README.md"), encoding="utf-8").read().split())
  assert "Sentences are counted as d2l counts them" in readme
  assert "(a 2-line file: 3 sentences;" in readme
  assert two.read_text() == "a b c\nd e f\n"
