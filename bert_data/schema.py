"""The BERT pretraining records: features named here and nowhere else.

Feature order is the reference's (google-research/bert); records list the map
entries in this order, which equals the reference's own bytes when it runs
with the pure-Python protobuf backend.

Two record kinds:
  * static (`bert_schema`): the reference's seven features, masks drawn at
    create time; optionally with Model Garden's v2 names for the inputs;
  * dynamic (`dynamic_schema`): unmasked instances that `make_dataset` masks
    inside tf.data (`bert_data.dynamic_masking`): ids, mask, segments, the
    next-sentence label, a per-record key that seeds its masks and, for
    whole-word masking, word-start flags.
"""

from textrecords.wire.features import FLOAT, INT64, FeatureSpec

INPUT_IDS = "input_ids"
INPUT_MASK = "input_mask"
SEGMENT_IDS = "segment_ids"
MASKED_LM_POSITIONS = "masked_lm_positions"
MASKED_LM_IDS = "masked_lm_ids"
MASKED_LM_WEIGHTS = "masked_lm_weights"
NEXT_SENTENCE_LABELS = "next_sentence_labels"
# Dynamic records only.
RECORD_KEY = "record_key"
WORD_STARTS = "word_starts"
# Packed rows only (`--pack_instances=N`, N > 1).
INSTANCE_IDS = "instance_ids"
POSITION_IDS = "position_ids"
NEXT_SENTENCE_WEIGHTS = "next_sentence_weights"
# make_dataset's (B, L, L) block-diagonal mask of packed rows (not a record feature).
ATTENTION_MASK = "attention_mask"

# Model Garden v2 names for the inputs that differ.
V2_NAMES = {INPUT_IDS: "input_word_ids", SEGMENT_IDS: "input_type_ids"}

# keras-hub's MaskedLM inputs (BertMaskedLM with preprocessor=None).
KERAS_HUB_NAMES = {INPUT_IDS: "token_ids", INPUT_MASK: "padding_mask",
                   SEGMENT_IDS: "segment_ids", MASKED_LM_POSITIONS: "mask_positions",
                   POSITION_IDS: "position_ids", ATTENTION_MASK: "attention_mask"}

# Output keys of y / sample_weight for the "bert" and "v2" layouts.
MASKED_LM = "masked_lm"
NEXT_SENTENCE = "next_sentence"

FEATURE_NAME_SETS = ("bert", "v2", "keras_hub")


def _named(specs, v2_names: bool):
  names = V2_NAMES if v2_names else {}
  return tuple(FeatureSpec(names.get(s.name, s.name), s.dtype, s.length) for s in specs)


def bert_schema(max_seq_length: int, max_predictions_per_seq: int, v2_names: bool = False,
                next_sentence: bool = True):
  """The seven FeatureSpecs for given lengths (v2 names: Model Garden's).

  next_sentence=False (packed records, `--next_sentence=false`) drops
  next_sentence_labels.
  """
  specs = _named(_inputs(max_seq_length) + _predictions(max_predictions_per_seq)
                 + (FeatureSpec(NEXT_SENTENCE_LABELS, INT64, 1),), v2_names)
  return specs if next_sentence else specs[:-1]


def _inputs(max_seq_length: int):
  """input_ids, input_mask, segment_ids: every static record's first three."""
  return (FeatureSpec(INPUT_IDS, INT64, max_seq_length),
          FeatureSpec(INPUT_MASK, INT64, max_seq_length),
          FeatureSpec(SEGMENT_IDS, INT64, max_seq_length))


def _predictions(bound: int):
  """The masked-LM positions, ids and weights, `bound` slots each."""
  return (FeatureSpec(MASKED_LM_POSITIONS, INT64, bound),
          FeatureSpec(MASKED_LM_IDS, INT64, bound),
          FeatureSpec(MASKED_LM_WEIGHTS, FLOAT, bound))


def packed_schema(max_seq_length: int, predictions_per_row: int, pack_instances: int,
                  v2_names: bool = False):
  """The FeatureSpecs of packed rows: up to `pack_instances` instances per row.

  Per token: input_ids, input_mask, segment_ids as in `bert_schema`,
  instance_ids (1..N, 0 = padding) and position_ids (restarting at 0 for
  each instance). The masked-LM features run over the whole row, with room
  for `predictions_per_row` predictions (`instance_packing.predictions_per_row`);
  next_sentence_labels and next_sentence_weights (1.0 for a real instance)
  have one slot per instance.
  """
  return _named(_inputs(max_seq_length) + (
      FeatureSpec(INSTANCE_IDS, INT64, max_seq_length),
      FeatureSpec(POSITION_IDS, INT64, max_seq_length),
  ) + _predictions(predictions_per_row) + (
      FeatureSpec(NEXT_SENTENCE_LABELS, INT64, pack_instances),
      FeatureSpec(NEXT_SENTENCE_WEIGHTS, FLOAT, pack_instances),
  ), v2_names)


def dynamic_schema(max_seq_length: int, whole_word: bool, v2_names: bool = False,
                   next_sentence: bool = True):
  """The FeatureSpecs of unmasked (dynamic-masking) records.

  next_sentence=False (packed records) drops next_sentence_labels.
  """
  specs = [
      FeatureSpec(INPUT_IDS, INT64, max_seq_length),
      FeatureSpec(INPUT_MASK, INT64, max_seq_length),
      FeatureSpec(SEGMENT_IDS, INT64, max_seq_length),
      FeatureSpec(NEXT_SENTENCE_LABELS, INT64, 1),
      FeatureSpec(RECORD_KEY, INT64, 1),
  ]
  if whole_word:
    specs.append(FeatureSpec(WORD_STARTS, INT64, max_seq_length))
  if not next_sentence:
    specs = [s for s in specs if s.name != NEXT_SENTENCE_LABELS]
  return _named(specs, v2_names)


def canonical_names(v2_names: bool) -> dict:
  """Record feature name -> canonical (bert) name."""
  return {v: k for k, v in V2_NAMES.items()} if v2_names else {}
