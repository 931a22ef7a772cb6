"""`make_dataset`: bert_data records -> Keras-ready `(x, y, sample_weight)` batches."""

from typing import Optional

from bert_data import schema as S
from bert_data.masks import registry
from textrecords import dataset_files
from textrecords import features
from textrecords import tf_input
from textrecords.errors import UserError
from textrecords.read_options import ReadOptions
from textrecords.tf_import import require_tf

MASKED_LM = S.MASKED_LM
NEXT_SENTENCE = S.NEXT_SENTENCE


def record_schema(meta: dict):
  """The schema the metadata's records were written with (static or dynamic)."""
  v2 = bool(meta.get("flags", {}).get("use_v2_feature_names", False))
  masking = meta.get("masking")
  next_sentence = meta.get("sentence_task") != "none"
  if masking and masking.get("mode") == "dynamic":
    return S.dynamic_schema(meta["max_seq_length"], registry.rule_of_meta(masking).WORDS, v2,
                            next_sentence=next_sentence)
  return S.bert_schema(meta["max_seq_length"], meta["max_predictions_per_seq"], v2,
                       next_sentence=next_sentence)


def load_metadata(file_pattern: str):
  """(first metadata, datasets found) for a location; all must share lengths and compression.

  Raises:
    UserError: no dataset there, another package's, another schema, or
      datasets that differ in lengths or compression.
  """
  found = dataset_files.open_datasets(file_pattern, "bert_data", allow_list=True)
  first = found[0].meta
  for f in found:
    meta, meta_path = f.meta, f.layout.meta_path
    if meta.get("schema") != features.schema_to_json(record_schema(meta)):
      raise UserError(f"{meta_path}: schema differs from this version's bert_data schema")
    meta["_path"] = meta_path
    if (meta["schema"], meta["compression"], meta.get("masking")) != (
        first["schema"], first["compression"], first.get("masking")):
      raise UserError(f"{meta_path}: schema, masking or compression differ from "
                      f"{first['_path']}")
  return first, found


