"""`make_dataset`: bert_data records -> Keras-ready `(x, y, sample_weight)` batches."""

import os
from typing import Optional

from bert_data import schema as S
from textrecords import dataset_files
from textrecords import features
from textrecords import metadata
from textrecords import tf_input
from textrecords.errors import UserError
from textrecords.tf_import import require_tf

MASKED_LM = "masked_lm"
NEXT_SENTENCE = "next_sentence"


def load_metadata(file_pattern: str, verify: str = "size", skip_corrupt: bool = False,
                  log=print):
  """(meta, entries) for a pattern; all datasets must share lengths and compression.

  entries: [(meta, meta_path, path)] of the files that passed `verify`.
  """
  metas, entries = [], []
  for meta_path, names in dataset_files.resolve(file_pattern):
    meta = metadata.read(meta_path, package="bert_data")
    expected = features.schema_to_json(
        S.bert_schema(meta["max_seq_length"], meta["max_predictions_per_seq"]))
    if meta.get("schema") != expected:
      raise UserError(f"{meta_path}: schema differs from this version's bert_data schema")
    if metas and (meta["max_seq_length"], meta["max_predictions_per_seq"],
                  meta["compression"]) != (metas[0]["max_seq_length"],
                                           metas[0]["max_predictions_per_seq"],
                                           metas[0]["compression"]):
      raise UserError(f"{meta_path}: lengths or compression differ from {metas[0]['_path']}")
    meta["_path"] = meta_path
    metas.append(meta)
    if names is None:
      names = [f["name"] for f in meta["files"]]
    for name in names:
      for path in metadata.verified_files(meta, meta_path, [name], verify, skip_corrupt, log,
                                          require_some=False):
        entries.append((meta, meta_path, path))
  if not entries:
    raise UserError(f"{file_pattern}: no readable record files left")
  return metas[0], entries


def make_dataset(file_pattern: str, batch_size: int, *, training: bool = True,
                 seed: Optional[int] = None, input_context=None,
                 max_seq_length: Optional[int] = None,
                 max_predictions_per_seq: Optional[int] = None,
                 v2_names: bool = False, shuffle_buffer: int = 10000,
                 repeat: bool = False, verify: str = "checksum",
                 skip_corrupt: bool = False, cycle_length: int = 8, log=print):
  """A `tf.data.Dataset` of `(x, y, sample_weight)` for `keras.Model.fit`.

  x = {input_ids, input_mask, segment_ids, masked_lm_positions} (or
  input_word_ids / input_type_ids with `v2_names`), y = {"masked_lm":
  masked_lm_ids, "next_sentence": next_sentence_labels}, sample_weight =
  {"masked_lm": masked_lm_weights, "next_sentence": ones}. All int32 except
  float32 weights; static shapes (batch first, then one batched parse).

  Args:
    file_pattern: an output path given to `bert_data.create`, a shard glob,
      a `.meta.json` path, or a comma-separated list of them.
    batch_size: examples per batch (per replica's input pipeline).
    training: shuffle files and records (seedable), interleave files,
      drop the last partial batch; otherwise files and records in order.
    seed: makes the training order repeatable.
    input_context: a `tf.distribute.InputContext`; files are sharded by it.
    max_seq_length, max_predictions_per_seq: if given, must equal the
      lengths the records were written with (else a clear error).
    verify: "checksum" (default: sizes of all files, then the sha256 of the
      files this input pipeline reads, once per process per file), "size"
      or "none".
    skip_corrupt: skip (and log) files that fail verification.
    log: where skipped files are reported (default: print).
  Raises:
    UserError (a ValueError): missing/incomplete dataset, other package's
      records, length mismatch, corrupt file.
  """
  tf = require_tf()
  if batch_size < 1:
    raise UserError(f"batch_size={batch_size}: must be >= 1")
  meta, entries = load_metadata(file_pattern, "size" if verify == "checksum" else verify,
                                skip_corrupt, log)
  entries = tf_input.shard_files(entries, input_context)
  if verify == "checksum":
    files = [p for m, mp, path in entries for p in metadata.verified_files(
        m, mp, [os.path.basename(path)], "checksum", skip_corrupt, log, require_some=False)]
    if not files:
      raise UserError(f"{file_pattern}: no readable record files left")
  else:
    files = [path for _, _, path in entries]
  for name, want in (("max_seq_length", max_seq_length),
                     ("max_predictions_per_seq", max_predictions_per_seq)):
    if want is not None and want != meta[name]:
      raise UserError(f"{meta['_path']}: records have {name}={meta[name]}, "
                      f"but {name}={want} was asked for")
  schema = S.bert_schema(meta["max_seq_length"], meta["max_predictions_per_seq"])
  spec = features.parse_spec(schema)
  ds = tf_input.record_dataset(files, meta["compression"], training=training, seed=seed,
                               cycle_length=cycle_length)
  if training:
    ds = ds.shuffle(shuffle_buffer, seed=seed)
  if repeat:
    ds = ds.repeat()
  ds = ds.batch(batch_size, drop_remainder=training)
  names = S.V2_NAMES if v2_names else {}

  def parse(serialized):
    f = tf.io.parse_example(serialized, spec)
    ints = {k: tf.cast(v, tf.int32) for k, v in f.items() if v.dtype == tf.int64}
    x = {names.get(k, k): ints[k] for k in (S.INPUT_IDS, S.INPUT_MASK, S.SEGMENT_IDS,
                                            S.MASKED_LM_POSITIONS)}
    y = {MASKED_LM: ints[S.MASKED_LM_IDS], NEXT_SENTENCE: ints[S.NEXT_SENTENCE_LABELS]}
    weights = {MASKED_LM: f[S.MASKED_LM_WEIGHTS],
               NEXT_SENTENCE: tf.ones_like(ints[S.NEXT_SENTENCE_LABELS][:, 0], tf.float32)}
    return x, y, weights

  return ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE,
                deterministic=not training or seed is not None).prefetch(tf.data.AUTOTUNE)
