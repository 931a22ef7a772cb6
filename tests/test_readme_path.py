"""The user docs' shell commands run as written (issue 36).

Every fenced shell block of README.md and docs/*.md (```, ```sh, ```bash)
whose first command is `python ...`, `./scripts/...`, `pip ...`, a console
script or another command is marked by the line before it:

  <!-- commands: run -->                       every command of the block runs
  <!-- commands: run; skip "ptb.train.txt", "out/ptb_w2v": PTB is not bundled -->
                                                a command holding one of the quoted
                                                strings is skipped, for that reason
  <!-- commands: run; quick "train_seq2seq.py": --epochs=2 -->
                                                in the quick run (the default) those
                                                flags are set in the matching
                                                commands: documented flags that cap
                                                training; TEXTRECORDS_DOC_COMMANDS=all
                                                runs them as written
  <!-- commands: skip: the reason -->           no command of the block runs
  <!-- commands: long: the reason -->           runs (as `run`, clauses too) only with
                                                TEXTRECORDS_DOC_COMMANDS=all

and `<!-- commands in this file: skip: the reason -->` skips a whole file.
An unmarked command block fails `test_every_command_block_is_marked`.

Each file's commands run in its order, with bash, in a fresh folder of its
own holding what they reference: scripts/ and the packages (with their
sample/ folders), `setup.py`, the README's stand-ins for the user's data
(`corpus/*.txt` and `vocab.txt`: bert_data's sample), and `.venv`: this
test's environment, marked installed (the setup step of `./scripts/demo`
would download; installing is not tested here). `python` and the console
scripts come first on PATH. Each command must exit 0, the files its flags
name as outputs must exist, and what the text promises about its output
holds (`_PROMISES`). A guide's block that repeats one already run (the
README's) is not run again unless later blocks of the guide run.
"""

import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

import pytest

from conftest import REPO, message_lines

FULL = os.environ.get("TEXTRECORDS_DOC_COMMANDS") == "all"
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
_MARK = re.compile(r"^<!-- commands: (.*) -->$")
_FILE_MARK = re.compile(r"^<!-- commands in this file: skip: (.+) -->$", re.M)
_SHELL = ("", "sh", "bash", "shell", "console")
_COMMAND_WORDS = {"python", "python3", "pip", "cmp", "sha256sum", "bert-data-create",
                  "bert-data-inspect", "bert-data-stats", "bert-data-build-vocab",
                  "w2v-data-create", "mt-data-create", "mt-data-stats", "textrecords-index"}
# What the commands reference, as the README says to provide it.
_LINKED = ("scripts", "bert_data", "w2v_data", "mt_data", "textrecords", "setup.py")
STAND_INS = {"corpus/sample_corpus.txt": "bert_data/sample/sample_corpus.txt",
              "vocab.txt": "bert_data/sample/vocab.txt"}
_TIMEOUT = 600


def user_docs():
  """README.md and the user guides under docs/, relative to the repo."""
  guides = sorted(glob.glob(os.path.join(REPO, "docs", "*.md")))
  return ["README.md"] + [os.path.relpath(g, REPO) for g in guides]


# ------------------------------------------------------------ blocks and markers

def _commands(body):
  """The block's commands: lines joined at a trailing backslash. A command
  keeps its trailing comment, and a comment line under it is added to that
  (bash ignores both; the promises read them)."""
  out = []
  for line in re.sub(r"\\\n\s*", " ", body).splitlines():
    line = line.strip()
    if line.startswith("#") and out:
      out[-1] += "  " + line
    elif line and not line.startswith("#"):
      out.append(line)
  return out


def _is_command(line):
  first = line.split()[0]
  while re.match(r"^[A-Z_][A-Z0-9_]*=", first) and len(line.split()) > 1:  # VAR=value cmd
    line = line.split(None, 1)[1]
    first = line.split()[0]
  return first in _COMMAND_WORDS or first.startswith("./scripts/")


def _parse_mark(text):
  """{'mode': run|skip|long, 'reason', 'skip': [(strings, reason)], 'quick': [(string, flags)]}."""
  clauses = [c.strip() for c in text.split(";")]
  head = re.fullmatch(r"(run)|(skip|long): (.+)", clauses[0])
  assert head, f"{text!r}: begins with 'run', 'skip: REASON' or 'long: REASON'"
  mark = {"mode": head.group(1) or head.group(2), "reason": head.group(3), "skip": [],
          "quick": []}
  for clause in clauses[1:]:
    m = re.fullmatch(r'(skip|quick) ((?:"[^"]+"(?:, )?)+): (.+)', clause)
    assert m and mark["mode"] != "skip", f"{clause!r}: not 'skip \"S\", ...: REASON' or " \
                                         "'quick \"S\": FLAGS' after 'run' or 'long'"
    mark[m.group(1)].append((re.findall(r'"([^"]+)"', m.group(2)), m.group(3)))
  return mark


