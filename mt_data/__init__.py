"""mt_data: translation pairs (English-French, d2l style) -> TFRecords -> Keras.

`python -m mt_data.create` writes records and vocabularies;
`mt_data.make_dataset` reads them as (x, y, sample_weight) batches;
`python -m mt_data.stats` shows length histograms. Importing this package
does not import TensorFlow.
"""


def make_dataset(*args, **kwargs):
  """See `mt_data.dataset.make_dataset` (imports TensorFlow)."""
  from mt_data.dataset import make_dataset as _make  # pylint: disable=import-outside-toplevel
  return _make(*args, **kwargs)


def load_codecs(output_dir: str):
  """(source, target) codecs (encode text -> ids, decode ids -> text) of a dataset."""
  from mt_data.vocab import load_codecs as _load  # pylint: disable=import-outside-toplevel
  return _load(output_dir)


def numpy_batches(*args, **kwargs):
  """See `mt_data.reader.numpy_batches` (no TensorFlow)."""
  from mt_data.reader import numpy_batches as _f  # pylint: disable=import-outside-toplevel
  return _f(*args, **kwargs)


def grain_source(*args, **kwargs):
  """See `mt_data.reader.grain_source` (no TensorFlow; needs textrecords[grain] to use)."""
  from mt_data.reader import grain_source as _f  # pylint: disable=import-outside-toplevel
  return _f(*args, **kwargs)


def torch_dataset(*args, **kwargs):
  """See `mt_data.reader.torch_dataset` (no TensorFlow; needs textrecords[torch])."""
  from mt_data.reader import torch_dataset as _f  # pylint: disable=import-outside-toplevel
  return _f(*args, **kwargs)
