"""w2v_data records without TensorFlow: numpy batches, grain and PyTorch.

`numpy_batches(..., training=False)` equals `w2v_data.make_dataset(...,
training=False)` batch for batch: centers in file order, `batch_size` at a
time; x = {"center": int32 (B, 1), "contexts_negatives": int32 (B, L)}, y =
float32 labels (B, L), sample_weight = float32 mask (B, L); L the batch's
longest row or `pad_to`. `--model=cbow|pv_dm|pv_dbow` records give that
model's arrays (`CenterDecoder`), equal to make_dataset's as well. Stored
noise words only (`negatives="fresh"` draws with TF's stateless random ops:
tf.data's). Reading options as in `bert_data.reader`.

grain and PyTorch batch records: with the sentence layout a batch of
`batch_size` sentence records holds all their centers (a varying count);
with the center layout, exactly `batch_size` centers.

Example:
  >>> for x, y, w in numpy_batches("out/ptb_w2v", 512, pad_to=60):  # doctest: +SKIP
  ...   x["contexts_negatives"].shape                               # (512, 60)
"""

import itertools
from typing import Optional

import numpy as np

from textrecords.reading import locations as dataset_files
from textrecords.wire import example_decoder
from textrecords.reading import numpy_reader
from textrecords.reading import package_readers
from textrecords import seeding
from textrecords.errors import UserError
from w2v_data import dataset
from w2v_data import schema

CHUNK_RECORDS = 1024  # records decoded at a time by numpy_batches


class W2vDecoder(numpy_reader.BatchDecoder):
  """Serialized w2v_data records -> one row per center, then batches.

  Args:
    layout: "sentence" or "center".
    k: noise words per context.
    longest: the data's longest row ((1 + k) * max contexts).
    pad_to: a fixed row width (>= longest), or None for each batch's longest.
  """

  package = "w2v_data"

  def __init__(self, layout: str, k: int, longest: int, pad_to: Optional[int] = None):
    self.layout, self.k, self.longest, self.pad_to = layout, k, longest, pad_to
    self._decoder = example_decoder.ExampleDecoder(schema.schema_for("skipgram", layout))

  def rows(self, records):
    """(center int32 (C,), row int32 (C, width), n int64 (C,)) of all centers."""
    cols = self._decoder.decode(records)
    contexts, negatives = cols[schema.CONTEXTS], cols[schema.NEGATIVES]
    if self.layout == "center":
      center = cols[schema.CENTER].values[:, 0]
      n = contexts.lengths
    else:
      center = cols[schema.CENTERS].values
      n = cols[schema.NUM_CONTEXTS].values
    if n.sum() != contexts.values.size or self.k * n.sum() != negatives.values.size:
      raise example_decoder.DecodeError("context or noise-word counts do not add up")
    width = self.longest if self.pad_to is None else self.pad_to
    col = np.arange(width)[None, :]
    ctx_start = np.concatenate(([0], np.cumsum(n)[:-1]))[:, None]
    neg_start = self.k * ctx_start
    row = np.zeros((len(n), width), np.int32)
    take = col < n[:, None]
    row[take] = contexts.values[(ctx_start + col)[take]]
    take = (col >= n[:, None]) & (col < (1 + self.k) * n[:, None])
    row[take] = negatives.values[(neg_start + col - n[:, None])[take]]
    return center.astype(np.int32), row, n

  def finish(self, center, row, n):
    """`(x, y, sample_weight)` of a batch of centers' rows."""
    if self.pad_to is None:
      width = (1 + self.k) * int(n.max(initial=0))
      row = row[:, :width]
    col = np.arange(row.shape[1])[None, :]
    labels = (col < n[:, None]).astype(np.float32)
    mask = (col < (1 + self.k) * n[:, None]).astype(np.float32)
    x = {schema.X_CENTER: center[:, None], schema.X_CONTEXTS_NEGATIVES: row}
    return x, labels, mask

  def decode(self, records):
    return self.finish(*self.rows(records))


