"""word2vec's own training as a Keras model: SGD with a linearly decaying rate.

`Word2Vec` trains skip-gram, CBOW, PV-DBOW or PV-DM with `model.fit`, the
way word2vec.c and gensim do: negative sampling, input vectors initialised
uniform on [-0.5/D, 0.5/D], output vectors at zero, plain SGD whose rate
falls linearly from `learning_rate` to `learning_rate * 1e-4` over the run,
only the rows an example touches updated. Two engines run its train_step:

  kernel (default when numba is installed; `w2v_data.train.kernel_engine`): each
    step trains a few chunks of sentences in a numba kernel that draws the
    subsampling, windows and noise words of (seed, epoch, chunk) and
    applies every example's update before the next, as word2vec.c does;
  xla: the batches of `w2v_data.train.draws.EpochDraws` (tf.data draws), a
    batch's updates all computed from the weights before it and added with
    `scatter_add` in an XLA step (gradients in closed form).

Determinism: the draws are seeded per (seed, epoch, chunk) and the initial
weights come from the seed. The kernel runs the chunks in order on one
thread; the xla step's ops (gathers, products, sums over the last axis,
scatter-adds, which TensorFlow's CPU kernels apply in index order) give the
same floats for any number of threads. With `seed_everything`'s op
determinism the saved vectors are byte-identical across runs, --threads and
generator worker counts, for either engine (tests/test_w2v_train.py).
"""

import warnings

import numpy as np

from textrecords import seeding
from textrecords.tf_import import require_tf
from w2v_data.train import draws as draws_lib
from w2v_data import schema
from w2v_data.train import vectors as vectors_lib
from w2v_data.train import models
from w2v_data.train import kernel_engine
from w2v_data import sampling
from textrecords.runs import cli
from textrecords.errors import UserError

MIN_RATE_RATIO = 1e-4  # word2vec.c: the rate never falls below starting_alpha * 0.0001
WORD_MODELS = ("skipgram", "cbow")
# Keras runs this many steps per call of its train function: less per-step
# overhead, the same weights.
STEPS_PER_EXECUTION = 32


def _initial(seed: int, what: str, rows: int, dim: int) -> np.ndarray:
  rng = np.random.default_rng(seeding.derive_seed(seed, "w2v_data/sgd", what))
  return rng.uniform(-0.5 / dim, 0.5 / dim, (rows, dim)).astype(np.float32)


def word2vec_model(kind: str, vocab_size: int, dim: int, *, num_docs: int = 0, seed: int = 0,
                   learning_rate: float = 0.025, jit_compile: bool = True):
  """A compiled `Word2Vec` Keras model (the class is made on first use: it needs Keras)."""
  require_tf()
  model = _model_class()(kind, vocab_size, dim, num_docs=num_docs, seed=seed,
                         learning_rate=learning_rate, jit_compile=jit_compile)
  model.compile(jit_compile=False, steps_per_execution=STEPS_PER_EXECUTION)
  return model


_CLASS = []


def _targets(x):
  """The output side's word ids of a batch: contexts+negatives or center+noise."""
  key = schema.X_CONTEXTS_NEGATIVES if schema.X_CONTEXTS_NEGATIVES in x else (
      schema.X_CENTER_AND_NOISE)
  return x[key]


def _add(var, rows, ids):
  """Adds `rows` to the rows `ids` of `var` (sparse, in index order)."""
  tf = require_tf()
  var.value.scatter_add(tf.IndexedSlices(rows, ids))


def _hidden(model, x):
  """The input side's vector h (B, D) of a batch and how to apply its gradient dh."""
  tf = require_tf()
  if model.kind == "skipgram":
    ids = x[schema.X_CENTER][:, 0]
    return tf.gather(model.words_in, ids), lambda dh: _add(model.words_in, dh, ids)
  if model.kind == "pv_dbow":
    ids = x[schema.X_DOC_ID][:, 0]
    return tf.gather(model.docs, ids), lambda dh: _add(model.docs, dh, ids)
  ctx, mask = x[schema.X_CONTEXTS], x[schema.X_CONTEXTS_MASK]
  total = tf.reduce_sum(tf.gather(model.words_in, ctx) * mask[:, :, None], axis=1)
  count = tf.reduce_sum(mask, axis=1, keepdims=True)
  doc = None
  if model.kind == "pv_dm":
    doc = x[schema.X_DOC_ID][:, 0]
    total, count = total + tf.gather(model.docs, doc), count + 1.0
  h = total / tf.maximum(count, 1.0)

  def apply(dh):  # word2vec.c's CBOW: the mean's error goes to every input unscaled
    per_ctx = dh[:, None, :] * mask[:, :, None]
    _add(model.words_in, tf.reshape(per_ctx, [-1, tf.shape(dh)[1]]), tf.reshape(ctx, [-1]))
    if doc is not None:
      _add(model.docs, dh, doc)
  return h, apply


