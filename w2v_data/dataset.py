"""`make_dataset`: w2v_data records -> (x, y, sample_weight) batches for Keras `fit`.

Skip-gram records: each batch, for B centers and rows padded to L:
  x = {"center": int32 (B, 1), "contexts_negatives": int32 (B, L)}
  y = float32 (B, L): 1 for context words, 0 for noise words and padding
  sample_weight = float32 (B, L): 1 for real entries, 0 for padding
L is the data's longest row when batches have a static size (drop_remainder,
the training default: every shape static), else the batch's longest (as d2l
pads; also pad_to="batch"), or `pad_to`.

Pipeline: the read order over centers (`w2v_data.tf_centers`: held rows
gathered by center number, or records streamed and parsed into centers) ->
per-replica batches of centers, rows [contexts, noise words, 0...] as wide
as the data's longest row -> (fresh noise words) -> labels and mask, the
rows kept that wide, trimmed to the batch's longest or padded to pad_to
(`row_width`).

CBOW, PV-DM and PV-DBOW records (K noise words per center), for B centers:
  x = {"center_and_noise": int32 (B, 1 + K),
       "contexts": int32 (B, 2W), "contexts_mask": float32 (B, 2W)   (CBOW, PV-DM)
       "doc_id": int32 (B, 1)}                                        (PV-DM, PV-DBOW)
  y = float32 (B, 1 + K): 1 for the center, 0 for the noise words
  sample_weight = float32 (B, 1 + K): all 1
W is the data's max_window_size; contexts are zero-padded with mask 0.
"""

from typing import List, Optional, Sequence, Union

import numpy as np

from textrecords.errors import UserError
from textrecords.reading import locations as dataset_files
from textrecords.reading import mixtures
from textrecords.reading import read_options
from textrecords.reading import read_order
from textrecords.reading import tf_input
from textrecords.tf_import import require_tf
from textrecords.wire import features
from w2v_data import fresh_noise
from w2v_data import schema
from w2v_data import tf_centers

NEGATIVES_MODES = ("stored", "fresh")
IN_MEMORY_BYTES = 256 << 20  # in_memory=None: held in memory up to this size


def open_dataset(location: str) -> dataset_files.Found:
  """The checked w2v_data dataset at `location` (folder, meta.json or record files).

  Raises:
    UserError: no dataset there, another package's, or records of an
      unknown schema or layout.
  """
  found = dataset_files.open_datasets(location, schema.PACKAGE)[0]
  meta, meta_path = found.meta, found.layout.meta_path
  try:
    stored = features.schema_from_json(meta["schema"])
    expected = schema.schema_for(meta.get("model", schema.DEFAULT_MODEL), meta["layout"])
    for key in ("counts", "vocab", "noise"):
      meta[key]  # pylint: disable=pointless-statement
  except (KeyError, TypeError) as e:
    raise UserError(f"{meta_path}: incomplete w2v_data metadata (no {e}); rerun "
                    "w2v_data.create") from e
  if stored != expected:
    raise UserError(f"{meta_path}: records have another schema than this w2v_data "
                    f"(written by textrecords {meta.get('version')}); rerun w2v_data.create")
  return found


def check_split(split: str):
  """UserError unless `split` is the one w2v_data writes."""
  if split != schema.SPLIT:
    raise UserError(f"split={split!r}: w2v_data datasets have one split, {schema.SPLIT!r}")


def center_counts(meta: dict, entries, meta_path: str) -> List[int]:
  """Centers in each record file (the metadata's `file_centers`).

  Raises:
    UserError: the metadata does not list a file (written by an old version).
  """
  per_file = meta.get("file_centers", {})
  missing = [e.name for e in entries if e.name not in per_file]
  if missing:
    raise UserError(f"{meta_path}: no center count for {missing[0]} (file_centers); rerun "
                    "w2v_data.create")
  return [int(per_file[e.name]) for e in entries]


def read_meta(location: str) -> dict:
  """The checked metadata of a w2v_data dataset (see `open_dataset`)."""
  return open_dataset(location).meta


