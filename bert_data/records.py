"""Instance -> serialized tf.train.Example (pure Python, byte-stable, fast).

Features are written in schema order (the reference's order), so our bytes
equal the reference's when it runs with the pure-Python protobuf backend.
Ids are packed from a precomputed varint table; padding is constant bytes.
"""

import struct

from bert_data import schema as S
from bert_data.instances import Instance
from textrecords import example_codec as codec

_ONE_F32 = struct.pack("<f", 1.0)
_ZERO_F32 = struct.pack("<f", 0.0)


class BertRecordEncoder:
  """Encodes Instances for given lengths and vocab size.

  Example:
    >>> enc = BertRecordEncoder(8, 2, 100)
    >>> rec = enc.encode(Instance([1, 5, 2, 6, 2], 3, True, [1], [9]))
    >>> codec.decode_example(rec)["segment_ids"]
    [0, 0, 0, 1, 1, 0, 0, 0]
  """

  def __init__(self, max_seq_length: int, max_predictions_per_seq: int, vocab_size: int):
    self.schema = S.bert_schema(max_seq_length, max_predictions_per_seq)
    self._example = codec.ExampleEncoder(self.schema, key_order="schema")
    self._seq = max_seq_length
    self._pred = max_predictions_per_seq
    self._table = codec.varint_table(max(vocab_size, max_seq_length) + 1)

  def encode(self, inst: Instance) -> bytes:
    """The serialized Example of one instance (raises ValueError if too long)."""
    table = self._table
    n, seq, pred = len(inst.tokens), self._seq, self._pred
    m = len(inst.positions)
    if n > seq or m > pred:
      raise ValueError(f"instance of {n} tokens / {m} predictions exceeds "
                       f"{seq} / {pred}")
    pad = b"\x00" * (seq - n)
    pad_pred = b"\x00" * (pred - m)
    i64 = codec.int64_feature_from_payload
    features = {
        S.INPUT_IDS: i64(b"".join([table[t] for t in inst.tokens]) + pad),
        S.INPUT_MASK: i64(b"\x01" * n + pad),
        S.SEGMENT_IDS: i64(b"\x00" * inst.num_a + b"\x01" * (n - inst.num_a) + pad),
        S.MASKED_LM_POSITIONS: i64(b"".join([table[p] for p in inst.positions]) + pad_pred),
        S.MASKED_LM_IDS: i64(b"".join([table[t] for t in inst.labels]) + pad_pred),
        S.MASKED_LM_WEIGHTS: codec.float_feature_from_payload(
            _ONE_F32 * m + _ZERO_F32 * (pred - m)),
        S.NEXT_SENTENCE_LABELS: i64(b"\x01" if inst.is_random_next else b"\x00"),
    }
    return self._example.encode_features(features)
