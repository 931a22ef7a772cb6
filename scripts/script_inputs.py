"""Which training script in scripts/ trains on which dataset (a module the
scripts import from their own folder: the packages never name a script).

Every script checks its input first (`check`): a dataset of another package,
or of another w2v_data `--model`, is refused in one line naming the script
that trains on it, instead of failing later inside Keras.

Example:
  >>> script_for({"package": "w2v_data", "model": "cbow"})
  'scripts/train_cbow.py'
  >>> describe({"package": "mt_data"}), describe({"package": "w2v_data", "model": "pv_dm"})
  ('an mt_data dataset', 'a w2v_data dataset of --model=pv_dm records')
"""

from typing import Optional

from textrecords.reading import locations as dataset_files
from textrecords.datasets import metadata
from textrecords.errors import UserError

BERT = "scripts/train_bert_tiny.py"
SEQ2SEQ = "scripts/train_seq2seq.py"
SKIPGRAM = "scripts/train_skipgram.py"
CBOW = "scripts/train_cbow.py"
PV = "scripts/train_pv.py"
_W2V_MODELS = {"skipgram": SKIPGRAM, "cbow": CBOW, "pv_dbow": PV, "pv_dm": PV}
_PACKAGES = {"bert_data": BERT, "mt_data": SEQ2SEQ}


def script_for(meta: dict) -> Optional[str]:
  """The script that trains on a dataset with this metadata (None: no script)."""
  if meta.get("package") == "w2v_data":
    return _W2V_MODELS.get(meta.get("model", "skipgram"))
  return _PACKAGES.get(meta.get("package"))


def describe(meta: dict) -> str:
  """What the dataset is, for messages ("a w2v_data dataset of --model=cbow records")."""
  pkg = str(meta.get("package"))
  text = f"{metadata.article(pkg)} {pkg} dataset"
  if pkg == "w2v_data":
    text += f" of --model={meta.get('model', 'skipgram')} records"
  return text


def checker(script: str, flag: str):
  """`check` of a script's dataset flag, as a function of the location given."""
  return lambda location: check(location, script, flag)


def check(location: str, script: str, flag: str) -> dict:
  """The metadata of the dataset at `location`, if `script` trains on it.

  Args:
    location: what the user gave (a folder, an output file, its metadata,
      record files; for bert_data a comma-separated list).
    script: the calling script, as named here (e.g. `SKIPGRAM`).
    flag: the script's flag for `location` (for messages).
  Raises:
    UserError: nothing there, no metadata, or a dataset another script
      trains on (named).
  """
  found = dataset_files.find(location, allow_list=script == BERT)
  for f in found:
    if f.meta is None:
      raise UserError(f"{flag}={location}: {dataset_files.no_metadata_message(f.names[0])}")
    want = script_for(f.meta)
    if want != script:
      where = f"{flag}={location}: {describe(f.meta)}"
      raise UserError(f"{where}; train on it with {want}" if want else
                      f"{where}; {script} trains on {_what(script)}")
  return found[0].meta


def _what(script: str) -> str:
  if script in _PACKAGES.values():
    return next(f"{p} datasets" for p, s in _PACKAGES.items() if s == script)
  models = sorted(m for m, s in _W2V_MODELS.items() if s == script)
  return f"w2v_data --model={'/'.join(models)} datasets"
