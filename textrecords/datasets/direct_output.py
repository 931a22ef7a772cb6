"""A dataset that a pipeline's workers write straight into its location.

For `--engine=beam` on any runner: the output location is a URL (`gs://`,
`s3://`, ...) or a local path on a mount every worker has, and no byte
passes through the launching machine's disk. The launcher only checks the
destination (`DirectDataset(...)`, as `DatasetWriter` does); workers write
files and intermediate objects under the output folder; the pipeline's last
step (`finalize`) puts the files in place and writes the metadata strictly
last.

Hidden names beside the metadata META, RUN a hash of the run's fingerprint
(inputs, flags, version):
  .NAME.tmp-PID-NONCE       a file being written by one worker attempt;
  .NAME.done-RUN            a finished file of run RUN (same bytes whichever
                            attempt wrote it: a retried bundle writes it again);
  .NAME.done-RUN.json       its size, sha256 and record count, written after
                            the file: a file counts as finished only with it;
  .META.parts-RUN/          the run's intermediate objects (record parts,
                            token ids), removed by `finalize`;
  .META.publishing          while `finalize` runs: the names of the earlier
                            dataset and of this one (as `publish.publish`),
                            so a rerun removes what a killed one left.
A run killed at any point leaves the earlier complete dataset (until every
new file is finished) or hidden names only, never metadata of its own. With
`resume`, the finished files of the same fingerprint are kept; other flags,
or no `resume`, write every file again.
"""

import array
import hashlib
import json
import os
import secrets
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from textrecords.files import atomic_file
from textrecords.datasets import index
from textrecords.datasets import metadata
from textrecords.datasets import publish
from textrecords.files import storage
from textrecords.files import tfrecord
from textrecords.errors import UserError


def _info_name(name: str, run: str) -> str:
  return f".{name}.done-{run}.json"


