"""textrecords.varint: the scalar, table and numpy encoders agree."""

import numpy as np

from textrecords import varint


def _reference(n: int) -> bytes:
  """Base-128, low 7 bits first, top bit set on every byte but the last."""
  out = []
  while n >= 128:
    out.append(n & 0x7F | 0x80)
    n >>= 7
  out.append(n)
  return bytes(out)


def test_small_table_and_encode_match_the_definition():
  assert len(varint.SMALL) == 1 << 14
  assert all(varint.SMALL[i] == _reference(i) for i in range(1 << 14))
  for n in (0, 127, 128, 16383, 16384, 2**21 - 1, 2**21, 2**63, 2**64 - 1):
    assert varint.encode(n) == _reference(n)
    assert varint.decode(b"x" + varint.encode(n), 1) == (n, 1 + len(_reference(n)))


def test_pack_equals_the_scalar_encoder():
  values = np.array([0, 1, 127, 128, 300, 16383, 16384, 2**35 + 7], dtype=np.int64)
  assert bytes(varint.pack(values)) == b"".join(_reference(int(v)) for v in values)
