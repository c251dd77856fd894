"""Running a sweep's chunks in worker processes: a local pool of spawned processes or the tasks of a Dask cluster.

Every chunk runs in a worker (refimpl.sweep.chunk.run_chunk), never in the main process, which only schedules and writes
each finished chunk's file (refimpl.sweep.store) as soon as it arrives. Resuming: a chunk whose file has a record of
every requested backend (other than "unavailable": the device did not open) is not run again; one with some of them
runs for the others only; a corrupt file is said and its chunk redone. A worker that dies (a backend crash takes its
process with it) loses only its chunk: a chunk of several backends is rerun one backend at a time, and a backend that
kills its worker twice on a chunk gets a "crash" record there. Ctrl-C (or SIGTERM) stops scheduling; every chunk
already written stays, and the next run goes on from there.
"""
from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, replace
from pathlib import Path

from refimpl.sweep.chunk import UNAVAILABLE, run_chunk
from refimpl.sweep.plan import Chunk, chunks
from refimpl.sweep.store import CorruptChunk, chunk_path, read_chunk, save_chunk
from refimpl.testing.differential import OpCase

Backends = tuple[tuple[str, "str | None"], ...]  # (name, module:Class or None for a registered device)
CLUSTER_HINT = "pip install 'refimpl[cluster]'"

@dataclass(frozen=True)
class Task:
  chunk: Chunk
  backends: Backends
  attempts: int = 0

def plan_tasks(out: Path, cases: list[OpCase], chunk_bits: int, lo: int, hi: int, backends: Backends,
               say: Callable[[str], None]) -> tuple[list[Task], int]:
  """The tasks still to run (chunks lacking a requested backend's record, case by case) and how many chunks are done."""
  tasks, done = [], 0
  for case in cases:
    for ch in chunks(case, chunk_bits, lo, hi):
      path, have = chunk_path(out, ch.case, ch.start), {}
      if path.exists():
        try: have = {b: r for b, r in read_chunk(path)["backends"].items() if r.get("status") != UNAVAILABLE}
        except CorruptChunk as e: say(f"{e}; the chunk is redone")
      missing = tuple(b for b in backends if b[0] not in have)
      if missing: tasks.append(Task(ch, missing))
      else: done += 1
  return tasks, done

# ***** pools: submit(fn, *args) -> future, wait(futures) -> the finished ones, lost(exc), close() *****

def _worker_init(parent: int) -> None:
  """A local worker ignores Ctrl-C (the main process's to handle) and ends when the main process is gone (killed)."""
  signal.signal(signal.SIGINT, signal.SIG_IGN)
  def watch() -> None:
    while os.getppid() == parent: time.sleep(1.0)
    os._exit(0)
  threading.Thread(target=watch, daemon=True).start()

class LocalPool:
  """`jobs` spawned worker processes (concurrent.futures), made afresh after a worker dies."""
  def __init__(self, jobs: int):
    self.jobs, self.window = jobs, jobs
    self._pool: cf.ProcessPoolExecutor | None = None
  def submit(self, fn, *args):
    if self._pool is None:
      self._pool = cf.ProcessPoolExecutor(self.jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_init,
                                          initargs=(os.getpid(),))
    try: return self._pool.submit(fn, *args)
    except BrokenProcessPool:
      self.lost(None)
      return self.submit(fn, *args)
  def wait(self, futures: list) -> set: return cf.wait(futures, return_when=cf.FIRST_COMPLETED).done
  def lost(self, exc: BaseException | None) -> None:
    if self._pool is not None and (exc is None or isinstance(exc, BrokenProcessPool)):
      self._pool.shutdown(wait=False, cancel_futures=True)
      self._pool = None
  def close(self) -> None:
    if self._pool is not None: self._pool.shutdown(wait=True, cancel_futures=True)

class DaskPool:
  """The workers of a Dask cluster: `address` of a running scheduler, or "local" for a LocalCluster of `jobs` processes."""
  def __init__(self, address: str, jobs: int):
    try:
      import distributed
    except ImportError: raise RuntimeError(f"--cluster needs Dask distributed, which is not installed: {CLUSTER_HINT}") from None
    self._distributed = distributed
    self._cluster = None
    if address == "local":
      self._cluster = distributed.LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True, dashboard_address=None)
    self.client = distributed.Client(self._cluster or address)
    self.window = 2 * max(1, sum(self.client.nthreads().values()))
  def submit(self, fn, *args): return self.client.submit(fn, *args, pure=False)
  def wait(self, futures: list) -> set: return set(self._distributed.wait(futures, return_when="FIRST_COMPLETED").done)
  def lost(self, exc: BaseException | None) -> None: pass  # the scheduler replaces a dead worker itself
  def close(self) -> None:
    self.client.close()
    if self._cluster is not None: self._cluster.close()

