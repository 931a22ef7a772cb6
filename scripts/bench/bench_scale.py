#!/usr/bin/env python3
"""Scale-out per step: each generator at growing corpus sizes on local, Beam and Dask (issue 37).

For every generator (bert_data, w2v_data, mt_data), corpus size (`--sizes_mb`,
MB = 2**20 bytes) and engine, runs the package's `create_dataset(...)` in a
child process with the default flags except the engine's (and bert's
`--dupe_factor=5`, mt's `--num_train=0`: with the default 512 pairs mt reads
640 pairs whatever the corpus), all with `num_workers=2`:
  * local: the local engine (2 worker processes), the baseline;
  * beam: Beam's FnApiRunner, `direct_running_mode=multi_processing`, 2 workers;
  * dask: a local dask.distributed cluster of 2 worker processes.

Corpora are made from the real ones: PTB lines (w2v; bert: grouped into
documents of 8 lines, a blank line between), fra.txt pairs (mt), copied
until the size is reached. Copy c > 0 appends `x<c>` to every word whose
crc32 is 0 mod 8 (1 word type in 8; `<unk>` and the like never), so the
distinct tokens grow with the corpus as in real text.

How each figure is measured, with no engine change: every Python process of
a run (the launcher, local workers, Beam SDK workers, Dask workers) loads
this file at start-up (a `sitecustomize.py` on PYTHONPATH, only where
BENCH_SCALE_LOG is set) and wraps, as they are imported, the engine-neutral
steps (`textrecords.engine.generator_steps`: pass map / merge / finish,
examples, staging, finish_file, file writes, finalize), the local engine's
writer and bert's local ordered writer, and the generators' `metadata` and
`small_files`. Each call appends a JSON line (step, thread CPU seconds, RSS)
to a per-process file. Then:
  * per step, the largest single call's CPU and the most CPU one process
    spent in it (a merge step: the per-process sum, since a combiner merges
    in whichever worker it runs); "share" divides that serial part by the
    job's CPU (every process of the run, from getrusage of the reaped
    children; a 4 Hz psutil sampler as a floor);
  * per-worker peak memory: each worker process's VmHWM (sampled), the
    launcher's apart;
  * side-input bytes: the pickled size of each pass's finished value (what
    Beam broadcasts as a side input and Dask sends as an argument);
  * shuffle bytes: the framed record bytes each unit's examples step
    returns (on Beam they go through GroupByKey as one sorted run per unit
    and file; on Dask they are written as run objects and read by the file
    writers), plus the pickled pass partials that reach the merges;
  * object-store requests: with `--s3` (the default) inputs, vocab and
    outputs are s3:// objects on a `moto_server` on 127.0.0.1; its log has
    one line per request; those logged during a run are counted (sizes
    above `--s3_max_mb` run on local disk: moto keeps objects in memory;
    the smallest size then runs on disk too).

Prints a table per run, a table per step with its growth (each size against
the smallest on the same storage: S3 and disk runs are never compared),
PASS/FAIL lines for issue 37's targets, and writes
`<out>/bench_scale.json`.

Usage (2 shared cores: run it in the background):
  python scripts/bench/bench_scale.py --out=/tmp/scale --sizes_mb=25,100,400 \\
      --ptb=../shared/data/ptb.train.txt --fra=../shared/data/fra.txt \\
      --vocab=../shared/data/vocab_uncased.txt
"""

import functools
import importlib.abc
import importlib.util
import json
import os
import pickle
import resource
import sys
import threading
import time

LOG_ENV = "BENCH_SCALE_LOG"
SCRIPT_ENV = "BENCH_SCALE_SCRIPT"
MB = 1 << 20
BEAM_OPTIONS = "runner=DirectRunner,direct_num_workers=2,direct_running_mode=multi_processing"
GENERATORS = ("bert", "w2v", "mt")
ENGINES = ("local", "beam", "dask")
SHARE_LIMIT = 0.10
MEMORY_GROWTH_LIMIT = 1.2
REQUESTS_PER_MB_LIMIT = 40
ENGINE_CPU_LIMIT = 2.0

# ============================================================== probes (every process)

_PROBE = {"pid": None, "fh": None, "installed": False}
_LOCAL = threading.local()


def _depth() -> int:
  if getattr(_LOCAL, "pid", None) != os.getpid():
    _LOCAL.pid, _LOCAL.depth = os.getpid(), 0
  return _LOCAL.depth


def _emit(rec: dict) -> None:
  """Appends one call's line to this process's file."""
  pid = os.getpid()
  if _PROBE["pid"] != pid:
    _PROBE["fh"] = open(os.path.join(os.environ[LOG_ENV], f"calls-{pid}.jsonl"), "a",
                        encoding="utf-8")
    _PROBE["pid"] = pid
  rec.update(pid=pid, proc_cpu=round(time.process_time(), 4),
             rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1))
  _PROBE["fh"].write(json.dumps(rec) + "\n")
  _PROBE["fh"].flush()


