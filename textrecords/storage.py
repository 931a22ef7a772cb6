"""Where bytes live: local paths and storage URLs (`gs://`, `s3://`, `memory://`, ...).

A path is either local (`out/t.tfrecord`, `/data/x.txt`, `file:///data/x.txt`)
or a URL `SCHEME://...`, which is never a relative local path. URLs go
through fsspec (extra `storage`), with gcsfs for `gs://` (extra `gcs`), s3fs
for `s3://` (extra `s3`) and pyarrow for `hdfs://` (extra `hdfs`). A missing
package or an unknown scheme is a one-line UserError naming what to install;
callers check before writing anything.

Generators never write to a URL directly: `staged_output` gives them a local
staging folder, and `publish` uploads the finished dataset there, data files
first and the metadata strictly last (object stores have no atomic rename).

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

import dataclasses
import fnmatch
import glob as _glob
import hashlib
import importlib
import json
import logging
import os
import re
import shutil
import socket
import urllib.parse
from typing import List, Optional, Tuple

from textrecords.errors import UserError

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


# -- I/O

def exists(path: str) -> bool:
  if is_url(path):
    return filesystem(path).exists(path)
  return os.path.exists(local_path(path))


def is_dir(path: str) -> bool:
  if is_url(path):
    return filesystem(path).isdir(path)
  return os.path.isdir(local_path(path))


def has_magic(pattern: str) -> bool:
  return _glob.has_magic(pattern)


def glob(pattern: str) -> List[str]:
  """Paths matching `pattern`, sorted (URLs stay URLs of the same scheme)."""
  if is_url(pattern):
    fs = filesystem(pattern)
    return sorted(_url(pattern, p) for p in fs.glob(pattern)
                  if fnmatch.fnmatchcase(basename(_url(pattern, p)), basename(pattern)))
  return sorted(_glob.glob(local_path(pattern)))


def list_dir(folder: str) -> List[str]:
  """Names in `folder`, sorted ([] if it is not a folder)."""
  if is_url(folder):
    fs = filesystem(folder)
    try:
      return sorted(basename(_url(folder, p)) for p in fs.ls(folder, detail=False))
    except (OSError, FileNotFoundError):
      return []
  try:
    return sorted(os.listdir(local_path(folder)))
  except OSError:
    return []


def size(path: str) -> int:
  if is_url(path):
    return int(filesystem(path).size(path))
  return os.path.getsize(local_path(path))


def open_read(path: str):
  """A binary file object for reading `path` (local or URL).

  Raises:
    UserError: the file cannot be opened (named in the message).
  """
  try:
    if is_url(path):
      return filesystem(path).open(path, "rb")
    return open(local_path(path), "rb")
  except (OSError, FileNotFoundError) as e:
    raise UserError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}") from e


def read_bytes(path: str) -> bytes:
  with open_read(path) as f:
    return f.read()


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
    from textrecords import tfrecord  # pylint: disable=import-outside-toplevel
    path = local_path(path)
    try:
      os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    except OSError as e:
      raise UserError(f"cannot create the folder of {path}: {e.strerror}") from e
    with tfrecord.AtomicWriter(path) as writer:
      writer.write(data)
      writer.commit()
    return
  fs = filesystem(path)
  tmp = join(parent(path), f".{basename(path)}.tmp-{os.getpid()}")
  try:
    fs.pipe_file(tmp, data)
    _check_size(fs, tmp, len(data))
    _move(fs, tmp, path)
    _check_size(fs, path, len(data))
  except UserError:
    raise
  except Exception as e:  # pylint: disable=broad-except
    raise UserError(f"cannot upload {path}: {e}") from e


# -- writing in place (Beam workers: `textrecords.direct_output`)

def open_write(path: str):
  """A binary file object writing `path` (local: parent folders made; URL:
  the object appears, whole, when the file is closed)."""
  try:
    if is_url(path):
      return filesystem(path).open(path, "wb")
    path = local_path(path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    return open(path, "wb")
  except (OSError, FileNotFoundError) as e:
    raise UserError(f"cannot write {path}: {getattr(e, 'strerror', None) or e}") from e


def move(src: str, dst: str):
  """Renames `src` to `dst` (object stores: server-side copy, then delete)."""
  if is_url(src):
    _move(filesystem(src), src, dst)
  else:
    os.replace(local_path(src), local_path(dst))


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


# -- outputs to URLs: local staging, then publish

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
  path = os.path.abspath(local_path(path))
  root = os.path.abspath(staging_root()) + os.sep
  if path.startswith(root):
    folder = os.path.join(root, path[len(root):].split(os.sep)[0])
    try:
      with open(os.path.join(folder, _ORIGIN), encoding="utf-8") as f:
        origin = f.read()
    except OSError:
      return path
    return join(parent(origin), os.path.relpath(path, folder).replace(os.sep, "/"))
  return path


_ORIGIN = ".url"  # in a staging folder: the URL it stands for


def _staging_folder(url: str) -> str:
  key = hashlib.sha256(strip_sep(url).encode("utf-8")).hexdigest()[:16]
  return os.path.join(staging_root(), key)


def staged_output(url: str, lay, *, overwrite: bool, resume: bool, flag: str) -> str:
  """The local location a generator writes instead of output URL `url`.

  Checks the URL's storage and its existing metadata first (nothing is
  written when that fails). The local folder depends only on the URL, so a
  killed run resumes from its staged files with --resume.

  With --resume, a staged dataset whose upload was killed is reopened
  (`dataset_writer.reopen`: its files are kept if the inputs and flags are
  the same, then uploaded again), and a complete output at the URL (without
  --overwrite) has its metadata copied into the staging folder, so the
  generator decides as for a local output: same inputs and flags -> already
  complete (nothing is uploaded), others -> refused.

  Args:
    url: the output location given (folder or file URL).
    lay: `DatasetLayout.for_dir` or `.for_file` (where the metadata goes).
    overwrite, resume: the run's flags (an existing complete URL output
      needs one of them, as for a local one).
    flag: the flag name for messages.
  Returns:
    The local path to give the generator (same base name as the URL).
  """
  check(url, flag)
  check_reachable(url, flag)
  meta_url = lay(url).meta_path
  try:
    present = exists(meta_url)
  except UserError:
    raise
  except Exception as e:  # pylint: disable=broad-except
    raise UserError(f"{flag}={url}: cannot reach the storage: {e}") from e
  if present and not (overwrite or resume):
    raise UserError(f"{meta_url} exists (a complete earlier output); "
                    "pass --overwrite to replace it")
  folder = _staging_folder(url)
  if not resume:  # staged files of an earlier run are only kept for --resume
    shutil.rmtree(folder, ignore_errors=True)
  os.makedirs(folder, exist_ok=True)
  with open(os.path.join(folder, _ORIGIN), "w", encoding="utf-8") as f:
    f.write(strip_sep(url))
  local = os.path.join(folder, basename(url))
  local_meta = lay(local).meta_path
  if resume and os.path.exists(local_meta):
    from textrecords import dataset_writer  # pylint: disable=import-outside-toplevel
    dataset_writer.reopen(local_meta)  # a staged dataset whose upload was killed
  if present and resume and not overwrite:
    os.makedirs(os.path.dirname(local_meta), exist_ok=True)
    tmp = os.path.join(os.path.dirname(local_meta),
                       f".{os.path.basename(local_meta)}.download-{os.getpid()}")
    with open(tmp, "wb") as f:
      f.write(read_bytes(meta_url))
    os.replace(tmp, local_meta)
  return local


def pending_name(meta_name: str) -> str:
  """The hidden record of names a publish may leave behind if it is killed."""
  return f".{meta_name}.publishing"


def _is_temp_of(name: str, names) -> bool:
  """True for `.NAME.tmp-...` of one of `names` (an upload's temporary name)."""
  if not name.startswith(".") or ".tmp-" not in name:
    return False
  return name[1:name.rindex(".tmp-")] in names


def listed_names(data: bytes) -> set:
  """Top-level file names a metadata (or publishing record) lists."""
  try:
    doc = json.loads(data.decode("utf-8"))
    names = {f["name"] if isinstance(f, dict) else f for f in doc.get("files", [])}
  except (ValueError, AttributeError, KeyError, TypeError):
    return set()
  return {n for n in names if isinstance(n, str) and n and "/" not in n
          and not n.startswith(".")}


def publish(local_meta: str, meta_url: str, *, overwrite: bool = True) -> List[str]:
  """Uploads a finished local dataset next to `meta_url`, metadata last.

  Order (each step survives a kill at any point; a rerun finishes it):
    1. temporary names left by a killed upload of this dataset are removed;
    2. a hidden record `.META.publishing` lists the names of the earlier
       dataset, of an earlier killed publish and of this one;
    3. every data file is uploaded under a temporary name and its size
       checked: an earlier complete dataset at the URL is untouched so far;
    4. the earlier metadata is removed (from here on, no metadata);
    5. the uploads are moved to their names (sizes checked again);
    6. files the earlier metadata or the record list that this dataset does
       not have are deleted (nothing else in the folder is touched);
    7. the metadata is uploaded (temporary name, then moved), strictly last;
    8. the record is deleted.
  Without `overwrite`, a URL whose metadata already has the staged
  metadata's bytes is complete: nothing is uploaded (steps 1 and 8 only).

  Returns:
    The URLs written, metadata last.
  Raises:
    UserError: an upload failed or a size differs.
  """
  from textrecords import layout  # pylint: disable=import-outside-toplevel
  fs = filesystem(meta_url)
  local_dir = os.path.dirname(local_meta)
  url_dir = parent(meta_url)
  meta_name = basename(meta_url)
  with open(local_meta, "rb") as f:
    meta_bytes = f.read()
  meta = json.loads(meta_bytes.decode("utf-8"))
  listed = {f["name"]: f.get("bytes") for f in meta.get("files", []) if isinstance(f, dict)}
  names = []
  for root, dirs, files in os.walk(local_dir):
    dirs[:] = sorted(d for d in dirs if not d.startswith("."))
    for n in sorted(files):
      rel = os.path.relpath(os.path.join(root, n), local_dir).replace(os.sep, "/")
      if not n.startswith(".") and not layout.is_metadata_name(n):
        names.append(rel)
  record_url = join(url_dir, pending_name(meta_name))
  written = []
  try:
    present = set(list_dir(url_dir))
    old_meta = fs.cat_file(meta_url) if meta_name in present else None
    pending = (listed_names(fs.cat_file(record_url)) if pending_name(meta_name) in present
               else set())
    earlier = pending | (listed_names(old_meta) if old_meta is not None else set())
    ours = set(names) | earlier | {meta_name}
    for n in sorted(present):  # 1
      if _is_temp_of(n, ours):
        fs.rm(join(url_dir, n))
    if old_meta == meta_bytes and not overwrite:
      if pending_name(meta_name) in present:
        fs.rm(record_url)  # 8
      return written
    missing = sorted(set(listed) - set(names))
    if missing:
      raise UserError(f"{local_meta}: staged dataset lacks {missing[0]}; "
                      "rerun with --overwrite")
    record = {"files": sorted(earlier | set(names))}  # 2
    fs.pipe_file(record_url, json.dumps(record, sort_keys=True).encode("utf-8"))
    tag = f"{os.getpid()}"
    uploads = []
    for rel in names:  # 3
      src = os.path.join(local_dir, *rel.split("/"))
      want = os.path.getsize(src)
      if rel in listed and listed[rel] is not None and listed[rel] != want:
        raise UserError(f"{src}: {want} bytes, its metadata says {listed[rel]}")
      dst = join(url_dir, rel)
      tmp = join(parent(dst), f".{basename(dst)}.tmp-{tag}")
      fs.put_file(src, tmp)
      _check_size(fs, tmp, want)
      uploads.append((tmp, dst, want))
    if old_meta is not None:  # 4
      fs.rm(meta_url)
    for tmp, dst, want in uploads:  # 5
      _move(fs, tmp, dst)
      _check_size(fs, dst, want)
      written.append(dst)
    for n in sorted(earlier - set(names) - {meta_name}):  # 6
      if fs.exists(join(url_dir, n)):
        fs.rm(join(url_dir, n))
    tmp = join(url_dir, f".{meta_name}.tmp-{tag}")  # 7
    fs.put_file(local_meta, tmp)
    _move(fs, tmp, meta_url)
    _check_size(fs, meta_url, len(meta_bytes))
    written.append(meta_url)
    fs.rm(record_url)  # 8
  except UserError:
    raise
  except Exception as e:  # pylint: disable=broad-except
    raise UserError(f"cannot upload to {url_dir}: {e}") from e
  return written


def _move(fs, src: str, dst: str):
  """Server-side copy, then delete (what S3's and GCS's moves are; gcsfs's
  own mv first tries GCS's moveTo, which emulators lack)."""
  fs.copy(src, dst)
  fs.rm(src)


def _check_size(fs, url: str, want: int):
  got = int(fs.size(url))
  if got != want:
    raise UserError(f"{url}: uploaded {got} bytes of {want}; rerun to retry")


def remove_staging(local_location: str):
  """Deletes the staging folder of one output (after a successful publish)."""
  folder = os.path.dirname(local_location)
  if os.path.dirname(folder) == staging_root().rstrip(os.sep):
    shutil.rmtree(folder, ignore_errors=True)


class StagedOutputs:
  """Output locations of one run, URLs replaced by local staging paths.

  Usage (the same in every generator):
    staged = StagedOutputs(["s3://b/t.tfrecord"], folder=False,
                           overwrite=False, resume=False, flag="--output_file")
    run_generator(staged.local)   # local paths, URLs' stand-ins
    staged.publish()              # uploads, metadata last; drops staging

  Args:
    locations: what the user gave (local paths, file:// or URLs).
    folder: True for folder outputs (`DIR/meta.json`), False for file
      outputs (`FILE.meta.json`).
  """

  def __init__(self, locations, *, folder: bool, overwrite: bool, resume: bool,
               flag: str):
    from textrecords import layout  # pylint: disable=import-outside-toplevel
    lay = layout.DatasetLayout.for_dir if folder else layout.DatasetLayout.for_file
    self._pairs = []  # (local location, URL, layout) of URL outputs
    self._overwrite = overwrite
    self.local = []
    for loc in locations:
      loc = check(loc, flag)
      if is_url(loc):
        local = staged_output(loc, lay, overwrite=overwrite, resume=resume, flag=flag)
        self._pairs.append((local, loc, lay))
        self.local.append(local)
      else:
        self.local.append(loc)

  def publish(self) -> List[str]:
    """Uploads every staged output (metadata last); returns the URLs written."""
    written = []
    for local, url, lay in self._pairs:
      written += publish(lay(local).meta_path, lay(url).meta_path, overwrite=self._overwrite)
      remove_staging(local)
    return written

  def url_message(self, message: str) -> str:
    """`message` with staging paths replaced by the URLs they stand for."""
    for local, url, lay in self._pairs:
      message = message.replace(lay(local).root, lay(url).root)
    return message


def run_staged(config, field: str, run, *, folder: bool, flag: str):
  """Runs generator `run(config)` with URL outputs staged locally, then publishes.

  `config.<field>` is one location (str) or a tuple of them; the config must
  have `overwrite` and `resume`. Local outputs pass through unchanged.
  Errors that name a staging path name the URL instead.
  """
  locs = getattr(config, field)
  single = isinstance(locs, str)
  staged = StagedOutputs([locs] if single else list(locs), folder=folder,
                         overwrite=config.overwrite, resume=config.resume, flag=flag)
  local = staged.local[0] if single else tuple(staged.local)
  try:
    result = run(dataclasses.replace(config, **{field: local}))
  except UserError as e:
    raise UserError(staged.url_message(str(e))) from e
  staged.publish()
  return result


def stat(path: str) -> Tuple[int, object]:
  """(size, version) of an input file for run fingerprints.

  The version is the mtime in ns for a local file, and for a URL the
  store's ETag / modification time / creation time (what it has).
  """
  if not is_url(path):
    st = os.stat(local_path(path))
    return st.st_size, st.st_mtime_ns
  info = filesystem(path).info(path)
  version = next((info[k] for k in ("ETag", "etag", "md5Hash", "mtime", "LastModified",
                                    "updated", "created") if info.get(k) is not None), "")
  return int(info["size"]), str(version)


def sha256(path: str) -> str:
  """The sha256 hex digest of a local file or URL (streamed)."""
  from textrecords import hashing  # pylint: disable=import-outside-toplevel
  with open_read(path) as f:
    return hashing.stream_sha256(f)
