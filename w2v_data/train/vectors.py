"""Trained vectors in word2vec text format (no TensorFlow).

The format (word2vec.c's `-binary 0`, read by gensim's `load_word2vec_format`):
a header line `count dim`, then one line per entry, `name v1 v2 ...`. Floats
are written with 9 significant digits, enough to give back the exact float32,
so two files are byte-identical exactly when their matrices are.

>>> import io, numpy as np
>>> buf = io.StringIO()
>>> write_text(buf, ["<unk>", "cat"], np.array([[0, 0.5], [1.25, -2]], np.float32))
>>> print(buf.getvalue(), end="")
2 2
<unk> 0 0.5
cat 1.25 -2
"""

import hashlib
import os
from typing import IO, List, Sequence, Tuple

import numpy as np

from textrecords.errors import UserError


def write_text(f: IO[str], names: Sequence[str], matrix: np.ndarray):
  """Writes `names` and the rows of `matrix` (float32) in word2vec text format."""
  m = np.asarray(matrix, dtype=np.float32)
  if m.ndim != 2 or m.shape[0] != len(names):
    raise ValueError(f"{len(names)} names for a matrix of shape {m.shape}")
  f.write(f"{m.shape[0]} {m.shape[1]}\n")
  for name, row in zip(names, m.tolist()):
    if not name or any(c.isspace() for c in name):
      raise ValueError(f"name {name!r} is empty or has whitespace")
    f.write(name + " " + " ".join(format(v, ".9g") for v in row) + "\n")


def save(path: str, names: Sequence[str], matrix: np.ndarray) -> str:
  """Writes the vectors to `path` (temp name, then rename); returns its sha256.

  Raises:
    UserError: the folder does not exist or cannot be written.
  """
  tmp = f"{path}.tmp-{os.getpid()}"
  try:
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
      write_text(f, names, matrix)
    os.replace(tmp, path)
  except OSError as e:
    if os.path.exists(tmp):
      os.unlink(tmp)
    raise UserError(f"--save_vectors={path}: cannot write: {e.strerror}") from e
  with open(path, "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()


def load(path: str) -> Tuple[List[str], np.ndarray]:
  """Reads a word2vec text file; returns (names, float32 matrix).

  Raises:
    UserError: unreadable file, or a line that does not match the header.
  """
  try:
    with open(path, encoding="utf-8") as f:
      lines = f.read().split("\n")
  except (OSError, UnicodeDecodeError) as e:
    raise UserError(f"{path}: cannot read word2vec text: {e}") from e
  try:
    count, dim = (int(x) for x in lines[0].split())
  except ValueError:
    raise UserError(f"{path}:1: expected a header 'count dim'") from None
  names, rows = [], []
  for lineno, line in enumerate(lines[1:count + 1], start=2):
    parts = line.split(" ")
    if len(parts) != dim + 1:
      raise UserError(f"{path}:{lineno}: expected a name and {dim} numbers")
    names.append(parts[0])
    rows.append([float(x) for x in parts[1:]])
  if len(names) != count:
    raise UserError(f"{path}: header says {count} vectors, found {len(names)}")
  return names, np.asarray(rows, dtype=np.float32).reshape(count, dim)


def without_unk(names: Sequence[str], matrix: np.ndarray, unk: str = "<unk>"):
  """Drops the <unk> row (id 0 of a w2v_data vocab: never trained) from word vectors.

  >>> without_unk(["<unk>", "a"], np.zeros((2, 1)))[0]
  ['a']
  """
  if len(names) and names[0] == unk:
    return list(names[1:]), matrix[1:]
  return list(names), matrix
