"""`Pool`: n worker processes on this machine, started with multiprocessing's spawn context (a fresh interpreter: no
state inherited from the caller; they ignore SIGINT, so Ctrl-C reaches the caller alone). Each opens its `Work` once,
then runs one job at a time. A worker that dies (a signal: SIGSEGV, SIGFPE, SIGABRT...), or overruns its phase's time
limit (it is killed, with the compilers it started), is reported as a `Lost` event and replaced (messages.py)."""
from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from refimpl.workers.messages import (
  Answer,
  Answered,
  Failure,
  Finished,
  JobDone,
  Lost,
  Phase,
  Ready,
  Work,
  WorkerFailed,
  signal_name,
  worker_setup,
)

DEBUG_HINT = "a fuzz campaign shows its workers' stderr with REFIMPL_FUZZ_DEBUG=1"


def _end_with(parent: int) -> None:
  """The worker ends (within a second) once its parent is gone, even in the middle of a job: nobody reads its answers."""
  def watch() -> None:
    while os.getppid() == parent: time.sleep(0.5)
    os._exit(0)
  threading.Thread(target=watch, daemon=True).start()


def worker_main(conn, work: Work, parent: int, silent: bool = False, env: dict[str, str] | None = None) -> None:
  """The body of a worker process: set up (worker_setup; SIGINT ignored; it ends with `parent`), open the work, then run
  jobs until told to stop (None) or the pipe closes. Errors of the worker's own code come back as Failure messages."""
  signal.signal(signal.SIGINT, signal.SIG_IGN)
  _end_with(parent)
  worker_setup(silent, env)
  state, errors = work.open()
  conn.send(Ready(os.getpid(), errors))
  while True:
    try: job = conn.recv()
    except (EOFError, OSError): return
    if job is None: return
    try: work.run(job, state, conn.send)
    except Exception: conn.send(Failure(traceback.format_exc()))
    conn.send(JobDone())


@dataclass
class _Worker:
  proc: Any
  conn: Any
  ready: bool = False
  job: Any = None
  phase: Phase | None = None
  phase_start: float = 0.0
  answered: set = field(default_factory=set)
  errors: dict = field(default_factory=dict)


def _kill_group(proc) -> None:
  """SIGKILL to the worker's process group (the worker and the compilers it started); nothing when it is gone."""
  if proc.pid is None: return
  try: os.killpg(proc.pid, signal.SIGKILL)
  except (ProcessLookupError, PermissionError): pass


class Pool:
  """n spawned workers running `work` (see the module docstring). `limits`: seconds per phase (0 or absent: none), over
  the work's own `limits`. `poll` returns events: Answered, Finished, WorkerFailed, Lost."""
  def __init__(self, work: Work, n: int = 1, limits: dict[str, float] | None = None, silent: bool = False,
               env: dict[str, str] | None = None):
    self.work, self.silent, self.env = work, silent, env
    self.limits = {**getattr(work, "limits", {}), **(limits or {})}
    self.ctx = multiprocessing.get_context("spawn")
    self.failed_starts = 0
    self.open_errors: dict[str, str] = {}
    self.workers = [self._spawn() for _ in range(max(1, n))]

  def _spawn(self) -> _Worker:
    parent, child = self.ctx.Pipe()
    proc = self.ctx.Process(target=worker_main, args=(child, self.work, os.getpid(), self.silent, self.env), daemon=True,
                            name="refimpl-worker")
    proc.start()
    child.close()
    return _Worker(proc, parent)

  def size(self) -> int: return len(self.workers)
  def idle(self) -> list[_Worker]: return [w for w in self.workers if w.ready and w.job is None]
  def busy(self) -> int: return sum(w.job is not None for w in self.workers)

  def submit(self, w: _Worker, job: Any) -> None:
    w.job, w.phase, w.answered = job, None, set()
    w.conn.send(job)

  def poll(self, timeout: float = 0.1) -> list:
    waitables = [w.conn for w in self.workers] + [w.proc.sentinel for w in self.workers]
    multiprocessing.connection.wait(waitables, timeout)
    events: list = []
    for k, w in enumerate(self.workers):
      dead = False
      try:
        while w.conn.poll():
          self._handle(w, w.conn.recv(), events)
      except (EOFError, OSError): dead = True
      limit = self.limits.get(w.phase.what, 0) if w.phase else 0
      hung = w.phase is not None and limit and time.perf_counter() - w.phase_start > limit
      if hung or dead or not w.proc.is_alive():
        if hung: _kill_group(w.proc)
        w.proc.join(5)
        _kill_group(w.proc)  # whatever it left running (a compiler still working for a dead worker)
        reason = "hang" if hung else signal_name(w.proc.exitcode)
        if not w.ready:
          self.failed_starts += 1
          if self.failed_starts > 3:
            raise RuntimeError(f"worker processes keep dying before they are ready ({reason}); {DEBUG_HINT}")
        if w.job is not None:
          culprit = None if w.phase is None else (w.phase.key, w.phase.backend, w.phase.what)
          events.append(Lost(w.job, culprit, reason, set(w.answered)))
        w.conn.close()
        self.workers[k] = self._spawn()
    return events

  def _handle(self, w: _Worker, msg: Ready | Phase | Answer | Failure | JobDone, events: list) -> None:
    if isinstance(msg, Ready):
      w.ready, w.errors, self.failed_starts = True, msg.errors, 0
      self.open_errors.update(msg.errors)
    elif isinstance(msg, Phase): w.phase, w.phase_start = msg, time.perf_counter()
    elif isinstance(msg, Answer):
      w.answered.add((msg.result.key, msg.result.backend))
      events.append(Answered(w.job, msg.result))
    elif isinstance(msg, Failure): events.append(WorkerFailed(w.job, msg.text))
    elif isinstance(msg, JobDone):
      events.append(Finished(w.job))
      w.job, w.phase = None, None

  def close(self) -> None:
    for w in self.workers:
      try: w.conn.send(None)
      except (OSError, ValueError): pass
    deadline = time.perf_counter() + 2
    for w in self.workers:
      w.proc.join(max(0.0, deadline - time.perf_counter()))
      _kill_group(w.proc)
      w.proc.join(1)
      w.conn.close()

  def __enter__(self) -> Pool: return self
  def __exit__(self, *exc) -> None: self.close()

  def wait_ready(self, timeout: float = 60.0) -> None:
    """Blocks until every worker has opened its work."""
    end = time.perf_counter() + timeout
    while not all(w.ready for w in self.workers):
      if time.perf_counter() > end: raise TimeoutError("the worker processes did not start in time")
      self.poll(0.05)