class DirectDataset:
  """The files of one output dataset (one metadata file), written by workers.

  Picklable (plain fields): the launcher makes it, every worker gets a copy.

  Args:
    meta_path: where the metadata goes (URL or local path).
    fingerprint: JSON-able dict of what determines the bytes.
    overwrite: allow replacing an existing complete dataset.
    resume: keep the finished files of an interrupted run with the same
      fingerprint; on a complete output of the same fingerprint,
      `already_complete` is True; of another one, an error.
  Raises:
    UserError: the storage cannot be used or reached, or the destination
      holds a complete dataset the flags do not allow replacing.
  """

  def __init__(self, meta_path: str, fingerprint: dict, *, overwrite: bool = False,
               resume: bool = False):
    storage.check(meta_path)
    self.meta_path = meta_path if storage.is_url(meta_path) else os.path.abspath(
        storage.local_path(meta_path))
    self.dir = storage.parent(self.meta_path)
    self.fingerprint = json.loads(json.dumps(fingerprint, sort_keys=True))
    self.run = hashlib.sha256(json.dumps(self.fingerprint, sort_keys=True).encode()
                              ).hexdigest()[:16]
    self.finished: Dict[str, dict] = {}
    self.already_complete = False
    try:
      present = storage.exists(self.meta_path)
      if present and not overwrite:
        self._check_complete(resume)
      if resume and not self.already_complete:
        self._load_finished()
    except UserError:
      raise
    except Exception as e:  # pylint: disable=broad-except
      raise UserError(f"{self.dir}: cannot reach the storage: {e}") from e

  def _check_complete(self, resume: bool):
    refusal = metadata.existing_output_error(self.meta_path, resume)
    if refusal is not None:
      raise refusal
    try:
      old = json.loads(storage.read_bytes(self.meta_path).decode("utf-8")).get("fingerprint")
    except (ValueError, AttributeError):
      old = None
    if old != self.fingerprint:
      raise UserError(f"{self.meta_path} exists (a complete output of other inputs or "
                      "flags); --resume would replace it: pass --overwrite instead")
    self.already_complete = True

  def _load_finished(self):
    """Finished files of this fingerprint (their info and data both there)."""
    names = set(storage.list_dir(self.dir))
    suffix = f".done-{self.run}.json"
    for n in sorted(names):
      if not (n.startswith(".") and n.endswith(suffix)):
        continue
      try:
        info = json.loads(storage.read_bytes(storage.join(self.dir, n)).decode("utf-8"))
      except (UserError, ValueError):
        continue
      parts = [info] + ([info["_index_info"]] if "_index_info" in info else [])
      if all(f".{p['name']}.done-{self.run}" in names
             and storage.size(self.done_path(p["name"])) == p["bytes"] for p in parts):
        self.finished[info["name"]] = info

  # -- names

  def done_path(self, name: str) -> str:
    return storage.join(self.dir, f".{name}.done-{self.run}")

  def parts_dir(self) -> str:
    """The run's folder of intermediate objects (removed by `finalize`)."""
    return storage.join(self.dir, f".{storage.basename(self.meta_path)}.parts-{self.run}")

  def is_finished(self, path: str) -> bool:
    """True if `path` was finished by the interrupted run being resumed."""
    return storage.basename(path) in self.finished

  # -- workers

  def open(self, path: str, compression: str = "") -> "StreamFile":
    """A writer for one file of the dataset; `.commit()` returns its info."""
    return StreamFile(self, storage.basename(path), compression)

  def join(self, path: str, segments: Sequence[dict], joined: dict,
           index_sources: Sequence[str], index_info: Optional[dict]) -> dict:
    """A record file made of segment objects written apart (in order): joined
    on the store's side under the finished name, its offset index likewise
    from its parts (`index_sources`, written apart: `index_info` its info,
    None for a file without records); returns its info (`joined`, as
    `StreamFile.commit` returns one). On failure neither is left."""
    name = storage.basename(path)
    info = dict(joined)
    done = self.done_path(name)
    storage.concatenate([s["path"] for s in segments if s["bytes"]], done)
    try:
      _check_joined(done, info["bytes"])
      if index_info is not None:
        index_done = self.done_path(index_info["name"])
        storage.concatenate(list(index_sources), index_done)
        try:
          _check_joined(index_done, index_info["bytes"])
        except BaseException:
          storage.remove(index_done)
          raise
        info["_index_info"] = self._finished_index(index_info)
    except BaseException:
      storage.remove(done)
      raise
    self._write_info(name, info)
    return info

  def _finished_index(self, index_info: dict) -> dict:
    """The info of an offset index in place under its finished name, also
    stored beside it (as `StreamFile.commit` stores every file's)."""
    index_info = {k: index_info[k] for k in ("name", "bytes", "sha256", "records", "segments")
                  if k in index_info}
    self._write_info(index_info["name"], index_info)
    return index_info

  def _write_info(self, name: str, info: dict) -> None:
    storage.write_file(storage.join(self.dir, _info_name(name, self.run)),
                       json.dumps(info, sort_keys=True).encode())

  def temp_path(self, name: str) -> str:
    """A new hidden temp name of file `name` (`.NAME.tmp-PID-NONCE`)."""
    return storage.join(self.dir, f".{name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")

  def commit_placed(self, tmp: str, joined: dict, index_tmp: Optional[str],
                    index_info: Optional[dict]) -> dict:
    """A record file whose bytes workers placed into the temp file `tmp`,
    and its offset index into `index_tmp` (both complete, their sizes
    checked; `index_info` the index's info, None for a file without
    records), finished as `StreamFile.commit` does: the index's finished
    name first, then the file's and the info beside it; on failure both
    temp files are removed. Returns the file's info (`joined`)."""
    info = dict(joined)
    try:
      if index_info is not None:
        storage.move(index_tmp, self.done_path(index_info["name"]))
        info["_index_info"] = self._finished_index(index_info)
      storage.move(tmp, self.done_path(info["name"]))
    except BaseException:
      storage.remove(tmp)
      if index_tmp is not None:
        storage.remove(index_tmp)
      raise
    self._write_info(info["name"], info)
    return info

  def write_bytes(self, path: str, data: bytes) -> dict:
    """Writes a small file (vocabulary, ...) of the dataset; returns its info."""
    h = self.open(path)
    h.write(data)
    return h.commit()

  def read_meta(self, package: str) -> dict:
    """The metadata the pipeline's last step wrote (listings cached in this
    process before the run are dropped first)."""
    storage.forget_listings(self.meta_path)
    return metadata.read(self.meta_path, package)

  def discard(self, paths: Sequence[str]):
    """After a run failed on bad input: removes the files it finished (not
    those of the resumed run) and its intermediate objects."""
    for p in paths:
      name = storage.basename(p)
      if name in self.finished:
        continue
      for n in (name, storage.basename(index.index_path(name))):
        storage.remove(self.done_path(n))
        storage.remove(storage.join(self.dir, _info_name(n, self.run)))
    storage.remove_tree(self.parts_dir())

  # -- the last step

  def finalize(self, paths: Sequence[str], build_meta: Callable[[List[dict]], dict],
               infos: Sequence[dict]) -> dict:
    """Every file in place, then the metadata, strictly last.

    Args:
      paths: every file of the dataset (metadata order), each finished by
        this run (`infos`) or the resumed one.
      build_meta: file infos -> the metadata dict (as `DatasetWriter.finalize`).
      infos: the infos `StreamFile.commit` returned in this run.
    Returns:
      The metadata written.
    """
    done = dict(self.finished)
    done.update({i["name"]: i for i in infos})
    names = [storage.basename(p) for p in paths]
    missing = [n for n in names if n not in done]
    if missing:
      raise UserError(f"{self.dir}: {missing[0]} was not written; rerun with --resume")
    file_infos = [_public(done[n]) for n in names]
    index_infos = [_public(done[n]["_index_info"]) for n in names if "_index_info" in done[n]]
    meta = build_meta(file_infos)
    meta.setdefault("files", file_infos)
    meta["files"] = meta["files"] + [dict(i, role=metadata.ROLE_INDEX) for i in index_infos]
    meta.setdefault("fingerprint", self.fingerprint)
    metadata.set_format(meta)
    self._publish(file_infos + index_infos, metadata.dumps(meta))
    return meta

  def _publish(self, infos: List[dict], meta_bytes: bytes):
    """Moves the finished files to their names, deletes the earlier
    dataset's other files, writes the metadata; safe to rerun if killed."""
    meta_name = storage.basename(self.meta_path)
    record = storage.join(self.dir, publish.pending_name(meta_name))
    present = set(storage.list_dir(self.dir))
    earlier = set()
    for listed in (self.meta_path, record):
      if storage.basename(listed) in present:
        earlier |= publish.listed_names(storage.read_bytes(listed))
    ours = {i["name"] for i in infos}
    storage.write_file(record, json.dumps({"files": sorted(earlier | ours)}).encode())
    storage.remove(self.meta_path)  # from here on: no metadata
    for info in infos:
      self._place(info)
    for n in sorted(earlier - ours - {meta_name}):
      storage.remove(storage.join(self.dir, n))
    storage.write_file(self.meta_path, meta_bytes)
    for n in sorted(present):  # what the run and killed writers of these names left
      if _leftover_of(n, ours):
        storage.remove(storage.join(self.dir, n))
    storage.remove_tree(self.parts_dir())
    storage.remove(record)

  def _place(self, info: dict):
    dst = storage.join(self.dir, info["name"])
    src = self.done_path(info["name"])
    if storage.exists(src):
      storage.move(src, dst)
    elif not (storage.exists(dst) and storage.size(dst) == info["bytes"]):
      raise UserError(f"{src}: missing; rerun with --resume")  # not a retried move
    if storage.size(dst) != info["bytes"]:
      raise UserError(f"{dst}: {storage.size(dst)} bytes, expected {info['bytes']}; "
                      "rerun to retry")


