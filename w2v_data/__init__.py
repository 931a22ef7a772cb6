"""w2v_data: word2vec (skip-gram, CBOW) and paragraph-vector training records.

`python -m w2v_data.create` writes records; `w2v_data.make_dataset` reads them
as `(x, y, sample_weight)` batches for Keras. Importing this package does not
import TensorFlow.
"""


def make_dataset(*args, **kwargs):
  """See `w2v_data.dataset.make_dataset` (imports TensorFlow)."""
  from w2v_data.dataset import make_dataset as _make  # pylint: disable=import-outside-toplevel
  return _make(*args, **kwargs)


def numpy_batches(*args, **kwargs):
  """See `w2v_data.reader.numpy_batches` (no TensorFlow)."""
  from w2v_data.reader import numpy_batches as _f  # pylint: disable=import-outside-toplevel
  return _f(*args, **kwargs)


def grain_source(*args, **kwargs):
  """See `w2v_data.reader.grain_source` (no TensorFlow; needs textrecords[grain] to use)."""
  from w2v_data.reader import grain_source as _f  # pylint: disable=import-outside-toplevel
  return _f(*args, **kwargs)


def torch_dataset(*args, **kwargs):
  """See `w2v_data.reader.torch_dataset` (no TensorFlow; needs textrecords[torch])."""
  from w2v_data.reader import torch_dataset as _f  # pylint: disable=import-outside-toplevel
  return _f(*args, **kwargs)
