"""Where a dataset's files live and what they are called: the one place.

A dataset is one metadata file plus the files it lists, all in one folder:

| what | folder output (w2v_data, mt_data) | file output (bert_data) |
|---|---|---|
| location given to create | `out/d` (`--output_dir`) | `out/train.tfrecord` (`--output_file`) |
| metadata | `out/d/meta.json` | `out/train.tfrecord.meta.json` |
| records of split S | `out/d/S.tfrecord` | `out/train.tfrecord` (split "train" only) |
| with N > 1 shards | `out/d/S.tfrecord-SSSSS-of-NNNNN` | `out/train.tfrecord-SSSSS-of-NNNNN` |
| vocab, tokenizer, ... | `out/d/NAME` | (none: bert's vocab is an input) |
| offset index of a record file F | `F.index` (uncompressed, non-empty F) | `F.index` |

Shard names follow tensorflow_datasets' `ShardedFileTemplate`
(`%05d-of-%05d`): at least five digits, more when the count needs them, so
`x-00000-of-100000` is a valid name and parses back.

Every join, split, existence check and glob goes through the small functions
at the end of this module (`join`, `parent`, `basename`, ...), so storage
other than local paths only has to change them.

Example:
  >>> lay = DatasetLayout.for_dir("out/w2v")
  >>> lay.meta_path
  'out/w2v/meta.json'
  >>> lay.record_paths("train", 2)
  ['out/w2v/train.tfrecord-00000-of-00002', 'out/w2v/train.tfrecord-00001-of-00002']
  >>> parse_shard("train.tfrecord-00001-of-100000")
  ShardName(base='train.tfrecord', index=1, count=100000)
"""

import dataclasses
import re
from typing import List, NamedTuple, Optional

from textrecords.files import storage

META_NAME = "meta.json"        # metadata of a folder output
META_SUFFIX = ".meta.json"     # metadata beside a file output
RECORDS_SUFFIX = ".tfrecord"   # records of split S in a folder output: S.tfrecord
INDEX_SUFFIX = ".index"        # a record file's offset index: FILE.index
DEFAULT_SPLIT = "train"

_SHARD = re.compile(r"^(?P<base>.+)-(?P<index>\d{5,})-of-(?P<count>\d{5,})$")


class ShardName(NamedTuple):
  base: str
  index: int
  count: int


def shard_name(base: str, index: int, count: int) -> str:
  """`base-SSSSS-of-NNNNN` (five digits at least, as tensorflow_datasets).

  >>> shard_name("x", 7, 100000)
  'x-00007-of-100000'
  """
  if not 0 <= index < count:
    raise ValueError(f"shard {index} of {count}: out of range")
  return f"{base}-{index:05d}-of-{count:05d}"


def parse_shard(name: str) -> Optional[ShardName]:
  """(base, index, count) of a shard name, or None if `name` is not one."""
  m = _SHARD.match(name)
  if m is None:
    return None
  index, count = int(m.group("index")), int(m.group("count"))
  if index >= count:
    return None
  return ShardName(m.group("base"), index, count)


def shard_names(base: str, num_shards: int) -> List[str]:
  """Names of `num_shards` shards of `base`; one shard keeps the plain name."""
  if num_shards < 1:
    raise ValueError(f"num_shards={num_shards}: must be >= 1")
  if num_shards == 1:
    return [base]
  return [shard_name(base, i, num_shards) for i in range(num_shards)]


def shard_paths(output: str, num_shards: int) -> List[str]:
  """Shard paths of one output file (its folder joined to `shard_names`).

  >>> shard_paths("out/train.tfrecord", 2)
  ['out/train.tfrecord-00000-of-00002', 'out/train.tfrecord-00001-of-00002']
  """
  folder = parent(output)
  return [join(folder, n) for n in shard_names(basename(output), num_shards)]


def index_name(name: str) -> str:
  """The name of the offset index of record file `name`."""
  return name + INDEX_SUFFIX


def is_metadata_name(name: str) -> bool:
  return name == META_NAME or name.endswith(META_SUFFIX)


def is_index_name(name: str) -> bool:
  """True for a record file's offset index (`textrecords.datasets.index`)."""
  return name.endswith(INDEX_SUFFIX)


def is_data_name(name: str) -> bool:
  """False for metadata, offset indexes and hidden (temporary) files."""
  return not (name.startswith(".") or is_metadata_name(name) or is_index_name(name))


@dataclasses.dataclass(frozen=True)
class DatasetLayout:
  """The paths of one dataset.

  Attributes:
    root: the folder holding the metadata and every file it lists.
    meta_name: the metadata's name in `root`.
    file_stem: for a file output, the output's name (its only split's
      records); None for a folder output.
  """
  root: str
  meta_name: str
  file_stem: Optional[str] = None

  @classmethod
  def for_dir(cls, output_dir: str) -> "DatasetLayout":
    """A folder output: `DIR/meta.json`, `DIR/<split>.tfrecord*`, `DIR/<aux>`."""
    return cls(strip_sep(output_dir), META_NAME)

  @classmethod
  def for_file(cls, output_file: str) -> "DatasetLayout":
    """A file output: `<file>.meta.json` beside `<file>` (or its shards)."""
    name = basename(output_file)
    return cls(parent(output_file), name + META_SUFFIX, name)

  @classmethod
  def from_meta_path(cls, meta_path: str) -> "DatasetLayout":
    """The layout whose metadata is `meta_path`."""
    name = basename(meta_path)
    if name.endswith(META_SUFFIX) and len(name) > len(META_SUFFIX):
      return cls.for_file(meta_path[:-len(META_SUFFIX)])
    if name == META_NAME:
      return cls.for_dir(parent(meta_path))
    raise ValueError(f"{meta_path}: a metadata file is named {META_NAME} or "
                     f"<output>{META_SUFFIX}")

  @property
  def location(self) -> str:
    """What was given to create: the output folder or the output file."""
    return self.root if self.file_stem is None else join(self.root, self.file_stem)

  @property
  def meta_path(self) -> str:
    return join(self.root, self.meta_name)

  def path(self, name: str) -> str:
    """The path of the dataset's file `name` (as listed in the metadata)."""
    return join(self.root, name)

  def record_stem(self, split: str = DEFAULT_SPLIT) -> str:
    """The record file name of `split` before any shard suffix."""
    if self.file_stem is not None:
      if split != DEFAULT_SPLIT:
        raise ValueError(f"a file output has one split ({DEFAULT_SPLIT!r}), not {split!r}")
      return self.file_stem
    return split + RECORDS_SUFFIX

  def record_names(self, split: str = DEFAULT_SPLIT, num_shards: int = 1) -> List[str]:
    return shard_names(self.record_stem(split), num_shards)

  def record_paths(self, split: str = DEFAULT_SPLIT, num_shards: int = 1) -> List[str]:
    return [self.path(n) for n in self.record_names(split, num_shards)]

  def index_path(self, name: str) -> str:
    """Where the offset index of record file `name` goes (`<file>.index`)."""
    return self.path(index_name(name))


# -- the storage edge: every path operation of the layout and the resolver,
# routed to textrecords.files.storage (local paths and storage URLs).

join = storage.join
parent = storage.parent
basename = storage.basename
strip_sep = storage.strip_sep
exists = storage.exists
is_dir = storage.is_dir
has_magic = storage.has_magic
glob = storage.glob
list_dir = storage.list_dir