def _pickled_size(value) -> int:
  try:
    return len(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
  except Exception:  # pylint: disable=broad-except
    return -1


class _TimedIter:
  """An iterator whose `next`s are timed; one line when it ends."""

  def __init__(self, it, step: str):
    self.it, self.step, self.cpu, self.wall, self.nested = iter(it), step, 0.0, 0.0, False

  def __iter__(self):
    return self

  def __next__(self):
    depth = _depth()
    self.nested |= depth > 0
    _LOCAL.depth = depth + 1
    c0, w0 = time.thread_time(), time.perf_counter()
    try:
      return next(self.it)
    except StopIteration:
      _emit(dict(step=self.step, cpu=round(self.cpu, 5), wall=round(self.wall, 4),
                 depth=int(self.nested)))
      raise
    finally:
      self.cpu += time.thread_time() - c0
      self.wall += time.perf_counter() - w0
      _LOCAL.depth = depth


class _TimedCall:
  """`fn` wrapped: each call's thread CPU, wall, depth (nested in another
  timed call: > 0) and `measure(args, result)`'s fields on one line. `step`
  may be a function of the args. An object (not a closure), so a `Pass`
  holding one pickles to workers, where this module is loaded too."""

  bench_scale_wrapped = True

  def __init__(self, fn, step, measure=None, lazy=False):
    self.fn, self.step, self.measure, self.lazy = fn, step, measure, lazy
    functools.update_wrapper(self, fn)

  def __call__(self, *args, **kwargs):
    depth = _depth()
    _LOCAL.depth = depth + 1
    c0, w0 = time.thread_time(), time.perf_counter()
    try:
      result = self.fn(*args, **kwargs)
    finally:
      cpu, wall = time.thread_time() - c0, time.perf_counter() - w0
      _LOCAL.depth = depth
    name = self.step(args) if callable(self.step) else self.step
    if self.lazy:
      return _TimedIter(result, name)
    rec = dict(step=name, cpu=round(cpu, 5), wall=round(wall, 4), depth=depth)
    if self.measure is not None:
      rec.update(self.measure(args, result))
    _emit(rec)
    return result

  def __get__(self, obj, objtype=None):  # as a method of a class
    return self if obj is None else functools.partial(self, obj)

  def __reduce__(self):
    return (_TimedCall, (self.fn, self.step, self.measure, self.lazy))


def _timed(step, fn, measure=None, lazy=False):
  """A module function wrapped (`_TimedCall`'s timing), still a function:
  pickled by reference to its module's (patched) name."""
  call = _TimedCall(fn, step, measure, lazy)

  @functools.wraps(fn)
  def wrapper(*args, **kwargs):
    return call(*args, **kwargs)

  wrapper.bench_scale_wrapped = True
  return wrapper


def _partial_bytes(_args, result):
  partial = result.partial if type(result).__name__ == "Carry" else result
  return {"partial_bytes": _pickled_size(partial)}


def _value_bytes(_args, result):
  return {"side_bytes": _pickled_size(result)}


def _runs_bytes(_args, result):
  by_file = result[0]
  runs = [r for rs in by_file.values() for r in rs]
  return {"shuffle_bytes": sum(len(r.data) for r in runs),
          "records": sum(len(r.keys) for r in runs)}


def _spill_records(_args, result):
  counts = result[0] if isinstance(result, tuple) else result  # (counts, bytes) per bucket
  return {"records": int(sum(counts))}


def _patch(module, name: str, step, measure=None, lazy=False) -> None:
  fn = getattr(module, name, None)
  if fn is None or getattr(fn, "bench_scale_wrapped", False):
    return
  setattr(module, name, _timed(step, fn, measure, lazy))


_PASS_FIELDS = (("map", "map", _partial_bytes), ("merge", "merge", None),
                ("finish", "finish", _value_bytes), ("split", "split", None),
                ("select", "select", None))


def _patch_protocol(m) -> None:
  """Every `Pass` made from now on times its map, merge, finish (and a
  sharded pass's split and select), whichever engine calls them."""
  cls = getattr(m, "Pass", None)
  if cls is None or getattr(cls.__init__, "bench_scale_wrapped", False):
    return
  init = cls.__init__

  @functools.wraps(init)
  def timed_init(self, *args, **kwargs):
    init(self, *args, **kwargs)
    for field, label, measure in _PASS_FIELDS:
      fn = getattr(self, field, None)
      if callable(fn) and not getattr(fn, "bench_scale_wrapped", False):
        object.__setattr__(self, field, _TimedCall(fn, f"{self.name}: {label}", measure))

  timed_init.bench_scale_wrapped = True
  cls.__init__ = timed_init


def _patch_steps(m) -> None:
  _patch(m, "unit_runs", "examples", _runs_bytes)
  _patch(m, "keyed_runs", "stage runs")
  _patch(m, "merge_totals", "totals: merge")
  _patch(m, "file_runs", "finish file", lazy=True)
  _patch(m, "write_file", "write files")
  _patch(m, "finalize_direct", "finalize")


def _patch_segments(m) -> None:
  _patch(m, "write_file_segment", "write files")  # a segment of a file (its own task)
  _patch(m, "join_direct", "join segments")  # (URLs: on the store's side)
  _patch(m, "start_placement", "join: start")  # local paths: a task per segment placed
  _patch(m, "place", "place segments")
  _patch(m, "finish_direct", "join: finish")


def _patch_local(m) -> None:
  _patch(m, "_write", "write files")
  _patch(m, "_write_records", "write files")


def _patch_ordered(m) -> None:
  _patch(m, "_spill_task", "examples", _spill_records)
  _patch(m, "_frame_bucket", "sort buckets")


def _patch_class(class_name: str, m) -> None:
  cls = getattr(m, class_name, None)
  if cls is None:
    return
  for name, step in (("metadata", "metadata"), ("small_files", "small files")):
    _patch(cls, name, step)


_TARGETS = {
    "textrecords.engine.protocol": _patch_protocol,
    "textrecords.engine.generator_steps": _patch_steps,
    "textrecords.engine.local": _patch_local,
    "textrecords.engine.file_segments": _patch_segments,
    "bert_data.ordered_run": _patch_ordered,
    "bert_data.generator": functools.partial(_patch_class, "BertGenerator"),
    "w2v_data.generator": functools.partial(_patch_class, "W2vGenerator"),
    "mt_data.generator": functools.partial(_patch_class, "MTGenerator"),
}


class _PostImport(importlib.abc.MetaPathFinder):
  """Patches a target module right after it is executed."""

  def find_spec(self, name, path, target=None):
    if name not in _TARGETS:
      return None
    for finder in sys.meta_path:
      if finder is self or not hasattr(finder, "find_spec"):
        continue
      spec = finder.find_spec(name, path, target)
      if spec is not None:
        break
    else:
      return None
    run = spec.loader.exec_module

    def exec_module(module):
      run(module)
      _TARGETS[name](module)

    spec.loader.exec_module = exec_module
    return spec


def install_probes() -> None:
  """Wraps the steps in this process (where BENCH_SCALE_LOG is set)."""
  if _PROBE["installed"] or not os.environ.get(LOG_ENV):
    return
  _PROBE["installed"] = True
  for name, patch in _TARGETS.items():
    if name in sys.modules:
      patch(sys.modules[name])
  sys.meta_path.insert(0, _PostImport())


SITECUSTOMIZE = '''"""bench_scale.py's probes in every process of a measured run."""
import os
if os.environ.get("BENCH_SCALE_LOG") and os.environ.get("BENCH_SCALE_SCRIPT"):
  import importlib.util, sys
  _spec = importlib.util.spec_from_file_location("bench_scale_probe",
                                                 os.environ["BENCH_SCALE_SCRIPT"])
  _m = importlib.util.module_from_spec(_spec)
  sys.modules["bench_scale_probe"] = _m
  _spec.loader.exec_module(_m)
  _m.install_probes()
'''

# ============================================================== one run (child process)


def run_job(spec: dict) -> dict:
  """Runs one create in this process (the probes already installed)."""
  engine = dict(engine=spec["engine"], num_workers=spec["num_workers"], overwrite=True,
                quiet=True)
  if spec["engine"] == "beam":
    engine["beam_pipeline_options"] = BEAM_OPTIONS
  t0 = time.perf_counter()
  if spec["generator"] == "bert":
    from bert_data import create as bert  # pylint: disable=import-outside-toplevel
    result = bert.create_dataset(spec["input"], spec["output"] + "/train.tfrecord",
                                 spec["vocab"], dupe_factor=spec["dupe_factor"], **engine)
  elif spec["generator"] == "w2v":
    from w2v_data import create as w2v  # pylint: disable=import-outside-toplevel
    result = w2v.create_dataset(spec["input"], spec["output"], **engine)
  else:
    from mt_data import create as mt  # pylint: disable=import-outside-toplevel
    result = mt.create_dataset(spec["input"], spec["output"], num_train=spec["mt_num_train"],
                               **engine)
  counts = (result.meta or {}).get("counts", {})
  import textrecords  # pylint: disable=import-outside-toplevel
  return {"wall_s": round(time.perf_counter() - t0, 2), "counts": counts,
          "code": os.path.dirname(os.path.dirname(os.path.abspath(textrecords.__file__)))}


# ============================================================== corpora


def _varied_words(word: str) -> bool:
  import zlib  # pylint: disable=import-outside-toplevel
  return not word.startswith("<") and zlib.crc32(word.encode("utf-8")) % 8 == 0


def _template(text: str):
  """(literals, words): text = lit0 w1 lit1 w2 ... with the varied words apart."""
  import re  # pylint: disable=import-outside-toplevel
  pieces = re.split(r"(\S+)", text)
  lits, words, cur = [], [], []
  for i, piece in enumerate(pieces):
    if i % 2 == 1 and _varied_words(piece):
      lits.append("".join(cur))
      words.append(piece)
      cur = []
    else:
      cur.append(piece)
  lits.append("".join(cur))
  return lits, words


def _base_text(kind: str, source: str) -> str:
  with open(source, encoding="utf-8") as f:
    lines = [l.rstrip("\n") for l in f if l.strip()]
  if kind == "bert":  # documents of 8 lines, a blank line between
    docs = ["\n".join(lines[i:i + 8]) for i in range(0, len(lines), 8)]
    return "\n\n".join(docs) + "\n\n"
  return "\n".join(lines) + "\n"


def make_corpus(kind: str, source: str, size_mb: float, path: str) -> str:
  """Writes a corpus of `size_mb` from `source` (copies varied as the module
  doc says), cut at a line end; kept if already there."""
  if os.path.exists(path):
    return path
  target = int(size_mb * MB)
  lits, words = _template(_base_text(kind, source))
  tmp = path + ".tmp"
  written, copy = 0, 0
  with open(tmp, "w", encoding="utf-8") as f:
    while written < target:
      suffix = f"x{copy}" if copy else ""
      out = [None] * (2 * len(words) + 1)
      out[0::2] = lits
      out[1::2] = [w + suffix for w in words]
      text = "".join(out)
      if written + len(text.encode("utf-8")) > target:
        data = text.encode("utf-8")[:target - written]
        cut = data.rfind(b"\n")
        text = data[:cut + 1].decode("utf-8") if cut >= 0 else ""
        if not text:
          break
      f.write(text)
      written += len(text.encode("utf-8"))
      copy += 1
  os.replace(tmp, path)
  return path


# ============================================================== the launcher's side


class Sampler(threading.Thread):
  """Every process of a run (the child and its descendants): CPU seconds and
  peak RSS (VmHWM), polled 4 times a second."""

  def __init__(self, pid: int, max_rss_mb: float = 0.0):
    super().__init__(daemon=True)
    import psutil  # pylint: disable=import-outside-toplevel
    self.psutil, self.root = psutil, psutil.Process(pid)
    self.procs = {}
    self.stop = threading.Event()
    self.max_rss_mb, self.tree_peak_mb, self.over = max_rss_mb, 0.0, False

  def _one(self, p):
    try:
      info = self.procs.get(p.pid)
      if info is None:
        info = self.procs[p.pid] = {"cmd": " ".join(p.cmdline())[:300], "cpu": 0.0, "hwm_mb": 0.0}
      t = p.cpu_times()
      info["cpu"] = max(info["cpu"], t.user + t.system)
      info["rss_now_mb"] = p.memory_info().rss / MB
      with open(f"/proc/{p.pid}/status", encoding="ascii") as f:
        for line in f:
          if line.startswith("VmHWM:"):
            info["hwm_mb"] = max(info["hwm_mb"], int(line.split()[1]) / 1024)
    except (self.psutil.Error, OSError):
      pass

  def run(self):
    while not self.stop.is_set():
      try:
        procs = [self.root] + self.root.children(recursive=True)
      except self.psutil.Error:
        procs = []
      for p in procs:
        self._one(p)
      live = {p.pid for p in procs}
      total = sum(i.get("rss_now_mb", 0.0) for pid, i in self.procs.items() if pid in live)
      self.tree_peak_mb = max(self.tree_peak_mb, total)
      if self.max_rss_mb and total > self.max_rss_mb and not self.over:
        self.over = True  # the machine is shared: stop the run before it takes it all
        _kill_tree(self)
      self.stop.wait(0.25)


def _kill_tree(sampler: "Sampler") -> None:
  """Kills the run's process and its descendants (this script started them)."""
  try:
    procs = sampler.root.children(recursive=True) + [sampler.root]
  except sampler.psutil.Error:
    procs = [sampler.root]
  for p in procs:
    try:
      p.kill()
    except sampler.psutil.Error:
      pass


def _kind(pid: int, cmd: str, root_pid: int) -> str:
  """launcher (the run's process), helper (multiprocessing's trackers, a
  shell) or worker (every other descendant: local, Beam SDK, Dask workers)."""
  if pid == root_pid:
    return "launcher"
  if "resource_tracker" in cmd or "semaphore_tracker" in cmd or cmd.startswith(("/bin/sh", "sh ")):
    return "helper"
  return "worker"


class S3:
  """A moto server on 127.0.0.1 with bucket `bkt`; requests read from its log."""

  def __init__(self, folder: str):
    import socket  # pylint: disable=import-outside-toplevel
    import subprocess  # pylint: disable=import-outside-toplevel
    with socket.socket() as s:
      s.bind(("127.0.0.1", 0))
      port = s.getsockname()[1]
    self.endpoint = f"http://127.0.0.1:{port}"
    self.log_path = os.path.join(folder, "moto.log")
    self.log = open(self.log_path, "ab")  # pylint: disable=consider-using-with
    exe = os.path.join(os.path.dirname(sys.executable), "moto_server")
    cmd = [exe] if os.path.exists(exe) else [sys.executable, "-m", "moto.server"]
    self.proc = subprocess.Popen(cmd + ["-H", "127.0.0.1", "-p", str(port)],  # pylint: disable=consider-using-with
                                 stdout=self.log, stderr=subprocess.STDOUT)
    self.env = dict(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
                    AWS_DEFAULT_REGION="us-east-1", AWS_ENDPOINT_URL=self.endpoint,
                    AWS_EC2_METADATA_DISABLED="true")
    os.environ.update(self.env)
    import s3fs  # pylint: disable=import-outside-toplevel
    self.fs = s3fs.S3FileSystem(endpoint_url=self.endpoint, key="testing", secret="testing",
                                skip_instance_cache=True)
    for _ in range(100):
      try:
        self.fs.mkdir("bkt")
        break
      except Exception:  # pylint: disable=broad-except
        time.sleep(0.2)
    else:
      raise RuntimeError("moto_server did not start")
    self.uploaded = set()

  def upload(self, local: str, key: str) -> str:
    url = f"s3://bkt/{key}"
    if url not in self.uploaded:
      self.fs.put(local, url)
      self.uploaded.add(url)
    return url

  def mark(self) -> int:
    self.log.flush()
    return os.path.getsize(self.log_path)

  def requests(self, start: int, end: int) -> dict:
    """Requests logged between two marks, by HTTP method."""
    import re  # pylint: disable=import-outside-toplevel
    with open(self.log_path, "rb") as f:
      f.seek(start)
      text = f.read(end - start).decode("utf-8", "replace")
    out = {}
    # (werkzeug colours some lines, e.g. a ranged GET's 206: ANSI codes first)
    for m in re.finditer(r'"(?:\x1b\[[0-9;]*m)*(GET|PUT|POST|HEAD|DELETE|PATCH) ', text):
      out[m.group(1)] = out.get(m.group(1), 0) + 1
    out["total"] = sum(out.values())
    return out

  def remove(self, url: str) -> None:
    try:
      self.fs.rm(url, recursive=True)
    except FileNotFoundError:
      pass

  def close(self):
    self.proc.terminate()
    self.proc.wait(30)
    self.log.close()


def launch(spec: dict, folder: str, s3, timeout_s: float, code_dir: str = "",
           max_rss_mb: float = 0.0) -> dict:
  """Runs one job in a child process under the probes; returns its figures."""
  import shutil  # pylint: disable=import-outside-toplevel
  import subprocess  # pylint: disable=import-outside-toplevel
  log_dir = os.path.join(folder, "calls")
  shutil.rmtree(log_dir, ignore_errors=True)
  os.makedirs(log_dir)
  hook = os.path.join(folder, "hook")
  os.makedirs(hook, exist_ok=True)
  with open(os.path.join(hook, "sitecustomize.py"), "w", encoding="utf-8") as f:
    f.write(SITECUSTOMIZE)
  spec_path, result_path = os.path.join(folder, "job.json"), os.path.join(folder, "result.json")
  with open(spec_path, "w", encoding="utf-8") as f:
    json.dump(dict(spec, result=result_path), f)
  if os.path.exists(result_path):
    os.remove(result_path)
  env = dict(os.environ, **{LOG_ENV: log_dir, SCRIPT_ENV: os.path.abspath(__file__),
                            "TF_CPP_MIN_LOG_LEVEL": "2"})
  env["PYTHONPATH"] = os.pathsep.join([hook] + [os.path.abspath(code_dir)] * bool(code_dir)
                                      + [p for p in [env.get("PYTHONPATH")] if p])
  if s3 is not None:
    env.update(s3.env)
  start = s3.mark() if s3 is not None else 0
  before = resource.getrusage(resource.RUSAGE_CHILDREN)
  t0 = time.perf_counter()
  with open(os.path.join(folder, "stderr.txt"), "wb") as err:
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), f"--job={spec_path}"],  # pylint: disable=consider-using-with
                            env=env, stdout=err, stderr=subprocess.STDOUT,
                            cwd=folder)  # not the repository: `python -m` puts cwd first
    sampler = Sampler(proc.pid, max_rss_mb)
    sampler.start()
    try:
      rc = proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
      _kill_tree(sampler)
      rc = proc.wait()
    except BaseException:
      _kill_tree(sampler)
      raise
    finally:
      sampler.stop.set()
    sampler.join()
  wall = time.perf_counter() - t0
  after = resource.getrusage(resource.RUSAGE_CHILDREN)
  requests = {}
  if s3 is not None:
    time.sleep(1.0)  # the server's log lines of the last requests
    requests = s3.requests(start, s3.mark())
  job = {"rc": rc, "wall_s": round(wall, 2),
         "cpu_s_rusage": round((after.ru_utime + after.ru_stime)
                               - (before.ru_utime + before.ru_stime), 2),
         "tree_peak_mb": round(sampler.tree_peak_mb, 1)}
  if sampler.over:
    job.update(rc=rc or -9, error=f"stopped: the run's processes held over {max_rss_mb:.0f} MB "
                                  f"(RSS, all together; --max_rss_mb)")
    return job
  if rc != 0 or not os.path.exists(result_path):
    with open(os.path.join(folder, "stderr.txt"), encoding="utf-8", errors="replace") as f:
      job["error"] = f.read()[-2000:]
    return job
  with open(result_path, encoding="utf-8") as f:
    job.update(child=json.load(f))
  procs = {pid: dict(info, kind=_kind(pid, info["cmd"], proc.pid))
           for pid, info in sampler.procs.items()}
  job["cpu_s_sampled"] = round(sum(p["cpu"] for p in procs.values()), 2)
  job["cpu_s"] = max(job["cpu_s_rusage"], job["cpu_s_sampled"])
  job["requests"] = requests
  job.update(aggregate(log_dir, procs, job["cpu_s"]))
  return job


