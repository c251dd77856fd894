"""`python -m refimpl.tinygrad run --check DEVICE` under tinygrad 0.14: the script runs on tinygrad 0.14's own DEVICE
(CPU, PYTHON, ...), and every kernel it runs there also runs on refimpl's emulator (permissive) with the same inputs
(runs.py); elements the emulator calls exact must be the same bits. Each disagreement, and each kernel with undefined
behaviour, is saved as a reproducer case in out/disagreements and out/undefined (`python -m refimpl.fuzz replay FILE`),
as the 0.10.1 check does (refimpl.tinygrad.v0_10.reference.check_kernels; both check a run with
refimpl.tinygrad.program.check_run). A kernel refimpl cannot translate runs unchecked and is listed in the session."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from refimpl.tinygrad.program import check_run
from refimpl.tinygrad.session import Session
from refimpl.tinygrad.v0_14.record import SOURCE
from refimpl.tinygrad.v0_14.runs import KernelRun, kernel_runs


@contextmanager
def check_kernels(out: Path, session: Session | None = None) -> Iterator[Session]:
  """While active, every kernel tinygrad 0.14 runs is also run on the emulator and compared (module docstring), each
  case named by the device it ran on; `session` (a new one when None) counts them."""
  session = Session() if session is None else session
  def check(r: KernelRun) -> None:
    if r.translation is None: session.untranslatable[r.record.name] = str(r.error)
    else: check_run(session, out, r.device, r.record.name, r.translation.program, r.before, r.after, r.vals, SOURCE)
  with kernel_runs(check): yield session
