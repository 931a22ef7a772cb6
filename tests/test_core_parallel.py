"""textrecords.engine.parallel: ordered results, errors and clean shutdown of the pool."""

import os
import subprocess
import sys
import time

import pytest

from textrecords.engine import parallel
from textrecords.errors import UserError


def _square_slow_first(x):
  if x == 0:
    time.sleep(0.2)  # later items finish first; results must still come in order
  return x * x


def _fail_on_three(x):
  if x == 3:
    raise UserError(f"bad item {x}")
  return x


def _fail_late_slow_early(x):
  if x == 1:
    time.sleep(0.3)
    raise UserError("first failure")
  if x == 2:
    raise UserError("second failure")
  return x


def _die_on_two(x):
  if x == 2:
    os._exit(7)  # pylint: disable=protected-access
  return x


_OFFSET = {}


def _init(offset):
  _OFFSET["v"] = offset


def _add_offset(x):
  return x + _OFFSET["v"]


def _pid(_):
  return os.getpid()


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_results_in_input_order(workers):
  assert list(parallel.ordered_map(_square_slow_first, range(20), workers,
                                   window=3)) == [x * x for x in range(20)]


def test_initializer_runs_in_each_worker():
  assert list(parallel.ordered_map(_add_offset, [1, 2, 3], 2, initializer=_init,
                                   initargs=(100,))) == [101, 102, 103]


_ALLOCATOR_PROBE = """
import ctypes, sys
sys.path.insert(0, sys.argv[1])
from textrecords.engine import parallel

def from_heap(_):
  # Whether this process's glibc allocator serves a 48 MiB block from the heap
  # (mallinfo2 does not report the threshold): tested by where it lands. By
  # default it never does in a fresh process (glibc's adaptive threshold stops
  # at 32 MiB, and a small heap has no free chunk that large).
  libc = ctypes.CDLL(None)
  libc.malloc.restype = ctypes.c_void_p
  libc.sbrk.restype = ctypes.c_void_p
  p = libc.malloc(48 << 20)
  top = libc.sbrk(0)
  libc.free(ctypes.c_void_p(p))
  return p < top  # below the heap's end: from the heap, not a fresh mapping

print(list(parallel.ordered_map(from_heap, [0, 1], 2)),
      list(parallel.ordered_map(from_heap, [0, 1], 2, reuse_memory=True)))
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="Linux/glibc allocator")
def test_reuse_memory_makes_workers_keep_large_blocks_on_the_heap():
  # A 48 MiB block is mapped on its own by default, and comes from the heap
  # (whose freed memory is kept for reuse) with reuse_memory. Probed from a
  # fresh interpreter: forked workers inherit their parent's heap, and a long
  # test session's heap can hold a free chunk of 48 MiB.
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  r = subprocess.run([sys.executable, "-c", _ALLOCATOR_PROBE, root], capture_output=True,
                     text=True, timeout=120)
  assert r.returncode == 0, r.stderr
  assert r.stdout.split("\n")[0] == "[False, False] [True, True]"
  assert list(parallel.ordered_map(_square_slow_first, range(5), 2,
                                   reuse_memory=True)) == [0, 1, 4, 9, 16]


def test_large_items_and_results_do_not_deadlock():
  big = [bytes(3 << 20) for _ in range(6)]  # larger than any pipe buffer
  assert [len(r) for r in parallel.ordered_map(bytes, big, 2)] == [3 << 20] * 6


def _pid_of(x):
  return x[0], os.getpid()


@pytest.mark.parametrize("prefetch", [1, 3])
def test_route_keeps_a_key_in_one_process_in_order(prefetch):
  items = [(k % 3, i) for i, k in enumerate([0, 1, 2, 2, 2, 1, 0, 0, 1, 2] * 3)]
  out = list(parallel.ordered_map(_pid_of, items, 2, prefetch=prefetch,
                                  route=lambda item: item[0]))
  assert [k for k, _ in out] == [k for k, _ in items]
  pids = {}
  for k, pid in out:
    assert pids.setdefault(k % 2, pid) == pid   # keys 0 and 2 share worker 0
  assert pids[0] != pids[1]


def test_one_stateful_worker_process():
  pids = set(r for _, r in parallel.ordered_map(_pid_of, [(0, 1), (0, 2)], 1, in_process=False))
  assert len(pids) == 1 and os.getpid() not in pids


def test_worker_exception_is_raised_here():
  with pytest.raises(UserError, match="bad item 3"):
    list(parallel.ordered_map(_fail_on_three, range(10), 2))


def test_errors_come_in_input_order():
  with pytest.raises(UserError, match="first failure"):
    list(parallel.ordered_map(_fail_late_slow_early, range(4), 2))


def test_dead_worker_is_an_error():
  with pytest.raises(parallel.WorkerError, match="exit code 7"):
    list(parallel.ordered_map(_die_on_two, range(10), 2))


def test_abandoned_map_stops_its_workers():
  gen = parallel.ordered_map(_pid, range(100), 2)
  pids = {next(gen), next(gen)}
  gen.close()
  for pid in pids - {os.getpid()}:
    with pytest.raises(ProcessLookupError):
      os.kill(pid, 0)  # reaped: gone, not a zombie


def test_finished_workers_exit_and_are_reaped():
  pids = set(parallel.ordered_map(_pid, range(20), 2)) - {os.getpid()}
  assert len(pids) == 2
  deadline = time.monotonic() + 30
  for pid in pids:  # reaped by a thread while the caller goes on: gone, not a zombie
    while True:
      try:
        os.kill(pid, 0)
      except ProcessLookupError:
        break
      assert time.monotonic() < deadline, f"worker {pid} was not reaped"
      time.sleep(0.01)