def command_blocks(name):
  """[(where, commands, mark or None)] of the command blocks of one doc."""
  text = open(os.path.join(REPO, name), encoding="utf-8").read()
  whole_file = _FILE_MARK.search(text)
  blocks = []
  for m in _FENCE.finditer(text):
    commands = _commands(m.group(2))
    if m.group(1) not in _SHELL or not commands or not _is_command(commands[0]):
      continue
    before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
    mark = _MARK.match(before)
    where = f"{name}:{text.count(chr(10), 0, m.start()) + 1}"
    if whole_file:
      mark = {"mode": "skip", "reason": whole_file.group(1), "skip": [], "quick": []}
    else:
      mark = _parse_mark(mark.group(1)) if mark else None
    blocks.append((where, commands, mark))
  return blocks


def _plan(commands, mark):
  """[(command to run or None, why skipped)] for one marked block."""
  if mark["mode"] == "skip" or (mark["mode"] == "long" and not FULL):
    return [(None, mark["reason"])] * len(commands)
  plan = []
  for cmd in commands:
    why = next((reason for strings, reason in mark["skip"] if any(s in cmd for s in strings)),
               None)
    if why is None and not FULL:
      for strings, flags in mark["quick"]:
        if any(s in cmd for s in strings):
          cmd = _with_flags(cmd, flags)
    plan.append((None, why) if why else (cmd, None))
  return plan


def _with_flags(cmd, flags):
  """cmd with `flags` set before its trailing comment: a `--name=value` the
  command already has is replaced (a flag given twice is an error), others added.

  >>> _with_flags("python t.py --epochs=30 --x  # train", "--epochs=2 --seed=1")
  'python t.py --epochs=2 --x --seed=1  # train'
  """
  code, hash_, comment = cmd.partition(" #")
  code = code.rstrip()
  for flag in flags.split():
    name = flag.split("=", 1)[0]
    code, replaced = re.subn(rf"(?<!\S){re.escape(name)}(=\S*)?(?!\S)", lambda _: flag, code,
                             count=1)
    code += "" if replaced else f" {flag}"
  return code + (f"  #{comment}" if hash_ else "")


def test_every_command_block_is_marked():
  unmarked, stale = [], []
  for name in user_docs():
    for where, commands, mark in command_blocks(name):
      if mark is None:
        unmarked.append(where)
        continue
      for strings, _ in mark["skip"] + mark["quick"]:
        stale += [f"{where}: {s!r}" for s in strings if not any(s in c for c in commands)]
  assert not unmarked, f"{unmarked}: command blocks without a <!-- commands: ... --> line"
  assert not stale, f"{stale}: marker strings that match no command of their block"
  readme = command_blocks("README.md")
  assert readme and readme[0][1][0] == "./scripts/demo", "README's first command moved"
  assert sum(1 for _, _, m in readme if m["mode"] == "run") >= 3


def test_the_readme_names_the_stand_ins():
  # The stand-ins this test puts in the folder are the ones the README names.
  text = " ".join(open(os.path.join(REPO, "README.md"), encoding="utf-8").read().split())
  assert ("`bert_data/sample/sample_corpus.txt`" in text and "`bert_data/sample/vocab.txt`"
          in text and "use them for `corpus/*.txt` and `vocab.txt`" in text)


# ------------------------------------------------------------------- the folder

def _fresh_folder(path):
  """A folder holding what the docs' commands reference (see the module doc)."""
  os.makedirs(path)
  for name in _LINKED:
    os.symlink(os.path.join(REPO, name), os.path.join(path, name))
  for dest, src in STAND_INS.items():
    os.makedirs(os.path.dirname(os.path.join(path, dest)) or path, exist_ok=True)
    shutil.copyfile(os.path.join(REPO, src), os.path.join(path, dest))
  _installed_venv(os.path.join(path, ".venv"))
  return path


def _installed_venv(venv):
  """`.venv`: this interpreter and its packages, with the stamps of
  scripts/_venv.sh saying the project is installed."""
  os.makedirs(os.path.join(venv, "bin"))
  cfg = os.path.join(sys.prefix, "pyvenv.cfg")
  if os.path.exists(cfg):
    shutil.copyfile(cfg, os.path.join(venv, "pyvenv.cfg"))
    os.symlink(os.path.join(sys.prefix, "lib"), os.path.join(venv, "lib"))
  os.symlink(sys.executable, os.path.join(venv, "bin", "python"))
  later = time.time() + 3600  # newer than setup.py and the scripts, edited or not
  for extras in ("cpu", "cpu,test"):
    stamp = os.path.join(venv, f".textrecords-installed-{extras}")
    open(stamp, "w").close()
    os.utime(stamp, (later, later))


