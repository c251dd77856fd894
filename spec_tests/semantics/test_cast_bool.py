"""CAST to and from bool: to bool is x != 0 (NaN -> true, -0 -> false); bool -> 0 / 1 in every dtype.

Rule: the bool part of alu.cast (refimpl/emulator/alu.py; SPEC.md "Rules", `cast`: CAST; its home: test_cast.py).
Decision row: "CAST to/from bool" (SPEC.md "Decisions"). The ops on bool: test_bool.py. Backend tests:
refimpl/conformance/rules/test_cast_bool.py.
"""
from __future__ import annotations

import math

import numpy as np

from refimpl.dtype import dtypes
from refimpl.emulator import alu
from refimpl.emulator.alu import exec_cast

from .arrays import F32, I32, f32, i32
from .casts import FLOATS, INTS, values_of

RULES = ()
DECISIONS = {"CAST to/from bool": "test_decision_cast_bool"}
ALSO = (alu.cast,)

def test_casts_to_and_from_bool():
  """Rule: to bool is x != 0, so NaN -> true and -0 -> false; bool -> 0 / 1 in every dtype."""
  x = np.array([0.0, -0.0, math.nan, 1e-300, -math.inf])
  assert exec_cast(x, dtypes.float64, dtypes.bool).values.tolist() == [False, False, True, True, True]
  for dst in (*INTS, *FLOATS):
    assert values_of(exec_cast(np.array([False, True]), dtypes.bool, dst).values, dst) == [0, 1]

def test_decision_cast_bool():
  """CAST to/from bool: x != 0 (NaN -> true, -0 -> false); bool -> 0 / 1."""
  assert exec_cast(f32(np.nan, -0.0, 0.5), F32, dtypes.bool).values.tolist() == [True, False, True]
  assert exec_cast(i32(0, -5), I32, dtypes.bool).values.tolist() == [False, True]
  assert exec_cast(np.array([True, False]), dtypes.bool, F32).values.tolist() == [1.0, 0.0]
