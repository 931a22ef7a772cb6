"""Keras models for w2v_data records, and run-to-run determinism (imports TensorFlow).

Each model takes exactly the `x` dict that `w2v_data.make_dataset` yields for
its records and returns logits shaped like `y`; the loss is binary
cross-entropy on the logits, weighted by the dataset's sample weights.
`embedding_matrix` gives the vectors to save (word2vec text format, see
`w2v_data.train.vectors`).
"""

from typing import List

import numpy as np

from textrecords.datasets import vocab as vocab_lib
from textrecords.tf_import import require_tf
from w2v_data import schema
from w2v_data.train import vectors
import w2v_data
from w2v_data import dataset
from textrecords.reading import locations as dataset_files
from textrecords.errors import UserError

CENTER_EMBEDDING = "center_embedding"
CONTEXT_EMBEDDING = "context_embedding"
DOC_EMBEDDING = "doc_embedding"


def seed_everything(seed: int):
  """Seeds Python, numpy, TF and Keras and turns on TF op determinism.

  With this, the same records, seed and TF version give byte-identical
  trained weights on CPU. It does not make GPU kernels, another TF/Keras
  version or another number of devices give the same numbers. It does not
  set PYTHONHASHSEED: that only acts when a Python process starts, and
  nothing here depends on str hashing (no set or dict order of strings
  decides an order of work); a caller starting subprocesses that need it
  sets it in their environment.
  """
  tf = require_tf()
  import keras  # pylint: disable=import-outside-toplevel
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


def _scores(keras, h, words_embedded):
  """Logits (B, 1+K): dot products of h (B, D) with each of (B, 1+K, D)."""
  return keras.ops.squeeze(keras.ops.matmul(words_embedded, h[:, :, None]), -1)


def _context_mean(keras, vectors, mask, extra=None):
  """Mean of the masked context vectors (B, 2W, D), plus `extra` (B, D) if given."""
  total = keras.ops.sum(vectors * mask[:, :, None], axis=1)
  n = keras.ops.sum(mask, axis=1, keepdims=True)
  if extra is not None:
    total, n = total + extra, n + 1.0
  return total / keras.ops.maximum(n, 1.0)


def cbow(vocab_size: int, embed_size: int, window: int, num_noise_words: int,
         learning_rate: float = 0.002):
  """CBOW: the mean of the context vectors scores the center and K noise words.

  Inputs {"contexts": (B,2W), "contexts_mask": (B,2W), "center_and_noise": (B,1+K)}
  -> logits (B, 1+K). Word vectors: the context embedding ("center_embedding"
  holds the input side, as word2vec's syn0).
  """
  require_tf()
  import keras  # pylint: disable=import-outside-toplevel
  contexts = keras.Input((2 * window,), dtype="int32", name=schema.X_CONTEXTS)
  mask = keras.Input((2 * window,), dtype="float32", name=schema.X_CONTEXTS_MASK)
  words = keras.Input((1 + num_noise_words,), dtype="int32", name=schema.X_CENTER_AND_NOISE)
  v = keras.layers.Embedding(vocab_size, embed_size, name=CENTER_EMBEDDING)(contexts)
  u = keras.layers.Embedding(vocab_size, embed_size, name=CONTEXT_EMBEDDING)(words)
  scores = _scores(keras, _context_mean(keras, v, mask), u)
  model = keras.Model({schema.X_CONTEXTS: contexts, schema.X_CONTEXTS_MASK: mask,
                       schema.X_CENTER_AND_NOISE: words}, scores)
  return _compile(model, learning_rate)


