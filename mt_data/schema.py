"""The features of an mt_data record (the only place their names appear).

Each record is one translation pair with its full token-id sequences; both
end with `<eos>`. Trimming, padding, `<bos>` and the shift by one happen in
the parser (`mt_data.dataset`).
"""

from textrecords.wire.features import FeatureSpec

SOURCE_IDS = FeatureSpec("source_ids", "int64", None)
TARGET_IDS = FeatureSpec("target_ids", "int64", None)
SCHEMA = (SOURCE_IDS, TARGET_IDS)

PACKAGE = "mt_data"
SPLITS = ("train", "valid")  # records: textrecords.datasets.layout names them
VOCAB_FILE = {"source": "src_vocab.txt", "target": "tgt_vocab.txt"}
TOKENIZER_FILE = {"source": "src_tokenizer.json", "target": "tgt_tokenizer.json"}

# Keys of the model inputs produced by make_dataset.
X_SOURCE = "source"
X_DECODER_INPUT = "decoder_input"
X_SOURCE_VALID_LEN = "source_valid_len"
