"""Worker pools whose results never depend on the number of workers.

Work is split into units with their own RNGs (see `seeding`), so any worker can
process any unit. `ordered_map` returns results in input order.

The pool is a few forked processes, each with its own pipe, and no helper
threads in this process beyond one blocked sender per worker:
`multiprocessing.Pool`'s worker-handler thread wakes on every result waiting
in the pipe and spins until the result thread has read it, which cost the
main process much of its CPU (`scripts/bench/profile_bert.py --cpu_share`,
docs/benchmarks_history.md). Here this process only pickles the
(small) task descriptions and unpickles the results.
"""

import gc
import multiprocessing
import multiprocessing.connection
import os
import queue
import signal
import threading
import traceback
from typing import Callable, Iterable, Iterator, Optional

# Tasks sent ahead to each worker, so it never waits for this process.
_PREFETCH = 2


def default_num_workers() -> int:
  try:
    return max(1, len(os.sched_getaffinity(0)))
  except AttributeError:  # pragma: no cover - non-Linux
    return max(1, os.cpu_count() or 1)


def _context():
  methods = multiprocessing.get_all_start_methods()
  return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


class WorkerError(RuntimeError):
  """An exception in a worker that could not be sent back as itself."""


def _worker_main(conn, fn, initializer, initargs, reuse_memory=False):
  """A worker's loop: receive (index, item), send (index, ok, result or error)."""
  # A terminal's Ctrl-C goes to the whole process group: it is the parent's
  # to handle (one line, exit 130), never a worker traceback.
  signal.signal(signal.SIGINT, signal.SIG_IGN)
  if reuse_memory:
    keep_freed_memory()
  try:
    if initializer is not None:
      initializer(*initargs)
    while True:
      try:
        msg = conn.recv()
      except EOFError:
        return
      if msg is None:
        return
      index, item = msg
      try:
        out = (index, True, fn(item))
      except Exception as e:  # pylint: disable=broad-except
        out = (index, False, e)
      try:
        conn.send(out)
      except Exception:  # pylint: disable=broad-except  # unpicklable result or error
        conn.send((index, False, WorkerError(traceback.format_exc())))
  except KeyboardInterrupt:
    return


_M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
_M_MMAP_THRESHOLD = -3


def keep_freed_memory(mmap_threshold: int = 1 << 26, trim_threshold: int = 1 << 28) -> bool:
  """Makes this process's allocator keep and reuse freed memory (glibc only).

  A worker that allocates and frees arrays of a few MB per task otherwise
  gets fresh pages from the kernel for each (glibc maps large blocks one by
  one and returns freed heap tops), and every first touch of a page is a
  page fault (`scripts/bench/bench_w2v.py` counts them with and without this;
  docs/benchmarks_history.md). Blocks below `mmap_threshold` come
  from the heap, and up to `trim_threshold` bytes of freed heap stay mapped
  for reuse. For short-lived worker processes; returns False where the C
  library has no `mallopt`.
  """
  import ctypes  # pylint: disable=import-outside-toplevel
  try:
    mallopt = ctypes.CDLL(None).mallopt
  except (OSError, AttributeError):
    return False
  return bool(mallopt(_M_MMAP_THRESHOLD, mmap_threshold)
              and mallopt(_M_TRIM_THRESHOLD, trim_threshold))


def _sender(conn, tasks: "queue.SimpleQueue"):
  """Thread: forwards tasks to one worker (a blocked send never blocks the main loop)."""
  while True:
    msg = tasks.get()
    try:
      conn.send(msg)
    except (OSError, ValueError):
      return
    if msg is None:
      return


def ordered_map(fn: Callable, items: Iterable, num_workers: int,
                initializer: Optional[Callable] = None, initargs: tuple = (),
                window: Optional[int] = None, prefetch: int = _PREFETCH,
                in_process: Optional[bool] = None,
                route: Optional[Callable[[object], int]] = None,
                reuse_memory: bool = False) -> Iterator:
  """Yields fn(item) for each item, in order, using `num_workers` processes.

  With num_workers == 1 everything runs in this process (no pickling),
  unless `in_process=False`: then one worker process runs the items one
  after the other, in order (so `fn` may keep state between items, as a
  file writer does). Each worker gets up to `prefetch` items ahead. With
  `route`, item x goes to worker route(x) % num_workers, so items with the
  same route run one after the other in the same process, in order.
  `reuse_memory`: worker processes keep freed memory for reuse (see
  `keep_freed_memory`; for tasks that allocate and free large arrays).
  Items are handed to whichever worker is free; at most `window` (default
  4 per worker) results are held waiting for an earlier one. An exception in
  `fn` is raised here in input order (the first failing item's, whichever
  worker count), and the workers are stopped.

  >>> list(ordered_map(abs, [-3, 1, -2], 2))
  [3, 1, 2]
  """
  if in_process is None:
    in_process = num_workers <= 1
  if in_process:
    if initializer is not None:
      initializer(*initargs)
    for item in items:
      yield fn(item)
    return
  num_workers = max(1, num_workers)
  window = window or max(4 * num_workers, prefetch)
  # Objects that exist before the fork are moved out of the collector's
  # reach, so workers' garbage collections do not write to (and so copy) the
  # pages they share with this process.
  gc.freeze()
  pool = _Pool(num_workers, prefetch)
  clean_exit = False
  try:
    pool.start(fn, initializer, initargs, reuse_memory)
    yield from _in_order(pool, _Inputs(items, route), window)
    clean_exit = True
  finally:
    pool.close(clean_exit)
    gc.unfreeze()


