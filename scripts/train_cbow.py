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
  return train_cli.vectors_main(argv, __doc__, ("cbow",),
                                check_dataset=script_inputs.checker(script_inputs.CBOW,
                                                                    "--data_dir"),
                                query_flag="words",
                                query_default="chip,baby,intel",
                                query_help="show neighbours of these",
                                vectors_help="the word vectors", sgd_model="cbow")


if __name__ == "__main__":
  sys.exit(cli.run_script(main))
