"""The scripts in scripts/: bad flags and missing packages end in one line, before any work.

Every flag check runs while the flags are parsed (`textrecords.runs.script_args`).
The subprocess runs here put a "shadow" folder first on PYTHONPATH whose
tensorflow, keras, jax and numba packages raise ModuleNotFoundError on import,
as a `pip install -e .` without extras has them: a bad flag must be refused
before anything imports them, and valid flags must end in one line naming the
extra to install (issue 36 items 9 and 10).
"""

import ast
import os
import subprocess
import sys
import time

import pytest
from absl import flags

from conftest import REPO, SAMPLE_TEXT, VOCAB, W2V_TINY, error_lines
from textrecords.errors import UserError
from textrecords.runs import script_args

MISSING = ("tensorflow", "keras", "jax", "numba")
MT_PAIRS = os.path.join(REPO, "tests", "testdata", "mt_pairs.txt")
TF_HINT = "pip install -e '.[cpu]' (or '.[gpu]' for an NVIDIA GPU)"


@pytest.fixture(scope="module")
def shadow(tmp_path_factory):
  """A PYTHONPATH folder where the optional packages cannot be imported."""
  root = tmp_path_factory.mktemp("shadow")
  for name in MISSING:
    (root / name).mkdir()
    (root / name / "__init__.py").write_text(
        f"raise ModuleNotFoundError(\"No module named '{name}'\", name='{name}')\n")
  return str(root)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
  """Small datasets of each package: {"w2v", "bert", "mt"} -> location."""
  root = tmp_path_factory.mktemp("script_args")
  bert, mt, w2v = str(root / "train.tfrecord"), str(root / "mt"), str(root / "w2v")
  for args in (["bert_data.create", f"--input_file={SAMPLE_TEXT}", f"--output_file={bert}",
                f"--vocab_file={VOCAB}", "--max_seq_length=32", "--max_predictions_per_seq=5",
                "--dupe_factor=1"],
               ["mt_data.create", f"--input_file={MT_PAIRS}", f"--output_dir={mt}",
                "--num_train=40", "--num_val=10"],
               ["w2v_data.create", f"--input_file={W2V_TINY}", f"--output_dir={w2v}",
                "--min_freq=1", "--subsample_t=1"]):
    r = subprocess.run([sys.executable, "-m", *args, "--quiet"], capture_output=True,
                       text=True, timeout=300, cwd=REPO)
    assert r.returncode == 0, r.stderr
  return {"w2v": w2v, "bert": bert, "mt": mt}


def _script(name, *args, env_path=None, timeout=300):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  if env_path:
    env["PYTHONPATH"] = os.pathsep.join([env_path, REPO])
  start = time.monotonic()
  r = subprocess.run([sys.executable, os.path.join(REPO, "scripts", name), *args],
                     capture_output=True, text=True, env=env, timeout=timeout, cwd=REPO)
  return r, time.monotonic() - start


BAD_FLAGS = [
    ("train_bert_tiny.py", "bert", "--input", ["--steps", "-3"], "--steps=-3: must be >= 1"),
    ("train_bert_tiny.py", "bert", "--input", ["--learning_rate=0"],
     "--learning_rate=0.0: must be > 0"),
    ("train_bert_tiny.py", "bert", "--input", ["--hidden=65", "--heads=2"],
     "--hidden=65: must be a multiple of --heads=2"),
    ("train_bert_tiny.py", "bert", "--input", ["--seed=-1"],
     "--seed=-1: must be in [0, 4294967295]"),
    ("train_bert_tiny.py", "bert", "--input", ["--batch_size=100000"], None),
    ("train_bert_tiny_jax.py", "bert", "--input", ["--workers=-1"], "--workers=-1: must be >= 0"),
    ("train_bert_tiny_jax.py", "bert", "--input", ["--steps=0"], "--steps=0: must be >= 1"),
    ("train_skipgram.py", "w2v", "--data_dir", ["--epochs=0"], "--epochs=0: must be >= 1"),
    ("train_skipgram.py", "w2v", "--data_dir", ["--embed_size=0"],
     "--embed_size=0: must be >= 1"),
    ("train_skipgram.py", "w2v", "--data_dir", ["--window=0"], "--window=0: must be >= 1"),
    ("train_skipgram.py", "w2v", "--data_dir", ["--learning_rate=-1"],
     "--learning_rate=-1.0: must be > 0"),
    ("train_skipgram.py", "w2v", "--data_dir", ["--noise_words=0"],
     "--noise_words=0: must be >= 1"),
    ("train_skipgram.py", "w2v", "--data_dir", ["--subsample_t=0"],
     "--subsample_t=0.0: must be in (0, 1]"),
    ("train_skipgram.py", "w2v", "--data_dir", ["--pad_to=0"], "--pad_to=0: must be >= 1"),
    ("train_skipgram.py", "w2v", "--data_dir", ["--save_vectors=no/such/dir/v.vec"], None),
    ("train_cbow.py", "w2v", "--data_dir", ["--batch_size=0"], "--batch_size=0: must be >= 1"),
    ("train_pv.py", "w2v", "--data_dir", ["--steps_per_epoch=0"],
     "--steps_per_epoch=0: must be >= 1"),
    ("train_seq2seq.py", "mt", "--data_dir", ["--lr=0"], "--lr=0.0: must be > 0"),
    ("train_seq2seq.py", "mt", "--data_dir", ["--dropout=1"], "--dropout=1.0: must be in [0, 1)"),
    ("train_seq2seq.py", "mt", "--data_dir", ["--num_steps=0"], "--num_steps=0: must be >= 1"),
    ("train_seq2seq.py", "mt", "--data_dir", ["--batch_size=41"],
     "--batch_size=41: more than the 40 pairs of the train split at --data_dir={data}; "
     "lower --batch_size"),
]


