"""Every kernel tinygrad 0.14 runs on one of its own devices (PYTHON, CPU, CL, ...), as it runs: its record, its
translation, the buffers before and after, the variable values. What capture.py saves and check.py checks.

tinygrad 0.14 runs a compiled kernel in tinygrad.engine.realize.exec_kernel, which takes the device's program from
`realize.get_runtime(device, PROGRAM)` and calls it with the launch's raw buffers, dims and variable values. While
`kernel_runs(callback)` is active, get_runtime's answer is wrapped: each call reads the buffers (the device allocator's
host view, else a copy out), runs tinygrad's program, reads them again and hands a `KernelRun` to the callback. The
kernel's record is the PROGRAM's LINEAR list (what a renderer is given: live.record_of), translated by the importer
once per distinct kernel and launch dims. Imports tinygrad 0.14 when entered."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from refimpl.backends.host_memory import copy_of
from refimpl.ir import Program
from refimpl.tinygrad.lines import require
from refimpl.tinygrad.translation import TranslationError
from refimpl.tinygrad.v0_14.importer import Translation, translate
from refimpl.tinygrad.v0_14.live import record_of
from refimpl.tinygrad.v0_14.record import KernelRecord


@dataclass
class KernelRun:
  """One launch of a tinygrad 0.14 kernel on tinygrad's `device`: its record (launch dims filled in) and translation
  (None, with `error`, when refimpl cannot express it: then no buffers are read), the buffers in DEFINE_GLOBAL order
  before and after, and the variable values."""
  device: str
  record: KernelRecord
  translation: Translation | None
  error: TranslationError | None
  before: list[np.ndarray]
  after: list[np.ndarray]
  vals: tuple[int, ...]  # the variables' values; the None tinygrad passes for CPU's core_id is dropped (importer rule 19)


def host_arrays(device: str, bufs: tuple, program: Program) -> list[np.ndarray]:
  """Copies of a launch's raw buffers as numpy arrays of the program's buffer dtypes, each as many elements as its
  DEFINE_GLOBAL says (the whole buffer when it says none): through the allocator's host view (`_as_buffer`: PYTHON, CPU)
  or, where it has none, a copy out (`_copyout`)."""
  from tinygrad.device import Device
  allocator = Device[device].allocator
  out = []
  for raw, ptr in zip(bufs, program.signature):
    nbytes = ptr.size * ptr.base.itemsize if ptr.size >= 0 else None
    if hasattr(allocator, "_as_buffer"): view = memoryview(allocator._as_buffer(raw)).cast("B")
    else:
      if nbytes is None: raise ValueError(f"{device}: a buffer of no known size cannot be copied out")
      view = memoryview(bytearray(nbytes))
      allocator._copyout(view, raw)
    if nbytes is not None and view.nbytes < nbytes:
      raise ValueError(f"{device}: a buffer of {view.nbytes} bytes where the kernel says {nbytes}")
    out.append(copy_of(view if nbytes is None else view[:nbytes], ptr.base))
  return out


def _linear(ast: Any) -> tuple:
  """The linearized uops of a compiled PROGRAM (its LINEAR src)."""
  return next(s for s in ast.src if s.op.name == "LINEAR").src


class _Observed:
  """tinygrad's program for a kernel, its runs handed to the callback (module docstring)."""
  def __init__(self, runtime: Any, device: str, ast: Any, translations: dict, callback: Callable[[KernelRun], None]):
    self.runtime, self.device, self.ast, self.translations, self.callback = runtime, device, ast, translations, callback

  def __getattr__(self, name: str) -> Any: return getattr(self.runtime, name)

  def _translated(self, global_size, local_size) -> tuple[KernelRecord, Translation | None, TranslationError | None]:
    key = (self.ast.key, tuple(global_size), tuple(local_size))
    if key not in self.translations:
      record = record_of(_linear(self.ast), global_size, local_size)
      try: self.translations[key] = (record, translate(record), None)
      except TranslationError as e: self.translations[key] = (record, None, e)
    return self.translations[key]

  def __call__(self, *bufs, global_size=(1, 1, 1), local_size=(1, 1, 1), vals=(), **kw):
    gs, ls = tuple(global_size or (1, 1, 1)), tuple(local_size or (1, 1, 1))
    record, t, error = self._translated(gs, ls)
    ints = tuple(int(v) for v in vals if v is not None)
    if t is None:
      ret = self.runtime(*bufs, global_size=global_size, local_size=local_size, vals=vals, **kw)
      self.callback(KernelRun(self.device, record, None, error, [], [], ints))
      return ret
    before = host_arrays(self.device, bufs, t.program)
    ret = self.runtime(*bufs, global_size=global_size, local_size=local_size, vals=vals, **kw)
    self.callback(KernelRun(self.device, record, t, None, before, host_arrays(self.device, bufs, t.program), ints))
    return ret


@contextmanager
def kernel_runs(callback: Callable[[KernelRun], None]) -> Iterator[None]:
  """While active, each kernel run of tinygrad 0.14 is handed to `callback` after it ran (module docstring)."""
  require("0.14.0", "refimpl.tinygrad.v0_14.runs")
  from tinygrad.engine import realize
  original, translations = realize.get_runtime, {}
  def get_runtime(device: str, ast: Any, cache: bool = True) -> Any:
    runtime = original(device, ast, cache)
    if ast.op.name != "PROGRAM" or not any(s.op.name == "LINEAR" for s in ast.src): return runtime
    return _Observed(runtime, device, ast, translations, callback)
  realize.get_runtime = get_runtime
  try: yield
  finally: realize.get_runtime = original