def make_dataset(location, batch_size: Optional[int] = None, *, split: str = schema.SPLIT,
                 training: Optional[bool] = None, seed: Optional[int] = None,
                 global_batch_size: Optional[int] = None, input_context=None,
                 start_step: int = 0, drop_remainder: Optional[bool] = None,
                 shuffle_buffer: int = 10000, repeat: bool = False,
                 verify: str = "checksum", skip_corrupt: bool = False,
                 log=print, pad_to: Union[int, str, None] = None, negatives: str = "stored",
                 in_memory: Optional[bool] = None, expand_labels: bool = False,
                 data_service: Optional[str] = None, job_name: Optional[str] = None,
                 weights: Optional[Sequence[float]] = None):
  """A `tf.data.Dataset` of skip-gram batches from a `w2v_data.create` output.

  The shared arguments (batch_size, split, training, seed,
  global_batch_size, input_context, start_step, drop_remainder,
  shuffle_buffer, repeat, verify, skip_corrupt, log) are
  `textrecords.reading.read_options.ReadOptions`: the same defaults and checks in
  every package. Centers come in the order of `textrecords.reading.read_order`
  over centers (`w2v_data.tf_centers`): the same global batches for any
  number of input pipelines, the same number of batches on each (known
  from the metadata's per-file center counts unless `repeat`), and
  `start_step` resumes without reading the files before it.

  Args:
    location: the output folder given to create (or its meta.json, or
      record files / a shard glob of it); a list of them with `weights`: a
      mixture (one vocabulary, schema and K; held in memory).
    batch_size: centers per batch (per replica); or global_batch_size.
    pad_to: pad rows to this static length (e.g. 60 = 2*5*(1+5)), at least
      the data's longest row; "batch": to each batch's longest row (d2l's
      padding); None: the data's longest row when drop_remainder (the
      training default, a static shape), else each batch's longest
      (`row_width`).
    negatives: "stored" uses the noise words written by create; "fresh" draws
      new ones every epoch (`w2v_data.fresh_noise`: keyed by seed, epoch and
      center) from the same count**0.75 distribution, never equal to a
      context of the center.
    seed: seeds the order and fresh noise words (None: drawn).
    in_memory: skip-gram: hold every center's row in memory ((longest row
      + 4) * 4 bytes a center; the same batches, no file read after the
      first); None: when that is at most IN_MEMORY_BYTES (256 MiB).
    expand_labels: y and sample_weight shaped (B, L, 1) (CBOW/PV: (B, 1 + K,
      1)), for `keras.losses.BinaryCrossentropy` with logits of that shape.
    data_service, job_name: a tf.data service dispatcher to run the
      pipeline on (`textrecords.reading.tf_input.data_service_step`); each
      worker parses held rows itself.
    weights: with a list of locations, their share of every global batch
      (`textrecords.reading.mixtures`).

  Raises:
    UserError: bad arguments, missing/foreign/mismatched metadata, or missing,
      truncated or changed files (naming the file).
  """
  opts = read_options.from_arguments(locals())
  check_split(split)
  choice = _Choices(pad_to, negatives, in_memory, expand_labels)
  serve = tf_input.data_service_step(data_service, job_name)
  tf = require_tf()
  tf_input.quiet_reader_log()
  if not isinstance(location, str) or weights is not None:
    ds = _mixture(tf, location, weights, opts, choice)
  else:
    ds = _one_dataset(tf, location, opts, choice)
  return serve(_finished(tf, ds, choice.expand_labels))


class _Choices:
  """make_dataset's own arguments, checked."""

  def __init__(self, pad_to, negatives: str, in_memory, expand_labels):
    if not isinstance(expand_labels, bool):
      raise UserError(f"expand_labels={expand_labels!r}: must be True or False")
    check_pad_to(pad_to)
    if negatives not in NEGATIVES_MODES:
      raise UserError(f"negatives={negatives!r}: must be one of {', '.join(NEGATIVES_MODES)}")
    self.pad_to, self.negatives = pad_to, negatives
    self.in_memory, self.expand_labels = in_memory, expand_labels


