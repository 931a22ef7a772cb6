"""Feature specs: one description of each feature drives writer and parser.

A package's `schema.py` lists its features as `FeatureSpec`s. The Example
encoder (`example_encoder`) and the `tf.io` parse spec (`parse_spec`) are both
generated from that list, and the list is stored in the metadata sidecar so a
parser can refuse files written with another schema.
"""

import dataclasses
from typing import Optional, Sequence, Tuple
from textrecords.tf_import import require_tf

INT64 = "int64"
FLOAT = "float"
BYTES = "bytes"
DTYPES = (INT64, FLOAT, BYTES)


@dataclasses.dataclass(frozen=True)
class FeatureSpec:
  """One feature of a record.

  Attributes:
    name: the feature key in the `tf.train.Example`.
    dtype: one of "int64", "float", "bytes".
    length: the fixed number of values, or None for a variable-length feature.
  """
  name: str
  dtype: str
  length: Optional[int] = None

  def __post_init__(self):
    if self.dtype not in DTYPES:
      raise ValueError(f"feature {self.name!r}: dtype {self.dtype!r} not in {DTYPES}")
    if self.length is not None and self.length < 0:
      raise ValueError(f"feature {self.name!r}: negative length {self.length}")


Schema = Tuple[FeatureSpec, ...]


def schema_to_json(schema: Sequence[FeatureSpec]) -> list:
  """Returns the schema as JSON-ready dicts, in schema order."""
  return [dataclasses.asdict(s) for s in schema]


def schema_from_json(obj: list) -> Schema:
  """Inverse of `schema_to_json`."""
  return tuple(FeatureSpec(d["name"], d["dtype"], d.get("length")) for d in obj)


def parse_spec(schema: Sequence[FeatureSpec]) -> dict:
  """Returns the `tf.io.parse_example` spec for a schema (imports TensorFlow).

  Fixed-length features become `FixedLenFeature([length])`; variable-length
  ones become `RaggedFeature`.
  """
  tf = require_tf()
  tf_dtype = {INT64: tf.int64, FLOAT: tf.float32, BYTES: tf.string}
  spec = {}
  for s in schema:
    if s.length is None:
      spec[s.name] = tf.io.RaggedFeature(tf_dtype[s.dtype], row_splits_dtype=tf.int64)
    else:
      spec[s.name] = tf.io.FixedLenFeature([s.length], tf_dtype[s.dtype])
  return spec