def paragraph_vectors(model_kind: str, vocab_size: int, num_docs: int, embed_size: int,
                      window: int, num_noise_words: int, learning_rate: float = 0.002):
  """PV-DBOW or PV-DM (Le & Mikolov 2014) on w2v_data's pv_* records.

  pv_dbow: the document vector alone scores the target and K noise words.
  pv_dm: the mean of the document vector and the context word vectors does.
  Document vectors are the "doc_embedding" layer (row i = line i of docs.txt).
  """
  require_tf()
  import keras  # pylint: disable=import-outside-toplevel
  doc = keras.Input((1,), dtype="int32", name=schema.X_DOC_ID)
  words = keras.Input((1 + num_noise_words,), dtype="int32", name=schema.X_CENTER_AND_NOISE)
  d = keras.ops.squeeze(keras.layers.Embedding(num_docs, embed_size, name=DOC_EMBEDDING)(doc),
                        1)
  u = keras.layers.Embedding(vocab_size, embed_size, name=CONTEXT_EMBEDDING)(words)
  inputs = {schema.X_DOC_ID: doc, schema.X_CENTER_AND_NOISE: words}
  if model_kind == "pv_dm":
    contexts = keras.Input((2 * window,), dtype="int32", name=schema.X_CONTEXTS)
    mask = keras.Input((2 * window,), dtype="float32", name=schema.X_CONTEXTS_MASK)
    v = keras.layers.Embedding(vocab_size, embed_size, name=CENTER_EMBEDDING)(contexts)
    h = _context_mean(keras, v, mask, extra=d)
    inputs.update({schema.X_CONTEXTS: contexts, schema.X_CONTEXTS_MASK: mask})
  elif model_kind == "pv_dbow":
    h = d
  else:
    raise ValueError(f"model_kind {model_kind!r}: expected pv_dbow or pv_dm")
  return _compile(keras.Model(inputs, _scores(keras, h, u)), learning_rate)


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


def _listed_file(data_dir: str, name: str) -> str:
  """A w2v_data dataset's vocab or document-id file, checked against its metadata."""
  return dataset_files.companion_path(dataset.open_dataset(data_dir), name)


def read_tokens(data_dir: str) -> List[str]:
  """The vocab of a w2v_data output folder (line i = id i), checked against
  the metadata (size and sha256)."""
  return vocab_lib.load_tokens(_listed_file(data_dir, schema.VOCAB_NAME), "data_dir")


def read_doc_names(data_dir: str) -> List[str]:
  """The document ids of a paragraph-vector output folder (line i = doc_id i),
  checked against the metadata."""
  return vocab_lib.load_tokens(_listed_file(data_dir, schema.DOCS_NAME), "data_dir")


def read_meta(data_dir: str) -> dict:
  """The checked metadata of a w2v_data output folder (see w2v_data.dataset.read_meta)."""
  return dataset.read_meta(data_dir)


def train(data_dir: str, *, embed_size: int = 100, batch_size: int = 512, epochs: int = 5,
          learning_rate: float = 0.002, seed=None, steps_per_epoch=None, verbose: int = 2,
          expect=None):
  """Trains the model the records were written for (CBOW, PV-DBOW or PV-DM).

  Args:
    expect: model names the caller accepts (UserError otherwise).

  Returns:
    (keras model, history, names, vectors): the word vectors (CBOW: the input
    side) with the vocab less <unk>, or the document vectors with the
    document ids (PV).
  """
  meta = read_meta(data_dir)
  kind = meta.get("model", schema.DEFAULT_MODEL)
  if expect is not None and kind not in expect:
    raise UserError(f"{data_dir}: records are for --model={kind}, this trains "
                    f"{' or '.join(expect)}")
  if seed is not None:
    seed_everything(seed)
  # One infinite pass (repeat=True), cut into epochs by steps_per_epoch.
  ds = w2v_data.make_dataset(data_dir, batch_size, seed=seed, repeat=True)
  steps_per_epoch = steps_per_epoch or len(w2v_data.make_dataset(data_dir, batch_size))
  tokens = read_tokens(data_dir)
  window = int(meta["flags"]["max_window_size"])
  k = int(meta["noise"]["num_noise_words"])
  if kind == "cbow":
    model = cbow(len(tokens), embed_size, window, k, learning_rate)
    names, layer = tokens, CENTER_EMBEDDING
  elif kind in schema.PV_MODELS:
    names = read_doc_names(data_dir)
    model = paragraph_vectors(kind, len(tokens), len(names), embed_size, window, k,
                              learning_rate)
    layer = DOC_EMBEDDING
  else:
    raise UserError(f"{data_dir}: --model={kind} records: use scripts/train_skipgram.py")
  history = model.fit(ds, epochs=epochs, steps_per_epoch=steps_per_epoch, verbose=verbose,
                      shuffle=False)
  matrix = embedding_matrix(model, layer)
  if kind == "cbow":
    names, matrix = vectors.without_unk(names, matrix)
  return model, history, names, matrix
