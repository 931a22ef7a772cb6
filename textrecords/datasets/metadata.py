"""The metadata sidecar: written last, it marks a dataset as complete.

One convention for every package (format "textrecords/2"):

  {"format": "textrecords/2", "package": "w2v_data", "version": "0.1.0",
   "files": [{"name": "train.tfrecord", "bytes": 1234, "sha256": "...",
              "records": 42, "role": "records", "split": "train"},
             {"name": "vocab.txt", "bytes": 99, "sha256": "...",
              "records": 0, "role": "vocab"}],
   "splits": {"train": {"num_records": 42, "files": ["train.tfrecord"]}},
   ... package fields (schema, flags, counts, vocab hashes) ...}

A record file written in segments by parallel workers (one over
`engine.file_segments.SEGMENT_BYTES`, uncompressed) also lists them,
"segments": [{"offset", "bytes", "sha256"}, ...] in file order, and its
"sha256" is `hashing.segments_sha256` of that list (no worker read the
whole file), and its offset index's entry lists the index's parts the same
way (one per segment, written by that segment's worker); such metadata is
format "textrecords/3" (`set_format`), read by this version like format 2,
refused by earlier ones.

Every file of the dataset is in `files`, with its role ("records", "vocab",
"tokenizer", ...); record files also name their split, and `splits` lists
each split's record files in reading order with their total record count.
A file outside the dataset that gives its records their meaning (bert_data's
`--vocab_file`) is in `external_files`: {"path", "bytes", "sha256", "role"},
checked on reading like the companions in `files` (`verified_files`).
Where the metadata lives is `textrecords.datasets.layout`'s business. Format 1
(textrecords 0.1.0 before this convention: bert_data's `files` only, w2v_data's
`record_files`, mt_data's `splits[s].files` without roles) is read and converted; other
formats are refused with a message naming the version that wrote them.
"""

import json
import os
from typing import Dict, List, Optional, Union

from textrecords.files import atomic_file
from textrecords import __version__
from textrecords.datasets import layout as layout_lib
from textrecords.files import hashing
from textrecords.files import storage
from textrecords.errors import UserError

FORMAT_PREFIX = "textrecords/"
FORMAT_VERSION = 2
FORMAT = f"{FORMAT_PREFIX}{FORMAT_VERSION}"
ROLE_RECORDS = "records"
ROLE_VOCAB = "vocab"
ROLE_TOKENIZER = "tokenizer"
ROLE_INDEX = "index"          # a record file's offset index (textrecords.datasets.index)

# verify="checksum" logs a line before hashing at least this many bytes.
VERIFY_LOG_BYTES = 256 << 20


SEGMENTED_FORMAT_VERSION = 3  # a record file listed with "segments" (written in parts)
SEGMENTED_FORMAT = f"{FORMAT_PREFIX}{SEGMENTED_FORMAT_VERSION}"
READABLE_FORMATS = (FORMAT, SEGMENTED_FORMAT)


def set_format(meta: dict) -> dict:
  """Marks metadata that lists a file written in segments (its "sha256" is
  `hashing.segments_sha256` of its "segments") as format 3, so that an
  earlier textrecords refuses it instead of finding its sha256 wrong;
  other metadata keeps format 2, byte for byte. Returns `meta`."""
  if any(f.get("segments") for f in meta.get("files", [])):
    meta["format"] = SEGMENTED_FORMAT
  return meta


