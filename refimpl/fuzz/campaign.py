"""A fuzz campaign: generate, run everywhere, compare, reduce, deduplicate, save; with progress and a summary.

The main process only schedules: workers (isolate.Pool) generate each program from (seed, index), run the emulator
and every backend, and compare. The scheduler hands idle workers reduction batches first (one at a time per finding),
then the next `batch` program indices of its shard (shard K of N takes indices K-1, K-1+N, K-1+2N, ...: disjoint and
deterministic, so machines or batch-scheduler tasks can split one campaign). A lost worker's culprit is a finding and
what it left is rerun (isolate.after_loss).

Findings. A finding gets a pre-signature (backend, op, dtypes, kind) where op is the op that produced the wrong element
(wrong values) or "-" (crashes, hangs, compiler failures). One already known (this run or a file already in --out) is
counted, not saved again. A new one is saved at once, unreduced (so an interruption loses nothing), then reduced in
the background, one batch of candidates per worker job, the job ending at the first candidate that still fails (Job.stop),
reductions served in the order they were found; each smaller case replaces the file atomically. A reduction's budget is
--reduce-candidates candidates (a count: where it ends is the same on every machine) and, where given, --reduce-time
seconds counted from its first batch. When the reduction ends (no smaller case fails the same way, or a budget is spent,
or the campaign ends) the final signature is computed from the reduced case (the op of the
wrong element, or the last computing op of a crashing program) and the file renamed to it, or dropped as a duplicate
when another finding already has that signature.

Ending. --iterations N: after programs 0..N-1 (this shard's share) and their reductions. --time T: at T seconds no
new programs start; the batches already running and the reductions get a grace of max(5 s, T/5), then reductions keep
their best case. Ctrl-C: at once (a
second Ctrl-C aborts); findings are on disk already and the summary is printed. Exit status 1 when anything was found.
"""
from __future__ import annotations

import itertools
import os
import signal
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from refimpl.device import Device, DeviceUnavailable
from refimpl.fuzz.case import Case, last_op
from refimpl.fuzz.cluster import open_pool
from refimpl.fuzz.corpus import CaseFormatError, Finding, Signature, load_finding, remove_finding, save_finding
from refimpl.fuzz.execute import BackendRef, open_backends
from refimpl.fuzz.expect import Tally
from refimpl.fuzz.generate import ALL_DTYPES, Profile, all_keys, make_program
from refimpl.fuzz.isolate import (
  AS_BASELINE,
  CAMPAIGN_ENV,
  DISCARDED,
  EMULATOR,
  FINDING,
  UNSUPPORTED_STATUS,
  Answered,
  Finished,
  Item,
  Job,
  Lost,
  Result,
  WorkerFailed,
  after_loss,
)
from refimpl.fuzz.recheck import CONFIRMED, NOT_REPRODUCED, Rechecks, Verdict
from refimpl.fuzz.reduce import MAX_CANDIDATES, Reducer, same_failure

SHARED_PHASES = ("generate", "emulate")                                  # once per program, whatever the backends
BACKEND_PHASES = ("render", "compile", "launch", "run", "compare")        # once per program and backend
PHASES = SHARED_PHASES + BACKEND_PHASES
DEBUG = bool(os.environ.get("REFIMPL_FUZZ_DEBUG"))

class ProgramKey(NamedTuple):
  """The key of a campaign's generated program: its index."""
  index: int

class CandidateKey(NamedTuple):
  """The key of a reduction candidate: the reduction, its batch and the candidate's place in it."""
  reduction: int
  batch: int
  candidate: int


def _brief(ev) -> str:
  if isinstance(ev, Lost): return f"lost job {ev.job.id if ev.job else None} culprit {ev.culprit} {ev.reason}"
  if isinstance(ev, Answered):
    r = ev.result
    return f"result job {ev.job.id} {r.key} {r.backend} {r.status} {r.kind}"
  return f"{type(ev).__name__} job {ev.job.id if ev.job else None}"


