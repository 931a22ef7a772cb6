"""Writes a set of files as one unit: atomic, resumable, never half-replaced.

Protocol:
  1. Each file is written under a temporary name (".NAME.tmp-PID-NONCE") and, once
     complete, renamed to a hidden finished name (".NAME.done"); its size and
     sha256 are appended to a hidden progress file keyed by a fingerprint of
     the run's inputs and flags.
  2. `finalize` removes the old metadata (if any), renames every finished file
     to its final name, then writes the metadata, last.
A run killed at any point leaves either the earlier complete dataset or hidden
files only: nothing looks complete. With `resume=True`, finished files whose
fingerprint and sha256 match are kept and not rewritten. An existing complete
dataset is only replaced with `overwrite=True`.
"""

import json
import os
import shutil
from typing import Callable, Dict, List, Sequence

import numpy as np

from textrecords.files import atomic_file
from textrecords.datasets import index
from textrecords.datasets import metadata
from textrecords.files import hashing
from textrecords.files import storage
from textrecords.errors import UserError


def done_path(path: str) -> str:
  """The hidden name a finished file waits under until `finalize`."""
  d, base = os.path.split(path)
  return os.path.join(d, f".{base}.done")


def check_replaceable(paths: Sequence[str], ours: set, meta_path: str, *,
                      foreign: str = "", remedy: str = "move it away or pass --overwrite"):
  """Refuses output paths that are folders, and existing files not named in
  `ours` (the names the dataset's metadata or progress lists): a run without
  --overwrite never replaces a file that is no part of the dataset.

  Args:
    foreign: what such a file is not, for the message (default: a file of
      the dataset whose metadata is `meta_path`).
    remedy: what the user can do about it.
  Raises:
    UserError: naming the path.
  """
  foreign = foreign or f"a file of a textrecords dataset (not listed in {meta_path})"
  for path in paths:
    if storage.is_dir(path):
      raise UserError(f"{path} is a folder, not a file of the output; give another output "
                      "path or move the folder away")
    if storage.basename(path) not in ours and (
        os.path.lexists(path) if not storage.is_url(path) else storage.exists(path)):
      raise UserError(f"{path} exists and is not {foreign}; this run would replace it: "
                      f"{remedy}")