class _Source:
  """One checked w2v_data dataset, ready to read (all its record files)."""

  def __init__(self, location: str, opts, choice: _Choices):
    found = open_dataset(location)
    meta, self.meta_path = found.meta, found.layout.meta_path
    self.meta, self.location = meta, location
    self.model = meta.get("model", schema.DEFAULT_MODEL)
    self.layout, self.compression = meta["layout"], meta.get("compression", "")
    if self.model != "skipgram" and (choice.negatives != "stored" or choice.pad_to is not None
                                     or choice.in_memory):
      raise UserError(f"{self.meta_path}: --model={self.model} records take "
                      "negatives='stored', pad_to=None and in_memory=None (their rows have "
                      "a fixed width)")
    self.k = int(meta["noise"]["num_noise_words"])
    self.longest = max(int(meta["counts"]["max_row_length"]), 1)
    if _positive_int(choice.pad_to) and choice.pad_to < self.longest:
      raise UserError(f"pad_to={choice.pad_to!r} is shorter than the longest row "
                      f"({self.longest} = (1 + K) * max contexts, from {self.meta_path}); use "
                      f"pad_to >= {self.longest} or None")
    self.entries = dataset_files.record_files([found], schema.SPLIT, verify=opts.verify,
                                              skip_corrupt=opts.skip_corrupt, log=opts.log)
    self.files = [e.path for e in self.entries]
    self.centers = center_counts(meta, self.entries, self.meta_path)
    self.num_records = sum(int(e.records) for e in self.entries)

  @property
  def two_w(self) -> int:
    return 2 * int(self.meta["flags"]["max_window_size"])

  def parser(self, tf, width: int):
    """serialized records -> (per-center parts, centers per record); skip-gram
    rows `width` wide, CBOW / PV contexts `width` wide."""
    spec = features.parse_spec(schema.schema_for(self.model, self.layout))
    if self.model != "skipgram":
      return lambda s: _parse_center_model(tf, s, spec, self.k, width)
    parse = _parse_centers if self.layout == "center" else _parse_sentences
    return lambda s: parse(tf, s, spec, self.k, width)

  def holds(self, in_memory) -> bool:
    """Whether its rows are held in memory (skip-gram; see `_use_memory`)."""
    if self.model != "skipgram":
      return False
    return _use_memory(in_memory, sum(self.centers) * (self.longest * 4 + 16))


def _one_dataset(tf, location: str, opts, choice: _Choices):
  """(x, y, w) batches of one dataset in the read order over its centers."""
  src = _Source(location, opts, choice)
  plan = opts.plan(src.centers, where=src.location, unit="centers")
  width = src.longest if src.model == "skipgram" else src.two_w
  parse = src.parser(tf, width)
  held = read_file = None
  if src.holds(choice.in_memory):
    held = tf_centers.HeldRows(tf, src.files, src.compression, parse, src.num_records)
  else:
    tf_input.note_compressed_resume(src.compression, plan, opts.log)
    read_file = tf_centers.streamed_reader(tf, src.files, src.compression, parse,
                                           src.centers)
  pad_to = row_width(choice.pad_to, opts.drop_remainder, width)
  fresh = None
  if choice.negatives == "fresh" and src.k > 0:
    noise_seed = plan.stream.seed if opts.training else read_order.resolve_seed(opts.seed)
    fresh = (fresh_noise.noise_table(tf, src.meta["vocab"]["counts"],
                                     src.meta["noise"]["power"]), noise_seed)
  redraw = None
  if held is not None and fresh is not None:  # a window at a time (the same draws)
    redraw, fresh = _redraw(tf, src.k, fresh), None
  units = tf_centers.planned_units(tf, plan, held, read_file, redraw)
  return _to_batches(tf, units, src, pad_to, fresh)


def _mixture(tf, locations, weights, opts, choice: _Choices):
  """(x, y, w) batches of a mixture of datasets (`textrecords.reading.mixtures`)."""
  if isinstance(locations, str):
    locations = [locations]
  if not locations or not all(isinstance(l, str) for l in locations):
    raise UserError(f"{locations!r}: a mixture takes a list of dataset locations")
  if choice.negatives != "stored" or choice.in_memory is False:
    raise UserError("a w2v_data mixture holds its datasets' rows in memory and takes their "
                    "stored noise words: negatives='stored', in_memory=None")
  srcs = [_Source(loc, opts, choice) for loc in locations]
  check_mixable(srcs)
  mix = mixtures.build([s.centers for s in srcs], weights, opts)
  width = max(s.longest if s.model == "skipgram" else s.two_w for s in srcs)
  held = [tf_centers.HeldRows(tf, s.files, s.compression, s.parser(tf, width), s.num_records)
          for s in srcs]
  units = tf_centers.mixture_units(tf, mix, held, [s.centers for s in srcs])
  units = units.map(lambda step, u: (step, (u[1], u[2])))
  return _to_batches(tf, units, srcs[0], row_width(choice.pad_to, opts.drop_remainder, width),
                     None)


