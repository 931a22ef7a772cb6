"""The metadata sidecar: written last, it marks a dataset as complete.

It records the package, schema, flags, counts, vocab hashes, version and every
file with its size, record count and sha256. Parsers read it first and refuse
missing files, size or checksum mismatches, and other packages' schemas.
"""

import json
import os
from typing import List, Optional

from textrecords import __version__
from textrecords import tfrecord
from textrecords.errors import UserError

FORMAT = "textrecords/1"


def dumps(meta: dict) -> bytes:
  return (json.dumps(meta, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def base_meta(package: str) -> dict:
  return {"format": FORMAT, "package": package, "version": __version__}


def write(path: str, meta: dict):
  """Writes the JSON atomically (temp name, fsync, rename)."""
  w = tfrecord.AtomicWriter(path)
  w.write(dumps(meta))
  w.commit()


def read(path: str, package: Optional[str] = None) -> dict:
  """Reads and checks a metadata file.

  Raises:
    UserError: missing (dataset incomplete or not ours), unreadable, not
      textrecords metadata, or written by another package than `package`.
  """
  if not os.path.exists(path):
    raise UserError(f"{path} not found: the dataset is incomplete (a run that did not "
                    "finish) or was not written by textrecords")
  try:
    with open(path, "rb") as f:
      meta = json.loads(f.read().decode("utf-8"))
  except (OSError, ValueError) as e:
    raise UserError(f"{path}: unreadable metadata ({e})") from e
  if not isinstance(meta, dict) or meta.get("format") != FORMAT:
    raise UserError(f"{path}: not a textrecords metadata file")
  if package is not None and meta.get("package") != package:
    raise UserError(f"{path}: records were written by {meta.get('package')!r}, "
                    f"not {package!r}; use {meta.get('package')}.make_dataset")
  return meta


VERIFY_MODES = ("checksum", "size", "none")


_CHECKED: dict = {}  # (path, size, mtime_ns, sha256) of files whose hash matched


def _sha256_matches(path: str, expected: str) -> bool:
  """sha256 check, remembered per process while the file is unchanged."""
  st = os.stat(path)
  key = (os.path.abspath(path), st.st_size, st.st_mtime_ns, expected)
  if key not in _CHECKED:
    if tfrecord.file_sha256(path) != expected:
      return False
    _CHECKED[key] = True
  return True


def verified_files(meta: dict, meta_path: str, names: List[str],
                   verify: str = "checksum", skip_corrupt: bool = False,
                   log=print, require_some: bool = True) -> List[str]:
  """Full paths of `names` (files listed in meta) after checking them.

  Args:
    verify: "checksum" checks size and sha256, "size" only the size,
      "none" only existence.
    skip_corrupt: drop (and log) bad files instead of raising.
    require_some: raise if no file is left.

  Raises:
    UserError: a missing, resized or changed file (unless skip_corrupt), or
      no file left.
  """
  if verify not in VERIFY_MODES:
    raise ValueError(f"verify={verify!r}: must be one of {VERIFY_MODES}")
  by_name = {f["name"]: f for f in meta.get("files", [])}
  base = os.path.dirname(os.path.abspath(meta_path))
  good = []
  for name in names:
    info = by_name.get(name)
    path = os.path.join(base, name)
    problem = None
    if info is None:
      problem = f"{path} is not listed in {meta_path}"
    elif not os.path.exists(path):
      problem = f"{path} is missing (listed in {meta_path})"
    elif verify != "none" and os.path.getsize(path) != info["bytes"]:
      problem = (f"{path} has {os.path.getsize(path)} bytes, metadata says "
                 f"{info['bytes']}: truncated or replaced")
    elif verify == "checksum" and not _sha256_matches(path, info["sha256"]):
      problem = f"{path}: sha256 differs from {meta_path}: the file is corrupt or was changed"
    if problem is None:
      good.append(path)
    elif skip_corrupt:
      log(f"skipping corrupt file: {problem}")
    else:
      raise UserError(problem)
  if not good and require_some:
    raise UserError(f"{meta_path}: no readable record files left")
  return good
