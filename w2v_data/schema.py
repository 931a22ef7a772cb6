"""The w2v_data record layouts; every feature name string lives here.

Two layouts hold the same samples (see BENCHMARKS.md for their speeds):
  "sentence" (default): one tf.train.Example per subsampled sentence that has
      centers: its centers, each center's context count, all contexts and
      all noise words, flat (ragged features).
  "center": one tf.train.Example per center: center, contexts, noise words.
"""

from textrecords import features as F

PACKAGE = "w2v_data"

# Record features.
CENTER = "center"              # center layout: int64 [1]
CENTERS = "centers"            # sentence layout: int64 [C]
NUM_CONTEXTS = "num_contexts"  # sentence layout: int64 [C], n of each center
CONTEXTS = "contexts"          # int64 [sum n]: contexts in sentence order, center by center
NEGATIVES = "negatives"        # int64 [K * sum n]: noise words, K*n per center

CENTER_SCHEMA = (
    F.FeatureSpec(CENTER, F.INT64, 1),
    F.FeatureSpec(CONTEXTS, F.INT64, None),
    F.FeatureSpec(NEGATIVES, F.INT64, None),
)
SENTENCE_SCHEMA = (
    F.FeatureSpec(CENTERS, F.INT64, None),
    F.FeatureSpec(NUM_CONTEXTS, F.INT64, None),
    F.FeatureSpec(CONTEXTS, F.INT64, None),
    F.FeatureSpec(NEGATIVES, F.INT64, None),
)
LAYOUTS = {"sentence": SENTENCE_SCHEMA, "center": CENTER_SCHEMA}
DEFAULT_LAYOUT = "sentence"

# Keys of the model inputs that make_dataset yields.
X_CENTER = "center"                           # (B, 1) int32
X_CONTEXTS_NEGATIVES = "contexts_negatives"   # (B, L) int32

# Output files.
RECORDS_NAME = "train.tfrecord"
VOCAB_NAME = "vocab.txt"
META_NAME = "meta.json"
UNK = "<unk>"
