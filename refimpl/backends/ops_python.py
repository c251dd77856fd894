"""The PYTHON device: the reference emulator behind the device contract.

Its renderer emits the program's JSON form, its compiler is the identity (the JSON is the binary), and its runtime runs
the program with refimpl.emulator.machine.emulate in strict mode: undefined behaviour raises UndefinedBehavior."""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from refimpl.allocation import reuse_freed_memory
from refimpl.backends.host_memory import views
from refimpl.device import Compiled, Compiler, MallocAllocator
from refimpl.ir import Program, program_from_json, program_to_json
from refimpl.renderer import Renderer

INT32_MAX = 2**31 - 1

@dataclass(frozen=True)
class PythonRenderer(Renderer):
  """The emulator runs any valid program: a full grid, workgroups with locals and barriers, any vector width."""
  device: str = "PYTHON"
  has_local: bool = True
  has_shared: bool = True
  global_max: tuple[int, ...] | None = (INT32_MAX, INT32_MAX, INT32_MAX)
  local_max: tuple[int, ...] | None = (1024, 1024, 1024)
  vector_widths: tuple[int, ...] = (1, 2, 3, 4, 8, 16)

  def render(self, name: str, program: Program) -> str: return program_to_json(program)

class EmulatedProgram:
  """A program run on the emulator, strict, in place on a launch's host buffers (like a real device: a launch stopped
  by UndefinedBehavior leaves in the buffers what it had written until then). The one runner of the emulator's
  devices: the PYTHON device's program below and the tinygrad bridge's REFIMPL programs (refimpl.tinygrad.program)
  differ only in which Program a launch runs (`launched`) and in what they do around a run (`run`)."""
  name: str

  def launched(self, bufs: tuple, global_size: tuple[int, ...] | None, local_size: tuple[int, ...] | None) -> Program:
    """The Program this launch runs (one object per distinct launch, so that the emulator's plan of it is made once)."""
    raise NotImplementedError

  def run(self, program: Program, arrays: list[np.ndarray], vals: tuple[int, ...]) -> None:
    """One launch of `program` on `arrays` (views of the buffers), strict, in place."""
    from refimpl.emulator.machine import emulate
    emulate(program, arrays, vals=vals, strict=True, inplace=True)

  def __call__(self, *bufs, global_size: tuple[int, ...] | None = None, local_size: tuple[int, ...] | None = None,
               vals: tuple[int, ...] = (), wait: bool = False) -> float | None:
    """One launch; with wait, the seconds its run took: the run alone (`run`), as a compiled device's time is its
    kernel's alone, not the launch's preparation (`launched`: checks, a translation on a first launch; the views)."""
    program = self.launched(bufs, global_size, local_size)
    arrays = views(program.signature, bufs)
    start = time.perf_counter()
    self.run(program, arrays, tuple(vals))
    return time.perf_counter() - start if wait else None

class PythonProgram(EmulatedProgram):
  """A program loaded from its JSON form; a launch must give the program's own dims (or none) and one buffer per
  DEFINE_GLOBAL."""
  def __init__(self, name: str, lib: bytes):
    self.name, self.program = name, program_from_json(lib.decode())

  def launched(self, bufs: tuple, global_size: tuple[int, ...] | None, local_size: tuple[int, ...] | None) -> Program:
    for what, given, declared in (("global_size", global_size, self.program.global_size),
                                  ("local_size", local_size, self.program.local_size)):
      if given is not None and tuple(given) != tuple(declared):
        raise ValueError(f"{self.name}: launched with {what}={tuple(given)} but the program declares {declared}")
    signature = self.program.signature
    if len(bufs) != len(signature): raise ValueError(f"{self.name}: takes {len(signature)} buffers, got {len(bufs)}")
    return self.program

class PythonDevice(Compiled):
  """Device["PYTHON"]: host memory, the JSON renderer, the emulator as runtime. Safe to open in worker processes."""
  subprocess_safe = True
  def __init__(self, device: str):
    reuse_freed_memory()  # a run allocates an array per value: keep freed blocks for the next (refimpl.allocation)
    super().__init__(device, MallocAllocator, PythonRenderer(), Compiler(None), PythonProgram)
