"""CMPLT and CMPNE (result bool): by value on ints; IEEE 754 on floats (NaN < x is false, NaN != x is true, -0 == +0).

Rule: alu.compare (refimpl/emulator/alu.py; SPEC.md "Rules", `compare`: CMPLT CMPNE). Decision row: "CMPLT / CMPNE"
(SPEC.md "Decisions"). On bool they are in the "bool" row (test_bool.py); test_int_sweeps.py sweeps them with every other
int op. Backend tests: refimpl/conformance/rules/test_compare.py. Oracles: Python ints (ints.py), Python's IEEE float
comparisons.
"""
from __future__ import annotations

import numpy as np
import pytest

from refimpl.emulator import alu
from refimpl.emulator.alu import exec_alu
from refimpl.ir.ops import Ops
from refimpl.testing.oracle import ARITH_FLOATS, as_floats

from .arrays import F32, f32
from .floats import DT_IDS, grid
from .ints import INT8_IDS, INT8S, every_8bit_pair

RULES = (alu.compare,)
DECISIONS = {"CMPLT / CMPNE": "test_decision_cmplt_cmpne_ieee"}

@pytest.mark.parametrize("dt", INT8S, ids=INT8_IDS)
@pytest.mark.parametrize("op", [Ops.CMPLT, Ops.CMPNE])
def test_every_8bit_pair_against_python_ints(op, dt):
  """Rule: CMPLT and CMPNE on ints compare by value (signed or unsigned per the dtype). All 65536 pairs."""
  assert every_8bit_pair(op, dt) == []

@pytest.mark.parametrize("dt", ARITH_FLOATS, ids=DT_IDS)
def test_cmplt_cmpne_are_ieee_predicates(dt):
  """Rule: CMPLT is IEEE's ordered less-than (false with a NaN), CMPNE is IEEE's not-equal (true with a NaN); -0 == +0.
  Oracle: Python float comparisons, which are IEEE's."""
  a, b = grid(dt)
  lt, ne = exec_alu(Ops.CMPLT, dt, a, b), exec_alu(Ops.CMPNE, dt, a, b)
  assert lt.values.dtype == np.bool_ and lt.loose is None and ne.loose is None
  xs, ys = as_floats(a), as_floats(b)
  assert lt.values.tolist() == [x < y for x, y in zip(xs, ys)]
  assert ne.values.tolist() == [x != y for x, y in zip(xs, ys)]

def test_decision_cmplt_cmpne_ieee():
  """CMPLT/CMPNE: IEEE: NaN < x is false, NaN != x is true, -0 == +0."""
  a, b = f32(np.nan, 1, np.nan, -0.0), f32(1, np.nan, np.nan, 0)
  assert exec_alu(Ops.CMPLT, F32, a, b).values.tolist() == [False, False, False, False]
  assert exec_alu(Ops.CMPNE, F32, a, b).values.tolist() == [True, True, True, False]
