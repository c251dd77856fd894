"""The REFIMPL device's program for tinygrad 0.14 (device.py says what the device does): a kernel as its KernelRecord,
translated once per launch's dims and run on the emulator, strict, in place on the buffers. Imports no tinygrad."""
from __future__ import annotations

import dataclasses
import time

import numpy as np

from refimpl.dtype import to_np
from refimpl.emulator.machine import emulate
from refimpl.errors import UndefinedBehavior
from refimpl.ir import Program
from refimpl.tinygrad.session import SESSION, KernelUndefinedBehavior
from refimpl.tinygrad.translation import TranslationError
from refimpl.tinygrad.v0_14.importer import translate
from refimpl.tinygrad.v0_14.record import KernelRecord


def _arrays(program: Program, bufs: tuple) -> list[np.ndarray]:
  """The launch's buffers (memoryviews, DEFINE_GLOBAL order) as numpy arrays viewing them, of the kernel's dtypes."""
  return [np.frombuffer(memoryview(mv).cast("B"), dtype=to_np(ptr.base))[:ptr.size] for mv, ptr in zip(bufs, program.signature)]


class ReferenceProgram:
  """A kernel as its record (the "binary"); a call runs its translation on the emulator, strict, in place."""
  def __init__(self, record: KernelRecord):
    self.record = record
    self.launches: dict[tuple, Program] = {}

  def launched(self, global_size: tuple, local_size: tuple) -> Program:
    """The program for this launch's dims, translated once per distinct launch (importer rule 15 reads them)."""
    key = (global_size, local_size)
    if key not in self.launches:
      record = dataclasses.replace(self.record, global_size=global_size, local_size=local_size)
      try: self.launches[key] = translate(record).program
      except TranslationError as e:
        SESSION.untranslatable[record.name] = str(e)
        raise TranslationError(e.index, e.op, f"{e.why} (tinygrad kernel {record.name})") from None
    return self.launches[key]

  def __call__(self, *bufs, global_size=(1, 1, 1), local_size=(1, 1, 1), vals=(), wait=False, **launch_options):
    """Runs the kernel; tinygrad's other launch options (a timeout) do not apply to the emulator."""
    start = time.perf_counter()
    p = self.launched(tuple(global_size), tuple(local_size))
    try: emulate(p, _arrays(p, bufs), vals=tuple(vals), strict=True, inplace=True)
    except UndefinedBehavior as e:
      SESSION.undefined.append(f"{self.record.name}: {e}")
      raise KernelUndefinedBehavior(self.record.name, e) from None
    SESSION.ran(self.record.name)
    return time.perf_counter() - start if wait else None
