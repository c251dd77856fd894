"""The REFIMPL device's program for tinygrad 0.14 (device.py says what the device does): a kernel as its KernelRecord,
translated once per launch's dims and run like every REFIMPL program (refimpl.tinygrad.program: the emulator, strict,
in place on the buffers, counted in the device's session). Imports no tinygrad."""
from __future__ import annotations

import dataclasses

from refimpl.ir import Program
from refimpl.tinygrad.program import KernelProgram
from refimpl.tinygrad.session import Session
from refimpl.tinygrad.translation import TranslationError
from refimpl.tinygrad.v0_14.importer import translate
from refimpl.tinygrad.v0_14.record import SOURCE, KernelRecord


class ReferenceProgram(KernelProgram):
  """A kernel as its record (the "binary"); a call runs its translation on the emulator, strict, in place."""
  source = SOURCE

  def __init__(self, record: KernelRecord, session: Session):
    super().__init__(record.name, session)
    self.record = record
    self.launches: dict[tuple, Program] = {}

  def launched(self, bufs: tuple, global_size: tuple | None, local_size: tuple | None) -> Program:
    """The program for this launch's dims, translated once per distinct launch (importer rule 15 reads them)."""
    key = (tuple(global_size or (1, 1, 1)), tuple(local_size or (1, 1, 1)))
    if key not in self.launches:
      record = dataclasses.replace(self.record, global_size=key[0], local_size=key[1])
      try: self.launches[key] = translate(record).program
      except TranslationError as e: raise self.session.untranslatable_kernel(record.name, e) from None
    return self.launches[key]

  def __call__(self, *bufs, global_size=(1, 1, 1), local_size=(1, 1, 1), vals=(), wait=False, **launch_options):
    """Runs the kernel; tinygrad's other launch options (a timeout) do not apply to the emulator."""
    return super().__call__(*bufs, global_size=global_size, local_size=local_size, vals=vals, wait=wait)