class CenterDecoder(numpy_reader.BatchDecoder):
  """Serialized CBOW / PV-DM / PV-DBOW records -> one row per center, then
  batches: x = {"center_and_noise": int32 (B, 1 + K), and as the model has
  them "contexts" int32 (B, 2W) zero-padded, "contexts_mask" float32 (B, 2W),
  "doc_id" int32 (B, 1)}, y = [1, 0 * K] float32 (B, 1 + K), sample_weight
  ones: `make_dataset`'s arrays for these models.

  Args:
    model: "cbow", "pv_dm" or "pv_dbow".
    k: noise words per center.
    two_w: 2 * max_window_size (the contexts' width).
  """

  package = "w2v_data"

  def __init__(self, model: str, k: int, two_w: int):
    self.model, self.k, self.two_w = model, k, two_w
    self.spec = schema.schema_for(model, "sentence")
    self._decoder = example_decoder.ExampleDecoder(self.spec)

  def rows(self, records):
    """The per-center arrays of all centers (a tuple, as `finish` takes it)."""
    cols = self._decoder.decode(records)
    centers = cols[schema.CENTERS]
    c = centers.values.size
    noise = cols[schema.NEGATIVES].values
    if noise.size != self.k * c:
      raise example_decoder.DecodeError("noise-word counts do not add up")
    parts = [np.concatenate([centers.values.reshape(c, 1), noise.reshape(c, self.k)],
                            axis=1).astype(np.int32)]
    if schema.NUM_CONTEXTS in cols:
      n = cols[schema.NUM_CONTEXTS].values
      ctx = cols[schema.CONTEXTS].values
      if n.size != c or n.sum() != ctx.size or (n.size and n.max() > self.two_w):
        raise example_decoder.DecodeError("context counts do not add up")
      col = np.arange(self.two_w)[None, :]
      take = col < n[:, None]
      rows = np.zeros((c, self.two_w), np.int32)
      rows[take] = ctx
      parts += [rows, take.astype(np.float32)]
    if schema.DOC_ID in cols:
      doc = np.repeat(cols[schema.DOC_ID].values[:, 0], centers.lengths)
      parts.append(doc.astype(np.int32)[:, None])
    return tuple(parts)

  def finish(self, *parts):
    """`(x, y, sample_weight)` of a batch of centers' rows."""
    names = [schema.X_CENTER_AND_NOISE]
    if any(s.name == schema.NUM_CONTEXTS for s in self.spec):
      names += [schema.X_CONTEXTS, schema.X_CONTEXTS_MASK]
    if any(s.name == schema.DOC_ID for s in self.spec):
      names.append(schema.X_DOC_ID)
    x = dict(zip(names, parts))
    y = np.zeros((len(parts[0]), 1 + self.k), np.float32)
    y[:, 0] = 1.0
    return x, y, np.ones_like(y)

  def decode(self, records):
    return self.finish(*self.rows(records))


def open_dataset(location: str, *, pad_to: Optional[int] = None, negatives: str = "stored",
                 verify: str = "checksum", skip_corrupt: bool = False, index: str = "build",
                 log=print) -> package_readers.Opened:
  """The checked w2v_data output folder `location`, ready for any reader."""
  if negatives != "stored":
    raise UserError(f"negatives={negatives!r}: the TF-free readers give the stored noise "
                    "words only (negatives='fresh' is make_dataset's)")
  if pad_to is not None and (isinstance(pad_to, bool) or not isinstance(pad_to, int)
                             or pad_to < 1):
    raise UserError(f"pad_to={pad_to!r}: must be a positive integer or None")
  found = dataset.open_dataset(location)
  meta, meta_path = found.meta, found.layout.meta_path
  model = meta.get("model", schema.DEFAULT_MODEL)
  entries = dataset_files.record_files([found], schema.SPLIT, verify=verify,
                                       skip_corrupt=skip_corrupt, log=log)
  k = int(meta["noise"]["num_noise_words"])
  if model != "skipgram":
    if pad_to is not None:
      raise UserError(f"{meta_path}: --model={model} records take pad_to=None (their rows "
                      "have a fixed width)")
    decoder = CenterDecoder(model, k, 2 * int(meta["flags"]["max_window_size"]))
    return package_readers.Opened(entries, meta.get("compression", ""), decoder,
                                  verify=verify, skip_corrupt=skip_corrupt, index=index, log=log)
  longest = max(int(meta["counts"]["max_row_length"]), 1)
  if pad_to is not None and pad_to < longest:
    raise UserError(f"pad_to={pad_to!r} is shorter than the longest row ({longest}, from "
                    f"{meta_path}); use pad_to >= {longest} or None")
  decoder = W2vDecoder(meta["layout"], k, longest, pad_to)
  return package_readers.Opened(entries, meta.get("compression", ""), decoder, verify=verify,
                                skip_corrupt=skip_corrupt, index=index, log=log)