def _check_joined(path: str, want: int) -> None:
  """A store-side join's size check (one-line UserError)."""
  have = storage.size(path)
  if have != want:
    raise UserError(f"{path}: joined {have} bytes, expected {want}")


def _leftover_of(name: str, ours) -> bool:
  """True for a hidden finished, info or temporary name of one of `ours`
  (`.N.done-RUN`, `.N.done-RUN.json`, `.N.tmp-...` and their temp names)."""
  if not name.startswith("."):
    return False
  bare = name.lstrip(".")
  return any(bare.startswith((f"{n}.done-", f"{n}.tmp-")) for n in ours)


def _public(info: dict) -> dict:
  return {k: info[k] for k in ("name", "bytes", "sha256", "records", "segments") if k in info}


class StreamFile:
  """One dataset file streamed to its location: a temp name, then the
  finished name; the same bytes, sha256 and offset index as a local run's
  `atomic_file.AtomicWriter`."""

  def __init__(self, dataset: DirectDataset, name: str, compression: str = ""):
    self.dataset, self.name = dataset, name
    self.tmp = dataset.temp_path(name)
    self._raw = storage.open_write(self.tmp)
    self._hash = hashlib.sha256()
    self.size = self.records = 0
    self._starts = array.array("q")  # record offsets (uncompressed files): 8 bytes a record
    self._gz = atomic_file.gzip_writer(self) if compression == "GZIP" else None

  def write(self, data: bytes):
    """File-like sink (also the gzip stream's): bytes as stored."""
    self._raw.write(data)
    self._hash.update(data)
    self.size += len(data)
    return len(data)

  def flush(self):
    pass

  def write_framed(self, data: bytes, num_records: int):
    """Appends framed records (offsets found from their headers)."""
    if self._gz is not None:
      self._gz.write(data)
    else:
      base = self.size
      self._starts.extend(base + s for s in tfrecord.frame_starts(data))
      self.write(data)
    self.records += num_records

  def commit(self) -> dict:
    """Completes the file under its finished name (its index first); returns
    its info, also stored beside it so a resumed run finds it."""
    if self._gz is not None:
      self._gz.close()
    self._raw.close()
    if storage.size(self.tmp) != self.size:
      raise UserError(f"{self.tmp}: wrote {self.size} bytes, found {storage.size(self.tmp)}")
    info = {"name": self.name, "bytes": self.size, "sha256": self._hash.hexdigest(),
            "records": self.records}
    if self._gz is None and self.records:
      iname = storage.basename(index.index_path(self.name))
      h = StreamFile(self.dataset, iname)
      h.write(index.header_bytes(self.name, self.size, info["sha256"], len(self._starts)))
      # the record starts as they are (no copy of the index: 8 bytes a record)
      h.write(memoryview(np.frombuffer(self._starts, np.int64).astype("<u8", copy=False)).cast("B"))
      h.write(np.asarray([self.size], "<u8").tobytes())
      info["_index_info"] = h.commit()
    storage.move(self.tmp, self.dataset.done_path(self.name))
    storage.write_file(storage.join(self.dataset.dir, _info_name(self.name, self.dataset.run)),
                        json.dumps(info, sort_keys=True).encode())
    return info

  def abort(self):
    try:
      self._raw.close()
    except Exception:  # pylint: disable=broad-except
      pass
    storage.remove(self.tmp)
