"""EXP2, LOG2, SIN (floats only): tolerance. The reference value is the correctly rounded result (checked against higher
precision that shares no code with the emulator: Python's math on float64 for float32 and narrower, `decimal` with 50+
digits and a Gauss-Legendre pi for float64), special values are exact, and the lanes marked loose are exactly the
tolerance lanes; the ULP bounds are no looser than OpenCL's full profile.

Rule: alu.transcendental (refimpl/emulator/alu.py and refimpl/emulator/reference.py; SPEC.md "Rules", `transcendental`:
EXP2 LOG2 SIN, and "Tolerances"). Decision row: "EXP2 LOG2 SIN" (SPEC.md "Decisions"). Backend tests:
refimpl/conformance/rules/test_transcendental.py.
"""
from __future__ import annotations

import decimal
import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

from refimpl.dtype import dtypes
from refimpl.emulator import alu, reference
from refimpl.emulator.alu import exec_alu
from refimpl.ir.ops import GroupOp, Ops
from refimpl.spec import ULP_BOUNDS, kind, ulp_bound
from refimpl.testing.oracle import FMT, as_floats, edge_values, exponent, random_bits, rne, same

from .arrays import F32, f32

LD = np.dtype(np.longdouble)

RULES = (alu.transcendental,)
DECISIONS = {"EXP2 LOG2 SIN": "test_decision_exp2_log2_sin_tolerance"}

OPS = (Ops.EXP2, Ops.LOG2, Ops.SIN)
FLOATS = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)
MATH = {Ops.EXP2: math.exp2, Ops.LOG2: math.log2, Ops.SIN: math.sin}

def math_f64(op, x: float) -> float:
  """C99 Annex F special values, else Python's math (glibc: < 1 ulp of float64)."""
  if math.isnan(x): return math.nan
  if op is Ops.LOG2:
    if x < 0: return math.nan
    if x == 0: return -math.inf
  if op is Ops.SIN and math.isinf(x): return math.nan
  try: return MATH[op](x)
  except OverflowError: return math.inf

def ulps(got: float, exact: Fraction, dt) -> float:
  """|got - exact| in ulps of dt at the exact value (the spacing of dt's binade holding it, subnormal spacing below)."""
  f = FMT[dt]
  if exact == 0: return 0.0 if got == 0 else math.inf
  q = Fraction(2) ** (max(exponent(abs(exact)), f.emin) - f.p + 1)
  return float(abs(Fraction(got) - exact) / q) if math.isfinite(got) else math.inf

def misrounded(op, dt, x) -> list:
  """(input, reference, correctly rounded value) for each input whose reference is not the float64 math result rounded
  once to dt (float64 math is far more precise than dt's half ulp for dt <= float32)."""
  got = as_floats(exec_alu(op, dt, x).values)
  bad = []
  for g, v in zip(got, as_floats(x)):
    y = math_f64(op, v)
    want = rne(y if not math.isfinite(y) or y == 0 else Fraction(y), FMT[dt])
    if not same(g, want): bad.append((v, g, want))
  return bad

@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("op", OPS)
def test_reference_is_correctly_rounded_every_16bit_input(op, dt):
  """Rule: the reference is the exact result rounded to nearest even in dt. Oracle: math on float64 rounded by the
  test's own rne (float64 carries 42+ extra bits; a value that close to a float16/bfloat16 midpoint would show up as a
  mismatch here, and none occurs)."""
  x = np.arange(2**16, dtype=np.uint16).view(FMT[dt].np)
  assert misrounded(op, dt, x)[:5] == []

@pytest.mark.parametrize("op", OPS)
def test_reference_is_correctly_rounded_float32(op):
  """As above for float32 on edge values, random bit patterns and large SIN arguments (math.sin reduces exactly)."""
  dt = dtypes.float32
  x = np.concatenate([np.array(edge_values(dt)).astype(np.float32), random_bits(dt, 4000, op.value),
                      np.float32(2.0) ** np.arange(-20, 128, dtype=np.float32), np.float32([1e10, 3e38, 16777217.0, 1e-40])])
  assert misrounded(op, dt, x)[:5] == []

