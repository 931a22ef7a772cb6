"""Input files: comma-separated glob patterns and checked UTF-8 line reading.

Files are read line by line (`read_lines`), or cut into byte ranges of whole
lines (`line_chunks`) that worker processes read on their own
(`chunk_lines`), so reading and decoding run in parallel and this process
only hands out (path, start, end) triples.
"""

import dataclasses
import glob
import os
from typing import Iterator, List, Optional, Sequence, Tuple

from textrecords.files import storage
from textrecords.errors import UserError

DECODE_MODES = ("strict", "replace", "skip_line")
BOM = b"\xef\xbb\xbf"  # UTF-8 byte-order mark: dropped at the start of a file
BINARY_PROBE_BYTES = 8192  # a NUL byte in a file's first bytes: a binary file, not text
# Read-ahead of a URL opened to find a unit's line ends or read its range:
# with s3fs's default (50 MiB) each 1 MiB unit fetched 50 MiB and more, and
# held it (mt's Beam workers on S3: 360 -> 524 MB from 25 to 100 MB).
URL_BLOCK_BYTES = 1 << 20
UNIT_OVERHANG_BYTES = 1 << 16  # read past a URL range's end for its last line's end


def drop_bom(data: bytes) -> bytes:
  """`data` without a UTF-8 byte-order mark at its start (editors on Windows add one).

  >>> drop_bom(b"\\xef\\xbb\\xbfcaf\\xc3\\xa9"), drop_bom(b"abc")
  (b'caf\\xc3\\xa9', b'abc')
  """
  return data[len(BOM):] if data.startswith(BOM) else data


@dataclasses.dataclass
class DecodeErrorCounts:
  """Lines that were not valid UTF-8 and were kept with U+FFFD or dropped.

  Filled by `read_lines(..., counts=)` and `chunk_lines(..., counts=)`;
  worker processes send `as_tuple()` back and the parent `add`s them, so the
  totals do not depend on how the input was cut. Generators report them in
  their summary line and metadata.

  >>> c = DecodeErrorCounts(); c.replaced += 2; c.as_dict(), c.describe()
  ({'replaced_lines': 2, 'skipped_lines': 0}, '2 lines with invalid UTF-8 replaced')
  """
  replaced: int = 0
  skipped: int = 0

  def add(self, other) -> None:
    """Adds another DecodeErrorCounts or a (replaced, skipped) tuple.

    >>> c = DecodeErrorCounts(1, 0); c.add((2, 3)); c.add(DecodeErrorCounts(0, 1)); c
    DecodeErrorCounts(replaced=3, skipped=4)
    """
    replaced, skipped = other if isinstance(other, tuple) else other.as_tuple()
    self.replaced += replaced
    self.skipped += skipped

  def as_tuple(self) -> Tuple[int, int]:
    return self.replaced, self.skipped

  def as_dict(self) -> dict:
    return {"replaced_lines": self.replaced, "skipped_lines": self.skipped}

  def describe(self) -> str:
    """'' when nothing was replaced or skipped, else a short phrase."""
    parts = []
    if self.replaced:
      parts.append(f"{self.replaced:,} line{'s' * (self.replaced != 1)} with invalid "
                   "UTF-8 replaced")
    if self.skipped:
      parts.append(f"{self.skipped:,} line{'s' * (self.skipped != 1)} with invalid "
                   "UTF-8 skipped")
    return ", ".join(parts)


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


