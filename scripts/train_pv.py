#!/usr/bin/env python3
"""Trains paragraph vectors (PV-DBOW or PV-DM, doc2vec) on w2v_data records with Keras.

`--model=pv_dbow` records: a document's vector scores each of its words
(label 1) and K noise words (label 0). `--model=pv_dm` records: the mean of
the document vector and the context words' vectors scores the center word.
The script trains what the records were written for, saves the document
vectors (word2vec text format, one line per document id) and prints the
nearest documents of a few ids. With --seed the run is deterministic on CPU.

Example:
  python -m w2v_data.create --model=pv_dbow --doc_id_column --input_file=docs.tsv \\
      --output_dir=out/pv --min_freq=2
  python scripts/train_pv.py --data_dir=out/pv --epochs=10 --seed=1 --save_vectors=out/docs.vec
"""

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from w2v_data import training  # pylint: disable=wrong-import-position


def _train(args):
  from w2v_data import models  # pylint: disable=import-outside-toplevel
  _, _, names, matrix = models.train(
      args.data_dir, embed_size=args.embed_size, batch_size=args.batch_size,
      epochs=args.epochs, learning_rate=args.learning_rate, seed=args.seed,
      steps_per_epoch=args.steps_per_epoch, expect=("pv_dbow", "pv_dm"))
  args.docs = args.docs or ",".join(names[:3])
  return names, matrix


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  training.add_flags(p, epochs=10, learning_rate=0.005, vectors_help="the document vectors")
  p.add_argument("--docs", default="", help="comma-separated document ids to show "
                 "neighbours of (default: the first three)")
  args = p.parse_args(argv)
  return training.run(args, _train, lambda: args.docs.split(","), what="document ")


if __name__ == "__main__":
  sys.exit(main())
