"""Worker pools whose results never depend on the number of workers.

Work is split into units with their own RNGs (see `seeding`), so any worker can
process any unit. `ordered_map` returns results in input order.
"""

import gc
import multiprocessing
import os
from typing import Callable, Iterable, Iterator, Optional


def default_num_workers() -> int:
  try:
    return max(1, len(os.sched_getaffinity(0)))
  except AttributeError:  # pragma: no cover - non-Linux
    return max(1, os.cpu_count() or 1)


def _context():
  methods = multiprocessing.get_all_start_methods()
  return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


def ordered_map(fn: Callable, items: Iterable, num_workers: int,
                initializer: Optional[Callable] = None, initargs: tuple = (),
                chunksize: int = 1) -> Iterator:
  """Yields fn(item) for each item, in order, using `num_workers` processes.

  With num_workers == 1 everything runs in this process (no pickling).
  """
  if num_workers <= 1:
    if initializer is not None:
      initializer(*initargs)
    for item in items:
      yield fn(item)
    return
  # Objects that exist before the fork are moved out of the collector's
  # reach, so workers' garbage collections do not write to (and so copy) the
  # pages they share with this process.
  gc.freeze()
  try:
    with _context().Pool(num_workers, initializer=initializer, initargs=initargs) as pool:
      yield from pool.imap(fn, items, chunksize=chunksize)
  finally:
    gc.unfreeze()
