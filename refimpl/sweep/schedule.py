"""Running a sweep's chunks in worker processes (refimpl.workers: spawned processes, or a Dask cluster's with --cluster).

Every chunk runs in a worker (`SweepWork`: refimpl.sweep.chunk.run_chunk), never in the main process, which only
schedules and writes each backend's record into its chunk's file (refimpl.sweep.store) as soon as it arrives.
Resuming: a chunk whose file has a record of every requested backend (other than "unavailable": the device did not
open) is not run again; one with some of them runs for the others only; a corrupt file is said and its chunk redone.
Before each backend's check the worker says which backend it is (a phase), so a worker that dies (a backend crash takes
its process with it) or runs past SWEEP_LIMITS loses only that backend's record on that chunk: the other backends are
rerun, the culprit once more alone, and a backend that kills (or hangs) its worker twice on a chunk gets a "crash"
(or "hang") record there. Ctrl-C (or SIGTERM) stops scheduling; every record already written stays, and the next run
goes on from there.
"""
from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from refimpl.sweep.chunk import UNAVAILABLE, run_chunk
from refimpl.sweep.plan import Chunk, chunks
from refimpl.sweep.store import CorruptChunk, chunk_path, read_chunk, save_chunk
from refimpl.testing.differential import OpCase
from refimpl.workers.messages import Answer, Answered, Finished, Lost, Phase, WorkerFailed
from refimpl.workers.progress import Progress

Backends = tuple[tuple[str, "str | None"], ...]  # (name, module:Class or None for a registered device)
SWEEP_LIMITS = {"run": 1800.0}  # seconds one backend may take on one chunk before it counts as hung

@dataclass(frozen=True)
class Task:
  chunk: Chunk
  backends: Backends
  attempts: int = 0

@dataclass(frozen=True)
class ChunkAnswer:
  """A worker's answer: one backend's record of a chunk, as run_chunk's result holding that record alone."""
  key: Chunk
  backend: str
  result: dict

@dataclass(frozen=True)
class SweepWork:
  """What a sweep's worker does (refimpl.workers.messages.Work): nothing to open (run_chunk opens each backend when it
  checks it); a job is a Task, answered backend by backend."""
  limits: ClassVar[dict[str, float]] = SWEEP_LIMITS

  def open(self) -> tuple[None, dict[str, str]]: return None, {}

  def run(self, task: Task, state: Any, send: Callable[[Phase | Answer], None]) -> None:
    ch = task.chunk
    send(Phase(ch, None, "reference"))
    run_chunk(ch.case, ch.start, ch.count, task.backends, lambda name: send(Phase(ch, name, "run")),
              lambda name, result: send(Answer(ChunkAnswer(ch, name, result))))

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

# ***** the run *****

class ChunkProgress:
  """Chunks done / total, rate and ETA on refimpl.workers' progress line, and a line when a case's chunks are all done."""
  def __init__(self, total: int, done: int, remaining: dict[str, int], quiet: bool = False):
    self.total, self.done, self.remaining = total, done, remaining
    self.bar = Progress(quiet, total, "chunk", done)
    self.t0, self.ran = time.monotonic(), 0
    self.case_t0: dict[str, float] = {}

  def started(self, case: str) -> None: self.case_t0.setdefault(case, time.monotonic())

  def finished(self, case: str) -> None:
    self.done, self.ran = self.done + 1, self.ran + 1
    self.remaining[case] -= 1
    now = time.monotonic()
    if self.remaining[case] == 0: self.bar.message(f"{case}: done (its chunks took {now - self.case_t0[case]:.0f} s of this run)")
    self.bar.update(self.done, self.line(now))

  def line(self, now: float) -> str:
    rate = self.ran / max(now - self.t0, 1e-9)
    eta = int((self.total - self.done) / rate) if rate else None
    eta_text = "?" if eta is None else f"{eta // 3600}:{eta // 60 % 60:02d}:{eta % 60:02d}"
    return (f"[sweep] {self.done}/{self.total} chunks ({100 * self.done / max(self.total, 1):.1f}%), "
            f"{rate:.2f} chunks/s, ETA {eta_text}")

  def close(self) -> None: self.bar.close()

def after_loss(ev: Lost, out: Path, errors: list[str]) -> list[Task]:
  """What to run again after a task's worker died or overran its limit: the backends it had not answered, the culprit
  once more alone; a culprit lost twice on the chunk gets a "crash" (or "hang") record and is not rerun. A worker lost
  with no backend to blame (while computing the reference, or before) reruns its task once, then goes to `errors` (not
  kept: a rerun of the sweep tries again)."""
  task, ch = ev.job, ev.job.chunk
  left = tuple(b for b in task.backends if (ch, b[0]) not in ev.answered)
  culprit = ev.culprit[1] if ev.culprit is not None else None
  if culprit is None:
    if task.attempts == 0: return [replace(task, backends=left, attempts=1)] if left else []
    errors.append(f"{', '.join(b[0] for b in left)} on {ch.case} at {ch.start:#x}: the worker was lost ({ev.reason}) "
                  "before any backend ran")
    return []
  again = [Task(ch, tuple(b for b in left if b[0] != culprit))] if len(left) > 1 else []
  if task.attempts == 0 or len(task.backends) > 1:
    return again + [Task(ch, tuple(b for b in left if b[0] == culprit), attempts=task.attempts + 1)]
  status = "hang" if ev.reason == "hang" else "crash"
  detail = f"the worker died twice on this chunk: {ev.reason}"
  save_chunk(out, ch.case, ch.start, ch.count, {"backends": {culprit: {"status": status, "detail": detail}}}, time.time())
  return again

@dataclass
class Outcome:
  """What a run did: the chunks with a record written, whether it was interrupted, the (case, backend) pairs with violations, and
  the chunks that could not be run (a worker's own error, not kept)."""
  written: set = field(default_factory=set)
  interrupted: bool = False
  failing: set = field(default_factory=set)
  errors: list = field(default_factory=list)

def run_tasks(tasks: list[Task], pool, out: Path, progress: ChunkProgress) -> Outcome:
  """Runs the tasks on the pool, writing each record as it arrives; Ctrl-C ends it with what is written kept."""
  queue, result = deque(tasks), Outcome()
  parts = {t.chunk: 1 for t in tasks}  # a chunk's tasks not yet over (more once a loss splits it)
  def over(t: Task, again: list[Task]) -> None:
    parts[t.chunk] += len(again) - 1
    queue.extendleft(reversed(again))
    if parts[t.chunk] == 0: progress.finished(t.chunk.case)
  try:
    while queue or pool.busy():
      for w in pool.idle():
        if not queue: break
        t = queue.popleft()
        progress.started(t.chunk.case)
        pool.submit(w, t)
      for ev in pool.poll(0.1):
        if isinstance(ev, Answered):
          a = ev.result
          save_chunk(out, a.key.case, a.key.start, a.key.count, a.result, time.time())
          result.written.add(a.key)
          if a.result["backends"][a.backend].get("violations"): result.failing.add((a.key.case, a.backend))
        elif isinstance(ev, WorkerFailed):
          ch = ev.job.chunk
          result.errors.append(f"{ch.case} at {ch.start:#x}: the worker raised: {ev.text.strip().splitlines()[-1]}")
        elif isinstance(ev, Finished): over(ev.job, [])
        elif isinstance(ev, Lost): over(ev.job, after_loss(ev, out, result.errors))
  except KeyboardInterrupt: result.interrupted = True
  finally:
    pool.close()
    progress.close()
  return result
