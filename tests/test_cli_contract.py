"""The command-line contract the three generators share (textrecords/runs/cli.py):
summary line, --quiet, --summary_json, --help, repeated flags, decode-error
counts, Ctrl-C, the output lock, console scripts, and the training scripts'
errors. Real subprocesses, tiny inputs."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import (REPO, SAMPLE_TEXT, VOCAB, error_lines, run_cli, sigint_as_in_a_terminal,
                      write_varied_corpus)
from textrecords.files import output_lock

TESTDATA = os.path.join(REPO, "tests", "testdata")
W2V_TINY = os.path.join(TESTDATA, "w2v_tiny.txt")
MT_PAIRS = os.path.join(TESTDATA, "mt_pairs.txt")

# package -> (module, flags for a tiny run given (input, output), where the metadata lands)
TOOLS = {
    "bert_data": ("bert_data.create",
                  lambda i, o: [f"--input_file={i}", f"--output_file={o}/t.tfrecord",
                                f"--vocab_file={VOCAB}", "--dupe_factor=1", "--num_workers=1"],
                  lambda o: os.path.join(o, "t.tfrecord.meta.json")),
    "w2v_data": ("w2v_data.create",
                 lambda i, o: [f"--input_file={i}", f"--output_dir={o}", "--min_freq=1",
                               "--num_workers=1"],
                 lambda o: os.path.join(o, "meta.json")),
    "mt_data": ("mt_data.create",
                lambda i, o: [f"--input_file={i}", f"--output_dir={o}", "--num_train=8",
                              "--num_val=2", "--min_freq=1", "--num_workers=1"],
                lambda o: os.path.join(o, "meta.json")),
}
INPUTS = {"bert_data": SAMPLE_TEXT, "w2v_data": W2V_TINY, "mt_data": MT_PAIRS}


def _visible(d):
  return sorted(n for n in os.listdir(d) if not n.startswith(".")) if os.path.isdir(d) else []


# ------------------------------------------------------------ summary

@pytest.mark.parametrize("package", sorted(TOOLS))
def test_summary_is_one_line_on_stderr_quiet_silences_it_json_for_machines(tmp_path, package):
  module, args, _ = TOOLS[package]
  out = str(tmp_path / "out")
  r = run_cli(module, *args(INPUTS[package], out))
  assert r.returncode == 0, r.stderr
  assert r.stdout == ""
  last = error_lines(r.stderr)[-1]
  assert last.startswith(f"{package}: ") and "-> " in last, r.stderr

  summary = tmp_path / "summary.json"
  r = run_cli(module, *args(INPUTS[package], out), "--overwrite", "--quiet",
              f"--summary_json={summary}")
  assert r.returncode == 0, r.stderr
  assert r.stdout == "" and error_lines(r.stderr) == []
  data = json.loads(summary.read_text(encoding="utf-8"))
  assert isinstance(data, dict) and data
  assert [n for n in os.listdir(tmp_path) if ".tmp-" in n] == []


def test_summary_json_in_a_missing_folder_fails_before_the_run(tmp_path):
  module, args, _ = TOOLS["w2v_data"]
  out = tmp_path / "out"
  r = run_cli(module, *args(W2V_TINY, out), f"--summary_json={tmp_path}/no/such/s.json")
  assert r.returncode == 2
  assert error_lines(r.stderr) == [f"error: --summary_json={tmp_path}/no/such/s.json: folder "
                                   f"{tmp_path}/no/such does not exist"]
  assert not out.exists()


# ------------------------------------------------------------ help

@pytest.mark.parametrize("package", sorted(TOOLS))
def test_help_lists_every_flag_and_exits_0(package):
  module = TOOLS[package][0]
  r = run_cli(module, "--help")
  assert r.returncode == 0, r.stderr
  for flag in ("--input_file", "--num_shards", "--compression", "--overwrite", "--resume",
               "--num_workers", "--quiet", "--summary_json", "--on_decode_error", "--verbose"):
    assert flag in r.stdout or flag.replace("--", "--[no]") in r.stdout, (flag, r.stdout)
  own = {"bert_data": "--max_seq_length", "w2v_data": "--max_window_size",
         "mt_data": "--num_train"}[package]
  assert own in r.stdout
  assert run_cli(module, "-h").returncode == 0


def test_inspect_help_lists_no_generator_flags():
  for option in ("--help", "--helpfull"):
    r = run_cli("bert_data.inspect", option)
    assert r.returncode == 0, r.stderr
    assert "--max_records" in r.stdout and "--vocab_file" in r.stdout
    # (--compression is inspect's own: the compression of plain TFRecord files)
    for flag in ("--num_shards", "--resume", "--num_workers", "--overwrite", "--quiet",
                 "--on_decode_error", "--summary_json"):
      assert flag not in r.stdout, (option, flag)


# ------------------------------------------------------------ repeated flags

@pytest.mark.parametrize("package", sorted(TOOLS))
def test_a_repeated_single_value_flag_is_an_error(tmp_path, package):
  module, args, _ = TOOLS[package]
  out = tmp_path / "out"
  r = run_cli(module, *args(INPUTS[package], out), f"--input_file={INPUTS[package]}")
  assert r.returncode == 2
  lines = error_lines(r.stderr)
  assert len(lines) == 1 and lines[0].startswith("error: --input_file is given 2 times"), lines
  assert not out.exists()


# ------------------------------------------------------------ decode errors

def _with_bad_line(tmp_path, package):
  good = open(INPUTS[package], "rb").read()
  bad = {"bert_data": b"Caf\xe9 au lait is here.\n", "w2v_data": b"w1 w\xff2 w3\n",
         "mt_data": b"Caf\xe9.\tCaf\xe9.\n"}[package]
  path = tmp_path / "in.txt"
  path.write_bytes(bad + good)
  return str(path)


@pytest.mark.parametrize("package", sorted(TOOLS))
@pytest.mark.parametrize("mode,word", [("replace", "replaced"), ("skip_line", "skipped")])
def test_decode_error_counts_in_summary_and_metadata(tmp_path, package, mode, word):
  module, args, meta_of = TOOLS[package]
  out = str(tmp_path / "out")
  r = run_cli(module, *args(_with_bad_line(tmp_path, package), out),
              f"--on_decode_error={mode}")
  assert r.returncode == 0, r.stderr
  assert f"1 line with invalid UTF-8 {word}" in error_lines(r.stderr)[-1]
  meta = json.load(open(meta_of(out), encoding="utf-8"))
  counts = meta["counts"]
  assert counts[f"{word}_lines" if word == "replaced" else "skipped_lines"] == 1
  assert counts["replaced_lines" if word == "skipped" else "skipped_lines"] == 0
  summary = tmp_path / "summary.json"
  r = run_cli(module, *args(_with_bad_line(tmp_path, package), out), "--overwrite", "--quiet",
              f"--on_decode_error={mode}", f"--summary_json={summary}")
  assert r.returncode == 0, r.stderr
  data = json.loads(summary.read_text(encoding="utf-8"))
  assert data["decode_errors"] == {k: counts[k] for k in ("replaced_lines", "skipped_lines")}


def _contents(folder):
  """File name -> bytes; metadata as a dict without its flags (they hold --num_workers)."""
  out = {}
  for n in sorted(os.listdir(folder)):
    data = open(os.path.join(folder, n), "rb").read()
    if n.endswith("meta.json"):
      data = json.loads(data)
      data.pop("flags")
    out[n] = data
  return out


@pytest.mark.parametrize("package,mode", [("bert_data", "skip_line"), ("mt_data", "replace"),
                                          ("mt_data", "skip_line")])
def test_decode_error_counts_merge_exactly_over_chunks_and_workers(tmp_path, monkeypatch,
                                                                   package, mode):
  """Input cut into many small chunks, read by 1 or 2 workers: the same counts
  (every bad line once) and the same bytes, metadata included."""
  from bert_data import generator as bert_generator  # pylint: disable=import-outside-toplevel
  from bert_data.config import BertConfig  # pylint: disable=import-outside-toplevel
  from mt_data import config as mt_config  # pylint: disable=import-outside-toplevel
  from mt_data import generator as mt_generator  # pylint: disable=import-outside-toplevel
  bad = {"bert_data": b"Caf\xe9 au lait is here.", "mt_data": b"Caf\xe9.\tCaf\xe9."}[package]
  lines = open(INPUTS[package], "rb").read().split(b"\n")
  for i in range(len(lines) - 1, 0, -7):  # a bad line every 7 lines, the last line too
    lines.insert(i, bad)
  lines.append(bad)
  num_bad = lines.count(bad)
  path = tmp_path / "in.txt"
  path.write_bytes(b"\n".join(lines))
  monkeypatch.setattr(bert_generator, "UNIT_BYTES", 200)
  monkeypatch.setattr(mt_generator, "UNIT_BYTES", 200)
  outputs = []
  out = tmp_path / "out"
  for workers in (1, 2):
    shutil.rmtree(out, ignore_errors=True)
    if package == "bert_data":
      bert_generator.create(BertConfig(input_files=(str(path),), output_files=(f"{out}/t",),
                                      vocab_file=VOCAB, dupe_factor=1, num_workers=workers,
                                      on_decode_error=mode))
      counts = json.load(open(f"{out}/t.meta.json", encoding="utf-8"))["counts"]
    else:
      summary = mt_generator.create(mt_config.MTConfig(
          input_file=str(path), output_dir=str(out), num_train=0, num_val=5,
          on_decode_error=mode, num_workers=workers), log=lambda _: None)
      counts = json.load(open(out / "meta.json", encoding="utf-8"))["counts"]
      assert {k: summary.counts[k] for k in ("replaced_lines", "skipped_lines")} == {
          k: counts[k] for k in ("replaced_lines", "skipped_lines")}
    word = "replaced" if mode == "replace" else "skipped"
    counts = {k: counts[k] for k in ("replaced_lines", "skipped_lines")}
    assert counts == {"replaced_lines": 0, "skipped_lines": 0, f"{word}_lines": num_bad}
    outputs.append(_contents(out))
  assert outputs[0] == outputs[1]


# ------------------------------------------------------------ Ctrl-C

def test_ctrl_c_during_instance_building_is_one_line_and_exit_130(tmp_path):
  corpus = write_varied_corpus(tmp_path / "corpus.txt", 200)
  out = tmp_path / "out"
  env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="3")
  proc = subprocess.Popen(
      [sys.executable, "-m", "bert_data.create", f"--input_file={corpus}",
       f"--output_file={out}/t.tfrecord", f"--vocab_file={VOCAB}", "--dupe_factor=40",
       "--num_shards=4", "--num_workers=2"],
      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
      start_new_session=True,  # its own process group, as a terminal's job
      preexec_fn=sigint_as_in_a_terminal)
  seen = []
  try:
    for line in proc.stderr:  # progress lines: corpus read, instance building starts
      seen.append(line)
      if " documents, " in line and "read " in line:
        break
    time.sleep(0.5)
    if proc.poll() is not None:
      pytest.fail(f"the run ended before Ctrl-C: {seen}")
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal does on Ctrl-C
    _, err = proc.communicate(timeout=60)
  finally:
    if proc.poll() is None:
      os.killpg(proc.pid, signal.SIGKILL)
      proc.wait()
  assert proc.returncode == 130, err
  progress = re.compile(r"^\[\s*\d+\.\d+s\] ")  # "[    0.1s] read 600 documents, ..."
  assert [l for l in error_lines(err) if not progress.match(l)] == ["error: interrupted"], err
  assert not out.exists() or [n for n in os.listdir(out) if not n.endswith(".done")
                             and not n.endswith(".progress")] == []


# ------------------------------------------------------------ output lock

@pytest.mark.parametrize("package", sorted(TOOLS))
def test_a_second_run_on_a_locked_output_fails_at_once(tmp_path, package):
  module, args, meta_of = TOOLS[package]
  out = str(tmp_path / "out")
  os.makedirs(out)
  with output_lock.hold([meta_of(out)]):  # a live run holds the output
    t0 = time.monotonic()
    r = run_cli(module, *args(INPUTS[package], out))
    assert time.monotonic() - t0 < 60
  assert r.returncode == 2
  lines = error_lines(r.stderr)
  assert len(lines) == 1 and f"another run (pid {os.getpid()}) is writing this output" in lines[0]
  assert _visible(out) == []
  assert os.listdir(out) == []  # and the lock is gone with its holder
  assert run_cli(module, *args(INPUTS[package], out)).returncode == 0  # free again


def test_lock_is_released_when_its_process_dies(tmp_path):
  meta = str(tmp_path / "meta.json")
  holder = subprocess.Popen(
      [sys.executable, "-c", "import sys, time; from textrecords.files import output_lock\n"
       "with output_lock.hold([sys.argv[1]]):\n  print('held', flush=True); time.sleep(60)",
       meta], env=dict(os.environ, PYTHONPATH=REPO), stdout=subprocess.PIPE, text=True)
  try:
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(ValueError, match=f"another run \\(pid {holder.pid}\\)"):
      with output_lock.hold([meta]):
        pass
  finally:
    holder.kill()
    holder.wait()
  with output_lock.hold([meta]):  # SIGKILL freed it
    pass


def test_stale_temps_of_dead_runs_are_removed_live_ones_kept(tmp_path):
  from textrecords.datasets import dataset_writer  # pylint: disable=import-outside-toplevel
  out = tmp_path / "f.tfrecord"
  dead = tmp_path / ".f.tfrecord.tmp-999999999-00000000"
  dead.write_bytes(b"x")
  live = tmp_path / f".f.tfrecord.tmp-{os.getppid()}-00000000"  # a live process's
  live.write_bytes(b"y")
  w = dataset_writer.DatasetWriter(str(tmp_path / "f.meta.json"), {"k": 1})
  h = w.open(str(out))
  h.abort()
  assert not dead.exists() and live.exists()


# ------------------------------------------------------------ console scripts

def test_console_script_is_installed_and_runs(tmp_path):
  script = os.path.join(os.path.dirname(sys.executable), "w2v-data-create")
  assert os.path.exists(script), "pip install -e . installs the console scripts"
  out = tmp_path / "out"
  r = subprocess.run([script, f"--input_file={W2V_TINY}", f"--output_dir={out}",
                      "--min_freq=1", "--num_workers=1"], capture_output=True, text=True,
                     cwd=str(tmp_path), timeout=300)
  assert r.returncode == 0, r.stderr
  assert error_lines(r.stderr)[-1].startswith("w2v_data: ")
  assert (out / "meta.json").exists()
  h = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=300)
  assert h.returncode == 0 and "--num_shards" in h.stdout


# ------------------------------------------------------------ training scripts

@pytest.mark.parametrize("script,flag", [("train_bert_tiny.py", "--input"),
                                         ("train_skipgram.py", "--data_dir")])
def test_training_scripts_on_missing_data_give_one_line(tmp_path, script, flag):
  missing = str(tmp_path / "missing")
  r = subprocess.run([sys.executable, os.path.join(REPO, "scripts", script), f"{flag}={missing}"],
                     capture_output=True, text=True, timeout=300,
                     env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  assert r.returncode == 2, r.stderr
  lines = error_lines(r.stderr)
  assert len(lines) == 1 and lines[0].startswith("error: ") and missing in lines[0], lines
  assert "Traceback" not in r.stderr


def test_a_finished_run_skips_cycle_collection_at_exit_an_error_still_exits_2(tmp_path):
  # cli.run freezes the objects once main has returned (Python's shutdown
  # would otherwise scan them all); an atexit handler sees it, and the exit
  # status and output are those of main.
  script = tmp_path / "tool.py"
  script.write_text(
      "import atexit, gc, sys\n"
      "from textrecords.runs import cli\n"
      "from textrecords.errors import UserError\n"
      "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0, flush=True))\n"
      "def main(argv):\n"
      "  print('ran', flush=True)\n"
      "  if len(argv) > 1:\n"
      "    raise UserError('bad ' + argv[1])\n"
      "cli.run(main)\n")
  env = {**os.environ, "PYTHONPATH": REPO}
  ok = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                      timeout=120)
  assert ok.returncode == 0 and ok.stdout.split("\n")[:2] == ["ran", "frozen True"]
  bad = subprocess.run([sys.executable, str(script), "x"], capture_output=True, text=True,
                       env=env, timeout=120)
  assert bad.returncode == 2 and bad.stderr.strip() == "error: bad x"
  assert bad.stdout.split("\n")[:2] == ["ran", "frozen False"]


# ------------------------------------------------------------ existing files (issue 21)

def _record_path(package, out):
  """The first record file a tiny run writes (where a foreign file may sit)."""
  return os.path.join(out, "t.tfrecord" if package == "bert_data" else "train.tfrecord")


def _stats(folder):
  """name -> (inode, mtime_ns, bytes) of every file, hidden ones included."""
  return {n: (os.stat(os.path.join(folder, n)).st_ino, os.stat(os.path.join(folder, n)).st_mtime_ns,
              open(os.path.join(folder, n), "rb").read()) for n in sorted(os.listdir(folder))}


@pytest.mark.parametrize("package", sorted(TOOLS))
def test_a_foreign_file_at_an_output_path_needs_overwrite_and_is_named(tmp_path, package):
  """Item 1: `cp x out/precious.tfrecord; create --output_file=out/precious.tfrecord`
  (mt/w2v: a notes file named train.tfrecord in --output_dir) is refused."""
  module, args, meta_of = TOOLS[package]
  out = str(tmp_path / "out")
  os.makedirs(out)
  precious = _record_path(package, out)
  with open(precious, "wb") as f:
    f.write(b"notes\n")
  r = run_cli(module, *args(INPUTS[package], out))
  assert r.returncode == 2
  assert error_lines(r.stderr) == [
      f"error: {precious} exists and is not a file of a textrecords dataset (not listed in "
      f"{meta_of(out)}); this run would replace it: move it away or pass --overwrite"]
  assert os.listdir(out) == [os.path.basename(precious)]
  assert open(precious, "rb").read() == b"notes\n"
  # A foreign vocab file or offset index is refused the same way; --overwrite replaces.
  r = run_cli(module, *args(INPUTS[package], out), "--overwrite")
  assert r.returncode == 0, r.stderr
  assert os.path.exists(meta_of(out)) and open(precious, "rb").read() != b"notes\n"


@pytest.mark.parametrize("package", ["w2v_data", "mt_data"])
def test_a_foreign_vocab_or_index_file_is_refused(tmp_path, package):
  module, args, meta_of = TOOLS[package]
  out = str(tmp_path / "out")
  os.makedirs(out)
  name = {"w2v_data": "vocab.txt", "mt_data": "train.tfrecord.index"}[package]
  with open(os.path.join(out, name), "w", encoding="utf-8") as f:
    f.write("mine\n")
  r = run_cli(module, *args(INPUTS[package], out))
  assert r.returncode == 2
  lines = error_lines(r.stderr)
  assert len(lines) == 1 and f"{out}/{name} exists and is not a file" in lines[0], lines
  assert os.listdir(out) == [name]


@pytest.mark.parametrize("package", sorted(TOOLS))
def test_an_unusable_output_path_is_refused_before_any_work(tmp_path, package):
  """Item 2: bert --output_file=out/slash/ (a folder); w2v/mt --output_dir=a file."""
  module, args, _ = TOOLS[package]
  out = tmp_path / "out"
  out.mkdir()
  if package == "bert_data":
    (out / "slash").mkdir()
    flags = [a for a in args(INPUTS[package], str(out)) if not a.startswith("--output_file")]
    r = run_cli(module, *flags, f"--output_file={out}/slash/")
    want = (f"error: --output_file={out}/slash: is a folder; give a file path (the records go "
            "to that file, the metadata beside it)")
  else:
    (out / "file").write_text("x")
    r = run_cli(module, *args(INPUTS[package], f"{out}/file"))
    want = f"error: --output_dir={out}/file: exists and is not a folder"
  assert r.returncode == 2
  assert error_lines(r.stderr) == [want]
  assert sorted(os.listdir(out)) == ["file" if package != "bert_data" else "slash"]
  assert [n for n in os.listdir(out) if n.startswith(".")] == []


@pytest.mark.parametrize("package", sorted(TOOLS))
def test_a_run_that_fails_after_writing_files_leaves_no_hidden_file(tmp_path, monkeypatch,
                                                                    package):
  """Item 2: a failure after files were finished (here: at finalize) removes them all."""
  from textrecords.datasets import dataset_writer  # pylint: disable=import-outside-toplevel
  from textrecords.errors import UserError  # pylint: disable=import-outside-toplevel

  def fail(self, paths, build_meta):
    assert [n for n in os.listdir(self.dir) if n.endswith(".done")]  # files were written
    raise UserError("disk gone")

  monkeypatch.setattr(dataset_writer.DatasetWriter, "finalize", fail)
  out = tmp_path / "out"
  with pytest.raises(UserError, match="disk gone"):
    _create_in_process(package, str(out))
  assert not out.exists()


def _create_in_process(package, out, **kw):
  from bert_data import generator as bert_generator  # pylint: disable=import-outside-toplevel
  from bert_data.config import BertConfig  # pylint: disable=import-outside-toplevel
  from mt_data import config as mt_config  # pylint: disable=import-outside-toplevel
  from mt_data import generator as mt_generator  # pylint: disable=import-outside-toplevel
  from w2v_data import generator as w2v_generator  # pylint: disable=import-outside-toplevel
  from w2v_data.config import W2vConfig  # pylint: disable=import-outside-toplevel
  if package == "bert_data":
    return bert_generator.create(BertConfig(input_files=(SAMPLE_TEXT,),
                                           output_files=(f"{out}/t.tfrecord",), vocab_file=VOCAB,
                                           dupe_factor=1, num_shards=2, **kw))
  if package == "w2v_data":
    return w2v_generator.create(W2vConfig(input_file=W2V_TINY, output_dir=out, min_freq=1,
                                         num_shards=2, **kw))
  return mt_generator.create(mt_config.MTConfig(input_file=MT_PAIRS, output_dir=out, num_train=8,
                                                num_val=2, min_freq=1, num_shards=2, **kw),
                             log=lambda _: None)


@pytest.mark.parametrize("package", sorted(TOOLS))
def test_every_create_returns_one_result_shape(tmp_path, package):
  """Issue 23: each package's create returns a `run.RunResult`: the metadata
  as written (equal to the file), the files kept from an earlier run, the
  phases' seconds; --resume on the complete output: the same metadata,
  already complete, every listed file kept."""
  from textrecords.datasets import metadata  # pylint: disable=import-outside-toplevel
  from textrecords.datasets.layout import DatasetLayout  # pylint: disable=import-outside-toplevel
  from textrecords.runs import run  # pylint: disable=import-outside-toplevel
  out = str(tmp_path / "out")
  first = _create_in_process(package, out)
  assert type(first) is run.RunResult  # pylint: disable=unidiomatic-typecheck
  lay = (DatasetLayout.for_file(f"{out}/t.tfrecord") if package == "bert_data"
         else DatasetLayout.for_dir(out))
  on_disk = (metadata.read(lay.meta_path),)
  assert json.loads(json.dumps(first.metas)) == list(on_disk)  # (tuples in flags: lists)
  assert first.counts == first.meta["counts"] and first.files == first.meta["files"]
  assert not first.already_complete and first.files_kept == 0
  assert first.seconds["total"] >= max(first.seconds.values()) >= 0
  again = _create_in_process(package, out, resume=True)
  assert again == run.RunResult(on_disk, already_complete=True, files_kept=len(first.files))


@pytest.mark.parametrize("package", sorted(TOOLS))
def test_resume_on_a_complete_dataset_changes_nothing(tmp_path, package):
  """Item 12: same inodes, mtimes and bytes of every file after --resume."""
  module, args, _ = TOOLS[package]
  out = str(tmp_path / "out")
  assert run_cli(module, *args(INPUTS[package], out), "--num_shards=2").returncode == 0
  before = _stats(out)
  r = run_cli(module, *args(INPUTS[package], out), "--num_shards=2", "--resume")
  assert r.returncode == 0, r.stderr
  assert "already complete" in r.stderr
  assert _stats(out) == before


@pytest.mark.parametrize("package", sorted(TOOLS))
def test_run_settings_are_not_in_the_metadata_and_summaries_share_one_shape(tmp_path, package):
  """Items 13 and 14: 1 or 2 workers, --quiet, --summary_json, a resumed run:
  byte-identical metadata; one seed key, `counts`, one summary JSON shape."""
  module, args, meta_of = TOOLS[package]
  out = str(tmp_path / "out")
  summary = tmp_path / "s.json"
  assert run_cli(module, *args(INPUTS[package], out)).returncode == 0
  first = open(meta_of(out), "rb").read()
  two = [a for a in args(INPUTS[package], out) if a != "--num_workers=1"] + ["--num_workers=2"]
  r = run_cli(module, *two, "--overwrite", "--quiet", f"--summary_json={summary}")
  assert r.returncode == 0, r.stderr
  assert open(meta_of(out), "rb").read() == first
  meta = json.loads(first)
  for key in ("num_workers", "resume", "overwrite", "quiet", "summary_json", "verbose"):
    assert key not in meta["flags"] and key not in meta["fingerprint"]["flags"], key
  if package != "mt_data":  # (mt_data draws nothing at random)
    assert isinstance(meta["random_seed"], int) and "seed" not in meta
  assert isinstance(meta["counts"], dict) and "replaced_lines" in meta["counts"]
  if package == "mt_data":
    assert "skipped_lines" not in meta and "lines_read" not in meta
    assert set(meta["counts"]["invalid_lines"]) == {"blank_line", "fewer_than_2_columns",
                                                    "empty_source_or_target"}
  data = json.loads(summary.read_text(encoding="utf-8"))
  assert {k: data[k] for k in ("package", "outputs", "counts", "decode_errors")} == {
      "package": package,
      "outputs": [_record_path(package, out) if package == "bert_data" else out],
      "counts": {k: meta["counts"][k] for k in data["counts"]},
      "decode_errors": {"replaced_lines": 0, "skipped_lines": 0}}
  assert set(meta["counts"]) - set(data["counts"]) <= {"records"}
  assert [f["name"] for f in data["files"]] == [f["name"] for f in meta["files"]]
