"""The command line shared by the training scripts (scripts/train_*.py).

Flags every script takes (`add_flags`), and one run (`run`): train, save
the vectors in word2vec text format, print a few nearest neighbours;
`vectors_main` is the whole main of a script training `models.train`'s
models (CBOW, paragraph vectors). Imports TensorFlow only when a run starts.
"""

import argparse
import sys
import time
from typing import Callable, Optional, Sequence


def add_flags(p: argparse.ArgumentParser, *, epochs: int = 5, learning_rate: float = 0.002,
              vectors_help: str = "the vectors"):
  """Adds --data_dir, sizes, --seed and --save_vectors to `p`."""
  p.add_argument("--data_dir", required=True, help="a w2v_data.create --output_dir")
  p.add_argument("--embed_size", type=int, default=100)
  p.add_argument("--batch_size", type=int, default=512)
  p.add_argument("--epochs", type=int, default=epochs)
  p.add_argument("--steps_per_epoch", type=int, default=None)
  p.add_argument("--learning_rate", type=float, default=learning_rate)
  p.add_argument("--seed", type=int, default=None,
                 help="seed everything (deterministic on CPU); default: not seeded")
  p.add_argument("--save_vectors", default=None,
                 help=f"write {vectors_help} here (word2vec text format)")


def run(args, train: Callable, queries, what: str = "") -> int:
  """Trains with `train(args)` -> (names, matrix), saves and shows neighbours.

  `queries`: names to show neighbours of, or a callable giving them from the
  trained names.

  Returns the exit status: 0, or 2 after a one-line error.
  """
  from textrecords.errors import UserError  # pylint: disable=import-outside-toplevel
  from w2v_data import models, vectors  # pylint: disable=import-outside-toplevel
  try:
    start = time.time()
    names, matrix = train(args)
    if args.save_vectors:
      digest = vectors.save(args.save_vectors, names, matrix)
      print(f"saved {len(names)} {what}vectors to {args.save_vectors} (sha256 {digest})")
  except UserError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  print(f"trained in {time.time() - start:.1f} s")
  if callable(queries):
    queries = queries(names)
  for q in filter(None, (w.strip() for w in queries)):
    near = models.nearest(matrix, names, q)
    shown = ", ".join(f"{t} ({c:.3f})" for t, c in near) if near else "(unknown)"
    print(f"nearest to {what}{q!r}: {shown}")
  return 0


def vectors_main(argv: Optional[Sequence[str]], doc: str, expect: Sequence[str], *,
                 query_flag: str, query_help: str, query_default: str = "", what: str = "",
                 **flag_defaults) -> int:
  """The main of a script training `models.train` on records of the `expect` models.

  Flags: `add_flags(**flag_defaults)` and --<query_flag> (comma-separated
  names to show neighbours of; empty: the first three names trained).
  """
  p = argparse.ArgumentParser(description=doc.split("\n")[0])
  add_flags(p, **flag_defaults)
  p.add_argument(f"--{query_flag}", default=query_default, help=query_help)
  args = p.parse_args(argv)

  def train(a):
    from w2v_data import models  # pylint: disable=import-outside-toplevel
    _, _, names, matrix = models.train(
        a.data_dir, embed_size=a.embed_size, batch_size=a.batch_size, epochs=a.epochs,
        learning_rate=a.learning_rate, seed=a.seed, steps_per_epoch=a.steps_per_epoch,
        expect=tuple(expect))
    return names, matrix

  asked = getattr(args, query_flag)
  return run(args, train, lambda names: (asked or ",".join(names[:3])).split(","), what=what)
