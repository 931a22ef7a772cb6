"""`make_dataset`: bert_data records -> Keras-ready `(x, y, sample_weight)` batches."""

from typing import Optional, Sequence

from bert_data import instance_packing
from bert_data import schema as S
from bert_data.masks import registry
from textrecords.reading import locations as dataset_files
from textrecords.wire import features
from textrecords.reading import tf_input
from textrecords.reading import tf_order
from textrecords.datasets.layout import DEFAULT_SPLIT
from textrecords.errors import UserError
from textrecords.reading import read_options
from textrecords.reading.read_options import ReadOptions
from textrecords.tf_import import require_tf
from textrecords.reading import mixtures
from bert_data import dynamic_masking

MASKED_LM = S.MASKED_LM
NEXT_SENTENCE = S.NEXT_SENTENCE


def record_schema(meta: dict):
  """The schema the metadata's records were written with (static or dynamic)."""
  v2 = bool(meta.get("flags", {}).get("use_v2_feature_names", False))
  masking = meta.get("masking")
  next_sentence = meta.get("sentence_task") != "none"
  if meta.get("pack_instances", 1) > 1:
    return S.packed_schema(meta["max_seq_length"], meta["predictions_per_row"],
                           meta["pack_instances"], v2)
  if _dynamic(meta):
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


def make_dataset(location, batch_size: Optional[int] = None, *, split: str = DEFAULT_SPLIT,
                 training: Optional[bool] = None, seed: Optional[int] = None,
                 global_batch_size: Optional[int] = None, input_context=None,
                 start_step: int = 0, drop_remainder: Optional[bool] = None,
                 shuffle_buffer: int = 10000, repeat: bool = False,
                 verify: str = "checksum", skip_corrupt: bool = False,
                 log=print, max_seq_length: Optional[int] = None,
                 max_predictions_per_seq: Optional[int] = None,
                 masked_lm_prob: Optional[float] = None,
                 feature_names: Optional[str] = None,
                 v2_names: bool = False, weights: Optional[Sequence[float]] = None,
                 data_service: Optional[str] = None, job_name: Optional[str] = None,
                 pack_instances: Optional[int] = None, attention_mask: bool = False):
  """A `tf.data.Dataset` of `(x, y, sample_weight)` for `keras.Model.fit`.

  feature_names="bert" (default): x = {input_ids, input_mask, segment_ids,
  masked_lm_positions}, y = {"masked_lm": masked_lm_ids, "next_sentence":
  next_sentence_labels}, sample_weight = {"masked_lm": masked_lm_weights,
  "next_sentence": ones}. "v2": Model Garden's names (input_word_ids,
  input_type_ids; also `v2_names=True`). "keras_hub": x = {token_ids,
  padding_mask (bool), segment_ids, mask_positions}, y = mask ids,
  sample_weight = mask weights (`keras_hub.models.BertMaskedLM`). int32 but
  float32 weights and the bool mask; static shapes. Records written with
  `--masking=dynamic` are masked here per batch, afresh every epoch (each
  pass of a training dataset is the next epoch), the same for a `seed`
  (with `training=False` the same every pass).

  Packed rows (`create --pack_instances=N`): x also holds instance_ids
  (1..N per token, 0 = padding) and position_ids (restarting per
  instance); y["next_sentence"] and sample_weight["next_sentence"] are
  (batch, N): a label and a 0/1 weight per instance slot. With
  `attention_mask=True` x also holds "attention_mask", (batch, L, L) bool,
  true where query and key are real tokens of the same instance (unpacked
  records: of the one instance). "keras_hub" names on packed rows: x =
  {token_ids, padding_mask, segment_ids, position_ids, mask_positions,
  attention_mask} (the mask a `keras_hub.layers.TransformerEncoder` takes
  as `attention_mask`), y = mask ids, sample_weight = mask weights.

  The arguments from batch_size to log are the shared
  `textrecords.reading.read_options.ReadOptions`; records come in the order
  of `textrecords.reading.read_order`. The number of batches is known
  unless `repeat`.

  Args:
    location: an output path given to `bert_data.create`, a shard glob, a
      `.meta.json` path, or a comma-separated list of them (one dataset); a
      list of them with `weights` (their shares of every global batch): a
      mixture (`textrecords.reading.mixtures`).
    max_seq_length: if given, must equal the records' length.
    max_predictions_per_seq: static records: must equal the records'; dynamic
      records: overrides the create-time value (at most max_seq_length).
    masked_lm_prob: dynamic records only: overrides the create-time value.
    feature_names: "bert", "v2" or "keras_hub" (default "bert"; "v2" with
      `v2_names=True`).
    data_service, job_name: run the pipeline on a tf.data service
      (`textrecords.reading.tf_input.data_service_step`).
    pack_instances: if given, must equal the records' (1: unpacked).
    attention_mask: add the (batch, L, L) block-diagonal attention mask.
  Raises:
    UserError (a ValueError): missing/incomplete dataset, other package's
      records, length mismatch, override beyond the records' lengths,
      unknown feature_names, corrupt file.
  """
  opts = read_options.from_arguments(locals())
  serve = tf_input.data_service_step(data_service, job_name)
  reading = _reading(max_seq_length, max_predictions_per_seq, masked_lm_prob,
                     _feature_names(feature_names, v2_names), pack_instances, attention_mask)
  if not isinstance(location, str) or weights is not None:
    return serve(mixtures.tf_mixture(location, weights, opts,
                                     lambda loc: _entries(loc, split, opts), reading))
  return serve(_one_dataset(location, split, opts, reading))


