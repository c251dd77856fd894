"""The float oracle shared by the float families: exact rational arithmetic (refimpl.testing.oracle) rounded once to the
op's dtype, and the edge-value grid."""
from __future__ import annotations

import itertools
import math

import numpy as np

from refimpl.emulator.alu import exec_alu
from refimpl.ir.dtype_text import dtype_to_str
from refimpl.ir.ops import Ops
from refimpl.testing.oracle import ARITH_FLOATS, FMT, add, as_floats, div, edge_values, mul, rne_any, same, sqrt, sub

ORACLE = {Ops.ADD: add, Ops.SUB: sub, Ops.MUL: mul, Ops.FDIV: div, Ops.SQRT: sqrt, Ops.RECIP: lambda x: div(1.0, x),
          Ops.NEG: lambda x: -x}
DT_IDS = [dtype_to_str(dt) for dt in ARITH_FLOATS]

def mismatches(op, dt, *arrays) -> list[str]:
  """Lanes where exec_alu differs from the oracle rounded to dt (values and sign of zero; any NaN for NaN), or where a
  NaN lane is not marked loose / a non-NaN lane is."""
  out = exec_alu(op, dt, *arrays)
  got, cols = as_floats(out.values), [as_floats(a) for a in arrays]
  loose = np.zeros(len(got), bool) if out.loose is None else out.loose.reshape(-1)
  bad = []
  for i, (g, *xs) in enumerate(zip(got, *cols)):
    want = rne_any(ORACLE[op](*xs), FMT[dt])
    if not same(g, want) or bool(loose[i]) != math.isnan(want): bad.append(f"{op.name}{tuple(xs)} = {g!r}, want {want!r}")
  return bad[:5]

def grid(dt, n: int = 2) -> list[np.ndarray]:
  """Every n-tuple of edge values of dt, as n arrays."""
  vals = np.array(edge_values(dt), dtype=np.float64).astype(FMT[dt].np)
  return [np.array(c, dtype=FMT[dt].np) for c in zip(*itertools.product(vals, repeat=n))]
