"""w2v_data: word2vec (skip-gram, CBOW) and paragraph-vector training records.

`python -m w2v_data.create` (or `w2v_data.create_dataset(...)`) writes
records; `w2v_data.make_dataset` reads them
as `(x, y, sample_weight)` batches for Keras. Importing this package does not
import TensorFlow.
"""

from textrecords import lazy_exports as _exports

# make_dataset (imports TensorFlow), numpy_batches, grain_source, torch_dataset
# (TF-free readers), create_dataset (writes records): imported on first use.
__getattr__ = _exports.package_getattr(__name__, create_dataset="w2v_data.create:create_dataset")
