"""`ClusterPool`: a pool with local.Pool's interface whose jobs run as Dask tasks in the worker processes of a cluster
(`--cluster local|local:N|ADDRESS|SCHEDULER_FILE` of `python -m refimpl.fuzz` and `python -m refimpl.sweep`), and
`open_pool`, which picks it or the local pool. Dask distributed is optional (the `cluster` extra); without it `--cluster`
raises ClusterUnavailable, which names the extra.

A worker process of the cluster runs one job at a time (one thread): first a task that sets it up as the local pool's
workers are (messages.worker_setup: its own process group, so Ctrl-C at a terminal does not reach it) and opens the
work once, then job tasks, each running the work's `run`, the local pool's own worker code. The driver pins every task
to the worker it chose, so the death of a worker never moves its job to another. Messages stream back through a
distributed.Queue: before each risky step (a Phase) the task puts everything it has said since its last put and waits
until the scheduler holds it, so the driver knows what a worker was doing when it died; the answers after the last
phase come back as the task's result. (Messages are pickled in flight, as multiprocessing's pipes and Dask's own task
messages are, between processes of one run; nothing is read from a file.)

A worker that dies (SIGSEGV, SIGFPE, an exit...) leaves the cluster and its nanny starts a new one, which joins the pool
as any new worker does. The driver sees the worker gone (its task fails with KilledWorker, or it leaves the scheduler's
list), asks its nanny how it ended (the nanny's log: "Worker process P was killed by signal 11", the engine's one record
of the signal; "crash:killed" when it does not say within REPLACE_S), and reports `Lost` with the
culprit, exactly as local.Pool does. A worker that overruns its phase's time limit is killed through the engine: a
function the worker runs kills its process group (the compilers it started too), else client.restart_workers; then
`Lost` "hang". What a lost job stands for stays the caller's decision.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import os
import pickle
import re
import signal
import time
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from refimpl.workers.local import DEBUG_HINT, Pool
from refimpl.workers.messages import (
  Answer,
  Answered,
  Failure,
  Finished,
  Lost,
  Phase,
  Ready,
  Work,
  WorkerFailed,
  signal_name,
  worker_setup,
)

INSTALL = "pip install 'refimpl[cluster]'"
REFRESH_S = 0.25          # how often the driver reads the scheduler's list of workers
REPLACE_S = 30.0          # how long a dead worker's nanny may take to log how it ended before "crash:killed"
KILL_S = 10.0             # how long a killed worker may stay before the driver asks the engine to restart it
CONNECT_S = 60.0          # how long the driver waits for the scheduler and its first worker(s)
NANNY_S = 5.0             # how long the driver waits to connect to a dead worker's nanny (a host gone says nothing)


class ClusterUnavailable(ImportError):
  """--cluster without Dask distributed installed."""

class ClusterError(RuntimeError):
  """The cluster cannot be used: the scheduler does not answer, no worker joins, workers cannot run refimpl."""


def _distributed():
  try:
    import distributed
  except ImportError as e:
    raise ClusterUnavailable(f"--cluster needs Dask distributed, which does not import here ({e}): {INSTALL}") from None
  return distributed


def open_pool(work: Work, n: int, limits: dict[str, float] | None = None, silent: bool = False,
              env: dict[str, str] | None = None, cluster: str | None = None) -> Pool | ClusterPool:
  """The local pool of n spawned workers (local.Pool), or with `cluster` a ClusterPool on it."""
  if cluster is None: return Pool(work, n, limits, silent, env)
  return ClusterPool(cluster, work, n, limits, silent, env)


# ***** the worker side: these run in the cluster's worker processes *****

_here: dict = {"setup": False, "opened": {}}   # per worker process: set up yet, what each work's open() gave


def _opened(work: Work, silent: bool, env: dict[str, str] | None) -> tuple[Any, dict]:
  if not _here["setup"]:
    worker_setup(silent, env)
    _here["setup"] = True
  if work not in _here["opened"]: _here["opened"][work] = work.open()
  np.seterr(all="ignore")  # numpy's error state belongs to the thread: set for every task
  return _here["opened"][work]


def open_task(work: Work, silent: bool, env: dict[str, str] | None) -> Ready:
  """A worker's first task: set up, open the work; its pid and what did not open."""
  return Ready(os.getpid(), _opened(work, silent, env)[1])