def _one_dataset(location: str, split: str, opts: ReadOptions, reading):
  """The parsed batches of one dataset in the read order of `opts`."""
  tf = require_tf()
  meta, entries = _entries(location, split, opts)
  parse = reading(meta)
  plan = opts.plan([e.records for e in entries], where=dataset_files.given(entries))
  ds = tf_input.planned_batches(entries, meta["compression"], plan, opts.log)
  if not _dynamic(meta):  # masked at create time: no salt
    salted = lambda e, b: parse(b, None)  # noqa: E731
  elif opts.training:  # dynamic masks drawn afresh every epoch
    seed = plan.stream.seed
    salted = lambda e, b: parse(b, tf_order.epoch_salt(tf, seed, e))  # noqa: E731
  else:
    salted = lambda e, b: parse(b, tf.constant(opts.seed or 0, tf.int64))  # noqa: E731
  return ds.map(tf.autograph.experimental.do_not_convert(salted),
                num_parallel_calls=tf.data.AUTOTUNE,
                deterministic=True).prefetch(tf.data.AUTOTUNE)


def _entries(location: str, split: str, opts: ReadOptions):
  """(metadata, checked record files of `split`) of one location."""
  meta, found = load_metadata(location)
  return meta, dataset_files.record_files(found, split, verify=opts.verify,
                                          skip_corrupt=opts.skip_corrupt, log=opts.log)


def _reading(max_seq_length, max_predictions_per_seq, masked_lm_prob, names,
             pack_instances=None, with_attention=False):
  """meta -> parse(serialized batch, salt) -> (x, y, w): the checks and the
  parse of one dataset's records (its lengths, masking, packing and names)."""

  def for_meta(meta):
    tf = require_tf()
    masker = _masker(meta, max_seq_length, max_predictions_per_seq, masked_lm_prob)
    check_pack_instances(meta, pack_instances)
    spec = features.parse_spec(record_schema(meta))
    canonical = S.canonical_names(
        bool(meta.get("flags", {}).get("use_v2_feature_names", False)))

    def parse(serialized, salt):
      f = tf.io.parse_example(serialized, spec)
      f = {canonical.get(k, k): v for k, v in f.items()}
      ints = {k: tf.cast(v, tf.int32) for k, v in f.items() if v.dtype == tf.int64}
      if masker is not None:
        ints[S.INPUT_IDS], ints[S.MASKED_LM_POSITIONS], ints[S.MASKED_LM_IDS], weights = (
            masker.mask(f, salt))
      else:
        weights = f[S.MASKED_LM_WEIGHTS]
      return outputs(ints, weights, names, lambda t: tf.ones_like(t, tf.float32),
                     lambda t: tf.cast(t, tf.bool), f.get(S.NEXT_SENTENCE_WEIGHTS),
                     with_attention)

    return parse

  return for_meta


