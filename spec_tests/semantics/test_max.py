"""MAX: the larger on ints, OR on bool; on floats NaN if either input is NaN, and max(+0, -0) is the allowed set
{+0, -0} (reference +0, loose).

Rule: alu.maximum (refimpl/emulator/alu.py; SPEC.md "Rules", `maximum`: MAX). Decision row: "MAX (floats)" (SPEC.md
"Decisions"). MAX on bool is in the "bool" row (test_bool.py); test_int_sweeps.py sweeps MAX with every other int op.
Backend tests: refimpl/conformance/rules/test_max.py. Oracles: Python ints (ints.py), Python's IEEE float comparison.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from refimpl.emulator import alu
from refimpl.emulator.alu import allowed_results, exec_alu
from refimpl.ir.ops import Ops
from refimpl.testing.oracle import ARITH_FLOATS, as_floats, same, signbit

from .arrays import F32, f32
from .floats import DT_IDS, grid
from .ints import INT8_IDS, INT8S, every_8bit_pair

RULES = (alu.maximum,)
DECISIONS = {"MAX (floats)": "test_decision_max_nan_and_signed_zeros"}

@pytest.mark.parametrize("dt", INT8S, ids=INT8_IDS)
@pytest.mark.parametrize("op", [Ops.MAX])
def test_every_8bit_pair_against_python_ints(op, dt):
  """Rule: MAX on ints is the larger. All 65536 pairs."""
  assert every_8bit_pair(op, dt) == []

@pytest.mark.parametrize("dt", ARITH_FLOATS, ids=DT_IDS)
def test_max_nan_if_either_and_zero_sign_allowed_set(dt):
  """Rule: MAX is NaN if either input is NaN, else the larger; max(+0, -0) is the allowed set {+0, -0} with +0 the
  reference value (loose), max(-0, -0) = -0 and max(+0, +0) = +0 exactly."""
  a, b = grid(dt)
  out = exec_alu(Ops.MAX, dt, a, b)
  plus, minus = allowed_results(Ops.MAX, dt, a, b)
  for i, (x, y) in enumerate(zip(as_floats(a), as_floats(b))):
    got, p, q = as_floats(out.values[i])[0], as_floats(plus[i])[0], as_floats(minus[i])[0]
    loose = out.loose is not None and bool(out.loose[i])
    if math.isnan(x) or math.isnan(y): assert math.isnan(got) and loose, (x, y)
    elif x == 0 and y == 0 and signbit(x) != signbit(y): assert (got, signbit(p), signbit(q), loose) == (0, False, True, True)
    else:
      want = x if x > y else y  # Python's float comparison is IEEE's
      assert same(got, want) and same(p, want) and same(q, want) and not loose, (x, y, got)

def test_decision_max_nan_and_signed_zeros():
  """MAX (floats): NaN if either input is NaN; max(+0, -0) may be +0 or -0."""
  out = exec_alu(Ops.MAX, F32, f32(np.nan, 1, 0, -0.0, -0.0), f32(1, np.nan, -0.0, 0, -0.0))
  v = out.values
  assert np.isnan(v[:2]).all() and (v[2:] == 0).all() and np.signbit(v[4])
  assert out.loose.tolist() == [True, True, True, True, False]
  plus, minus = allowed_results(Ops.MAX, F32, f32(0, -0.0), f32(-0.0, 0))
  assert np.signbit(plus).tolist() == [False, False] and np.signbit(minus).tolist() == [True, True]
