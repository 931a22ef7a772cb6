"""The TensorFlow edge of the readers: files -> shuffled, interleaved records."""

from typing import List, Optional

from textrecords.tf_import import require_tf


def record_dataset(files: List[str], compression: str, *, training: bool,
                   seed: Optional[int] = None, input_context=None,
                   cycle_length: int = 8):
  """A `tf.data.Dataset` of serialized records from `files`.

  Training: files are sharded by `input_context` (one input pipeline per
  host), shuffled (seedable), read interleaved in parallel. Evaluation: files
  in order, records in order.
  """
  tf = require_tf()
  if input_context is not None and input_context.num_input_pipelines > 1:
    if len(files) < input_context.num_input_pipelines:
      raise ValueError(f"{len(files)} files cannot be sharded over "
                       f"{input_context.num_input_pipelines} input pipelines; write "
                       "more shards (--num_shards)")
    files = files[input_context.input_pipeline_id::input_context.num_input_pipelines]
  ds = tf.data.Dataset.from_tensor_slices(files)
  comp = compression or None
  if not training:
    return ds.flat_map(lambda f: tf.data.TFRecordDataset(f, compression_type=comp))
  ds = ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
  return ds.interleave(
      lambda f: tf.data.TFRecordDataset(f, compression_type=comp),
      cycle_length=min(cycle_length, len(files)),
      num_parallel_calls=tf.data.AUTOTUNE,
      deterministic=seed is not None)
