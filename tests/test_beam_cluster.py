"""--engine=beam on a cluster that shares no disk with the launcher.

A real portable-runner cluster on localhost: Beam's Python job service and an
EXTERNAL worker pool, each in its own folder with its own HOME and TMPDIR and
(where `unshare -m` works, as root) in a mount namespace where the
launcher's working directory and home are empty tmpfs mounts. Inputs, vocab
and outputs are on a moto S3 server (one run on a GCS emulator); workers
read and write them themselves. Every file, metadata included, must equal an
`--engine=local` run's to the same URL, and the launcher's folders stay
empty. A worker killed mid-pipeline and the whole cluster killed mid-run
leave no metadata; `--resume` then writes the uninterrupted run's bytes.

The local job service runs jobs on Beam's FnApiRunner, which does not retry
a bundle whose worker died: the job fails and `--resume` finishes it
(a retried bundle: `test_beam_engine.test_retried_steps_write_the_same_objects_and_only_references_travel`).
Each pipeline costs ~15-30 s here, so the runs of one test go at once.
"""

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import CREDS, GCS_QUIET, REPO, SAMPLE_TEXT, TESTDATA, VOCAB, W2V_TINY, \
    free_port, message_lines

pytest.importorskip("apache_beam")
pytest.importorskip("s3fs")
pytest.importorskip("moto.server")

BIN = os.path.dirname(sys.executable)

# name -> (module, output flag, output name, flags); inputs as {name} of INPUTS
TOOLS = {
    "bert": ("bert_data.create", "--output_file", "t.tfrecord",
             ("--input_file={bert}", "--vocab_file={vocab}", "--max_seq_length=32",
              "--dupe_factor=2", "--num_shards=4", "--compression=GZIP")),
    "w2v": ("w2v_data.create", "--output_dir", "w2v",
            ("--input_file={w2v}", "--min_freq=2", "--num_shards=2")),
    "mt": ("mt_data.create", "--output_dir", "mt",
           ("--input_file={mt}", "--num_train=30", "--num_val=12", "--num_shards=2")),
}
INPUTS = {"bert": SAMPLE_TEXT, "vocab": VOCAB, "w2v": W2V_TINY,
          "mt": os.path.join(TESTDATA, "mt_pairs.txt")}


def _can_unshare() -> bool:
  try:
    return subprocess.run(["unshare", "-m", "true"], capture_output=True,
                          timeout=10).returncode == 0
  except (OSError, subprocess.TimeoutExpired):
    return False


def _wait_port(port: int, proc, what: str):
  deadline = time.monotonic() + 60
  while True:
    try:
      socket.create_connection(("127.0.0.1", port), timeout=1).close()
      return
    except OSError:
      if time.monotonic() > deadline or proc.poll() is not None:
        raise RuntimeError(f"{what} did not start")
      time.sleep(0.2)


def _stop(proc):
  """Ends a server and everything it started (its own process group)."""
  if proc.poll() is None:
    os.killpg(proc.pid, signal.SIGTERM)
    try:
      proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
      pass
  with contextlib.suppress(ProcessLookupError):
    os.killpg(proc.pid, signal.SIGKILL)  # workers the server left
  proc.wait(timeout=15)


