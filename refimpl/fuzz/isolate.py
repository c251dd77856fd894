"""Worker processes: every backend compile and run happens in one, so a crash or a hang is a finding, never the end.

A `Pool` holds `n` workers started with multiprocessing's spawn context (a fresh interpreter: no state inherited from
the campaign, devices opened there; they ignore SIGINT, so Ctrl-C reaches the campaign alone). A worker takes one `Job`
at a time: a list of `Item`s, each a generated program (seed, index) or a given `Case`, and the backends to run it on.
For each item it generates and prepares (emulator) the case, then for each backend it builds every item in one batch
(execute.build) and runs them one by one, sending a `Result` per (item, backend) as soon as it is known; a job with
`stop` (a reduction batch) ends at its first result that fails that way. A pool may give its workers environment
variables (unless already set): a campaign's turn PoCL's kernel cache off (CAMPAIGN_ENV), since every fuzz kernel is
new; a replay's keep it, since corpus kernels come back every run.

Before each risky step the worker says what it is doing (a *phase*: generate, compile, run). So when a worker dies
(a signal: SIGSEGV, SIGFPE, SIGABRT...) or overruns its phase's time limit (it is killed), the pool knows which item,
backend and phase did it, reports a `Lost` event with that culprit and the (item, backend) pairs already answered,
and starts a replacement worker. What to rerun is the caller's decision (campaign.py).
"""
from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import signal
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from refimpl.errors import UndefinedBehavior
from refimpl.fuzz.case import Case, Prepared, culprit, op_key, prepare, probe
from refimpl.fuzz.execute import UNSUPPORTED, BackendRef, build, open_backends, run
from refimpl.fuzz.expect import Tally
from refimpl.fuzz.generate import Profile, coverage_keys, make_program
from refimpl.testing.compare import same_value

OK, FINDING, UNSUPPORTED_STATUS, DISCARDED = "ok", "finding", "unsupported", "discarded"
AS_BASELINE = "as-baseline"  # a failure the job's baseline device shares on the same case (shared_with_baseline)
EMULATOR = "PYTHON"
REFIMPL_ERROR = "refimpl-error"  # refimpl contradicting itself on a backend's run: a bug in refimpl, not in the backend
DEFAULT_LIMITS = {"generate": 120.0, "compile": 60.0, "run": 10.0, "probe": 120.0}
# set in a campaign's workers unless already set: PoCL's kernel cache would keep every fuzz kernel (all new) on disk
CAMPAIGN_ENV = {"POCL_KERNEL_CACHE": "0"}


@dataclass
class Item:
  """One case to check: generated (seed, index, with the job's profile) or given (case)."""
  key: Any
  backends: tuple[str, ...]
  seed: int | None = None
  index: int | None = None
  case: Case | None = None


@dataclass
class Job:
  id: int
  items: list[Item]
  profile: Profile | None = None
  cache: bool = False
  attempts: int = 0
  probe: bool = False    # name a wrong value's culprit by running case.probe (fuzz jobs and final reduction checks)
  stop: tuple[str, str] | None = None  # (backend, kind): end the job at the first finding of that kind (reductions: the
                                       # first candidate that still fails decides the batch, later ones are stale)
  baseline: str | None = None          # a finding this device shares on the same case is AS_BASELINE, not a finding


@dataclass
class Result:
  """What one (item, backend) came to. backend None: about the case itself (discarded before any backend ran it);
  backend EMULATOR with status FINDING: the emulator failed on it."""
  key: Any
  backend: str | None
  status: str
  kind: str = ""
  detail: str = ""
  op: str = ""
  case: Case | None = None
  coverage: frozenset = frozenset()
  times: dict[str, float] = field(default_factory=dict)
  tally: Tally | None = None


# ***** messages: a worker's, over its pipe, and the pool's events (what `Pool.poll` returns) *****

@dataclass(frozen=True)
class Ready:
  """Worker: its backends are open (`errors`: those that failed to, and why)."""
  pid: int
  errors: dict[str, str]

@dataclass(frozen=True)
class Phase:
  """Worker: it starts a risky step (generate, compile, run, probe) of item `key` (None: a whole batch) on `backend`."""
  key: Any
  backend: str | None
  what: str

@dataclass(frozen=True)
class Answer:
  """Worker: the Result of one (item, backend)."""
  result: Result

@dataclass(frozen=True)
class Failure:
  """Worker: an exception in its own code (the traceback); the job ends."""
  text: str

@dataclass(frozen=True)
class JobDone:
  """Worker: its job is over."""

@dataclass(frozen=True)
class Answered:
  """Event: a Result of `job` arrived."""
  job: Job
  result: Result

@dataclass(frozen=True)
class Finished:
  """Event: `job` is over."""
  job: Job

