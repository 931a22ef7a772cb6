"""`w2v_data.epochs.EpochDraws` (fresh draws every epoch) for many hosts.

The draws are a function of (seed, epoch, chunk of sentences), not of the
input pipeline, so every pipeline computes the same global batches of G
rows and takes its replicas' slices of each (`read_order.Sharing`): global
batch k holds the same rows for any number of pipelines, the slices are
disjoint and make it up, and every pipeline yields the same number of
steps (the partial last global batch of an epoch is dropped). How many
rows an epoch draws is itself drawn, so the number of steps is not known
beforehand. `start_step=k` skips k global batches: no record is read (the
sentences are held), the skipped draws are computed and dropped. Each
pipeline computes every draw (P pipelines: P times the work of one).

Example:
  >>> ds = draw_batches("out/ptb_w2v", 1024, epochs=5, seed=0,  # doctest: +SKIP
  ...                   input_context=ctx, start_step=step)
"""

from typing import Optional

from textrecords.errors import UserError
from textrecords.reading.read_options import ReadOptions
from textrecords.tf_import import require_tf
from w2v_data import epochs as epochs_lib


def draw_batches(location: str, global_batch_size: int, *, epochs: int, seed: int,
                 input_context=None, start_step: int = 0,
                 settings: epochs_lib.DrawSettings = epochs_lib.DrawSettings(),
                 verify: str = "checksum", parallel: int = 2):
  """This input pipeline's per-replica batches of `epochs` epochs of fresh
  draws (see the module doc): a `tf.data.Dataset` of (x, y, w), batch
  dimension static (G / replicas)."""
  if not isinstance(epochs, int) or isinstance(epochs, bool) or epochs < 1:
    raise UserError(f"epochs={epochs!r}: must be a positive integer")
  sharing = ReadOptions(global_batch_size=global_batch_size, input_context=input_context,
                        start_step=start_step).sharing()
  tf = require_tf()
  draws = epochs_lib.EpochDraws(location, sharing.global_batch, seed=seed,
                                settings=settings, verify=verify)
  ds = draws.dataset(0, epochs, parallel)
  for e in range(1, epochs):
    ds = ds.concatenate(draws.dataset(e, epochs, parallel))
  g, r, b = sharing.global_batch, sharing.replicas, sharing.per_replica
  lo, hi = sharing.local_replicas.start, sharing.local_replicas.stop
  ds = ds.filter(lambda x, y, w: tf.shape(y)[0] == g).skip(start_step)
  ds = ds.map(lambda *xyw: tf.nest.map_structure(
      lambda t: tf.reshape(t, tf.concat([[r, b], tf.shape(t)[1:]], 0))[lo:hi], xyw))
  return ds.unbatch().prefetch(2)
