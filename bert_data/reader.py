"""bert_data records without TensorFlow: numpy batches, grain and PyTorch.

The batches equal `bert_data.make_dataset(..., training=False)`'s, element for
element, for every `feature_names` ("bert", "v2", "keras_hub"): same keys,
dtypes and shapes. Records written with `--masking=dynamic` are masked
here with make_dataset's rule and numbers (`masking.dynamic_mask`): in
evaluation order the masks equal `make_dataset(..., training=False,
seed=seed)`'s bit for bit (single pieces, whole words, n-grams); training
draws new masks each epoch from the seed. Every function takes what
`make_dataset` takes as location, and the reading options `verify`, `skip_corrupt` (also
skips records failing their CRC), `index` ("build": a missing or stale
offset index is rebuilt in memory, logged; "require": refused) and `log`.

Example:
  >>> for x, y, w in numpy_batches("out/train.tfrecord", 32):  # doctest: +SKIP
  ...   x["input_ids"].shape                                    # (32, 128)
"""

from typing import Optional

import numpy as np

from bert_data import dataset
from bert_data import dynamic_masking
from bert_data import masking
from bert_data.masks import draws
from bert_data import schema as S
from textrecords import dataset_files
from textrecords import example_decoder
from textrecords import reader
from textrecords import seeding
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

  def __init__(self, schema, canonical: dict, feature_names: str = "bert", masker=None,
               seed: Optional[int] = None):
    self.schema, self.canonical, self.names = schema, canonical, feature_names
    self.masker, self.seed = masker, seed
    # Training epochs' salts come from the seed (or one drawn here, shared
    # by the worker processes that get a copy of this decoder).
    self._train_seed = int(np.random.default_rng().integers(1 << 62)) if seed is None else seed
    self._decoder = example_decoder.ExampleDecoder(schema)

  def salt(self, epoch: Optional[int]) -> int:
    """The masks' salt: evaluation order (epoch None) `make_dataset`'s
    (seed, or 0), else one per training epoch."""
    if epoch is None:
      return int(self.seed or 0)
    return seeding.derive_seed(self._train_seed, "dynamic-masks", epoch) >> 1

  def decode(self, records):
    cols = self._decoder.decode(records)
    ints = {self.canonical.get(k, k): c.values.astype(np.int32) for k, c in cols.items()
            if c.values.dtype == np.int64}
    if self.masker is None:
      weights = cols[S.MASKED_LM_WEIGHTS].values
    else:  # --masking=dynamic records: masked here, as make_dataset does
      f = {self.canonical.get(k, k): c.values for k, c in cols.items()}
      keys = draws.epoch_keys_np(f[S.RECORD_KEY][:, 0],
                                 self.salt(getattr(records, "epoch", None)))
      starts = f.get(S.WORD_STARTS) if self.masker.whole_word else None
      ids, positions, labels, weights = masking.dynamic_mask(
          f[S.INPUT_IDS], f[S.INPUT_MASK], keys, self.masker, starts)
      ints[S.INPUT_IDS] = ids.astype(np.int32)
      ints[S.MASKED_LM_POSITIONS] = positions.astype(np.int32)
      ints[S.MASKED_LM_IDS] = labels.astype(np.int32)
    return dataset.outputs(ints, weights, self.names,
                           lambda a: np.ones(a.shape, np.float32), lambda a: a.astype(bool))


def open_dataset(location: str, *, max_seq_length: Optional[int] = None,
                 max_predictions_per_seq: Optional[int] = None,
                 masked_lm_prob: Optional[float] = None, seed: Optional[int] = None,
                 feature_names: Optional[str] = None, v2_names: bool = False,
                 verify: str = "checksum", skip_corrupt: bool = False, index: str = "build",
                 log=print) -> reader.Opened:
  """The checked dataset at `location`, ready for any of the readers.

  Records written with `--masking=dynamic` are masked by the decoder with
  `make_dataset`'s rule and numbers: the masks of `make_dataset(...,
  training=False, seed=seed)` (the same on every pass; `masked_lm_prob` and
  `max_predictions_per_seq` override as there).

  Raises:
    UserError: as `make_dataset`.
  """
  names = dataset._feature_names(feature_names, v2_names)  # pylint: disable=protected-access
  meta, found = dataset.load_metadata(location)
  masker = None
  if (meta.get("masking") or {}).get("mode") == "dynamic":
    masker = dynamic_masking.masker_from_metadata(
        meta, masked_lm_prob=masked_lm_prob, max_predictions_per_seq=max_predictions_per_seq)
  else:
    if masked_lm_prob is not None:
      raise UserError(f"{meta['_path']}: masked_lm_prob={masked_lm_prob} needs records "
                      "written with --masking=dynamic; these were masked at create time")
    if max_predictions_per_seq is not None and (
        max_predictions_per_seq != meta["max_predictions_per_seq"]):
      raise UserError(f"{meta['_path']}: records have max_predictions_per_seq="
                      f"{meta['max_predictions_per_seq']}, but max_predictions_per_seq="
                      f"{max_predictions_per_seq} was asked for")
  if max_seq_length is not None and max_seq_length != meta["max_seq_length"]:
    raise UserError(f"{meta['_path']}: records have max_seq_length={meta['max_seq_length']}, "
                    f"but max_seq_length={max_seq_length} was asked for")
  canonical = S.canonical_names(bool(meta.get("flags", {}).get("use_v2_feature_names", False)))
  decoder = BertDecoder(dataset.record_schema(meta), canonical, names, masker, seed)
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
  return open_dataset(location, seed=seed, **options).numpy_batches(
      batch_size, training=training, seed=seed, drop_remainder=drop,
      shard_index=shard_index, num_shards=num_shards)


grain_source, grain_dataset, torch_dataset = reader.package_readers(open_dataset)
