"""Looseness: lanes from tolerance or allowed-set ops and every NaN an op produces are loose (a produced NaN's payload is
unspecified); WHERE and BITCAST move bits and are never loose by themselves.

Decision row: "looseness" (SPEC.md "Decisions"; alu.Outcome.loose, SPEC.md "Outcomes and looseness"). How looseness travels
through memory is the executor's (spec_tests/test_emulator_looseness.py), and so is how loose each element is, its
certainty level (spec_tests/test_emulator_certainty.py). Each rule's own loose lanes are tested in its file (test_max.py,
test_mulacc.py, test_transcendental.py, test_cast.py).
"""
from __future__ import annotations

import math

import numpy as np

from refimpl.dtype import dtypes
from refimpl.emulator.alu import exec_alu, exec_bitcast, exec_cast
from refimpl.ir.ops import Ops
from refimpl.testing.oracle import ARITH_FLOATS, FMT

RULES = ()
DECISIONS = {"looseness": "test_cast_of_nan_is_loose_but_bitcast_of_nan_is_not"}

def test_float_results_are_loose_only_where_nan():
  """Looseness: an exact float op marks exactly its NaN lanes loose (a produced NaN's payload is unspecified)."""
  for dt in ARITH_FLOATS:
    a, b = (np.array(v).astype(FMT[dt].np) for v in ([1.0, math.inf, 0.0, 2.0], [2.0, -math.inf, 0.0, 0.0]))
    assert exec_alu(Ops.ADD, dt, a, b).loose.tolist() == [False, True, False, False]
    assert exec_alu(Ops.FDIV, dt, a, b).loose.tolist() == [False, True, True, False]
    assert exec_alu(Ops.MUL, dt, a[:1], b[:1]).loose is None

def test_cast_of_nan_is_loose_but_bitcast_of_nan_is_not():
  """Looseness: a float cast producing NaN leaves its payload unspecified; BITCAST moves bits exactly."""
  nan = np.array([math.nan, 1.0], dtype=np.float32)
  assert exec_cast(nan, dtypes.float32, dtypes.float16).loose.tolist() == [True, False]
  assert exec_bitcast(nan, dtypes.float32, dtypes.int32).loose is None
  assert exec_alu(Ops.WHERE, dtypes.float32, np.array([True, False]), nan, nan).loose is None