def make_dataset(file_pattern: str, batch_size: int, *, training: Optional[bool] = None,
                 seed: Optional[int] = None, shuffle_buffer: int = 10000,
                 drop_remainder: bool = False, repeat: bool = False,
                 input_context=None, verify: str = "checksum", skip_corrupt: bool = False,
                 log=print, max_seq_length: Optional[int] = None,
                 max_predictions_per_seq: Optional[int] = None,
                 masked_lm_prob: Optional[float] = None,
                 feature_names: Optional[str] = None,
                 v2_names: bool = False, cycle_length: int = 8,
                 data_service: Optional[str] = None, job_name: Optional[str] = None):
  """A `tf.data.Dataset` of `(x, y, sample_weight)` for `keras.Model.fit`.

  feature_names="bert" (default): x = {input_ids, input_mask, segment_ids,
  masked_lm_positions}, y = {"masked_lm": masked_lm_ids, "next_sentence":
  next_sentence_labels}, sample_weight = {"masked_lm": masked_lm_weights,
  "next_sentence": ones}. "v2": Model Garden's input names (input_word_ids,
  input_type_ids; same as `v2_names=True`). "keras_hub": x = {token_ids,
  padding_mask (bool), segment_ids, mask_positions}, y = mask ids,
  sample_weight = mask weights, for `keras_hub.models.BertMaskedLM(...,
  preprocessor=None)`. All int32 except float32 weights and the bool mask;
  static shapes (batch first, then one batched parse).

  Records written with `--masking=dynamic` are masked here, per batch, afresh
  every epoch (see `bert_data.dynamic_masking`): the same `seed` gives the
  same masks on every run and any number of input pipelines. With
  `training=False` the masks are the same on every pass (seeded by `seed`,
  or 0), so evaluations compare.

  The shared arguments (batch_size, training, seed, shuffle_buffer,
  drop_remainder, repeat, input_context, verify, skip_corrupt, log) are
  `textrecords.read_options.ReadOptions`: the same defaults and checks in
  every package. The number of batches is known (from the metadata's record
  counts) unless `repeat`.

  Args:
    file_pattern: an output path given to `bert_data.create`, a shard glob,
      a `.meta.json` path, or a comma-separated list of them.
    batch_size: examples per batch (per replica's input pipeline).
    training: shuffle files and records (seedable), interleave files;
      otherwise files and records in order. Default True.
    seed: makes the training order (and dynamic masks) repeatable.
    drop_remainder: drop the last partial batch (static batch dimension).
    input_context: a `tf.distribute.InputContext`; files are sharded by it.
    max_seq_length: if given, must equal the records' length.
    max_predictions_per_seq: static records: must equal the records'
      value; dynamic records: overrides the create-time value (at most
      max_seq_length).
    masked_lm_prob: dynamic records only: overrides the create-time value.
    feature_names: "bert", "v2" or "keras_hub" (default "bert", or "v2"
      with `v2_names=True`).
    verify: "checksum" (default: sizes of all files, then the sha256 of the
      files this input pipeline reads, once per process per file), "size"
      or "none".
    skip_corrupt: skip (and log) files that fail verification.
    log: where skipped files are reported (default: print).
    data_service: a tf.data service dispatcher ("grpc://host:port") to run
      the pipeline on (see `textrecords.tf_input.data_service_step`).
    job_name: input pipelines giving the same name share one service job.
  Raises:
    UserError (a ValueError): missing/incomplete dataset, other package's
      records, length mismatch, override beyond the records' lengths,
      unknown feature_names, corrupt file.
  """
  opts = ReadOptions(batch_size, training=training, seed=seed, shuffle_buffer=shuffle_buffer,
                     drop_remainder=drop_remainder, repeat=repeat,
                     input_context=input_context, verify=verify, skip_corrupt=skip_corrupt,
                     log=log).for_split()
  serve = tf_input.data_service_step(data_service, job_name)
  tf = require_tf()
  names = _feature_names(feature_names, v2_names)
  meta, found = load_metadata(file_pattern)
  entries = dataset_files.record_files(found, verify=verify, skip_corrupt=skip_corrupt,
                                       log=log, input_context=input_context)
  files = [e.path for e in entries]
  dynamic = (meta.get("masking") or {}).get("mode") == "dynamic"
  if max_seq_length is not None and max_seq_length != meta["max_seq_length"]:
    raise UserError(f"{meta['_path']}: records have max_seq_length={meta['max_seq_length']}, "
                    f"but max_seq_length={max_seq_length} was asked for")
  masker = None
  if dynamic:
    from bert_data import dynamic_masking  # pylint: disable=import-outside-toplevel
    masker = dynamic_masking.masker_from_metadata(
        meta, masked_lm_prob=masked_lm_prob, max_predictions_per_seq=max_predictions_per_seq)
  else:
    if max_predictions_per_seq is not None and (
        max_predictions_per_seq != meta["max_predictions_per_seq"]):
      raise UserError(f"{meta['_path']}: records have max_predictions_per_seq="
                      f"{meta['max_predictions_per_seq']} (masked at create time), but "
                      f"max_predictions_per_seq={max_predictions_per_seq} was asked for")
    if masked_lm_prob is not None:
      raise UserError(f"{meta['_path']}: masked_lm_prob={masked_lm_prob} needs records "
                      "written with --masking=dynamic; these were masked at create time")
  schema = record_schema(meta)
  spec = features.parse_spec(schema)
  canonical = S.canonical_names(
      bool(meta.get("flags", {}).get("use_v2_feature_names", False)))

  def records(shuffle_seed, repeat_records):
    return tf_input.epoch_records(files, meta["compression"], opts, seed=shuffle_seed,
                                  repeat=repeat_records, cycle_length=cycle_length)

  deterministic = not opts.training or seed is not None
  if masker is None:
    ds = records(seed, repeat).batch(batch_size, drop_remainder=opts.drop_remainder)
  else:
    # One salt per pass over the records (new on every pass, the same for
    # every run and input pipeline with this seed); evaluation
    # (training=False) keeps one set of masks on every pass.
    if opts.training:
      salts = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True)
    else:
      salts = tf.data.Dataset.from_tensors(tf.constant(seed or 0, tf.int64)).repeat()
    if not repeat:
      salts = salts.take(1)
    # The record pipeline is built once (its shuffles reshuffle on every
    # pass) and batches are salted whole: a per-record map would cost more
    # than the masking, and a tensor shuffle seed fails under a global TF seed
    # (keras.utils.set_random_seed). With repeat=True each pass drops its
    # own last partial batch.
    base = records(seed, False).batch(batch_size, drop_remainder=opts.drop_remainder)
    ds = salts.flat_map(lambda salt: base.map(lambda b: (b, salt)))
  ds = tf_input.with_known_batches(ds, opts, sum(e.records for e in entries))

  def parse(serialized, salt=None):
    f = tf.io.parse_example(serialized, spec)
    f = {canonical.get(k, k): v for k, v in f.items()}
    ints = {k: tf.cast(v, tf.int32) for k, v in f.items() if v.dtype == tf.int64}
    if masker is not None:
      ints[S.INPUT_IDS], ints[S.MASKED_LM_POSITIONS], ints[S.MASKED_LM_IDS], weights = (
          masker.mask(f, salt))
    else:
      weights = f[S.MASKED_LM_WEIGHTS]
    return outputs(ints, weights, names, lambda t: tf.ones_like(t, tf.float32),
                   lambda t: tf.cast(t, tf.bool))

  return serve(ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE,
                      deterministic=deterministic).prefetch(tf.data.AUTOTUNE))


