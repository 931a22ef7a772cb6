"""The "kernel" engine of `w2v_data.train.sgd`: word2vec.c's per-example SGD, driven by model.fit.

Each Keras step trains a few chunks of sentences with the numba kernel of
`w2v_data.train.sgd_kernels`: it draws the chunk's subsampling, windows and noise
words from (seed, epoch, chunk) and applies every example's update before
the next, as word2vec.c and gensim do, instead of summing a batch's
updates. The dataset that `model.fit` reads holds chunk numbers; the
train_step runs the kernel through `tf.numpy_function` on numpy copies of
the weights (the model's variables get them back when a fit ends). One
thread runs the chunks in order, so the vectors are byte-identical for any
--threads, and for records of any generator worker count.
"""

import numpy as np

from textrecords import seeding

CHUNKS_PER_STEP = 4


def available() -> bool:
  """Whether numba (the `fast` or `cpu` extra) is installed."""
  import importlib.util  # pylint: disable=import-outside-toplevel
  return importlib.util.find_spec("numba") is not None


class KernelRun:
  """The corpus, draw settings and numpy weights of one kernel-engine run.

  Args:
    draws: a `w2v_data.train.draws.EpochDraws` (its held sentences, keep
      probabilities and noise table are used; its tf.data draws are not).
    weights: {"words_in", "words_out"[, "docs"]: float32 arrays}, trained in place.
    seed: the run's seed; epochs: the run's epochs; learning_rate: the starting rate.
    min_ratio: the least fraction of the starting rate.
  """

  def __init__(self, draws, weights: dict, *, seed: int, epochs: int, learning_rate: float,
               min_ratio: float):
    # deferred: numba (the fast extra), compiled on first use
    from w2v_data.train import sgd_kernels  # pylint: disable=import-outside-toplevel
    self._kernels = sgd_kernels
    self.code = sgd_kernels.MODEL_CODES[draws.model]
    self.tokens = np.ascontiguousarray(draws.tokens.numpy(), np.int64)
    self.row_splits = np.ascontiguousarray(draws.row_splits.numpy(), np.int64)
    self.doc_ids = (np.zeros(0, np.int64) if draws.doc is None
                    else np.ascontiguousarray(draws.doc.numpy(), np.int64))
    self.keep = (np.zeros(0, np.float64) if draws.keep_probs is None
                 else np.asarray(draws.keep_probs, np.float64))
    self.prob = np.asarray(draws.noise_table.prob, np.float64)
    self.alias = np.asarray(draws.noise_table.alias, np.int64)
    self.window, self.k, self.chunk = draws.window, draws.k, draws.chunk
    self.num_chunks = draws.num_chunks
    self.weights = weights
    self.docs = weights.get("docs", np.zeros((1, 1), np.float32))
    self.seed, self.epochs = int(seed), int(epochs)
    self.rate, self.min_ratio = float(learning_rate), float(min_ratio)
    self.epoch = 0
    _check_ids(self, weights)
    self.per_token = 1.0 / (max(1, len(self.tokens)) * self.epochs)

  def step(self, chunks: np.ndarray) -> np.float32:
    """Trains the chunks numbered `chunks` of the current epoch; returns their mean loss."""
    total = np.zeros(4, np.float64)
    num_sentences = len(self.row_splits) - 1
    for c in np.asarray(chunks).reshape(-1).tolist():
      s0 = c * self.chunk
      s1 = min(s0 + self.chunk, num_sentences)
      # The key keeps the module's old name: the same draws (and vectors) as before.
      chunk_seed = seeding.derive_seed(self.seed, "w2v_data/kernel_sgd", self.epoch, c)
      progress = (self.epoch + self.row_splits[s0] / max(1, len(self.tokens))) / self.epochs
      total += self._train(s0, s1, chunk_seed, progress)
    return np.float32(total[0] / max(total[1], 1.0))

  def compile(self):
    """Compiles the kernel for this run's argument types (numba's first run on a
    machine: about a minute; then its on-disk cache), training nothing."""
    self._train(0, 0, 0, 0.0)

  def _train(self, s0: int, s1: int, chunk_seed: int, progress: float) -> np.ndarray:
    return self._kernels.train_chunk(
        self.code, self.tokens, self.row_splits, self.doc_ids, s0, s1,
        self.weights["words_in"], self.weights["words_out"], self.docs, self.keep,
        self.prob, self.alias, self.window, self.k, np.uint64(chunk_seed), self.rate, progress,
        self.per_token, self.min_ratio)

  def dataset(self, tf):
    """The chunk numbers of an epoch, CHUNKS_PER_STEP a batch, for model.fit."""
    return tf.data.Dataset.range(self.num_chunks).batch(CHUNKS_PER_STEP)


def _check_ids(run: KernelRun, weights: dict):
  """ValueError unless every token and document id has its row (the kernel does not check)."""
  rows = {"words_in": run.tokens, "words_out": run.tokens, "docs": run.doc_ids}
  for name, ids in rows.items():
    if name in weights and len(ids) and not 0 <= ids.min() <= ids.max() < len(weights[name]):
      raise ValueError(f"ids outside the {len(weights[name])} rows of {name}")


def epoch_callback(run: KernelRun, on_end):
  """A Keras callback that tells `run` each epoch, and calls on_end() when a fit ends."""
  import keras  # pylint: disable=import-outside-toplevel

  class _Epochs(keras.callbacks.Callback):

    def on_epoch_begin(self, epoch, logs=None):
      run.epoch = int(epoch)

    def on_train_end(self, logs=None):
      on_end()

  return _Epochs()