@dataclass(frozen=True)
class WorkerFailed:
  """Event: an exception in a worker's own code while it ran `job` (the traceback)."""
  job: Job | None
  text: str

@dataclass
class Lost:
  """Event: a worker died or was killed during `job`: `culprit` is (item key, backend, phase) of what it was doing."""
  job: Job | None
  culprit: tuple[Any, str | None, str] | None
  reason: str          # "crash:SIGSEGV", "crash:exit 3", "hang"
  answered: set        # (key, backend) pairs whose Result arrived


# ***** the worker side *****

def _prepare_item(job: Job, item: Item) -> tuple[Prepared, dict[str, float], frozenset]:
  t0 = time.perf_counter()
  if item.case is not None:
    p = prepare(item.case)
    return p, {"emulate": time.perf_counter() - t0}, frozenset()
  gen = make_program(item.seed, item.index, job.profile)
  case = Case(gen.program, gen.inputs(), gen.vals)
  t1 = time.perf_counter()
  if gen.error is not None: p = Prepared(case, error=gen.error, error_op=gen.error_op)
  elif gen.emulation is None: p = Prepared(case, discard="undefined behaviour left after the rewrites")
  else: p = prepare(case, gen.emulation)
  return p, {"generate": t1 - t0, "emulate": time.perf_counter() - t1}, frozenset(coverage_keys(case.program))


def run_job(job: Job, devices: dict, send: Callable[[Phase | Answer], None]) -> None:
  """Everything a worker does for one job (see the module docstring); `send` reports phases and results. A job with
  `stop` set ends at the first result that fails that way (the rest would be stale: see Job.stop)."""
  def report(r: Result) -> bool:
    send(Answer(r))
    return job.stop is not None and r.status == FINDING and (r.backend, r.kind) == job.stop
  ready: list[tuple[Item, Prepared, dict, frozenset]] = []
  for item in job.items:
    send(Phase(item.key, None, "generate"))
    prep, times, cov = _prepare_item(job, item)
    if prep.error is not None:
      if report(Result(item.key, EMULATOR, FINDING, "emulator-error", prep.error, prep.error_op, prep.case, cov, times)): return
    elif prep.discard is not None: report(Result(item.key, None, DISCARDED, "", prep.discard, times=times))
    else: ready.append((item, prep, times, cov))
  for name in dict.fromkeys(b for item, *_ in ready for b in item.backends):
    todo = [r for r in ready if name in r[0].backends]
    keys = [r[0].key for r in todo]
    built = build(devices[name], [r[1].case.program for r in todo], job.cache,
                  lambda i, what, name=name, keys=keys: send(Phase(None if i is None else keys[i], name, what)))
    baseline = devices.get(job.baseline) if job.baseline not in (None, name) else None
    for (item, prep, times, cov), b in zip(todo, built):
      if report(_run_built(job, devices[name], name, item, prep, {**times, "render": b.render_s, "compile": b.compile_s},
                           cov, b, send, baseline)): return


def shared_with_baseline(baseline, case: Case, kind: str, got: list[np.ndarray] | None) -> bool:
  """Whether the baseline device fails `case` as the device did: the same kind of build or launch failure, or, for a
  wrong value, the very same buffers (bits, every NaN one value). A crash or a hang kills the worker before this runs:
  those stay findings."""
  built = build(baseline, [case.program], cache=False)[0]
  if built.failure is not None: return built.failure == kind
  try: base = run(built.kernel, case.inputs, case.vals)
  except Exception: return kind == "runtime-error"
  return got is not None and kind.startswith("wrong-value") and all(same_value(g, h).all() for g, h in zip(got, base))


def _run_built(job: Job, device, name: str, item: Item, prep: Prepared, t: dict, cov: frozenset, b, send,
               baseline=None) -> Result:
  """The Result of one built item on backend `name`: its build failure, or its run compared with the emulator's; with a
  `baseline` device, a failure it shares is AS_BASELINE."""
  r, got = _check_built(job, device, name, item, prep, t, cov, b, send)
  if r.status != FINDING or baseline is None or r.kind == REFIMPL_ERROR: return r
  send(Phase(item.key, job.baseline, "baseline"))
  if not shared_with_baseline(baseline, prep.case, r.kind, got): return r
  return Result(item.key, name, AS_BASELINE, r.kind, r.detail, r.op, coverage=cov, times=t, tally=r.tally)


