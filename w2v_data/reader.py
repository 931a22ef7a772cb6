"""w2v_data records without TensorFlow: numpy batches, grain and PyTorch.

`numpy_batches(...)` equals `w2v_data.make_dataset(...)` with the same
options, batch for batch (the read order over centers, training or not;
sharding, start_step and mixtures alike): x = {"center": int32 (B, 1),
"contexts_negatives": int32 (B, L)}, y = float32 labels (B, L),
sample_weight = float32 mask (B, L); L as make_dataset's (`dataset.row_width`:
by default the data's longest row with drop_remainder, else the batch's
longest; or `pad_to`).
`--model=cbow|pv_dbow|pv_dm` records give that model's arrays
(`CenterDecoder`). Stored noise words only (`negatives="fresh"` is
make_dataset's). Record files are decoded a file at a time (`FileRows`),
all of them kept when make_dataset would hold them in memory.

grain and PyTorch batch records: with the sentence layout a batch of
`batch_size` sentence records holds all their centers (a varying count);
with the center layout, exactly `batch_size` centers.

Example:
  >>> for x, y, w in numpy_batches("out/ptb_w2v", 512, pad_to=60):  # doctest: +SKIP
  ...   x["contexts_negatives"].shape                               # (512, 60)
"""

import collections
from typing import Optional, Sequence

import numpy as np

from textrecords.reading import locations as dataset_files
from textrecords.wire import example_decoder
from textrecords.reading import numpy_reader
from textrecords.reading import package_readers
from textrecords.errors import UserError
from textrecords.files import tfrecord
from w2v_data import dataset
from w2v_data import schema
from textrecords.reading import mixtures


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
  dataset.check_pad_to(pad_to)
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
  if pad_to not in (None, "batch") and pad_to < longest:
    raise UserError(f"pad_to={pad_to!r} is shorter than the longest row ({longest}, from "
                    f"{meta_path}); use pad_to >= {longest} or None")
  decoder = W2vDecoder(meta["layout"], k, longest, None if pad_to == "batch" else pad_to)
  return package_readers.Opened(entries, meta.get("compression", ""), decoder, verify=verify,
                                skip_corrupt=skip_corrupt, index=index, log=log)


def numpy_batches(location, batch_size: Optional[int] = None, *, split: str = schema.SPLIT,
                  training: Optional[bool] = None, seed: Optional[int] = None,
                  global_batch_size: Optional[int] = None, input_context=None,
                  start_step: int = 0, drop_remainder: Optional[bool] = None,
                  shuffle_buffer: int = 10000, repeat: bool = False,
                  shard_index: int = 0, num_shards: int = 1, expand_labels: bool = False,
                  weights: Optional[Sequence[float]] = None, **options):
  """An iterator of `(x, y, sample_weight)` batches of centers: the batches
  of `w2v_data.make_dataset` with the same options (its read order over
  centers; stored noise words).

  Sharding: `input_context`, or `shard_index`/`num_shards` (one replica
  each). `start_step` starts there without reading the files before it.
  `options`: `pad_to`, `negatives` and the reading options. expand_labels:
  y and sample_weight get a last axis of 1, as make_dataset's (for
  `keras.losses.BinaryCrossentropy`). A list of locations with `weights`:
  a mixture (as make_dataset's).
  """
  opts = numpy_reader.read_options_from(locals())
  dataset.check_split(split)
  if not isinstance(expand_labels, bool):
    raise UserError(f"expand_labels={expand_labels!r}: must be True or False")
  if not isinstance(location, str) or weights is not None:
    batches = _mixture_batches(location, weights, opts, options)
  else:
    batches = _planned_batches(location, opts, options)
  return _with_label_axis(batches) if expand_labels else batches


def _planned_batches(location: str, opts, options: dict):
  """Decoded batches of one dataset in the read order over its centers."""
  opened = open_dataset(location, **options)
  rows = FileRows(opened, _held_budget(opened))
  plan = opts.plan(rows.centers, where=location, unit="centers")
  decoder = _rows_as_make_dataset(opened.decoder, options.get("pad_to"), opts.drop_remainder)

  def batches():
    for _, ids in plan.batches():
      yield decoder.finish(*rows.gather(ids))

  return batches()