@pytest.mark.parametrize("script,kind,flag,args,want", BAD_FLAGS)
def test_a_bad_flag_is_one_line_before_any_import_of_tensorflow(
    data, shadow, script, kind, flag, args, want):
  r, seconds = _script(script, f"{flag}={data[kind]}", *args, env_path=shadow)
  assert r.returncode == 2, (r.stdout, r.stderr)
  lines = error_lines(r.stderr)
  assert len(lines) == 1 and lines[0].startswith("error: --"), r.stderr
  assert "not installed" not in lines[0] and "Traceback" not in r.stderr
  if want:
    assert lines[0] == "error: " + want.format(data=data[kind])
  else:
    assert lines[0].startswith(f"error: {args[0].split('=')[0]}="), lines
  assert seconds < 60  # no TensorFlow (shadowed) and no training: a fraction of this


def test_the_messages_of_checks_that_have_no_fixed_text(data, tmp_path):
  r, _ = _script("train_skipgram.py", f"--data_dir={data['w2v']}",
                 f"--save_vectors={tmp_path}/no/v.vec")
  assert error_lines(r.stderr) == [
      f"error: --save_vectors={tmp_path}/no/v.vec: its folder {tmp_path}/no does not exist"]
  r, _ = _script("train_bert_tiny.py", "--input", data["bert"], "--batch_size=100000")
  assert r.returncode == 2 and len(error_lines(r.stderr)) == 1
  assert error_lines(r.stderr)[0].startswith("error: --batch_size=100000: more than the ")
  assert error_lines(r.stderr)[0].endswith(f"records at --input={data['bert']}; lower "
                                           "--batch_size")


def test_eval_vectors_refuses_missing_files_in_one_line(tmp_path):
  (tmp_path / "v.vec").write_text("1 2\na 0.5 0.5\n", encoding="utf-8")
  missing = str(tmp_path / "missing.tsv")
  for args, want in [
      ([f"--vectors={missing}", "--geometry"], f"--vectors={missing}: no such file"),
      ([f"--vectors={tmp_path / 'v.vec'}", f"--pairs={tmp_path / 'v.vec'},{missing}"],
       f"--pairs={tmp_path / 'v.vec'},{missing}: no such file: {missing}"),
      ([f"--vectors={tmp_path / 'v.vec'}", f"--analogies={missing}"],
       f"--analogies={missing}: no such file"),
      ([f"--vectors={tmp_path / 'v.vec'}"], "give --pairs, --analogies and/or --geometry")]:
    r, _ = _script("eval_vectors.py", *args)
    assert r.returncode == 2 and error_lines(r.stderr) == ["error: " + want], r.stderr


@pytest.mark.parametrize("script,kind,flag", [
    ("train_skipgram.py", "w2v", "--data_dir"),
    ("train_bert_tiny.py", "bert", "--input"), ("train_seq2seq.py", "mt", "--data_dir")])
def test_without_tensorflow_a_script_names_the_extra_in_one_line(
    data, shadow, script, kind, flag):
  extra = ["--batch_size=8"] if kind == "mt" else []
  r, _ = _script(script, f"{flag}={data[kind]}", *extra, env_path=shadow)
  assert r.returncode == 2, (r.stdout, r.stderr)
  assert error_lines(r.stderr) == [
      f"error: tensorflow is not installed (this script needs tensorflow, keras): {TF_HINT}"]
  if script == "train_bert_tiny.py":  # says what it does before the slow part
    out = r.stdout.splitlines()
    assert out[0].startswith(f"records: {data['bert']}  (") and out[1].startswith("training 50 ")