def _masker(meta, max_seq_length, max_predictions_per_seq, masked_lm_prob):
  """The dynamic masker of the records (None: masked at create time), the
  overrides checked against the records' lengths."""
  if max_seq_length is not None and max_seq_length != meta["max_seq_length"]:
    raise UserError(f"{meta['_path']}: records have max_seq_length={meta['max_seq_length']}, "
                    f"but max_seq_length={max_seq_length} was asked for")
  if _dynamic(meta):
    return dynamic_masking.masker_from_metadata(
        meta, masked_lm_prob=masked_lm_prob, max_predictions_per_seq=max_predictions_per_seq)
  if max_predictions_per_seq is not None and (
      max_predictions_per_seq != meta["max_predictions_per_seq"]):
    raise UserError(f"{meta['_path']}: records have max_predictions_per_seq="
                    f"{meta['max_predictions_per_seq']} (masked at create time), but "
                    f"max_predictions_per_seq={max_predictions_per_seq} was asked for")
  if masked_lm_prob is not None:
    raise UserError(f"{meta['_path']}: masked_lm_prob={masked_lm_prob} needs records "
                    "written with --masking=dynamic; these were masked at create time")
  return None


def check_pack_instances(meta: dict, pack_instances: Optional[int]) -> None:
  """Refuses a `pack_instances` other than the records' (when one is asked for)."""
  found = meta.get("pack_instances", 1)
  if pack_instances is not None and pack_instances != found:
    raise UserError(f"{meta['_path']}: records have pack_instances={found}, but "
                    f"pack_instances={pack_instances} was asked for")


def _dynamic(meta) -> bool:
  """Whether the records are masked when read (`--masking=dynamic`)."""
  return (meta.get("masking") or {}).get("mode") == "dynamic"


def _feature_names(feature_names: Optional[str], v2_names: bool) -> str:
  if feature_names is None:
    return "v2" if v2_names else "bert"
  if feature_names not in S.FEATURE_NAME_SETS:
    raise UserError(f"feature_names={feature_names!r}: must be one of "
                    f"{', '.join(S.FEATURE_NAME_SETS)}")
  if v2_names and feature_names != "v2":
    raise UserError(f"v2_names=True contradicts feature_names={feature_names!r}")
  return feature_names


def outputs(ints: dict, mlm_weights, names: str, ones_like, as_bool, nsp_weights=None,
            with_attention: bool = False):
  """(x, y, sample_weight) in the consumer's names, from tf tensors or numpy arrays.

  Args:
    ints: canonical feature name -> int32 batch.
    mlm_weights: float32 masked-LM weights.
    names: "bert", "v2" or "keras_hub".
    ones_like: float32 ones of the shape of its argument's first column
      (the next-sentence weights, shape (batch,)).
    as_bool: casts an array to bool (keras_hub's padding mask).
    nsp_weights: packed rows' next_sentence_weights (else None).
    with_attention: add x["attention_mask"] (packed rows' keras_hub names
      always have it).
  """
  if S.INSTANCE_IDS in ints:
    return _packed_outputs(ints, mlm_weights, nsp_weights, names, as_bool, with_attention)
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
  if with_attention:  # one instance per row: real tokens attend to each other
    x[S.ATTENTION_MASK] = instance_packing.attention_mask(ints[S.INPUT_MASK])
  return x, y, weights


def _packed_outputs(ints: dict, mlm_weights, nsp_weights, names: str, as_bool,
                    with_attention: bool):
  """`outputs` of packed rows (`--pack_instances`): see `make_dataset`."""
  mask = instance_packing.attention_mask(ints[S.INSTANCE_IDS])
  if names == "keras_hub":
    k = S.KERAS_HUB_NAMES
    x = {k[S.INPUT_IDS]: ints[S.INPUT_IDS], k[S.INPUT_MASK]: as_bool(ints[S.INPUT_MASK]),
         **{k[n]: ints[n] for n in (S.SEGMENT_IDS, S.POSITION_IDS, S.MASKED_LM_POSITIONS)},
         k[S.ATTENTION_MASK]: mask}
    return x, ints[S.MASKED_LM_IDS], mlm_weights
  renamed = S.V2_NAMES if names == "v2" else {}
  x = {renamed.get(k, k): ints[k] for k in (S.INPUT_IDS, S.INPUT_MASK, S.SEGMENT_IDS,
                                            S.INSTANCE_IDS, S.POSITION_IDS,
                                            S.MASKED_LM_POSITIONS)}
  if with_attention:
    x[S.ATTENTION_MASK] = mask
  return (x, {MASKED_LM: ints[S.MASKED_LM_IDS], NEXT_SENTENCE: ints[S.NEXT_SENTENCE_LABELS]},
          {MASKED_LM: mlm_weights, NEXT_SENTENCE: nsp_weights})
