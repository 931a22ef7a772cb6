"""Where bytes live: local paths and storage URLs (`gs://`, `s3://`, `memory://`, ...).

A path is either local (`out/t.tfrecord`, `/data/x.txt`, `file:///data/x.txt`)
or a URL `SCHEME://...`, which is never a relative local path. URLs go
through fsspec (extra `storage`), with gcsfs for `gs://` (extra `gcs`), s3fs
for `s3://` (extra `s3`) and pyarrow for `hdfs://` (extra `hdfs`). A missing
package or an unknown scheme is a one-line UserError naming what to install;
callers check before writing anything.

With --engine=local, generators never write to a URL directly: they write
a local staging folder (`staging_root`), and `textrecords.datasets.publish` uploads
the finished dataset, data files first and the metadata strictly last
(object stores have no atomic rename).

Example:
  >>> split_scheme("gs://bucket/t.tfrecord")
  ('gs', 'bucket/t.tfrecord')
  >>> split_scheme("out/t.tfrecord")
  (None, 'out/t.tfrecord')
  >>> local_path("file:///data/x.txt")
  '/data/x.txt'
  >>> join("s3://b/out", "meta.json"), parent("s3://b/out/meta.json")
  ('s3://b/out/meta.json', 's3://b/out')
"""

import contextlib
import fnmatch
import glob as _glob
import importlib
import logging
import os
import posixpath
import re
import shutil
import socket
import urllib.parse
from typing import Iterable, List, Optional, Sequence, Tuple

from textrecords.files import atomic_file
from textrecords.errors import UserError
from textrecords.files import hashing

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")

# scheme -> (python module fsspec needs, extra to pip install)
_BACKENDS = {
    "memory": (None, "storage"),
    "gs": ("gcsfs", "gcs"),
    "gcs": ("gcsfs", "gcs"),
    "s3": ("s3fs", "s3"),
    "s3a": ("s3fs", "s3"),
    "hdfs": ("pyarrow", "hdfs"),
}
SCHEMES = ("file",) + tuple(_BACKENDS)
# Schemes tf.io.gfile reads without extra packages (TensorFlow 2.21).
TF_SCHEMES = ("gs",)


def split_scheme(path: str) -> Tuple[Optional[str], str]:
  """(scheme, rest) of a URL, (None, path) of a local path."""
  m = _SCHEME.match(path)
  if m is None:
    return None, path
  return m.group(1).lower(), path[m.end():]


def is_url(path: str) -> bool:
  """True for `scheme://...` other than `file://` (which is a local path)."""
  scheme, _ = split_scheme(path)
  return scheme is not None and scheme != "file"


def local_path(path: str) -> str:
  """`file:///x` -> `/x`; other local paths unchanged. Not for URLs."""
  scheme, rest = split_scheme(path)
  if scheme == "file":
    return rest
  return path


def check(path: str, flag: str = "") -> str:
  """Raises UserError unless `path`'s storage is usable here; returns `path`.

  Unknown schemes and missing filesystem packages give one line naming the
  extra to install. `file://` paths come back as plain local paths.
  """
  scheme, _ = split_scheme(path)
  if scheme is None or scheme == "file":
    return local_path(path)
  _quiet_clients()  # before the client imports (gcsfs logs a line on import)
  where = f"{flag}={path}" if flag else path
  if scheme not in _BACKENDS:
    raise UserError(f"{where}: unknown storage scheme {scheme}://; supported: "
                    f"{', '.join(s + '://' for s in SCHEMES)} or a local path")
  module, extra = _BACKENDS[scheme]
  for needed in ("fsspec", module):
    if needed and not _importable(needed):
      raise UserError(f"{where}: {scheme}:// needs the Python package {needed}, which is "
                      f"not installed: pip install 'textrecords[{extra}]'")
  return path


def _importable(module: str) -> bool:
  """True if `module` imports (a broken or shadowed install counts as missing)."""
  try:
    importlib.import_module(module)
  except ImportError:
    return False
  return True


