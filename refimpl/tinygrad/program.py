"""A tinygrad kernel run on the reference, whichever tinygrad line: the program class of the REFIMPL devices
(refimpl.tinygrad.reference for 0.10.1, refimpl.tinygrad.v0_14 for 0.14). Imports no tinygrad.

A launch runs like the PYTHON device's (refimpl.backends.ops_python.EmulatedProgram: the emulator, strict, in place on
the buffers); around it, the device's Session counts the run, and undefined behaviour is recorded there and raised as
KernelUndefinedBehavior naming the tinygrad kernel, with a reproducer saved first when the session says where
(`Session.save_undefined`). Each line's adapter says which Program a launch runs (`launched`)."""
from __future__ import annotations

import numpy as np

from refimpl.backends.ops_python import EmulatedProgram
from refimpl.errors import UndefinedBehavior
from refimpl.ir import Program
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
        line = {} if self.source is None else {"source": self.source}
        found = case_finding(program, before, vals, DEVICE, self.name, detail=str(e), **line)
        saved = f" (reproducer: python -m refimpl.fuzz replay {save_case(self.session.save_undefined, found)})"
      self.session.undefined.append(f"{self.name}: {e}{saved}")
      raise KernelUndefinedBehavior(self.name, e, saved) from None
    self.session.ran(self.name)