def _read_calls(log_dir: str):
  for name in sorted(os.listdir(log_dir)):
    with open(os.path.join(log_dir, name), encoding="utf-8") as f:
      for line in f:
        if line.strip():
          yield json.loads(line)


def aggregate(log_dir: str, procs: dict, job_cpu: float) -> dict:
  """Per step and per process figures from the calls' lines."""
  steps, per_proc_step, probe_rss = {}, {}, {}
  for c in _read_calls(log_dir):
    s = steps.setdefault(c["step"], dict(calls=0, cpu_s=0.0, max_call_cpu_s=0.0, nested=False,
                                         partial_bytes=0, side_bytes=0, shuffle_bytes=0,
                                         records=0, processes=set()))
    s["calls"] += 1
    s["cpu_s"] += c["cpu"]
    s["max_call_cpu_s"] = max(s["max_call_cpu_s"], c["cpu"])
    s["nested"] |= c["depth"] > 0
    for key in ("partial_bytes", "shuffle_bytes", "records"):
      s[key] += max(0, c.get(key, 0))
    s["side_bytes"] = max(s["side_bytes"], c.get("side_bytes", 0))
    s["processes"].add(c["pid"])
    key = (c["step"], c["pid"])
    per_proc_step[key] = per_proc_step.get(key, 0.0) + c["cpu"]
    probe_rss[c["pid"]] = max(probe_rss.get(c["pid"], 0.0), c["rss_mb"])
  for name, s in steps.items():
    s["max_process_cpu_s"] = max(v for (st, _), v in per_proc_step.items() if st == name)
    serial = s["max_process_cpu_s"] if name.endswith("merge") else s["max_call_cpu_s"]
    s["serial_cpu_s"] = round(serial, 3)
    s["share"] = round(serial / job_cpu, 4) if job_cpu else None
    s["processes"] = len(s["processes"])
    for key in ("cpu_s", "max_call_cpu_s", "max_process_cpu_s"):
      s[key] = round(s[key], 3)
  for pid, rss in probe_rss.items():  # processes the sampler missed
    if pid not in procs:
      procs[pid] = {"cmd": "", "cpu": 0.0, "hwm_mb": rss, "kind": "worker"}
  workers = [p for p in procs.values() if p["kind"] == "worker"]
  launcher = [p for p in procs.values() if p["kind"] == "launcher"]
  top = sum(s["cpu_s"] for s in steps.values() if not s["nested"])
  peak_of = workers or launcher  # no worker process: the run's work ran in the launcher
  return {"steps": steps,
          "worker_peak_mb": round(max([p["hwm_mb"] for p in peak_of] or [0.0]), 1),
          "launcher_peak_mb": round(max([p["hwm_mb"] for p in launcher] or [0.0]), 1),
          "workers": len(workers),
          "worker_max_cpu_s": round(max([p["cpu"] for p in workers] or [0.0]), 2),
          "instrumented_cpu_s": round(top, 2),
          "processes": {str(pid): {k: (round(v, 2) if isinstance(v, float) else v)
                                   for k, v in p.items()} for pid, p in procs.items()}}


