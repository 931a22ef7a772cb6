"""From what a user passes to `make_dataset` / inspect to checked record files.

A location is any of:
  - the output given to create: a folder (`out/w2v`) or a file
    (`out/train.tfrecord`, bert_data);
  - the metadata path (`out/w2v/meta.json`, `out/train.tfrecord.meta.json`);
  - a record file or a shard glob (`out/train.tfrecord-*`);
  - for bert_data, a comma-separated list of these.
Each resolves, through `textrecords.datasets.layout`, to a dataset (layout + metadata)
and the record files chosen. A dataset of another package is refused naming
the function that reads it.
"""

import dataclasses
from typing import List, Optional

from textrecords.datasets import layout as L
from textrecords.datasets import metadata
from textrecords.files import storage
from textrecords.reading import tf_input
from textrecords.errors import UserError


@dataclasses.dataclass
class Found:
  """One dataset (or plain file) found from a user's location.

  Attributes:
    given: the part of the location it came from.
    layout: the dataset's layout; None for a plain file without metadata.
    meta: its metadata (None for a plain file).
    names: record file names the location picked; None = every record file
      of the split asked for. For a plain file: its full path, alone.
  """
  given: str
  layout: Optional[L.DatasetLayout]
  meta: Optional[dict]
  names: Optional[List[str]]


@dataclasses.dataclass(frozen=True)
class RecordFile:
  path: str
  name: str
  records: int
  found: Found = dataclasses.field(compare=False, repr=False)


def find(location: str, *, allow_list: bool = False) -> List[Found]:
  """Every dataset a location names (plain files without metadata included).

  Raises:
    UserError: nothing there, a folder without metadata, or bad metadata.
  """
  items = [p.strip() for p in location.split(",")] if allow_list else [location]
  items = [storage.check(p) for p in items if p]  # file:// -> local path
  if not items:
    raise UserError(f"{location!r}: no dataset given")
  out: List[Found] = []
  for item in items:
    for lay, name in _resolve_one(item):
      if lay is None:
        out.append(Found(item, None, None, [name]))
        continue
      same = [f for f in out if f.layout == lay]
      if same:
        f = same[0]
        if f.names is not None:
          f.names = None if name is None else f.names + [name] * (name not in f.names)
        continue
      out.append(Found(item, lay, metadata.load(lay.meta_path),
                       None if name is None else [name]))
  return out


def open_datasets(location: str, package: str, *, allow_list: bool = False) -> List[Found]:
  """`find`, where every dataset must have metadata and be `package`'s.

  Raises:
    UserError: as `find`; plain files without metadata; another package's
      dataset (naming its reader).
  """
  found = find(location, allow_list=allow_list)
  for f in found:
    if f.meta is None:
      raise UserError(no_metadata_message(f.names[0]))
    if f.meta.get("package") != package:
      raise UserError(metadata.foreign_message(f.given, f.meta))
  return found


def companion_path(found: Found, name: str, verify: str = "checksum") -> str:
  """The full path of one of a dataset's listed files (its vocab, document
  ids, tokenizer), after checking it and the other companions against the
  metadata (`metadata.verified_files`).

  Raises:
    UserError: the file is not listed, missing, resized or (checksum) changed.
  """
  return metadata.verified_files(found.meta, found.layout, [name], verify)[0]


def no_metadata_message(path: str) -> str:
  return (f"{path}: no metadata beside it ({_meta_candidates(path)}): the dataset is "
          "incomplete (a run that did not finish) or was not written by textrecords")