class DatasetWriter:
  """Manages the files of one output dataset (one metadata file).

  Args:
    meta_path: where the metadata JSON goes.
    fingerprint: JSON-able dict of everything that determines the bytes
      (inputs' sizes/mtimes, flags, version); resume keeps files only when
      it matches.
    overwrite: allow replacing an existing complete dataset.
    resume: keep finished files of an interrupted run with the same fingerprint;
      on a complete output with the same fingerprint, `already_complete` is
      True (nothing to do); with another fingerprint it is an error.
    paths: every file the run would write (index files included): each must
      not be a folder, and an existing one needs `overwrite` unless it is a
      file of this dataset that a complete same-fingerprint output keeps
      (`resume`) or that an interrupted run of it left (its progress file
      lists it); a file that is no part of the dataset is named.
  """

  def __init__(self, meta_path: str, fingerprint: dict, *, overwrite: bool = False,
               resume: bool = False, paths: Sequence[str] = ()):
    self.meta_path = meta_path
    self.dir = os.path.dirname(os.path.abspath(meta_path))
    self.fingerprint = json.loads(json.dumps(fingerprint, sort_keys=True))
    self.progress_path = os.path.join(
        self.dir, f".{os.path.basename(meta_path)}.progress")
    self._finished: Dict[str, dict] = {}
    self._kept: set = set()  # names kept from the interrupted run being resumed
    self._header_written = False  # the progress file is created at the first commit
    self._progress_was_there = os.path.exists(self.progress_path)
    self._check_destination(overwrite, resume)
    if not overwrite:
      self._check_paths(paths)
    if resume:
      self._load_progress()

  def _check_destination(self, overwrite: bool, resume: bool):
    if not os.path.isdir(self.dir):
      try:
        os.makedirs(self.dir, exist_ok=True)
      except OSError as e:
        raise UserError(f"cannot create output folder {self.dir}: {e.strerror}") from e
    if not os.access(self.dir, os.W_OK):
      raise UserError(f"output folder {self.dir} is not writable")
    self.already_complete = False
    if os.path.exists(self.meta_path) and not overwrite:
      refusal = metadata.existing_output_error(self.meta_path, resume)
      if refusal is not None:
        raise refusal
      if self._old_fingerprint() != self.fingerprint:
        raise UserError(f"{self.meta_path} exists (a complete output of other inputs or "
                        "flags); --resume would replace it: pass --overwrite instead")
      self.already_complete = True

  def _check_paths(self, paths: Sequence[str]):
    """Refuses to replace an existing file that is not ours to replace."""
    check_replaceable(paths, self._old_listed_files() | self._progress_names(), self.meta_path)

  def _progress_names(self) -> set:
    """Names the progress file of an interrupted run lists (any fingerprint)."""
    try:
      with open(self.progress_path, "rb") as f:
        lines = f.read().decode("utf-8").splitlines()[1:]
    except (OSError, ValueError):
      return set()
    names = set()
    for line in lines:
      try:
        names.add(json.loads(line)["name"])
      except (ValueError, KeyError, TypeError):
        continue
    return names

  def _old_fingerprint(self):
    try:
      with open(self.meta_path, "rb") as f:
        return json.loads(f.read().decode("utf-8")).get("fingerprint")
    except (OSError, ValueError, AttributeError):
      return None

  def _write_progress_header(self):
    w = atomic_file.AtomicWriter(self.progress_path)
    w.write((json.dumps({"fingerprint": self.fingerprint}, sort_keys=True) + "\n").encode())
    w.commit()
    self._header_written = True

  def _load_progress(self):
    try:
      with open(self.progress_path, "rb") as f:
        lines = f.read().decode("utf-8").splitlines()
      header = json.loads(lines[0])
    except (OSError, ValueError, IndexError):
      return
    if header.get("fingerprint") != self.fingerprint:
      return
    self._header_written = True
    for line in lines[1:]:
      try:
        info = json.loads(line)
      except ValueError:
        continue  # a line cut by the kill
      done = os.path.join(self.dir, f".{info['name']}.done")
      if (os.path.exists(done) and os.path.getsize(done) == info["bytes"]
          and hashing.content_matches(done, info)):
        self._finished[info["name"]] = info
        self._kept.add(info["name"])

  def discard(self):
    """After a failed run: removes the hidden files it made (finished files,
    their indexes, the progress file it started); files kept from the run it
    resumed stay for another --resume."""
    for name in set(self._finished) - self._kept:
      try:
        os.remove(done_path(os.path.join(self.dir, name)))
      except OSError:
        pass
    if not self._kept and not self._progress_was_there:
      try:
        os.remove(self.progress_path)
      except OSError:
        pass

  def scratch_dir(self) -> str:
    """A new hidden scratch folder beside the outputs (for spill files).

    Scratch folders left by killed runs (their process is gone) are removed.
    The caller removes its own folder when done.
    """
    prefix = f".{os.path.basename(self.meta_path)}.scratch-"
    for name in os.listdir(self.dir):
      if name.startswith(prefix) and not atomic_file.pid_alive(name[len(prefix):]):
        shutil.rmtree(os.path.join(self.dir, name), ignore_errors=True)
    path = os.path.join(self.dir, f"{prefix}{os.getpid()}")
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path

  def is_finished(self, path: str) -> bool:
    """True if `path` was completed by an earlier run being resumed."""
    return os.path.basename(path) in self._finished

  def open(self, path: str, compression: str = "") -> "FileHandle":
    """A writer for one output file; call `.commit()` when it is complete."""
    self._remove_stale_temps(path)
    self._remove_stale_temps(index.index_path(path))  # (`FileHandle.finish` writes it)
    return FileHandle(self, path, compression)

  def write_bytes(self, path: str, data: bytes) -> dict:
    """Writes a small file (vocab, ...) as part of the dataset."""
    with self.open(path) as h:
      h.write(data)
      return h.commit()

  def remove_temps(self, path: str):
    """Removes temp files of `path` left by any writer (a stopped child process)."""
    self._remove_stale_temps(path)

  def _remove_stale_temps(self, path: str):
    """Removes temp files of `path` left by runs that died (never a live run's)."""
    d, base = os.path.split(path)
    prefix = f".{base}.tmp-"
    for name in os.listdir(d or "."):
      if name.startswith(prefix) and not atomic_file.temp_owner_alive(name, d or "."):
        try:
          os.remove(os.path.join(d, name))
        except OSError:
          pass

  def record_finished(self, path: str, info: dict):
    """Records a file completed by `FileHandle.finish` (here or in a child
    process), and its offset index, written already (info["_index_file"]:
    its info, with "_tmp"), first."""
    if not self._header_written:
      self._write_progress_header()
    index_file = info.pop("_index_file", None)
    if index_file is not None:
      # The offset index is finished before its record file, so a resumed run
      # that keeps the record file also keeps its index.
      self.record_finished(index.index_path(path), index_file)
    os.replace(info.pop("_tmp"), done_path(path))
    self._finished[info["name"]] = info
    with open(self.progress_path, "ab") as f:
      f.write((json.dumps(info, sort_keys=True) + "\n").encode())
      f.flush()
      os.fsync(f.fileno())

  def adopt(self, infos: List[dict]):
    """Records files finished elsewhere (Beam workers, `write_finished_file`)."""
    for info in infos:
      info = dict(info)
      index_info = info.pop("_index_info", None)
      if index_info is not None:
        self.adopt([index_info])
      if info["name"] in self._finished:
        continue
      if not self._header_written:
        self._write_progress_header()
      self._finished[info["name"]] = dict(info)
      with open(self.progress_path, "ab") as f:
        f.write((json.dumps(info, sort_keys=True) + "\n").encode())

  def file_info(self, path: str) -> dict:
    return dict(self._finished[os.path.basename(path)])

  def finalize(self, paths: List[str], build_meta: Callable[[List[dict]], dict]) -> dict:
    """Moves finished files into place and writes the metadata last.

    Args:
      paths: every file of the dataset, all finished.
      build_meta: called with the file infos (name, bytes, sha256, records),
        returns the metadata dict; its "files" key is set from the infos
        unless build_meta set it (`metadata.set_files`).
    Returns:
      The metadata written.
    """
    infos = [self.file_info(p) for p in paths]
    meta = build_meta(infos)
    meta.setdefault("files", infos)
    # Offset indexes of the uncompressed record files, listed after all files.
    indexes = [index.index_path(p) for p in paths
               if os.path.basename(index.index_path(p)) in self._finished]
    meta["files"] = meta["files"] + [dict(self.file_info(p), role=metadata.ROLE_INDEX)
                                     for p in indexes]
    paths = list(paths) + indexes
    meta.setdefault("fingerprint", self.fingerprint)
    metadata.set_format(meta)
    old_files = self._old_listed_files()
    if os.path.exists(self.meta_path):
      os.remove(self.meta_path)
    for p in paths:
      os.replace(done_path(p), p)
    for stale in old_files - {os.path.basename(p) for p in paths}:
      try:
        os.remove(os.path.join(self.dir, stale))
      except OSError:
        pass
    metadata.write(self.meta_path, meta)
    try:
      os.remove(self.progress_path)
    except OSError:
      pass
    return meta

  def _old_listed_files(self) -> set:
    try:
      with open(self.meta_path, "rb") as f:
        old = json.loads(f.read().decode("utf-8"))
      return {f["name"] for f in old.get("files", []) if "/" not in f["name"]}
    except (OSError, ValueError, KeyError, TypeError):
      return set()


