"""Word-vector evaluation: similarity pairs (WordSim353, SimLex-999) and analogies (no TF).

Pair files: one pair a line, `word1 word2 score` separated by tabs (or
whitespace); lines starting with '#' and blank lines are skipped, and so is
a first line whose score is not a number (a header). Analogy files
(word2vec's questions-words.txt): `: section` lines, then `a b c d` lines
("a is to b as c is to d"). Words are compared case-insensitively (as
gensim does by default); pairs and questions with a word outside the
vectors are not scored, and the coverage says how many were.

>>> import numpy as np
>>> names = ["a", "b", "c", "d"]
>>> m = np.array([[1, 0], [1, 1], [0, 1], [-1, 1]], np.float32)
>>> spearman(np.array([1.0, 2.0, 3.0]), np.array([2.0, 4.0, 9.0]))
1.0
>>> analogy_accuracy(names, m, [("s", "a", "b", "c", "d")])["correct"]
1
"""

import dataclasses
from typing import Dict, List, Sequence, Tuple

import numpy as np

from textrecords.errors import UserError


@dataclasses.dataclass(frozen=True)
class PairScore:
  """Spearman correlation of cosine similarities with human scores, and coverage."""
  spearman: float
  covered: int
  total: int


def _lines(path: str) -> List[str]:
  try:
    with open(path, encoding="utf-8") as f:
      return f.read().split("\n")
  except (OSError, UnicodeDecodeError) as e:
    raise UserError(f"{path}: cannot read: {e}") from e


def read_pairs(path: str) -> List[Tuple[str, str, float]]:
  """(word1, word2, score) of a pair file (see the module doc)."""
  pairs, seen_data = [], False
  for lineno, line in enumerate(_lines(path), start=1):
    if not line.strip() or line.lstrip().startswith("#"):
      continue
    parts = line.split("\t") if "\t" in line else line.split()
    try:
      if len(parts) < 3:
        raise ValueError
      pairs.append((parts[0].strip(), parts[1].strip(), float(parts[2])))
    except ValueError:
      if seen_data:
        raise UserError(f"{path}:{lineno}: expected 'word1 word2 score'") from None
    seen_data = True
  if not pairs:
    raise UserError(f"{path}: no word pairs found")
  return pairs


def read_analogies(path: str) -> List[Tuple[str, str, str, str, str]]:
  """(section, a, b, c, d) of an analogy file (see the module doc)."""
  out, section = [], ""
  for lineno, line in enumerate(_lines(path), start=1):
    if not line.strip():
      continue
    if line.startswith(":"):
      section = line[1:].strip()
      continue
    words = line.split()
    if len(words) != 4:
      raise UserError(f"{path}:{lineno}: expected ': section' or four words")
    out.append((section,) + tuple(words))
  if not out:
    raise UserError(f"{path}: no analogy questions found")
  return out


def _index(names: Sequence[str]) -> Dict[str, int]:
  index = {}
  for i, name in enumerate(names):
    index.setdefault(name.lower(), i)
  return index


def _unit(matrix: np.ndarray) -> np.ndarray:
  m = np.asarray(matrix, np.float64)
  return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)


def geometry(matrix: np.ndarray, bands: int = 8) -> dict:
  """Two trainers' fingerprints: vector length by frequency band, and anisotropy.

  Rows are taken in file order (word2vec files, ours and gensim's, list the
  most frequent word first) and cut into `bands` equal bands; "band_norms"
  is each band's mean vector length. "mean_cosine" is the exact mean cosine
  over all ordered pairs of distinct rows, (|sum of unit rows|^2 - n) /
  (n (n - 1)); "mean_direction" is the length of the mean unit row. Two runs
  of one algorithm with different seeds agree on these far more closely
  than on WordSim353, so a systematic gap points at an algorithmic
  difference.

  >>> g = geometry(np.array([[3.0, 4.0], [0.0, 2.0], [1.0, 0.0], [0.0, 1.0]]), bands=2)
  >>> [round(x, 3) for x in g["band_norms"]], round(g["mean_cosine"], 3)
  ([3.5, 1.0], 0.533)
  """
  m = np.asarray(matrix, np.float64)
  n = m.shape[0]
  if n < 2 or not 1 <= bands <= n:
    raise ValueError(f"geometry needs 2+ rows and 1..{n} bands (got {n} rows, {bands} bands)")
  norms = np.linalg.norm(m, axis=1)
  total = _unit(m).sum(axis=0)
  return {"band_norms": [float(norms[b].mean()) for b in np.array_split(np.arange(n), bands)],
          "mean_cosine": float((total @ total - n) / (n * (n - 1))),
          "mean_direction": float(np.linalg.norm(total) / n)}


