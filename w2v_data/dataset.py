"""`make_dataset`: w2v_data records -> (x, y, sample_weight) batches for Keras `fit`.

Skip-gram records: each batch, for B centers and rows padded to L:
  x = {"center": int32 (B, 1), "contexts_negatives": int32 (B, L)}
  y = float32 (B, L): 1 for context words, 0 for noise words and padding
  sample_weight = float32 (B, L): 1 for real entries, 0 for padding
L is the longest row of the batch (as d2l pads) or `pad_to` (static shape).

Pipeline: records -> (training: shuffled) -> parsed, many centers at a time,
into dense rows [contexts, noise words, 0...] as wide as the data's longest row
(or pad_to), with labels and mask -> cut into batches of `batch_size` centers
-> trimmed to the batch's longest row (pad_to=None). With the sentence layout a
chunk of ~8 batches of sentences is parsed at once and its centers are
shuffled in-graph before being cut into batches (`rebatch`).

CBOW, PV-DM and PV-DBOW records (K noise words per center), for B centers:
  x = {"center_and_noise": int32 (B, 1 + K),
       "contexts": int32 (B, 2W), "contexts_mask": float32 (B, 2W)   (CBOW, PV-DM)
       "doc_id": int32 (B, 1)}                                        (PV-DM, PV-DBOW)
  y = float32 (B, 1 + K): 1 for the center, 0 for the noise words
  sample_weight = float32 (B, 1 + K): all 1
W is the data's max_window_size; contexts are zero-padded with mask 0.
"""

from typing import Optional

import numpy as np

from textrecords.wire import features
from textrecords.reading import locations as dataset_files
from textrecords.errors import UserError
from textrecords.reading.read_options import ReadOptions
from textrecords.reading import tf_input
from textrecords.tf_import import require_tf
from w2v_data import schema

NEGATIVES_MODES = ("stored", "fresh")
CHUNK_BATCHES = 8  # sentence layout: sentences are parsed ~this many batches at a time
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


def read_meta(location: str) -> dict:
  """The checked metadata of a w2v_data dataset (see `open_dataset`)."""
  return open_dataset(location).meta