def reopen(meta_path: str):
  """Turns a complete dataset back into finished files awaiting `finalize`.

  Used on a staged copy of a URL output whose upload was killed: with
  --resume, the generator's DatasetWriter then keeps every file (same
  fingerprint, sha256 checked) and finalizes again, instead of redoing the
  work; with other inputs or flags nothing matches and all is redone. Safe
  to repeat if killed: the progress file lists every file before any is
  renamed, and the metadata goes last.
  """
  with open(meta_path, "rb") as f:
    meta = json.loads(f.read().decode("utf-8"))
  d = os.path.dirname(os.path.abspath(meta_path))
  files = [f for f in meta.get("files", [])
           if isinstance(f, dict) and "/" not in f.get("name", "/")]
  lines = [{"fingerprint": meta.get("fingerprint")}]
  kept = ("name", "bytes", "sha256", "records", "segments")
  lines += [{k: f[k] for k in kept if k in f} for f in files]
  w = atomic_file.AtomicWriter(os.path.join(d, f".{os.path.basename(meta_path)}.progress"))
  w.write("".join(json.dumps(x, sort_keys=True) + "\n" for x in lines).encode())
  w.commit()
  for f in files:
    path = os.path.join(d, f["name"])
    if os.path.exists(path):
      os.replace(path, done_path(path))
  os.remove(meta_path)


