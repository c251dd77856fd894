"""What a fuzz campaign counted, and how it is shown: per backend its runs, unsupported programs, findings and worker
time by phase; the elements compared, the coverage of op x dtype pairs and conversions, the findings with their files;
the status line while it runs and the summary at its end (`render`)."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from refimpl.fuzz.config import Config
from refimpl.fuzz.expect import Tally
from refimpl.fuzz.isolate import AS_BASELINE, DISCARDED, FINDING, UNSUPPORTED_STATUS, Result
from refimpl.fuzz.recheck import CONFIRMED
from refimpl.fuzz.record import Record

SHARED_PHASES = ("generate", "emulate")                                  # once per program, whatever the backends
BACKEND_PHASES = ("render", "compile", "launch", "run", "compare")        # once per program and backend
PHASES = SHARED_PHASES + BACKEND_PHASES


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

  # ***** counting *****
  def count_program(self, r: Result, at: float) -> None:
    """The first result of a program (`at` seconds into the campaign): one more program, its shared phases' time."""
    self.programs += 1
    self.last_result = at
    for p in SHARED_PHASES: self.gen_times[p] += r.times.get(p, 0.0)

  def count_run(self, r: Result) -> bool:
    """One backend's result on a program (or the program discarded); True when it is a finding."""
    if r.backend is None and r.status == DISCARDED:
      self.discarded[r.detail] += 1
      return False
    b = self.backends.get(r.backend)
    if r.status == UNSUPPORTED_STATUS and b is not None:
      b.unsupported += 1
      return False
    if r.status == AS_BASELINE and b is not None: b.as_baseline += 1
    if b is not None:
      b.runs += 1
      for p in BACKEND_PHASES: b.times[p] += r.times.get(p, 0.0)
      if r.tally is not None: self.tally.add(r.tally)
    self.coverage |= r.coverage
    if r.status == FINDING and b is not None: b.findings += 1
    return r.status == FINDING

  def count_candidate(self, r: Result) -> None:
    """A reduction candidate's result: its worker time, on its backend."""
    b = self.backends.get(r.backend)
    if b is not None:
      b.reduce_s += sum(r.times.values())
      b.reduce_runs += 1

  def uncount(self, backend: str | None, occurrences: int) -> None:
    """Occurrences of a finding on `backend` that do not count after all (a fresh-process replay passed)."""
    b = self.backends.get(backend)
    if b is not None: b.findings -= occurrences

  def unconfirm(self, rec: Record) -> None:
    """A finding its fresh-process replay did not reproduce: its occurrences do not count, it is listed apart."""
    f = rec.finding
    self.occurrences -= f.seen
    self.unconfirmed.append(rec)
    self.uncount(f.signature.backend, f.seen)

  # ***** showing *****
  def status(self, elapsed: float, new: int, reducing: int) -> str:
    """The progress line: programs and runs per second, findings (new signatures, reductions running), coverage."""
    runs = " ".join(f"{n} {b.runs / max(elapsed, 1e-9):.1f}/s" for n, b in self.backends.items())
    alu, conv = self.keys
    cov = f"cov {sum(k in self.coverage for k in alu)}/{len(alu)} ops {sum(k in self.coverage for k in conv)}/{len(conv)} conv"
    return (f"fuzz {elapsed:6.1f}s  {self.programs} programs ({self.programs / max(elapsed, 1e-9):.1f}/s)  {runs}  "
            f"findings {new}" + (f" ({reducing} reducing)" if reducing else "") + f"  {cov}")

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