@dataclass
class Config:
  seed: int = 0
  iterations: int | None = None
  time: float | None = None
  backends: list[str] | None = None      # names or "module:Class"; None: every device that opens, but PYTHON
  jobs: int = 2
  out: Path = Path("fuzz-findings")
  shard: tuple[int, int] = (1, 1)         # K of N, 1-based
  quiet: bool = False
  batch: int = 16
  timeout: float = 10.0                   # seconds one kernel run may take before it is a hang
  compile_timeout: float = 60.0           # seconds one compile (a batch, or one kernel) may take before it is a hang
  reduce: bool = True
  reduce_time: float | None = 60.0        # seconds of reduction per finding at most (None: no clock limit)
  reduce_candidates: int = MAX_CANDIDATES # candidates one reduction may propose at most (the same on every machine)
  max_steps: int = 24
  mode: str = "mix"                       # generation mode: random, tinygrad, corpus, or mix (generate.MODES, MIX)
  cluster: str | None = None              # a Dask cluster (cluster.py: local, local:N, address, scheduler file)
  recheck: bool = True                    # replay each new finding in a fresh process before it counts (recheck.py)
  baseline: str | None = None             # a device the backends derive from: failures it shares on a case don't count


@dataclass
class BackendStats:
  runs: int = 0
  unsupported: int = 0
  as_baseline: int = 0                              # failures the --baseline device shares on the same case
  findings: int = 0
  times: Counter = field(default_factory=Counter)   # seconds of worker time by phase (BACKEND_PHASES) over the runs
  reduce_s: float = 0.0                             # seconds of worker time spent on reduction candidates
  reduce_runs: int = 0                              # reduction candidates run


@dataclass
class Record:
  finding: Finding
  path: Path
  op: str = "-"
  reducing: bool = False
  new: bool = True
  reduce_s: float = 0.0     # seconds from the reduction's first batch to its end
  candidates: int = 0       # reduction candidates proposed
  recheck: str = ""         # the fresh-process replay's verdict (recheck.py), "" until it ends


class Reduction:
  """One finding being reduced: the reducer, the batch in flight and its verdicts (see reduce.py). Its time budget
  starts when its first batch goes to a worker (`start`), so a finding waiting behind others keeps its whole budget."""
  def __init__(self, rid: int, rec: Record, original: Result, budget: float | None, max_candidates: int):
    self.rid, self.rec, self.original, self.budget = rid, rec, original, budget
    self.deadline, self.started = float("inf"), None
    self.reducer = Reducer(rec.finding.case, max_candidates=max_candidates)
    self.batch_no, self.verdicts, self.results = 0, [], []
    self.jobs: dict[int, set] = {}    # job id -> the candidate numbers it carries
    self.waiting: list[Job] = []
    self.done = False
    self.probing = False               # the reduction is over; the best case runs once more, probed (case.probe)

  def start(self, now: float) -> None:
    if self.started is not None: return
    self.started = now
    if self.budget is not None: self.deadline = now + self.budget

  def items(self, cases: list[Case], ks: list[int] | None = None) -> list[Item]:
    b = () if self.original.backend == EMULATOR else (self.original.backend,)
    keys = ks if ks is not None else range(len(cases))
    return [Item(CandidateKey(self.rid, self.batch_no, k), b, case=cases[k]) for k in keys]