def _logits(model, x):
  """The model's logits (B, targets) for a batch."""
  tf = require_tf()
  h, _ = _hidden(model, x)
  out = tf.gather(model.words_out, _targets(x))
  return tf.reduce_sum(out * h[:, None, :], axis=-1)


def _sgd_step(model, x, y, w):
  """One SGD step of `model` on a batch; returns the batch's mean loss."""
  tf = require_tf()
  rate = model.rate * tf.maximum(1.0 - x[draws_lib.X_PROGRESS][0], MIN_RATE_RATIO)
  words = _targets(x)
  h, apply_input = _hidden(model, x)
  out = tf.gather(model.words_out, words)
  logits = tf.reduce_sum(out * h[:, None, :], axis=-1)
  g = (y - tf.sigmoid(logits)) * w * rate
  apply_input(tf.reduce_sum(g[:, :, None] * out, axis=1))
  d_out = g[:, :, None] * h[:, None, :]
  _add(model.words_out, tf.reshape(d_out, [-1, tf.shape(h)[1]]), tf.reshape(words, [-1]))
  loss = tf.reduce_sum(w * tf.nn.sigmoid_cross_entropy_with_logits(y, logits))
  return loss / tf.maximum(tf.reduce_sum(w), 1.0)


def _model_class():
  """The `Word2Vec` class (defined here so that importing this module needs no Keras)."""
  if _CLASS:
    return _CLASS[0]
  tf = require_tf()
  import keras  # pylint: disable=import-outside-toplevel

  class Word2Vec(keras.Model):
    """Input vectors (words; documents for PV), output vectors, SGD train_step."""

    def __init__(self, kind, vocab_size, dim, *, num_docs=0, seed=0, learning_rate=0.025,
                 jit_compile=True):
      super().__init__(name=f"word2vec_{kind}")
      if kind not in schema.MODELS:
        raise ValueError(f"kind {kind!r}: expected one of {schema.MODELS}")
      self.kind, self.rate = kind, float(learning_rate)
      self.words_in = self._weight("words_in", _initial(seed, "words_in", vocab_size, dim))
      self.words_out = self._weight("words_out", np.zeros((vocab_size, dim), np.float32))
      self.docs = self.kernel_run = None
      if kind in schema.PV_MODELS:
        self.docs = self._weight("docs", _initial(seed, "docs", num_docs, dim))
      self.built = True
      # XLA fuses the step's gathers, products and sums (Keras's own jit_compile
      # refuses this model); ~2.5x less CPU a step than TF's kernels.
      self._step = tf.function(lambda x, y, w: _sgd_step(self, x, y, w),
                               jit_compile=jit_compile)

    def _weight(self, name, value):
      w = self.add_weight(shape=value.shape, initializer="zeros", name=name, trainable=False)
      w.assign(value)
      return w

    def call(self, x):
      return _logits(self, x)

    def train_step(self, data):
      x, y, w = keras.utils.unpack_x_y_sample_weight(data)
      if self.kernel_run is not None:  # x: chunk numbers (w2v_data.train.kernel_engine)
        return {"sgd_loss": tf.numpy_function(self.kernel_run.step, [x], tf.float32)}
      return {"sgd_loss": self._step(x, y, w)}

    def weights_numpy(self):
      """{name: float32 copy} of the model's weights."""
      named = {"words_in": self.words_in, "words_out": self.words_out, "docs": self.docs}
      return {k: np.array(v.numpy(), np.float32) for k, v in named.items() if v is not None}

    def assign_numpy(self, weights):
      """Sets the weights from {name: array} (as `weights_numpy` gives)."""
      for name, value in weights.items():
        getattr(self, name).assign(value)

  _CLASS.append(Word2Vec)
  return Word2Vec