# ============================================================== report


def _storage(r: dict) -> str:
  return r.get("storage", "disk")


def _label(gen: str, engine: str, storage: str) -> str:
  """`gen/engine` on S3 (the requests counted), `gen/engine (disk)` on local disk."""
  return f"{gen}/{engine}" + ("" if storage == "s3" else f" ({storage})")


def _ratio(a, b):
  return round(a / b, 2) if a is not None and b else None


def growth(results: list) -> dict:
  """Per (generator, engine): each figure at each size against the smallest."""
  out = {}
  by = {}
  for r in results:
    if r.get("rc") == 0 and "steps" in r:
      by.setdefault((r["generator"], r["engine"], _storage(r)), []).append(r)
  for (gen, engine, storage), runs in by.items():
    runs.sort(key=lambda r: r["size_mb"])
    base = runs[0]
    g = {"base_mb": base["size_mb"], "sizes": {}}
    for r in runs[1:]:
      key = f"{r['size_mb']:g}/{base['size_mb']:g}"
      row = {"cpu_s": _ratio(r["cpu_s"], base["cpu_s"]),
             "worker_peak_mb": _ratio(r["worker_peak_mb"], base["worker_peak_mb"]),
             "launcher_peak_mb": _ratio(r["launcher_peak_mb"], base["launcher_peak_mb"]),
             "requests": _ratio(r["requests"].get("total"), base["requests"].get("total")),
             "steps": {}}
      for name, s in r["steps"].items():
        b = base["steps"].get(name)
        if b:
          row["steps"][name] = {k: _ratio(s[k], b[k]) for k in
                                ("serial_cpu_s", "share", "side_bytes", "shuffle_bytes",
                                 "partial_bytes")}
      g["sizes"][key] = row
    out[_label(gen, engine, storage)] = g
  return out