def make_dataset(location, batch_size: Optional[int] = None, *, split: str = schema.SPLIT,
                 training: Optional[bool] = None, seed: Optional[int] = None,
                 global_batch_size: Optional[int] = None, input_context=None,
                 start_step: int = 0, drop_remainder: Optional[bool] = None,
                 shuffle_buffer: int = 10000, repeat: bool = False,
                 verify: str = "checksum", skip_corrupt: bool = False,
                 log=print, pad_to: Optional[int] = None, negatives: str = "stored",
                 in_memory: Optional[bool] = None, expand_labels: bool = False,
                 data_service: Optional[str] = None, job_name: Optional[str] = None):
  """A `tf.data.Dataset` of skip-gram batches from a `w2v_data.create` output.

  The shared arguments (batch_size, split, training, seed,
  global_batch_size, input_context, start_step, drop_remainder,
  shuffle_buffer, repeat, verify, skip_corrupt, log) are
  `textrecords.reading.read_options.ReadOptions`: the same defaults and checks in
  every package. The number of batches is known (from the metadata's
  per-file center counts) unless `repeat`. Unlike bert_data and mt_data,
  w2v_data shares files (not records) out over input pipelines, and
  `start_step` skips the batches before it by reading them.

  Args:
    location: the output folder given to create (or its meta.json, or
      record files / a shard glob of it).
    batch_size: centers per batch (per replica); or global_batch_size.
    training: shuffle files and centers (reshuffled each epoch); False reads
      in file order. Default True.
    pad_to: pad rows to this static length (e.g. 60 = 2*5*(1+5)); it must be
      at least the longest row in the data (meta counts.max_row_length).
      None pads to each batch's longest row.
    negatives: "stored" uses the noise words written by create; "fresh" draws
      new ones inside tf.data every epoch (stateless, seeded by `seed`) from
      the same count**0.75 distribution, never equal to a context of the center.
    seed: seeds shuffling and fresh noise words (None: nondeterministic).
    shuffle_buffer: about how many centers are mixed together (training only).
    drop_remainder: drop the last partial batch (default: when training).
    repeat: repeat the records forever (an infinite dataset).
    verify: "checksum" (sha256), "size" or "none" check of the files first.
    skip_corrupt: skip (and log) files that fail the check instead of raising.
    input_context: a `tf.distribute.InputContext`, to shard files over hosts.
    log: where skip_corrupt messages go.
    in_memory: skip-gram records: parse the records once, in this call, and
      keep each center's row in memory ((longest row + 4) * 4 bytes a
      center), so that epochs neither read nor parse files; the
      batches are the same as without it. None: when that takes at most
      IN_MEMORY_BYTES (256 MiB). The rows are not part of the dataset's
      graph: they are parsed when the dataset is first read and kept by
      tf.data's in-memory cache for later epochs.
    expand_labels: y and sample_weight shaped (B, L, 1) (CBOW/PV: (B, 1 + K,
      1)): one binary label per entry on Keras' last (class) axis, for
      `keras.losses.BinaryCrossentropy` with logits of that shape (Keras'
      losses average over the last axis, so (B, L) logits with (B, L)
      weights fail: "Incompatible shapes").
    data_service: a tf.data service dispatcher ("grpc://host:port") to run
      the pipeline on (see `textrecords.reading.tf_input.data_service_step`); each
      worker parses held rows itself.
    job_name: input pipelines giving the same name share one service job.

  Raises:
    UserError: bad arguments, missing/foreign/mismatched metadata, or missing,
      truncated or changed files (naming the file).

  Example:
    >>> ds = make_dataset("out/ptb_w2v", 512, pad_to=60)  # doctest: +SKIP
    >>> model.fit(ds, epochs=5)  # doctest: +SKIP
  """
  opts = ReadOptions(batch_size, training=training, seed=seed,
                     global_batch_size=global_batch_size, input_context=input_context,
                     start_step=start_step, drop_remainder=drop_remainder,
                     shuffle_buffer=shuffle_buffer, repeat=repeat, verify=verify,
                     skip_corrupt=skip_corrupt, log=log).for_split(split)
  check_split(split)
  if not isinstance(location, str):
    raise UserError("w2v_data.make_dataset reads one dataset (mixtures: bert_data, mt_data)")
  training, drop_remainder, batch_size = opts.training, opts.drop_remainder, opts.per_replica
  serve = tf_input.data_service_step(data_service, job_name)
  if not isinstance(expand_labels, bool):
    raise UserError(f"expand_labels={expand_labels!r}: must be True or False")
  if pad_to is not None and not _positive_int(pad_to):
    raise UserError(f"pad_to={pad_to!r}: must be a positive integer or None")
  if negatives not in NEGATIVES_MODES:
    raise UserError(f"negatives={negatives!r}: must be one of {', '.join(NEGATIVES_MODES)}")
  found = open_dataset(location)
  meta, meta_path = found.meta, found.layout.meta_path
  model = meta.get("model", schema.DEFAULT_MODEL)
  if model != "skipgram" and (negatives != "stored" or pad_to is not None or in_memory):
    raise UserError(f"{meta_path}: --model={model} records take negatives='stored', "
                    "pad_to=None and in_memory=None (their rows have a fixed width)")
  counts = meta["counts"]
  longest = max(int(counts["max_row_length"]), 1)
  if pad_to is not None and pad_to < longest:
    raise UserError(f"pad_to={pad_to!r} is shorter than the longest row ({longest} = "
                    f"(1 + K) * max contexts, from {meta_path}); use pad_to >= {longest} "
                    "or None")
  entries = dataset_files.record_files([found], schema.SPLIT, verify=verify,
                                       skip_corrupt=skip_corrupt, log=log,
                                       input_context=input_context)
  files = [e.path for e in entries]
  tf = require_tf()
  k = int(meta["noise"]["num_noise_words"])
  layout = meta["layout"]
  spec = features.parse_spec(schema.schema_for(model, layout))
  seed2 = None if seed is None else (int(seed) * 2 + 1) % (1 << 63)

  table = None
  if negatives == "fresh" and k > 0:
    table = _noise_table(tf, meta["vocab"]["counts"], meta["noise"]["power"])
  width = longest if pad_to is None else pad_to

  def expanded(parts, shuffle_seed=None, noise_seed=None):
    """Final per-center tensors at full width; n kept for trimming."""
    center, row, n = parts[:3]
    if shuffle_seed is not None:
      keys = tf.random.stateless_uniform(tf.shape(center), seed=shuffle_seed)
      order = tf.argsort(keys)
      center, row, n = tf.gather(center, order), tf.gather(row, order), tf.gather(n, order)
    if table is not None:
      row = _fresh_row(tf, row, n, k, table, noise_seed)
    if width > longest:
      row = tf.pad(row, [[0, 0], [0, width - longest]])
    col = tf.range(width, dtype=tf.int64)[tf.newaxis, :]
    labels = tf.cast(col < n[:, tf.newaxis], tf.float32)
    mask = tf.cast(col < (1 + k) * n[:, tf.newaxis], tf.float32)
    return tf.cast(center[:, tf.newaxis], tf.int32), row, labels, mask, n

  def with_seeds(ds, shuffle):
    """Zips per-element seeds for the in-graph shuffle and fresh noise words."""
    if shuffle and table is not None:
      return tf.data.Dataset.zip((ds, _seeds(tf, seed), _seeds(tf, seed2)))
    if shuffle:
      return tf.data.Dataset.zip((ds, _seeds(tf, seed)))
    if table is not None:
      return tf.data.Dataset.zip((ds, _seeds(tf, seed2))).map(lambda d, s: (d, None, s))
    return ds

  read_kw = {}

  # Small records: a sequential interleave costs less per record than a
  # parallel reader saves.
  def read(buffer=None):
    return tf_input.epoch_records(files, meta.get("compression", ""), opts,
                                  shuffle_buffer=buffer, cycle_length=4, parallel=False,
                                  block_length=16, **read_kw)

  def finish(ds):
    if expand_labels:
      ds = ds.map(lambda x, y, w: (x, y[..., tf.newaxis], w[..., tf.newaxis]),
                  num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return serve(_with_cardinality(tf, ds, meta, entries, opts))

  if model != "skipgram":
    return _center_dataset(tf, _sentence_chunks(read, counts, batch_size, shuffle_buffer),
                           meta, spec, batch_size=batch_size, training=training,
                           drop_remainder=drop_remainder, with_seeds=with_seeds,
                           finish=finish)
  parse_records = _parse_centers if layout == "center" else _parse_sentences
  parse = lambda s: parse_records(tf, s, spec, k, longest)  # noqa: E731
  held = None
  if _use_memory(in_memory, _held_bytes(meta, entries, longest)):
    held = _HeldRows(tf, files, meta.get("compression", ""), parse, [e.records for e in entries])
    read_kw["records_of"] = held.records_of  # record indices instead of records
    parse = held.rows_of
  if layout == "center":
    ds = read().batch(batch_size, drop_remainder=drop_remainder)
  else:
    ds = _sentence_chunks(read, counts, batch_size, shuffle_buffer)
  ds = with_seeds(ds if held is None else held.attach(ds), layout != "center" and training)
  ds = ds.map(lambda s, *seeds: expanded(parse(s), *seeds),
              num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  if layout != "center":
    ds = ds.rebatch(batch_size, drop_remainder=drop_remainder)

  def trimmed(center, row, labels, mask, n):
    if pad_to is None:
      w = (1 + k) * tf.reduce_max(tf.concat([n, [0]], 0))
      row, labels, mask = row[:, :w], labels[:, :w], mask[:, :w]
    return ({schema.X_CENTER: center, schema.X_CONTEXTS_NEGATIVES: row}, labels, mask)

  ds = ds.map(trimmed, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  return finish(ds)


def _held_bytes(meta, entries, longest: int) -> Optional[int]:
  """Bytes `_HeldRows` takes for these files (None: the metadata does not say)."""
  per_file = meta.get("file_centers", {})
  if not all(e.name in per_file for e in entries):
    return None
  return sum(int(per_file[e.name]) for e in entries) * (longest * 4 + 16)


def _use_memory(in_memory: Optional[bool], held_bytes: Optional[int]) -> bool:
  """in_memory as given, or (None) whether the rows fit IN_MEMORY_BYTES.

  >>> _use_memory(None, 86 << 20), _use_memory(None, 1 << 30), _use_memory(False, 1)
  (True, False, False)
  """
  if in_memory is not None:
    return bool(in_memory)
  return held_bytes is not None and held_bytes <= IN_MEMORY_BYTES


class _HeldRows:
  """Every record of `files`, parsed once and held as per-center tensors.

  `parse` (serialized records -> center, row, n, centers per record) is the
  streaming pipeline's own; `attach(ds)` pairs each element of a dataset of
  record indices with the held tensors, `rows_of` then gives what `parse`
  gives for those records, and `records_of(file index)` the indices of a
  file's records, so the epochs take the streaming pipeline's order,
  shuffles and batches without reading or parsing.

  The rows are not constants of the dataset's graph (as constants they made
  the graph grow with the data, copied to every tf.data service worker and
  into every serialization): a one-element dataset parses all records when first
  read, and tf.data's in-memory `cache` keeps its tensors for every later
  iterator of the same dataset (later epochs). The graph holds the file
  names and the parsing ops only.
  """

  def __init__(self, tf, files, compression: str, parse, file_records):
    tf_input.check_readable_by_tf(files)
    self._tf = tf
    self.file_start = tf.constant(np.cumsum([0] + [int(n) for n in file_records]), tf.int64)
    total = sum(int(n) for n in file_records)

    def load(serialized):
      center, row, n, per_record = parse(serialized)
      record_start = tf.concat([[0], tf.cumsum(tf.cast(per_record, tf.int64))], 0)
      return center, row, n, record_start

    if total:  # one element: every record
      records = tf.data.TFRecordDataset(files, compression_type=compression or None,
                                        buffer_size=1 << 20).batch(total)
    else:
      records = tf.data.Dataset.from_tensors(tf.constant([], tf.string))
    self._rows = records.map(load).cache()

  def attach(self, ds):
    """`ds` (record indices) with each element paired with the held rows (a dict)."""
    return self._tf.data.Dataset.zip((ds, self._rows.repeat())).map(
        lambda records, rows: {"records": records, "rows": rows})

  def records_of(self, i):
    return self._tf.data.Dataset.range(self.file_start[i], self.file_start[i + 1])

  def rows_of(self, element):
    """(center, row, n) of the records of an `attach`ed element."""
    tf = self._tf
    center, row, n, record_start = element["rows"]
    records = element["records"]
    starts = tf.gather(record_start, records)
    limits = tf.gather(record_start, records + 1)
    index = tf.ragged.range(starts, limits).flat_values
    return tf.gather(center, index), tf.gather(row, index), tf.gather(n, index)


def _with_cardinality(tf, ds, meta, entries, opts):
  """Sets the epoch length when it is known (Keras then shows progress); prefetches.

  Batches are of centers: the metadata's per-file center counts give it.
  tf.data's autotuning is off for this pipeline (its parallel steps then run
  one call per core, prefetch buffers keep their default size): the
  autotuner's own work competes for the cores and made epochs slower
  (`scripts/bench_w2v.py` times both; BENCHMARKS.md). A caller can turn it back on with
  `ds.with_options(...)`.
  """
  per_file = meta.get("file_centers", {})
  if all(e.name in per_file for e in entries):
    ds = tf_input.with_known_batches(ds, opts, sum(int(per_file[e.name]) for e in entries))
  if opts.start_step:
    ds = ds.skip(opts.start_step * len(opts.sharing().local_replicas))
  options = tf.data.Options()
  options.autotune.enabled = False
  return ds.prefetch(tf.data.AUTOTUNE).with_options(options)


def _sentence_chunks(read, counts, batch_size, shuffle_buffer):
  """Sentence records (shuffled when training) in chunks of about CHUNK_BATCHES batches.

  Whole sentences are read a chunk at a time; the chunk's centers are then
  shuffled in-graph and cut into batches of batch_size centers. The record
  shuffle holds about `shuffle_buffer` centers.
  """
  per_record = max(1.0, counts["centers"] / max(1, counts["records"]))
  chunk = max(1, int(CHUNK_BATCHES * batch_size / per_record))
  return read(max(1, int(shuffle_buffer / per_record))).batch(chunk)


def _center_dataset(tf, chunks, meta, spec, *, batch_size, training, drop_remainder,
                    with_seeds, finish):
  """CBOW / PV-DM / PV-DBOW: sentence chunks -> batches of centers (see the module doc)."""
  k = int(meta["noise"]["num_noise_words"])
  two_w = 2 * int(meta["flags"]["max_window_size"])
  has_contexts = schema.NUM_CONTEXTS in spec
  has_doc = schema.DOC_ID in spec
  ds = with_seeds(chunks, training)

  def per_center(serialized, shuffle_seed=None):
    parsed = tf.io.parse_example(serialized, spec)
    centers = parsed[schema.CENTERS]
    center = tf.cast(centers.flat_values, tf.int32)
    if k:
      noise = tf.reshape(tf.cast(parsed[schema.NEGATIVES].flat_values, tf.int32), [-1, k])
    else:
      noise = tf.zeros([tf.shape(center)[0], 0], tf.int32)
    out = {schema.X_CENTER_AND_NOISE: tf.concat([center[:, tf.newaxis], noise], axis=1)}
    if has_contexts:
      n = parsed[schema.NUM_CONTEXTS].flat_values
      ctx = tf.RaggedTensor.from_row_lengths(
          tf.cast(parsed[schema.CONTEXTS].flat_values, tf.int32), n, validate=False)
      out[schema.X_CONTEXTS] = ctx.to_tensor(0, shape=[None, two_w])
      out[schema.X_CONTEXTS_MASK] = tf.cast(
          tf.range(two_w, dtype=tf.int64)[tf.newaxis, :] < n[:, tf.newaxis], tf.float32)
    if has_doc:
      doc = tf.repeat(parsed[schema.DOC_ID][:, 0], centers.row_lengths())
      out[schema.X_DOC_ID] = tf.cast(doc[:, tf.newaxis], tf.int32)
    if shuffle_seed is not None:
      keys = tf.random.stateless_uniform(tf.shape(center), seed=shuffle_seed)
      order = tf.argsort(keys)
      out = {key: tf.gather(v, order) for key, v in out.items()}
    return out

  ds = ds.map(per_center, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  ds = ds.rebatch(batch_size, drop_remainder=drop_remainder)
  labels = tf.constant([[1.0] + [0.0] * k], tf.float32)

  def to_xyw(x):
    b = tf.shape(x[schema.X_CENTER_AND_NOISE])[0]
    y = tf.tile(labels, [b, 1])
    return x, y, tf.ones_like(y)

  return finish(ds.map(to_xyw, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True))


def _positive_int(value) -> bool:
  return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 1


def _seeds(tf, seed):
  """A stream of stateless-op seeds (shape [2]), new every epoch."""
  return tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).batch(2)


def _dense_rows(tf, contexts, noise, longest):
  """[contexts, noise words] of each center (int32), zero-padded to `longest` columns."""
  return tf.concat([contexts, noise], axis=1).to_tensor(0, shape=[None, longest])


def _parse_centers(tf, serialized, spec, k, longest):
  """(center, row, n, centers per record) of center-layout records."""
  parsed = tf.io.parse_example(serialized, spec)
  contexts = tf.cast(parsed[schema.CONTEXTS], tf.int32)
  noise = tf.cast(parsed[schema.NEGATIVES], tf.int32)
  center = parsed[schema.CENTER][:, 0]
  return (center, _dense_rows(tf, contexts, noise, longest), contexts.row_lengths(),
          tf.ones_like(center))


def _parse_sentences(tf, serialized, spec, k, longest):
  """(center, row, n, centers per record) of sentence-layout records."""
  parsed = tf.io.parse_example(serialized, spec)
  center = parsed[schema.CENTERS].flat_values
  n = parsed[schema.NUM_CONTEXTS].flat_values
  contexts = tf.RaggedTensor.from_row_lengths(
      tf.cast(parsed[schema.CONTEXTS].flat_values, tf.int32), n, validate=False)
  noise = tf.RaggedTensor.from_row_lengths(
      tf.cast(parsed[schema.NEGATIVES].flat_values, tf.int32), k * n, validate=False)
  return (center, _dense_rows(tf, contexts, noise, longest), n,
          parsed[schema.CENTERS].row_lengths())


def _noise_table(tf, counts, power: float):
  """An alias table (threshold, alias) for ids 1..V-1 with weight count**power."""
  from w2v_data import sampling  # pylint: disable=import-outside-toplevel
  c = np.asarray(counts, dtype=np.float64)
  w = np.where(c > 0, c, 0.0) ** power
  w[0] = 0.0
  table = sampling.AliasTable(w / w.sum())
  return tf.constant(table.prob, tf.float64), tf.constant(table.alias, tf.int64)


def _fresh_row(tf, row, n, k, table, pair_seed):
  """Replaces the stored noise words of each row by new draws.

  K*n draws per row from the noise distribution (an alias table); draws equal
  to one of the row's contexts are drawn again (stateless, seeded by
  `pair_seed` and the round) until none is left.
  """
  prob, alias = table
  vocab = tf.shape(prob, out_type=tf.int64)[0]
  max_n = tf.reduce_max(tf.concat([n, [0]], 0))
  batch = tf.shape(row, out_type=tf.int64)[0]
  width = k * max_n
  ctx_col = tf.range(max_n, dtype=tf.int64)[tf.newaxis, :]
  contexts = tf.where(ctx_col < n[:, tf.newaxis], tf.cast(row[:, :max_n], tf.int64),
                      tf.constant(-1, tf.int64))
  slot_ok = tf.range(width, dtype=tf.int64)[tf.newaxis, :] < (k * n)[:, tf.newaxis]

  def draw(shape, round_index):
    s = tf.random.experimental.stateless_fold_in(pair_seed, round_index)
    col = tf.random.stateless_uniform(shape, seed=s, minval=0, maxval=vocab, dtype=tf.int64)
    s2 = tf.random.experimental.stateless_fold_in(s, -1)
    frac = tf.random.stateless_uniform(shape, seed=s2, dtype=tf.float64)
    return tf.where(frac < tf.gather(prob, col), col, tf.gather(alias, col))

  def collisions(noise):
    hit = tf.reduce_any(noise[:, :, tf.newaxis] == contexts[:, tf.newaxis, :], axis=2)
    return tf.where(hit & slot_ok)

  def body(i, noise, where):
    new = draw(tf.shape(where, out_type=tf.int64)[:1], i + 1)
    noise = tf.tensor_scatter_nd_update(noise, where, new)
    return i + 1, noise, collisions(noise)

  noise = draw(tf.stack([batch, width]), tf.constant(0, tf.int64))
  _, noise, _ = tf.while_loop(lambda i, noise, where: tf.shape(where)[0] > 0, body,
                              (tf.constant(0, tf.int64), noise, collisions(noise)),
                              shape_invariants=(tf.TensorShape([]), tf.TensorShape([None, None]),
                                                tf.TensorShape([None, None])))
  # Row = contexts, then the new noise words, then zeros.
  cols = tf.range(tf.shape(row, out_type=tf.int64)[1], dtype=tf.int64)[tf.newaxis, :]
  from_noise = tf.gather(noise, tf.clip_by_value(cols - n[:, tf.newaxis], 0,
                                                 tf.maximum(width - 1, 0)), batch_dims=1)
  return tf.where(cols < n[:, tf.newaxis], row,
                  tf.where(cols < (1 + k) * n[:, tf.newaxis], tf.cast(from_noise, row.dtype),
                           tf.zeros([], row.dtype)))