class Cluster:
  """Beam's job service and an EXTERNAL worker pool on localhost.

  Args:
    root: a folder for the servers' own working dirs, homes and temp dirs.
    env: what every server gets on top (storage endpoints and credentials).
    hide: folders made empty (tmpfs) in the servers' mount namespace.
  """

  def __init__(self, root, env, hide):
    self.root, self.env, self.hide = root, env, hide
    self.namespaced = bool(hide) and _can_unshare()
    self.procs = []
    self.started = 0
    self.options = ""

  def _start(self, name, argv, port):
    self.started += 1
    d = self.root / f"{name}-{self.started}"
    for sub in ("home", "tmp"):
      (d / sub).mkdir(parents=True)
    env = dict(os.environ, **self.env, HOME=str(d / "home"), TMPDIR=str(d / "tmp"),
               PYTHONPATH=REPO, PATH=BIN + os.pathsep + os.environ.get("PATH", ""))
    env.pop("TEXTRECORDS_STAGING_DIR", None)
    if self.namespaced:  # the launcher's folders: empty here
      mounts = " && ".join(f'mount -t tmpfs tmpfs "${i + 1}"' for i in range(len(self.hide)))
      argv = (["unshare", "-m", "--propagation", "private", "sh", "-c",
               f'{mounts} && shift {len(self.hide)} && exec "$@"', "sh"]
              + [str(h) for h in self.hide] + argv)
    proc = subprocess.Popen(argv, cwd=d, env=env, stdout=subprocess.DEVNULL,
                            stderr=open(d / "log", "wb"), start_new_session=True)
    self.procs.append(proc)
    _wait_port(port, proc, name)
    return proc

  def start(self):
    job, pool = free_port(), free_port()
    self._start("jobs", [sys.executable, "-m",
                         "apache_beam.runners.portability.local_job_service_main",
                         f"--port={job}"], job)
    self.pool = self._start("pool", [sys.executable, "-m",
                                     "apache_beam.runners.worker.worker_pool_main",
                                     f"--service_port={pool}"], pool)
    # (the experiment: no `pip freeze` into a launcher temp file per job)
    self.options = (f"runner=PortableRunner,job_endpoint=localhost:{job},"
                    f"environment_type=EXTERNAL,environment_config=localhost:{pool},"
                    "experiments=disable_logging_submission_environment")
    return self

  def worker_pids(self) -> set:
    """The pids of the pool's SDK worker processes now."""
    pids = set()
    for task in os.listdir(f"/proc/{self.pool.pid}/task"):
      with open(f"/proc/{self.pool.pid}/task/{task}/children", encoding="ascii") as f:
        pids.update(int(pid) for pid in f.read().split())
    return pids

  def kill_workers(self) -> int:
    """SIGKILLs the pool's SDK worker processes; returns how many."""
    killed = 0
    for pid in self.worker_pids():
      with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
        killed += 1
    return killed

  def stop(self):
    for proc in reversed(self.procs):
      _stop(proc)
    self.procs = []


@pytest.fixture(scope="module")
def launcher(tmp_path_factory):
  """The launching machine's working dir and home (hidden from the cluster)."""
  d = tmp_path_factory.mktemp("launcher")
  (d / "cwd").mkdir()
  (d / "home").mkdir()
  return d


@pytest.fixture(scope="module")
def storage_env(s3_server, gcs):
  endpoint, _ = s3_server
  host, _ = gcs
  return dict(CREDS, AWS_ENDPOINT_URL=endpoint, STORAGE_EMULATOR_HOST=host, **GCS_QUIET)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, launcher, storage_env):
  c = Cluster(tmp_path_factory.mktemp("cluster"), storage_env,
              [launcher / "cwd", launcher / "home"])
  try:
    yield c.start()
  finally:
    c.stop()


@pytest.fixture(scope="module")
def inputs(s3_server, gcs):
  """The inputs uploaded: {name: s3 URL}, and the mt input on gs://."""
  _, fs = s3_server
  _, gfs = gcs
  for name, path in INPUTS.items():
    fs.put_file(path, f"bkt/in/{name}.txt")
  gfs.put_file(INPUTS["mt"], "bkt/in/mt.txt")
  return {name: f"s3://bkt/in/{name}.txt" for name in INPUTS}


def _argv(tool, out, inputs, *more):
  module, flag, _, flags = TOOLS[tool]
  return ([sys.executable, "-m", module, "--quiet", f"{flag}={out}"]
          + [f.format(**inputs) for f in flags] + list(more))


