"""sha256 of bytes and files: the one place the code base computes content hashes.

>>> sha256_bytes(b"abc")[:16]
'ba7816bf8f01cfea'
"""

import hashlib


def sha256_bytes(data: bytes) -> str:
  """Hex sha256 of `data`."""
  return hashlib.sha256(data).hexdigest()


def stream_sha256(f) -> str:
  """Hex sha256 of what a binary file object holds, read in 1 MiB blocks."""
  h = hashlib.sha256()
  for block in iter(lambda: f.read(1 << 20), b""):
    h.update(block)
  return h.hexdigest()


def file_sha256(path: str) -> str:
  """Hex sha256 of a local file (any size; `storage.sha256` for URLs too)."""
  with open(path, "rb") as f:
    return stream_sha256(f)