# ---- float64: a decimal oracle ----

def gauss_legendre_pi(digits: int) -> Decimal:
  with decimal.localcontext() as ctx:
    ctx.prec = digits + 10
    a, b, t, p = Decimal(1), 1 / Decimal(2).sqrt(), Decimal(1) / 4, Decimal(1)
    for _ in range(int(math.log2(digits)) + 3):
      an = (a + b) / 2
      b, t, p, a = (a * b).sqrt(), t - p * (a - an) ** 2, 2 * p, an
    return +((a + b) ** 2 / (4 * t))

PI = gauss_legendre_pi(420)

def exact_decimal(op, x: float) -> Fraction | float:
  """op(x) to 50 significant digits (a Fraction), or the special value (a float)."""
  s = math_f64(op, x) if (math.isnan(x) or math.isinf(x) or x == 0 or (op is Ops.LOG2 and x < 0)) else None
  if s is not None: return s
  with decimal.localcontext() as ctx:
    ctx.prec = 50
    if op is Ops.EXP2:
      if x >= 1100: return math.inf  # far beyond float64's range: keeps decimal's exponent in bounds
      return Fraction((Decimal(x) * Decimal(2).ln()).exp()) if x > -1200 else Fraction(0)
    if op is Ops.LOG2: return Fraction(Decimal(x).ln() / Decimal(2).ln())
    ctx.prec = 420
    r = Decimal(x) % (2 * PI)  # the remainder keeps x's sign; |r| < 2 pi
    ctx.prec = 60
    total, term, k = +r, +r, 1  # Taylor series, to a term below 10^-65 of the sum
    while True:
      term, k = -term * r * r / ((k + 1) * (k + 2)), k + 2
      if abs(term) <= abs(total) * Decimal(10) ** -65: return Fraction(+total)
      total += term

def float64_samples(op) -> np.ndarray:
  rng = np.random.default_rng(op.value)
  near_pi = np.array([float(Decimal(k) * PI) for k in (1, 2, 3, 10, 355, 100000, 10**15)])
  special = {Ops.EXP2: [1023.9999999999999, 1024.0, -1022.0, -1074.0, -1074.5, -1075.0, -1075.5, 1e-300, 0.5, -0.5, 52.5],
             Ops.LOG2: [1 + 2**-52, 1 - 2**-53, 5e-324, 2.0**-1022, 1.7976931348623157e308, 3.0, 0.7],
             Ops.SIN: [1e22, 1e300, 2.0**1023 * 1.9999999999999998, 2.0**-1074, 1.5707963267948966, *near_pi,
                       *np.nextafter(near_pi, np.inf)]}[op]
  rand = rng.uniform(-1, 1, 120) * 2.0 ** rng.integers(-60, 60, 120)
  scale = {Ops.EXP2: 1100.0, Ops.LOG2: 1.0, Ops.SIN: 1.0}[op]
  if op is Ops.LOG2: rand = np.abs(rand) * 2.0 ** rng.integers(-1000, 1000, 120)
  if op is Ops.EXP2: rand = rng.uniform(-1, 1, 120) * scale
  return np.concatenate([np.array(special), -np.array(special), rand, random_bits(dtypes.float64, 60, 3 + op.value),
                         np.array(edge_values(dtypes.float64))])

