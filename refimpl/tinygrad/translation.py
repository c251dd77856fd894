"""What every tinygrad line's importer shares (refimpl.tinygrad.v0_10.importer for 0.10.1, refimpl.tinygrad.v0_14.importer
for 0.14): the error naming the uop refimpl cannot express, the result with the rules that fired, and how tinygrad's C
renderers round a float constant (both lines render a float literal the same way). Imports no tinygrad."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from refimpl.dtype import DType, dtypes, truncate
from refimpl.ir.program import Program


class TranslationError(ValueError):
  """A tinygrad uop has no refimpl translation. `.index` (position in tinygrad's uop list, None for the whole
  kernel), `.op` (tinygrad's op name) and `.why` say which and why."""
  def __init__(self, index: int | None, op: str | None, why: str):
    self.index, self.op, self.why = index, op, why
    where = "kernel" if index is None else f"uop {index} {op}"
    super().__init__(f"{where}: {why}")


@dataclass(frozen=True)
class Translation:
  """A verified Program and, per rule name, the tinygrad uop indices it rewrote (-1 for the launch-dims rule)."""
  program: Program
  fired: dict[str, list[int]]


def _f32(x: float) -> float:
  with np.errstate(over="ignore"): return float(truncate[dtypes.float32](x))

# how tinygrad's C renderers turn a float CONST's Python float (a float64) into the dtype: float32 as the literal
# "{x}f", which C rounds to nearest even (strtof); half and bfloat16 as a cast of that float32 literal; float64 exactly
FLOAT_CONST_ROUNDING: dict[DType, Callable[[float], float]] = {
  dtypes.float64: float, dtypes.float32: _f32,
  dtypes.float16: lambda x: float(truncate[dtypes.float16](_f32(x))),
  dtypes.bfloat16: lambda x: float(truncate[dtypes.bfloat16](_f32(x)))}
