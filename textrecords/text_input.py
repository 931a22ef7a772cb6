"""Input files: comma-separated glob patterns and checked UTF-8 line reading."""

import glob
import os
from typing import Iterator, List, Tuple

from textrecords import storage
from textrecords.errors import UserError

DECODE_MODES = ("strict", "replace", "skip_line")


def expand_patterns(patterns: str, flag: str = "--input_file") -> List[str]:
  """Expands a comma-separated list of globs, each in sorted order, in list order.

  Raises:
    UserError: if the flag is empty or a pattern matches no file.
  """
  if not patterns or not patterns.strip():
    raise UserError(f"{flag} is required (comma-separated file paths or globs)")
  files = []
  for pattern in patterns.split(","):
    pattern = pattern.strip()
    if not pattern:
      continue
    pattern = storage.check(pattern, flag)
    if storage.is_url(pattern):
      matches = storage.glob(pattern) if storage.has_magic(pattern) else (
          [pattern] if storage.exists(pattern) else [])
      matches = [m for m in matches if not storage.is_dir(m)]
      if not matches:
        raise UserError(f"{flag}: no file matches {pattern!r}")
      files.extend(matches)
      continue
    matches = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else (
        [pattern] if os.path.exists(pattern) else [])
    if not matches:
      raise UserError(f"{flag}: no file matches {pattern!r}")
    for m in matches:
      if os.path.isdir(m):
        raise UserError(f"{flag}: {m} is a directory, not a text file")
      if not os.access(m, os.R_OK):
        raise UserError(f"{flag}: cannot read {m} (permission denied)")
    files.extend(matches)
  return files


def check_decode_mode(mode: str) -> str:
  if mode not in DECODE_MODES:
    raise UserError(f"--on_decode_error={mode!r}: must be one of {', '.join(DECODE_MODES)}")
  return mode


def read_lines(path: str, on_decode_error: str = "strict",
               drop_cr: bool = False) -> Iterator[Tuple[int, str]]:
  """Yields (line_number, text) for each line of a UTF-8 file, newline removed.

  Args:
    path: the file.
    on_decode_error: "strict" raises UserError naming file and line;
      "replace" decodes with U+FFFD; "skip_line" drops the line.
    drop_cr: remove every carriage return byte (TensorFlow's line reader
      does this); otherwise a trailing "\\r" before "\\n" is removed.

  Raises:
    UserError: invalid UTF-8 (strict), or a file that looks binary (NUL bytes
      in its first 8 KiB), or an I/O error.
  """
  if storage.is_url(path):
    f = storage.open_read(path)
  else:
    try:
      f = open(path, "rb")
    except OSError as e:
      raise UserError(f"cannot read {path}: {e.strerror}") from e
  with f:
    head = f.read(8192)
    if b"\x00" in head:
      raise UserError(f"{path}: looks like a binary file (NUL bytes), expected UTF-8 text")
    f.seek(0)
    for lineno, raw in enumerate(f, 1):
      if drop_cr:
        raw = raw.replace(b"\r", b"")
      if raw.endswith(b"\n"):
        raw = raw[:-1]
      if not drop_cr and raw.endswith(b"\r"):
        raw = raw[:-1]
      try:
        text = raw.decode("utf-8")
      except UnicodeDecodeError as e:
        if on_decode_error == "replace":
          text = raw.decode("utf-8", errors="replace")
        elif on_decode_error == "skip_line":
          continue
        else:
          raise UserError(
              f"{path}:{lineno}: invalid UTF-8 at byte {e.start} of the line; "
              "use --on_decode_error=replace or skip_line to continue past it") from e
      yield lineno, text
