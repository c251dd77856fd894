"""What the TINYGRAD devices of every tinygrad line share (refimpl.tinygrad.v0_10.backend for 0.10.1,
refimpl.tinygrad.v0_14.backend for 0.14): the renderer shell that exports a Program and renders it with tinygrad's
renderer, the allocator over tinygrad's, the check before every launch, and the probe a device must pass to open.
Imports no tinygrad."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from refimpl.device import Allocator, Compiled, DeviceUnavailable
from refimpl.dtype import dtypes, to_np
from refimpl.ir import Ops, Program, elementwise
from refimpl.lower import lower_for
from refimpl.renderer import Renderer

NATIVE_GRID = (2**31 - 1, 2**31 - 1, 2**31 - 1)  # a loop device: any grid, lowered to loops here


@dataclass(frozen=True)
class TinygradRenderer(Renderer):
  """Exports a Program to a tinygrad line's UOps and renders them with the tinygrad device's renderer (`tg`); each
  line's subclass says how (render). Remembers each source's kernel name and program (for the check at launch)."""
  tg: Any = field(default=None, compare=False, repr=False)
  loops: bool = False  # lower the grid to loops first (a tinygrad renderer without a grid)
  sources: dict = field(default_factory=dict, compare=False, repr=False)

  @property
  def grid_as_loops(self) -> bool: return self.loops

  def render(self, name: str, program: Program) -> str:
    raise NotImplementedError(f"{type(self).__name__} renders no tinygrad line: use the line's own renderer")


def refuse_undefined(program: Program, allocator: Any, bufs: tuple, vals: tuple) -> None:
  """Runs `program` on refimpl's emulator, strict, on copies of the tinygrad buffers `bufs` (read through tinygrad's
  `allocator`) and `vals`: raises UndefinedBehavior when a lane is undefined, so that nothing undefined is launched."""
  from refimpl.emulator.machine import emulate
  arrays = []
  for b, k in zip(bufs, sorted(program.buffers)):
    ptr = program.buffers[k]
    raw = bytearray(ptr.size * ptr.base.itemsize)
    allocator._copyout(memoryview(raw), b)
    arrays.append(np.frombuffer(raw, dtype=to_np(ptr.base)).copy())
  emulate(program, arrays, vals=tuple(vals), strict=True)


class TinygradAllocator(Allocator):
  """refimpl's allocator interface over the tinygrad device's own allocator (opaques are tinygrad's)."""
  def __init__(self, tg: Any): self.tg = tg
  def alloc(self, size: int, options: Any = None) -> Any:
    if not isinstance(size, int) or size <= 0: raise ValueError(f"allocation size must be a positive int, got {size!r}")
    return self.tg.alloc(size)
  def free(self, opaque: Any, size: int, options: Any = None) -> None: self.tg.free(opaque, size)
  def _copyin(self, dest: Any, src: memoryview) -> None:
    self.tg._copyin(dest, memoryview(bytearray(src)) if src.readonly else src)
  def _copyout(self, dest: memoryview, src: Any) -> None: self.tg._copyout(dest, src)


def check_it_runs(device: Compiled, launch: bool = True) -> None:
  """DeviceUnavailable with the cause unless the smallest kernel (int32 ADD over 4 lanes) renders, compiles and, when
  `launch` (a device judged at "ran"), runs on `device`: a device whose compiler cannot run here (no clang on PATH)
  does not open, rather than refusing every dtype."""
  program = elementwise(Ops.ADD, dtypes.int32, n=4)
  program = Program("probe_i32", program.uops, program.global_size, program.local_size)
  try:
    src = device.renderer.render(program.name, lower_for(program, device.renderer))
    prg = device.runtime(program.name, device.compiler.compile_cached(src))
    if not launch: return  # it renders and compiles: all a device judged below "ran" can show here
    bufs = [device.allocator.alloc(16) for _ in program.buffers]
    for b in bufs: device.allocator._copyin(b, memoryview(np.zeros(4, np.int32).tobytes()))
    prg(*bufs, global_size=program.global_size, local_size=program.local_size, wait=True)
    device.synchronize()
  except Exception as e:  # any failure to render, compile or run the smallest kernel is the device not working here
    msg = f"{device.device}: opens but cannot run a kernel (int32 ADD) here: {type(e).__name__}: {e}"
    raise DeviceUnavailable(" ".join(msg.split())[:600]) from None