def read_lines(path: str, on_decode_error: str = "strict", drop_cr: bool = False,
               counts: Optional[DecodeErrorCounts] = None) -> Iterator[Tuple[int, str]]:
  """Yields (line_number, text) for each line of a UTF-8 file, newline removed.

  A byte-order mark at the start of the file is dropped; `counts`, if given,
  counts the lines replaced or skipped.

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
  with _open_text_file(path) as f:
    if f.read(len(BOM)) != BOM:
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
          if counts is not None:
            counts.replaced += 1
        elif on_decode_error == "skip_line":
          if counts is not None:
            counts.skipped += 1
          continue
        else:
          raise _decode_error(path, lineno, e.start) from e
      yield lineno, text


def _open_text_file(path: str, block_size: Optional[int] = None):
  """`path` (local or URL; `block_size`: a URL's read-ahead) opened for
  binary reading at offset 0, after checking it is not binary."""
  if storage.is_url(path):
    f = storage.open_read(path, block_size=block_size)
  else:
    try:
      f = open(path, "rb")
    except OSError as e:
      raise UserError(f"cannot read {path}: {e.strerror}") from e
  if b"\x00" in f.read(BINARY_PROBE_BYTES):
    f.close()
    raise _binary_error(path)
  f.seek(0)
  return f


def _binary_error(path: str) -> UserError:
  return UserError(f"{path}: looks like a binary file (NUL bytes), expected UTF-8 text")


def _decode_error(path: str, lineno: int, byte: int) -> UserError:
  return UserError(f"{path}:{lineno}: invalid UTF-8 at byte {byte} of the line; "
                   "use --on_decode_error=replace or skip_line to continue past it")


@dataclasses.dataclass(frozen=True)
class LineChunk:
  """Bytes [start, end) of `path`: whole lines (ends just after a newline or at EOF).

  `data`, when set, holds those bytes already read (`range_read`).
  """
  path: str
  start: int
  end: int
  data: Optional[bytes] = dataclasses.field(default=None, compare=False, repr=False)


def line_chunks(files: Sequence[str], chunk_bytes: int = 1 << 20) -> List[LineChunk]:
  """Cuts files into chunks of about `chunk_bytes`, each ending at a line end.

  Reading the chunks in order with `chunk_lines` gives the lines `read_lines`
  gives. Checks each file as `read_lines` does (readable, not binary). A
  file holding "ab\\ncd\\nef" cut with chunk_bytes=4 gives the chunks
  [0, 6) ("ab\\ncd\\n") and [6, 8) ("ef"); an empty file gives none.
  """
  chunks = []
  for path in files:
    with _open_text_file(path) as f:
      size = f.seek(0, os.SEEK_END)
      pos = 0
      while pos < size:
        end = pos + chunk_bytes
        if end >= size:
          end = size
        else:
          f.seek(end - 1)
          end = end - 1 + len(f.readline())
        chunks.append(LineChunk(path, pos, end))
        pos = end
  return chunks


def line_start_at_or_after(f, pos: int, size: int) -> int:
  """The offset of the first line that starts at or after `pos` (or `size`)."""
  if pos <= 0:
    return 0
  if pos >= size:
    return size
  f.seek(pos - 1)
  return pos - 1 + len(f.readline())


def whole_lines(f, start: int, end: int, size: int) -> Tuple[int, int]:
  """(lo, hi): the bytes of the whole lines that start in [start, end) of
  the open file `f` of `size` bytes (empty when none starts there)."""
  lo = line_start_at_or_after(f, start, size)
  return lo, max(lo, line_start_at_or_after(f, end, size))


@dataclasses.dataclass(frozen=True)
class RangeRead:
  """A URL range's whole lines read in one request (`range_read`).

  Attributes:
    chunk: the lines that start in the range, with their bytes (`data`).
    size: the file's size where the read reached its end, else None (the
      file goes on past the range's end).
    head: the file's first BINARY_PROBE_BYTES (fewer at its end) where the
      range starts at 0, else b"".
    last_byte: the file's last byte where `size` is known, else b"".
  """
  chunk: LineChunk
  size: Optional[int]
  head: bytes
  last_byte: bytes


def _window_line_start(data: bytes, base: int, pos: int, size: Optional[int]) -> Optional[int]:
  """`line_start_at_or_after` on bytes `data` read from offset `base` (up
  to `size` where known); None where they do not show it."""
  if pos <= 0:
    return 0
  if size is not None and pos >= size:
    return size
  i = data.find(b"\n", pos - 1 - base)
  if i >= 0:
    return base + i + 1
  return size


def range_read(path: str, start: int, end: int) -> Optional[RangeRead]:
  """The whole lines that start in bytes [start, end) of `path` (`start`
  inside the file) from one ranged read of the range, the byte before it
  and UNIT_OVERHANG_BYTES after it; None where a line runs past that
  (then read them as `range_chunk` does)."""
  base = max(0, start - 1)
  stop = max(end + UNIT_OVERHANG_BYTES, BINARY_PROBE_BYTES if start <= 0 else 0)
  data = storage.read_range(path, base, stop)
  size = base + len(data) if len(data) < stop - base else None
  lo = _window_line_start(data, base, start, size)
  hi = _window_line_start(data, base, end, size)
  if lo is None or hi is None:
    return None
  hi = max(lo, hi)
  return RangeRead(LineChunk(path, lo, hi, data[lo - base:hi - base]), size,
                   data[:BINARY_PROBE_BYTES] if base == 0 else b"",
                   data[-1:] if size else b"")


def range_chunk(path: str, start: int, end: int) -> LineChunk:
  """The whole lines that start in bytes [start, end) of `path`, as a chunk.

  Ranges cut from a file's size alone (`start`, `end` anywhere) give chunks
  that tile the file: each line belongs to the range it starts in, so
  reading the chunks of consecutive ranges in order gives `read_lines`'
  lines. Only the bytes around both ends are read here; on a URL, the
  range's bytes too, in one request (`range_read`), and the file is
  checked for NUL bytes by its first range only.
  """
  if storage.is_url(path) and start < end:
    got = range_read(path, start, end)
    if got is not None:
      if b"\x00" in got.head:
        raise _binary_error(path)
      return got.chunk
  with _open_text_file(path, URL_BLOCK_BYTES) as f:
    size = f.seek(0, os.SEEK_END)
    lo, hi = whole_lines(f, start, end, size)
  return LineChunk(path, lo, hi)


def chunk_lines(chunk: LineChunk, on_decode_error: str = "strict",
                drop_cr: bool = False, counts: Optional[DecodeErrorCounts] = None,
                positions: Optional[list] = None) -> Tuple[List[str], int]:
  """The lines of a chunk as `read_lines` yields them, and how many lines it has.

  The count includes lines dropped by on_decode_error="skip_line"; `counts`,
  if given, counts the lines replaced or skipped (as `read_lines` does);
  `positions`, if given, gets (index in the returned lines, 1, 0) for each
  replaced line and (index of the next returned line, 0, 1) for each skipped
  one.

  Raises:
    UserError: invalid UTF-8 (strict), naming the file and the line's number
      in the file.
  """
  data = chunk.data
  if data is None:
    data = _read_range(chunk.path, chunk.start, chunk.end - chunk.start)
  if chunk.start == 0:
    data = drop_bom(data)
  if not data:
    return [], 0
  if drop_cr:
    data = data.replace(b"\r", b"")
  try:
    # "\n" never occurs inside a multi-byte sequence, so decoding the whole
    # chunk and splitting equals decoding line by line.
    text = data.decode("utf-8")
  except UnicodeDecodeError:
    text = None
  if text is not None:
    lines = text.split("\n")
    if text.endswith("\n"):
      lines.pop()
    if not drop_cr and "\r" in text:
      lines = [l[:-1] if l.endswith("\r") else l for l in lines]
    return lines, len(lines)
  raws = data.split(b"\n")
  if data.endswith(b"\n"):
    raws.pop()
  lines = []
  for i, raw in enumerate(raws):
    if not drop_cr and raw.endswith(b"\r"):
      raw = raw[:-1]
    try:
      lines.append(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
      if on_decode_error not in ("replace", "skip_line"):
        raise _decode_error(chunk.path, lines_before(chunk) + i + 1, e.start) from e
      replaced = on_decode_error == "replace"
      if positions is not None:
        positions.append((len(lines), int(replaced), int(not replaced)))
      if replaced:
        lines.append(raw.decode("utf-8", errors="replace"))
        if counts is not None:
          counts.replaced += 1
      elif counts is not None:
        counts.skipped += 1
  return lines, len(raws)


def _read_range(path: str, start: int, size: int) -> bytes:
  if storage.is_url(path):  # the range and URL_BLOCK_BYTES at most, not 50 MiB
    with storage.open_read(path, block_size=URL_BLOCK_BYTES) as f:
      f.seek(start)
      return f.read(size)
  try:
    with open(path, "rb") as f:
      return os.pread(f.fileno(), size, start)
  except OSError as e:
    raise UserError(f"cannot read {path}: {e.strerror}") from e


def lines_before(chunk: LineChunk) -> int:
  """Newlines in the file before the chunk (for error messages: it reads the
  file up to the chunk)."""
  n, pos = 0, 0
  with _open_text_file(chunk.path) as f:
    while pos < chunk.start:
      block = f.read(min(1 << 22, chunk.start - pos))
      if not block:
        break
      n += block.count(b"\n")
      pos += len(block)
  return n