# Client libraries that log routine INFO lines ("Found credentials in
# environment variables") which absl would print on every run, and the level
# they are set to. gcsfs also logs its retries' tracebacks and routine
# warnings ("Could not determine bucket type"); its failures reach the user
# as our one-line errors, so only its critical lines show.
_CHATTY_LOGGERS = {"botocore": logging.WARNING, "aiobotocore": logging.WARNING,
                   "s3fs": logging.WARNING, "gcsfs": logging.CRITICAL,
                   "google.auth": logging.WARNING}


def _quiet_clients():
  for name, level in _CHATTY_LOGGERS.items():
    logger = logging.getLogger(name)
    if logger.level == logging.NOTSET:  # the user's own logging settings win
      logger.setLevel(level)


# The first contact with a storage service is one TCP connection with this
# timeout: a service that cannot be reached is one line within seconds, not
# the client's retries (gcsfs: ~15 s of credential lookups, then ~45 s).
PROBE_TIMEOUT_S = 5.0
_PROBED: dict = {}  # (host, port) -> None (reached) or why not, once per process


def _gcs_endpoint() -> str:
  """The URL gcsfs talks to, picked as gcsfs picks it (emulator, fsspec
  config, the default universe)."""
  emulator = os.environ.get("STORAGE_EMULATOR_HOST", "")
  if emulator not in ("", "default"):
    return emulator if emulator.startswith(("http://", "https://")) else f"http://{emulator}"
  import fsspec  # pylint: disable=import-outside-toplevel
  for key in ("gcs", "gs"):
    url = fsspec.config.conf.get(key, {}).get("endpoint_url")
    if url:
      return url
  return "https://storage." + os.environ.get("GOOGLE_CLOUD_UNIVERSE_DOMAIN", "googleapis.com")


# scheme -> () -> the endpoint URL its client talks to (schemes not here are not probed)
_ENDPOINTS = {"gs": _gcs_endpoint, "gcs": _gcs_endpoint}


def check_reachable(path: str, flag: str = ""):
  """Raises UserError, within PROBE_TIMEOUT_S, if the service holding URL
  `path` cannot be reached (probed once per process; local paths and
  schemes without a known endpoint pass)."""
  endpoint = _ENDPOINTS.get(split_scheme(path)[0])
  if endpoint is None:
    return
  url = urllib.parse.urlsplit(endpoint())
  key = (url.hostname, url.port or (443 if url.scheme == "https" else 80))
  if key not in _PROBED:
    try:
      socket.create_connection(key, timeout=PROBE_TIMEOUT_S).close()
      _PROBED[key] = None
    except OSError as e:
      _PROBED[key] = getattr(e, "strerror", None) or str(e) or type(e).__name__
  if _PROBED[key]:
    where = f"{flag}={path}" if flag else path
    raise UserError(f"{where}: cannot reach the storage at {key[0]}:{key[1]} "
                    f"({_PROBED[key]})")


def filesystem(path: str):
  """The fsspec filesystem of a URL (after `check` and `check_reachable`)."""
  check(path)
  check_reachable(path)
  import fsspec  # pylint: disable=import-outside-toplevel
  scheme, _ = split_scheme(path)
  try:
    return fsspec.filesystem(scheme)
  except (ImportError, ValueError) as e:
    raise UserError(f"{path}: cannot use {scheme}:// storage: {e}") from e


def _url(path: str, fs_path: str) -> str:
  """A URL of `path`'s scheme for an fsspec path (as glob/ls return them)."""
  scheme, _ = split_scheme(path)
  return f"{scheme}://{fs_path.lstrip('/')}" if scheme == "memory" else (
      f"{scheme}://{fs_path}" if not _SCHEME.match(fs_path) else fs_path)


# -- path operations (URL-aware string ops; no I/O)

def join(folder: str, name: str) -> str:
  if not folder:
    return name
  if is_url(folder):
    return folder.rstrip("/") + "/" + name
  return os.path.join(folder, name)