def _feature_names(feature_names: Optional[str], v2_names: bool) -> str:
  if feature_names is None:
    return "v2" if v2_names else "bert"
  if feature_names not in S.FEATURE_NAME_SETS:
    raise UserError(f"feature_names={feature_names!r}: must be one of "
                    f"{', '.join(S.FEATURE_NAME_SETS)}")
  if v2_names and feature_names != "v2":
    raise UserError(f"v2_names=True contradicts feature_names={feature_names!r}")
  return feature_names


def outputs(ints: dict, mlm_weights, names: str, ones_like, as_bool):
  """(x, y, sample_weight) in the consumer's names, from tf tensors or numpy arrays.

  Args:
    ints: canonical feature name -> int32 batch.
    mlm_weights: float32 masked-LM weights.
    names: "bert", "v2" or "keras_hub".
    ones_like: float32 ones of the shape of its argument's first column
      (the next-sentence weights, shape (batch,)).
    as_bool: casts an array to bool (keras_hub's padding mask).
  """
  if names == "keras_hub":
    k = S.KERAS_HUB_NAMES
    x = {k[S.INPUT_IDS]: ints[S.INPUT_IDS],
         k[S.INPUT_MASK]: as_bool(ints[S.INPUT_MASK]),
         k[S.SEGMENT_IDS]: ints[S.SEGMENT_IDS],
         k[S.MASKED_LM_POSITIONS]: ints[S.MASKED_LM_POSITIONS]}
    return x, ints[S.MASKED_LM_IDS], mlm_weights
  renamed = S.V2_NAMES if names == "v2" else {}
  x = {renamed.get(k, k): ints[k] for k in (S.INPUT_IDS, S.INPUT_MASK, S.SEGMENT_IDS,
                                            S.MASKED_LM_POSITIONS)}
  y = {MASKED_LM: ints[S.MASKED_LM_IDS]}
  weights = {MASKED_LM: mlm_weights}
  if S.NEXT_SENTENCE_LABELS in ints:  # packed records (--next_sentence=false) have none
    y[NEXT_SENTENCE] = ints[S.NEXT_SENTENCE_LABELS]
    weights[NEXT_SENTENCE] = ones_like(ints[S.NEXT_SENTENCE_LABELS][:, 0])
  return x, y, weights