def test_without_jax_the_jax_script_names_the_extra_in_one_line(data, shadow):
  r, _ = _script("train_bert_tiny_jax.py", "--input", data["bert"], env_path=shadow)
  assert r.returncode == 2, r.stderr
  assert error_lines(r.stderr) == [
      "error: jax is not installed (this script needs jax, keras, grain): pip install -e "
      "'.[jax]'"]


def test_keras_none_in_sys_modules_is_reported_too(data):
  code = ("import runpy, sys; sys.modules['keras'] = None; "
          f"sys.argv = ['train_skipgram.py', '--data_dir={data['w2v']}']; "
          f"runpy.run_path({os.path.join(REPO, 'scripts', 'train_skipgram.py')!r}, "
          "run_name='__main__')")
  r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                     cwd=REPO, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  assert r.returncode == 2, r.stderr
  assert error_lines(r.stderr) == [
      f"error: keras is not installed (this script needs tensorflow, keras): {TF_HINT}"]


def test_the_jax_extra_is_in_setup_py():
  with open(os.path.join(REPO, "setup.py"), encoding="utf-8") as f:
    assert '"jax": [' in f.read()


# ------------------------------------------------------------ the module itself

def test_parser_checks_each_flag_with_a_value(capsys):
  p = script_args.ScriptParser(prog="t")
  p.add_argument("--n", type=int, default=None, check=script_args.POSITIVE)
  p.add_argument("--rate", type=float, default=0.1, check=script_args.RATE)
  assert p.parse_args([]).n is None  # absent, no default: not checked
  assert p.parse_args(["--n=2", "--rate=3"]).rate == 3.0
  for argv, want in [(["--n=0"], "error: --n=0: must be >= 1\n"),
                     (["--rate=-0.5"], "error: --rate=-0.5: must be > 0\n")]:
    with pytest.raises(SystemExit) as e:
      p.parse_args(argv)
    assert e.value.code == 2 and capsys.readouterr().err == want
  with pytest.raises(SystemExit) as e:
    p.parse_args(["--n=x"])
  err = capsys.readouterr().err
  assert e.value.code == 2 and err.count("\n") == 1 and err.startswith("error: argument --n")


def test_checks():
  assert script_args.within(0, 1, lo_open=True)(0) == "must be in (0, 1]"
  assert script_args.FRACTION(1.0) is None and script_args.DROPOUT(0.0) is None
  assert script_args.SEED(2**32) == "must be in [0, 4294967295]"
  assert script_args.NON_NEGATIVE(0) is None and script_args.POSITIVE(1) is None
  script_args.check_batch_fits(8, 8, "pairs")
  with pytest.raises(UserError, match=r"^--batch_size=9: more than the 8 pairs; lower "):
    script_args.check_batch_fits(9, 8, "pairs")


def test_require_names_the_missing_module_and_the_install(monkeypatch):
  script_args.require(("json",), "x")
  monkeypatch.setitem(sys.modules, "textrecords_no_such_module", None)
  with pytest.raises(UserError) as e:
    script_args.require(("json", "textrecords_no_such_module"), "pip install -e '.[z]'")
  assert str(e.value) == ("textrecords_no_such_module is not installed (this script needs "
                          "json, textrecords_no_such_module): pip install -e '.[z]'")


# ------------------------------------------------------- one way to parse arguments

PARSED_PACKAGES = ("scripts", "textrecords", "bert_data", "w2v_data", "mt_data")


def test_no_command_or_script_imports_argparse():
  """Every command and script parses its arguments with absl (issue 34 item 5)."""
  found = []
  for package in PARSED_PACKAGES:
    for folder, _, names in os.walk(os.path.join(REPO, package)):
      for name in sorted(n for n in names if n.endswith(".py")):
        path = os.path.join(folder, name)
        with open(path, encoding="utf-8") as f:
          tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
          modules = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) else [])
          if any(m and m.split(".")[0] == "argparse" for m in modules):
            found.append(os.path.relpath(path, REPO))
  assert not found, found
  assert os.path.isfile(os.path.join(REPO, "scripts", "train_bert_tiny.py"))  # the walk saw them


def _parser(prog="t"):
  p = script_args.ScriptParser(prog=prog, description="A tool.")
  p.add_argument("base", help="a revision")
  p.add_argument("--steps", type=int, default=5, check=script_args.POSITIVE, help="how many")
  p.add_argument("--rate", type=float, default=0.5)
  p.add_argument("--packed", action="store_true", help="pack rows")
  p.add_argument("--mode", choices=("training", "evaluation"), default="training")
  p.add_argument("--verbose", type=int, choices=(0, 1, 2), default=0)
  p.add_argument("--translate", action="append", help="a sentence")
  p.add_argument("--input", required=True, dest="records")
  p.add_argument("--_internal", default=None, help=script_args.SUPPRESS)
  p.set_defaults(_extra=(1, 2))
  return p


