"""Keras models for w2v_data records, and run-to-run determinism (imports TensorFlow).

Each model takes exactly the `x` dict that `w2v_data.make_dataset` yields for
its records and returns logits shaped like `y`; the loss is binary
cross-entropy on the logits, weighted by the dataset's sample weights.
`embedding_matrix` gives the vectors to save (word2vec text format, see
`w2v_data.vectors`).
"""

import os
from typing import List

import numpy as np

from textrecords import vocab as vocab_lib
from textrecords.tf_import import require_tf
from w2v_data import schema

CENTER_EMBEDDING = "center_embedding"
CONTEXT_EMBEDDING = "context_embedding"


def seed_everything(seed: int):
  """Seeds Python, numpy, TF and Keras and turns on TF op determinism.

  With this, the same records, seed and TF version give byte-identical
  trained weights on CPU. It does not make GPU kernels, another TF/Keras
  version or another number of devices give the same numbers.
  """
  tf = require_tf()
  import keras  # pylint: disable=import-outside-toplevel
  os.environ["PYTHONHASHSEED"] = str(seed)
  keras.utils.set_random_seed(seed)
  tf.config.experimental.enable_op_determinism()


def _masked_bce(labels, logits):
  import keras  # pylint: disable=import-outside-toplevel
  # Elementwise; Keras multiplies by the sample weights (the padding mask).
  return keras.ops.binary_crossentropy(labels, logits, from_logits=True)


def _compile(model, learning_rate: float):
  import keras  # pylint: disable=import-outside-toplevel
  model.compile(optimizer=keras.optimizers.Adam(learning_rate), loss=_masked_bce)
  return model


def skipgram(vocab_size: int, embed_size: int, learning_rate: float = 0.002):
  """d2l's skip-gram: {"center": (B,1), "contexts_negatives": (B,L)} -> logits (B,L).

  Two embeddings (centers; contexts and noise words); a pair's logit is the
  dot product of their vectors.
  """
  require_tf()
  import keras  # pylint: disable=import-outside-toplevel
  center = keras.Input((1,), dtype="int32", name=schema.X_CENTER)
  words = keras.Input((None,), dtype="int32", name=schema.X_CONTEXTS_NEGATIVES)
  v = keras.layers.Embedding(vocab_size, embed_size, name=CENTER_EMBEDDING)(center)
  u = keras.layers.Embedding(vocab_size, embed_size, name=CONTEXT_EMBEDDING)(words)
  scores = keras.ops.squeeze(keras.ops.matmul(v, keras.ops.transpose(u, (0, 2, 1))), 1)
  model = keras.Model({schema.X_CENTER: center, schema.X_CONTEXTS_NEGATIVES: words}, scores)
  return _compile(model, learning_rate)


def embedding_matrix(model, layer: str = CENTER_EMBEDDING) -> np.ndarray:
  """The float32 weights of an embedding layer (row i = id i)."""
  return np.asarray(model.get_layer(layer).get_weights()[0], dtype=np.float32)


def nearest(matrix: np.ndarray, names: List[str], name: str, k: int = 3):
  """The k names whose rows have the highest cosine similarity to `name`'s row.

  Returns [] if `name` is unknown.
  """
  if name not in names:
    return []
  x = matrix[names.index(name)]
  cos = matrix @ x / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(x) + 1e-9)
  order = [i for i in np.argsort(-cos, kind="stable") if names[i] != name][:k]
  return [(names[i], float(cos[i])) for i in order]


def read_tokens(data_dir: str) -> List[str]:
  """The vocab of a w2v_data output folder (line i = id i)."""
  return vocab_lib.load_tokens(os.path.join(data_dir, schema.VOCAB_NAME), "data_dir")
