"""The fuzz workers' jobs: every backend compile and run happens in a worker process (refimpl.workers), so a crash or
a hang is a finding, never the end.

A pool (refimpl.workers: local.Pool, or cluster.ClusterPool) runs `FuzzWork`: each worker opens the backends once and
takes one `Job` at a time: a list of `Item`s, each a generated program (seed, index) or a given `Case`, and the
backends to run it on. For each item it generates and prepares (emulator) the case, then for each backend it builds
every item in one batch (execute.build) and runs them one by one, sending a `Result` per (item, backend) as soon as it
is known; a job with `stop` (a reduction batch) ends at its first result that fails that way. A pool may give its
workers environment variables (unless already set): a campaign's turn PoCL's kernel cache off (CAMPAIGN_ENV), since
every fuzz kernel is new; a replay's keep it, since corpus kernels come back every run.

Before each risky step the worker says what it is doing (a *phase*: generate, compile, run, probe, each with its time
limit: DEFAULT_LIMITS). So when a worker dies (a signal: SIGSEGV, SIGFPE, SIGABRT...) or overruns its phase's limit,
the pool reports a `Lost` event with that culprit and the (item, backend) pairs already answered; `after_loss` says
what it stands for (a finding) and what to rerun.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from refimpl.errors import UndefinedBehavior
from refimpl.fuzz.case import Case, Prepared, culprit, op_key, prepare, probe
from refimpl.fuzz.execute import UNSUPPORTED, BackendRef, build, open_backends, run
from refimpl.fuzz.expect import Tally
from refimpl.fuzz.generate import Profile, coverage_keys, make_program
from refimpl.testing.compare import same_value
from refimpl.workers.local import Pool
from refimpl.workers.messages import Answer, Answered, Lost, Phase, WorkerFailed

OK, FINDING, UNSUPPORTED_STATUS, DISCARDED = "ok", "finding", "unsupported", "discarded"
AS_BASELINE = "as-baseline"  # a failure the job's baseline device shares on the same case (shared_with_baseline)
EMULATOR = "PYTHON"
REFIMPL_ERROR = "refimpl-error"  # refimpl contradicting itself on a backend's run: a bug in refimpl, not in the backend
DEFAULT_LIMITS = {"generate": 120.0, "compile": 60.0, "run": 10.0, "probe": 120.0}
# the most items run_items puts in one job, whose kernels each backend compiles in one call: a batch compile has one time
# limit (DEFAULT_LIMITS["compile"]) however many kernels it holds, and PoCL takes ~0.1-0.15 s of CPU per corpus kernel
# (more on a busy machine), so a job of 326 (a 652-case corpus on 2 workers) ran past it, was killed and rerun one
# kernel per compile. Jobs of this size stay far inside the limit, and an idle worker takes the next one.
JOB_ITEMS = 32
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


@dataclass(frozen=True)
class FuzzWork:
  """What a fuzz worker does (refimpl.workers.messages.Work): open the backends once, then run jobs (run_job)."""
  refs: tuple[BackendRef, ...]
  limits: ClassVar[dict[str, float]] = DEFAULT_LIMITS

  def open(self) -> tuple[dict, dict[str, str]]: return open_backends(list(self.refs))
  def run(self, job: Job, devices: dict, send: Callable[[Phase | Answer], None]) -> None: run_job(job, devices, send)


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
  The items go out as jobs of consecutive runs of them, one per worker but at most JOB_ITEMS each (see there), and an
  idle worker takes the next. For replays, tests and small checks; the campaign schedules its jobs itself."""
  results: dict[tuple, Result] = {}
  share = min(JOB_ITEMS, -(-len(items) // pool.size()) or 1)
  pending = [Job(job_id, items[k:k + share], profile, cache) for k in range(0, len(items), share)]
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
