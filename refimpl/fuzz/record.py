"""The findings record of a campaign: one Record per signature, the finding files in --out kept in step with it.

A finding is first filed under its pre-signature (backend, op, dtypes, kind), saved at once, unreduced. Findings already
in --out are loaded first, so a bug on file is counted, not saved again. When its reduction ends the final signature
is computed from the reduced case (`settle`: the op of the wrong element, or the last computing op of a crashing
program) and the file renamed to it, or dropped as a duplicate when another finding already has that signature; the
pre-signature then aliases the final one. A finding that a fresh-process replay does not reproduce (recheck.py) is
dismissed: it moves to <out>/unconfirmed/ and its signatures count no more."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from refimpl.fuzz.case import last_op
from refimpl.fuzz.corpus import Finding, Signature, load_finding, remove_finding, save_finding
from refimpl.fuzz.isolate import EMULATOR


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


def signature(backend: str, op: str, kind: str) -> Signature:
  """A finding's signature. The emulator's own failures are filed by the op it failed on, without dtypes: one emulator
  bug tends to surface through many dtypes."""
  sig = Signature.of(backend, op, kind)
  return Signature(sig.backend, sig.op, "-", sig.kind) if backend == EMULATOR else sig


class Findings:
  """The record: signature -> Record (those of --out loaded first, CaseFormatError naming a bad file), the aliases from
  a pre-signature to its final one, and the signatures a fresh-process replay dismissed."""
  def __init__(self, out: Path):
    self.out = Path(out)
    self.known: dict[Signature, Record] = {}
    self.alias: dict[Signature, Signature] = {}
    self.dismissed: set[Signature] = set()  # signatures a fresh-process replay did not reproduce (dismiss)
    for path in sorted(self.out.glob("*.json")) if self.out.is_dir() else []:
      f = load_finding(path)  # CaseFormatError names the file
      self.known[f.signature] = Record(f, path, new=False)

  def is_dismissed(self, pre: Signature) -> bool:
    """Whether the finding a pre-signature stands for was dismissed (its first case passed alone in a fresh process)."""
    return self.alias.get(pre, pre) in self.dismissed

  def seen_again(self, pre: Signature) -> bool:
    """Whether a finding with this pre-signature is on record already (it is then counted as seen once more)."""
    rec = self.known.get(self.alias.get(pre, pre))
    if rec is not None: rec.finding.seen += 1
    return rec is not None

  def file(self, f: Finding, op: str, reducing: bool) -> Record:
    """A new finding, saved at once under its pre-signature."""
    rec = Record(f, save_finding(self.out, f), op, reducing=reducing)
    self.known[f.signature] = rec
    return rec

  def save(self, rec: Record) -> None:
    """Writes the record's finding over its file (a smaller case, a count)."""
    save_finding(self.out, rec.finding, rec.path.stem)

  def settle(self, rec: Record) -> str | None:
    """Files a reduced finding under its final signature: renamed, or dropped as a duplicate of one on record. Returns
    what happened, for the progress line (None when the signature stays)."""
    f = rec.finding
    op = rec.op if f.kind.startswith(("wrong-value", "emulator-error")) and rec.op != "-" else last_op(f.case.program)
    final = signature(f.signature.backend, op, f.kind)
    if final == f.signature: return None
    pre = f.signature
    self.alias[pre] = final
    if final in self.known and self.known[final] is not rec:  # the reduced case is a bug already on file
      self.known[final].finding.seen += f.seen
      self.known.pop(pre, None)
      remove_finding(rec.path)
      return f"{pre} reduced to a duplicate of {final}"
    old = rec.path
    f.signature = final
    rec.path = save_finding(self.out, f)
    if rec.path != old: remove_finding(old)
    self.known.pop(pre, None)
    self.known[final] = rec
    return f"reduced {pre} to {len(f.case.program.uops)} uops in {rec.reduce_s:.0f} s: {final} -> {rec.path}"

  def dismiss(self, rec: Record, output: str) -> None:
    """A finding its fresh-process replay did not reproduce: moved to <out>/unconfirmed/, its signatures dismissed."""
    f = rec.finding
    f.detail = (f"{f.detail}\n\nNOT REPRODUCED when replayed alone in a fresh process ({output}): state left by "
                "earlier programs in the campaign's worker, a bug in refimpl's harness or the device's state handling")
    remove_finding(rec.path)
    rec.path = save_finding(self.out / "unconfirmed", f, rec.path.stem)
    self.dismissed |= {sig for sig, r in self.known.items() if r is rec} | {f.signature}
    self.known = {sig: r for sig, r in self.known.items() if r is not rec}

  def save_counts(self) -> None:
    """The files of this run's findings learn how often each was seen."""
    for rec in self.known.values():
      if rec.new and rec.path.exists(): self.save(rec)

  def new_count(self) -> int: return len([r for r in self.known.values() if r.new])

  def records(self) -> list[Record]: return list(self.known.values())