WORD_VECTORS = ("in", "in+out")


def vectors(model, word_vectors: str = "in"):
  """(kind of names, float32 matrix): word vectors or document vectors (PV).

  Args:
    word_vectors: skip-gram and CBOW: "in" (the input vectors, what word2vec.c
      and gensim save) or "in+out" (the input plus the output vectors: every
      word's two roles in one vector, better on word-similarity tasks).
  """
  if word_vectors not in WORD_VECTORS:
    raise ValueError(f"word_vectors={word_vectors!r}: expected one of {WORD_VECTORS}")
  if model.kind in WORD_MODELS:
    matrix = np.asarray(model.words_in.numpy(), np.float32)
    if word_vectors == "in+out":
      matrix = matrix + np.asarray(model.words_out.numpy(), np.float32)
    return "words", matrix
  return "docs", np.asarray(model.docs.numpy(), np.float32)


ENGINES = ("auto", "kernel", "xla")


def resolve_engine(engine: str) -> str:
  """"kernel" or "xla" for an --engine value ("auto": kernel when numba is installed).

  Raises:
    UserError: an unknown engine, or "kernel" without numba.
  """
  if engine not in ENGINES:
    raise UserError(f"engine={engine!r}: must be one of {', '.join(ENGINES)}")
  if engine == "auto":
    return "kernel" if kernel_engine.available() else "xla"
  if engine == "kernel" and not kernel_engine.available():
    raise UserError("engine=kernel needs numba: pip install 'textrecords[fast]'")
  return engine


def train(data_dir: str, *, seed: int, settings: draws_lib.DrawSettings, dim: int = 100,
          batch_size: int = 1024, epochs: int = 5, learning_rate: float = 0.025,
          expect=None, verbose: int = 2, jit_compile: bool = True,
          log=print, parallel: int = 2, engine: str = "auto", word_vectors: str = "in"):
  """Trains on fresh draws of every epoch; returns (model, names, vectors, words trained).

  Names and vectors: the vocab without <unk> and the word vectors (skip-gram,
  CBOW), or the document ids and the document vectors (PV).

  Args:
    engine: "kernel" (`w2v_data.train.kernel_engine`: word2vec.c's per-example
      updates; batch_size is not used), "xla" (a batch's updates summed, in an
      XLA step), or "auto" (kernel when numba is installed).
    word_vectors: the word vectors returned (`vectors`): "in" or "in+out".

  Raises:
    UserError: records of a model not in `expect`, or bad settings.
  """
  engine = resolve_engine(engine)
  models.seed_everything(seed)
  draws = draws_lib.EpochDraws(data_dir, batch_size, seed=seed, settings=settings)
  if expect is not None and draws.model not in expect:
    raise UserError(f"{data_dir}: records are for --model={draws.model}, this trains "
                    f"{' or '.join(expect)}")
  tokens = models.read_tokens(data_dir)
  doc_names = models.read_doc_names(data_dir) if draws.model in schema.PV_MODELS else []
  model = word2vec_model(draws.model, len(tokens), dim, num_docs=len(doc_names), seed=seed,
                         learning_rate=learning_rate, jit_compile=jit_compile)
  with warnings.catch_warnings():  # an epoch's length is not known before it ends
    warnings.filterwarnings("ignore", message="Your input ran out of data")
    if engine == "kernel":
      _fit_kernel(model, draws, seed=seed, epochs=epochs, learning_rate=learning_rate,
                  verbose=verbose)
    else:
      for e in range(epochs):
        model.fit(draws.dataset(e, epochs, parallel=parallel), initial_epoch=e,
                  epochs=e + 1, verbose=verbose, shuffle=False)
  kind, matrix = vectors(model, word_vectors)
  if not np.isfinite(matrix).all():
    raise UserError(f"{data_dir}: training diverged (non-finite vectors): a batch sums the "
                    "updates of a word's every occurrence; lower --batch_size (small "
                    "vocabularies) or --learning_rate")
  if kind == "docs":
    return model, doc_names, matrix, draws.num_tokens * epochs
  names, matrix = vectors_lib.without_unk(tokens, matrix)
  if log and verbose:
    log(f"trained {draws.num_tokens * epochs} tokens")
  return model, names, matrix, draws.num_tokens * epochs


