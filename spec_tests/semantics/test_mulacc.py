"""MULACC (a * b + c): on floats the allowed set {fused, unfused}, the fused result the reference; on ints a wrap, on
bool (a AND b) OR c.

Rule: alu.mulacc (refimpl/emulator/alu.py; SPEC.md "Rules", `mulacc`: MULACC). Decision row: "MULACC (floats)" (SPEC.md
"Decisions"). The int part is in the "int ADD SUB MUL NEG MULACC" row (test_int_wrap.py), the bool part in the "bool" row
(test_bool.py). Backend tests: refimpl/conformance/rules/test_mulacc.py. Oracle: exact fma and MUL-then-ADD, each rounded
(refimpl.testing.oracle).
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from refimpl.dtype import dtypes
from refimpl.emulator import alu
from refimpl.emulator.alu import allowed_results, exec_alu
from refimpl.ir.ops import Ops
from refimpl.testing.oracle import ARITH_FLOATS, FMT, UINT, add, as_floats, edge_values, fma, mul, random_bits, rne, same

from .arrays import F32, f32
from .floats import DT_IDS

RULES = (alu.mulacc,)
DECISIONS = {"MULACC (floats)": "test_decision_mulacc_allowed_set"}

def fused_and_unfused(dt, a: float, b: float, c: float) -> tuple[float, float]:
  f = FMT[dt]
  return rne(fma(a, b, c), f), rne(add(rne(mul(a, b), f), c), f)

def check_mulacc(dt, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> list[str]:
  """The reference value is the fused result; allowed_results gives [fused, unfused]; a lane is loose exactly when the
  two differ or the result is NaN."""
  out = exec_alu(Ops.MULACC, dt, a, b, c)
  fused, unfused = allowed_results(Ops.MULACC, dt, a, b, c)
  loose = np.zeros(a.shape, bool) if out.loose is None else out.loose
  bad = []
  for i, (x, y, z) in enumerate(zip(as_floats(a), as_floats(b), as_floats(c))):
    wf, wu = fused_and_unfused(dt, x, y, z)
    got = (as_floats(out.values[i])[0], as_floats(fused[i])[0], as_floats(unfused[i])[0])
    if not (same(got[0], wf) and same(got[1], wf) and same(got[2], wu)) or bool(loose[i]) != (not same(wf, wu) or math.isnan(wf)):
      bad.append(f"MULACC({x!r}, {y!r}, {z!r}) = {got}, want fused {wf!r}, unfused {wu!r}, loose {bool(loose[i])}")
  return bad[:5]

@pytest.mark.parametrize("dt", ARITH_FLOATS, ids=DT_IDS)
def test_mulacc_allowed_set_fused_or_unfused_edges(dt):
  """Rule: MULACC on floats is the allowed set {fused (one rounding), unfused (MUL then ADD, each rounded)}."""
  vals = edge_values(dt)[::2] + [math.inf, math.nan, -0.0]
  trip = np.array(list(itertools.product(vals, repeat=3)), dtype=np.float64).astype(FMT[dt].np)
  assert check_mulacc(dt, trip[:, 0], trip[:, 1], trip[:, 2]) == []

@pytest.mark.parametrize("dt", ARITH_FLOATS, ids=DT_IDS)
def test_mulacc_allowed_set_random_and_cancelling(dt):
  """As above on random bits, and on c = -(a*b rounded) (+- a few ulps), where fused and unfused differ most."""
  f = FMT[dt]
  rng = np.random.default_rng(7)
  a = np.concatenate([random_bits(dt, 1500, 1), (rng.standard_normal(1500) * 4).astype(f.np)])
  b = np.concatenate([random_bits(dt, 1500, 2), (rng.standard_normal(1500) * 4).astype(f.np)])
  c = np.concatenate([random_bits(dt, 1500, 3), np.negative(exec_alu(Ops.MUL, dt, a[1500:], b[1500:]).values)])
  nudge = rng.integers(-2, 3, 1500).astype(np.int64)
  c[1500:] = (c[1500:].view(UINT[f.bits]).astype(np.int64) + nudge).astype(UINT[f.bits]).view(f.np)
  assert check_mulacc(dt, a, b, c) == []

def test_mulacc_float64_fused_at_extreme_exponents():
  """The float64 fused path near overflow, underflow and with huge cancellation (where Dekker's method cannot run and
  the emulator uses exact rationals) against the oracle."""
  rng = np.random.default_rng(8)
  m = lambda n: rng.uniform(1, 2, n) * rng.choice([-1.0, 1.0], n)
  n = 400
  a = np.concatenate([m(n) * 2.0 ** rng.integers(500, 1023, n), m(n) * 2.0 ** rng.integers(-1074, -500, n), m(n)])
  b = np.concatenate([m(n) * 2.0 ** rng.integers(0, 600, n), m(n) * 2.0 ** rng.integers(-300, 0, n), m(n) * 2.0 ** -1040])
  c = np.concatenate([m(n) * 2.0 ** rng.integers(900, 1024, n), m(n) * 2.0 ** rng.integers(-1074, -1000, n),
                      -(a[2 * n:] * b[2 * n:])])
  assert check_mulacc(dtypes.float64, a, b, c) == []

def test_mulacc_fused_differs_from_unfused_where_the_product_rounds():
  """Rule: (1+u)(1-u) - 1 = -u^2 exactly when fused; unfused the product rounds to 1 and the result is 0 (u = 2^(1-p))."""
  for dt in ARITH_FLOATS:
    u = 2.0 ** (1 - FMT[dt].p)
    a, b, c = (np.array([v]).astype(FMT[dt].np) for v in (1 + u, 1 - u, -1.0))
    fused, unfused = allowed_results(Ops.MULACC, dt, a, b, c)
    assert as_floats(fused) == [-u * u] and as_floats(unfused) == [0.0]
    assert exec_alu(Ops.MULACC, dt, a, b, c).loose.tolist() == [True]

def test_decision_mulacc_allowed_set():
  """MULACC (floats): allowed set {fused, unfused}; fused is the reference. (1+2^-23)(1-2^-23) - 1 is -2^-46 fused and
  0 unfused (the product rounds to 1)."""
  a, b, c = f32(1 + 2**-23), f32(1 - 2**-23), f32(-1)
  out = exec_alu(Ops.MULACC, F32, a, b, c)
  assert out.values.tolist() == [-(2.0**-46)] and out.loose.tolist() == [True]
  assert [r.tolist() for r in allowed_results(Ops.MULACC, F32, a, b, c)] == [[-(2.0**-46)], [0.0]]
  exact = exec_alu(Ops.MULACC, F32, f32(2), f32(3), f32(1))
  assert exact.values.tolist() == [7.0] and exact.loose is None