def dumps(meta: dict) -> bytes:
  return (json.dumps(meta, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def base_meta(package: str) -> dict:
  return {"format": FORMAT, "package": package, "version": __version__}


def reader_of(package: str) -> str:
  """The function that reads a package's datasets."""
  return f"{package}.make_dataset"


def set_files(meta: dict, infos: List[dict], split_files: Dict[str, List[str]],
              roles: Optional[Dict[str, str]] = None) -> dict:
  """Fills `files` and `splits` of `meta` by the convention; returns `meta`.

  Args:
    infos: {name, bytes, sha256, records} of every file of the dataset.
    split_files: each split's record file names, in reading order. Extra
      per-split fields already in meta["splits"][split] are kept.
    roles: the role of every file that is not a record file.

  Example:
    >>> m = set_files({}, [{"name": "t", "bytes": 1, "sha256": "", "records": 3},
    ...                    {"name": "v", "bytes": 1, "sha256": "", "records": 0}],
    ...               {"train": ["t"]}, {"v": "vocab"})
    >>> m["splits"], [f["role"] for f in m["files"]]
    ({'train': {'files': ['t'], 'num_records': 3}}, ['records', 'vocab'])
  """
  roles = roles or {}
  split_of = {n: s for s, names in split_files.items() for n in names}
  files = []
  for info in infos:
    f = dict(info)
    if f["name"] in split_of:
      f.update(role=ROLE_RECORDS, split=split_of[f["name"]])
    elif f["name"] in roles:
      f["role"] = roles[f["name"]]
    else:
      raise ValueError(f"{f['name']}: no role given")
    files.append(f)
  records = {f["name"]: f["records"] for f in files}
  splits = {}
  for split, names in split_files.items():
    missing = [n for n in names if n not in records]
    if missing:
      raise ValueError(f"split {split}: {missing} not among the files")
    splits[split] = dict(meta.get("splits", {}).get(split, {}), files=list(names),
                         num_records=sum(records[n] for n in names))
  meta["files"] = files
  meta["splits"] = splits
  return meta


def write(path: str, meta: dict):
  """Writes the JSON atomically (temp name, fsync, rename)."""
  w = atomic_file.AtomicWriter(path)
  w.write(dumps(meta))
  w.commit()


def load(path: str) -> dict:
  """Reads, checks and (format 1) converts a metadata file, any package.

  Raises:
    UserError: missing (dataset incomplete or not ours), unreadable, not
      textrecords metadata, or a format this version cannot read.
  """
  if not layout_lib.exists(path):
    raise UserError(f"{path} not found: the dataset is incomplete (a run that did not "
                    "finish) or was not written by textrecords")
  try:
    meta = json.loads(storage.read_bytes(path).decode("utf-8"))
  except (OSError, ValueError) as e:
    raise UserError(f"{path}: unreadable metadata ({e})") from e
  fmt = meta.get("format") if isinstance(meta, dict) else None
  if not isinstance(fmt, str) or not fmt.startswith(FORMAT_PREFIX):
    raise UserError(f"{path}: not a textrecords metadata file")
  if fmt == FORMAT_PREFIX + "1":
    meta = _from_format_1(meta)
  elif fmt not in READABLE_FORMATS:
    raise UserError(f"{path}: metadata format {fmt!r} written by textrecords "
                    f"{meta.get('version')}; this is textrecords {__version__} (format "
                    f"{FORMAT!r}): upgrade textrecords or rerun create")
  meta.setdefault("splits", {})
  try:
    for f in meta["files"]:
      f["name"], f["bytes"], f["sha256"]  # pylint: disable=pointless-statement
    for s in meta["splits"].values():
      s["files"], s["num_records"]  # pylint: disable=pointless-statement
  except (KeyError, TypeError, AttributeError) as e:
    raise UserError(f"{path}: incomplete metadata (no {e}), written by textrecords "
                    f"{meta.get('version')}; rerun create") from e
  return meta


def read(path: str, package: Optional[str] = None) -> dict:
  """`load`, and the dataset must be `package`'s (if given).

  Raises:
    UserError: as `load`, or another package's dataset (naming its reader).
  """
  meta = load(path)
  if package is not None and meta.get("package") != package:
    raise UserError(foreign_message(path, meta))
  return meta


def not_metadata_reason(data: bytes) -> Optional[str]:
  """Why bytes found where a dataset's metadata goes are not textrecords
  metadata ("not JSON", ...), or None if they are.

  >>> not_metadata_reason(b"x"), not_metadata_reason(b'{"format": "textrecords/2"}')
  ('not JSON', None)
  """
  try:
    doc = json.loads(data.decode("utf-8"))
  except (UnicodeDecodeError, ValueError):
    return "not JSON"
  fmt = doc.get("format") if isinstance(doc, dict) else None
  if isinstance(fmt, str) and fmt.startswith(FORMAT_PREFIX):
    return None
  return "JSON without a textrecords format"


def existing_output_error(path: str, resume: bool = False) -> Optional[UserError]:
  """The refusal to replace what is at an output's metadata path `path`
  without --overwrite: a foreign file is named as one; textrecords metadata
  is a complete earlier output, which `resume` may keep (then None: the
  caller compares fingerprints)."""
  try:
    reason = not_metadata_reason(storage.read_bytes(path))
  except UserError as e:
    reason = f"unreadable: {e}"
  if reason is not None:
    return UserError(f"{path} exists and is not textrecords metadata ({reason}); move it "
                     "away, or pass --overwrite to replace it")
  if resume:
    return None
  return UserError(f"{path} exists (a complete earlier output); pass --overwrite to replace it")


def foreign_message(where: str, meta: dict) -> str:
  pkg = meta.get("package")
  return f"{where}: {article(str(pkg))} {pkg} dataset; read it with {reader_of(pkg)}"


def article(word: str) -> str:
  """"an" before a word said with a vowel sound first (letters spelled out).

  >>> [article(w) for w in ("mt_data", "w2v_data", "bert_data", "other")]
  ['an', 'a', 'a', 'an']
  """
  return "an" if word[:1].lower() in "aefhilmnorsx" else "a"


def _from_format_1(meta: dict) -> dict:
  """Format 1 -> 2: record files and splits by the one convention."""
  meta = dict(meta)
  names = [f.get("name") for f in meta.get("files", [])]
  old_splits = meta.get("splits")
  if isinstance(old_splits, dict) and all(
      isinstance(s, dict) and "files" in s for s in old_splits.values()):
    split_files = {s: list(v["files"]) for s, v in old_splits.items()}
  elif "record_files" in meta:
    split_files = {layout_lib.DEFAULT_SPLIT: list(meta.pop("record_files"))}
  else:
    split_files = {layout_lib.DEFAULT_SPLIT: [n for n in names
                                              if not layout_lib.is_index_name(n)]}
  roles = {n: (ROLE_INDEX if layout_lib.is_index_name(n) else
               ROLE_TOKENIZER if n.endswith(".json") else ROLE_VOCAB) for n in names}
  try:
    set_files(meta, meta.get("files", []), split_files, roles)
  except (KeyError, TypeError, ValueError):
    pass  # `load` reports what is missing
  meta["format"] = FORMAT
  meta["converted_from"] = FORMAT_PREFIX + "1"
  return meta


def split_record_names(meta: dict, split: str, where: str = "") -> List[str]:
  """The record file names of `split`, in reading order.

  Raises:
    UserError: the dataset has no such split.
  """
  splits = meta.get("splits", {})
  if split not in splits:
    raise UserError(f"{where or meta.get('package')}: no split {split!r} "
                    f"(the dataset has {', '.join(sorted(splits)) or 'none'})")
  return list(splits[split]["files"])


def file_infos(meta: dict) -> Dict[str, dict]:
  """{name: file entry} of every file in the metadata."""
  return {f["name"]: f for f in meta.get("files", [])}


VERIFY_MODES = ("checksum", "size", "none")


_CHECKED: dict = {}  # (path, size, mtime_ns, sha256) of files whose hash matched


def _sha_key(path: str, expected: str):
  st = os.stat(path)
  return (os.path.abspath(path), st.st_size, st.st_mtime_ns, expected)


def companion_names(meta: dict) -> List[str]:
  """Files that give the records their meaning (vocabs, tokenizers, document
  ids): every listed file that is neither a record file nor an index."""
  return [f["name"] for f in meta.get("files", [])
          if f.get("role") not in (ROLE_RECORDS, ROLE_INDEX)]


def external_file(path: str, sha256: str, role: str) -> dict:
  """The `external_files` entry of a file outside the dataset (its absolute
  path, or its URL), to be checked like a companion when read."""
  where = path if storage.is_url(path) else os.path.abspath(path)
  return {"path": where, "bytes": storage.size(path), "sha256": sha256, "role": role}


def _companions(meta: dict, lay, names: List[str]) -> List[tuple]:
  """(path, info) of the companions to check with `names`: the dataset's
  own (`companion_names`) and the `external_files` still where they were
  written from (a dataset read on another machine cannot check those)."""
  by_name = file_infos(meta)
  own = [(lay.path(n), by_name.get(n)) for n in companion_names(meta) if n not in names]
  outside = [(e["path"], e) for e in meta.get("external_files", [])
             if layout_lib.exists(e["path"])]
  return own + outside


def _file_problem(info: Optional[dict], path: str, meta_path: str,
                  verify: str) -> Optional[str]:
  """Why a listed file cannot be read as the metadata describes it (sizes
  only), or None."""
  if info is None:
    return f"{path} is not listed in {meta_path}"
  if not layout_lib.exists(path):
    return f"{path} is missing (listed in {meta_path})"
  if verify != "none" and storage.size(path) != info["bytes"]:
    return (f"{path} has {storage.size(path)} bytes, metadata says "
            f"{info['bytes']}: changed, truncated or replaced since it was written")
  return None


def _sha_checked(checked: list, meta_path: str, log) -> list:
  """`checked` ((path, problem or None, info) per file) with sha256 problems
  added for the files whose sizes were right."""
  todo = [(p, i) for p, problem, i in checked
          if problem is None and not storage.is_url(p)  # URLs: size only
          and _sha_key(p, i["sha256"]) not in _CHECKED]
  total = sum(i["bytes"] for _, i in todo)
  if total >= VERIFY_LOG_BYTES:
    log(f"verifying sha256 of {len(todo)} files ({total / 1e9:.1f} GB) from {meta_path} "
        "(verify='size' skips this)...")
  bad = set()
  for p, i in todo:
    key = _sha_key(p, i["sha256"])
    if hashing.content_matches(p, i):
      _CHECKED[key] = True
    else:
      bad.add(p)
  return [(p, f"{p}: sha256 differs from {meta_path}: the file is corrupt or was changed"
           if p in bad else problem, i) for p, problem, i in checked]


def verified_files(meta: dict, where: Union[str, "layout_lib.DatasetLayout"],
                   names: List[str], verify: str = "checksum", skip_corrupt: bool = False,
                   log=print, require_some: bool = True, companions: bool = True) -> List[str]:
  """Full paths of `names` (files listed in meta) after checking them.

  Args:
    where: the dataset's layout, or its metadata path.
    verify: "checksum" checks size and sha256, "size" only the size,
      "none" only existence. Hashing is remembered per process while a file
      is unchanged; hashing more than VERIFY_LOG_BYTES logs a line first.
    skip_corrupt: drop (and log) bad files instead of raising.
    require_some: raise if no file is left.
    companions: also check the dataset's `companion_names` (vocabs,
      tokenizers) and its `external_files` the same way, so that records
      are never read against a changed vocab; a bad companion always
      raises, skip_corrupt or not.

  Raises:
    UserError: a missing, resized or changed file (unless skip_corrupt), or
      no file left.
  """
  if verify not in VERIFY_MODES:
    raise UserError(f"verify={verify!r}: must be one of {', '.join(VERIFY_MODES)}")
  lay = (layout_lib.DatasetLayout.from_meta_path(where) if isinstance(where, str)
         else where)
  meta_path = lay.meta_path
  by_name = file_infos(meta)
  todo = [(lay.path(n), by_name.get(n)) for n in names]
  todo += _companions(meta, lay, names) if companions else []
  checked = [(path, _file_problem(info, path, meta_path, verify), info)
             for path, info in todo]  # (path, problem or None, info)
  if verify == "checksum":
    checked = _sha_checked(checked, meta_path, log)
  for _, problem, _ in checked[len(names):]:  # companions: never skipped
    if problem is not None:
      raise UserError(problem)
  good = []
  for path, problem, _ in checked[:len(names)]:
    if problem is None:
      good.append(path)
    elif skip_corrupt:
      log(f"skipping corrupt file: {problem}")
    else:
      raise UserError(problem)
  if not good and require_some:
    raise UserError(f"{meta_path}: no readable record files left")
  return good
