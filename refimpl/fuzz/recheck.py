"""Every new finding re-checked in a fresh process before it counts.

A campaign's worker runs thousands of programs in one process, so a finding could come from state an earlier program
left behind (in refimpl, in a device's caches) rather than from the case itself. Each new finding is therefore
replayed alone, in a new interpreter (`python -m refimpl.fuzz replay FILE`, argument list, no shell), while the
campaign goes on:

  confirmed       the replay fails too: the finding stands (it is what a user replaying the file will see)
  not reproduced  the replay passes: the finding is not counted and moves to <out>/unconfirmed/, named as a bug in
                  refimpl's harness or in the device's state handling, never as the backend breaking the spec
  not re-checked  the replay could not run (a timeout, a crash of the replay itself): the finding stands, and says so

The replay reads a copy of the case as found (<out>/.recheck/), so a reduction rewriting the finding meanwhile does not
race it."""
from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from refimpl.fuzz.finding import Finding, remove_finding, save_finding

CONFIRMED, NOT_REPRODUCED, NOT_RECHECKED = "confirmed", "not reproduced", "not re-checked"
LIMIT_S = 300.0  # a replay that takes longer than this is abandoned (its finding stands, "not re-checked")


@dataclass
class Pending:
  key: object          # the caller's handle of the finding
  path: Path           # the copy the replay reads
  proc: subprocess.Popen
  started: float


@dataclass
class Verdict:
  key: object
  outcome: str         # CONFIRMED, NOT_REPRODUCED or NOT_RECHECKED
  output: str          # the replay's last lines


class Rechecks:
  """The replays in flight for one campaign's --out folder."""
  def __init__(self, out: Path, timeout: float):
    self.folder = Path(out) / ".recheck"
    self.timeout = timeout
    self.pending: list[Pending] = []

  def start(self, key: object, finding: Finding, stem: str) -> None:
    """Replays `finding` (as it is now) in a fresh process."""
    self.folder.mkdir(parents=True, exist_ok=True)
    path = save_finding(self.folder, finding, stem)
    command = [sys.executable, "-m", "refimpl.fuzz", "replay", str(path), "--timeout", str(self.timeout)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
    self.pending.append(Pending(key, path, proc, time.monotonic()))

  def poll(self) -> list[Verdict]:
    """The verdicts of the replays that have ended (or run out of time) since the last poll."""
    done = []
    for p in list(self.pending):
      late = time.monotonic() - p.started > LIMIT_S
      if p.proc.poll() is None and not late: continue
      done.append(self._verdict(p, late))
      self.pending.remove(p)
    return done

  def wait(self) -> list[Verdict]:
    """Every remaining verdict (each replay gets what is left of its LIMIT_S)."""
    out = []
    for p in self.pending:
      try: p.proc.wait(max(0.0, LIMIT_S - (time.monotonic() - p.started)))
      except subprocess.TimeoutExpired: pass
      out.append(self._verdict(p, p.proc.poll() is None))
    self.pending = []
    self._tidy()
    return out

  def abandon(self) -> list[Verdict]:
    """Stops every replay still running (a campaign interrupted by Ctrl-C): their findings stand, "not re-checked"."""
    out = []
    for p in self.pending:
      p.proc.kill()
      p.proc.wait()
      if p.proc.stdout is not None: p.proc.stdout.close()
      remove_finding(p.path)
      out.append(Verdict(p.key, NOT_RECHECKED, "the campaign was interrupted before the replay ended"))
    self.pending = []
    self._tidy()
    return out

  def _tidy(self) -> None:
    """The copies' folder goes once no replay reads it (nothing of the campaign's is left in it)."""
    if self.folder.is_dir() and not any(self.folder.iterdir()): self.folder.rmdir()

  def _verdict(self, p: Pending, late: bool) -> Verdict:
    if late:
      p.proc.kill()
      p.proc.wait()
    text = p.proc.stdout.read() if p.proc.stdout is not None else ""
    if p.proc.stdout is not None: p.proc.stdout.close()
    remove_finding(p.path)
    tail = "\n".join(text.strip().splitlines()[-3:])
    if late: return Verdict(p.key, NOT_RECHECKED, f"the replay took over {LIMIT_S:.0f} s")
    if p.proc.returncode == 1: return Verdict(p.key, CONFIRMED, tail)
    if p.proc.returncode == 0 and "passes" in text: return Verdict(p.key, NOT_REPRODUCED, tail)
    return Verdict(p.key, NOT_RECHECKED, f"the replay exited with status {p.proc.returncode}: {tail}")
