"""Fresh draws every epoch: subsampling, windows and noise words redrawn in tf.data.

word2vec.c and gensim draw subsampling, window sizes and noise words anew
each time they pass over the corpus; `make_dataset` reads the one draw that
`w2v_data.create` wrote (d2l's fixed samples, kept for epoch-free uses).
`EpochDraws` holds the records' sentences (their kept tokens, in memory) and
gives, for each epoch, a `tf.data.Dataset` of examples drawn from
(seed, epoch, chunk of sentences) with stateless random ops: the same seed
gives the same batches on every run, for any tf.data parallelism, and the
records of any generator worker count (they are byte-identical).

Fresh subsampling needs records that kept every token: `w2v_data.create`
writes them by default (`--subsample_t=1`: every sentence's tokens are stored;
`subsample_t` here draws the subsampling). Records written with a smaller
--subsample_t hold one subsampled draw; with `subsample_t=None` their tokens
are used as they are (windows and noise words are still redrawn).

Examples (rows), for B rows per batch, K noise words, W = max window:
  skipgram: {"center": (B, 1), "contexts_negatives": (B, 1 + K)}: one
      (center, context) pair per row, the context first, then its K noise words
  cbow: {"contexts": (B, 2W), "contexts_mask": (B, 2W), "center_and_noise": (B, 1 + K)}
  pv_dm: cbow's keys and "doc_id" (B, 1)
  pv_dbow: {"doc_id": (B, 1), "center_and_noise": (B, 1 + K)}
each with "progress" (B,) (the fraction of all epochs' tokens before this
row's chunk, for a learning rate that decays linearly), labels y (B, 1 + K)
= [1, 0, ...] and sample weights (B, 1 + K): 0 for a noise word equal to the
positive word (word2vec.c skips those), else 1.

`draw_batches` shares these draws out among many hosts. The draws are a
function of (seed, epoch, chunk of sentences), not of the input pipeline,
so every pipeline computes the same global batches of G rows and takes its
replicas' slices of each (`read_order.Sharing`): global batch k holds the
same rows for any number of pipelines, the slices are disjoint and make it
up, and every pipeline yields the same number of steps (the partial last
global batch of an epoch is dropped). How many rows an epoch draws is itself
drawn, so the number of steps is not known beforehand. `start_step=k` skips
k global batches: no record is read (the sentences are held), the skipped
draws are computed and dropped. Each pipeline computes every draw (P
pipelines: P times the work of one).

Example:
  >>> ds = draw_batches("out/ptb_w2v", 1024, epochs=5, seed=0,  # doctest: +SKIP
  ...                   input_context=ctx, start_step=step)
"""

import dataclasses
from typing import Optional

import numpy as np

from textrecords.reading import locations as dataset_files
from textrecords.wire import features
from textrecords import seeding
from textrecords.reading import tf_input
from textrecords.errors import UserError
from textrecords.reading.read_options import ReadOptions
from textrecords.tf_import import require_tf
from w2v_data import sampling
from w2v_data import schema
from w2v_data.config import SUBSAMPLE_FORMULAS
from w2v_data import dataset

X_PROGRESS = "progress"
CHUNK_TOKENS = 8192  # sentences are drawn about this many tokens at a time
_STREAM_KEEP, _STREAM_WINDOW, _STREAM_NOISE = 1, 2, 3


@dataclasses.dataclass(frozen=True)
class DrawSettings:
  """What is drawn each epoch.

  Attributes:
    subsample_t: fresh subsampling threshold (None: use the stored tokens).
    subsample_formula: "sqrt" (d2l) or "word2vec" (word2vec.c, gensim).
    max_window_size: windows uniform on 1..this (None: the records').
    num_noise_words: K (None: the records').
  """
  subsample_t: Optional[float] = None
  subsample_formula: str = "sqrt"
  max_window_size: Optional[int] = None
  num_noise_words: Optional[int] = None