@pytest.mark.parametrize("op", OPS)
def test_reference_float64_against_decimal(op):
  """Rule: the float64 reference is within 0.5 ulp + 2^-9 ulp of the exact value (module docstring of
  refimpl/emulator/reference.py); in practice it is the correctly rounded value on every sample here, hard cases
  included (sin of the doubles nearest k*pi, sin(1e22), exp2 at the underflow and overflow edges, log2 near 1)."""
  dt = dtypes.float64
  x = float64_samples(op)
  got = as_floats(exec_alu(op, dt, x).values)
  worst, bad = 0.0, []
  for g, v in zip(got, as_floats(x)):
    y = exact_decimal(op, v)
    want = rne(y, FMT[dt])
    if isinstance(y, float) or not math.isfinite(want): ok = same(g, want)
    else:
      e = ulps(g, y, dt)
      worst, ok = max(worst, e), e <= 0.5 + 2**-9
    if not ok: bad.append((v, g, want))
  assert bad[:5] == [] and worst <= 0.5 + 2**-9

def test_sin_of_1e22_and_of_double_pi():
  """Published values: sin(1e22) = -0.8522008497671888017727... (Ng, "Argument reduction for huge arguments", 1992);
  sin(M_PI) = 1.2246467991473532e-16 (M_PI is pi - 1.2246...e-16). An x87 fsin would give 1.2246063538223773e-16."""
  out = exec_alu(Ops.SIN, dtypes.float64, np.array([1e22, math.pi]))
  assert out.values.tolist() == [-0.8522008497671888, 1.2246467991473532e-16]

def test_decimal_fallback_agrees_with_the_oracle():
  """reference.decimal_reference (used where long double has no extra precision) on a float64 sample."""
  for op in OPS:
    for v in float64_samples(op)[::5].tolist():
      y = exact_decimal(op, v)
      assert same(reference.decimal_reference(op, v), rne(y, FMT[dtypes.float64])), (op, v)

def _long_doubles_near_float32_midpoints(rng: np.random.Generator) -> np.ndarray:
  """Long doubles that test a rounding into float32: each float32 midpoint (between a random float32 and the next one
  up, normal and subnormal, and between the largest finite and 2^128) itself and one long double ulp either side, and
  random long doubles of more significand bits than float64 holds, of both signs."""
  a = np.concatenate([rng.standard_normal(200) * 2.0 ** rng.integers(-120, 120, 200),  # normal
                      rng.integers(1, 2**23, 100) * 2.0 ** -149,  # subnormal
                      [float(np.finfo(np.float32).max)]]).astype(np.float32)
  with np.errstate(over="ignore"):
    b = np.nextafter(a, np.float32(np.inf))
  ends = np.where(np.isinf(b), np.longdouble(2.0) ** 128, b.astype(LD))
  mids = (a.astype(LD) + ends) / 2  # exact: a long double holds one bit more than float32 and far more range
  near = np.concatenate([mids, np.nextafter(mids, LD.type(np.inf)), np.nextafter(mids, LD.type(-np.inf))])
  spread = rng.standard_normal(300).astype(LD) * (1 + rng.standard_normal(300).astype(LD) * np.longdouble(2.0) ** -40)
  return np.concatenate([near, -near, spread])

def test_reference_rounds_a_long_double_once_into_float32():
  """Rule: a long double reference value is rounded once, to nearest even, into float32 (reference.from_longdouble:
  numpy's cast where it rounds once, `F32_IN_ONE_CAST`, else through float64 rounded to odd): on values at and one
  long double ulp either side of float32 midpoints, and random ones, the result is the exact value's rounding."""
  x = _long_doubles_near_float32_midpoints(np.random.default_rng(5))
  got = as_floats(reference.from_longdouble(x, dtypes.float32))
  want = [rne(Fraction(*v.as_integer_ratio()), FMT[dtypes.float32]) for v in x]
  bad = [(repr(v), g, w) for v, g, w in zip(x, got, want) if not same(g, w)]
  assert bad[:5] == []

# ---- special values and looseness ----

