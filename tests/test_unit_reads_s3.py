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
  """The bytes fetched for a unit: its range and a block at most each read."""
  path, url = text
  s3file = type(storage.open_read(url))
  fetched = []
  real = s3file._fetch_range

  def counted(self, start, end):
    data = real(self, start, end)
    fetched.append(len(data))
    return data

  monkeypatch.setattr(s3file, "_fetch_range", counted)
  start, end = 1_000_000, 1_500_000
  chunk = text_input.range_chunk(url, start, end)
  text_input.chunk_lines(chunk)
  block = text_input.URL_BLOCK_BYTES  # a read of n bytes fetches n + block; a readline, 2 blocks
  most = max(end - start, block) + block + text_input.BINARY_PROBE_BYTES
  assert fetched and max(fetched) <= most
  assert os.path.getsize(path) > 2 * most  # s3fs's 50 MiB default fetched all of it at once