def strip_sep(path: str) -> str:
  stripped = path.rstrip("/")
  return stripped or path


def parent(path: str) -> str:
  path = strip_sep(path)
  if is_url(path):
    scheme, rest = split_scheme(path)
    head = rest.rsplit("/", 1)[0] if "/" in rest else ""
    return f"{scheme}://{head}"
  return os.path.dirname(path)


def basename(path: str) -> str:
  path = strip_sep(path)
  if is_url(path):
    return split_scheme(path)[1].rsplit("/", 1)[-1]
  return os.path.basename(path)


# Scheme spellings of one storage (`gcs://` is `gs://`, `s3a://` is `s3://`).
_SAME_SCHEME = {"gcs": "gs", "s3a": "s3"}


def location_key(path: str) -> str:
  """One spelling per location, to tell whether two paths name one file:
  local paths absolute with symbolic links and `..` resolved, URLs with the
  scheme's canonical name and the path's `.`, `..` and repeated `/` removed.

  >>> location_key("GCS://b//x/./y/"), location_key("s3a://b/a/../y")
  ('gs://b/x/y', 's3://b/y')
  """
  if not is_url(path):
    return os.path.realpath(os.path.abspath(local_path(path)))
  scheme, rest = split_scheme(path)
  rest = posixpath.normpath("/" + rest).lstrip("/")
  return f"{_SAME_SCHEME.get(scheme, scheme)}://{rest}"


def same_location(a: str, b: str) -> bool:
  """True if `a` and `b` name one file (`location_key`; local files that
  exist also compare by device and inode, so hard links are one file)."""
  if location_key(a) == location_key(b):
    return True
  if is_url(a) or is_url(b):
    return False
  try:
    return os.path.samefile(local_path(a), local_path(b))
  except OSError:
    return False


def check_not_inputs(writes: Sequence[str], inputs: Sequence[Tuple[str, str]], flag: str,
                     output: str):
  """Refuses a run that would write over one of its own inputs.

  Checked before any work, whatever --overwrite says: replacing the text or
  the vocab a run reads is never what was meant.

  Args:
    writes: every path the run would write (files, indexes, metadata).
    inputs: (flag, path) of every file the run reads.
    flag, output: the output flag and its value, for the message.
  Raises:
    UserError: `--output_file=c.txt: is the input --input_file=c.txt; ...`,
      or `... would write d/vocab.txt, which is the input ...`.
  """
  for path in writes:
    for in_flag, source in inputs:
      if source and same_location(path, source):
        what = "is" if same_location(path, output) else f"would write {path}, which is"
        raise UserError(f"{flag}={output}: {what} the input {in_flag}={source}; a run never "
                        "replaces its own input, even with --overwrite: give another output")


# Top-level packages whose exceptions mean a storage service could not be used
# at all (credentials, connection, timeouts); a missing file stays an OSError.
_CLIENT_PACKAGES = ("botocore", "aiobotocore", "s3fs", "gcsfs", "google", "aiohttp",
                    "fsspec", "urllib3", "requests", "pyarrow")


def is_unreachable_error(e: BaseException) -> bool:
  """True for an exception a storage client raised about its service
  (no credentials, no connection), not about one file."""
  return any(c.__module__.split(".")[0] in _CLIENT_PACKAGES for c in type(e).__mro__)


@contextlib.contextmanager
def reaching(path: str):
  """Turns a storage client's failure to reach its service, inside the block,
  into one UserError: `PATH: cannot reach the storage: WHY`."""
  try:
    yield
  except UserError:
    raise
  except Exception as e:  # pylint: disable=broad-except
    if not is_unreachable_error(e):
      raise
    raise UserError(f"{path}: cannot reach the storage: {e}") from e


# -- I/O

def exists(path: str) -> bool:
  if is_url(path):
    with reaching(path):
      return filesystem(path).exists(path)
  return os.path.exists(local_path(path))