def _run(cmd, cwd):
  env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
  return subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, capture_output=True, text=True,
                        timeout=_TIMEOUT, check=False)


# ------------------------------------------------------------------ the promises

def _flag(cmd, name):
  """The value of --name=V in cmd, or None."""
  for arg in shlex.split(cmd.partition(" #")[0]):
    if arg.startswith(f"--{name}="):
      return arg.split("=", 1)[1]
  return None


def _outputs_exist(cmd, res, cwd):
  """The files the command's flags name as outputs exist."""
  out = _flag(cmd, "output_file")
  if out:
    found = glob.glob(os.path.join(cwd, out)) + glob.glob(os.path.join(cwd, out + "-*-of-*"))
    assert found, f"no {out}"
  out_dir = _flag(cmd, "output_dir")
  if out_dir and "stats" not in cmd:
    assert os.path.exists(os.path.join(cwd, out_dir, "meta.json")), f"no {out_dir}/meta.json"
  for name in ("save_vectors", "plot", "summary_json"):
    path = _flag(cmd, name)
    assert not path or os.path.getsize(os.path.join(cwd, path)) > 0, f"no --{name} file {path}"


def _demo(cmd, res, cwd):
  """README: it prints a summary and the first instances decoded as tokens,
  reads them back through the parser and fits a tiny model for a few steps."""
  out = res.stdout
  assert re.search(r"documents\s+[\d,]+", out) and re.search(r"instances\s+[\d,]+", out), out
  assert "*** record 0" in out and "tokens: [CLS]" in out, out
  assert len(re.findall(r"^step\s+\d+\s+loss \d", out, re.M)) >= 2, out


def _shards(cmd, res, cwd):
  """README: --num_shards=N writes <output_file>-00000-of-0000N ...; one
  metadata file for all shards."""
  out, n = _flag(cmd, "output_file"), int(_flag(cmd, "num_shards"))
  shards = sorted(glob.glob(os.path.join(cwd, out + "-*-of-*")))
  assert [os.path.basename(s) for s in shards if not s.endswith(".index")] == [
      f"{os.path.basename(out)}-{i:05d}-of-{n:05d}" for i in range(n)]
  assert glob.glob(os.path.join(cwd, out + "*.meta.json")) == [os.path.join(cwd, out + ".meta.json")]


def _max_records(cmd, res, cwd):
  """inspect --max_records=N shows N records, decoded."""
  assert res.stdout.count("*** record ") == int(_flag(cmd, "max_records")), res.stdout
  assert "tokens: [CLS]" in res.stdout


def _line_count(cmd, res, cwd):
  """'(N lines)' after a command: its --input_file has N lines."""
  n = int(re.search(r"\(([\d,]+)(?: \w+)? lines\)", cmd).group(1).replace(",", ""))
  with open(os.path.join(cwd, _flag(cmd, "input_file")), encoding="utf-8") as f:
    assert len(f.read().splitlines()) == n, f"{_flag(cmd, 'input_file')}: not {n} lines"


def _nearest_words(cmd, res, cwd):
  """--words=a,b: the nearest neighbours of each are printed."""
  for word in _flag(cmd, "words").split(","):
    assert re.search(rf"^nearest to '{re.escape(word)}': \S", res.stdout, re.M), res.stdout


def _translations(cmd, res, cwd):
  """train_seq2seq.py: ... + greedy translation."""
  assert re.search(r'"translations": \{\s*"', res.stdout), res.stdout[-2000:]


def _mt_split_sizes(cmd, res, cwd):
  """train is the first --num_train pairs, validation the next --num_val."""
  n, m = int(_flag(cmd, "num_train")), int(_flag(cmd, "num_val"))
  assert f"{n:,} train + {m:,} valid pairs" in res.stderr, res.stderr


def _help(cmd, res, cwd):
  """--help: every flag it takes, shared ones too."""
  assert "--input_file" in res.stdout and re.search(r"--(\[no\])?overwrite\b", res.stdout), \
      res.stdout


def _summary_on_stderr(cmd, res, cwd):
  """A generator's summary is one line on stderr, stdout stays empty;
  --quiet silences it and the progress lines."""
  assert res.stdout == "", res.stdout
  if "--quiet" in cmd.split():
    assert not message_lines(res.stderr), res.stderr


