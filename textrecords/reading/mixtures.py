"""Mixtures: one training dataset from several datasets of one package and
schema, each taking its weight's share of every global batch.

`make_dataset([loc_a, loc_b], ..., weights=[0.7, 0.3])` (and
`numpy_batches`) of bert_data and mt_data come here. Global batch k holds
`floor((k+1)*G*c) - floor(k*G*c)` records of each dataset (c: the cumulative
weights, exact to 2**-24), in a seeded order of its slots; every dataset's
records come in its own read order (`textrecords.reading.read_order.Stream`,
epochs repeating on their own), so the mixture is deterministic for a seed,
the same for any number of input pipelines, and `start_step` resumes it
without reading what came before. It is infinite (epochs of different
datasets end at different steps).

Example:
  >>> proportions([0.7, 0.3], global_batch_size=32, steps=10000)
  [0.699997, 0.300003]
"""

from typing import Callable, List, Sequence

from textrecords.reading import read_order as R
from textrecords.errors import UserError
from textrecords.wire import example_decoder
from textrecords.tf_import import require_tf
from textrecords.reading import tf_order
from textrecords.reading import tf_input


def _locations(locations) -> List[str]:
  if isinstance(locations, str):
    locations = [locations]
  locations = list(locations)
  if not locations or not all(isinstance(l, str) for l in locations):
    raise UserError(f"{locations!r}: a mixture takes a list of dataset locations")
  return locations


def build(counts: Sequence[Sequence[int]], weights, opts) -> R.Mixture:
  """The `read_order.Mixture` of datasets with these per-file record counts."""
  if weights is None:
    raise UserError("several datasets: pass weights=[...] (their shares of each batch)")
  if not opts.training:
    raise UserError("a mixture is a training dataset: training=False reads one dataset")
  sharing = opts.sharing()
  seed = R.resolve_seed(opts.seed)
  window = R.window_records(opts.shuffle_buffer, sharing.global_batch)
  streams = tuple(R.Stream(tuple(int(c) for c in cs), True, seed, int(sum(cs)), window, key=d)
                  for d, cs in enumerate(counts))
  for d, s in enumerate(streams):
    if s.total == 0:
      raise UserError(f"dataset {d} of the mixture has no records")
  return R.Mixture(streams, R.mixture_weights(weights, len(streams)), sharing, seed,
                   opts.start_step)


def proportions(weights, global_batch_size: int, steps: int, start_step: int = 0) -> List[float]:
  """Each dataset's share of the records in global batches
  [start_step, start_step + steps) of a mixture with these weights."""
  sharing = R.Sharing(int(global_batch_size))
  mix = R.Mixture(tuple(R.Stream((1,), True, 0, 1, 1, d) for d in range(len(weights))),
                  R.mixture_weights(weights, len(weights)), sharing, 0, start_step)
  return [round(p, 6) for p in mix.proportions(steps, start_step)]


def check_same_schema(metas: Sequence[dict], locations: Sequence[str]):
  """UserError naming the first dataset whose schema (or masking) differs."""
  first = metas[0]
  for meta, loc in zip(metas[1:], locations[1:]):
    if (meta.get("package"), meta.get("schema"), meta.get("masking")) != (
        first.get("package"), first.get("schema"), first.get("masking")):
      raise UserError(f"{loc}: another schema than {locations[0]}; a mixture reads datasets "
                      "of one package and schema")


def tf_mixture(locations, weights, opts, load: Callable, parse_for: Callable):
  """The tf.data mixture: load(location) -> (meta, record entries);
  parse_for(meta) -> parse(serialized batch, salt) -> (x, y, w). The salt of
  step k's batches is `read_order.epoch_salt(seed, k)`."""
  tf = require_tf()
  locations = _locations(locations)
  loaded = [load(loc) for loc in locations]
  check_same_schema([m for m, _ in loaded], locations)
  mix = build([[e.records for e in entries] for _, entries in loaded], weights, opts)
  readers = [tf_input.file_reader([e.path for e in entries], meta.get("compression", ""))
             for meta, entries in loaded]
  parse = parse_for(loaded[0][0])
  ds = tf_order.mixture_dataset(mix, readers)
  ds = ds.map(lambda k, d, s: parse(s, tf_order.epoch_salt(tf, mix.seed, k)),
              num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  return tf_input.with_cardinality(ds, None).prefetch(tf.data.AUTOTUNE)


def numpy_mixture(opened: Sequence, weights, opts):
  """The TF-free mixture over `package_readers.Opened` datasets (the batches of
  `tf_mixture` with the same options)."""
  locations = [o.entries[0].found.given for o in opened]
  check_same_schema([o.entries[0].found.meta for o in opened], locations)
  mix = build([[e.records for e in o.entries] for o in opened], weights, opts)
  sources = [o.source() for o in opened]
  decode = opened[0].decoder
  decode.order_seed = mix.seed

  def batches():
    for step, which, ids in mix.batches():
      recs = [None] * len(ids)
      for d, source in enumerate(sources):
        at = [i for i, w in enumerate(which.tolist()) if w == d]
        for i, r in zip(at, source.read(ids[at])):
          recs[i] = r
      yield decode(example_decoder.RecordBatch.from_records(
          [r for r in recs if r is not None], step))

  return batches()
