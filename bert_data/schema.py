"""The BERT pretraining record: seven features, named here and nowhere else.

Feature order is the reference's (google-research/bert); records list the map
entries in this order, which equals the reference's own bytes when it runs
with the pure-Python protobuf backend.
"""

from textrecords.features import FLOAT, INT64, FeatureSpec

INPUT_IDS = "input_ids"
INPUT_MASK = "input_mask"
SEGMENT_IDS = "segment_ids"
MASKED_LM_POSITIONS = "masked_lm_positions"
MASKED_LM_IDS = "masked_lm_ids"
MASKED_LM_WEIGHTS = "masked_lm_weights"
NEXT_SENTENCE_LABELS = "next_sentence_labels"

# Model Garden v2 names for the inputs that differ.
V2_NAMES = {INPUT_IDS: "input_word_ids", SEGMENT_IDS: "input_type_ids"}


def bert_schema(max_seq_length: int, max_predictions_per_seq: int):
  """The seven FeatureSpecs for given lengths."""
  return (
      FeatureSpec(INPUT_IDS, INT64, max_seq_length),
      FeatureSpec(INPUT_MASK, INT64, max_seq_length),
      FeatureSpec(SEGMENT_IDS, INT64, max_seq_length),
      FeatureSpec(MASKED_LM_POSITIONS, INT64, max_predictions_per_seq),
      FeatureSpec(MASKED_LM_IDS, INT64, max_predictions_per_seq),
      FeatureSpec(MASKED_LM_WEIGHTS, FLOAT, max_predictions_per_seq),
      FeatureSpec(NEXT_SENTENCE_LABELS, INT64, 1),
  )
