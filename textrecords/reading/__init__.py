"""Reading datasets back, with TensorFlow or without.

`locations` resolves what a user passes (folder, file, metadata, glob) to
checked datasets, `read_options` the keyword arguments every `make_dataset`
shares, `read_order` / `tf_order` the elastic, resumable order of records in
global batches, `tf_input` the tf.data edge, `mixtures` weighted mixtures of
datasets, the TF-free readers split by consumer (`record_source` random
access to records, `numpy_reader`, `grain_reader`, `torch_reader`, and
`package_readers`, a package's dataset handed to any of them). Imports
`datasets`, `wire`, `files`.
"""
