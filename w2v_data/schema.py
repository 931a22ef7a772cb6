"""The w2v_data record layouts; every feature name string lives here.

Models (`--model`): "skipgram" (d2l's word2vec), "cbow" (contexts predict the
center), "pv_dbow" and "pv_dm" (paragraph vectors: a document id predicts
the document's words, alone or with context words).

Skip-gram has two layouts holding the same samples (see BENCHMARKS.md for
their speeds):
  "sentence" (default): one tf.train.Example per subsampled sentence that has
      centers: its centers, each center's context count, all contexts and
      all noise words, flat (ragged features).
  "center": one tf.train.Example per center: center, contexts, noise words.
"""

from textrecords.wire import features as F
from textrecords.datasets import layout

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

# CBOW, PV-DM, PV-DBOW: one record per sentence (document) with centers;
# K noise words per center (not per context).
DOC_ID = "doc_id"              # paragraph vectors: int64 [1], line of docs.txt
CBOW_SCHEMA = (
    F.FeatureSpec(CENTERS, F.INT64, None),
    F.FeatureSpec(NUM_CONTEXTS, F.INT64, None),
    F.FeatureSpec(CONTEXTS, F.INT64, None),
    F.FeatureSpec(NEGATIVES, F.INT64, None),   # [K * C]
)
PV_DM_SCHEMA = (F.FeatureSpec(DOC_ID, F.INT64, 1),) + CBOW_SCHEMA
PV_DBOW_SCHEMA = (
    F.FeatureSpec(DOC_ID, F.INT64, 1),
    F.FeatureSpec(CENTERS, F.INT64, None),     # the document's kept tokens (targets)
    F.FeatureSpec(NEGATIVES, F.INT64, None),   # [K * C]
)
MODELS = ("skipgram", "cbow", "pv_dbow", "pv_dm")
DEFAULT_MODEL = "skipgram"
PV_MODELS = ("pv_dbow", "pv_dm")
SCHEMAS = {
    ("skipgram", "sentence"): SENTENCE_SCHEMA,
    ("skipgram", "center"): CENTER_SCHEMA,
    ("cbow", "sentence"): CBOW_SCHEMA,
    ("pv_dm", "sentence"): PV_DM_SCHEMA,
    ("pv_dbow", "sentence"): PV_DBOW_SCHEMA,
}


def schema_for(model: str, layout: str):
  """The FeatureSpecs of (model, layout); KeyError if that pair does not exist."""
  return SCHEMAS[(model, layout)]

# Keys of the model inputs that make_dataset yields.
X_CENTER = "center"                           # (B, 1) int32
X_CONTEXTS_NEGATIVES = "contexts_negatives"   # (B, L) int32
# CBOW / PV-DM / PV-DBOW inputs.
X_CONTEXTS = CONTEXTS                         # (B, 2W) int32, zero-padded (CBOW, PV-DM)
X_CONTEXTS_MASK = "contexts_mask"             # (B, 2W) float32, 1 = real context
X_CENTER_AND_NOISE = "center_and_noise"       # (B, 1 + K) int32: center, K noise words
X_DOC_ID = DOC_ID                             # (B, 1) int32 (PV-DM, PV-DBOW)

# Output files (textrecords.datasets.layout names the records of SPLIT and the metadata).
SPLIT = layout.DEFAULT_SPLIT
VOCAB_NAME = "vocab.txt"
DOCS_NAME = "docs.txt"        # paragraph vectors: document ids, line i = doc_id i
UNK = "<unk>"