# ***** the run *****

class Progress:
  """Chunks done / total, rate and ETA on one line (stderr; a line per `every` seconds when not a terminal), and a line
  when a case's chunks are all done."""
  def __init__(self, total: int, done: int, remaining: dict[str, int], quiet: bool = False, every: float = 60.0):
    self.total, self.done, self.remaining, self.quiet = total, done, remaining, quiet
    self.tty, self.every = sys.stderr.isatty(), (1.0 if sys.stderr.isatty() else every)
    self.t0 = self.last = time.monotonic()
    self.ran = 0
    self.case_t0: dict[str, float] = {}

  def started(self, case: str) -> None: self.case_t0.setdefault(case, time.monotonic())

  def finished(self, case: str) -> None:
    self.done, self.ran = self.done + 1, self.ran + 1
    self.remaining[case] -= 1
    now = time.monotonic()
    if self.remaining[case] == 0 and not self.quiet:
      self._print(f"{case}: done (its chunks took {now - self.case_t0[case]:.0f} s of this run)", line=True)
    if now - self.last >= self.every or self.done == self.total:
      self.last = now
      self._print(self.line(now), line=not self.tty)

  def line(self, now: float) -> str:
    rate = self.ran / max(now - self.t0, 1e-9)
    eta = int((self.total - self.done) / rate) if rate else None
    eta_text = "?" if eta is None else f"{eta // 3600}:{eta // 60 % 60:02d}:{eta % 60:02d}"
    return (f"[sweep] {self.done}/{self.total} chunks ({100 * self.done / max(self.total, 1):.1f}%), "
            f"{rate:.2f} chunks/s, ETA {eta_text}")

  def _print(self, text: str, line: bool) -> None:
    if self.quiet: return
    print(("\r" if self.tty else "") + text + ("\n" if line or not self.tty else ""), end="", file=sys.stderr, flush=True)

def _after_loss(task: Task, exc: BaseException, out: Path, errors: list[str]) -> list[Task]:
  """What to run again after a task's worker died or raised: each backend alone, then once more. Then a worker that
  died gets a "crash" record (the backend kills its process on these inputs); one that raised (the worker's own
  environment, e.g. a Dask worker without refimpl) gets none, so a rerun tries again: the error goes to `errors`."""
  if len(task.backends) > 1: return [Task(task.chunk, (b,)) for b in task.backends]
  if task.attempts == 0: return [replace(task, attempts=1)]
  ch, (name, _) = task.chunk, task.backends[0]
  if not (isinstance(exc, BrokenProcessPool) or type(exc).__name__ == "KilledWorker"):
    errors.append(f"{name} on {ch.case} at {ch.start:#x}: the worker raised {type(exc).__name__}: {exc}")
    return []
  detail = f"the worker died twice on this chunk: {type(exc).__name__}: {exc}"
  save_chunk(out, ch.case, ch.start, ch.count, {"backends": {name: {"status": "crash", "detail": detail}}}, time.time())
  return []

@dataclass
class Outcome:
  """What a run did: chunks written, whether it was interrupted, the (case, backend) pairs with violations, and the
  chunks that could not be run (a worker's own error, not kept)."""
  written: int = 0
  interrupted: bool = False
  failing: set = field(default_factory=set)
  errors: list = field(default_factory=list)

def run_tasks(tasks: list[Task], pool, out: Path, progress: Progress) -> Outcome:
  """Runs the tasks on the pool, writing each chunk's file as it finishes; Ctrl-C ends it with what is written kept."""
  queue, inflight, result = deque(tasks), {}, Outcome()
  parts = {t.chunk: 1 for t in tasks}  # a chunk's tasks not yet answered (more once it is split by backend)
  def answered(t: Task) -> None:
    parts[t.chunk] -= 1
    if parts[t.chunk] == 0: progress.finished(t.chunk.case)
  try:
    while queue or inflight:
      while queue and len(inflight) < pool.window:
        t = queue.popleft()
        progress.started(t.chunk.case)
        inflight[pool.submit(run_chunk, t.chunk.case, t.chunk.start, t.chunk.count, t.backends)] = t
      for fut in pool.wait(list(inflight)):
        t = inflight.pop(fut)
        try: res = fut.result()
        except Exception as e:
          pool.lost(e)
          again = _after_loss(t, e, out, result.errors)
          parts[t.chunk] += len(again)
          queue.extendleft(reversed(again))
          answered(t)
          continue
        save_chunk(out, t.chunk.case, t.chunk.start, t.chunk.count, res, time.time())
        result.written += 1
        result.failing |= {(t.chunk.case, b) for b, r in res["backends"].items() if r.get("violations")}
        answered(t)
  except KeyboardInterrupt: result.interrupted = True
  finally: pool.close()
  return result