def checks(results: list) -> list:
  """(PASS|FAIL|INFO, line) for issue 37's targets."""
  ok = [r for r in results if r.get("rc") == 0 and "steps" in r]
  lines = []
  by = {}
  for r in ok:  # growth is only compared on one storage (S3 runs hold s3fs buffers)
    by.setdefault((r["generator"], r["engine"], _storage(r)), []).append(r)
  for (gen, engine, storage), runs in sorted(by.items()):
    runs.sort(key=lambda r: r["size_mb"])
    small, big = runs[0], runs[-1]
    label = _label(gen, engine, storage)
    if engine != "local":
      top = max(big["steps"].items(), key=lambda kv: kv[1]["share"] or 0)
      falling = len(runs) >= 2 and top[1]["share"] <= (
          small["steps"].get(top[0], {}).get("share") or 0) + 1e-9
      passed = top[1]["share"] <= SHARE_LIMIT and falling
      trend = (f"at {small['size_mb']:g} MB "
               f"{100 * (small['steps'].get(top[0], {}).get('share') or 0):.1f}% "
               f"({'falling' if falling else 'not falling'})" if len(runs) >= 2
               else "one size only: no trend")
      lines.append(("PASS" if passed else "FAIL",
                    f"{label}: largest serial step at {big['size_mb']:g} MB is "
                    f"'{top[0]}' at {100 * top[1]['share']:.1f}% of the job's CPU "
                    f"(<= {100 * SHARE_LIMIT:.0f}%), {trend}"))
    if len(runs) >= 2:
      ratio = _ratio(big["worker_peak_mb"], small["worker_peak_mb"])
      lines.append(("PASS" if ratio is not None and ratio <= MEMORY_GROWTH_LIMIT else "FAIL",
                    f"{label}: per-worker peak memory {small['worker_peak_mb']:.0f} MB "
                    f"at {small['size_mb']:g} MB -> {big['worker_peak_mb']:.0f} MB at "
                    f"{big['size_mb']:g} MB: {ratio}x (<= {MEMORY_GROWTH_LIMIT}x)"))
      lratio = _ratio(big["launcher_peak_mb"], small["launcher_peak_mb"])
      lines.append(("INFO", f"{label}: launcher (runner, client) peak memory "
                            f"{small['launcher_peak_mb']:.0f} MB -> {big['launcher_peak_mb']:.0f} "
                            f"MB: {lratio}x"))
    with_req = [r for r in runs if r["requests"].get("total")]
    for r in with_req:
      per_mb = r["requests"]["total"] / r["size_mb"]
      lines.append(("PASS" if per_mb <= REQUESTS_PER_MB_LIMIT else "FAIL",
                    f"{label}: {r['requests']['total']:,} object-store requests at "
                    f"{r['size_mb']:g} MB = {per_mb:.1f} per input MB "
                    f"(<= {REQUESTS_PER_MB_LIMIT})"))
    if len(with_req) >= 2:
      a, b = with_req[0], with_req[-1]
      req_ratio = b["requests"]["total"] / a["requests"]["total"]
      size_ratio = b["size_mb"] / a["size_mb"]
      lines.append(("PASS" if req_ratio <= 1.2 * size_ratio else "FAIL",
                    f"{label}: requests grow {req_ratio:.2f}x for {size_ratio:g}x the "
                    f"input (linear: <= {1.2 * size_ratio:.2f}x)"))
  for gen in sorted({r["generator"] for r in ok}):
    sizes = sorted({(r["size_mb"], _storage(r) != "s3") for r in ok if r["generator"] == gen},
                   key=lambda s: (abs(s[0] - 100), s[1]))  # ~100 MB, S3 first
    size, on_disk = sizes[0]

    def run_of(engine, size=size, on_disk=on_disk):
      return next((r for r in ok if (r["generator"], r["engine"], r["size_mb"],
                                     _storage(r) != "s3") == (gen, engine, size, on_disk)),
                  None)
    local = run_of("local")
    for engine in ("beam", "dask"):
      other = run_of(engine)
      if local is None or other is None:
        continue
      ratio = other["cpu_s"] / local["cpu_s"]
      lines.append(("PASS" if ratio <= ENGINE_CPU_LIMIT else "FAIL",
                    f"{_label(gen, engine, _storage(other))}: {other['cpu_s']:.1f} CPU s at "
                    f"{size:g} MB vs local "
                    f"{local['cpu_s']:.1f}: {ratio:.2f}x (<= {ENGINE_CPU_LIMIT:g}x)"))
  for r in results:
    if r.get("rc") != 0 or "steps" not in r:
      lines.append(("FAIL", f"{r['generator']}/{r['engine']} at {r['size_mb']:g} MB did not "
                            f"finish (rc {r.get('rc')}): {r.get('error', '')[-300:]!r}"))
  return lines