def _check_built(job: Job, device, name: str, item: Item, prep: Prepared, t: dict, cov: frozenset, b,
                 send) -> tuple[Result, list[np.ndarray] | None]:
  """_run_built's Result without the baseline, and the buffers the device computed (None when it did not run)."""
  case = prep.case
  if b.failure == UNSUPPORTED: return Result(item.key, name, UNSUPPORTED_STATUS, b.failure, b.detail, times=t), None
  if b.failure is not None: return Result(item.key, name, FINDING, b.failure, b.detail, "", case, cov, t), None
  send(Phase(item.key, name, "run"))
  t0 = time.perf_counter()
  try: got = run(b.kernel, case.inputs, case.vals)
  except UndefinedBehavior as e:  # refimpl's own check at launch (a TINYGRAD device's) contradicts the case's emulation
    why = f"refimpl's undefined-behaviour check at the launch on {name} contradicts its emulation of the same case: {e}"
    return Result(item.key, name, FINDING, REFIMPL_ERROR, why, "", case, cov, t), None
  except Exception as e:
    return Result(item.key, name, FINDING, "runtime-error", f"{type(e).__name__}: {e}", "", case, cov, t), None
  t1 = time.perf_counter()
  mismatch, tally = prep.expected.check(case.program, got)
  t.update(run_split(t1 - t0, b.kernel.last_time), compare=time.perf_counter() - t1)
  if mismatch is None: return Result(item.key, name, OK, coverage=cov, times=t, tally=tally), got
  op = culprit(case, mismatch)
  if job.probe:
    send(Phase(item.key, name, "probe"))
    op = probe_culprit(device, case) or op
  kind = f"wrong-value:{mismatch.rule.split()[0]}"
  return Result(item.key, name, FINDING, kind, mismatch.describe(), op, case, cov, t, tally), got


def run_split(wall: float, kernel_s: float | None) -> dict[str, float]:
  """A run's wall time as {"run": the kernel as the device timed it, "launch": the rest}: buffers, copies and (PoCL)
  the code generation an OpenCL driver may do at a kernel's first launch."""
  ks = min(wall, max(0.0, kernel_s)) if kernel_s is not None else wall
  return {"run": ks, "launch": wall - ks}


def probe_culprit(device, case: Case) -> str | None:
  """The first op whose value differs between the backend and the emulator, by running case.probe's instrumented
  program (None when the probe shows nothing: the bug may need the program exactly as it was)."""
  try:
    pc, probed = probe(case)
    prep = prepare(pc)
    if prep.expected is None: return None
    b = build(device, [pc.program], cache=False)[0]
    if b.kernel is None: return None
    m, _ = prep.expected.check(pc.program, run(b.kernel, pc.inputs, pc.vals))
  except Exception: return None
  if m is None or m.buffer >= len(probed): return None
  return op_key(case.program, probed[m.buffer])


def worker_setup(silent: bool = False, env: dict[str, str] | None = None) -> None:
  """What a process does before it runs jobs (a pool's worker, or a cluster's: refimpl/fuzz/cluster.py): its own process
  group, so killing the group also kills the compilers it started (clang, zig's children), and Ctrl-C at the terminal
  does not reach it; silent: stderr goes to /dev/null (toolchains print warnings there); warnings and numpy's floating
  point errors off; `env` set where not already set."""
  if os.getpgrp() != os.getpid(): os.setpgrp()
  if silent:
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    os.close(null)
  warnings.filterwarnings("ignore")
  np.seterr(all="ignore")
  for k, v in (env or {}).items(): os.environ.setdefault(k, v)


def worker_main(conn, refs: list[BackendRef], silent: bool = False, env: dict[str, str] | None = None) -> None:
  """The body of a worker process: set up (worker_setup; SIGINT ignored), open the backends, then run jobs until told to
  stop (None) or the pipe closes. silent: the worker's own errors come back as messages, stderr is not needed."""
  signal.signal(signal.SIGINT, signal.SIG_IGN)
  worker_setup(silent, env)
  devices, errors = open_backends(refs)
  conn.send(Ready(os.getpid(), errors))
  while True:
    try: job = conn.recv()
    except (EOFError, OSError): return
    if job is None: return
    try: run_job(job, devices, lambda msg: conn.send(msg))
    except Exception: conn.send(Failure(traceback.format_exc()))
    conn.send(JobDone())


# ***** the supervisor side *****

@dataclass
class _Worker:
  proc: Any
  conn: Any
  ready: bool = False
  job: Job | None = None
  phase: Phase | None = None
  phase_start: float = 0.0
  answered: set = field(default_factory=set)
  errors: dict = field(default_factory=dict)


def _kill_group(proc) -> None:
  """SIGKILL to the worker's process group (the worker and the compilers it started); nothing when it is gone."""
  if proc.pid is None: return
  try: os.killpg(proc.pid, signal.SIGKILL)
  except (ProcessLookupError, PermissionError): pass


def signal_name(exitcode: int | None) -> str:
  if exitcode is None: return "crash:killed"
  if exitcode < 0:
    try: return f"crash:{signal.Signals(-exitcode).name}"
    except ValueError: return f"crash:signal {-exitcode}"
  return f"crash:exit {exitcode}"


