"""bert_data: masked-LM + next-sentence pretraining records, as google-research/bert.

`python -m bert_data.create` (or `bert_data.create_dataset(...)`) writes
records; `bert_data.make_dataset` reads them
for Keras. Importing this package does not import TensorFlow.
"""

from textrecords import lazy_exports as _exports

# make_dataset (imports TensorFlow), numpy_batches, grain_source, torch_dataset
# (TF-free readers), create_dataset (writes records): imported on first use.
__getattr__ = _exports.package_getattr(__name__, create_dataset="bert_data.create:create_dataset")
