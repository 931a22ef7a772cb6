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


def __getattr__(name):
  """numpy_batches, grain_source, torch_dataset: `mt_data.reader`'s, TF-free, imported on use."""
  if name in ("numpy_batches", "grain_source", "torch_dataset"):
    from mt_data import reader  # pylint: disable=import-outside-toplevel
    return getattr(reader, name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
