"""Outputs to storage URLs with --engine=local: staged in a local folder, then published.

A generator run locally never writes to a URL directly: `staged_output`
gives it a local staging folder (`storage.staging_root`, one per URL, so a
killed run resumes with --resume), and `publish` uploads the finished
dataset there, data files first and the metadata strictly last (object
stores have no atomic rename); `run_staged` does both around a run. Beam's
workers write URLs in place instead (`textrecords.datasets.direct_output`).
"""

import dataclasses
import hashlib
import json
import os
import shutil
from typing import List, Optional, Tuple

from textrecords.datasets import dataset_writer
from textrecords.datasets import layout
from textrecords.datasets import metadata
from textrecords.files import storage
from textrecords.errors import UserError


def _staging_folder(url: str) -> str:
  key = hashlib.sha256(storage.strip_sep(url).encode("utf-8")).hexdigest()[:16]
  return os.path.join(storage.staging_root(), key)


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
  storage.check(url, flag)
  storage.check_reachable(url, flag)
  meta_url = lay(url).meta_path
  try:
    present = storage.exists(meta_url)
  except UserError:
    raise
  except Exception as e:  # pylint: disable=broad-except
    raise UserError(f"{flag}={url}: cannot reach the storage: {e}") from e
  if present and not overwrite:
    refusal = metadata.existing_output_error(meta_url, resume)
    if refusal is not None:
      raise refusal
  folder = _staging_folder(url)
  if not resume:  # staged files of an earlier run are only kept for --resume
    shutil.rmtree(folder, ignore_errors=True)
  os.makedirs(folder, exist_ok=True)
  with open(os.path.join(folder, storage.ORIGIN), "w", encoding="utf-8") as f:
    f.write(storage.strip_sep(url))
  local = os.path.join(folder, storage.basename(url))
  local_meta = lay(local).meta_path
  if resume and os.path.exists(local_meta):
    dataset_writer.reopen(local_meta)  # a staged dataset whose upload was killed
  if present and resume and not overwrite:
    os.makedirs(os.path.dirname(local_meta), exist_ok=True)
    tmp = os.path.join(os.path.dirname(local_meta),
                       f".{os.path.basename(local_meta)}.download-{os.getpid()}")
    with open(tmp, "wb") as f:
      f.write(storage.read_bytes(meta_url))
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
  fs = storage.filesystem(meta_url)
  local_dir = os.path.dirname(local_meta)
  url_dir = storage.parent(meta_url)
  meta_name = storage.basename(meta_url)
  with open(local_meta, "rb") as f:
    meta_bytes = f.read()
  meta = json.loads(meta_bytes.decode("utf-8"))
  listed = {f["name"]: f.get("bytes") for f in meta.get("files", []) if isinstance(f, dict)}
  names = _staged_names(local_dir)
  record_url = storage.join(url_dir, pending_name(meta_name))
  try:
    present, old_meta, earlier = _earlier_state(fs, meta_url, record_url)
    _remove_temps(fs, url_dir, present, set(names) | earlier | {meta_name})  # 1
    if old_meta == meta_bytes and not overwrite:
      if pending_name(meta_name) in present:
        fs.rm(record_url)  # 8
      return []
    missing = sorted(set(listed) - set(names))
    if missing:
      raise UserError(f"{local_meta}: staged dataset lacks {missing[0]}; "
                      "rerun with --overwrite")
    record = {"files": sorted(earlier | set(names))}  # 2
    fs.pipe_file(record_url, json.dumps(record, sort_keys=True).encode("utf-8"))
    tag = str(os.getpid())
    uploads = _upload_files(fs, local_dir, url_dir, names, listed, tag)  # 3
    if old_meta is not None:  # 4
      fs.rm(meta_url)
    written = _move_into_place(fs, uploads)  # 5
    for n in sorted(earlier - set(names) - {meta_name}):  # 6
      if fs.exists(storage.join(url_dir, n)):
        fs.rm(storage.join(url_dir, n))
    written.append(_upload_metadata(fs, local_meta, meta_url, len(meta_bytes), tag))  # 7
    fs.rm(record_url)  # 8
  except UserError:
    raise
  except Exception as e:  # pylint: disable=broad-except
    raise UserError(f"cannot upload to {url_dir}: {e}") from e
  return written


