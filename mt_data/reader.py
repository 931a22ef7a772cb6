"""mt_data records without TensorFlow: numpy batches, grain and PyTorch.

With `num_steps=T` the batches equal `mt_data.make_dataset(..., training=False)`'s
element for element: x = {"source", "decoder_input": int32 (B, T),
"source_valid_len": int32 (B,)}, y = int32 (B, T), sample_weight = float32
(B, T). Reading options as in `bert_data.reader` (`verify`, `skip_corrupt`,
`index`, `log`).

Bucketing (`bucket_boundaries=[...]`, `num_steps=None`): `numpy_batches`
groups the pairs as `tf.data.Dataset.bucket_by_sequence_length` does (bucket
i holds max(len(source), len(target)) in [bounds[i-1], bounds[i]); a bucket
is emitted when it holds `batch_size` pairs; at the end the partial buckets
in bucket order), each batch padded to its longest sequence: in evaluation
order equal to `make_dataset(..., num_steps=None, bucket_boundaries=...)`.
grain and torch batches are fixed-size slices of the order, so they refuse
bucketing.

Example:
  >>> for x, y, w in numpy_batches("out/mt", 64, split="valid"):  # doctest: +SKIP
  ...   x["source"].shape                                          # (64, 9)
"""

from typing import Optional, Sequence

import numpy as np

from mt_data import dataset
from mt_data import preprocess
from mt_data import schema
from textrecords.wire import example_decoder
from textrecords.reading import numpy_reader
from textrecords.reading import package_readers
from textrecords.errors import UserError
from textrecords.reading import mixtures


def pad_or_trim(values: np.ndarray, lengths: np.ndarray, steps: int) -> np.ndarray:
  """Rows of a flat ragged array, padded with <pad> or cut to `steps` (int32).

  >>> pad_or_trim(np.array([5, 6, 7, 8]), np.array([3, 1]), 2).tolist()
  [[5, 6], [8, 0]]
  """
  out = np.full((len(lengths), steps), preprocess.PAD_ID, np.int32)
  starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
  col = np.arange(steps)
  take = col[None, :] < lengths[:, None]
  src = (starts[:, None] + col[None, :])[take]
  out[take] = values[src]
  return out


def outputs(src: np.ndarray, label: np.ndarray):
  """(x, y, sample_weight) from source and label matrices of one width T."""
  bos = np.full((len(label), 1), preprocess.BOS_ID, np.int32)
  decoder_input = np.concatenate([bos, label], axis=1)[:, :label.shape[1]]
  x = {schema.X_SOURCE: src, schema.X_DECODER_INPUT: decoder_input,
       schema.X_SOURCE_VALID_LEN: (src != preprocess.PAD_ID).sum(axis=1, dtype=np.int32)}
  return x, label, (label != preprocess.PAD_ID).astype(np.float32)


class MtDecoder(numpy_reader.BatchDecoder):
  """Serialized mt_data records -> `(x, y, sample_weight)` padded to `num_steps`
  (None: to the batch's longest source or target)."""

  package = "mt_data"

  def __init__(self, num_steps: Optional[int]):
    self.num_steps = num_steps
    self._decoder = example_decoder.ExampleDecoder(schema.SCHEMA)

  def columns(self, records):
    """(source Column, target Column) of a batch of records."""
    cols = self._decoder.decode(records)
    return cols[schema.SOURCE_IDS.name], cols[schema.TARGET_IDS.name]

  def decode(self, records):
    src_col, tgt_col = self.columns(records)
    steps = self.num_steps
    if steps is None:
      steps = int(max(src_col.lengths.max(initial=0), tgt_col.lengths.max(initial=0)))
    return outputs(pad_or_trim(src_col.values, src_col.lengths, steps),
                   pad_or_trim(tgt_col.values, tgt_col.lengths, steps))


def open_dataset(location: str, *, split: str = "train", num_steps: Optional[int] = 9,
                 bucket_boundaries: Optional[Sequence[int]] = None, verify: str = "checksum",
                 skip_corrupt: bool = False, index: str = "build",
                 log=print) -> package_readers.Opened:
  """The checked split of the mt_data output folder `location` (its decoder
  pads to `num_steps`, or to each batch's longest sequence when bucketing)."""
  try:
    dataset._check_args(num_steps, bucket_boundaries)  # pylint: disable=protected-access
  except ValueError as e:
    raise UserError(str(e)) from e
  meta, entries = dataset.record_files(location, split, verify=verify,
                                       skip_corrupt=skip_corrupt, log=log)
  return package_readers.Opened(entries, meta.get("compression", ""), MtDecoder(num_steps),
                                verify=verify, skip_corrupt=skip_corrupt, index=index, log=log)