@dataclass
class Summary:
  config: Config
  elapsed: float = 0.0
  how: str = ""
  programs: int = 0
  discarded: Counter = field(default_factory=Counter)
  backends: dict[str, BackendStats] = field(default_factory=dict)
  gen_times: Counter = field(default_factory=Counter)
  tally: Tally = field(default_factory=Tally)
  coverage: set = field(default_factory=set)
  keys: tuple[list[str], list[str]] = ([], [])
  findings: list[Record] = field(default_factory=list)
  unconfirmed: list[Record] = field(default_factory=list)  # passed when replayed alone (recheck.py): not counted
  occurrences: int = 0
  errors: list[str] = field(default_factory=list)
  unavailable: dict[str, str] = field(default_factory=dict)
  started: float | None = None        # seconds into the campaign when the first program went to a (started) worker
  last_result: float = 0.0            # ... and when the last program's result came

  @property
  def steady_rate(self) -> float | None:
    """Programs per second from the first job given to a worker to the last program result: the rate without the
    workers' start-up (imports, devices opened) and the final reductions; None before any result."""
    if self.started is None or self.last_result <= self.started: return None
    return self.programs / (self.last_result - self.started)

  @property
  def exit_code(self) -> int: return 1 if self.occurrences else 0

  def render_times(self) -> list[str]:
    """The time split: ms of worker time per program for the shared phases, then per backend and run, its phases; the
    whole campaign's split in percent; and per backend the time its reductions took."""
    tot = Counter(self.gen_times)
    for b in self.backends.values(): tot.update(b.times)
    whole = sum(tot[p] for p in PHASES)
    if whole <= 0: return []
    n, w = max(self.programs, 1), self.name_width()
    out = ["worker time per program (ms): " + "  ".join(f"{p} {1e3 * self.gen_times[p] / n:.1f}" for p in SHARED_PHASES) +
           " (shared by the backends)",
           f"  {'backend':<{w}} " + "".join(f"{p:>9}" for p in BACKEND_PHASES) + f"{'total':>9}  reduce s/candidates"]
    for name, b in self.backends.items():
      r = max(b.runs, 1)
      red = f"{b.reduce_s:.1f}s/{b.reduce_runs}" if b.reduce_runs else "-"
      out.append(f"  {name:<{w}} " + "".join(f"{1e3 * b.times[p] / r:>9.1f}" for p in BACKEND_PHASES) +
                 f"{1e3 * sum(b.times[p] for p in BACKEND_PHASES) / r:>9.1f}  {red}")
    out.append("worker time: " + "  ".join(f"{p} {100 * tot[p] / whole:.0f}%" for p in PHASES) +
               f"  ({1e3 * whole / n:.1f} ms per program; launch: buffers, copies and a driver's code generation at "
               "first launch)")
    return out

  def name_width(self) -> int:
    """The backend column's width: the longest name (a porter's module:Class is long), at least 15."""
    return max([15, *map(len, self.backends), *map(len, self.unavailable)])

  def render(self) -> str:
    c, el, w = self.config, max(self.elapsed, 1e-9), self.name_width() + 1
    out = [f"refimpl.fuzz: seed {c.seed}, shard {c.shard[0]}/{c.shard[1]}, {self.elapsed:.1f} s, {self.how}"]
    disc = sum(self.discarded.values())
    steady = "" if self.steady_rate is None else f"; {self.steady_rate:.1f}/s once the workers had started"
    out.append(f"programs: {self.programs} ({self.programs / el:.1f}/s{steady}), {disc} not run natively "
               f"(undefined behaviour left after the rewrites)" + ("" if not disc else ": " + "; ".join(
                 f"{n} {why}" for why, n in self.discarded.most_common(3))))
    shared = f"{'as baseline':>13}" if c.baseline else ""
    out.append(f"  {'backend':<{w}}{'runs':>8}{'prog/s':>9}{'unsupported':>13}{'findings':>10}{shared}")
    for name, b in self.backends.items():
      shared = f"{b.as_baseline:>13}" if c.baseline else ""
      out.append(f"  {name:<{w}}{b.runs:>8}{b.runs / el:>9.1f}{b.unsupported:>13}{b.findings:>10}{shared}")
    if c.baseline: out.append(f"  (as baseline: failures {c.baseline} shows on the same case, the same bits: not counted)")
    for name, why in self.unavailable.items(): out.append(f"  {name:<{w}} not available: {why}")
    out.extend(self.render_times())
    t = self.tally
    n = t.exact + t.loose + t.skipped
    if n: out.append(f"elements compared: {100 * t.exact / n:.1f}% bit-exact, {100 * t.loose / n:.1f}% by a loose rule "
                     f"(NaN, tolerance, allowed set, WMMA bound, monotone bracket), {100 * t.skipped / n:.1f}% not "
                     "compared (undefined or loose)")
    alu, conv = self.keys
    for what, keys in (("ALU op x dtype", alu), ("conversions (src -> dst)", conv)):
      if not keys: continue
      hit = [k for k in keys if k in self.coverage]
      miss = [k for k in keys if k not in self.coverage]
      out.append(f"coverage: {what} {len(hit)}/{len(keys)} ({100 * len(hit) / len(keys):.0f}%)" +
                 (f"; missing: {', '.join(miss[:8])}{' ...' if len(miss) > 8 else ''}" if miss else ""))
    new = [r for r in self.findings if r.new]
    out.append(f"findings: {len(new)} new signature(s), {self.occurrences} occurrence(s)" +
               (f"; {len(self.findings) - len(new)} known before" if len(self.findings) > len(new) else ""))
    for r in self.findings:
      f = r.finding
      size = f"{len(f.case.program.uops)} uops" + (f", reduced from {f.uops_before} in {r.reduce_s:.0f} s ({r.candidates} "
                                                   "candidates)" if f.reduced else ", not reduced")
      rechecked = f", {r.recheck} in a fresh process" if r.recheck and r.recheck != CONFIRMED else ""
      out.append(f"  {f.signature}  ({size}, seen {f.seen}{rechecked})  {r.path}")
    if self.unconfirmed:
      out.append(f"not counted: {len(self.unconfirmed)} finding(s) that passed when replayed alone in a fresh process (a "
                 "bug in refimpl's harness or in the device's state handling, not the backend breaking the spec):")
      out += [f"  {r.finding.signature}  {r.path}" for r in self.unconfirmed]
    for e in self.errors[:5]: out.append(f"internal error: {e.strip().splitlines()[-1]}")
    out.append(f"exit status {self.exit_code}")
    return "\n".join(out)