def _refused(p, argv, capsys) -> str:
  with pytest.raises(SystemExit) as e:
    p.parse_args(argv)
  err = capsys.readouterr().err
  assert e.value.code == 2 and err.count("\n") == 1 and err.startswith("error: "), err
  return err.rstrip("\n")


def test_parser_takes_the_reference_flag_syntax():
  p = _parser()
  a = p.parse_args(["HEAD~1", "--input=r"])
  assert (a.base, a.steps, a.rate, a.packed, a.mode, a.verbose, a.translate, a.records,
          a._internal, a._extra) == ("HEAD~1", 5, 0.5, False, "training", 0, None, "r", None,  # pylint: disable=protected-access
                                     (1, 2))
  for form, want in [("--packed", True), ("--nopacked", False), ("--packed=false", False),
                     ("--packed=true", True)]:
    assert p.parse_args(["b", "--input=r", form]).packed is want, form
  a = p.parse_args(["--input", "r", "--steps", "7", "b", "--mode=evaluation", "--verbose=2",
                    "--translate=a", "--translate", "b c"])
  assert (a.base, a.steps, a.mode, a.verbose, a.translate) == ("b", 7, "evaluation", 2,
                                                               ["a", "b c"])
  assert p.parse_args(["b", "--input=r"]).translate is None  # a new parse starts afresh
  assert p.parse_args(["--input=r", "--", "-b"]).base == "-b"


def test_parser_errors_are_one_line_naming_the_flag(capsys):
  p = _parser()
  for argv, want in [
      (["b", "--input=r", "--steps=0"], "error: --steps=0: must be >= 1"),
      (["b", "--input=r", "--steps", "-3"], "error: --steps=-3: must be >= 1"),
      (["b", "--input=r", "--steps=x"],
       "error: argument --steps: invalid int value: 'x' (--help for usage)"),
      (["b", "--input=r", "--rate=fast"],
       "error: argument --rate: invalid float value: 'fast' (--help for usage)"),
      (["b", "--input=r", "--mode=eval"], "error: argument --mode: invalid choice: 'eval' "
       "(choose from 'training', 'evaluation') (--help for usage)"),
      (["b", "--input=r", "--verbose=3"], "error: argument --verbose: invalid choice: '3' "
       "(choose from '0', '1', '2') (--help for usage)"),
      (["b", "--input=r", "--packed=maybe"],
       "error: argument --packed: invalid bool value: 'maybe' (true or false) (--help for usage)"),
      (["b", "--input=r", "--stepz=3"], "error: --stepz: unknown flag (--help for usage)"),
      (["b", "--input=r", "--steps"], "error: argument --steps: expected a value (--help for "
       "usage)"),
      (["b", "--input=r", "--steps=2", "--steps=3"],
       "error: --steps is given 2 times; give it once"),
      (["b"], "error: the following arguments are required: --input (--help for usage)"),
      ([], "error: the following arguments are required: --input, base (--help for usage)"),
      (["b", "c", "--input=r"], "error: unrecognized arguments: c (--help for usage)")]:
    assert _refused(p, argv, capsys) == want, argv


def test_parser_help_lists_the_flags_and_exits_0(capsys):
  for flag in ("--help", "-h", "--helpfull"):
    with pytest.raises(SystemExit) as e:
      _parser(prog="tool.py").parse_args(["--steps=0", flag])
    out = capsys.readouterr().out
    assert e.value.code == 0 and out.startswith("usage: tool.py [flags] base\n\nA tool.\n"), out
  for shown in ("  base: a revision", "  --steps=<int>: how many (default: 5)",
                "  --[no]packed: pack rows", "  --mode=<training|evaluation>",
                "  --translate=<str>: a sentence (repeatable)", "  --input=<str>: (required)"):
    assert shown in out, shown
  assert "_internal" not in out


def test_two_parsers_with_the_same_flags_live_in_one_process(capsys):
  """Each parser has its own absl FlagValues: not absl's global FLAGS."""
  first, second = _parser(), _parser()
  second.add_argument("--only_here", type=int, default=1)
  a = first.parse_args(["x", "--input=one", "--steps=2", "--packed"])
  b = second.parse_args(["y", "--input=two", "--only_here=3"])
  assert (a.base, a.records, a.steps, a.packed) == ("x", "one", 2, True)
  assert (b.base, b.records, b.steps, b.packed, b.only_here) == ("y", "two", 5, False, 3)
  assert first.parse_args(["x", "--input=one"]).steps == 5
  assert _refused(first, ["x", "--input=one", "--only_here=3"], capsys) == (
      "error: --only_here: unknown flag (--help for usage)")
  assert "only_here" not in flags.FLAGS and "steps" not in flags.FLAGS
