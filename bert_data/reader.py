"""bert_data records without TensorFlow: numpy batches, grain and PyTorch.

The batches equal `bert_data.make_dataset(..., training=False)`'s, element for
element, for every `feature_names` ("bert", "v2", "keras_hub"): same keys,
dtypes and shapes. Every function takes what `make_dataset`
takes as location, and the reading options `verify`, `skip_corrupt` (also
skips records failing their CRC), `index` ("build": a missing or stale
offset index is rebuilt in memory, logged; "require": refused) and `log`.

Example:
  >>> for x, y, w in numpy_batches("out/train.tfrecord", 32):  # doctest: +SKIP
  ...   x["input_ids"].shape                                    # (32, 128)
"""

from typing import Optional

import numpy as np

from bert_data import dataset
from bert_data import schema as S
from textrecords import dataset_files
from textrecords import example_decoder
from textrecords import reader
from textrecords.errors import UserError


class BertDecoder(reader.BatchDecoder):
  """Serialized bert_data records -> `(x, y, sample_weight)` numpy batch.

  Args:
    schema: the records' schema (`dataset.record_schema(meta)`).
    canonical: record feature name -> canonical name (records written with
      v2 names), as `schema.canonical_names`.
    feature_names: "bert", "v2" or "keras_hub", as for `make_dataset`.
  """

  package = "bert_data"

  def __init__(self, schema, canonical: dict, feature_names: str = "bert"):
    self.schema, self.canonical, self.names = schema, canonical, feature_names
    self._decoder = example_decoder.ExampleDecoder(schema)

  def decode(self, records):
    cols = self._decoder.decode(records)
    ints = {self.canonical.get(k, k): c.values.astype(np.int32) for k, c in cols.items()
            if c.values.dtype == np.int64}
    weights = cols[S.MASKED_LM_WEIGHTS].values
    return dataset.outputs(ints, weights, self.names,
                           lambda a: np.ones(a.shape, np.float32), lambda a: a.astype(bool))


def open_dataset(location: str, *, max_seq_length: Optional[int] = None,
                 max_predictions_per_seq: Optional[int] = None,
                 feature_names: Optional[str] = None, v2_names: bool = False,
                 verify: str = "checksum", skip_corrupt: bool = False, index: str = "build",
                 log=print) -> reader.Opened:
  """The checked dataset at `location`, ready for any of the readers.

  Raises:
    UserError: as `make_dataset`; records written with --masking=dynamic
      (masked in tf.data only).
  """
  names = dataset._feature_names(feature_names, v2_names)  # pylint: disable=protected-access
  meta, found = dataset.load_metadata(location)
  if (meta.get("masking") or {}).get("mode") == "dynamic":
    raise UserError(f"{meta['_path']}: records written with --masking=dynamic are masked "
                    "inside tf.data (make_dataset); the TF-free readers need records "
                    "masked at create time (--masking=static)")
  for name, want in (("max_seq_length", max_seq_length),
                     ("max_predictions_per_seq", max_predictions_per_seq)):
    if want is not None and want != meta[name]:
      raise UserError(f"{meta['_path']}: records have {name}={meta[name]}, "
                      f"but {name}={want} was asked for")
  canonical = S.canonical_names(bool(meta.get("flags", {}).get("use_v2_feature_names", False)))
  decoder = BertDecoder(dataset.record_schema(meta), canonical, names)
  entries = dataset_files.record_files(found, verify=verify, skip_corrupt=skip_corrupt, log=log)
  return reader.Opened(entries, meta["compression"], decoder, verify=verify,
                       skip_corrupt=skip_corrupt, index=index, log=log)


def numpy_batches(location: str, batch_size: int, *, training: bool = False,
                  seed: Optional[int] = None, drop_remainder: Optional[bool] = None,
                  shard_index: int = 0, num_shards: int = 1, **options):
  """An iterator of one epoch of `(x, y, sample_weight)` numpy batches.

  Training: a seeded global shuffle of all records, the last partial batch
  dropped (as `make_dataset`) unless `drop_remainder=False`. Sharding takes
  every `num_shards`-th record. `options`: see `open_dataset`.
  """
  drop = training if drop_remainder is None else drop_remainder
  return open_dataset(location, **options).numpy_batches(
      batch_size, training=training, seed=seed, drop_remainder=drop,
      shard_index=shard_index, num_shards=num_shards)


grain_source, grain_dataset, torch_dataset = reader.package_readers(open_dataset)