def _check_settings(s: DrawSettings, meta: dict, meta_path: str):
  """UserError for settings the records cannot give."""
  if s.subsample_formula not in SUBSAMPLE_FORMULAS:
    raise UserError(f"subsample_formula={s.subsample_formula!r}: must be one of "
                    f"{', '.join(SUBSAMPLE_FORMULAS)}")
  if s.subsample_t is not None:
    if not 0.0 < s.subsample_t <= 1.0:
      raise UserError(f"subsample_t={s.subsample_t}: must be in (0, 1]")
    if float(meta["flags"]["subsample_t"]) < 1.0:
      raise UserError(f"{meta_path}: the records are subsampled (--subsample_t="
                      f"{meta['flags']['subsample_t']}); fresh subsampling needs records of "
                      "every token: rerun w2v_data.create without --subsample_t (default "
                      "--subsample_t=1)")
  for name in ("max_window_size", "num_noise_words"):
    v = getattr(s, name)
    low = 1 if name == "max_window_size" else 0
    if v is not None and (not isinstance(v, (int, np.integer)) or not low <= v <= 1000):
      raise UserError(f"{name}={v!r}: must be an integer in [{low}, 1000]")
  if meta["layout"] != "sentence":
    raise UserError(f"{meta_path}: fresh draws need the sentence layout (records of "
                    f"--layout={meta['layout']}); rerun w2v_data.create without --layout")


def records_keep_every_token(meta: dict) -> bool:
  """Whether records with this metadata were written without subsampling."""
  return float(meta["flags"]["subsample_t"]) >= 1.0