def record_files(found: List[Found], split: Optional[str] = L.DEFAULT_SPLIT, *,
                 verify: str = "checksum", skip_corrupt: bool = False, log=print,
                 input_context=None) -> List[RecordFile]:
  """The checked record files of `split`, this input pipeline's share.

  Sizes of every file are checked first (`verify` != "none"); the files are
  then shared out by `input_context` (every n-th file to pipeline i); only
  this pipeline's files are hashed (verify="checksum").

  Args:
    split: the split to read; None takes the files the location named
      (which must then be given).
  Raises:
    UserError: a named file of another split, a missing or corrupt file
      (unless skip_corrupt), no file left, too few files to share out.
  """
  size_mode = "size" if verify == "checksum" else verify
  entries = []
  for f in found:
    infos = metadata.file_infos(f.meta)
    if f.names is None:
      names = metadata.split_record_names(f.meta, split, f.layout.meta_path)
    else:
      names = f.names
      for n in names:
        got = infos.get(n, {}).get("split")
        if split is not None and got is not None and got != split:
          raise UserError(f"{f.layout.path(n)} is a file of the {got!r} split, but "
                          f"split={split!r} was asked for")
    for path in metadata.verified_files(f.meta, f.layout, names, size_mode, skip_corrupt,
                                        log, require_some=False):
      name = L.basename(path)
      entries.append(RecordFile(path, name, int(infos[name].get("records", 0)), f))
  where = ", ".join(f.given for f in found)
  if not entries:
    raise UserError(f"{where}: no readable record files left")
  entries = tf_input.shard_files(entries, input_context)
  if verify == "checksum":
    kept = []
    for f in found:
      mine = [e for e in entries if e.found is f]
      ok = set(metadata.verified_files(f.meta, f.layout, [e.name for e in mine], "checksum",
                                       skip_corrupt, log, require_some=False))
      kept.extend(e for e in mine if e.path in ok)
    order = {e.path: i for i, e in enumerate(entries)}
    entries = sorted(kept, key=lambda e: order[e.path])
    if not entries:
      raise UserError(f"{where}: no readable record files left")
  return entries


def given(entries: List[RecordFile]) -> str:
  """The locations, as the user gave them, that `entries` came from (for errors)."""
  return ", ".join(dict.fromkeys(e.found.given for e in entries))


def _meta_candidates(path: str) -> str:
  name, folder = L.basename(path), L.parent(path)
  shard = L.parse_shard(name)
  stem = shard.base if shard else name
  return (f"{L.join(folder, stem + L.META_SUFFIX)} or "
          f"{L.join(folder, L.META_NAME)}")


def _layout_of_file(path: str) -> Optional[L.DatasetLayout]:
  """The dataset a record file belongs to, by its name; None without metadata."""
  name, folder = L.basename(path), L.parent(path)
  shard = L.parse_shard(name)
  for stem in ([shard.base] if shard else []) + [name]:
    lay = L.DatasetLayout.for_file(L.join(folder, stem))
    if L.exists(lay.meta_path):
      return lay
  lay = L.DatasetLayout.for_dir(folder)
  return lay if L.exists(lay.meta_path) else None


def _resolve_one(item: str):
  """[(layout or None, file name, full path for plain files, or None = all)]."""
  if L.is_dir(item):
    lay = L.DatasetLayout.for_dir(item)
    if not L.exists(lay.meta_path):
      metas = [n for n in L.list_dir(item) if n.endswith(L.META_SUFFIX)]
      if len(metas) == 1:
        return [(L.DatasetLayout.from_meta_path(L.join(item, metas[0])), None)]
      hint = (f"; it holds {len(metas)} datasets: pass one of "
              f"{', '.join(metas)}" if metas else "")
      raise UserError(f"{lay.meta_path} not found: the dataset is incomplete (a run that "
                      f"did not finish) or was not written by textrecords{hint}")
    return [(lay, None)]
  if L.exists(item + L.META_SUFFIX):  # a file output (even one named meta.json)
    return [(L.DatasetLayout.for_file(item), None)]
  if L.is_metadata_name(L.basename(item)):
    return [(L.DatasetLayout.from_meta_path(item), None)]
  if L.has_magic(item):
    matches = L.glob(item)
  else:
    matches = [item] if L.exists(item) else []
  matches = [m for m in matches if L.is_data_name(L.basename(m)) and not L.is_dir(m)]
  if not matches and L.has_magic(item):
    raise UserError(f"{item}: no file matches: the dataset is missing or incomplete")
  if not matches:
    raise UserError(f"{item} not found (no such folder or file, nor "
                    f"{L.basename(item)}{L.META_SUFFIX}): the dataset is missing or "
                    "incomplete (a run that did not finish)")
  out = []
  for m in _by_shard_index(matches):
    lay = _layout_of_file(m)
    out.append((lay, m) if lay is None else (lay, L.basename(m)))
  return out


def _by_shard_index(paths: List[str]) -> List[str]:
  """Paths in shard order (numeric, so any digit count sorts right)."""
  def key(p):
    s = L.parse_shard(L.basename(p))
    return (L.parent(p), s.base, s.index) if s else (L.parent(p), L.basename(p), -1)
  return sorted(paths, key=key)
