"""Shared fixtures: paths to bundled test data, a CLI runner."""

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

TESTDATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "testdata")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB = os.path.join(TESTDATA, "vocab_uncased.txt")
SAMPLE_TEXT = os.path.join(TESTDATA, "bert_sample_text.txt")
GOLDEN = os.path.join(TESTDATA, "bert_golden")
W2V_TINY = os.path.join(TESTDATA, "w2v_tiny.txt")
BUNDLED_TEXT = os.path.join(REPO, "bert_data", "sample", "sample_corpus.txt")
BUNDLED_VOCAB = os.path.join(REPO, "bert_data", "sample", "vocab.txt")
_LIBRARY_LOG = re.compile(r"^[IWE]\d{4} ")  # absl-formatted log lines of TF, boto, google libs


def message_lines(stderr: str, *noise: str):
  """The lines of a CLI's stderr that are ours: library log lines and `noise` dropped."""
  return [l for l in stderr.splitlines()
          if l.strip() and not _LIBRARY_LOG.match(l) and "oneDNN" not in l
          and not l.startswith("WARNING: All log messages")
          and not any(n in l for n in noise)]


def free_port() -> int:
  s = socket.socket()
  s.bind(("127.0.0.1", 0))
  port = s.getsockname()[1]
  s.close()
  return port


@contextlib.contextmanager
def local_server(argv, probe_url: str, what: str):
  """Runs a storage emulator (`argv`) until the block ends; waits until
  `probe_url` answers (any HTTP status) first."""
  proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  try:
    deadline = time.monotonic() + 30
    while True:
      try:
        urllib.request.urlopen(probe_url, timeout=1)
        break
      except urllib.error.HTTPError:
        break
      except OSError:
        if time.monotonic() > deadline or proc.poll() is not None:
          raise RuntimeError(f"{what} did not start")
        time.sleep(0.1)
    yield
  finally:
    proc.terminate()
    proc.wait(timeout=30)


