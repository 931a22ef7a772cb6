"""Reading datasets back, with TensorFlow or without.

`locations` resolves what a user passes (folder, file, metadata, glob) to
checked datasets, `read_options` the keyword arguments every `make_dataset`
shares, `read_order` / `tf_order` the elastic, resumable order of records in
global batches, `tf_input` the tf.data edge, `mixtures` weighted mixtures of
datasets, `reader` the TF-free readers (numpy, grain, torch), `script_inputs`
which training script reads which dataset. Imports `datasets`, `wire`, `files`.
"""