def _mib(n) -> str:
  return f"{n / MB:.2f}" if n else "-"


def print_tables(results: list, grow: dict) -> None:
  print("\n== runs (CPU s: every process of the run; peaks: VmHWM)")
  print(f"{'run':<24}{'MB':>6}{'wall s':>8}{'CPU s':>8}{'instr%':>7}{'wrk':>4}"
        f"{'wrk peak':>9}{'lnch peak':>10}{'requests':>9}{'req/MB':>7}  commit")
  for r in results:
    label = _label(r["generator"], r["engine"], _storage(r))
    if r.get("rc") != 0 or "steps" not in r:
      print(f"{label:<24}{r['size_mb']:>6g}  FAILED rc={r.get('rc')}")
      continue
    req = r["requests"].get("total")
    instr = 100 * r["instrumented_cpu_s"] / r["cpu_s"] if r["cpu_s"] else 0
    print(f"{label:<24}{r['size_mb']:>6g}{r['wall_s']:>8.1f}{r['cpu_s']:>8.1f}{instr:>6.0f}%"
          f"{r['workers']:>4}{r['worker_peak_mb']:>9.0f}{r['launcher_peak_mb']:>10.0f}"
          f"{req if req else '-':>9}{(req / r['size_mb']) if req else 0:>7.1f}  {r['commit'][:8]}")
  print("\n== steps: serial CPU s (largest call; merges: most in one process), share of the "
        "job's CPU, side-input / shuffle / partial MiB; growth vs the smallest size")
  for r in results:
    if r.get("rc") != 0 or "steps" not in r:
      continue
    key = _label(r["generator"], r["engine"], _storage(r))
    g = grow.get(key, {})
    rkey = f"{r['size_mb']:g}/{g.get('base_mb', 0):g}"
    gs = g.get("sizes", {}).get(rkey, {}).get("steps", {})
    print(f"-- {key} {r['size_mb']:g} MB (calls; x = growth {rkey})")
    for name, s in sorted(r["steps"].items(), key=lambda kv: -kv[1]["serial_cpu_s"]):
      x = gs.get(name, {})
      grow_txt = "" if not x else (f"  x cpu {x['serial_cpu_s']} share {x['share']}"
                                   + (f" side {x['side_bytes']}" if s["side_bytes"] else "")
                                   + (f" shuffle {x['shuffle_bytes']}" if s["shuffle_bytes"] else ""))
      print(f"   {name:<18}{s['calls']:>7}{s['serial_cpu_s']:>9.2f}s "
            f"{100 * (s['share'] or 0):>5.1f}%  side {_mib(s['side_bytes']):>7} "
            f"shuffle {_mib(s['shuffle_bytes']):>8} partial {_mib(s['partial_bytes']):>7}"
            f"{'  (nested)' if s['nested'] else ''}{grow_txt}")