SPECIAL = {  # input -> exact result (C99 Annex F)
  Ops.EXP2: [(0.0, 1.0), (-0.0, 1.0), (-math.inf, 0.0), (math.inf, math.inf)],
  Ops.LOG2: [(0.0, -math.inf), (-0.0, -math.inf), (1.0, 0.0), (math.inf, math.inf), (-1.0, math.nan), (-math.inf, math.nan)],
  Ops.SIN: [(0.0, 0.0), (-0.0, -0.0), (math.inf, math.nan), (-math.inf, math.nan)],
}

@pytest.mark.parametrize("dt", FLOATS, ids=["f16", "bf16", "f32", "f64"])
@pytest.mark.parametrize("op", OPS)
def test_special_values_are_exact(op, dt):
  """Rule: special values are exact (not loose), except that a NaN result is loose for its payload; NaN in, NaN out."""
  xs, want = zip(*SPECIAL[op], (math.nan, math.nan))
  out = exec_alu(op, dt, np.array(xs).astype(FMT[dt].np))
  assert all(same(g, w) for g, w in zip(as_floats(out.values), want))
  assert (out.loose is not None) and out.loose.tolist() == [math.isnan(w) for w in want]

@pytest.mark.parametrize("dt", FLOATS, ids=["f16", "bf16", "f32", "f64"])
def test_exp2_overflow_and_underflow_thresholds_are_exact(dt):
  """Rule: EXP2(x) for x >= emax + 1 is +inf and for x <= emin - p is +0, exactly (2^x is beyond the largest finite, or
  at most half the smallest subnormal); just inside those thresholds the lanes are tolerance lanes."""
  f = FMT[dt]
  emax = exponent(f.maxf)
  x = np.array([emax + 1, emax + 2, f.emin - f.p, f.emin - f.p - 1, emax + 0.5, f.emin - f.p + 1]).astype(f.np)
  out = exec_alu(Ops.EXP2, dt, x)
  assert as_floats(out.values)[:4] == [math.inf, math.inf, 0.0, 0.0]
  assert out.loose.tolist() == [False, False, False, False, True, True]

def test_ordinary_lanes_are_loose():
  """Every transcendental lane off the special values is a tolerance lane, hence loose."""
  x = np.array([0.5, 3.0, 100.0], dtype=np.float32)
  for op in OPS: assert exec_alu(op, dtypes.float32, x).loose.tolist() == [True, True, True]

def test_ulp_bounds_no_looser_than_opencl_full_profile():
  """Rule: bounds per dtype no looser than OpenCL's full profile: float32 and float64 exp2 3, log2 3, sin 4 ulp;
  half 2/2/2 (bfloat16 has no OpenCL bound and takes half's)."""
  opencl = {dtypes.float32: (3, 3, 4), dtypes.float64: (3, 3, 4), dtypes.float16: (2, 2, 2), dtypes.bfloat16: (2, 2, 2)}
  for dt, bounds in opencl.items():
    assert all(ULP_BOUNDS[dt][op] <= b and ulp_bound(op, dt) == ULP_BOUNDS[dt][op] for op, b in zip(OPS, bounds))
    assert all(kind(op, dt) == "tolerance" for op in OPS)

def test_decision_exp2_log2_sin_tolerance():
  """EXP2 LOG2 SIN: tolerance against a correctly rounded reference; special values exact. The reference of exp2(0.5)
  in float32 is sqrt(2) rounded (0x3FB504F3), of log2(3) 0x3FCAE00D, of sin(1) 0x3F576AA4."""
  out = [exec_alu(op, F32, f32(x)) for op, x in ((Ops.EXP2, 0.5), (Ops.LOG2, 3), (Ops.SIN, 1))]
  assert [o.values.view(np.uint32).item() for o in out] == [0x3FB504F3, 0x3FCAE00D, 0x3F576AA4]
  assert all(o.loose.tolist() == [True] for o in out)
  assert [kind(op, F32) for op in GroupOp.Transcendental] == ["tolerance"] * 3
  assert exec_alu(Ops.EXP2, F32, f32(0)).loose is None  # exp2(0) = 1 exactly: no loose lane
