"""Finding a dataset's metadata from what a user passes to `make_dataset`.

Users pass the output path they gave the generator (`out/train.tfrecord`),
a shard glob (`out/train.tfrecord-*`), the metadata file itself, or a
comma-separated list of these. Each resolves to (metadata path, file names).
"""

import glob
import os
import re
from typing import Dict, List, Tuple

from textrecords.errors import UserError

_SHARD = re.compile(r"-\d{5}-of-\d{5}$")
META_SUFFIX = ".meta.json"


def resolve(file_pattern: str) -> List[Tuple[str, List[str]]]:
  """[(meta_path, [file names or None for all])] for a user's file pattern."""
  out: Dict[str, List[str]] = {}
  order = []
  for item in [p.strip() for p in file_pattern.split(",") if p.strip()]:
    if item.endswith(META_SUFFIX):
      pairs = [(item, None)]
    elif os.path.exists(item + META_SUFFIX):
      pairs = [(item + META_SUFFIX, None)]
    else:
      matches = sorted(glob.glob(item)) if glob.has_magic(item) else (
          [item] if os.path.exists(item) else [])
      matches = [m for m in matches if not m.endswith(META_SUFFIX)
                 and not os.path.basename(m).startswith(".")]
      if not matches:
        base = _SHARD.sub("", item)
        raise UserError(f"{item}: no such file, and no metadata {base + META_SUFFIX}: "
                        "the dataset is missing or incomplete")
      pairs = [(_SHARD.sub("", m) + META_SUFFIX, os.path.basename(m)) for m in matches]
    for meta, name in pairs:
      if meta not in out:
        out[meta] = []
        order.append(meta)
      if name is None:
        out[meta] = None
      elif out[meta] is not None:
        out[meta].append(name)
  return [(m, out[m]) for m in order]