# ============================================================== main


def _commit(code_dir: str) -> str:
  """The measured tree's commit: `git rev-parse HEAD` (+"+dirty" with changes
  to tracked files), or the `.commit` file of an exported tree."""
  import subprocess  # pylint: disable=import-outside-toplevel
  folder = code_dir or os.path.dirname(os.path.abspath(__file__))
  marker = os.path.join(folder, ".commit")
  if code_dir and os.path.exists(marker):
    with open(marker, encoding="utf-8") as f:
      return f.read().strip()
  try:
    def git(*args):
      return subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True,
                            check=True).stdout.strip()
    return git("rev-parse", "HEAD") + ("+dirty" if git("status", "--porcelain",
                                                       "--untracked-files=no") else "")
  except (OSError, subprocess.CalledProcessError):
    return "unknown"


def _parse():
  from textrecords.runs import script_args  # pylint: disable=import-outside-toplevel
  p = script_args.ScriptParser(description=__doc__.split("\n")[0])
  p.add_argument("--out", help="Folder for corpora, run logs and bench_scale.json.")
  p.add_argument("--sizes_mb", default="25,100,400", help="Corpus sizes in MB (2**20 bytes).")
  p.add_argument("--generators", default=",".join(GENERATORS), help="Of bert,w2v,mt.")
  p.add_argument("--engines", default=",".join(ENGINES), help="Of local,beam,dask.")
  p.add_argument("--ptb", default="../shared/data/ptb.train.txt",
                 check=script_args.existing_files, help="PTB text (w2v, bert).")
  p.add_argument("--fra", default="../shared/data/fra.txt", check=script_args.existing_files,
                 help="fra.txt pairs (mt).")
  p.add_argument("--vocab", default="../shared/data/vocab_uncased.txt",
                 check=script_args.existing_files, help="WordPiece vocab (bert).")
  p.add_argument("--dupe_factor", type=int, default=5, check=script_args.at_least(1),
                 help="bert's --dupe_factor.")
  p.add_argument("--mt_num_train", type=int, default=0, check=script_args.at_least(0),
                 help="mt's --num_train (0: every pair; the default 512 reads 640 pairs).")
  p.add_argument("--num_workers", type=int, default=2, check=script_args.at_least(1),
                 help="Worker processes of every engine.")
  p.add_argument("--s3", action="store_true", default=True,
                 help="Inputs, vocab and outputs on a local moto S3 server; requests counted.")
  p.add_argument("--s3_max_mb", type=float, default=100.0,
                 help="Larger corpora run on local disk (moto keeps objects in memory); "
                      "the smallest size then runs on disk as well, the baseline of "
                      "the disk runs' growth.")
  p.add_argument("--code_dir", default="",
                 help="Measure the packages of this tree (e.g. `git archive` of a commit, "
                      "with its hash in <code_dir>/.commit) instead of the installed ones.")
  p.add_argument("--max_rss_mb", type=float, default=10000.0, check=script_args.at_least(0),
                 help="A run whose processes hold more (RSS, all together) is stopped and "
                      "reported as such (0: no limit).")
  p.add_argument("--reuse", action="store_true", default=True,
                 help="Keep the successful runs of the same commit found in "
                      "<out>/bench_scale.json: planned ones are not run again, the "
                      "others stay in the report.")
  p.add_argument("--report", action="store_true", default=False,
                 help="Run nothing: the tables and checks of <out>/bench_scale.json.")
  p.add_argument("--timeout_s", type=float, default=7200.0, help="Per run.")
  p.add_argument("--job", help=script_args.SUPPRESS)  # main() reads it before parsing
  a = p.parse_args()
  if not a.out:
    p.refuse("--out: required")
  for name, allowed in (("generators", GENERATORS), ("engines", ENGINES)):
    bad = [x for x in getattr(a, name).split(",") if x not in allowed]
    if bad:
      p.refuse(f"--{name}={getattr(a, name)}: {bad[0]!r} is not one of {','.join(allowed)}")
  try:
    a.sizes = [float(x) for x in a.sizes_mb.split(",") if x.strip()]
  except ValueError:
    a.sizes = []
  if not a.sizes or min(a.sizes) <= 0:
    p.refuse(f"--sizes_mb={a.sizes_mb}: expected positive numbers, e.g. 25,100,400")
  return a


