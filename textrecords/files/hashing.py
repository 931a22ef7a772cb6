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


def range_sha256(path: str, offset: int, nbytes: int) -> str:
  """Hex sha256 of bytes [offset, offset + nbytes) of a local file."""
  h = hashlib.sha256()
  with open(path, "rb") as f:
    f.seek(offset)
    left = nbytes
    while left > 0:
      block = f.read(min(left, 1 << 20))
      if not block:
        break
      h.update(block)
      left -= len(block)
  return h.hexdigest()


def segments_sha256(segments) -> str:
  """The "sha256" of a file written in segments: the hex sha256 of one
  line "OFFSET BYTES SHA256" per segment ({"offset", "bytes", "sha256"}),
  in order (a hash of the segments' hashes: no worker reads the file whole).

  >>> segments_sha256([{"offset": 0, "bytes": 3, "sha256": sha256_bytes(b"abc")}])[:12]
  '2601c2d43025'
  """
  lines = "".join(f"{s['offset']} {s['bytes']} {s['sha256']}\n" for s in segments)
  return sha256_bytes(lines.encode("ascii"))


def content_matches(path: str, info: dict) -> bool:
  """Whether a local file holds what its metadata entry `info` says (sizes
  are the caller's check): its sha256, or for a file written in segments
  (`info["segments"]`) each segment's sha256 and their `segments_sha256`."""
  segments = info.get("segments")
  if not segments:
    return file_sha256(path) == info["sha256"]
  if segments_sha256(segments) != info["sha256"]:
    return False
  return all(range_sha256(path, s["offset"], s["bytes"]) == s["sha256"] for s in segments)
