"""w2v_data: word2vec (skip-gram, CBOW) and paragraph-vector training records.

`python -m w2v_data.create` writes records; `w2v_data.make_dataset` reads them
as `(x, y, sample_weight)` batches for Keras. Importing this package does not
import TensorFlow.
"""


def make_dataset(*args, **kwargs):
  """See `w2v_data.dataset.make_dataset` (imports TensorFlow)."""
  from w2v_data.dataset import make_dataset as _make  # pylint: disable=import-outside-toplevel
  return _make(*args, **kwargs)


def __getattr__(name):
  """numpy_batches, grain_source, torch_dataset: `w2v_data.reader`'s, TF-free, imported on use."""
  if name in ("numpy_batches", "grain_source", "torch_dataset"):
    from w2v_data import reader  # pylint: disable=import-outside-toplevel
    return getattr(reader, name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
