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
  python scripts/train_pv.py --data_dir=out/pv --seed=1 --save_vectors=out/docs.vec
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _path in (ROOT, os.path.join(ROOT, "scripts")):  # a checkout without installing;
  if _path not in sys.path:                 # script_inputs beside this script
    sys.path.insert(0, _path)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from textrecords.runs import cli  # pylint: disable=wrong-import-position
from w2v_data.train import cli as train_cli  # pylint: disable=wrong-import-position
import script_inputs  # pylint: disable=wrong-import-position,import-error


def main(argv=None):
  return train_cli.vectors_main(argv, __doc__, ("pv_dbow", "pv_dm"),
                                check_dataset=script_inputs.checker(script_inputs.PV, "--data_dir"),
                                query_flag="docs",
                                query_help="comma-separated document ids to show neighbours "
                                "of (default: the first three)", what="document ",
                                epochs=10, learning_rate=0.005, sgd_model="pv",
                                vectors_help="the document vectors")


if __name__ == "__main__":
  sys.exit(cli.run_script(main))
