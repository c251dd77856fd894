"""`capture()`: record the kernels a tinygrad script runs, translated to refimpl.

  with capture() as kernels:
    (Tensor([1., 2.], device="PYTHON") * 2).numpy()
  for k in kernels: emulate(k.program, k.inputs, vals=k.vals)   # should give k.outputs

It watches kernel runs with `kernel_runs` (which `refimpl.tinygrad.v0_10.reference`'s check uses too): for each run of
a compiled kernel (a CompiledRunner; copies and views are skipped) it copies every buffer before the run (`inputs`) and after it
(`outputs`) as numpy arrays in the kernel's buffer order, and translates the kernel with `from_tinygrad` using the
launch dims and buffer sizes it ran with. Kernels are deduplicated by program: the first run of each distinct Program is kept.
A kernel that does not translate is recorded with `program` None and `error` set, and the script goes on.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from refimpl.backends.host_memory import copy_of
from refimpl.ir.program import Program
from refimpl.tinygrad.v0_10.importer import Translation, TranslationError, translate, translate_dtype


@dataclass
class CapturedKernel:
  """One distinct kernel: its tinygrad name (function name and display name), the translation, the var values and
  the buffers (numpy arrays, one per DEFINE_GLOBAL in number order) before and after the run."""
  name: str
  display_name: str
  program: Program | None
  fired: dict[str, list[int]]
  inputs: list[np.ndarray]
  outputs: list[np.ndarray]
  vals: tuple[int, ...] = ()
  spec: object = None
  error: Exception | None = None


def buffer_array(buf) -> np.ndarray:
  """A copy of a tinygrad Buffer's contents as a flat numpy array of its dtype (host_memory.copy_of's rule)."""
  return copy_of(buf.as_buffer(), translate_dtype(buf.dtype))


@dataclass
class KernelRun:
  """One run of a compiled tinygrad kernel: its ProgramSpec, the translation (None, with `error`, when there is none),
  the var values and every buffer before and after the run."""
  spec: Any
  translation: Translation | None
  error: Exception | None
  vals: tuple[int, ...]
  before: list[np.ndarray]
  after: list[np.ndarray]


@contextmanager
def kernel_runs(on_run: Callable[[KernelRun], None]) -> Iterator[None]:
  """While active, `on_run` sees every run of a compiled kernel (copies and views are not kernels): tinygrad's
  `ExecItem.run` is wrapped, the buffers copied around the run and the kernel translated with the dims it ran with."""
  from tinygrad.engine.realize import CompiledRunner, ExecItem
  original = ExecItem.run

  def run(self, _var_vals=None, *args, **kwargs):
    if not isinstance(self.prg, CompiledRunner): return original(self, _var_vals, *args, **kwargs)
    bufs = [b.ensure_allocated() for b in self.bufs]
    before = [buffer_array(b) for b in bufs]
    ret = original(self, _var_vals, *args, **kwargs)
    var_vals = {} if _var_vals is None else _var_vals
    p = self.prg.p
    gs, ls = p.launch_dims(var_vals)
    try: t, err = translate(p, global_size=gs, local_size=ls, buffer_sizes=[b.size for b in bufs]), None
    except (TranslationError, ValueError) as e: t, err = None, e
    on_run(KernelRun(p, t, err, tuple(var_vals[v] for v in p.vars), before, [buffer_array(b) for b in bufs]))
    return ret

  ExecItem.run = run
  try: yield
  finally: ExecItem.run = original


@contextmanager
def capture() -> Iterator[list[CapturedKernel]]:
  """Record every compiled kernel run inside the block (see the module docstring); yields the list it fills."""
  kernels: list[CapturedKernel] = []
  seen: set[Program] = set()

  def record(r: KernelRun) -> None:
    program = None if r.translation is None else r.translation.program
    if program is not None and program in seen: return
    if program is not None: seen.add(program)
    fired = {} if r.translation is None else r.translation.fired
    kernels.append(CapturedKernel(r.spec.function_name, r.spec.name, program, fired, r.before, r.after, r.vals, r.spec,
                                  r.error))

  with kernel_runs(record): yield kernels