def numpy_batches(location, batch_size: Optional[int] = None, *, split: str = "train",
                  training: Optional[bool] = None, seed: Optional[int] = None,
                  global_batch_size: Optional[int] = None, input_context=None,
                  start_step: int = 0, drop_remainder: Optional[bool] = None,
                  shuffle_buffer: int = 10000, repeat: bool = False,
                  shard_index: int = 0, num_shards: int = 1,
                  bucket_boundaries: Optional[Sequence[int]] = None,
                  weights: Optional[Sequence[float]] = None, **options):
  """An iterator of `(x, y, sample_weight)` numpy batches: `make_dataset`'s
  with the same arguments (the read order of `textrecords.reading.read_order`).

  `bucket_boundaries` (with `num_steps=None`): batches of one length bucket
  each, as `make_dataset`'s. `shard_index`/`num_shards`: as an
  input_context of `num_shards` pipelines with a replica each. `options`:
  `num_steps` and the reading options.
  """
  opts = numpy_reader.read_options_from(locals())
  if bucket_boundaries is not None:
    options.setdefault("num_steps", None)
  if not isinstance(location, str) or weights is not None:
    if bucket_boundaries is not None:
      raise UserError("bucket_boundaries: a mixture gives fixed-length batches (num_steps)")
    return mixtures.numpy_mixture([open_dataset(loc, split=split, **options)
                                   for loc in location], weights, opts)
  opened = open_dataset(location, split=split, bucket_boundaries=bucket_boundaries, **options)
  if bucket_boundaries is None:
    return numpy_reader.planned_batches(opened, opts)
  bounds = list(bucket_boundaries)
  widths = None
  if opts.drop_remainder:  # make_dataset pads each bucket to its boundary then
    meta = opened.entries[0].found.meta
    widths = dataset._bucket_widths(meta["splits"][split], bounds)  # pylint: disable=protected-access
  records = numpy_reader.planned_records(opened, opts.keeping_remainder())
  return _bucketed(records, opened.decoder,
                   opts.per_replica, bounds, opts.drop_remainder, widths)


CHUNK_RECORDS = 1024  # records decoded at a time when bucketing


def _bucketed(chunks, dec: MtDecoder, batch_size: int, bounds, drop_remainder: bool,
              widths=None):
  """Batches of pairs grouped by length bucket, as tf.data's
  `bucket_by_sequence_length` (then `group_by_window`) forms them; each
  bucket padded to widths[i] when given (make_dataset's padding to the
  bucket boundary), else to the batch's longest."""
  pad = (lambda pairs, b: _padded(pairs)) if widths is None else (  # noqa: E731
      lambda pairs, b: _padded(pairs, widths[b]))
  buckets = [[] for _ in range(len(bounds) + 1)]  # pending (source, target) pairs
  for recs in chunks:
    src, tgt = dec.checked(dec.columns, recs)
    src_at = np.concatenate(([0], np.cumsum(src.lengths)))
    tgt_at = np.concatenate(([0], np.cumsum(tgt.lengths)))
    which = np.searchsorted(bounds, np.maximum(src.lengths, tgt.lengths), side="right")
    for i, b in enumerate(which.tolist()):
      buckets[b].append((src.values[src_at[i]:src_at[i + 1]],
                         tgt.values[tgt_at[i]:tgt_at[i + 1]]))
      if len(buckets[b]) == batch_size:
        yield pad(buckets[b], b)
        buckets[b] = []
  if not drop_remainder:
    for b, pairs in enumerate(buckets):  # tf.data flushes the partial windows by bucket id
      if pairs:
        yield pad(pairs, b)


def _padded(pairs, width=None):
  """The batch of (source, target) pairs padded to `width` (default: its longest)."""
  steps = width or max(max(len(s), len(t)) for s, t in pairs)
  src = np.full((len(pairs), steps), preprocess.PAD_ID, np.int32)
  label = np.full((len(pairs), steps), preprocess.PAD_ID, np.int32)
  for i, (s, t) in enumerate(pairs):
    src[i, :len(s)] = s
    label[i, :len(t)] = t
  return outputs(src, label)


_grain_source, _grain_dataset, _torch_dataset = package_readers.package_readers(open_dataset)


def _no_bucketing(fn):
  def wrapped(location, *args, **options):
    if options.get("bucket_boundaries") is not None:
      raise UserError("bucket_boundaries: grain and torch batches are fixed-size slices of "
                      "the record order; bucket with mt_data.numpy_batches or make_dataset")
    return fn(location, *args, **options)
  wrapped.__doc__ = fn.__doc__
  wrapped.__name__ = fn.__name__
  return wrapped


grain_source = _no_bucketing(_grain_source)
grain_dataset = _no_bucketing(_grain_dataset)
torch_dataset = _no_bucketing(_torch_dataset)
