#!/usr/bin/env python3
"""Trains CBOW word vectors on w2v_data records (`--model=cbow`) with Keras.

The mean of the context words' vectors scores the center (label 1) and K
noise words (label 0); binary cross-entropy on the scores. With --seed the
run is deterministic on CPU (byte-identical --save_vectors).

Example:
  python -m w2v_data.create --model=cbow --input_file=ptb.train.txt --output_dir=out/ptb_cbow
  python scripts/train_cbow.py --data_dir=out/ptb_cbow --seed=1 \\
      --save_vectors=out/cbow.vec --words=chip,baby,intel
"""

import functools
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
# A checkout without installing: its packages, and vector_scripts beside this script.
sys.path[:0] = [p for p in (os.path.dirname(_HERE), _HERE) if p not in sys.path]

from textrecords.runs import cli  # pylint: disable=wrong-import-position
import vector_scripts  # pylint: disable=wrong-import-position,import-error

main = functools.partial(vector_scripts.main, "cbow", __doc__)  # flags: vector_scripts.PRESETS

if __name__ == "__main__":
  sys.exit(cli.run_script(main))
