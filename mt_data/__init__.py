"""mt_data: translation pairs (English-French, d2l style) -> TFRecords -> Keras.

`python -m mt_data.create` (or `mt_data.create_dataset(...)`) writes
records and vocabularies;
`mt_data.make_dataset` reads them as (x, y, sample_weight) batches;
`python -m mt_data.stats` shows length histograms. Importing this package
does not import TensorFlow.
"""

from textrecords import lazy_exports as _exports

# make_dataset (imports TensorFlow), numpy_batches, grain_source, torch_dataset
# (TF-free readers), create_dataset (writes records), load_codecs: imported on first use.
__getattr__ = _exports.package_getattr(__name__, load_codecs="mt_data.vocab:load_codecs",
                                         create_dataset="mt_data.create:create_dataset")