def numpy_batches(location, batch_size: Optional[int] = None, *, split: str = schema.SPLIT,
                  training: Optional[bool] = None, seed: Optional[int] = None,
                  global_batch_size: Optional[int] = None, input_context=None,
                  start_step: int = 0, drop_remainder: Optional[bool] = None,
                  shuffle_buffer: int = 10000, repeat: bool = False,
                  shard_index: int = 0, num_shards: int = 1, expand_labels: bool = False,
                  **options):
  """An iterator of one epoch of `(x, y, sample_weight)` batches of centers.

  Training: records in a seeded global shuffle, and the centers of each
  chunk of records shuffled again (not make_dataset's training order; in
  evaluation order the batches equal make_dataset's). Sharding takes every
  `num_shards`-th record; `start_step` skips batches by reading them.
  `options`: `pad_to`, `negatives` and the reading options. expand_labels:
  y and sample_weight get a last axis of 1, as make_dataset's (for
  `keras.losses.BinaryCrossentropy`).
  """
  opts = numpy_reader.read_options_from(locals())
  dataset.check_split(split)
  if repeat:
    raise UserError("repeat=True: w2v_data.numpy_batches gives one epoch; iterate it again")
  if not isinstance(expand_labels, bool):
    raise UserError(f"expand_labels={expand_labels!r}: must be True or False")
  sharing = opts.sharing()
  opened = open_dataset(location, **options)
  chunks = opened.chunks(CHUNK_RECORDS, training=opts.training, seed=seed,
                         shard_index=sharing.pipeline, num_shards=sharing.pipelines)
  batches = _center_batches(chunks, opened.decoder, opts.per_replica, opts.drop_remainder,
                            opts.training, seed)
  batches = itertools.islice(batches, opts.start_step * len(sharing.local_replicas), None)
  return _with_label_axis(batches) if expand_labels else batches


def _with_label_axis(batches):
  """(x, y, w) batches with y and w given a last axis of 1."""
  for x, y, w in batches:
    yield x, y[..., np.newaxis], w[..., np.newaxis]


def _center_batches(chunks, dec, batch_size: int, drop_remainder: bool,
                    training: bool, seed: Optional[int]):
  pending = []  # per-center array pieces (the decoder's rows) not yet batched
  have = 0
  for c, recs in enumerate(chunks):
    parts = dec.checked(dec.rows, recs)
    if training:
      rng = (np.random.default_rng() if seed is None else
             np.random.default_rng(seeding.derive_seed(int(seed), "w2v-centers", c)))
      order = rng.permutation(len(parts[0]))
      parts = tuple(p[order] for p in parts)
    pending.append(parts)
    have += len(parts[0])
    if have < batch_size:
      continue
    parts = [np.concatenate(p) for p in zip(*pending)]
    full = have - have % batch_size
    for s in range(0, full, batch_size):
      yield dec.finish(*(p[s:s + batch_size] for p in parts))
    pending = [tuple(p[full:] for p in parts)]
    have -= full
  if have and not drop_remainder:
    yield dec.finish(*(np.concatenate(p) for p in zip(*pending)))


grain_source, grain_dataset, torch_dataset = package_readers.package_readers(open_dataset)
