"""CAST float -> int: truncate toward zero; NaN, inf and a truncated value outside the target's range are undefined.

Rule: the float -> int part of alu.cast (refimpl/emulator/alu.py; SPEC.md "Rules", `cast`: CAST; undefined kind
CAST_RANGE, refimpl/emulator/ub.py; its home: test_cast.py). Decision row: "CAST float->int" (SPEC.md "Decisions").
Backend tests: refimpl/conformance/rules/test_float_to_int.py. Oracle: math.trunc and the target's range (casts.py).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from refimpl.dtype import dtypes
from refimpl.emulator import alu
from refimpl.emulator.alu import exec_cast
from refimpl.testing.oracle import FMT, edge_values

from .arrays import F32, I32, f32
from .casts import INTS, check, int_range

RULES = ()
DECISIONS = {"CAST float->int": "test_decision_cast_float_to_int_truncates"}
ALSO = (alu.cast,)

@pytest.mark.parametrize("src", [dtypes.float32, dtypes.float64], ids=["float32", "float64"])
def test_float_to_int_truncates_with_range_boundaries(src):
  """Rule: float -> int truncates toward zero; NaN, inf and truncated values outside the range are undefined. Values
  beside each range boundary (lo - 1, lo - 0.5, lo, hi, hi + 0.5, hi + 1 where representable) and edge floats."""
  xs = [v for v in edge_values(src)]
  for dst in INTS:
    lo, hi = int_range(dst)
    xs += [float(v) for v in (lo - 1, lo, hi, hi + 1)] + [lo - 0.5, hi + 0.5, -0.99, 0.99, 2.0**63 - 1024, 2.0**64 - 2048]
  x = np.array(xs).astype(FMT[src].np)
  for dst in INTS: assert check(x, src, dst) == [], dst

def test_ub_float_to_int_nan():
  out = exec_cast(np.array([1.5, math.nan], dtype=np.float32), dtypes.float32, dtypes.int32)
  assert out.undefined.tolist() == [False, True] and out.reason == "float->int cast of nan" and out.values.tolist() == [1, 0]

def test_ub_float_to_int_inf():
  out = exec_cast(np.array([-math.inf], dtype=np.float16), dtypes.float16, dtypes.uint8)
  assert out.undefined.tolist() == [True] and out.reason == "float->int cast of -inf"

def test_ub_float_to_int_out_of_range():
  out = exec_cast(np.array([127.9, 128.0, -128.9, -129.0]), dtypes.float64, dtypes.int8)
  assert out.undefined.tolist() == [False, True, False, True] and out.values.tolist() == [127, 0, -128, 0]
  assert out.reason == "float->int cast of 128.0 outside [-128, 127]"

def test_ub_float_to_unsigned_negative():
  """-0.5 truncates to 0, inside uint8's range; -1.0 does not."""
  out = exec_cast(np.array([-0.5, -1.0], dtype=np.float32), dtypes.float32, dtypes.uint8)
  assert out.undefined.tolist() == [False, True] and out.reason == "float->int cast of -1.0 outside [0, 255]"

def test_decision_cast_float_to_int_truncates():
  """CAST float->int: truncate toward zero; a truncated value outside the target range, NaN or inf -> undefined."""
  out = exec_cast(f32(2.9, -2.9, 2**31, np.nan, -np.inf, -(2**31)), F32, I32)
  assert out.values.tolist() == [2, -2, 0, 0, 0, -(2**31)]
  assert out.undefined.tolist() == [False, False, True, True, True, False]
