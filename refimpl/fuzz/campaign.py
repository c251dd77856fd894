"""A fuzz campaign's scheduling: generate, run everywhere, compare, reduce, deduplicate, save.

The main process only schedules: workers (isolate.Pool) generate each program from (seed, index), run the emulator
and every backend, and compare. The scheduler hands idle workers reduction batches first (reductions.py: one at a time
per finding), then the next `batch` program indices of its shard (shard K of N takes indices K-1, K-1+N, K-1+2N, ...:
disjoint and deterministic, so machines or batch-scheduler tasks can split one campaign). A lost worker's culprit is a
finding and what it left is rerun (isolate.after_loss). What a campaign counts and shows is summary.py's and
refimpl.workers.progress's; its settings are config.py's.

Findings. A finding gets a pre-signature (backend, op, dtypes, kind) where op is the op that produced the wrong element
(wrong values) or "-" (crashes, hangs, compiler failures). One already known (this run or a file already in --out) is
counted, not saved again. A new one is saved at once, unreduced (so an interruption loses nothing), replayed in a
fresh process (recheck.py), then reduced in the background (reductions.py); when its reduction ends it is filed under
its final signature (record.py).

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
from typing import NamedTuple

from refimpl.device import Device, DeviceUnavailable
from refimpl.fuzz.case import Case
from refimpl.fuzz.config import Config
from refimpl.fuzz.corpus import Finding
from refimpl.fuzz.execute import BackendRef, open_backends
from refimpl.fuzz.generate import ALL_DTYPES, Profile, all_keys, make_program
from refimpl.fuzz.isolate import CAMPAIGN_ENV, EMULATOR, FuzzWork, Item, Job, Result, after_loss
from refimpl.fuzz.recheck import NOT_REPRODUCED, Rechecks, Verdict
from refimpl.fuzz.record import Findings, signature
from refimpl.fuzz.reductions import Reductions
from refimpl.fuzz.summary import BackendStats, Summary
from refimpl.workers.cluster import open_pool
from refimpl.workers.messages import Answered, Finished, Lost, WorkerFailed
from refimpl.workers.progress import Progress

DEBUG = bool(os.environ.get("REFIMPL_FUZZ_DEBUG"))

class ProgramKey(NamedTuple):
  """The key of a campaign's generated program: its index."""
  index: int