def is_dir(path: str) -> bool:
  if is_url(path):
    with reaching(path):
      return filesystem(path).isdir(path)
  return os.path.isdir(local_path(path))


def has_magic(pattern: str) -> bool:
  return _glob.has_magic(pattern)


def glob(pattern: str) -> List[str]:
  """Paths matching `pattern`, sorted (URLs stay URLs of the same scheme)."""
  if is_url(pattern):
    with reaching(pattern):
      found = filesystem(pattern).glob(pattern)
    return sorted(_url(pattern, p) for p in found
                  if fnmatch.fnmatchcase(basename(_url(pattern, p)), basename(pattern)))
  return sorted(_glob.glob(local_path(pattern)))


def list_dir(folder: str) -> List[str]:
  """Names in `folder`, sorted ([] if it is not a folder)."""
  if is_url(folder):
    with reaching(folder):
      fs = filesystem(folder)
      try:
        return sorted(basename(_url(folder, p)) for p in fs.ls(folder, detail=False))
      except (OSError, FileNotFoundError) as e:
        if is_unreachable_error(e):
          raise
        return []
  try:
    return sorted(os.listdir(local_path(folder)))
  except OSError:
    return []


def size(path: str) -> int:
  if is_url(path):
    with reaching(path):
      return int(filesystem(path).size(path))
  return os.path.getsize(local_path(path))


def open_read(path: str, block_size: Optional[int] = None):
  """A binary file object for reading `path` (local or URL; `block_size`:
  a URL's read-ahead, else its filesystem's: s3fs's is 50 MiB).

  Raises:
    UserError: the file cannot be opened (named in the message).
  """
  with reaching(path):
    try:
      if is_url(path):
        if block_size:
          return filesystem(path).open(path, "rb", block_size=block_size)
        return filesystem(path).open(path, "rb")
      return open(local_path(path), "rb")
    except (OSError, FileNotFoundError) as e:
      if is_unreachable_error(e):
        raise
      raise UserError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}") from e


def read_range(path: str, start: int, end: int) -> bytes:
  """Bytes [start, end) of `path`, fewer where the file ends first (a URL:
  one ranged GET, no HEAD; `start` must be inside the file).

  Raises:
    UserError: the file cannot be read (named in the message).
  """
  if not is_url(path):
    with open_read(path) as f:
      return os.pread(f.fileno(), end - start, start)
  with reaching(path):
    try:
      return filesystem(path).cat_file(path, start=start, end=end)
    except (OSError, FileNotFoundError) as e:
      if is_unreachable_error(e):
        raise
      raise UserError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}") from e


def read_bytes(path: str) -> bytes:
  """The whole file at `path` (a URL: one GET; on S3 without the HEAD that
  s3fs's whole-object read sends first to split a large object into
  concurrent ranged reads).

  Raises:
    UserError: the file cannot be read (named in the message).
  """
  if not is_url(path):
    with open_read(path) as f:
      return f.read()
  with reaching(path):
    try:
      fs = filesystem(path)
      if split_scheme(path)[0] in ("s3", "s3a"):
        return fs.cat_file(path, max_concurrency=1)
      return fs.cat_file(path)
    except (OSError, FileNotFoundError) as e:
      if is_unreachable_error(e):
        raise
      raise UserError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}") from e


def read_bytes_if_any(path: str) -> Optional[bytes]:
  """`read_bytes`, or None where nothing is at `path` (one request on a URL)."""
  try:
    if not is_url(path):
      with open(local_path(path), "rb") as f:
        return f.read()
    with reaching(path):
      fs = filesystem(path)
      if split_scheme(path)[0] in ("s3", "s3a"):
        return fs.cat_file(path, max_concurrency=1)
      return fs.cat_file(path)
  except FileNotFoundError:
    return None
  except OSError as e:
    if is_unreachable_error(e):
      raise
    raise UserError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}") from e


# -- one-file outputs (a vocab, a model): checked first, written whole

