"""ADD SUB MUL NEG MULACC on ints: two's complement wrap-around, every width, signed included.

Rule: alu.arith (refimpl/emulator/alu.py; SPEC.md "Rules", `arith`: ADD SUB MUL NEG), and the int part of alu.mulacc
(its home: test_mulacc.py). Decision row: "int ADD SUB MUL NEG MULACC" (SPEC.md "Decisions"). arith on floats is
tested in test_float_arith.py, on bool in test_bool.py; test_int_sweeps.py sweeps every int op together. Backend tests:
refimpl/conformance/rules/test_int_wrap.py. Oracle: Python ints wrapped explicitly (ints.py).
"""
from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

from refimpl.dtype import dtypes, to_np
from refimpl.emulator import alu
from refimpl.emulator.alu import exec_alu
from refimpl.ir.ops import Ops

from .ints import IDS, INT8_IDS, INT8S, INTS, every_8bit_pair, int_edges, wrap

RULES = (alu.arith,)
DECISIONS = {"int ADD SUB MUL NEG MULACC": "test_decision_int_add_sub_mul_neg_mulacc_wrap"}
ALSO = (alu.mulacc,)

@pytest.mark.parametrize("dt", INT8S, ids=INT8_IDS)
@pytest.mark.parametrize("op", [Ops.ADD, Ops.SUB, Ops.MUL])
def test_every_8bit_pair_against_python_ints(op, dt):
  """Rule: wrap-around ADD SUB MUL. All 65536 pairs."""
  assert every_8bit_pair(op, dt) == []

@pytest.mark.parametrize("dt", INTS, ids=IDS)
def test_neg_and_mulacc_wrap(dt):
  """Rule: NEG x = wrap(-x) (NEG MIN = MIN; unsigned: 2^bits - x); MULACC a*b+c = wrap(a*b + c)."""
  e = int_edges(dt)
  x = np.array(e, dtype=to_np(dt))
  assert exec_alu(Ops.NEG, dt, x).values.tolist() == [wrap(-v, dt) for v in e]
  trip = list(itertools.product(e[::3], repeat=3))
  a, b, c = (np.array(col, dtype=to_np(dt)) for col in zip(*trip))
  assert exec_alu(Ops.MULACC, dt, a, b, c).values.tolist() == [wrap(p * q + r, dt) for p, q, r in trip]

def test_int64_and_uint64_wrap_without_warnings_for_scalars_and_arrays():
  """numpy warns on overflowing scalar int64 math; the rules wrap silently for 0-d, scalar and array operands."""
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    big = np.int64(2**62)
    assert exec_alu(Ops.MUL, dtypes.int64, big, np.int64(4)).values.item() == 0
    assert exec_alu(Ops.ADD, dtypes.int64, np.int64(2**63 - 1), 1).values.item() == -(2**63)
    assert exec_alu(Ops.SUB, dtypes.uint64, np.uint64(0), np.uint64(1)).values.item() == 2**64 - 1
    assert exec_alu(Ops.NEG, dtypes.int64, np.array(-(2**63), dtype=np.int64)).values.item() == -(2**63)
    assert exec_alu(Ops.MUL, dtypes.uint64, np.array([2**63], dtype=np.uint64), np.uint64(2)).values.tolist() == [0]

def test_decision_int_add_sub_mul_neg_mulacc_wrap():
  """int ADD SUB MUL NEG MULACC: two's complement wrap-around, every width, signed included."""
  for dt in dtypes.ints:
    npdt, bits = to_np(dt), 8 * dt.itemsize
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if dt in dtypes.sints else (0, 2**bits - 1)
    assert exec_alu(Ops.ADD, dt, np.array([hi], npdt), np.array([1], npdt)).values.tolist() == [lo]
    assert exec_alu(Ops.SUB, dt, np.array([lo], npdt), np.array([1], npdt)).values.tolist() == [hi]
    half = np.array([2 ** (bits // 2)], npdt)
    assert exec_alu(Ops.MUL, dt, half, half).values.tolist() == [0]  # 2^bits wraps to 0
    assert exec_alu(Ops.MULACC, dt, half, half, np.array([hi], npdt)).values.tolist() == [hi]
    assert exec_alu(Ops.NEG, dt, np.array([lo], npdt)).values.tolist() == [lo]