def _summary_json(cmd, res, cwd):
  """--summary_json=PATH: {"package", "outputs", "counts", "decode_errors", "files", ...}."""
  with open(os.path.join(cwd, _flag(cmd, "summary_json")), encoding="utf-8") as f:
    summary = json.load(f)
  assert {"package", "outputs", "counts", "decode_errors", "files"} <= set(summary)


def _stats_json(cmd, res, cwd):
  """stats prints JSON; --plot=F writes a PNG."""
  json.loads(res.stdout)
  plot = _flag(cmd, "plot")
  if plot:
    with open(os.path.join(cwd, plot), "rb") as f:
      assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def _stderr_last_line(cmd, res, cwd):
  """'# stderr, last line: w2v_data: N sentences, ... -> out/x': that line,
  any number for each capital letter."""
  said = cmd.split("stderr, last line:", 1)[1].strip()
  pattern = re.sub(r"\b[A-Z]\b", lambda _: r"[\d,]+", re.escape(said))
  assert re.fullmatch(pattern, message_lines(res.stderr)[-1]), res.stderr


def _w2v_outputs(cmd, res, cwd):
  """-> out/.../train.tfrecord, vocab.txt, meta.json."""
  d = os.path.join(cwd, _flag(cmd, "output_dir"))
  assert os.path.exists(os.path.join(d, "vocab.txt"))
  assert glob.glob(os.path.join(d, "train.tfrecord*")), os.listdir(d)


_CREATE = r"(-m \w+_data\.create|\w+-data-create)\b(?!.*--help)"
_PROMISES = [  # (regex on the command, check)
    (r".", _outputs_exist),
    (r"^\./scripts/demo\b", _demo),
    (r"--output_file=.*--num_shards=|--num_shards=.*--output_file=", _shards),
    (r"--max_records=", _max_records),
    (r"\([\d,]+(?: \w+)? lines\)", _line_count),
    (r"--words=", _nearest_words),
    (r"train_seq2seq\.py", _translations),
    (r"mt[_-]data[.-]create.*--num_train=.*--num_val=", _mt_split_sizes),
    (r"--help\b", _help),
    (_CREATE, _summary_on_stderr),
    (r"--summary_json=", _summary_json),
    (r"# stderr, last line:", _stderr_last_line),
    (r"[_.-]stats\b", _stats_json),
    (r"w2v[_-]data[.-]create.*--output_dir=", _w2v_outputs),
]


def _check(cmd, res, cwd):
  for pattern, check in _PROMISES:
    if re.search(pattern, cmd):
      check(cmd, res, cwd)


# ---------------------------------------------------------------------- the runs

def _docs_with_commands():
  return [name for name in user_docs() if command_blocks(name)]


# The commands a block ran -> where they ran and passed. A later doc's identical block (a guide repeating the README) is not
# run again unless blocks after it run (they may read its outputs).
_PASSED_BLOCKS = {}


def _run_block(where, plan, folder, ran, skipped):
  """Runs one block's planned commands in `folder`; returns its failures."""
  failed = []
  for cmd, why in plan:
    if cmd is None:
      skipped += [f"{where}: {why}"] * (f"{where}: {why}" not in skipped)
      continue
    start = time.monotonic()
    res = _run(cmd, folder)
    ran.append(f"{time.monotonic() - start:6.1f}s  {where}: {cmd}")
    try:
      assert res.returncode == 0, f"exit {res.returncode}\n{res.stderr[-3000:]}"
      _check(cmd, res, folder)
    except AssertionError as e:
      failed.append(f"{where}: {cmd}\n  {e}")
  return failed


@pytest.mark.parametrize("name", _docs_with_commands())
def test_doc_commands_run_as_written(name, tmp_path):
  folder = _fresh_folder(str(tmp_path / "fresh"))
  ran, skipped, failed = [], [], []
  plans = [(where, _plan(commands, mark)) for where, commands, mark in command_blocks(name)
           if mark is not None]  # test_every_command_block_is_marked fails for the others
  for i, (where, plan) in enumerate(plans):
    runs_later = any(cmd for _, later in plans[i + 1:] for cmd, _ in later)
    key = tuple(cmd for cmd, _ in plan if cmd)
    if key in _PASSED_BLOCKS and not runs_later:
      skipped.append(f"{where}: the commands of {_PASSED_BLOCKS[key]}, which ran")
      continue
    block_failed = _run_block(where, plan, folder, ran, skipped)
    if block_failed:
      failed += block_failed
    elif key:
      _PASSED_BLOCKS[key] = where
  print("\n".join(ran + [f"skipped  {w}" for w in skipped]))
  assert not failed, "\n\n".join(failed)
  if not ran:
    pytest.skip(f"nothing left to run: {skipped}")
