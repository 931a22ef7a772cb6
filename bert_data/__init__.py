"""bert_data: masked-LM + next-sentence pretraining records, as google-research/bert.

`python -m bert_data.create` writes records; `bert_data.make_dataset` reads them
for Keras. Importing this package does not import TensorFlow.
"""


def make_dataset(*args, **kwargs):
  """See `bert_data.dataset.make_dataset` (imports TensorFlow)."""
  from bert_data.dataset import make_dataset as _make  # pylint: disable=import-outside-toplevel
  return _make(*args, **kwargs)


def numpy_batches(*args, **kwargs):
  """See `bert_data.reader.numpy_batches` (no TensorFlow)."""
  from bert_data.reader import numpy_batches as _f  # pylint: disable=import-outside-toplevel
  return _f(*args, **kwargs)


def grain_source(*args, **kwargs):
  """See `bert_data.reader.grain_source` (no TensorFlow; needs textrecords[grain] to use)."""
  from bert_data.reader import grain_source as _f  # pylint: disable=import-outside-toplevel
  return _f(*args, **kwargs)


def torch_dataset(*args, **kwargs):
  """See `bert_data.reader.torch_dataset` (no TensorFlow; needs textrecords[torch])."""
  from bert_data.reader import torch_dataset as _f  # pylint: disable=import-outside-toplevel
  return _f(*args, **kwargs)
