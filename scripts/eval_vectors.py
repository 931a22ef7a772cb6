#!/usr/bin/env python3
"""Scores word vectors on similarity-pair and analogy files (no download, no TensorFlow).

Reads vectors in word2vec text format (`--save_vectors` of the training
scripts, or gensim's `save_word2vec_format`); a `<unk>` row, if present, is
left out. Pair files (WordSim353, SimLex-999: `word1 word2 score` a line)
give Spearman's rho of cosine similarity against the human scores; analogy
files (word2vec's questions-words.txt) give 3CosAdd accuracy. Each result
says how many pairs / questions the vectors cover (only those are scored).
--geometry adds `evaluation.geometry`: mean vector length in 8 bands of
file order (most frequent words first) and the mean cosine of all pairs of
words: near-equal for two seeds of one trainer, so a gap between two
trainers on the same data points at a difference in their algorithms.

Example:
  python scripts/eval_vectors.py --vectors=out/ptb.vec \\
      --pairs=gensim/test/test_data/wordsim353.tsv \\
      --analogies=gensim/test/test_data/questions-words.txt
"""

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

from textrecords.errors import UserError  # pylint: disable=wrong-import-position
from textrecords.runs import cli, script_args  # pylint: disable=wrong-import-position
from w2v_data import schema  # pylint: disable=wrong-import-position
from w2v_data.train import evaluation, vectors  # pylint: disable=wrong-import-position


def evaluate(vectors_path: str, pairs=(), analogies=(), geometry: bool = False) -> dict:
  """{"pairs": {path: {...}}, "analogies": {path: {...}}[, "geometry": {...}]} of the vectors."""
  names, matrix = vectors.load(vectors_path)
  keep = [i for i, n in enumerate(names) if n != schema.UNK]
  names, matrix = [names[i] for i in keep], matrix[keep]
  out = {"vectors": len(names), "pairs": {}, "analogies": {}}
  for path in pairs:
    s = evaluation.pair_score(names, matrix, evaluation.read_pairs(path))
    out["pairs"][path] = {"spearman": s.spearman, "covered": s.covered, "total": s.total}
  for path in analogies:
    out["analogies"][path] = evaluation.analogy_accuracy(
        names, matrix, evaluation.read_analogies(path))
  if geometry:
    if len(matrix) < 2:
      raise UserError(f"{vectors_path}: --geometry needs 2 or more vectors besides <unk>")
    out["geometry"] = evaluation.geometry(matrix, bands=min(8, len(matrix)))
  return out


def main(argv=None) -> int:
  p = script_args.ScriptParser(description=__doc__.split("\n")[0])
  p.add_argument("--vectors", required=True, check=script_args.existing_files,
                 help="word2vec text format file")
  p.add_argument("--pairs", default="", check=script_args.existing_files,
                 help="comma-separated pair files")
  p.add_argument("--analogies", default="", check=script_args.existing_files,
                 help="comma-separated analogy files")
  p.add_argument("--geometry", action="store_true",
                 help="also vector length by frequency band and the mean cosine")
  p.add_argument("--json", action="store_true", help="print the results as JSON")
  args = p.parse_args(argv)
  split = lambda s: [x for x in s.split(",") if x]  # noqa: E731
  if not split(args.pairs) and not split(args.analogies) and not args.geometry:
    p.refuse("give --pairs, --analogies and/or --geometry")
  res = evaluate(args.vectors, split(args.pairs), split(args.analogies), args.geometry)
  if args.json:
    print(json.dumps(res, indent=1, sort_keys=True))
    return 0
  for path, s in res["pairs"].items():
    print(f"{path}: Spearman {s['spearman']:.4f} on {s['covered']} of {s['total']} pairs")
  for path, a in res["analogies"].items():
    print(f"{path}: accuracy {a['accuracy']:.4f} ({a['correct']} of {a['covered']} covered; "
          f"{a['total']} questions)")
  if args.geometry:
    g = res["geometry"]
    print("vector length by frequency band (most frequent first): "
          + " ".join(f"{x:.3f}" for x in g["band_norms"]))
    print(f"mean cosine of word pairs {g['mean_cosine']:.5f}, "
          f"mean direction {g['mean_direction']:.4f}")
  return 0


if __name__ == "__main__":
  sys.exit(cli.run_script(main))
