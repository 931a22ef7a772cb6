"""w2v_data.train: training word and document vectors on w2v_data's records.

The reading side (`w2v_data.make_dataset`, `numpy_batches`) never imports
this package; it imports the reading side. Its modules:

- `cli.py`: the command line of scripts/train_*.py (flags, defaults, one run).
- `sgd.py`: word2vec's SGD trainer as a Keras model (engines "kernel" and
  "xla"), and `infer_vector` for paragraph vectors.
- `kernel_engine.py`: the "kernel" engine, numba chunks driven by model.fit;
  `sgd_kernels.py`: its numba kernels (draws and per-example SGD).
- `draws.py`: fresh subsampling, windows and noise words every epoch in
  tf.data (`EpochDraws`), and shared out among hosts (`draw_batches`).
- `models.py`: d2l's Keras models on the records' one draw, and seeding.
- `vectors.py`: word2vec text format; `evaluation.py`: similarity pairs,
  analogies, document retrieval.

Importing this package imports nothing else.
"""
