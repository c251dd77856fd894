"""Float ADD SUB MUL FDIV RECIP SQRT NEG: the exact result rounded once to nearest even in the op's dtype, IEEE 754
specials and signed zeros, subnormals kept.

Rules: alu.float_arith (FDIV RECIP SQRT; refimpl/emulator/alu.py; SPEC.md "Rules", `float_arith`: FDIV RECIP SQRT) and
the float part of alu.arith (ADD SUB MUL NEG; SPEC.md "Rules", `arith`; its home: test_int_wrap.py). Decision row:
"float ADD SUB MUL FDIV RECIP SQRT NEG" (SPEC.md "Decisions"). Backend tests: refimpl/conformance/rules/test_float_arith.py.
Oracle: exact rational arithmetic (refimpl.testing.oracle, itself tested in test_oracle.py) rounded once (floats.py).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from refimpl.dtype import dtypes, to_np
from refimpl.emulator import alu
from refimpl.emulator.alu import exec_alu
from refimpl.ir.ops import Ops
from refimpl.testing.oracle import ARITH_FLOATS, FMT, as_floats, edge_bits, float_bits, from_bits, random_bits, signbit

from .arrays import BF16, F16, F32, f32
from .floats import DT_IDS, ORACLE, grid, mismatches

RULES = (alu.float_arith,)
DECISIONS = {"float ADD SUB MUL FDIV RECIP SQRT NEG": "test_decision_float_arith_correctly_rounded"}
ALSO = (alu.arith,)

@pytest.mark.parametrize("dt", ARITH_FLOATS, ids=DT_IDS)
@pytest.mark.parametrize("op", [Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV])
def test_float_binary_correctly_rounded_on_edge_grid(op, dt):
  """Rule: ADD SUB MUL FDIV give the exact result rounded once to nearest even in dt, IEEE specials, signed zeros."""
  assert mismatches(op, dt, *grid(dt)) == []

@pytest.mark.parametrize("dt", ARITH_FLOATS, ids=DT_IDS)
@pytest.mark.parametrize("op", [Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV])
def test_float_binary_correctly_rounded_random_bits(op, dt):
  """Rule as above, on 2000 uniformly random bit-pattern pairs (all exponents, subnormals, NaN payloads)."""
  assert mismatches(op, dt, random_bits(dt, 2000, 10 + op.value), random_bits(dt, 2000, 20 + op.value)) == []

@pytest.mark.parametrize("dt", ARITH_FLOATS, ids=DT_IDS)
@given(data=st.data())
def test_float_arith_correctly_rounded_hypothesis(dt, data):
  """Rule as above for every exact float op, on edge-biased hypothesis batches."""
  op = data.draw(st.sampled_from(sorted(ORACLE, key=lambda o: o.value)))
  n = 1 if op in (Ops.SQRT, Ops.RECIP, Ops.NEG) else 2
  lanes = data.draw(st.lists(st.tuples(*[float_bits(dt)] * n), min_size=1, max_size=16))
  assert mismatches(op, dt, *(from_bits(col, dt) for col in zip(*lanes))) == []

@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("op", [Ops.SQRT, Ops.RECIP, Ops.NEG])
def test_unary_correctly_rounded_every_16bit_input(op, dt):
  """Rule: SQRT (via integer square roots), RECIP (1/x) and NEG, every one of the 65536 inputs."""
  assert mismatches(op, dt, np.arange(2**16, dtype=np.uint16).view(FMT[dt].np)) == []

@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("op", [Ops.SQRT, Ops.RECIP, Ops.NEG])
def test_unary_correctly_rounded_edges_and_random(op, dt):
  xs = np.concatenate([from_bits(edge_bits(dt), dt), random_bits(dt, 3000, op.value)])
  assert mismatches(op, dt, xs) == []

def test_sqrt_of_negative_zero_is_negative_zero_and_of_negative_is_nan():
  """Rule (IEEE 754): SQRT(-0) = -0; SQRT(x < 0) = NaN (loose: its payload is unspecified)."""
  for dt in ARITH_FLOATS:
    out = exec_alu(Ops.SQRT, dt, np.array([-0.0, -1.0, 4.0]).astype(FMT[dt].np))
    v = as_floats(out.values)
    assert signbit(v[0]) and v[0] == 0 and math.isnan(v[1]) and v[2] == 2.0
    assert out.loose.tolist() == [False, True, False]

def test_subnormals_are_kept():
  """Rule: no flush to zero: the smallest subnormal survives arithmetic, and halving the smallest normal is exact."""
  for dt in ARITH_FLOATS:
    f = FMT[dt]
    tiny, minnorm = np.array([float(f.minsub)]).astype(f.np), np.array([2.0 ** f.emin]).astype(f.np)
    assert as_floats(exec_alu(Ops.ADD, dt, tiny, tiny).values) == [float(2 * f.minsub)]
    assert as_floats(exec_alu(Ops.MUL, dt, minnorm, np.array([0.5]).astype(f.np)).values) == [2.0 ** (f.emin - 1)]

def test_decision_float_arith_correctly_rounded():
  """Float ADD SUB MUL FDIV RECIP SQRT NEG: the exact result rounded once to nearest even in the op's dtype; subnormals
  kept. float16: 1 + 2^-11 is a tie (-> 1), 1 + 3*2^-11 rounds up to 1 + 2^-9... (ties to the even neighbour 1 + 2^-9);
  half the smallest subnormal is a tie (-> 0), 3/2 of it goes to 2 * it. bfloat16: 1 + 2^-8 ties to 1.
  float32: 1/3 is 0x3EAAAAAB (the exact 1/3 = 0x3EAAAAAA.AAA..., rounded up)."""
  one = lambda dt, *v: np.array(v).astype(to_np(dt))
  assert exec_alu(Ops.ADD, F16, one(F16, 1, 1), one(F16, 2**-11, 3 * 2**-11)).values.tolist() == [1.0, 1 + 2**-9]
  tiny = one(F16, 2**-24)
  assert exec_alu(Ops.MUL, F16, tiny, one(F16, 0.5)).values.tolist() == [0.0]
  assert exec_alu(Ops.MUL, F16, tiny, one(F16, 1.5)).values.tolist() == [2**-23]
  assert float(exec_alu(Ops.ADD, BF16, one(BF16, 1), one(BF16, 2**-8)).values[0]) == 1.0
  assert exec_alu(Ops.FDIV, F32, f32(1), f32(3)).values.view(np.uint32).item() == 0x3EAAAAAB
  assert exec_alu(Ops.RECIP, F32, f32(3)).values.view(np.uint32).item() == 0x3EAAAAAB
  assert exec_alu(Ops.SQRT, dtypes.float64, np.array([2.0])).values.item() == float.fromhex("0x1.6a09e667f3bcdp+0")
  assert np.signbit(exec_alu(Ops.NEG, F32, f32(0)).values).item()