class EpochDraws:
  """A w2v_data dataset's sentences, drawn anew for each epoch (see the module doc).

  Args:
    location: a w2v_data.create output (folder, meta.json or record files).
    batch_size: rows per batch (skip-gram: pairs; others: centers).
    seed: seeds every draw (an int; required: draws are always seeded).
    settings: a DrawSettings.
    verify: "checksum", "size" or "none" check of the record files first.

  Raises:
    UserError: bad settings, foreign or mismatched records.
  """

  def __init__(self, location: str, batch_size: int, *, seed: int,
               settings: DrawSettings = DrawSettings(), verify: str = "checksum"):
    if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
      raise UserError(f"batch_size={batch_size!r}: must be a positive integer")
    if not isinstance(seed, (int, np.integer)) or seed < 0:
      raise UserError(f"seed={seed!r}: must be a non-negative integer")
    found = dataset.open_dataset(location)
    meta, meta_path = found.meta, found.layout.meta_path
    _check_settings(settings, meta, meta_path)
    self.meta, self.model = meta, meta.get("model", schema.DEFAULT_MODEL)
    self.batch_size = int(batch_size)
    self.window = int(settings.max_window_size or meta["flags"]["max_window_size"])
    k = settings.num_noise_words
    self.k = int(meta["noise"]["num_noise_words"] if k is None else k)
    files = [e.path for e in dataset_files.record_files([found], schema.SPLIT, verify=verify)]
    tf = self._tf = require_tf()
    self.tokens, self.row_splits, self.doc = _held_sentences(
        tf, files, meta.get("compression", ""), meta)
    counts = np.asarray(meta["vocab"]["counts"], dtype=np.float64)
    self.keep = self.keep_probs = None
    if settings.subsample_t is not None:
      self.keep_probs = sampling.keep_probabilities(
          counts, settings.subsample_t, settings.subsample_formula)
      self.keep = tf.constant(self.keep_probs, tf.float32)
    table = self.noise_table = sampling.AliasTable(sampling.noise_probabilities(counts))
    self.noise = (tf.constant(table.prob, tf.float64), tf.constant(table.alias, tf.int64))
    # The key keeps the module's old name: the same draws (and vectors) as before.
    self.seed = seeding.derive_seed(int(seed), "w2v_data/epochs")
    num_sentences = int(self.row_splits.shape[0]) - 1
    per_sentence = max(1.0, float(self.tokens.shape[0]) / max(1, num_sentences))
    self.chunk = max(1, int(CHUNK_TOKENS / per_sentence))
    self.num_chunks = -(-num_sentences // self.chunk)
    self.num_tokens = int(self.tokens.shape[0])

  def dataset(self, epoch: int, epochs: int, parallel: int = 2):
    """The batches of `epoch` (0-based) of `epochs`: a `tf.data.Dataset` of (x, y, w)."""
    tf = self._tf
    if not 0 <= epoch < epochs:
      raise UserError(f"epoch={epoch}: must be in [0, epochs={epochs})")
    ds = tf.data.Dataset.range(self.num_chunks)
    ds = ds.map(lambda c: self._chunk(tf.constant(epoch, tf.int64), c, float(epochs)),
                num_parallel_calls=parallel, deterministic=True)
    ds = ds.rebatch(self.batch_size)
    options = tf.data.Options()
    options.autotune.enabled = False
    return ds.prefetch(2).with_options(options)

  def _chunk(self, epoch, c, epochs):
    """The examples of chunk c of `epoch` (see the module doc)."""
    tf = self._tf
    key = tf.random.experimental.stateless_fold_in(
        tf.constant([self.seed >> 32, self.seed & 0xFFFFFFFF], tf.int64), epoch)
    key = tf.random.experimental.stateless_fold_in(key, c)
    seeds = [tf.random.experimental.stateless_fold_in(key, s)
             for s in (_STREAM_KEEP, _STREAM_WINDOW, _STREAM_NOISE)]
    s0 = c * self.chunk
    s1 = tf.minimum(s0 + self.chunk, tf.shape(self.row_splits, out_type=tf.int64)[0] - 1)
    t0, t1 = self.row_splits[s0], self.row_splits[s1]
    ids = self.tokens[t0:t1]
    lengths = self.row_splits[s0 + 1:s1 + 1] - self.row_splits[s0:s1]
    row = tf.repeat(tf.range(s1 - s0), lengths)
    if self.keep is not None:
      u = tf.random.stateless_uniform(tf.shape(ids), seed=seeds[0])
      kept = u < tf.gather(self.keep, ids)
      ids, row = tf.boolean_mask(ids, kept), tf.boolean_mask(row, kept)
      lengths = tf.math.bincount(row, minlength=s1 - s0, maxlength=s1 - s0, dtype=tf.int64)
    progress = (tf.cast(epoch, tf.float64) + tf.cast(t0, tf.float64) / max(1, self.num_tokens)
                ) / epochs
    doc = None if self.doc is None else tf.gather(self.doc[s0:s1], row)
    if self.model == "pv_dbow":
      x, positive = {schema.X_DOC_ID: doc[:, tf.newaxis]}, ids
    else:
      center, ctx, mask = _windows(tf, ids, row, lengths, self.window, seeds[1])
      if self.model == "skipgram":
        where = tf.where(mask)
        x = {schema.X_CENTER: tf.gather(center, where[:, 0])[:, tf.newaxis]}
        positive = tf.gather_nd(ctx, where)
      else:
        keep = tf.reduce_any(mask, axis=1) | (self.model == "pv_dm")
        ctx, mask, positive = (tf.boolean_mask(t, keep) for t in (ctx, mask, center))
        x = {schema.X_CONTEXTS: ctx, schema.X_CONTEXTS_MASK: tf.cast(mask, tf.float32)}
        if doc is not None:
          x[schema.X_DOC_ID] = tf.boolean_mask(doc, keep)[:, tf.newaxis]
    return self._with_noise(x, positive, progress, seeds[2])

  def _with_noise(self, x, positive, progress, seed):
    """Adds the positive word and K noise words, labels, weights and progress to x."""
    tf = self._tf
    n = tf.shape(positive, out_type=tf.int64)[0]
    noise = alias_draw(tf, self.noise, tf.stack([n, self.k]), seed)
    words = tf.concat([positive[:, tf.newaxis], noise], axis=1)
    key = schema.X_CONTEXTS_NEGATIVES if self.model == "skipgram" else schema.X_CENTER_AND_NOISE
    x = {k: tf.cast(v, tf.float32 if k == schema.X_CONTEXTS_MASK else tf.int32)
         for k, v in x.items()}
    x[key] = tf.cast(words, tf.int32)
    x[X_PROGRESS] = tf.fill([n], tf.cast(progress, tf.float32))
    y = tf.tile(tf.constant([[1.0] + [0.0] * self.k], tf.float32), [n, 1])
    w = tf.concat([tf.ones([n, 1]), tf.cast(noise != positive[:, tf.newaxis], tf.float32)], 1)
    return x, y, w


def alias_draw(tf, table, shape, seed):
  """int64 draws of `shape` from an alias table (prob, alias), stateless in `seed`."""
  prob, alias = table
  size = tf.shape(prob, out_type=tf.int64)[0]
  col = tf.random.stateless_uniform(shape, seed=seed, minval=0, maxval=size, dtype=tf.int64)
  frac = tf.random.stateless_uniform(
      shape, seed=tf.random.experimental.stateless_fold_in(seed, -1), dtype=tf.float64)
  return tf.where(frac < tf.gather(prob, col), col, tf.gather(alias, col))


def _windows(tf, ids, row, lengths, window: int, seed):
  """Each token's contexts: (center (N,), contexts (N, 2W), mask (N, 2W) bool).

  A token's window is uniform on 1..window; its contexts are the tokens of
  its sentence within that distance, in sentence order.
  """
  n = tf.shape(ids, out_type=tf.int64)[0]
  b = tf.random.stateless_uniform([n], seed=seed, minval=1, maxval=window + 1, dtype=tf.int64)
  starts = tf.cumsum(lengths, exclusive=True)
  pos = tf.range(n) - tf.gather(starts, row)
  length = tf.gather(lengths, row)
  offsets = tf.constant([o for o in range(-window, window + 1) if o], tf.int64)
  at = pos[:, tf.newaxis] + offsets[tf.newaxis, :]
  mask = ((tf.abs(offsets)[tf.newaxis, :] <= b[:, tf.newaxis]) & (at >= 0)
          & (at < length[:, tf.newaxis]))
  index = tf.clip_by_value(tf.range(n)[:, tf.newaxis] + offsets[tf.newaxis, :], 0,
                           tf.maximum(n - 1, 0))
  ctx = tf.where(mask, tf.gather(ids, index), tf.zeros([], ids.dtype))
  return ids, ctx, mask


def _held_sentences(tf, files, compression: str, meta: dict):
  """(tokens int64 (T,), row_splits int64 (S+1,), doc ids (S,) or None) of every record."""
  model = meta.get("model", schema.DEFAULT_MODEL)
  spec = features.parse_spec(schema.schema_for(model, meta["layout"]))
  spec = {k: v for k, v in spec.items() if k in (schema.CENTERS, schema.DOC_ID)}
  tf_input.check_readable_by_tf(files)
  tokens, lengths, docs = [], [], []
  for path in files:
    for serialized in tf.data.TFRecordDataset(path, compression_type=compression or None,
                                              buffer_size=1 << 20).batch(8192):
      parsed = tf.io.parse_example(serialized, spec)
      tokens.append(parsed[schema.CENTERS].flat_values.numpy())
      lengths.append(parsed[schema.CENTERS].row_lengths().numpy())
      if schema.DOC_ID in parsed:
        docs.append(parsed[schema.DOC_ID][:, 0].numpy())
  cat = lambda parts: np.concatenate(parts) if parts else np.zeros([0], np.int64)  # noqa: E731
  splits = np.concatenate([[0], np.cumsum(cat(lengths))]).astype(np.int64)
  doc = tf.constant(cat(docs), tf.int64) if schema.DOC_ID in spec else None
  return tf.constant(cat(tokens), tf.int64), tf.constant(splits), doc


def draw_batches(location: str, global_batch_size: int, *, epochs: int, seed: int,
                 input_context=None, start_step: int = 0,
                 settings: DrawSettings = DrawSettings(),
                 verify: str = "checksum", parallel: int = 2):
  """This input pipeline's per-replica batches of `epochs` epochs of fresh
  draws (see the module doc): a `tf.data.Dataset` of (x, y, w), batch
  dimension static (G / replicas)."""
  if not isinstance(epochs, int) or isinstance(epochs, bool) or epochs < 1:
    raise UserError(f"epochs={epochs!r}: must be a positive integer")
  sharing = ReadOptions(global_batch_size=global_batch_size, input_context=input_context,
                        start_step=start_step).sharing()
  tf = require_tf()
  draws = EpochDraws(location, sharing.global_batch, seed=seed, settings=settings,
                     verify=verify)
  ds = draws.dataset(0, epochs, parallel)
  for e in range(1, epochs):
    ds = ds.concatenate(draws.dataset(e, epochs, parallel))
  g, r, b = sharing.global_batch, sharing.replicas, sharing.per_replica
  lo, hi = sharing.local_replicas.start, sharing.local_replicas.stop
  ds = ds.filter(lambda x, y, w: tf.shape(y)[0] == g).skip(start_step)
  ds = ds.map(lambda *xyw: tf.nest.map_structure(
      lambda t: tf.reshape(t, tf.concat([[r, b], tf.shape(t)[1:]], 0))[lo:hi], xyw))
  return ds.unbatch().prefetch(2)