def _fit_kernel(model, draws, *, seed: int, epochs: int, learning_rate: float, verbose: int):
  """All epochs in one model.fit, each step a few chunks of the numba kernel."""
  weights = model.weights_numpy()
  with cli.notice_if_slow(cli.Progress(quiet=not verbose).sayer("w2v_data: ")):
    run = kernel_engine.KernelRun(draws, weights, seed=seed, epochs=epochs,
                               learning_rate=learning_rate, min_ratio=MIN_RATE_RATIO)
    run.compile()  # numba's first compile: announced, not a silent first step
  model.kernel_run = run
  try:
    model.fit(run.dataset(draws._tf), epochs=epochs, verbose=verbose, shuffle=False,  # pylint: disable=protected-access
              callbacks=[kernel_engine.epoch_callback(run, lambda: model.assign_numpy(weights))])
  finally:
    model.kernel_run = None


def infer_vector(model, word_ids, noise_counts, *, seed: int, epochs: int = 50,
                 learning_rate: float = 0.025, num_noise_words: int = 5,
                 window: int = 5) -> np.ndarray:
  """A vector for a new document under a trained PV model, the same on every call.

  The document's vector starts uniform on [-0.5/D, 0.5/D] and is trained, the
  word weights frozen, for `epochs` full-batch SGD steps (rate falling
  linearly) against its words and K noise words a word; every draw comes
  from (seed, the text's ids), so the same text and seed always give the
  same vector (gensim's infer_vector differs from call to call).

  Args:
    model: a trained PV-DBOW or PV-DM `Word2Vec` model.
    word_ids: the document's token ids (ints of the model's vocab, <unk> left out).
    noise_counts: the vocab's counts (meta["vocab"]["counts"]): noise words are
      drawn with weight count**0.75.
    window: PV-DM: the contexts (all within this distance) averaged with the
      document vector.
  """
  if model.kind not in schema.PV_MODELS:
    raise ValueError(f"infer_vector needs a pv_dbow or pv_dm model, not {model.kind}")
  ids = np.asarray(word_ids, np.int64).reshape(-1)
  out = np.asarray(model.words_out.numpy(), np.float64)
  dim = out.shape[1]
  rng = np.random.default_rng(seeding.derive_seed(
      seed, "w2v_data/infer", seeding.content_digest(ids.tobytes())))
  doc = rng.uniform(-0.5 / dim, 0.5 / dim, dim)
  if not len(ids):
    return doc.astype(np.float32)
  probs = sampling.noise_probabilities(np.asarray(noise_counts, np.float64))
  ctx_sum, ctx_n = _infer_contexts(model, ids, window)
  labels = np.zeros((len(ids), 1 + num_noise_words))
  labels[:, 0] = 1.0
  for e in range(epochs):
    rate = learning_rate * max(1.0 - e / epochs, MIN_RATE_RATIO)
    words = np.concatenate(
        [ids[:, None], rng.choice(len(probs), (len(ids), num_noise_words), p=probs)], axis=1)
    h = (doc[None, :] + ctx_sum) / (1.0 + ctx_n)[:, None]
    u = out[words]
    g = (labels - 1.0 / (1.0 + np.exp(-np.einsum("nkd,nd->nk", u, h)))) * rate
    g[:, 1:] *= words[:, 1:] != ids[:, None]
    doc = doc + np.einsum("nk,nkd->d", g, u)
  return doc.astype(np.float32)


def _infer_contexts(model, ids: np.ndarray, window: int):
  """PV-DM: per position, the sum and count of its contexts' input vectors (PV-DBOW: 0)."""
  n = len(ids)
  if model.kind != "pv_dm":
    return np.zeros((n, 1)), np.zeros(n)
  words_in = np.asarray(model.words_in.numpy(), np.float64)
  total, count = np.zeros((n, words_in.shape[1])), np.zeros(n)
  for off in range(-window, window + 1):
    if off == 0:
      continue
    src = np.arange(n) + off
    ok = (src >= 0) & (src < n)
    total[ok] += words_in[ids[src[ok]]]
    count[ok] += 1.0
  return total, count
