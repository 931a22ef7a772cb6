"""bert_data: masked-LM + next-sentence pretraining records, as google-research/bert.

`python -m bert_data.create` writes records; `bert_data.make_dataset` reads them
for Keras. Importing this package does not import TensorFlow.
"""


def make_dataset(*args, **kwargs):
  """See `bert_data.dataset.make_dataset` (imports TensorFlow)."""
  from bert_data.dataset import make_dataset as _make  # pylint: disable=import-outside-toplevel
  return _make(*args, **kwargs)


def __getattr__(name):
  """numpy_batches, grain_source, torch_dataset: `bert_data.reader`'s, TF-free, imported on use."""
  if name in ("numpy_batches", "grain_source", "torch_dataset"):
    from bert_data import reader  # pylint: disable=import-outside-toplevel
    return getattr(reader, name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
