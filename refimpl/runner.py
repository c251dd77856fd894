"""Running a Program on any device: lower to the device's form (refimpl.lower.lower_for: verify, grid to loops, the
capability checks and the device's dtypes, the passes its renderer needs), render, compile (cached), load, launch.

This is the one path from a Program to results that the self-check, the test suite and the fuzzer share, so that no
caller needs to know a backend's internals. Runtimes are called as tinygrad's are:
  grid devices (renderer.global_max is not None): prg(*bufs, global_size=..., local_size=..., vals=..., wait=True)
  loop devices (no grid; lower_for lowers programs to loops first): prg(*bufs, vals=..., wait=True)
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar, NamedTuple, Protocol

import numpy as np

from refimpl.device import Buffer, Compiled, Device
from refimpl.dtype import to_np
from refimpl.ir import Program
from refimpl.ir.arguments import check_arguments
from refimpl.lower import lower_for


class Watcher(Protocol):
  """Sees every Kernel built and run (refimpl.testing.baseline runs a porter's baseline device beside each)."""
  def built(self, program: Program, device: str, error: Exception | None) -> None: ...
  def ran(self, kernel: Kernel, arrays: Sequence[np.ndarray], vals: Sequence[int], outputs: list[np.ndarray] | None,
          error: Exception | None) -> None: ...


class Loaded(NamedTuple):
  """A program built for one device: the device, the program as its renderer renders it (lower_for), the source, the
  compiled binary and the loaded runtime program."""
  device: Compiled
  runnable: Program
  source: str
  lib: bytes
  prg: Callable[..., float | None]


class Kernel:
  """A program compiled once for one device; calling it runs it on fresh buffers filled from numpy arrays."""
  watcher: ClassVar[Watcher | None] = None  # set by the suite's --baseline only

  def __init__(self, program: Program, device: str | None = None, loaded: Loaded | None = None):
    """`program` built for `device` (default: the default device), or the build given (refimpl.fuzz.execute compiles
    many programs in one compiler call; the watcher sees only the builds made here)."""
    self.program = program
    if loaded is None: loaded = self._build(program, Device[device])
    self.device, self.runnable, self.source, self.lib, self.prg = loaded
    self.last_time: float | None = None

  @staticmethod
  def _build(program: Program, device: Compiled) -> Loaded:
    """lower_for (with the device's dtype check), render, compile (cached), load; the watcher sees the outcome."""
    try:
      runnable = lower_for(program, device)
      source = device.renderer.render(program.name, runnable)
      lib = device.compiler.compile_cached(source)
      loaded = Loaded(device, runnable, source, lib, device.runtime(program.name, lib))
    except Exception as e:
      if Kernel.watcher is not None: Kernel.watcher.built(program, device.device, e)
      raise
    if Kernel.watcher is not None: Kernel.watcher.built(program, device.device, None)
    return loaded

  @staticmethod
  def has_grid(device: Compiled) -> bool: return device.renderer.global_max is not None

  def __call__(self, *arrays: np.ndarray, vals: Sequence[int] = ()) -> list[np.ndarray]:
    """Runs once with one array per buffer (DEFINE_GLOBAL order) and one int per DEFINE_VAR; returns every buffer after."""
    try: outputs = self._run(arrays, vals)
    except Exception as e:
      if Kernel.watcher is not None: Kernel.watcher.ran(self, arrays, vals, None, e)
      raise
    if Kernel.watcher is not None: Kernel.watcher.ran(self, arrays, vals, outputs, None)
    return outputs

  def _run(self, arrays: Sequence[np.ndarray], vals: Sequence[int]) -> list[np.ndarray]:
    signature = self.program.signature
    check_arguments(self.program, signature, arrays, vals)
    bufs = [Buffer(self.device.device, a.size, ptr.base, initial_value=np.ascontiguousarray(a).tobytes())
            for a, ptr in zip(arrays, signature)]
    raw = [b._buf for b in bufs]
    if self.has_grid(self.device):
      self.last_time = self.prg(*raw, global_size=self.program.global_size, local_size=self.program.local_size,
                                vals=tuple(vals), wait=True)
    else: self.last_time = self.prg(*raw, vals=tuple(vals), wait=True)
    self.device.synchronize()
    return [np.frombuffer(b.as_buffer(), dtype=to_np(ptr.base)).copy() for b, ptr in zip(bufs, signature)]

def run_program(program: Program, *arrays: np.ndarray, vals: Sequence[int] = (), device: str | None = None) -> list[np.ndarray]:
  """Compiles `program` for `device` (default: the default device) and runs it once. Returns every buffer after the run."""
  return Kernel(program, device)(*arrays, vals=vals)