def _nearest_existing(path: str) -> str:
  """`path` or its nearest ancestor that exists (local paths)."""
  probe = os.path.abspath(path)
  while not os.path.exists(probe) and os.path.dirname(probe) != probe:
    probe = os.path.dirname(probe)
  return probe


def check_output_file(path: str, flag: str, *, overwrite: bool) -> str:
  """Fails at once (before any work) unless one file can be written at `path`.

  `path` is local, `file://` or a URL. A folder there, an existing file
  without `overwrite`, a parent that is a file or not writable, and an
  unusable or unreachable storage are one-line UserErrors naming `flag`.
  Missing parent folders are fine (`write_file` creates them).

  Returns:
    The path to write (`file://` as a plain local path).
  """
  path = check(path, flag)
  where = f"{flag}={path}"
  if is_url(path):
    check_reachable(path, flag)
    try:
      found, folder = exists(path), is_dir(path)
    except UserError:
      raise
    except Exception as e:  # pylint: disable=broad-except
      raise UserError(f"{where}: cannot reach the storage: {e}") from e
  else:
    found, folder = os.path.exists(path), os.path.isdir(path) or path.endswith(os.sep)
  if folder:
    raise UserError(f"{where}: is a folder, expected a file path")
  if found and not overwrite:
    raise UserError(f"{where}: exists; pass --overwrite to replace it")
  if not is_url(path):
    probe = _nearest_existing(os.path.dirname(os.path.abspath(path)))
    if not os.path.isdir(probe):
      raise UserError(f"{where}: cannot create its folder, {probe} is not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
      raise UserError(f"{where}: folder {probe} is not writable")
  return path


def write_file(path: str, data: bytes):
  """Writes a whole file: never a partial one at `path`.

  Local: missing parent folders are created, the bytes go to a temporary
  name that is renamed into place. URL: uploaded under a temporary name,
  its size checked, then moved (object stores have no atomic rename).

  Raises:
    UserError: the write or upload failed (named in the message).
  """
  if not is_url(path):
    path = local_path(path)
    try:
      os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    except OSError as e:
      raise UserError(f"cannot create the folder of {path}: {e.strerror}") from e
    with atomic_file.AtomicWriter(path) as writer:
      writer.write(data)
      writer.commit()
    return
  fs = filesystem(path)
  tmp = join(parent(path), f".{basename(path)}.tmp-{os.getpid()}")
  try:
    fs.pipe_file(tmp, data)
    check_size(fs, tmp, len(data))
    server_move(fs, tmp, path)
    check_size(fs, path, len(data))
  except UserError:
    raise
  except Exception as e:  # pylint: disable=broad-except
    raise UserError(f"cannot upload {path}: {e}") from e


def write_staged(path: str, data: bytes):
  """Writes a whole object that only this run reads, and only after this
  call returned (a unit's staged run, a lane): on a URL one upload under
  `path` itself (an object store's put leaves the whole object or none, so
  no temporary name, move or size requests: 1 request, not 5), on a local
  path as `write_file`.

  Raises:
    UserError: the write or upload failed (named in the message).
  """
  if not is_url(path):
    write_file(path, data)
    return
  try:
    with reaching(path):
      filesystem(path).pipe_file(path, data)
  except UserError:
    raise
  except Exception as e:  # pylint: disable=broad-except
    raise UserError(f"cannot upload {path}: {e}") from e


# -- writing in place (Beam workers: `textrecords.datasets.direct_output`)

# What a URL's writer buffers before it uploads a part: s3fs's default
# (50 MiB) held up to 50 MiB per object written (a segment writes two).
WRITE_BLOCK_BYTES = 8 << 20


def open_write(path: str, block_bytes: Optional[int] = None):
  """A binary file object writing `path` (local: parent folders made; URL:
  the object appears, whole, when the file is closed; parts of
  `block_bytes`, default `WRITE_BLOCK_BYTES`, uploaded as they fill: an
  object of at most that many bytes is one request)."""
  try:
    if is_url(path):
      return filesystem(path).open(path, "wb", block_size=block_bytes or WRITE_BLOCK_BYTES)
    path = local_path(path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    return open(path, "wb")
  except (OSError, FileNotFoundError) as e:
    raise UserError(f"cannot write {path}: {getattr(e, 'strerror', None) or e}") from e


S3_MIN_PART = 5 << 20  # an S3 multipart upload's parts, but the last, have at least this
GCS_COMPOSE_MAX = 32  # objects one GCS compose request joins


def concatenate(sources: Sequence[str], dst: str):
  """Writes `dst` (a new file or object) as the bytes of `sources` end to
  end, without them passing through this process where the store allows:
  local paths: `os.copy_file_range` (a streamed copy where the kernel
  refuses); s3://: a multipart upload of UploadPartCopy parts (when every
  source but the last has at least `S3_MIN_PART` bytes); gs://: compose
  (`GCS_COMPOSE_MAX` objects a request, in rounds); other stores, and S3
  with smaller sources: a streamed copy. The sources stay.

  Raises:
    UserError: a source is missing or the write failed (`dst` not left).
  """
  try:
    if not is_url(dst):
      _concatenate_local([local_path(p) for p in sources], local_path(dst))
      return
    fs = filesystem(dst)
    scheme = split_scheme(dst)[0]
    with reaching(dst):
      sizes = [int(fs.size(p)) for p in sources]
      keys = [fs._strip_protocol(p) for p in sources]  # pylint: disable=protected-access
      if scheme == "s3" and sources and all(n >= S3_MIN_PART for n in sizes[:-1]):
        fs.merge(dst, keys)
      elif scheme == "gs" and sources:
        _compose(fs, keys, dst)
      else:
        with fs.open(dst, "wb") as out:
          for p in sources:
            with fs.open(p, "rb") as f:
              shutil.copyfileobj(f, out, 1 << 22)
      check_size(fs, dst, sum(sizes))
  except UserError:
    remove(dst)
    raise
  except (OSError, FileNotFoundError) as e:
    remove(dst)
    raise UserError(f"cannot write {dst}: {getattr(e, 'strerror', None) or e}") from e
  except Exception as e:  # pylint: disable=broad-except
    remove(dst)
    raise UserError(f"cannot write {dst}: {e}") from e


def _concatenate_local(sources: Sequence[str], dst: str):
  """`concatenate` on local paths: copied in the kernel where it can."""
  os.makedirs(os.path.dirname(dst) or ".", exist_ok=True)
  with open(dst, "wb") as out:
    offset = 0
    for p in sources:
      with open(p, "rb") as src:
        size = os.fstat(src.fileno()).st_size
        _copy_range(src.fileno(), out.fileno(), size, offset)
        offset += size
    out.flush()
    os.fsync(out.fileno())


def _copy_range(src: int, dst: int, size: int, offset: int) -> None:
  """The first `size` bytes of file descriptor `src` written to `dst` at
  byte `offset`: `os.copy_file_range` (in the kernel), else (no such call,
  or not across these filesystems) `os.pread` / `os.pwrite` 4 MiB at a time."""
  done = 0
  try:
    while done < size:
      n = os.copy_file_range(src, dst, size - done, done, offset + done)
      if n <= 0:
        break
      done += n
  except (AttributeError, OSError):
    pass
  while done < size:
    data = os.pread(src, min(size - done, 1 << 22), done)
    if not data:
      raise OSError(f"{size - done} bytes short")
    view = memoryview(data)
    while view:
      n = os.pwrite(dst, view, offset + done)
      view, done = view[n:], done + n


def create_empty(path: str) -> None:
  """Creates the local file `path` empty (folders made), replacing any."""
  try:
    path = local_path(path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    open(path, "wb").close()
  except OSError as e:
    raise UserError(f"cannot write {path}: {e.strerror or e}") from e


def link_local(src: str, dst: str) -> bool:
  """Gives the local file `src` the second name `dst` (a hard link: no
  byte copied); False where the filesystem refuses (`dst` not made)."""
  try:
    os.link(local_path(src), local_path(dst))
    return True
  except (AttributeError, OSError):
    return False


def check_local_size(path: str, want: int) -> None:
  """Fsyncs the local file `path` and checks it holds `want` bytes.

  Raises:
    UserError: it is missing or of another size.
  """
  path = local_path(path)
  try:
    fd = os.open(path, os.O_RDONLY)
  except OSError as e:
    raise UserError(f"{path}: cannot read: {e.strerror or e}") from e
  try:
    os.fsync(fd)
    have = os.fstat(fd).st_size
  finally:
    os.close(fd)
  if have != want:
    raise UserError(f"{path}: {have} bytes, expected {want}; rerun with --resume")


def place_local(src: str, dst: str, offset: int, size: int) -> int:
  """Copies the local file `src`, which must hold `size` bytes, into the
  existing local file `dst` at byte `offset` (`os.copy_file_range`, else
  pread / pwrite; other bytes of `dst` untouched), then fsyncs `dst`;
  returns the bytes copied.

  Raises:
    UserError: `src` missing or not `size` bytes, `dst` missing, or the write failed.
  """
  src, dst = local_path(src), local_path(dst)
  try:
    fd = os.open(src, os.O_RDONLY)
  except OSError as e:
    raise UserError(f"{src}: cannot read: {e.strerror or e}") from e
  try:
    have = os.fstat(fd).st_size
    if have != size:
      raise UserError(f"{src}: {have} bytes, expected {size}")
    try:
      out = os.open(dst, os.O_WRONLY)  # (never made here: a removed temp stays removed)
    except OSError as e:
      raise UserError(f"{dst}: cannot write: {e.strerror or e}") from e
    try:
      _copy_range(fd, out, size, offset)
      os.fsync(out)
    except OSError as e:
      raise UserError(f"cannot write {dst}: {e.strerror or e}") from e
    finally:
      os.close(out)
  finally:
    os.close(fd)
  return size


def write_local_at(path: str, offset: int, chunks: Iterable[bytes]) -> int:
  """Writes `chunks` one after another into the existing local file `path`
  from byte `offset` on (other bytes untouched; the file is never made
  here: a removed temp stays removed), then fsyncs it; returns the bytes
  written.

  Raises:
    UserError: `path` missing, or the write failed.
  """
  path = local_path(path)
  try:
    out = os.open(path, os.O_WRONLY)
  except OSError as e:
    raise UserError(f"{path}: cannot write: {e.strerror or e}") from e
  done = 0
  try:
    for chunk in chunks:
      view = memoryview(chunk).cast("B")
      while view:
        n = os.pwrite(out, view, offset + done)
        view, done = view[n:], done + n
    os.fsync(out)
  except OSError as e:
    raise UserError(f"cannot write {path}: {e.strerror or e}") from e
  finally:
    os.close(out)
  return done


def _compose(fs, sources: List[str], dst: str):
  """GCS compose of any number of objects: `GCS_COMPOSE_MAX` at a time
  into temporary objects beside `dst`, then those, until one is left."""
  rounds, temps = 0, []
  try:
    while len(sources) > GCS_COMPOSE_MAX:
      joined = []
      for i in range(0, len(sources), GCS_COMPOSE_MAX):
        tmp = f"{dst}.compose-{rounds}-{i // GCS_COMPOSE_MAX}"
        fs.merge(tmp, sources[i:i + GCS_COMPOSE_MAX])
        joined.append(tmp)
      temps += joined
      sources, rounds = joined, rounds + 1
    fs.merge(dst, sources)
  finally:
    for tmp in temps:
      fs.rm(tmp)


def move(src: str, dst: str):
  """Renames `src` to `dst` (object stores: server-side copy, then delete)."""
  if is_url(src):
    server_move(filesystem(src), src, dst)
  else:
    os.replace(local_path(src), local_path(dst))


def forget_listings(path: str):
  """Drops this process's cached listings of `path`'s store (fsspec caches
  them): files other processes wrote (Beam workers) become visible."""
  if is_url(path):
    filesystem(path).invalidate_cache()


def remove(path: str):
  """Deletes a file; a missing one is fine."""
  try:
    if is_url(path):
      filesystem(path).rm(path)
    else:
      os.remove(local_path(path))
  except (OSError, FileNotFoundError):
    pass


def remove_tree(folder: str):
  """Deletes a folder (URL: every object under the prefix); a missing one is fine."""
  if not is_url(folder):
    shutil.rmtree(local_path(folder), ignore_errors=True)
    return
  fs = filesystem(folder)
  try:
    fs.rm(folder, recursive=True)
  except (OSError, FileNotFoundError):
    pass


# -- outputs to URLs: where they are staged (`textrecords.datasets.publish` stages and uploads)

STAGING_ENV = "TEXTRECORDS_STAGING_DIR"


def staging_root() -> str:
  """Local folder for staged URL outputs ($TEXTRECORDS_STAGING_DIR or ~/.cache)."""
  return os.environ.get(STAGING_ENV) or os.path.join(
      os.path.expanduser("~"), ".cache", "textrecords", "staging")


def absolute(path: str) -> str:
  """A location as fingerprints record it: a URL as given, a local path
  absolute, and a path in a staging folder as the URL it stands for (so a
  staged run and a direct one record the same)."""
  if is_url(path):
    return path
  return origin(os.path.abspath(local_path(path)))


def origin(path: str) -> str:
  """The URL a path in a URL output's staging folder stands for; any other
  path unchanged (metadata names what the user gave, not the staging copy)."""
  if is_url(path):
    return path
  root = os.path.abspath(staging_root()) + os.sep
  full = os.path.abspath(local_path(path))
  if not full.startswith(root):
    return path
  folder = os.path.join(root, full[len(root):].split(os.sep)[0])
  try:
    with open(os.path.join(folder, ORIGIN), encoding="utf-8") as f:
      url = f.read()
  except OSError:
    return path
  return join(parent(url), os.path.relpath(full, folder).replace(os.sep, "/"))


ORIGIN = ".url"  # in a staging folder: the URL it stands for


def server_move(fs, src: str, dst: str):
  """Server-side copy, then delete (what S3's and GCS's moves are; gcsfs's
  own mv first tries GCS's moveTo, which emulators lack)."""
  fs.copy(src, dst)
  fs.rm(src)


def check_size(fs, url: str, want: int):
  """Raises UserError unless the object at `url` has `want` bytes (an upload's check)."""
  got = int(fs.size(url))
  if got != want:
    raise UserError(f"{url}: uploaded {got} bytes of {want}; rerun to retry")


def stat(path: str) -> Tuple[int, object]:
  """(size, version) of an input file for run fingerprints.

  The version is the mtime in ns for a local file, and for a URL the
  store's ETag / modification time / creation time (what it has).
  """
  if not is_url(path):
    st = os.stat(local_path(path))
    return st.st_size, st.st_mtime_ns
  with reaching(path):
    info = filesystem(path).info(path)
  version = next((info[k] for k in ("ETag", "etag", "md5Hash", "mtime", "LastModified",
                                    "updated", "created") if info.get(k) is not None), "")
  return int(info["size"]), str(version)


STREAM_BLOCK_BYTES = 8 << 20  # a URL's read-ahead where a whole object is streamed:
# s3fs's default (50 MiB) held 50 MiB and more in the launcher hashing an input


def sha256(path: str) -> str:
  """The sha256 hex digest of a local file or URL (streamed)."""
  with reaching(path), open_read(path, block_size=STREAM_BLOCK_BYTES) as f:
    return hashing.stream_sha256(f)
