"""usage: python -m textrecords.index RECORD_FILE... (console script `textrecords-index`)

Writes RECORD_FILE.index (the record offsets, `textrecords.datasets.index`)
beside each uncompressed TFRecord file, checking every record's CRC. No flags:
the arguments are record files (`--` before one whose name starts with "-").
"""

from textrecords.datasets import dataset_writer
from textrecords.datasets import index
from textrecords.files import storage
from textrecords.errors import UserError
from textrecords.runs import cli


def main(argv):
  """Writes FILE.index beside each record file of `argv[1:]` (absl's leftovers)."""
  if len(argv) < 2:
    raise UserError("no record files given: python -m textrecords.index RECORD_FILE... "
                    "(--help for usage)")
  for path in argv[1:]:
    out = _index_one(path)
    print(f"{out}: {len(index.load(out))} records")


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


def define_flags():
  """None of its own: the command takes record files (and absl's flags, as every command)."""


# the `textrecords-index` console script
entry_point = cli.entry_point(
    define_flags, main,
    unknown_flag="{flag}: unknown option (textrecords.index takes record files only; "
    "--help for usage)")


if __name__ == "__main__":
  entry_point()