def _ranks(x: np.ndarray) -> np.ndarray:
  """Ranks 1..n, ties given their average rank."""
  order = np.argsort(x, kind="stable")
  ranks = np.empty(len(x), np.float64)
  ranks[order] = np.arange(1, len(x) + 1)
  _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
  sums = np.bincount(inverse, weights=ranks)
  return (sums / counts)[inverse]


def spearman(a: np.ndarray, b: np.ndarray) -> float:
  """Spearman's rank correlation of two equal-length arrays (nan if undefined)."""
  ra, rb = _ranks(np.asarray(a, np.float64)), _ranks(np.asarray(b, np.float64))
  ra, rb = ra - ra.mean(), rb - rb.mean()
  denom = np.sqrt((ra * ra).sum() * (rb * rb).sum())
  return float((ra * rb).sum() / denom) if denom > 0 else float("nan")


def pair_score(names: Sequence[str], matrix: np.ndarray, pairs) -> PairScore:
  """Spearman of cosine similarity vs the pairs' scores, over the covered pairs."""
  index, unit = _index(names), _unit(matrix)
  cos, human = [], []
  for w1, w2, score in pairs:
    i, j = index.get(w1.lower()), index.get(w2.lower())
    if i is not None and j is not None:
      cos.append(float(unit[i] @ unit[j]))
      human.append(score)
  rho = spearman(np.array(cos), np.array(human)) if len(cos) >= 2 else float("nan")
  return PairScore(rho, len(cos), len(pairs))


def analogy_accuracy(names: Sequence[str], matrix: np.ndarray, questions,
                     batch: int = 512) -> dict:
  """3CosAdd accuracy (b - a + c, excluding a, b, c) over the covered questions."""
  index, unit = _index(names), _unit(matrix)
  ids = [tuple(index.get(w.lower()) for w in q[1:]) for q in questions]
  ids = np.array([q for q in ids if None not in q], np.int64).reshape(-1, 4)
  correct = 0
  for s in range(0, len(ids), batch):
    q = ids[s:s + batch]
    sims = (unit[q[:, 1]] - unit[q[:, 0]] + unit[q[:, 2]]) @ unit.T
    rows = np.arange(len(q))[:, None]
    sims[rows, q[:, :3]] = -np.inf
    correct += int((np.argmax(sims, axis=1) == q[:, 3]).sum())
  covered = len(ids)
  return {"accuracy": correct / covered if covered else float("nan"), "correct": correct,
          "covered": covered, "total": len(questions)}


def split_documents(lines: Sequence[str], block: int = 20) -> List[Tuple[str, str]]:
  """(id, text) of the halves of each whole `block` of lines: "b<i>a" and "b<i>b".

  The document-retrieval test of paragraph vectors: a text's consecutive
  lines are cut into blocks, each block into two halves (two documents on
  one subject), and `sibling_accuracy` asks whether a half's nearest other
  half is its sibling.

  >>> split_documents(["a", "b", "c", "d", "e"], block=2)
  [('b0a', 'a'), ('b0b', 'b'), ('b1a', 'c'), ('b1b', 'd')]
  """
  if block < 2:
    raise UserError(f"block={block}: must be at least 2 lines")
  half, out = block // 2, []
  for b in range(len(lines) // block):
    part = lines[b * block:(b + 1) * block]
    out.append((f"b{b}a", " ".join(w.strip() for w in part[:half])))
    out.append((f"b{b}b", " ".join(w.strip() for w in part[half:])))
  return out


def sibling_accuracy(names: Sequence[str], matrix: np.ndarray) -> float:
  """How often a document's nearest other document (cosine) is its sibling.

  Siblings: ids that differ only in their last character (`split_documents`'s
  "b<i>a" and "b<i>b").

  >>> sibling_accuracy(["b0a", "b0b", "b1a", "b1b"],
  ...                  np.array([[1, 0], [1, 0.1], [0, 1], [-1, 0]]))
  0.75
  """
  unit = _unit(matrix)
  sims = unit @ unit.T
  np.fill_diagonal(sims, -np.inf)
  nearest = np.argmax(sims, axis=1)
  hits = [names[i][:-1] == names[j][:-1] for i, j in enumerate(nearest)]
  return float(np.mean(hits)) if hits else float("nan")