class _Outbox:
  """A job task's messages: kept until a Phase, then put on the queue with it (a put returns once the scheduler has it)."""
  def __init__(self, queue: str, token: int):
    import distributed
    self.queue, self.token, self.pending = distributed.Queue(queue, client=distributed.get_client()), token, []

  def send(self, msg: Phase | Answer) -> None:
    self.pending.append(msg)
    if isinstance(msg, Phase):
      self.queue.put(pickle.dumps((self.token, self.pending)))
      self.pending = []


def job_task(queue: str, token: int, job: Any, work: Work, silent: bool, env: dict[str, str] | None) -> list:
  """Runs one job (the work's `run`) in this worker process; returns the messages after its last phase."""
  state, _ = _opened(work, silent, env)
  out = _Outbox(queue, token)
  try: work.run(job, state, out.send)
  except Exception: out.pending.append(Failure(traceback.format_exc()))
  out.queue.close()  # this task's hold on the queue (the driver's keeps it)
  return out.pending


async def kill_task() -> None:
  """Run on a hung worker's event loop (client.run): SIGKILL to its process group (itself and its compilers)."""
  if os.getpgrp() == os.getpid(): os.killpg(os.getpid(), signal.SIGKILL)
  os.kill(os.getpid(), signal.SIGKILL)


# ***** the driver side *****

@dataclass
class _Slot:
  """One worker process of the cluster, as the driver sees it: local.Pool's _Worker over the engine."""
  address: str
  nanny: str | None
  instance: str          # what tells this process from a later one at the same address (its local directory)
  future: Any = None     # the task in flight: open_task until ready, then the job's
  ready: bool = False
  pid: int | None = None
  token: int | None = None
  job: Any = None
  phase: Phase | None = None
  phase_start: float = 0.0
  answered: set = field(default_factory=set)
  errors: dict = field(default_factory=dict)
  ended: float = 0.0     # when it was found dead or killed


def death_reason(lines: list, pid: int | None) -> str | None:
  """How worker process `pid` ended, from its nanny's log lines [(level, text), ...]: "crash:SIGSEGV", "crash:exit 3";
  None while the log does not say."""
  if pid is None: return None
  pattern = re.compile(rf"Worker process {pid} (?:was killed by signal (\d+)|exited with status (\d+))")
  for _, text in lines:
    m = pattern.search(text)
    if m is not None: return signal_name(-int(m[1]) if m[1] is not None else int(m[2]))
  return None


