"""w2v_data's records: the core's batched int64 encoder, compiled where it can be.

Skip-gram data has hundreds of thousands of tiny records, so they are built
a batch at a time by `textrecords.wire.example_encoder.encode_int64_records`
(numpy), or by w2v_data's compiled `encode_kernel` when the kernels are in
use (`w2v_data.kernel_loader`): the same bytes.

Example:
  >>> from textrecords.files import tfrecord
  >>> from textrecords.wire import example_encoder, features as F
  >>> data = encode_int64_records([("a", np.array([5, 300]), np.array([2]))])
  >>> enc = example_encoder.ExampleEncoder((F.FeatureSpec("a", "int64", None),))
  >>> data == tfrecord.frame(enc.encode({"a": [5, 300]}))
  True
"""

from typing import Sequence, Tuple

import numpy as np

from textrecords.wire import example_encoder
from w2v_data import kernel_loader


def encode_int64_records(features: Sequence[Tuple[str, np.ndarray, np.ndarray]],
                         with_starts: bool = False):
  """`example_encoder.encode_int64_records` with the compiled kernel when
  the kernels are in use (loaded, or loaded now)."""
  kern = kernel_loader.kernels()
  return example_encoder.encode_int64_records(
      features, with_starts, kernel=None if kern is None else kern.encode_kernel)