def _brief(ev) -> str:
  if isinstance(ev, Lost): return f"lost job {ev.job.id if ev.job else None} culprit {ev.culprit} {ev.reason}"
  if isinstance(ev, Answered):
    r = ev.result
    return f"result job {ev.job.id} {r.key} {r.backend} {r.status} {r.kind}"
  return f"{type(ev).__name__} job {ev.job.id if ev.job else None}"


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
    self.rechecks = Rechecks(cfg.out, cfg.timeout) if cfg.recheck else None
    self.findings = Findings(cfg.out)
    self.fuzz_queue: list[Job] = []
    self.inflight: dict[int, str] = {}
    self.job_ids = itertools.count()
    k, n = cfg.shard
    self.indices = itertools.count(k - 1, n) if cfg.iterations is None else iter(range(k - 1, cfg.iterations, n))
    self.exhausted = False
    self.counted: set[int] = set()  # indices of running fuzz jobs already counted (one count per program, not per backend)
    self.interrupted = False
    self.start = time.perf_counter()
    self.progress = Progress(cfg.quiet, None if cfg.iterations is None else len(range(k - 1, cfg.iterations, n)))
    self.reductions = Reductions(self.findings, self.job_ids, cfg.reduce_time, cfg.reduce_candidates,
                                 self.summary.count_candidate, self.progress.message)

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
    job = self.reductions.next_job()
    if job is not None: self.inflight[job.id] = "reduce"
    return job

  def run(self) -> Summary:
    if not self.names:
      self.summary.how = "no backend to fuzz"
      self.summary.errors.append(f"no backend opens: {self.summary.unavailable}")
      return self.summary
    old = None
    if threading.current_thread() is threading.main_thread():
      old = signal.signal(signal.SIGINT, self._sigint)
    start = self.start = time.perf_counter()
    self.how, pool = "every program run", None
    try:
      pool = self.open_pool()
      self.loop(pool)
    finally:
      self.close(pool)
      if old is not None: signal.signal(signal.SIGINT, old)
      self.summary.elapsed = time.perf_counter() - start
      self.summary.how = self.how
      self.summary.findings = self.findings.records()
    return self.summary

  def open_pool(self):
    """The workers (local processes, or a Dask cluster's), each with every backend and the baseline open."""
    limits = {"run": self.cfg.timeout, "compile": self.cfg.compile_timeout, "probe": 2 * self.cfg.compile_timeout}
    refs = self.refs + ([self.baseline] if self.baseline is not None else [])
    return open_pool(FuzzWork(tuple(refs)), self.cfg.jobs, limits, not DEBUG, CAMPAIGN_ENV, self.cfg.cluster)

  def loop(self, pool) -> None:
    """Feeds the workers and handles what they report until the campaign ends (the module docstring's Ending)."""
    deadline = self.start + self.cfg.time if self.cfg.time else None
    grace_end, stopping = None, False
    while not self.interrupted:
      now = time.perf_counter()
      if deadline is not None and now >= deadline and not stopping:
        stopping, self.how = True, "stopped by the time limit"
        grace_end = now + max(5.0, 0.2 * self.cfg.time)
      fuzz_left = bool(self.fuzz_queue) or not self.exhausted or any(v == "fuzz" for v in self.inflight.values())
      if not stopping and not fuzz_left: stopping = True
      self.reductions.expire(now, grace_end)
      graced = grace_end is not None and now >= grace_end
      if stopping and not self.reductions.running and (graced or not self.fuzz_busy()): break  # running batches finish
      self.feed(pool, stopping)
      for ev in pool.poll(0.05):
        if DEBUG: print(f"[{time.perf_counter() - self.start:7.2f}] {_brief(ev)}", file=sys.stderr)
        self.handle(ev)
      for verdict in self.rechecks.poll() if self.rechecks is not None else []: self.on_recheck(verdict)
      self.show(time.perf_counter() - self.start)
    if self.interrupted: self.how = "interrupted (Ctrl-C)"

  def feed(self, pool, stopping: bool) -> None:
    """Hands each idle worker a job: a reduction batch first, else (until the campaign stops) the next programs."""
    for w in pool.idle():
      # while programs are still being made, reductions leave one worker to them (a crash reduction kills workers)
      reserve = not stopping and pool.size() > 1 and pool.busy() - self.fuzz_busy() >= pool.size() - 1
      job = None if reserve else self.next_reduction_job()
      if job is None and not stopping:
        job = self.next_fuzz_job()
        if job is not None: self.inflight[job.id] = "fuzz"
        if job is not None and self.summary.started is None: self.summary.started = time.perf_counter() - self.start
      if job is None: break
      if DEBUG: print(f"[{time.perf_counter() - self.start:7.2f}] submit job {job.id} {self.inflight.get(job.id)} "
                      f"{[it.key for it in job.items][:3]}", file=sys.stderr)
      pool.submit(w, job)

  def close(self, pool) -> None:
    """The end, however it came: reductions keep their best case, the workers stop, the fresh-process replays end,
    the finding files get their counts."""
    self.reductions.finish_all()
    if pool is not None: pool.close()
    self.end_rechecks()
    self.findings.save_counts()
    self.progress.close()

  def end_rechecks(self) -> None:
    """Interrupted, the replays still running are abandoned; else the campaign waits for them."""
    if self.rechecks is None: return
    if self.interrupted:
      for verdict in self.rechecks.abandon(): self.on_recheck(verdict)
      return
    if self.rechecks.pending: self.progress.message(f"re-checking {len(self.rechecks.pending)} finding(s) in fresh processes")
    for verdict in self.rechecks.wait(): self.on_recheck(verdict)

  def _sigint(self, signum, frame) -> None:
    self.interrupted = True
    signal.signal(signal.SIGINT, signal.default_int_handler)  # a second Ctrl-C aborts

  def show(self, elapsed: float) -> None:
    text = self.summary.status(elapsed, self.findings.new_count(), self.reductions.unfinished())
    self.progress.update(self.summary.programs, text)

  # ***** events *****
  def handle(self, ev) -> None:
    if isinstance(ev, Lost): return self.on_lost(ev)
    job = ev.job
    kind = self.inflight.get(job.id)
    if isinstance(ev, WorkerFailed):
      self.summary.errors.append(ev.text)
      self.progress.message(f"internal error in a fuzz worker:\n{ev.text}")
    elif isinstance(ev, Answered):
      if kind == "fuzz": self.on_fuzz_result(ev.result)
      elif kind == "reduce": self.reductions.on_answer(job, ev.result)
    elif isinstance(ev, Finished):
      self.inflight.pop(job.id, None)
      if kind == "fuzz": self.counted.difference_update(it.key.index for it in job.items)  # keep the set small
      if kind == "reduce": self.reductions.on_finished(job)

  def on_lost(self, ev: Lost) -> None:
    """A worker was lost: its culprit's result counts, and what its job left runs again."""
    kind = self.inflight.pop(ev.job.id, None) if ev.job is not None else None
    found, again = after_loss(ev)
    if kind == "fuzz":
      if found is not None: self.on_fuzz_result(found)
      for j in again:
        j.id = next(self.job_ids)
        self.fuzz_queue.insert(0, j)
    elif kind == "reduce": self.reductions.on_lost(ev, found, again)

  def on_fuzz_result(self, r: Result) -> None:
    i = r.key.index
    if i not in self.counted:
      self.counted.add(i)
      self.summary.count_program(r, time.perf_counter() - self.start)
    if self.summary.count_run(r): self.new_finding(r, {"seed": self.cfg.seed, "index": i})

  def new_finding(self, r: Result, found: dict) -> None:
    """A program's failure: counted; filed, replayed in a fresh process and reduced when its signature is new."""
    pre = signature(r.backend, r.op or "-", r.kind)
    if self.findings.is_dismissed(pre):  # its first case passed alone in a fresh process: not counted
      self.summary.uncount(r.backend, 1)
      return
    self.summary.occurrences += 1
    if self.findings.seen_again(pre): return
    case = r.case if r.case is not None else self.remake(found)
    ref = self.by_name.get(r.backend, BackendRef(r.backend))
    f = Finding(pre, case, ref, r.detail, found, False, len(case.program.uops))
    rec = self.findings.file(f, r.op or "-", self.cfg.reduce)
    self.progress.message(f"found {pre}: {r.detail.splitlines()[0][:160] if r.detail else ''} -> {rec.path}")
    if self.rechecks is not None: self.rechecks.start(rec, f, rec.path.stem)
    if self.cfg.reduce: self.reductions.add(rec, r)

  def remake(self, found: dict) -> Case:
    """The case of a generated program the worker died on, made again (it is a function of seed and index)."""
    gen = make_program(found["seed"], found["index"], self.profile)
    return Case(gen.program, gen.inputs(), gen.vals)

  def on_recheck(self, verdict: Verdict) -> None:
    """A fresh-process replay ended (recheck.py): a finding it does not reproduce stops counting and moves to
    <out>/unconfirmed/."""
    rec = verdict.key
    rec.recheck = verdict.outcome
    if verdict.outcome != NOT_REPRODUCED: return
    self.reductions.drop(rec)
    self.findings.dismiss(rec, verdict.output)
    self.summary.unconfirm(rec)
    self.progress.message(f"{rec.finding.signature} not reproduced in a fresh process: not counted, moved to {rec.path}")


def run_campaign(cfg: Config) -> Summary:
  """Runs a campaign (see the module docstring) and returns its summary (print summary.render())."""
  return Campaign(cfg).run()


__all__ = ["Campaign", "Config", "Summary", "run_campaign"]
