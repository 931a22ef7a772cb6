"""`python -m textrecords.index FILE...` (console script `textrecords-index`):
writes the record offset index (`textrecords.datasets.index`) beside each
uncompressed TFRecord file, checking every record's CRC."""

import os
import sys

from textrecords.datasets import index
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
      if not os.path.isfile(path):
        raise UserError(f"{path}: no such file")
      out = index.build(path)
    except UserError as e:
      print(f"error: {e}", file=sys.stderr)
      return 2
    print(f"{out}: {len(index.load(out))} records")
  return 0


def entry_point():
  """The `textrecords-index` console script (a closed stdout ends it quietly:
  `cli.run_script`)."""
  sys.exit(cli.run_script(main))


if __name__ == "__main__":
  entry_point()
