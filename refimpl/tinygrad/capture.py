"""`capture()`: record the kernels a tinygrad script runs, translated to refimpl.

  with capture() as kernels:
    (Tensor([1., 2.], device="PYTHON") * 2).numpy()
  for k in kernels: emulate(k.program, k.inputs, vals=k.vals)   # should give k.outputs

It wraps `tinygrad.engine.realize.ExecItem.run` while the block runs: for each run of a compiled kernel
(a CompiledRunner; copies and views are skipped) it copies every buffer before the run (`inputs`) and after it
(`outputs`) as numpy arrays in the kernel's buffer order, and translates the kernel with `from_tinygrad` using the
launch dims it ran with. Kernels are deduplicated by program: the first run of each distinct Program is kept.
A kernel that does not translate is recorded with `program` None and `error` set, and the script goes on.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from refimpl.dtype import dtypes, to_np
from refimpl.ir.program import Program
from refimpl.tinygrad.importer import Translation, TranslationError, translate, translate_dtype


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
  """A copy of a tinygrad Buffer's contents as a flat numpy array of its dtype. A bool byte other than 0 or 1 (memory a
  kernel has not written yet) is read as C reads it: true."""
  dt = translate_dtype(buf.dtype)
  raw = bytes(buf.as_buffer())
  if dt == dtypes.bool: return np.frombuffer(raw, dtype=np.uint8) != 0
  return np.frombuffer(raw, dtype=to_np(dt)).copy()


@contextmanager
def capture() -> Iterator[list[CapturedKernel]]:
  """Record every compiled kernel run inside the block (see the module docstring); yields the list it fills."""
  from tinygrad.engine.realize import CompiledRunner, ExecItem
  kernels: list[CapturedKernel] = []
  seen: set[Program] = set()
  original = ExecItem.run

  def run(self, _var_vals=None, *args, **kwargs):
    if not isinstance(self.prg, CompiledRunner): return original(self, _var_vals, *args, **kwargs)
    bufs = [b.ensure_allocated() for b in self.bufs]
    before = [buffer_array(b) for b in bufs]
    ret = original(self, _var_vals, *args, **kwargs)
    var_vals = {} if _var_vals is None else _var_vals
    p = self.prg.p
    gs, ls = p.launch_dims(var_vals)
    try:
      t: Translation | None = translate(p, global_size=gs, local_size=ls)
      err = None
    except (TranslationError, ValueError) as e:
      t, err = None, e
    program = None if t is None else t.program
    if program is None or program not in seen:
      if program is not None: seen.add(program)
      kernels.append(CapturedKernel(p.function_name, p.name, program, {} if t is None else t.fired, before,
                                    [buffer_array(b) for b in bufs], tuple(var_vals[v] for v in p.vars), p, err))
    return ret

  ExecItem.run = run
  try: yield kernels
  finally: ExecItem.run = original
