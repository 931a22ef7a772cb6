"""bert_data: masked-LM + next-sentence pretraining records, as google-research/bert.

`python -m bert_data.create` writes records; `bert_data.make_dataset` reads them
for Keras. Importing this package does not import TensorFlow.
"""


def make_dataset(*args, **kwargs):
  """See `bert_data.dataset.make_dataset` (imports TensorFlow)."""
  from bert_data.dataset import make_dataset as _make  # pylint: disable=import-outside-toplevel
  return _make(*args, **kwargs)
