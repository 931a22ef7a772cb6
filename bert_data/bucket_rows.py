"""Rows packed from a record file's sorted instances, one order bucket at a time.

With --pack_instances > 1 a row holds up to that many instances, packed
from the instances of one order bucket in key order
(`instance_packing.RowPacker`): `ordered_run` packs each bucket it sorts,
and on every engine the generator's `finish_file` (the step after the sort,
`textrecords.engine.protocol`) packs a file's sorted instances here. A
shard is a range of whole buckets, so within a file sorted by key each
bucket's instances are consecutive: `packed_runs` holds one bucket's
instances at a time, never the file. No TensorFlow here.
"""

from typing import Callable, Iterable, Iterator, List

import numpy as np

from textrecords.engine import record_runs
from textrecords.files import tfrecord

_HEADER, _FOOTER = tfrecord.HEADER_BYTES, tfrecord.FOOTER_BYTES


def packed_runs(runs: Iterable[record_runs.Run],
                bucket_of: Callable[[np.ndarray], np.ndarray],
                packer) -> Iterator[record_runs.Run]:
  """Each order bucket's rows, as one run of framed rows per bucket.

  Args:
    runs: one file's framed compact instances in key order (engine keys).
    bucket_of: engine keys (int64 array) -> their order buckets.
    packer: the run's `instance_packing.RowPacker`.
  Yields:
    runs of framed rows, each keyed by its bucket's first key.
  """
  bucket, first_key, pending = None, 0, []
  for run in runs:
    if not len(run.keys):
      continue
    buckets = bucket_of(run.keys)
    cuts = [0, *(np.flatnonzero(np.diff(buckets)) + 1).tolist(), len(buckets)]
    starts = run.starts.tolist()
    ends = starts[1:] + [len(run.data)]
    for a, b in zip(cuts, cuts[1:]):
      if int(buckets[a]) != bucket:
        if pending:
          yield _rows(first_key, pending, packer)
        bucket, first_key, pending = int(buckets[a]), int(run.keys[a]), []
      pending.extend(run.data[s + _HEADER:e - _FOOTER] for s, e in zip(starts[a:b], ends[a:b]))
  if pending:
    yield _rows(first_key, pending, packer)


def _rows(key: int, instances: List[bytes], packer) -> record_runs.Run:
  """One bucket's compact instances (in key order) packed into framed rows."""
  frame = tfrecord.frame
  return record_runs.from_keyed([(key, frame(row)) for row in packer.pack_records(instances)])
