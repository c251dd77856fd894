"""IDIV and MOD (ints only): IDIV truncates toward zero, MOD takes the dividend's sign; divisor 0 and INT_MIN / -1 are
undefined (deferred kinds: the lane's value is undefined, a WHERE may discard it; spec_tests/test_emulator_deferred.py).

Rule: alu.idiv_mod (refimpl/emulator/alu.py; SPEC.md "Rules", `idiv_mod`: IDIV MOD; undefined kinds DIVISOR_ZERO and
DIVISION_OVERFLOW, refimpl/emulator/ub.py). Decision row: "IDIV / MOD (ints)" (SPEC.md "Decisions"). test_int_sweeps.py
also sweeps IDIV and MOD with every other int op. Backend tests: refimpl/conformance/rules/test_idiv_mod.py.
Oracle: Python ints, quotient truncated toward zero (ints.py).
"""
from __future__ import annotations

import numpy as np
import pytest

from refimpl.dtype import dtypes, to_np
from refimpl.emulator import alu
from refimpl.emulator.alu import exec_alu
from refimpl.ir.ops import Ops

from .arrays import I32, i32
from .ints import INT8_IDS, INT8S, every_8bit_pair, info

RULES = (alu.idiv_mod,)
DECISIONS = {"IDIV / MOD (ints)": "test_decision_idiv_mod_truncate_toward_zero"}

@pytest.mark.parametrize("dt", INT8S, ids=INT8_IDS)
@pytest.mark.parametrize("op", [Ops.IDIV, Ops.MOD])
def test_every_8bit_pair_against_python_ints(op, dt):
  """Rule: IDIV truncates toward zero, MOD takes the dividend's sign, divisor 0 and MIN / -1 undefined. All 65536 pairs."""
  assert every_8bit_pair(op, dt) == []

# ---- undefined domains: the mask and the reason ----

def test_ub_idiv_by_zero():
  out = exec_alu(Ops.IDIV, dtypes.int32, np.array([7, 7, -7], dtype=np.int32), np.array([2, 0, 0], dtype=np.int32))
  assert out.undefined.tolist() == [False, True, True] and out.reason == "division by zero"
  assert out.values.tolist() == [3, 0, 0]

def test_ub_mod_by_zero_unsigned():
  out = exec_alu(Ops.MOD, dtypes.uint8, np.array([5, 5], dtype=np.uint8), np.array([0, 3], dtype=np.uint8))
  assert out.undefined.tolist() == [True, False] and out.reason == "division by zero" and out.values.tolist() == [0, 2]

@pytest.mark.parametrize("dt", [dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64], ids=["i8", "i16", "i32", "i64"])
def test_ub_signed_min_divided_by_minus_one(dt):
  lo = info(dt)[2]
  a, b = np.array([lo, lo, lo + 1], dtype=to_np(dt)), np.array([-1, 1, -1], dtype=to_np(dt))
  out = exec_alu(Ops.IDIV, dt, a, b)
  assert out.undefined.tolist() == [True, False, False] and out.reason == "signed INT_MIN / -1"
  assert out.values.tolist()[1:] == [lo, -(lo + 1)]

def test_ub_signed_min_mod_minus_one():
  out = exec_alu(Ops.MOD, dtypes.int64, np.array([-(2**63)], dtype=np.int64), np.array([-1], dtype=np.int64))
  assert out.undefined.tolist() == [True] and out.reason == "signed INT_MIN % -1"

def test_ub_reason_names_the_first_undefined_lane():
  """The reason belongs to the first undefined lane in C order, whichever check it failed."""
  a = np.array([[1, -128], [5, 5]], dtype=np.int8)
  b = np.array([[1, -1], [0, 1]], dtype=np.int8)
  out = exec_alu(Ops.IDIV, dtypes.int8, a, b)
  assert out.undefined.tolist() == [[False, True], [True, False]] and out.reason == "signed INT_MIN / -1"

def test_decision_idiv_mod_truncate_toward_zero():
  """IDIV truncates toward zero; MOD takes the dividend's sign; divisor 0 and MIN / -1, MIN % -1 are undefined."""
  a, b = i32(7, -7, 7, -7, 5, -(2**31)), i32(2, 2, -2, -2, 0, -1)
  q, r = exec_alu(Ops.IDIV, I32, a, b), exec_alu(Ops.MOD, I32, a, b)
  assert q.values.tolist() == [3, -3, -3, 3, 0, 0] and r.values.tolist() == [1, -1, 1, -1, 0, 0]
  assert q.undefined.tolist() == r.undefined.tolist() == [False] * 4 + [True, True]