def _mixture_batches(locations, weights, opts, options: dict):
  """Decoded batches of a mixture (`textrecords.reading.mixtures`)."""
  if isinstance(locations, str):
    locations = [locations]
  opened = [open_dataset(loc, **options) for loc in locations]
  metas = [o.entries[0].found.meta for o in opened]
  mixtures.check_same_schema(metas, locations)
  for meta, loc in zip(metas[1:], locations[1:]):
    if (meta["vocab"]["sha256"], meta["noise"]) != (metas[0]["vocab"]["sha256"],
                                                    metas[0]["noise"]):
      raise UserError(f"{loc}: another vocabulary or num_noise_words than {locations[0]}; a "
                      "w2v_data mixture reads datasets of one vocabulary and K")
  decoder = _widest(opened)
  rows = [FileRows(o, None, decoder) for o in opened]
  decoder = _rows_as_make_dataset(decoder, options.get("pad_to"), opts.drop_remainder)
  mix = mixtures.build([r.centers for r in rows], weights, opts)

  def batches():
    for _, which, ids in mix.batches():
      parts = [None] * len(ids)
      for d, r in enumerate(rows):
        at = np.flatnonzero(which == d)
        if at.size:
          got = r.gather(ids[at])
          parts = [np.zeros((len(ids),) + g.shape[1:], g.dtype) if p is None else p
                   for p, g in zip(parts, got)]
          for p, g in zip(parts, got):
            p[at] = g
      yield decoder.finish(*parts)

  return batches()


def _widest(opened):
  """A decoder of the mixture's rows as wide as its widest dataset's."""
  first = opened[0].decoder
  if isinstance(first, W2vDecoder):
    width = max(o.decoder.longest for o in opened)
    return W2vDecoder(first.layout, first.k, width, first.pad_to)
  return CenterDecoder(first.model, first.k, max(o.decoder.two_w for o in opened))


def _rows_as_make_dataset(decoder, pad_to, drop_remainder: bool):
  """`decoder` giving rows as wide as make_dataset's (`dataset.row_width`)."""
  if not isinstance(decoder, W2vDecoder):
    return decoder
  width = dataset.row_width(pad_to, drop_remainder, decoder.longest)
  return W2vDecoder(decoder.layout, decoder.k, decoder.longest, width)


def _held_budget(opened) -> Optional[int]:
  """Bytes of decoded rows kept (None: all, as make_dataset holds them)."""
  if isinstance(opened.decoder, W2vDecoder):
    per_center = opened.decoder.longest * 4 + 16
    total = sum(int(c) for c in center_counts(opened)) * per_center
    return None if total <= dataset.IN_MEMORY_BYTES else dataset.IN_MEMORY_BYTES
  return dataset.IN_MEMORY_BYTES


def center_counts(opened):
  """Centers in each of the dataset's record files (the metadata's)."""
  found = opened.entries[0].found
  return dataset.center_counts(found.meta, opened.entries, found.layout.meta_path)


class FileRows:
  """Each record file's centers decoded into the decoder's per-center
  arrays (a file at a time), gathered by center number. Files decoded are
  kept up to `budget` bytes (None: all).

  Attributes:
    centers: centers per file.
    records_read: records decoded so far.
  """

  def __init__(self, opened, budget: Optional[int], decoder=None):
    self.opened, self.budget = opened, budget
    self.decoder = decoder or opened.decoder
    self.centers = center_counts(opened)
    self.starts = np.concatenate(([0], np.cumsum(self.centers, dtype=np.int64)))
    records = [int(e.records) for e in opened.entries]
    self.record_starts = np.concatenate(([0], np.cumsum(records, dtype=np.int64)))
    self.records_read = 0
    self._kept = collections.OrderedDict()
    self._source = None

  def gather(self, ids):
    """The per-center arrays of centers `ids` (in that order)."""
    ids = np.asarray(ids, np.int64)
    files = np.searchsorted(self.starts, ids, side="right") - 1
    out = None
    for f in np.unique(files):
      at = np.flatnonzero(files == f)
      got = [p[ids[at] - self.starts[f]] for p in self._file(int(f))]
      if out is None:
        out = [np.zeros((len(ids),) + g.shape[1:], g.dtype) for g in got]
      for o, g in zip(out, got):
        o[at] = g
    return out

  def _file(self, f: int):
    if f in self._kept:
      self._kept.move_to_end(f)
      return self._kept[f]
    parts = self.decoder.checked(self.decoder.rows, self._records(f))
    if len(parts[0]) != self.centers[f]:
      raise UserError(f"{self.opened.entries[f].path}: {len(parts[0])} centers, the metadata "
                      f"says {self.centers[f]}")
    self._kept[f] = parts
    size = lambda ps: sum(p.nbytes for p in ps)  # noqa: E731
    while self.budget is not None and len(self._kept) > 1 and sum(
        size(v) for v in self._kept.values()) > self.budget:
      self._kept.popitem(last=False)
    return parts

  def _records(self, f: int):
    entry = self.opened.entries[f]
    n = self.record_starts[f + 1] - self.record_starts[f]
    self.records_read += int(n)
    if self.opened.compression:
      return list(tfrecord.read_records(entry.path, self.opened.compression))
    if self._source is None:
      self._source = self.opened.source()
    return self._source.read(np.arange(self.record_starts[f], self.record_starts[f + 1]))


def _with_label_axis(batches):
  """(x, y, w) batches with y and w given a last axis of 1."""
  for x, y, w in batches:
    yield x, y[..., np.newaxis], w[..., np.newaxis]


grain_source, grain_dataset, torch_dataset = package_readers.package_readers(open_dataset)