class Progress:
  """tqdm when it is installed, else one status line on stderr (rewritten in place on a terminal, every 10 s otherwise)."""
  def __init__(self, quiet: bool, total: int | None):
    self.quiet, self.last, self.tty = quiet, 0.0, sys.stderr.isatty()
    self.bar = None
    if not quiet:
      try:
        from tqdm import tqdm  # optional: not a dependency
        self.bar = tqdm(total=total, unit="prog", file=sys.stderr, dynamic_ncols=True)
      except ImportError: pass
    self.shown = 0

  def update(self, programs: int, text: str) -> None:
    if self.quiet: return
    if self.bar is not None:
      self.bar.update(programs - self.shown)
      self.shown = programs
      self.bar.set_postfix_str(text, refresh=False)
      return
    now = time.perf_counter()
    if now - self.last < (0.25 if self.tty else 10.0): return
    self.last = now
    sys.stderr.write(f"\r\x1b[K{text}" if self.tty else f"{text}\n")
    sys.stderr.flush()

  def message(self, text: str) -> None:
    if self.quiet: return
    if self.bar is not None: self.bar.write(text, file=sys.stderr)
    else: sys.stderr.write(("\r\x1b[K" if self.tty else "") + text + "\n")

  def close(self) -> None:
    if self.bar is not None: self.bar.close()
    elif not self.quiet and self.tty: sys.stderr.write("\r\x1b[K")


def signature(backend: str, op: str, kind: str) -> Signature:
  """A finding's signature. The emulator's own failures are filed by the op it failed on, without dtypes: one emulator
  bug tends to surface through many dtypes."""
  sig = Signature.of(backend, op, kind)
  return Signature(sig.backend, sig.op, "-", sig.kind) if backend == EMULATOR else sig


def resolve_backends(names: list[str] | None) -> list[BackendRef]:
  """The backends of a campaign: the names given (or module:Class), else every device that opens here but PYTHON."""
  if names: return [r for r in (BackendRef.parse(n) for n in names) if r.name != EMULATOR]
  return [BackendRef(n) for n in Device.get_available_devices() if n != EMULATOR]


def profile_for(devices: dict, max_steps: int = 24, mode: str = "mix") -> Profile:
  """The dtypes every backend supports, and the generation mode. Programs may use BARRIER on every backend: those
  without workgroups run them lowered (refimpl.lower.lower_grid_to_loops splits the work-item loops at barriers)."""
  dts = tuple(d for d in ALL_DTYPES if all(dev.supports_dtype(d) for dev in devices.values()))
  return Profile(dts, True, max_steps, mode)


