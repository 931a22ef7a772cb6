"""A unit's reads of an s3:// input: the local file's bytes, fetched with a
small read-ahead (`text_input.URL_BLOCK_BYTES`), not s3fs's 50 MiB."""

import os

import pytest

from textrecords.engine import protocol
from textrecords.files import storage
from textrecords.files import text_input
from w2v_data import corpus

LINE = b"the quick brown fox jumps over the lazy dog %d\n"


@pytest.fixture(scope="module")
def text(s3_server, tmp_path_factory):
  """(local path, URL) of the same ~6 MiB text."""
  _, fs = s3_server
  path = str(tmp_path_factory.mktemp("units") / "a.txt")
  with open(path, "wb") as f:
    f.write(b"".join(LINE % i for i in range(140000)))
  fs.put(path, "bkt/units/a.txt")
  return path, "s3://bkt/units/a.txt"


def test_unit_chunks_and_lines_equal_local(text):
  path, url = text
  size = os.path.getsize(path)
  for unit in protocol.units_from_sizes([path], 1_500_000):
    local = text_input.range_chunk(path, unit.start, unit.end)
    remote = text_input.range_chunk(url, unit.start, unit.end)
    assert (remote.start, remote.end) == (local.start, local.end)
    assert (text_input.chunk_lines(text_input.LineChunk(url, remote.start, remote.end))
            == text_input.chunk_lines(local))
    got, lo = corpus.read_unit(url, unit.start, unit.end)
    want, lo_local = corpus.read_unit(path, unit.start, unit.end)
    assert lo == lo_local and got.tokens == want.tokens and got.num_lines == want.num_lines
  assert unit.end == size
  assert storage.sha256(url) == storage.sha256(path)  # streamed with a bounded read-ahead


def test_unit_reads_fetch_the_range_not_the_file(text, monkeypatch):
  """A unit's lines come from one ranged read: its range, the byte before
  and UNIT_OVERHANG_BYTES after it (no HEAD, no read of the file's start)."""
  path, url = text
  reads = []
  real = storage.read_range

  def counted(p, start, end):
    data = real(p, start, end)
    reads.append((start, end, len(data)))
    return data

  monkeypatch.setattr(storage, "read_range", counted)
  monkeypatch.setattr(storage, "open_read", None)  # no other read
  start, end = 1_000_000, 1_500_000
  chunk = text_input.range_chunk(url, start, end)
  lines, n = text_input.chunk_lines(chunk)
  assert reads == [(start - 1, end + text_input.UNIT_OVERHANG_BYTES,
                    end - start + 1 + text_input.UNIT_OVERHANG_BYTES)]
  monkeypatch.undo()
  local = text_input.range_chunk(path, start, end)
  assert (chunk.start, chunk.end) == (local.start, local.end)
  assert (lines, n) == text_input.chunk_lines(local)
  assert os.path.getsize(path) > 4 * (end - start)


def test_unit_reads_lines_past_the_overhang(s3_server, tmp_path):
  """A line longer than the overhang, a file without a final newline, and
  a binary file's first unit read as a local file's."""
  _, fs = s3_server
  long = b"x" * (3 * text_input.UNIT_OVERHANG_BYTES)
  data = b"a\n" + long + b"\nb\n" + long + b"\ntail"
  path = str(tmp_path / "long.txt")
  with open(path, "wb") as f:
    f.write(data)
  fs.put(path, "bkt/units/long.txt")
  url = "s3://bkt/units/long.txt"
  for unit in protocol.units_from_sizes([path], 5000):
    local = text_input.range_chunk(path, unit.start, unit.end)
    remote = text_input.range_chunk(url, unit.start, unit.end)
    assert (remote.start, remote.end) == (local.start, local.end)
    assert text_input.chunk_lines(remote) == text_input.chunk_lines(local)
    got, lo = corpus.read_unit(url, unit.start, unit.end)
    want, lo_local = corpus.read_unit(path, unit.start, unit.end)
    assert lo == lo_local and got.tokens == want.tokens and got.num_lines == want.num_lines
  fs.pipe("bkt/units/bin.txt", b"ab\x00cd\n" * 10)
  with pytest.raises(Exception, match="looks like a binary file"):
    text_input.range_chunk("s3://bkt/units/bin.txt", 0, 20)