def _start(argv, cwd, env, home):
  env = dict(os.environ, **env, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="2", HOME=str(home),
             TMPDIR=str(cwd))
  env.pop("TEXTRECORDS_STAGING_DIR", None)
  return subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)


def _finish(proc, timeout=300):
  out, err = proc.communicate(timeout=timeout)
  return proc.returncode, message_lines(err)


def _finish_or_stop_hung(proc, cluster, timeout=150):
  """`_finish`, for a job whose SDK worker was killed: the local job service
  either fails it (no bundle retry) or, now and then, waits forever for the
  dead worker's bundle. A hung job is stopped as a user would stop it (the
  launcher killed, the cluster restarted on new ports so the stuck job can
  never finish later); its return code is then the kill's."""
  try:
    return _finish(proc, timeout=timeout)
  except subprocess.TimeoutExpired:
    proc.kill()
    _, err = proc.communicate()
    cluster.stop()
    cluster.start()
    return proc.returncode, ["hung after the worker was killed; stopped"] + message_lines(err)


def _contents(fs, prefix):
  """{name: bytes} of every object under `prefix` (hidden ones included)."""
  fs.invalidate_cache()
  out = {}
  for p in fs.find(prefix):
    with contextlib.suppress(FileNotFoundError):  # removed while listed (a running job)
      out[p[len(prefix) + 1:]] = fs.cat_file(p)
  return out


def _names(fs, prefix):
  fs.invalidate_cache()
  return [p[len(prefix) + 1:] for p in fs.find(prefix)]


def _files_under(folder):
  return [os.path.join(r, n) for r, _, names in os.walk(folder) for n in names]


def _out(tool, scheme, where):
  name = TOOLS[tool][2]
  return f"{scheme}://bkt/{where}/{tool}/{name}"


def _prefix(tool, where):
  return f"bkt/{where}/{tool}"


@pytest.fixture(scope="module")
def local_runs(s3_server, gcs, inputs, storage_env, tmp_path_factory):
  """Each generator's --engine=local output at its URL: {(tool, scheme): {name: bytes}}."""
  _, fs = s3_server
  _, gfs = gcs
  d = tmp_path_factory.mktemp("local")
  gs_inputs = dict(inputs, mt="gs://bkt/in/mt.txt")
  jobs = {(t, "s3"): _argv(t, _out(t, "s3", "out"), inputs) for t in TOOLS}
  jobs[("mt", "gs")] = _argv("mt", _out("mt", "gs", "out"), gs_inputs)
  procs = {k: _start(argv, d, dict(storage_env, TEXTRECORDS_STAGING_DIR=str(d / str(k))), d)
           for k, argv in jobs.items()}
  for k, proc in procs.items():
    rc, lines = _finish(proc)
    assert rc == 0, (k, lines)
  made = {}
  for (tool, scheme) in jobs:
    f = fs if scheme == "s3" else gfs
    made[(tool, scheme)] = _contents(f, _prefix(tool, "out"))
    f.rm(_prefix(tool, "out"), recursive=True)
  return made


def test_cluster_reads_and_writes_object_storage_like_local(cluster, launcher, s3_server,
                                                            gcs, inputs, local_runs,
                                                            storage_env):
  """bert (4 GZIP shards), w2v and mt on s3://, mt on gs://: every file equal."""
  _, fs = s3_server
  _, gfs = gcs
  assert cluster.namespaced or not _can_unshare()
  gs_inputs = dict(inputs, mt="gs://bkt/in/mt.txt")
  procs = {}
  for tool, scheme in local_runs:
    argv = _argv(tool, _out(tool, scheme, "out"), gs_inputs if scheme == "gs" else inputs,
                 "--engine=beam", f"--beam_pipeline_options={cluster.options}")
    procs[(tool, scheme)] = _start(argv, launcher / "cwd", storage_env, launcher / "home")
  for k, proc in procs.items():
    rc, lines = _finish(proc)
    assert rc == 0, (k, lines)
  for (tool, scheme), want in local_runs.items():
    got = _contents(fs if scheme == "s3" else gfs, _prefix(tool, "out"))
    assert sorted(got) == sorted(want), (tool, scheme)  # no hidden names left either
    for name in want:
      assert got[name] == want[name], (tool, scheme, name)
  assert any(n.endswith(".index") for n in local_runs[("w2v", "s3")])
  assert len([n for n in local_runs[("bert", "s3")] if "-of-00004" in n]) == 4
  assert _files_under(launcher) == []  # the launcher wrote nothing