def check_mixable(srcs):
  """UserError naming the first dataset another schema, vocabulary or K than the first's."""
  mixtures.check_same_schema([s.meta for s in srcs], [s.location for s in srcs])
  first = srcs[0]
  for s in srcs[1:]:
    if (s.meta["vocab"]["sha256"], s.k) != (first.meta["vocab"]["sha256"], first.k):
      raise UserError(f"{s.location}: another vocabulary or num_noise_words than "
                      f"{first.location}; a w2v_data mixture reads datasets of one vocabulary "
                      "and K")


def _redraw(tf, k: int, fresh):
  """redraw(epoch, center numbers, (center, row, n)): the parts with new
  noise words (`fresh_noise.fresh_row`; fresh = (table, seed))."""

  def redraw(epoch, ids, parts):
    center, row, n = parts
    return center, fresh_noise.fresh_row(tf, row, n, k, fresh[0], fresh[1], epoch, ids), n

  return redraw


def _to_batches(tf, units, src: _Source, pad_to, fresh):
  """(key, (center numbers, parts)) per-replica batches -> (x, y, w)."""
  if src.model != "skipgram":
    return units.map(lambda key, u: _center_model_xyw(tf, u[1], src.k),
                     num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  k = src.k

  def to_xyw(key, unit):
    ids, (center, row, n) = unit
    if fresh is not None:
      row = fresh_noise.fresh_row(tf, row, n, k, fresh[0], fresh[1], key, ids)
    if pad_to is not None and pad_to > row.shape[1]:
      row = tf.pad(row, [[0, 0], [0, pad_to - row.shape[1]]])
    elif pad_to is None:
      row = row[:, :(1 + k) * tf.reduce_max(tf.concat([n, [0]], 0))]
    col = tf.range(tf.shape(row, out_type=tf.int64)[1], dtype=tf.int64)[tf.newaxis, :]
    labels = tf.cast(col < n[:, tf.newaxis], tf.float32)
    mask = tf.cast(col < (1 + k) * n[:, tf.newaxis], tf.float32)
    x = {schema.X_CENTER: tf.cast(center[:, tf.newaxis], tf.int32),
         schema.X_CONTEXTS_NEGATIVES: row}
    return x, labels, mask

  return units.map(to_xyw, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def _finished(tf, ds, expand_labels: bool):
  """Labels expanded if asked; prefetched, tf.data's autotuning off.

  With autotuning off the parallel steps run one call per core and
  prefetch buffers keep their default size: the autotuner's own work
  competes for the cores and made epochs slower (`scripts/bench/bench_w2v.py`
  times both; BENCHMARKS.md). A caller can turn it back on with
  `ds.with_options(...)`.
  """
  if expand_labels:
    ds = ds.map(lambda x, y, w: (x, y[..., tf.newaxis], w[..., tf.newaxis]),
                num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  options = tf.data.Options()
  options.autotune.enabled = False
  return ds.prefetch(tf.data.AUTOTUNE).with_options(options)


def check_pad_to(pad_to):
  """UserError unless `pad_to` is a positive integer, "batch" or None."""
  if pad_to is not None and pad_to != "batch" and not _positive_int(pad_to):
    raise UserError(f"pad_to={pad_to!r}: must be a positive integer, \"batch\" or None")


def row_width(pad_to, drop_remainder: bool, longest: int) -> Optional[int]:
  """The rows' static width (None: each batch's longest row, d2l's padding).

  `pad_to` if given; by default (None) the data's `longest` row when
  batches have a static size (drop_remainder, the training default), so
  that every shape is static (TPU-ready); "batch": each batch's longest.

  >>> row_width(None, True, 60), row_width(None, False, 60), row_width("batch", True, 60)
  (60, None, None)
  """
  if pad_to == "batch" or (pad_to is None and not drop_remainder):
    return None
  return longest if pad_to is None else pad_to


def _use_memory(in_memory: Optional[bool], held_bytes: int) -> bool:
  """in_memory as given, or (None) whether the rows fit IN_MEMORY_BYTES.

  >>> _use_memory(None, 86 << 20), _use_memory(None, 1 << 30), _use_memory(False, 1)
  (True, False, False)
  """
  if in_memory is not None:
    return bool(in_memory)
  return held_bytes <= IN_MEMORY_BYTES


def _parse_center_model(tf, serialized, spec, k: int, two_w: int):
  """(x dict per center, centers per record) of CBOW / PV-DM / PV-DBOW records."""
  parsed = tf.io.parse_example(serialized, spec)
  centers = parsed[schema.CENTERS]
  center = tf.cast(centers.flat_values, tf.int32)
  if k:
    noise = tf.reshape(tf.cast(parsed[schema.NEGATIVES].flat_values, tf.int32), [-1, k])
  else:
    noise = tf.zeros([tf.shape(center)[0], 0], tf.int32)
  out = {schema.X_CENTER_AND_NOISE: tf.concat([center[:, tf.newaxis], noise], axis=1)}
  if schema.NUM_CONTEXTS in spec:
    n = parsed[schema.NUM_CONTEXTS].flat_values
    ctx = tf.RaggedTensor.from_row_lengths(
        tf.cast(parsed[schema.CONTEXTS].flat_values, tf.int32), n, validate=False)
    out[schema.X_CONTEXTS] = ctx.to_tensor(0, shape=[None, two_w])
    out[schema.X_CONTEXTS_MASK] = tf.cast(
        tf.range(two_w, dtype=tf.int64)[tf.newaxis, :] < n[:, tf.newaxis], tf.float32)
  if schema.DOC_ID in spec:
    doc = tf.repeat(parsed[schema.DOC_ID][:, 0], centers.row_lengths())
    out[schema.X_DOC_ID] = tf.cast(doc[:, tf.newaxis], tf.int32)
  return out, centers.row_lengths()


def _center_model_xyw(tf, x, k: int):
  """CBOW / PV batches: x, y = [1, 0 * K] per center, weights 1."""
  b = tf.shape(x[schema.X_CENTER_AND_NOISE])[0]
  y = tf.tile(tf.constant([[1.0] + [0.0] * k], tf.float32), [b, 1])
  return x, y, tf.ones_like(y)


def _positive_int(value) -> bool:
  return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 1


def _dense_rows(tf, contexts, noise, longest):
  """[contexts, noise words] of each center (int32), zero-padded to `longest` columns.

  The two ragged tensors' rows are interleaved by one ragged gather (no
  dense intermediate; `tf.concat` of ragged tensors along axis 1 would
  transpose, which makes oneDNN log a line at TF's default log level)."""
  b = contexts.nrows()
  both = tf.RaggedTensor.from_row_lengths(
      tf.concat([contexts.values, noise.values], 0),
      tf.concat([contexts.row_lengths(), noise.row_lengths()], 0), validate=False)
  pairs = tf.reshape(tf.stack([tf.range(b), tf.range(b) + b], 1), [-1])
  rows = tf.RaggedTensor.from_row_lengths(
      tf.gather(both, pairs).values, contexts.row_lengths() + noise.row_lengths(),
      validate=False)
  return rows.to_tensor(0, shape=[None, longest])


def _parse_centers(tf, serialized, spec, k, longest):
  """((center, row, n), centers per record) of center-layout records."""
  parsed = tf.io.parse_example(serialized, spec)
  contexts = tf.cast(parsed[schema.CONTEXTS], tf.int32)
  noise = tf.cast(parsed[schema.NEGATIVES], tf.int32)
  center = parsed[schema.CENTER][:, 0]
  return ((center, _dense_rows(tf, contexts, noise, longest), contexts.row_lengths()),
          tf.ones_like(center))


def _parse_sentences(tf, serialized, spec, k, longest):
  """((center, row, n), centers per record) of sentence-layout records."""
  parsed = tf.io.parse_example(serialized, spec)
  center = parsed[schema.CENTERS].flat_values
  n = parsed[schema.NUM_CONTEXTS].flat_values
  contexts = tf.RaggedTensor.from_row_lengths(
      tf.cast(parsed[schema.CONTEXTS].flat_values, tf.int32), n, validate=False)
  noise = tf.RaggedTensor.from_row_lengths(
      tf.cast(parsed[schema.NEGATIVES].flat_values, tf.int32), k * n, validate=False)
  return ((center, _dense_rows(tf, contexts, noise, longest), n),
          parsed[schema.CENTERS].row_lengths())
