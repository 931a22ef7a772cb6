"""textrecords.wire.varint: the scalar, table and numpy encoders agree."""

import numpy as np
import pytest

from textrecords.wire import varint


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


@pytest.mark.parametrize("top", [2, 3, 4])
def test_pack_of_values_below_2_to_the_28_equals_the_scalar_encoder(top):
  """The 2-4 byte path (one uint32 per value, used bytes kept)."""
  rng = np.random.default_rng(top)
  edges = [(1 << (7 * k)) + d for k in range(1, top) for d in (-1, 0, 1)]
  values = np.concatenate([rng.integers(0, 1 << (7 * top), 500), edges, [0, (1 << (7 * top)) - 1]])
  for dtype in (np.int32, np.int64):
    assert bytes(varint.pack(values.astype(dtype))) == b"".join(
        _reference(int(v)) for v in values)


def test_unpack_inverts_pack_per_run():
  rng = np.random.default_rng(0)
  runs = [rng.integers(0, 1 << int(rng.integers(1, 63)), int(rng.integers(0, 6)))
          for _ in range(40)]
  values = np.concatenate(runs)
  sizes = np.array([varint.pack(r).size for r in runs])
  got, counts = varint.unpack(varint.pack(values), sizes)
  assert got.tolist() == values.tolist()
  assert counts.tolist() == [len(r) for r in runs]
  negative = np.frombuffer(varint.encode((1 << 64) - 5), np.uint8)
  assert varint.unpack(negative, [negative.size])[0].tolist() == [-5]


def test_truncated_varints_raise():
  for err in (ValueError, IndexError):
    with pytest.raises(err, match="truncated varint"):
      varint.decode(b"\x05\xac", 1)
  with pytest.raises(varint.TruncatedError):  # a run ends inside a varint
    varint.unpack(np.frombuffer(b"\xac\x02\x05", np.uint8), [1, 2])
  with pytest.raises(ValueError, match="longer than 10"):
    varint.unpack(np.frombuffer(b"\xff" * 10 + b"\x01", np.uint8), [11])