class Pool:
  """n spawned workers (see the module docstring). `poll` returns events: Answered, Finished, WorkerFailed, Lost."""
  def __init__(self, refs: list[BackendRef], n: int = 1, limits: dict[str, float] | None = None, silent: bool = False,
               env: dict[str, str] | None = None):
    self.refs, self.limits, self.silent, self.env = list(refs), {**DEFAULT_LIMITS, **(limits or {})}, silent, env
    self.ctx = multiprocessing.get_context("spawn")
    self.failed_starts = 0
    self.open_errors: dict[str, str] = {}
    self.workers = [self._spawn() for _ in range(max(1, n))]

  def _spawn(self) -> _Worker:
    parent, child = self.ctx.Pipe()
    proc = self.ctx.Process(target=worker_main, args=(child, self.refs, self.silent, self.env), daemon=True,
                            name="refimpl-fuzz-worker")
    proc.start()
    child.close()
    return _Worker(proc, parent)

  def size(self) -> int: return len(self.workers)
  def idle(self) -> list[_Worker]: return [w for w in self.workers if w.ready and w.job is None]
  def busy(self) -> int: return sum(w.job is not None for w in self.workers)

  def submit(self, w: _Worker, job: Job) -> None:
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
            raise RuntimeError(f"fuzz workers keep dying before they are ready ({reason}); "
                               "REFIMPL_FUZZ_DEBUG=1 shows their stderr")
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
    """Blocks until every worker has opened its backends."""
    end = time.perf_counter() + timeout
    while not all(w.ready for w in self.workers):
      if time.perf_counter() > end: raise TimeoutError("fuzz workers did not start in time")
      self.poll(0.05)


def after_loss(ev: Lost) -> tuple[Result | None, list[Job]]:
  """What a lost worker stands for: (the finding, or None; the jobs that redo what it left unanswered).
    died running item k on backend B     -> finding (k, B) "crash:SIG..." or "hang"; the rest is rerun
    died compiling item k on B           -> finding (k, B) "compile-crash:..." / "compile-hang"; the rest is rerun
    died compiling a batch on B          -> no finding yet: every unanswered item is rerun alone, to pin the culprit
    died generating/emulating item k     -> finding (k, EMULATOR) "emulator-crash:..." / "emulator-hang"
  A job that is lost three times with no culprit is dropped (rerunning it would loop)."""
  job = ev.job
  if job is None: return None, []
  found: Result | None = None
  skip: set = set(ev.answered)
  split = False
  if ev.culprit is not None:
    key, backend, what = ev.culprit
    items = {it.key: it for it in job.items}
    kind = ev.reason if what == "run" else f"{'compile' if what == 'compile' else 'emulator'}-{ev.reason}"
    if key is None: split = True
    elif what == "probe": skip.add((key, backend))  # the mismatch itself is lost with the worker; rare, not rerun
    elif what == "generate":
      found = Result(key, EMULATOR, FINDING, kind, f"the worker died while generating or emulating: {ev.reason}", "",
                     items[key].case)
      skip |= {(key, b) for b in items[key].backends}
    else:
      found = Result(key, backend, FINDING, kind, f"the worker died ({what}): {ev.reason}", "", items[key].case)
      skip.add((key, backend))
  elif job.attempts >= 2: return None, []
  rest = [Item(it.key, tuple(b for b in it.backends if (it.key, b) not in skip), it.seed, it.index, it.case) for it in job.items]
  rest = [it for it in rest if it.backends]
  attempts = job.attempts + (ev.culprit is None)
  again = [[it] for it in rest] if split else [rest] if rest else []
  return found, [Job(job.id, its, job.profile, job.cache, attempts, job.probe, job.stop, job.baseline) for its in again]


def run_items(pool: Pool, items: list[Item], profile: Profile | None = None, cache: bool = True,
              job_id: int = 0) -> dict[tuple, Result]:
  """Runs items to completion on a pool, rerunning what a lost worker left (see after_loss): {(key, backend): Result}.
  For replays, tests and small checks; the campaign schedules its jobs itself."""
  results: dict[tuple, Result] = {}
  pending = [Job(job_id, list(items), profile, cache)]
  while pending or pool.busy():
    for w in pool.idle():
      if pending: pool.submit(w, pending.pop())
    for ev in pool.poll(0.05):
      if isinstance(ev, Lost):
        found, again = after_loss(ev)
        if found is not None: results[(found.key, found.backend)] = found
        pending.extend(again)
      elif isinstance(ev, Answered): results[(ev.result.key, ev.result.backend)] = ev.result
      elif isinstance(ev, WorkerFailed): raise RuntimeError(f"fuzz worker error:\n{ev.text}")
  return results
