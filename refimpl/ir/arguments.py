"""The arguments of a launch: what every device (the emulator included) checks before running a Program."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from refimpl.dtype import PtrDType, to_np
from refimpl.ir.program import Program


def check_arguments(program: Program, signature: list[PtrDType], arrays: Sequence[np.ndarray], vals: Sequence[int]) -> None:
  """Clear errors for the wrong number, dtype or size of buffers, and for int vars outside their declared range."""
  if len(arrays) != len(signature):
    raise ValueError(f"{program.name}: takes {len(signature)} buffers, got {len(arrays)}")
  for i, (a, ptr) in enumerate(zip(arrays, signature)):
    if not isinstance(a, np.ndarray): raise TypeError(f"{program.name}: buffer {i} must be a numpy array, got {type(a).__name__}")
    if a.dtype != to_np(ptr.base):
      raise TypeError(f"{program.name}: buffer {i} holds {ptr.base!r} ({to_np(ptr.base)}), got an array of {a.dtype}")
    if ptr.size != -1 and a.size != ptr.size:
      raise ValueError(f"{program.name}: buffer {i} holds {ptr.size} elements, got an array of {a.size}")
  if len(vals) != len(program.vars):
    raise ValueError(f"{program.name}: takes {len(program.vars)} int vars {[v[0] for v in program.vars]}, got {len(vals)}")
  for (name, lo, hi), v in zip(program.vars, vals):
    if not lo <= v <= hi: raise ValueError(f"{program.name}: var {name}={v} is outside its declared range [{lo}, {hi}]")