def _earlier_state(fs, meta_url: str, record_url: str) -> Tuple[set, Optional[bytes], set]:
  """What is at the URL before this publish: (the names in its folder, the
  earlier metadata's bytes or None, the names the earlier metadata and an
  earlier killed publish's record list)."""
  present = set(storage.list_dir(storage.parent(meta_url)))
  old_meta = fs.cat_file(meta_url) if storage.basename(meta_url) in present else None
  pending = (listed_names(fs.cat_file(record_url)) if storage.basename(record_url) in present
             else set())
  return present, old_meta, pending | (listed_names(old_meta) if old_meta is not None else set())


def _remove_temps(fs, url_dir: str, present: set, ours: set):
  """Removes the temporary names a killed upload of `ours` left in `url_dir`."""
  for n in sorted(present):
    if _is_temp_of(n, ours):
      fs.rm(storage.join(url_dir, n))


def _move_into_place(fs, uploads: list) -> List[str]:
  """Moves each upload from its temporary name to its destination (size
  checked again); returns the destinations."""
  for tmp, dst, want in uploads:
    storage.server_move(fs, tmp, dst)
    storage.check_size(fs, dst, want)
  return [dst for _, dst, _ in uploads]


def _upload_metadata(fs, local_meta: str, meta_url: str, size: int, tag: str) -> str:
  """Uploads the metadata under a temporary name, moves it into place and
  checks its size; returns its URL."""
  tmp = storage.join(storage.parent(meta_url), f".{storage.basename(meta_url)}.tmp-{tag}")
  fs.put_file(local_meta, tmp)
  storage.server_move(fs, tmp, meta_url)
  storage.check_size(fs, meta_url, size)
  return meta_url


def _staged_names(local_dir: str) -> List[str]:
  """The staged dataset's data files ('/'-separated, relative to
  `local_dir`): every file but hidden ones and the metadata, sorted by folder."""
  names = []
  for root, dirs, files in os.walk(local_dir):
    dirs[:] = sorted(d for d in dirs if not d.startswith("."))
    for n in sorted(files):
      rel = os.path.relpath(os.path.join(root, n), local_dir).replace(os.sep, "/")
      if not n.startswith(".") and not layout.is_metadata_name(n):
        names.append(rel)
  return names


def _upload_files(fs, local_dir: str, url_dir: str, names: List[str], listed: dict,
                  tag: str) -> list:
  """Uploads each staged file under a hidden temporary name beside its
  destination, its size checked (against the metadata too, where listed).

  Returns:
    [(temporary URL, destination URL, size)] in `names` order.
  """
  uploads = []
  for rel in names:
    src = os.path.join(local_dir, *rel.split("/"))
    want = os.path.getsize(src)
    if rel in listed and listed[rel] is not None and listed[rel] != want:
      raise UserError(f"{src}: {want} bytes, its metadata says {listed[rel]}")
    dst = storage.join(url_dir, rel)
    tmp = storage.join(storage.parent(dst), f".{storage.basename(dst)}.tmp-{tag}")
    fs.put_file(src, tmp)
    storage.check_size(fs, tmp, want)
    uploads.append((tmp, dst, want))
  return uploads


def remove_staging(local_location: str):
  """Deletes the staging folder of one output (after a successful publish)."""
  folder = os.path.dirname(local_location)
  if os.path.dirname(folder) == storage.staging_root().rstrip(os.sep):
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
    lay = layout.DatasetLayout.for_dir if folder else layout.DatasetLayout.for_file
    self._pairs = []  # (local location, URL, layout) of URL outputs
    self._overwrite = overwrite
    self.local = []
    for loc in locations:
      loc = storage.check(loc, flag)
      if storage.is_url(loc):
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