def main() -> int:
  if len(sys.argv) == 2 and sys.argv[1].startswith("--job="):  # a run, in a child process
    with open(sys.argv[1].split("=", 1)[1], encoding="utf-8") as f:
      spec = json.load(f)
    out = run_job(spec)
    with open(spec["result"], "w", encoding="utf-8") as f:
      json.dump(out, f)
    return 0
  a = _parse()
  import signal  # pylint: disable=import-outside-toplevel
  signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # cleanup runs on kill
  if a.report:
    return report(os.path.join(os.path.abspath(a.out), "bench_scale.json"))
  import shutil  # pylint: disable=import-outside-toplevel
  out = os.path.abspath(a.out)
  os.makedirs(os.path.join(out, "corpora"), exist_ok=True)
  sources = {"bert": a.ptb, "w2v": a.ptb, "mt": a.fra}
  s3 = S3(out) if a.s3 else None
  results = []
  json_path = os.path.join(out, "bench_scale.json")
  previous = {}
  if a.reuse and os.path.exists(json_path):
    with open(json_path, encoding="utf-8") as f:
      previous = {(r["generator"], r["engine"], r["size_mb"], _storage(r), r["commit"]): r
                  for r in json.load(f)["results"] if r.get("rc") == 0 and "steps" in r}
  commit = _commit(a.code_dir)
  kept = [r for k, r in previous.items() if k[-1] == commit and not _planned(k, a, s3)]
  for gen in a.generators.split(","):  # compile caches (w2v's numba kernels) built unmeasured
    warm = os.path.join(out, "runs", f"warm-up-{gen}")
    os.makedirs(warm, exist_ok=True)
    corpus = make_corpus(gen, sources[gen], 0.05, os.path.join(out, "corpora", f"{gen}-warm.txt"))
    job = launch(dict(generator=gen, engine="local", num_workers=a.num_workers,
                      dupe_factor=a.dupe_factor, mt_num_train=a.mt_num_train, input=corpus,
                      vocab=os.path.abspath(a.vocab), output=os.path.join(warm, "output")),
                 warm, None, a.timeout_s, a.code_dir)
    print(f"{time.strftime('%H:%M:%S')} warm-up {gen}: rc={job['rc']} {job['wall_s']} s",
          flush=True)
  try:
    for size, on_s3 in plan_sizes(a.sizes, s3 is not None, a.s3_max_mb):
      for gen in a.generators.split(","):
        corpus = make_corpus(gen, sources[gen], size,
                             os.path.join(out, "corpora", f"{gen}-{size:g}mb.txt"))
        for engine in a.engines.split(","):
          name = f"{gen}-{engine}-{size:g}mb" + ("" if on_s3 else "-disk")
          folder = os.path.join(out, "runs", name)
          os.makedirs(folder, exist_ok=True)
          spec = dict(generator=gen, engine=engine, num_workers=a.num_workers,
                      dupe_factor=a.dupe_factor, mt_num_train=a.mt_num_train)
          if on_s3:
            spec.update(input=s3.upload(corpus, f"in/{os.path.basename(corpus)}"),
                        vocab=s3.upload(os.path.abspath(a.vocab), "in/vocab.txt"),
                        output=f"s3://bkt/out/{name}")
          else:
            spec.update(input=corpus, vocab=os.path.abspath(a.vocab),
                        output=os.path.join(folder, "output"))
          print(f"{time.strftime('%H:%M:%S')} {name} ({'s3' if on_s3 else 'disk'}) at "
                f"{commit[:8]} ...", flush=True)
          done = previous.pop((gen, engine, size, "s3" if on_s3 else "disk", commit), None)
          if done is not None:
            results.append(done)
            print(f"{time.strftime('%H:%M:%S')} {name}: kept from {json_path}", flush=True)
            continue
          job = launch(spec, folder, s3 if on_s3 else None, a.timeout_s, a.code_dir,
                       a.max_rss_mb)
          job.update(generator=gen, engine=engine, size_mb=size, commit=commit,
                     input_bytes=os.path.getsize(corpus), storage="s3" if on_s3 else "disk")
          results.append(job)
          print(f"  rc={job['rc']} wall {job['wall_s']} s, CPU {job.get('cpu_s')} s, "
                f"requests {job.get('requests', {}).get('total')}", flush=True)
          if on_s3:
            s3.remove(spec["output"])
          else:
            shutil.rmtree(spec["output"], ignore_errors=True)
          _write_report(json_path, results + kept)
  finally:
    if s3 is not None:
      s3.close()
  _write_report(json_path, results + kept)
  return report(json_path)


def plan_sizes(sizes, s3: bool, s3_max_mb: float) -> list:
  """(size, on S3) of each planned size. Sizes over `s3_max_mb` run on disk;
  then the smallest size runs on disk too, so memory and CPU growth are
  compared on one storage (e.g. 25 -> 400 MB on disk, 25 -> 100 MB on S3)."""
  out = [(size, s3 and size <= s3_max_mb) for size in sizes]
  if s3 and any(not on_s3 for _, on_s3 in out) and (min(sizes), False) not in out:
    out.insert(0, (min(sizes), False))
  return out


def _planned(key: tuple, a, s3) -> bool:
  """Whether a kept run's (generator, engine, size, storage, commit) is planned
  again; runs of the same commit that are not stay in the report."""
  gen, engine, size, storage, _ = key
  return (gen in a.generators.split(",") and engine in a.engines.split(",")
          and (size, storage == "s3") in plan_sizes(a.sizes, s3 is not None, a.s3_max_mb))


def _write_report(json_path: str, results: list) -> None:
  with open(json_path, "w", encoding="utf-8") as f:
    json.dump({"results": results, "growth": growth(results), "beam_options": BEAM_OPTIONS,
               "checks": [list(c) for c in checks(results)]}, f, indent=1)


def report(json_path: str) -> int:
  """Prints the tables and checks of a results file (checks recomputed);
  non-zero when a run did not finish."""
  with open(json_path, encoding="utf-8") as f:
    results = json.load(f)["results"]
  _write_report(json_path, results)
  print_tables(results, growth(results))
  print("\n== issue 37 targets")
  for status, line in checks(results):
    print(f"{status} {line}")
  print(f"\nwrote {json_path}")
  return 0 if all(r.get("rc") == 0 for r in results) else 1


if __name__ == "__main__":
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  sys.exit(main())
