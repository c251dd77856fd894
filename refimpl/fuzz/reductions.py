"""Driving a campaign's reductions: each new finding reduced in the background (the reducer is reduce.py's).

Reductions are served in the order their findings were found, one batch of candidates per worker job, the job ending at
the first candidate that still fails (Job.stop). A batch is decided as soon as its verdicts up to the first failing
candidate are in (`decide`); each smaller case replaces the finding's file at once. A reduction's budget is
--reduce-candidates candidates and, where given, --reduce-time seconds counted from its first batch (so a finding
waiting behind others keeps its whole budget). When no smaller case fails the same way, a wrong value's final case runs
once more, probed, to name the op of the wrong element; then the finding settles under its final signature
(record.Findings.settle)."""
from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from typing import NamedTuple

from refimpl.fuzz.case import Case
from refimpl.fuzz.isolate import EMULATOR, Item, Job, Result
from refimpl.fuzz.record import Findings, Record
from refimpl.fuzz.reduce import Reducer, same_failure
from refimpl.workers.messages import Lost


class CandidateKey(NamedTuple):
  """The key of a reduction candidate: the reduction, its batch and the candidate's place in it."""
  reduction: int
  batch: int
  candidate: int


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


class Reductions:
  """The reductions running, in the order their findings were found. Job ids come from the campaign's counter; each
  candidate's result is counted (`count`) and what a reduction settles to is reported (`message`)."""
  def __init__(self, findings: Findings, job_ids: Iterator[int], budget: float | None, max_candidates: int,
               count: Callable[[Result], None], message: Callable[[str], None]):
    self.findings, self.job_ids, self.budget, self.max_candidates = findings, job_ids, budget, max_candidates
    self.count, self.message = count, message
    self.running: list[Reduction] = []
    self.rids = itertools.count()

  def add(self, rec: Record, original: Result) -> None:
    """Starts reducing a new finding (`original`: the result that found it)."""
    red = Reduction(next(self.rids), rec, original, self.budget, self.max_candidates)
    self.running.append(red)
    self.start_batch(red)

  def next_job(self) -> Job | None:
    """The first waiting batch of the oldest reduction that has one (its clock starts), or None."""
    for red in self.running:
      if red.waiting:
        job = red.waiting.pop(0)
        red.start(time.perf_counter())
        return job
    return None

  def of(self, job: Job) -> Reduction | None:
    rid = job.items[0].key.reduction
    return next((r for r in self.running if r.rid == rid and not r.done), None)

  def expire(self, now: float, grace_end: float | None) -> None:
    """Ends the reductions whose time budget, or the campaign's grace, is spent (they keep their best case)."""
    for red in list(self.running):
      if now >= red.deadline or (grace_end is not None and now >= grace_end): self.finish(red)

  def finish_all(self) -> None:
    for red in list(self.running): self.finish(red)

  def drop(self, rec: Record) -> None:
    """Ends the reduction of a finding that no longer counts."""
    for red in [r for r in self.running if r.rec is rec]: self.finish(red)

  def unfinished(self) -> int: return sum(not r.done for r in self.running)

  # ***** events of the reductions' jobs *****
  def on_answer(self, job: Job, r: Result) -> None:
    red = self.of(job)
    if red is not None: self.on_candidate(red, r)

  def on_finished(self, job: Job) -> None:
    """A job ended: the candidates it did not answer count as not failing."""
    red = self.of(job)
    if red is None or job.id not in red.jobs: return
    for k in red.jobs.pop(job.id):
      if red.verdicts[k] is None: red.verdicts[k] = False
    if red.probing: self.finish(red)
    else: self.decide(red)

  def on_lost(self, ev: Lost, found: Result | None, again: list[Job]) -> None:
    """A job's worker was lost (isolate.after_loss: its culprit's result, the jobs rerunning what it left)."""
    red = self.of(ev.job)
    if red is None: return
    red.jobs.pop(ev.job.id, None)
    if found is not None: self.on_candidate(red, found)
    if red.done or red.batch_no != ev.job.items[0].key.batch: return
    for j in again:
      j.id = next(self.job_ids)
      red.jobs[j.id] = {it.key.candidate for it in j.items}
      red.waiting.append(j)
    if not again:  # nothing left to rerun: what was not answered counts as not failing
      red.verdicts = [False if x is None else x for x in red.verdicts]
      if red.probing: self.finish(red)
      else: self.decide(red)

  # ***** one reduction's steps *****
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
    self.count(r)
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
      self.findings.save(red.rec)
    self.start_batch(red)

  def finish(self, red: Reduction) -> None:
    if red.done: return
    red.done = True
    self.running.remove(red)
    rec = red.rec
    rec.reducing = False
    if red.started is not None: rec.reduce_s = time.perf_counter() - red.started
    rec.candidates = red.reducer.tried
    said = self.findings.settle(rec)
    if said is not None: self.message(said)