class Campaign:
  def __init__(self, cfg: Config):
    self.cfg = cfg
    self.refs = resolve_backends(cfg.backends)
    self.baseline = BackendRef.parse(cfg.baseline) if cfg.baseline else None
    devices, bad = open_backends(self.refs)
    if self.baseline is not None:
      why = open_backends([self.baseline])[1].get(self.baseline.name)
      if why is not None: raise DeviceUnavailable(f"--baseline {cfg.baseline} does not open: {why}")
    self.refs = [r for r in self.refs if r.name in devices]
    self.names = tuple(r.name for r in self.refs)
    self.by_name = {r.name: r for r in self.refs}
    self.profile = profile_for(devices, cfg.max_steps, cfg.mode)
    self.summary = Summary(cfg, backends={n: BackendStats() for n in self.names}, unavailable=bad,
                           keys=all_keys(self.profile))
    self.known: dict[Signature, Record] = {}
    self.rechecks = Rechecks(cfg.out, cfg.timeout) if cfg.recheck else None
    self.dismissed: set[Signature] = set()  # signatures a fresh-process replay did not reproduce (on_recheck)
    self.alias: dict[Signature, Signature] = {}
    for path in sorted(Path(cfg.out).glob("*.json")) if Path(cfg.out).is_dir() else []:
      f = load_finding(path)  # CaseFormatError names the file
      self.known[f.signature] = Record(f, path, new=False)
    self.reductions: list[Reduction] = []
    self.fuzz_queue: list[Job] = []
    self.inflight: dict[int, str] = {}
    self.job_ids = itertools.count()
    self.rids = itertools.count()
    k, n = cfg.shard
    self.indices = itertools.count(k - 1, n) if cfg.iterations is None else iter(range(k - 1, cfg.iterations, n))
    self.exhausted = False
    self.counted: set[int] = set()  # indices of running fuzz jobs already counted (one count per program, not per backend)
    self.interrupted = False
    self.start = time.perf_counter()
    self.progress = Progress(cfg.quiet, None if cfg.iterations is None else len(range(k - 1, cfg.iterations, n)))

  # ***** scheduling *****
  def next_fuzz_job(self) -> Job | None:
    if self.fuzz_queue: return self.fuzz_queue.pop(0)
    if self.exhausted: return None
    idx = list(itertools.islice(self.indices, self.cfg.batch))
    if len(idx) < self.cfg.batch: self.exhausted = True
    if not idx: return None
    items = [Item(ProgramKey(i), self.names, self.cfg.seed, i) for i in idx]
    baseline = self.baseline.name if self.baseline is not None else None
    return Job(next(self.job_ids), items, self.profile, probe=True, baseline=baseline)

  def fuzz_busy(self) -> int: return sum(v == "fuzz" for v in self.inflight.values())

  def next_reduction_job(self) -> Job | None:
    for red in self.reductions:
      if red.waiting:
        job = red.waiting.pop(0)
        self.inflight[job.id] = "reduce"
        red.start(time.perf_counter())
        return job
    return None

  def run(self) -> Summary:
    if not self.names:
      self.summary.how = "no backend to fuzz"
      self.summary.errors.append(f"no backend opens: {self.summary.unavailable}")
      return self.summary
    old = None
    if threading.current_thread() is threading.main_thread():
      old = signal.signal(signal.SIGINT, self._sigint)
    start = self.start = time.perf_counter()
    deadline = start + self.cfg.time if self.cfg.time else None
    grace_end, stopping, how = None, False, "every program run"
    limits = {"run": self.cfg.timeout, "compile": self.cfg.compile_timeout, "probe": 2 * self.cfg.compile_timeout}
    pool = None
    try:
      refs = self.refs + ([self.baseline] if self.baseline is not None else [])
      pool = open_pool(refs, self.cfg.jobs, limits, not DEBUG, CAMPAIGN_ENV, self.cfg.cluster)
      while not self.interrupted:
        now = time.perf_counter()
        if deadline is not None and now >= deadline and not stopping:
          stopping, how = True, "stopped by the time limit"
          grace_end = now + max(5.0, 0.2 * self.cfg.time)
        fuzz_left = bool(self.fuzz_queue) or not self.exhausted or any(v == "fuzz" for v in self.inflight.values())
        if not stopping and not fuzz_left: stopping = True
        for red in list(self.reductions):
          if now >= red.deadline or (grace_end is not None and now >= grace_end): self.finish(red)
        graced = grace_end is not None and now >= grace_end
        if stopping and not self.reductions and (graced or not self.fuzz_busy()): break  # running batches finish
        for w in pool.idle():
          # while programs are still being made, reductions leave one worker to them (a crash reduction kills workers)
          reserve = not stopping and pool.size() > 1 and pool.busy() - self.fuzz_busy() >= pool.size() - 1
          job = None if reserve else self.next_reduction_job()
          if job is None and not stopping:
            job = self.next_fuzz_job()
            if job is not None: self.inflight[job.id] = "fuzz"
            if job is not None and self.summary.started is None: self.summary.started = time.perf_counter() - start
          if job is None: break
          if DEBUG: print(f"[{time.perf_counter() - start:7.2f}] submit job {job.id} {self.inflight.get(job.id)} "
                          f"{[it.key for it in job.items][:3]}", file=sys.stderr)
          pool.submit(w, job)
        for ev in pool.poll(0.05):
          if DEBUG: print(f"[{time.perf_counter() - start:7.2f}] {_brief(ev)}", file=sys.stderr)
          self.handle(ev)
        for verdict in self.rechecks.poll() if self.rechecks is not None else []: self.on_recheck(verdict)
        self.show(time.perf_counter() - start)
      if self.interrupted: how = "interrupted (Ctrl-C)"
    finally:
      for red in list(self.reductions): self.finish(red)
      if pool is not None: pool.close()
      if self.rechecks is not None and self.interrupted:
        for verdict in self.rechecks.abandon(): self.on_recheck(verdict)
      elif self.rechecks is not None:
        if self.rechecks.pending: self.progress.message(f"re-checking {len(self.rechecks.pending)} finding(s) in fresh processes")
        for verdict in self.rechecks.wait(): self.on_recheck(verdict)
      for rec in self.known.values():  # the files of this run's findings learn how often each was seen
        if rec.new and rec.path.exists(): save_finding(self.cfg.out, rec.finding, rec.path.stem)
      self.progress.close()
      if old is not None: signal.signal(signal.SIGINT, old)
      self.summary.elapsed = time.perf_counter() - start
      self.summary.how = how
      self.summary.findings = list(self.known.values())
    return self.summary

  def _sigint(self, signum, frame) -> None:
    self.interrupted = True
    signal.signal(signal.SIGINT, signal.default_int_handler)  # a second Ctrl-C aborts

  def show(self, elapsed: float) -> None:
    s = self.summary
    runs = " ".join(f"{n} {b.runs / max(elapsed, 1e-9):.1f}/s" for n, b in s.backends.items())
    alu, conv = s.keys
    cov = f"cov {sum(k in s.coverage for k in alu)}/{len(alu)} ops {sum(k in s.coverage for k in conv)}/{len(conv)} conv"
    red = sum(not r.done for r in self.reductions)
    text = (f"fuzz {elapsed:6.1f}s  {s.programs} programs ({s.programs / max(elapsed, 1e-9):.1f}/s)  {runs}  "
            f"findings {len([r for r in self.known.values() if r.new])}" + (f" ({red} reducing)" if red else "") + f"  {cov}")
    self.progress.update(s.programs, text)

  # ***** events *****
  def handle(self, ev) -> None:
    if isinstance(ev, Lost):
      kind = self.inflight.pop(ev.job.id, None) if ev.job is not None else None
      found, again = after_loss(ev)
      if kind == "fuzz":
        if found is not None: self.on_fuzz_result(found)
        for j in again:
          j.id = next(self.job_ids)
          self.fuzz_queue.insert(0, j)
      elif kind == "reduce":
        red = self.reduction_of(ev.job)
        if red is not None:
          red.jobs.pop(ev.job.id, None)
          if found is not None: self.on_candidate(red, found)
          if not red.done and red.batch_no == ev.job.items[0].key.batch:
            for j in again:
              j.id = next(self.job_ids)
              red.jobs[j.id] = {it.key.candidate for it in j.items}
              red.waiting.append(j)
            if not again:  # nothing left to rerun: what was not answered counts as not failing
              red.verdicts = [False if x is None else x for x in red.verdicts]
              if red.probing: self.finish(red)
              else: self.decide(red)
      return
    job = ev.job
    kind = self.inflight.get(job.id)
    if isinstance(ev, WorkerFailed):
      self.summary.errors.append(ev.text)
      self.progress.message(f"internal error in a fuzz worker:\n{ev.text}")
    elif isinstance(ev, Answered):
      if kind == "fuzz": self.on_fuzz_result(ev.result)
      elif kind == "reduce" and (red := self.reduction_of(job)) is not None: self.on_candidate(red, ev.result)
    elif isinstance(ev, Finished):
      self.inflight.pop(job.id, None)
      if kind == "fuzz": self.counted.difference_update(it.key.index for it in job.items)  # keep the set small
      if kind == "reduce" and (red := self.reduction_of(job)) is not None and job.id in red.jobs:
        for k in red.jobs.pop(job.id):
          if red.verdicts[k] is None: red.verdicts[k] = False
        if red.probing: self.finish(red)
        else: self.decide(red)

  def reduction_of(self, job: Job) -> Reduction | None:
    rid = job.items[0].key.reduction
    return next((r for r in self.reductions if r.rid == rid and not r.done), None)

  def on_fuzz_result(self, r: Result) -> None:
    s, i = self.summary, r.key.index
    if i not in self.counted:
      self.counted.add(i)
      s.programs += 1
      s.last_result = time.perf_counter() - self.start
      for p in ("generate", "emulate"): s.gen_times[p] += r.times.get(p, 0.0)
    if r.backend is None and r.status == DISCARDED:
      s.discarded[r.detail] += 1
      return
    b = s.backends.get(r.backend)
    if r.status == UNSUPPORTED_STATUS and b is not None:
      b.unsupported += 1
      return
    if r.status == AS_BASELINE and b is not None: b.as_baseline += 1
    if b is not None:
      b.runs += 1
      for p in BACKEND_PHASES: b.times[p] += r.times.get(p, 0.0)
      if r.tally is not None: s.tally.add(r.tally)
    s.coverage |= r.coverage
    if r.status == FINDING:
      if b is not None: b.findings += 1
      self.new_finding(r, {"seed": self.cfg.seed, "index": i})

  def new_finding(self, r: Result, found: dict) -> None:
    pre = signature(r.backend, r.op or "-", r.kind)
    if self.alias.get(pre, pre) in self.dismissed:  # its first case passed alone in a fresh process: not counted
      b = self.summary.backends.get(r.backend)
      if b is not None: b.findings -= 1
      return
    self.summary.occurrences += 1
    case = r.case
    if case is None:  # the worker died on a generated program: make it again (it is a function of seed and index)
      gen = make_program(found["seed"], found["index"], self.profile)
      case = Case(gen.program, gen.inputs(), gen.vals)
    sig = self.alias.get(pre, pre)
    if sig in self.known:
      self.known[sig].finding.seen += 1
      return
    ref = self.by_name.get(r.backend, BackendRef(r.backend))
    f = Finding(pre, case, ref, r.detail, found, False, len(case.program.uops))
    rec = Record(f, save_finding(self.cfg.out, f), r.op or "-", reducing=self.cfg.reduce)
    self.known[pre] = rec
    self.progress.message(f"found {pre}: {r.detail.splitlines()[0][:160] if r.detail else ''} -> {rec.path}")
    if self.rechecks is not None: self.rechecks.start(rec, f, rec.path.stem)
    if self.cfg.reduce:
      red = Reduction(next(self.rids), rec, r, self.cfg.reduce_time, self.cfg.reduce_candidates)
      self.reductions.append(red)
      self.start_batch(red)
    else: rec.reducing = False

  def on_recheck(self, verdict: Verdict) -> None:
    """A fresh-process replay ended (recheck.py): a finding it does not reproduce stops counting and moves to
    <out>/unconfirmed/."""
    rec: Record = verdict.key
    rec.recheck = verdict.outcome
    if verdict.outcome != NOT_REPRODUCED: return
    for red in [r for r in self.reductions if r.rec is rec]: self.finish(red)
    f = rec.finding
    f.detail = (f"{f.detail}\n\nNOT REPRODUCED when replayed alone in a fresh process ({verdict.output}): state left by "
                "earlier programs in the campaign's worker, a bug in refimpl's harness or the device's state handling")
    remove_finding(rec.path)
    rec.path = save_finding(Path(self.cfg.out) / "unconfirmed", f, rec.path.stem)
    self.dismissed |= {sig for sig, r in self.known.items() if r is rec} | {f.signature}
    self.known = {sig: r for sig, r in self.known.items() if r is not rec}
    self.summary.occurrences -= f.seen
    self.summary.unconfirmed.append(rec)
    b = self.summary.backends.get(f.signature.backend)
    if b is not None: b.findings -= f.seen
    self.progress.message(f"{f.signature} not reproduced in a fresh process: not counted, moved to {rec.path}")

  # ***** reductions *****
  def start_batch(self, red: Reduction) -> None:
    batch = red.reducer.request()
    if batch is None:  # reduced: name the culprit of a wrong value by probing the final case, then finish
      if red.probing or not red.rec.finding.kind.startswith("wrong-value") or red.original.backend == EMULATOR:
        return self.finish(red)
      red.probing, batch = True, [red.reducer.best]
    red.batch_no += 1
    red.verdicts, red.results = [None] * len(batch), [None] * len(batch)
    stop = None if red.probing else (red.original.backend, red.original.kind)  # a batch ends at its first failure
    job = Job(next(self.job_ids), red.items(batch), None, cache=False, probe=red.probing, stop=stop)  # all are new
    red.jobs = {job.id: set(range(len(batch)))}
    red.waiting = [job]

  def on_candidate(self, red: Reduction, r: Result) -> None:
    b = self.summary.backends.get(r.backend)
    if b is not None:
      b.reduce_s += sum(r.times.values())
      b.reduce_runs += 1
    if r.key.batch != red.batch_no: return
    k = r.key.candidate
    if red.verdicts[k] is not None: return
    red.verdicts[k], red.results[k] = same_failure(red.original, r), r
    if red.probing:
      if red.verdicts[k] and r.op: red.rec.op = r.op
      return self.finish(red)
    self.decide(red)

  def decide(self, red: Reduction) -> None:
    v = red.verdicts
    first = next((k for k, x in enumerate(v) if x), None)
    prefix = v if first is None else v[:first]
    if any(x is None for x in prefix): return
    best_before = red.reducer.best
    for j in list(red.jobs): red.jobs.pop(j)   # later results of this batch are stale
    red.waiting.clear()
    red.reducer.answer(list(v))
    if red.reducer.best is not best_before and first is not None:
      f = red.rec.finding
      f.case, f.reduced = red.reducer.best, True
      r = red.results[first]
      if r is not None:
        if r.op: red.rec.op = r.op
        if r.detail: f.detail = r.detail
      save_finding(self.cfg.out, f, red.rec.path.stem)
    self.start_batch(red)

  def finish(self, red: Reduction) -> None:
    if red.done: return
    red.done = True
    self.reductions.remove(red)
    rec, f = red.rec, red.rec.finding
    rec.reducing = False
    if red.started is not None: rec.reduce_s = time.perf_counter() - red.started
    rec.candidates = red.reducer.tried
    op = rec.op if f.kind.startswith(("wrong-value", "emulator-error")) and rec.op != "-" else last_op(f.case.program)
    final = signature(f.signature.backend, op, f.kind)
    if final == f.signature: return
    pre = f.signature
    self.alias[pre] = final
    if final in self.known and self.known[final] is not rec:  # the reduced case is a bug already on file
      self.known[final].finding.seen += f.seen
      self.known.pop(pre, None)
      remove_finding(rec.path)
      self.progress.message(f"{pre} reduced to a duplicate of {final}")
      return
    old = rec.path
    f.signature = final
    rec.path = save_finding(self.cfg.out, f)
    if rec.path != old: remove_finding(old)
    self.known.pop(pre, None)
    self.known[final] = rec
    self.progress.message(f"reduced {pre} to {len(f.case.program.uops)} uops in {rec.reduce_s:.0f} s: {final} -> {rec.path}")


def run_campaign(cfg: Config) -> Summary:
  """Runs a campaign (see the module docstring) and returns its summary (print summary.render())."""
  return Campaign(cfg).run()


__all__ = ["Campaign", "CaseFormatError", "Config", "Summary", "run_campaign"]