def open_finished_file(path: str, compression: str = "") -> "FileHandle":
  """A writer for one dataset file outside its DatasetWriter (a Beam worker).

  Same bytes as `DatasetWriter.open` (temp name, the same gzip framing);
  `commit()` renames it to the hidden finished name and returns its info,
  which the run's last step hands to `DatasetWriter.adopt`.
  """
  return FileHandle(None, path, compression)


class FileHandle(atomic_file.AtomicWriter):
  """An AtomicWriter whose commit renames to the hidden finished name."""

  def __init__(self, owner: "DatasetWriter | None", path: str, compression: str):
    super().__init__(path, compression)
    self._owner = owner

  def commit(self) -> dict:
    info = self.finish()
    if self._owner is None:  # open_finished_file: the run's last step records it
      index_file = info.pop("_index_file", None)
      if index_file is not None:  # the offset index, finished before its record file
        os.replace(index_file.pop("_tmp"), done_path(index.index_path(self.path)))
        info["_index_info"] = index_file
      os.replace(info.pop("_tmp"), done_path(self.path))
      return info
    self._owner.record_finished(self.path, info)
    self.committed = True
    return dict(self._owner.file_info(self.path))

  def finish(self) -> dict:
    """Completes the temp file (gzip trailer, flush, fsync) without recording it.

    Returns the info for the owner's `record_finished` (which renames it to the
    finished name); lets a child process write a file that this process records.
    """
    self._close_synced()
    info = {"name": os.path.basename(self.path), "bytes": self.size,
            "sha256": self._hash.hexdigest(), "records": self.records,
            "_tmp": self.tmp}
    if self._gz is None and self.records:
      info["_index_file"] = self._write_index(info)
    return info

  def _write_index(self, info: dict) -> dict:
    """The finished file's offset index written to its own temp file beside
    it (the header, each record's start as the writes said, else from a
    scan, the size), a write at a time: never held whole, nor sent to the
    process that records it. Returns its info (`finish`'s, with "_tmp")."""
    starts = self.record_starts()
    h = FileHandle(None, index.index_path(self.path), "")
    try:
      if starts is None:
        offsets = index.scan(self.tmp)
        h.write(index.header_bytes(info["name"], self.size, info["sha256"], len(offsets) - 1))
        h.write(memoryview(np.ascontiguousarray(offsets, "<u8")).cast("B"))
      else:
        h.write(index.header_bytes(info["name"], self.size, info["sha256"], self.records))
        for base, s in starts:
          h.write((np.asarray(s, np.int64) + base).astype("<u8").tobytes())
        h.write(np.asarray([self.size], "<u8").tobytes())
      return h.finish()
    except BaseException:
      h.abort()
      raise
