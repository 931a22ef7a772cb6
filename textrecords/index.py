"""`python -m textrecords.index FILE...` (console script `textrecords-index`):
writes the record offset index (`textrecords.datasets.index`) beside each
uncompressed TFRecord file, checking every record's CRC."""

import os
import sys

from textrecords.datasets import dataset_writer
from textrecords.datasets import index
from textrecords.files import storage
from textrecords.errors import UserError
from textrecords.runs import cli


def main(argv=None) -> int:
  """`python -m textrecords.index FILE...`: writes FILE.index beside each file."""
  args = sys.argv[1:] if argv is None else argv
  wants_help = any(a.split("=", 1)[0] in cli.HELP_FLAGS for a in args)
  if not args or wants_help:
    print("usage: python -m textrecords.index RECORD_FILE...\n"
          "Writes RECORD_FILE.index (record offsets) beside each uncompressed TFRecord "
          "file, checking every record's CRC. No options.")
    return 0 if args else 2
  options = [a for a in args if a.startswith("-") and not os.path.exists(a)]
  if options:
    print(f"error: {options[0]}: unknown option (textrecords.index takes record files "
          "only; --help for usage)", file=sys.stderr)
    return 2
  for path in args:
    try:
      out = _index_one(path)
    except UserError as e:
      print(f"error: {e}", file=sys.stderr)
      return 2
    print(f"{out}: {len(index.load(out))} records")
  return 0


def _index_one(path: str) -> str:
  """Writes the index of record file `path` (local or URL) beside it; returns its path.

  Raises:
    UserError: no such file (or a storage that cannot be reached), or an
      existing file at the index's path that is not a textrecords index (the
      generators' check: `dataset_writer.check_replaceable`).
  """
  path = storage.check(path)
  if not storage.exists(path) or storage.is_dir(path):
    raise UserError(f"{path}: no such file")
  out = index.index_path(path)
  ours = {storage.basename(out)} if storage.exists(out) and not storage.is_dir(out) \
      and index.is_index_file(out) else set()
  dataset_writer.check_replaceable([out], ours, "", foreign="a textrecords index",
                                   remedy="move it away (textrecords.index replaces only "
                                   "its own index files)")
  return index.build(path, out)


def entry_point():
  """The `textrecords-index` console script (a closed stdout ends it quietly:
  `cli.run_script`)."""
  sys.exit(cli.run_script(main))


if __name__ == "__main__":
  entry_point()
