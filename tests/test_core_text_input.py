"""text_input.line_chunks/chunk_lines: the same lines as read_lines, any chunk size."""

import random

import pytest

from textrecords.files import text_input
from textrecords.errors import UserError


def _chunked(path, size, mode="strict", drop_cr=False, decode_errors=None):
  lines, counts = [], 0
  for chunk in text_input.line_chunks([str(path)], chunk_bytes=size):
    got, n = text_input.chunk_lines(chunk, mode, drop_cr, counts=decode_errors)
    lines.extend(got)
    counts += n
  return lines, counts


@pytest.mark.parametrize("drop_cr", [False, True])
@pytest.mark.parametrize("mode", ["replace", "skip_line"])
def test_chunks_give_read_lines_lines(tmp_path, mode, drop_cr):
  rng = random.Random(0)
  pieces = ["word", "é", "\r", " ", "", "\t", "x\ry", "\u2028"]
  parts = []
  for i in range(300):
    parts.append("".join(rng.choice(pieces) for _ in range(rng.randint(0, 6))).encode())
    if i % 37 == 5:
      parts[-1] += b"\xff\xfe bad"
  data = b"\n".join(parts)  # no trailing newline
  path = tmp_path / "t.txt"
  for tail in (b"", b"\n"):
    path.write_bytes(data + tail)
    want_errors = text_input.DecodeErrorCounts()
    want = [t for _, t in text_input.read_lines(str(path), mode, drop_cr, want_errors)]
    assert sum(want_errors.as_tuple()) == 8  # lines 5, 42, ..., 264
    total = data.count(b"\n") + 1
    for size in (1, 7, 64, 1 << 20):
      errors = text_input.DecodeErrorCounts()
      assert _chunked(path, size, mode, drop_cr, errors) == (want, total)
      assert errors == want_errors, size


def test_chunks_end_on_line_ends(tmp_path):
  path = tmp_path / "t.txt"
  path.write_bytes(b"ab\ncd\nef")
  assert [(c.start, c.end) for c in text_input.line_chunks([str(path)], 4)] == [(0, 6), (6, 8)]
  path.write_bytes(b"")
  assert text_input.line_chunks([str(path)]) == []


def test_strict_error_names_the_line_in_the_file(tmp_path):
  path = tmp_path / "t.txt"
  path.write_bytes(b"a\nb\nc\nd\xff\ne\n")
  with pytest.raises(UserError, match=r"t.txt:4: invalid UTF-8 at byte 1"):
    _chunked(path, 3)
  with pytest.raises(UserError, match="binary"):
    (tmp_path / "b.bin").write_bytes(b"a\x00b")
    text_input.line_chunks([str(tmp_path / "b.bin")])
