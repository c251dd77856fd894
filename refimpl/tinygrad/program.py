"""A tinygrad kernel run on the reference, whichever tinygrad line: the program class of the REFIMPL devices
(refimpl.tinygrad.v0_10.reference for 0.10.1, refimpl.tinygrad.v0_14 for 0.14). Imports no tinygrad.

A launch runs like the PYTHON device's (refimpl.backends.ops_python.EmulatedProgram: the emulator, strict, in place on
the buffers); around it, the device's Session counts the run, and undefined behaviour is recorded there and raised as
KernelUndefinedBehavior naming the tinygrad kernel, with a reproducer saved first when the session says where
(`Session.save_undefined`). Each line's adapter says which Program a launch runs (`launched`).

The checking mode of either line (`python -m refimpl.tinygrad run --check DEVICE`) checks each run of tinygrad's own
device here: `compare_run` (the device's outputs against the emulator's, permissive) and `check_run` (that, counted in
a session, each disagreement and each undefined behaviour saved as a reproducer case)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from refimpl.backends.ops_python import EmulatedProgram
from refimpl.emulator.certainty import is_one_value
from refimpl.emulator.machine import emulate
from refimpl.errors import UndefinedBehavior
from refimpl.ir import Program
from refimpl.testing.compare import same_value
from refimpl.tinygrad.session import KernelUndefinedBehavior, Session

DEVICE = "REFIMPL"


class KernelProgram(EmulatedProgram):
  """A tinygrad kernel named `name` on a REFIMPL device whose session is `session`; `source` names the tinygrad line
  in a saved reproducer (None: refimpl.tinygrad.cases's, 0.10.1)."""
  source: str | None = None

  def __init__(self, name: str, session: Session):
    self.name, self.session = name, session

  def run(self, program: Program, arrays: list[np.ndarray], vals: tuple[int, ...]) -> None:
    before = [a.copy() for a in arrays] if self.session.save_undefined is not None else None
    try: super().run(program, arrays, vals)
    except UndefinedBehavior as e:
      saved = ""
      if before is not None:
        from refimpl.tinygrad.cases import case_finding, save_case
        found = case_finding(program, before, vals, DEVICE, self.name, detail=str(e), source=self.source)
        saved = f" (reproducer: python -m refimpl.fuzz replay {save_case(self.session.save_undefined, found)})"
      self.session.undefined.append(f"{self.name}: {e}{saved}")
      raise KernelUndefinedBehavior(self.name, e, saved) from None
    self.session.ran(self.name)


def compare_run(program: Program, inputs: list[np.ndarray], outputs: list[np.ndarray], vals: tuple[int, ...]) -> str | None:
  """None when `outputs` (what a device computed from `inputs`) agree with the emulator on every element it pins to one
  value (certainty EXACT or NAN_PAYLOAD: the same bits, or a NaN for a NaN), else the first difference.
  UndefinedBehavior when the emulator finds the kernel undefined on these inputs."""
  res = emulate(program, inputs, vals=vals, strict=False)
  if res.events: raise res.events[0]
  for k, (want, got, levels) in enumerate(zip(res.buffers, outputs, res.certainty)):
    bad = np.flatnonzero(is_one_value(levels) & ~same_value(got, want))
    if len(bad): return (f"buffer {k} element {bad[0]}: emulator {want[bad[0]]!r}, device {got[bad[0]]!r} "
                         f"({len(bad)} elements differ)")
  return None


def check_run(session: Session, out: Path, device: str, name: str, program: Program, before: list[np.ndarray],
              after: list[np.ndarray], vals: tuple[int, ...], source: str | None = None) -> None:
  """One run of tinygrad kernel `name` on tinygrad's `device` (`before` -> `after`), checked with compare_run: a
  disagreement is saved as a case in out/disagreements, undefined behaviour in out/undefined (refimpl.tinygrad.cases;
  `source` names the tinygrad line, None: 0.10.1), each listed in `session`, which counts the run."""
  from refimpl.tinygrad.cases import case_finding, save_case
  try: why = compare_run(program, before, after, vals)
  except UndefinedBehavior as e:
    path = save_case(Path(out) / "undefined", case_finding(program, before, vals, device, name, after, str(e), source=source))
    session.undefined.append(f"{name}: {e} (saved {path})")
    why = None
  if why is not None:
    path = save_case(Path(out) / "disagreements", case_finding(program, before, vals, device, name, after, why, source=source))
    session.disagreements.append(f"{name}: {why} (saved {path})")
  session.ran(name)