def run_cli(module, *args, timeout=300, env_extra=None):
  """Runs `python -m module args...`; returns CompletedProcess (text)."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO)
  env.update(env_extra or {})
  return subprocess.run([sys.executable, "-m", module, *args], capture_output=True,
                        text=True, timeout=timeout, env=env, cwd=REPO)


def write_varied_corpus(path, repeats: int) -> str:
  """The sample text's documents repeated `repeats` times, each repeat with
  its lines rotated; returns the path."""
  text = open(SAMPLE_TEXT, encoding="utf-8").read().strip().split("\n\n")
  docs = []
  for i in range(repeats):
    for d in text:
      lines = d.split("\n")
      docs.append("\n".join(lines[i % len(lines):] + lines[:i % len(lines)]))
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n\n".join(docs) + "\n")
  return str(path)


def load_script(name: str):
  """scripts/<name>.py loaded as a module (the scripts are not a package);
  `name` may name a subfolder ("dev/make_mt_sample")."""
  import importlib.util  # pylint: disable=import-outside-toplevel
  spec = importlib.util.spec_from_file_location(os.path.basename(name),
                                                os.path.join(REPO, "scripts", f"{name}.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def error_lines(stderr: str):
  """stderr lines that are not TensorFlow/absl log noise."""
  noise = ("WARNING: All log messages", "I0000", "W0000", "E0000")
  return [l for l in stderr.splitlines() if l.strip() and not l.startswith(noise)]


@pytest.fixture
def cli():
  return run_cli


def write_three_datasets(d, names=("bert/train.tfrecord", "w2v", "mt")) -> dict:
  """One tiny two-shard dataset of each package under `d`: {package: location given to create}.

  `names`: the bert output path, w2v and mt output folders, relative to `d`.
  """
  from bert_data import generator as bert_generator  # pylint: disable=import-outside-toplevel
  from bert_data.config import BertConfig  # pylint: disable=import-outside-toplevel
  from mt_data import config as mt_config  # pylint: disable=import-outside-toplevel
  from mt_data import generator as mt_generator  # pylint: disable=import-outside-toplevel
  from w2v_data import generator as w2v_generator  # pylint: disable=import-outside-toplevel
  from w2v_data.config import W2vConfig  # pylint: disable=import-outside-toplevel
  bert, w2v, mt = (os.path.join(str(d), n) for n in names)
  os.makedirs(os.path.dirname(bert), exist_ok=True)
  bert_generator.create(BertConfig(input_files=(SAMPLE_TEXT,), output_files=(bert,),
                                  vocab_file=VOCAB, max_seq_length=32,
                                  max_predictions_per_seq=5, dupe_factor=1, num_shards=2,
                                  num_workers=1, quiet=True))
  w2v_generator.create(W2vConfig(input_file=os.path.join(TESTDATA, "w2v_tiny.txt"),
                                output_dir=w2v, min_freq=2, num_workers=1, num_shards=2,
                                quiet=True))
  mt_generator.create(mt_config.MTConfig(input_file=os.path.join(TESTDATA, "mt_pairs.txt"),
                                         output_dir=mt, num_train=30, num_val=12, num_shards=2,
                                         num_workers=1), log=lambda m: None)
  return {"bert_data": bert, "w2v_data": w2v, "mt_data": mt}


@pytest.fixture(scope="session")
def bert_out(tmp_path_factory):
  """Small bert_data records in 2 shards (max_seq_length 64), shared by the reader tests."""
  from bert_data import generator  # pylint: disable=import-outside-toplevel
  from bert_data.config import BertConfig  # pylint: disable=import-outside-toplevel
  out = str(tmp_path_factory.mktemp("bert_records") / "train.tfrecord")
  generator.create(BertConfig(input_files=(SAMPLE_TEXT,), output_files=(out,), vocab_file=VOCAB,
                             max_seq_length=64, max_predictions_per_seq=10, dupe_factor=3,
                             num_shards=2))
  return out


@pytest.fixture(scope="session")
def mt_out(tmp_path_factory):
  """Small mt_data records (30 train / 12 valid pairs in 2 shards each)."""
  from mt_data import config as mt_config  # pylint: disable=import-outside-toplevel
  from mt_data import generator as mt_generator  # pylint: disable=import-outside-toplevel
  d = str(tmp_path_factory.mktemp("mt_records") / "out")
  mt_generator.create(mt_config.MTConfig(input_file=os.path.join(TESTDATA, "mt_pairs.txt"),
                                         output_dir=d, num_train=30, num_val=12, num_shards=2),
                      log=lambda m: None)
  return d


def masking_rows(n_rows, seq, seed, subword_share=0.0, cls=101, sep=102):
  """Clean [CLS] A [SEP] B [SEP] id rows for the masking tests: ids, lengths,
  num_a, input_mask (words 1000..1499, "##" pieces 1500..1999)."""
  rng = np.random.default_rng(seed)
  lengths = rng.integers(6, seq + 1, n_rows)
  num_a = np.array([rng.integers(3, n - 2) for n in lengths])
  ids = np.zeros((n_rows, seq), np.int64)
  for i, n in enumerate(lengths):
    body = rng.integers(1000, 1500, n)
    sub = rng.random(n) < subword_share
    body[sub] = rng.integers(1500, 2000, int(sub.sum()))
    ids[i, :n] = body
    ids[i, 0], ids[i, num_a[i] - 1], ids[i, n - 1] = cls, sep, sep
  mask = (np.arange(seq)[None, :] < lengths[:, None]).astype(np.int64)
  return ids, lengths, num_a, mask


CREDS = dict(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
             AWS_DEFAULT_REGION="us-east-1", AWS_MAX_ATTEMPTS="1")
# No Google credentials lookup on a metadata server (there is none here).
GCS_QUIET = dict(NO_GCE_CHECK="True", GCE_METADATA_HOST="127.0.0.1:9",
                 GOOGLE_CLOUD_PROJECT="test")


@pytest.fixture(scope="module")
def s3_server():
  """A moto S3 server on localhost with bucket `bkt`: (endpoint, s3fs filesystem);
  this process's AWS settings point at it for the module."""
  s3fs = pytest.importorskip("s3fs")
  pytest.importorskip("moto.server")
  port = free_port()
  endpoint = f"http://127.0.0.1:{port}"
  with local_server([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                    f"{endpoint}/moto-api/", "the moto server"):
    fs = s3fs.S3FileSystem(endpoint_url=endpoint, key="testing", secret="testing",
                           skip_instance_cache=True)
    fs.mkdir("bkt")
    with pytest.MonkeyPatch.context() as mp:  # for the project's own reads in this process
      for k, v in dict(CREDS, AWS_ENDPOINT_URL=endpoint).items():
        mp.setenv(k, v)
      # fsspec keeps one s3fs client per process, made with the endpoint of its
      # time: a module after another one's server must not reach the dead one.
      s3fs.S3FileSystem.clear_instance_cache()
      try:
        yield endpoint, fs
      finally:
        s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture(scope="module")
def gcs():
  """A GCS emulator on localhost with bucket `bkt`: (host, gcsfs filesystem);
  this process's gcsfs points at it for the module."""
  gcsfs = pytest.importorskip("gcsfs")
  pytest.importorskip("gcp_storage_emulator")
  port = free_port()
  host = f"http://127.0.0.1:{port}"
  with local_server([sys.executable, "-m", "gcp_storage_emulator", "start", "-H", "127.0.0.1",
                     "--port", str(port), "--in-memory", "--default-bucket=bkt", "-q"],
                    f"{host}/storage/v1/b/bkt", "the GCS emulator"):
    with pytest.MonkeyPatch.context() as mp:  # for the project's own reads in this process
      for k, v in dict(GCS_QUIET, STORAGE_EMULATOR_HOST=host).items():
        mp.setenv(k, v)
      yield host, gcsfs.GCSFileSystem(skip_instance_cache=True)


def sigint_as_in_a_terminal():
  """A terminal's foreground job starts with SIGINT at its default action.

  A process started in the background of a non-interactive shell (`cmd &`,
  as some CI launchers do) inherits SIGINT ignored, and Python then keeps
  ignoring it: Ctrl-C could not be tested there. Give it as `preexec_fn` to
  the Popen of a test that sends SIGINT.
  """
  signal.signal(signal.SIGINT, signal.SIG_DFL)
