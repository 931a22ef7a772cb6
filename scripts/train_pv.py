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

import functools
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
# A checkout without installing: its packages, and vector_scripts beside this script.
sys.path[:0] = [p for p in (os.path.dirname(_HERE), _HERE) if p not in sys.path]

from textrecords.runs import cli  # pylint: disable=wrong-import-position
import vector_scripts  # pylint: disable=wrong-import-position,import-error

main = functools.partial(vector_scripts.main, "pv", __doc__)  # flags: vector_scripts.PRESETS

if __name__ == "__main__":
  sys.exit(cli.run_script(main))
