"""The one program behind scripts/train_cbow.py and scripts/train_pv.py.

Both scripts train vectors on w2v_data records that are not skip-gram's
(CBOW, or paragraph vectors) with the same flags, trainers and output
(`w2v_data.train.cli.vectors_main`); they differ only in a preset
(`PRESETS`): the records' models they take, the flag naming what to show
neighbours of, the Keras defaults and the sgd defaults of their model. Each
script is a launcher: `main = functools.partial(vector_scripts.main, "cbow",
__doc__)`.

Example:
  >>> sorted(PRESETS), PRESETS["pv"].query_flag
  (['cbow', 'pv'], 'docs')
"""

import dataclasses
import os
from typing import Optional, Sequence, Tuple

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow loads (lazily)

from w2v_data.train import cli as train_cli  # pylint: disable=wrong-import-position
import script_inputs  # pylint: disable=wrong-import-position,import-error


@dataclasses.dataclass(frozen=True)
class Preset:
  """What one script trains and shows.

  Attributes:
    script: the script, as `script_inputs` names it (its dataset check).
    models: the records' --model values it trains.
    query_flag: the flag of comma-separated names to show neighbours of.
    query_help: that flag's help.
    query_default: that flag's default (empty: the first three names trained).
    what: how the printed lines name a vector ("document ").
    vectors_help: what --save_vectors writes.
    sgd_model: whose sgd defaults (`train_cli.SGD_MODEL_DEFAULTS`) the flags get.
    keras: the keras trainer's default (epochs, learning rate).
  """
  script: str
  models: Tuple[str, ...]
  query_flag: str
  query_help: str
  query_default: str = ""
  what: str = ""
  vectors_help: str = "the vectors"
  sgd_model: str = "skipgram"
  keras: Tuple[int, float] = (5, 0.002)


PRESETS = {
    "cbow": Preset(script_inputs.CBOW, ("cbow",), "words", "show neighbours of these",
                   query_default="chip,baby,intel", vectors_help="the word vectors",
                   sgd_model="cbow"),
    "pv": Preset(script_inputs.PV, ("pv_dbow", "pv_dm"), "docs",
                 "comma-separated document ids to show neighbours of (default: the first "
                 "three)", what="document ", vectors_help="the document vectors",
                 sgd_model="pv", keras=(10, 0.005)),
}


def main(preset: str, doc: str, argv: Optional[Sequence[str]] = None) -> int:
  """The main of the script of `PRESETS[preset]`, whose docstring is `doc`."""
  p = PRESETS[preset]
  epochs, learning_rate = p.keras
  return train_cli.vectors_main(argv, doc, p.models,
                                check_dataset=script_inputs.checker(p.script, "--data_dir"),
                                query_flag=p.query_flag, query_help=p.query_help,
                                query_default=p.query_default, what=p.what,
                                vectors_help=p.vectors_help, sgd_model=p.sgd_model,
                                epochs=epochs, learning_rate=learning_rate)
