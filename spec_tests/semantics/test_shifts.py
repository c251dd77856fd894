"""SHL and SHR (ints only): SHL on the two's complement bit pattern, SHR arithmetic on signed and logical on unsigned;
a count outside [0, bits) is undefined.

Rule: alu.shift (refimpl/emulator/alu.py; SPEC.md "Rules", `shift`: SHL SHR; undefined kind SHIFT_COUNT,
refimpl/emulator/ub.py). Decision row: "SHL / SHR" (SPEC.md "Decisions"). test_int_sweeps.py also sweeps the shifts with
every other int op. Backend tests: refimpl/conformance/rules/test_shifts.py. Oracle: Python ints (ints.py).
"""
from __future__ import annotations

import numpy as np
import pytest

from refimpl.dtype import dtypes
from refimpl.emulator import alu
from refimpl.emulator.alu import exec_alu
from refimpl.ir.ops import Ops

from .arrays import I32, i32
from .ints import INT8_IDS, INT8S, every_8bit_pair

RULES = (alu.shift,)
DECISIONS = {"SHL / SHR": "test_decision_shifts"}

@pytest.mark.parametrize("dt", INT8S, ids=INT8_IDS)
@pytest.mark.parametrize("op", [Ops.SHL, Ops.SHR])
def test_every_8bit_pair_against_python_ints(op, dt):
  """Rule: shifts undefined outside [0, 8), SHR arithmetic on int8. All 65536 pairs."""
  assert every_8bit_pair(op, dt) == []

# ---- undefined domains: the mask and the reason ----

def test_ub_shift_count_too_large():
  out = exec_alu(Ops.SHL, dtypes.int32, np.int32(1), np.array([31, 32, 40], dtype=np.int32))
  assert out.undefined.tolist() == [False, True, True] and out.reason == "shift count 32 outside [0, 32)"
  assert out.values.tolist() == [-(2**31), 0, 0]

def test_ub_shift_count_negative():
  out = exec_alu(Ops.SHR, dtypes.int16, np.int16(-4), np.array([-1, 1], dtype=np.int16))
  assert out.undefined.tolist() == [True, False] and out.reason == "shift count -1 outside [0, 16)"
  assert out.values.tolist() == [0, -2]

def test_ub_shift_unsigned_count_at_width():
  out = exec_alu(Ops.SHR, dtypes.uint64, np.uint64(2**63), np.array([63, 64], dtype=np.uint64))
  assert out.undefined.tolist() == [False, True] and out.reason == "shift count 64 outside [0, 64)"
  assert out.values.tolist() == [1, 0]

def test_decision_shifts():
  """SHL/SHR: count outside [0, bits) undefined; SHR arithmetic on signed, logical on unsigned; SHL on the bit pattern."""
  assert exec_alu(Ops.SHL, I32, i32(1), i32(31)).values.item() == -(2**31)  # 1 << 31 is INT_MIN
  assert exec_alu(Ops.SHR, I32, i32(-8, -1), i32(1, 31)).values.tolist() == [-4, -1]
  assert exec_alu(Ops.SHR, dtypes.uint8, np.uint8(0x80), np.uint8(7)).values.item() == 1
  assert exec_alu(Ops.SHL, dtypes.uint8, np.uint8(0xFF), np.uint8(4)).values.item() == 0xF0
  assert exec_alu(Ops.SHL, I32, i32(1, 1), i32(32, -1)).undefined.tolist() == [True, True]
