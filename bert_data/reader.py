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

from typing import Optional, Sequence

import numpy as np

from bert_data import dataset
from bert_data import dynamic_masking
from bert_data import masking
from bert_data.masks import draws
from bert_data import schema as S
from textrecords.reading import locations as dataset_files
from textrecords.wire import example_decoder
from textrecords.reading import numpy_reader
from textrecords.reading import package_readers
from textrecords.datasets.layout import DEFAULT_SPLIT
from textrecords.reading import read_order
from textrecords.errors import UserError
from textrecords.reading import mixtures


class BertDecoder(numpy_reader.BatchDecoder):
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
    return read_order.epoch_salt(getattr(self, "order_seed", self._train_seed), epoch)

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
    nsp_weights = cols.get(S.NEXT_SENTENCE_WEIGHTS)  # packed rows only
    return dataset.outputs(ints, weights, self.names,
                           lambda a: np.ones(a.shape, np.float32), lambda a: a.astype(bool),
                           None if nsp_weights is None else nsp_weights.values)


def open_dataset(location: str, *, split: str = DEFAULT_SPLIT, max_seq_length: Optional[int] = None,
                 max_predictions_per_seq: Optional[int] = None,
                 masked_lm_prob: Optional[float] = None, seed: Optional[int] = None,
                 feature_names: Optional[str] = None, v2_names: bool = False,
                 verify: str = "checksum", skip_corrupt: bool = False, index: str = "build",
                 log=print) -> package_readers.Opened:
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
  masker = dataset._masker(meta, max_seq_length,  # pylint: disable=protected-access
                           max_predictions_per_seq, masked_lm_prob)
  canonical = S.canonical_names(bool(meta.get("flags", {}).get("use_v2_feature_names", False)))
  decoder = BertDecoder(dataset.record_schema(meta), canonical, names, masker, seed)
  entries = dataset_files.record_files(found, split, verify=verify, skip_corrupt=skip_corrupt,
                                       log=log)
  return package_readers.Opened(entries, meta["compression"], decoder, verify=verify,
                                skip_corrupt=skip_corrupt, index=index, log=log)


def numpy_batches(location, batch_size: Optional[int] = None, *, split: str = DEFAULT_SPLIT,
                  training: Optional[bool] = None, seed: Optional[int] = None,
                  global_batch_size: Optional[int] = None, input_context=None,
                  start_step: int = 0, drop_remainder: Optional[bool] = None,
                  shuffle_buffer: int = 10000, repeat: bool = False,
                  shard_index: int = 0, num_shards: int = 1,
                  weights: Optional[Sequence[float]] = None, **options):
  """An iterator of `(x, y, sample_weight)` numpy batches: those of
  `make_dataset` with the same arguments (the read order of
  `textrecords.reading.read_order`), read through the offset index.

  `shard_index`/`num_shards`: as an input_context of `num_shards` pipelines
  with a replica each. `options`: see `open_dataset`.
  """
  opts = numpy_reader.read_options_from(locals())
  if not isinstance(location, str) or weights is not None:
    return mixtures.numpy_mixture(
        [open_dataset(loc, split=split, seed=seed, **options) for loc in location],
        weights, opts)
  opened = open_dataset(location, split=split, seed=seed, **options)
  return numpy_reader.planned_batches(opened, opts)


grain_source, grain_dataset, torch_dataset = package_readers.package_readers(open_dataset)