def _in_order(pool: "_Pool", inputs: "_Inputs", window: int) -> Iterator:
  """The pool's results in input order, at most `window` items in flight;
  a failed item's exception raised in its turn."""
  done: dict = {}
  next_out = 0
  while True:
    inputs.send_to(pool, limit=next_out + window)
    if inputs.exhausted and not inputs.pending and next_out == inputs.sent:
      return
    for index, ok, result in pool.results():
      done[index] = (ok, result)
    while next_out in done:
      ok, result = done.pop(next_out)
      if not ok:
        raise result
      next_out += 1
      yield result


class _Inputs:
  """The items not yet sent, numbered in input order as they go out; an item
  whose routed worker is full waits in `pending`."""

  def __init__(self, items: Iterable, route: Optional[Callable[[object], int]]):
    self.it, self.route = iter(items), route
    self.pending: list = []
    self.exhausted = False
    self.sent = 0

  def _next(self):
    """The next item to send, or _NONE (the iterator is exhausted)."""
    if self.pending:
      return self.pending.pop()
    try:
      return next(self.it)
    except StopIteration:
      self.exhausted = True
      return _NONE

  def send_to(self, pool: "_Pool", limit: int):
    """Sends items to workers with room (`prefetch` each) until item number
    `limit`, the input's end, or a routed item's full worker."""
    for w in range(pool.size):
      while ((self.pending or not self.exhausted) and pool.outstanding[w] < pool.prefetch
             and self.sent < limit):
        item = self._next()
        if item is _NONE:
          break
        target = w if self.route is None else self.route(item) % pool.size
        if pool.outstanding[target] >= pool.prefetch:
          self.pending.append(item)
          break
        pool.send(target, (self.sent, item))
        self.sent += 1


_NONE = object()  # no item left


class _Pool:
  """`size` forked workers, each with its own pipe and sender thread, and
  how many tasks each has outstanding."""

  def __init__(self, size: int, prefetch: int):
    self.size, self.prefetch = size, prefetch
    self.procs, self.conns, self.senders = [], [], []
    self.outstanding = [0] * size
    self.worker_of: dict = {}

  def start(self, fn, initializer, initargs, reuse_memory):
    """Forks the workers (each runs `_worker_main`) and their sender threads."""
    ctx = _context()
    for w in range(self.size):
      parent, child = ctx.Pipe(duplex=True)
      p = ctx.Process(target=_worker_main,
                      args=(child, fn, initializer, initargs, reuse_memory), daemon=True)
      p.start()
      child.close()
      self.procs.append(p)
      self.conns.append(parent)
      self.worker_of[parent] = w
      q = queue.SimpleQueue()
      t = threading.Thread(target=_sender, args=(parent, q), daemon=True)
      t.start()
      self.senders.append((q, t))

  def send(self, w: int, msg):
    """Hands (index, item) to worker `w`'s sender."""
    self.senders[w][0].put(msg)
    self.outstanding[w] += 1

  def results(self) -> list:
    """(index, ok, result or error) from every worker that has one, waiting
    for at least one. Raises WorkerError when a worker died."""
    busy = [self.conns[w] for w in range(self.size) if self.outstanding[w]]
    out = []
    for conn in multiprocessing.connection.wait(busy):
      w = self.worker_of[conn]
      try:
        out.append(conn.recv())
      except (EOFError, OSError):
        self.procs[w].join(1)
        raise WorkerError(f"a worker process died (exit code {self.procs[w].exitcode})") from None
      self.outstanding[w] -= 1
    return out

  def close(self, clean_exit: bool):
    """Stops the workers: after a clean run they exit on their own (reaped in
    the background); otherwise they are terminated."""
    for q, _ in self.senders:
      q.put(None)
    if clean_exit:  # each worker got every result out and exits on its own
      _reap_in_background(self.procs, [t for _, t in self.senders], self.conns)
    else:
      for p in self.procs:
        if p.is_alive():
          p.terminate()
        p.join()
      # A sender may still be writing to its pipe (its worker is gone: the
      # write fails): closing the pipe under it could free the descriptor
      # for a new pool's pipe while the write still goes to that number.
      for _, t in self.senders:
        t.join()
      for conn in self.conns:
        conn.close()


def _reap_in_background(procs, senders, conns):
  """Waits for finished workers to exit (and reaps them) in a thread.

  A worker's exit (freeing its memory) takes a few ms; the caller goes on
  meanwhile (the next phase of its run) instead of waiting for it.
  """

  def reap():
    for t in senders:
      t.join()
    for p in procs:
      p.join()
    for conn in conns:
      conn.close()

  threading.Thread(target=reap, daemon=True).start()