def _wait_for(fs, prefix, marker, proc, timeout=240):
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline and proc.poll() is None:
    fs.invalidate_cache()
    try:
      if any(marker in p for p in fs.find(prefix)):
        return True
    except FileNotFoundError:
      pass
    time.sleep(0.2)
  return False


def _wait_for_new_worker(cluster, before: set, proc, timeout=240) -> bool:
  """Waits until the job `proc` launched has an SDK worker of its own."""
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline and proc.poll() is None:
    if cluster.worker_pids() - before:
      return True
    time.sleep(0.1)
  return False


def test_killed_worker_and_killed_pipeline_then_resume(cluster, launcher, s3_server, inputs,
                                                       local_runs, storage_env,
                                                       tmp_path_factory):
  """A worker SIGKILLed mid-pipeline fails the job; the whole cluster killed
  mid-run after some files finished; neither leaves metadata, and
  --resume keeps what was finished and writes the uninterrupted bytes."""
  _, fs = s3_server
  out, prefix = _out("w2v", "s3", "kill"), _prefix("w2v", "kill")
  argv = _argv("w2v", out, inputs, "--engine=beam",
               f"--beam_pipeline_options={cluster.options}")
  t0 = time.monotonic()

  before = cluster.worker_pids()  # SDK workers an earlier job may have left
  proc = _start(argv, launcher / "cwd", storage_env, launcher / "home")
  assert _wait_for_new_worker(cluster, before, proc), _finish(proc)
  time.sleep(1.0)  # the job's bundles under way (records go through the shuffle: no parts)
  assert cluster.kill_workers() > 0
  print(f"{time.monotonic() - t0:.1f}s: workers killed", file=sys.stderr)
  rc, lines = _finish_or_stop_hung(proc, cluster)
  assert rc != 0, lines
  assert "meta.json" not in _names(fs, prefix)
  print(f"{time.monotonic() - t0:.1f}s: job failed", file=sys.stderr)
  argv = _argv("w2v", out, inputs, "--engine=beam",
               f"--beam_pipeline_options={cluster.options}")

  # The whole pipeline killed (launcher, job service, workers) once a file is finished.
  proc = _start(argv + ["--resume"], launcher / "cwd", storage_env, launcher / "home")
  assert _wait_for(fs, prefix, ".done-", proc), _finish(proc)
  while not any(n.endswith(".json") and ".done-" in n for n in _names(fs, prefix)):
    time.sleep(0.1)
  cluster.stop()  # the servers first: the job must not finish after the launcher is gone
  proc.kill()
  proc.wait()
  left = _contents(fs, prefix)
  print(f"{time.monotonic() - t0:.1f}s: cluster killed", file=sys.stderr)
  assert "meta.json" not in left and any(".done-" in n for n in left)

  cluster.start()  # new ports
  argv = _argv("w2v", out, inputs, "--engine=beam",
               f"--beam_pipeline_options={cluster.options}")
  proc = _start(argv + ["--resume", "--summary_json=" + str(launcher / "cwd" / "s.json")],
                launcher / "cwd", storage_env, launcher / "home")
  rc, lines = _finish(proc)
  assert rc == 0, lines
  os.remove(launcher / "cwd" / "s.json")
  assert _contents(fs, prefix) == local_runs[("w2v", "s3")]
  assert _files_under(launcher) == []