class ClusterPool:
  """Jobs on a Dask cluster (see the module docstring); `poll` returns local.Pool's events: Answered, Finished,
  WorkerFailed, Lost. `where`: "local" (a LocalCluster of n worker processes, one thread each), "local:N", a scheduler
  address (tcp://host:8786) or a scheduler file."""
  def __init__(self, where: str, work: Work, n: int = 1, limits: dict[str, float] | None = None,
               silent: bool = False, env: dict[str, str] | None = None):
    self.dist = dist = _distributed()
    self.work, self.limits, self.env = work, {**getattr(work, "limits", {}), **(limits or {})}, env
    self.cluster, self.client, self.queue = None, None, None
    self.slots: dict[str, _Slot] = {}
    self.dying: list[_Slot] = []             # dead, waiting for their nanny's log to say how they ended
    self.killed: list[_Slot] = []            # killed for a hang, until they leave the cluster
    self.gone: set[tuple[str, str]] = set()  # (address, instance) of processes lost or killed: never used again
    self.tokens, self.by_token = itertools.count(), {}
    self.failed_starts, self.open_errors, self.checked = 0, {}, 0.0
    self.uid = uuid.uuid4().hex[:12]
    try:
      self.where, self.silent, wanted = self._connect(dist, where, n, silent)
      self.queue = dist.Queue(f"refimpl-work-{self.uid}", client=self.client)
      try: self.client.wait_for_workers(wanted, timeout=CONNECT_S)
      except (TimeoutError, asyncio.TimeoutError):
        raise ClusterError(f"no Dask worker joined the scheduler at {self.where} within {CONNECT_S:.0f} s") from None
      self._refresh([])
    except BaseException:
      self.close()
      raise

  def _connect(self, dist, where: str, n: int, silent: bool) -> tuple[str, bool, int]:
    """Starts or reaches the cluster: (its scheduler's address, whether workers are silent, how many to wait for)."""
    if where == "local" or where.startswith("local:"):
      if where != "local":
        n = int(where[6:]) if where[6:].isdigit() else 0
        if n < 1: raise ClusterError(f"--cluster local:N needs a positive number of workers, got {where!r}")
      import dask
      with dask.config.set({"distributed.scheduler.allowed-failures": 0}):  # a task whose worker dies is not rerun
        self.cluster = dist.LocalCluster(n_workers=max(1, n), threads_per_worker=1, processes=True, memory_limit=0,
                                         dashboard_address=None, scheduler_port=0,  # no dashboard; its HTTP server
                                         scheduler_kwargs={"dashboard_address": ":0"},  # on a free port
                                         silence_logs=logging.CRITICAL if silent else logging.WARNING)
      self.client = dist.Client(self.cluster)
      return self.cluster.scheduler_address, silent, max(1, n)
    try:
      if Path(where).is_file(): self.client = dist.Client(scheduler_file=where, timeout=CONNECT_S)
      else: self.client = dist.Client(where, timeout=CONNECT_S)
    except (OSError, TimeoutError, asyncio.TimeoutError, ValueError) as e:
      raise ClusterError(f"cannot reach the Dask scheduler at {where} (an address tcp://host:port, or a scheduler "
                         f"file): {e}") from None
    return where, False, 1  # a cluster's workers keep their stderr: it is its operator's log

  # ***** local.Pool's interface *****
  def size(self) -> int: return len(self.slots)
  def idle(self) -> list[_Slot]: return [s for s in self.slots.values() if s.ready and s.job is None]
  def busy(self) -> int: return sum(s.job is not None for s in self.slots.values())

  def submit(self, s: _Slot, job: Any) -> None:
    token = next(self.tokens)
    s.job, s.token, s.phase, s.answered = job, token, None, set()
    self.by_token[token] = s
    s.future = self.client.submit(job_task, self.queue.name, token, job, self.work, self.silent, self.env,
                                  key=f"refimpl-job-{self.uid}-{token}", workers=[s.address],
                                  allow_other_workers=False, pure=False)

  def poll(self, timeout: float = 0.1) -> list:
    events: list = []
    inflight = [s.future for s in self.slots.values() if s.future is not None]
    if not self._receive(events) and not any(f.done() for f in inflight):  # wait for a task's end, or a while
      try:
        if inflight: self.dist.wait(inflight, timeout=timeout, return_when="FIRST_COMPLETED")
        else: time.sleep(timeout)
      except (TimeoutError, asyncio.TimeoutError): pass
      self._receive(events)
    now = time.perf_counter()
    if now - self.checked >= REFRESH_S: self._refresh(events)
    for s in list(self.slots.values()):
      if s.future is not None and s.future.done():
        self._receive(events)  # a task's puts reach the scheduler before its end does: take them first
        if s.ready: self._ended(s, events)
        else: self._opened(s, events)
      elif s.job is not None and s.phase is not None:
        limit = self.limits.get(s.phase.what, 0)
        if limit and now - s.phase_start > limit: self._kill(s, events)
    return events

  def wait_ready(self, timeout: float = 60.0) -> None:
    """Blocks until every worker of the cluster has opened its work."""
    end = time.perf_counter() + timeout
    while not self.slots or not all(s.ready for s in self.slots.values()):
      if time.perf_counter() > end: raise TimeoutError("the cluster's workers did not start in time")
      self.poll(0.05)

  def close(self) -> None:
    """Cancels what is in flight, kills the workers still running a job (a hang would keep them), and stops the local
    cluster; an external cluster's workers are left to it (their nannies replace the killed ones)."""
    busy = [s for s in self.slots.values() if s.job is not None]
    if self.client is not None:
      futures = [s.future for s in self.slots.values() if s.future is not None]
      try:
        if futures: self.client.cancel(futures)
        for s in busy: self.client.run(kill_task, workers=[s.address], wait=False)
      except Exception: pass  # (closing: the cluster may be gone already)
    self.slots.clear()
    for closing in (self.queue, self.client, self.cluster):
      if closing is None: continue
      try: closing.close()
      except Exception: pass
    self.queue = self.client = self.cluster = None

  def __enter__(self) -> ClusterPool: return self
  def __exit__(self, *exc) -> None: self.close()

  # ***** events *****
  def _receive(self, events: list) -> bool:
    """Takes every message waiting on the queue (without waiting) and handles it; whether there was any."""
    got = self.queue.get(batch=True)
    for data in got:
      token, msgs = pickle.loads(data)
      s = self.by_token.get(token)
      if s is not None: self._handle(s, msgs, events)
    return bool(got)

  def _handle(self, s: _Slot, msgs: list, events: list) -> None:
    for msg in msgs:
      if isinstance(msg, Phase): s.phase, s.phase_start = msg, time.perf_counter()
      elif isinstance(msg, Answer):
        s.answered.add((msg.result.key, msg.result.backend))
        events.append(Answered(s.job, msg.result))
      elif isinstance(msg, Failure): events.append(WorkerFailed(s.job, msg.text))

  @staticmethod
  def _fetch(f) -> Any:
    """A finished task's result; None when it cannot be fetched (its worker went meanwhile)."""
    try: return f.result(timeout=CONNECT_S)
    except Exception: return None

  def _opened(self, s: _Slot, events: list) -> None:
    ready = self._fetch(s.future) if s.future.status == "finished" else None
    if ready is not None:
      s.future.release()
      s.future, s.ready, s.pid, s.errors, self.failed_starts = None, True, ready.pid, ready.errors, 0
      self.open_errors.update(ready.errors)
      return
    exc = s.future.exception() if s.future.status == "error" else None
    if exc is not None and type(exc).__name__ != "KilledWorker":
      raise ClusterError(f"the Dask worker {s.address} cannot run refimpl's jobs (every worker needs this refimpl "
                         f"and its backends installed): {type(exc).__name__}: {exc}")
    self._lost(s, events)

  def _ended(self, s: _Slot, events: list) -> None:
    f, job = s.future, s.job
    msgs = self._fetch(f) if f.status == "finished" else None
    if msgs is not None:
      self._handle(s, msgs, events)
      f.release()
    elif f.status == "error" and type(f.exception()).__name__ == "KilledWorker": return self._lost(s, events)
    elif f.status == "error": events.append(WorkerFailed(job, f"{type(f.exception()).__name__}: {f.exception()}"))
    else:  # cancelled by someone else, or its result lost: nothing says what happened, so no finding (after_loss
      s.phase = None  # reruns what was not answered)
      return self._lost(s, events)
    self.by_token.pop(s.token, None)
    s.future, s.token, s.job, s.phase = None, None, None, None
    events.append(Finished(job))

  def _retire(self, s: _Slot) -> None:
    """s leaves the pool: its task is dropped and its process never used again."""
    self.slots.pop(s.address, None)
    self.gone.add((s.address, s.instance))
    self.by_token.pop(s.token, None)
    if s.future is not None and not s.future.done(): s.future.cancel()
    s.ended = time.perf_counter()

  def _lost(self, s: _Slot, events: list) -> None:
    """s died: retired now; its Lost event comes once its nanny has said how it ended (see _refresh)."""
    self._retire(s)
    if not s.ready:
      self.failed_starts += 1
      if self.failed_starts > 3:
        raise ClusterError(f"the cluster's workers keep dying before they are ready ({s.address}); their nannies' "
                           f"logs say why ({DEBUG_HINT})")
    if s.job is not None: self.dying.append(s)

  def _kill(self, s: _Slot, events: list) -> None:
    """s overran its phase's limit: killed through the engine, reported Lost "hang"."""
    self._retire(s)
    try: self.client.run(kill_task, workers=[s.address], wait=False)
    except Exception: pass  # (it may have died meanwhile; _refresh restarts it if it stays)
    self.killed.append(s)
    events.append(Lost(s.job, (s.phase.key, s.phase.backend, s.phase.what), "hang", set(s.answered)))

  def _workers(self) -> dict[str, dict]:
    """The scheduler's workers now, {address: identity}, asked of the scheduler itself: Client.scheduler_info() returns
    a cache that the client's own periodic refresh replaces with one listing no worker at all, so a reading taken
    between the two would retire every live worker (the campaign then waited forever for a worker)."""
    return self.client.sync(self.client.scheduler.identity, n_workers=-1)["workers"]

  def _nanny_says(self, s: _Slot) -> str | None:
    """How s's process ended, from its nanny's log (death_reason), asked of the nanny itself: the line is there as soon
    as the nanny has seen its process exit, before any new worker is up. None while the log does not say it."""
    if s.nanny is None: return None
    async def logs() -> list:
      async with self.dist.rpc(s.nanny, timeout=NANNY_S, connection_args=self.client.connection_args) as nanny:
        return await nanny.get_logs()
    try: return death_reason(self.client.sync(logs), s.pid)
    except Exception: return None  # (its nanny went away, or does not answer yet: nothing says how it ended)

  def _refresh(self, events: list) -> None:
    """Reads the scheduler's workers: slots whose process left are lost, new processes join (their open_task goes out),
    dead ones whose nanny has said how they ended are reported, killed ones that stay are restarted by the engine."""
    self.checked = time.perf_counter()
    workers = self._workers()
    present = {(a, str(w.get("local_directory"))) for a, w in workers.items()}
    left = [s for s in self.slots.values() if (s.address, s.instance) not in present]
    if left: self._receive(events)
    for s in left: self._lost(s, events)
    for a, w in sorted(workers.items()):
      ident = (a, str(w.get("local_directory")))
      if a in self.slots or ident in self.gone or w.get("status", "running") != "running": continue
      s = self.slots[a] = _Slot(a, w.get("nanny"), ident[1])
      s.future = self.client.submit(open_task, self.work, self.silent, self.env, key=f"refimpl-open-{self.uid}-{a}-"
                                    f"{next(self.tokens)}", workers=[a], allow_other_workers=False, pure=False)
    for s in list(self.dying):
      reason = self._nanny_says(s)
      if reason is None and s.nanny is not None and self.checked - s.ended < REPLACE_S: continue
      self.dying.remove(s)
      if reason is None: reason = signal_name(None)
      culprit = None if s.phase is None else (s.phase.key, s.phase.backend, s.phase.what)
      events.append(Lost(s.job, culprit, reason, set(s.answered)))
    for s in list(self.killed):
      if (s.address, s.instance) not in present: self.killed.remove(s)
      elif self.checked - s.ended > KILL_S:
        self.killed.remove(s)
        self.client.restart_workers([s.address], timeout=KILL_S, raise_for_error=False)
