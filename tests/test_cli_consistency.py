"""The packages' command lines agree with each other (issue 21 items 10, 11, 14,
15): console scripts for every tool, paths printed as given, one name per
flag, flags that would have no effect refused, messages. Real subprocesses,
tiny inputs."""

import os
import re
import subprocess
import sys

import pytest

from conftest import REPO, TESTDATA, error_lines

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
