"""Float ALU rules against exact rational arithmetic (test_semantics_oracle): ADD SUB MUL FDIV RECIP SQRT NEG are
correctly rounded in the op's dtype; MULACC's allowed set is {fused, unfused}; MAX and the comparisons follow IEEE 754."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from refimpl.dtype import dtypes
from refimpl.emulator.alu import allowed_results, exec_alu
from refimpl.ir.dtype_text import dtype_to_str
from refimpl.ir.ops import Ops
from refimpl.testing.oracle import (
  ARITH_FLOATS,
  FMT,
  UINT,
  add,
  as_floats,
  div,
  edge_bits,
  edge_values,
  float_bits,
  fma,
  from_bits,
  mul,
  random_bits,
  rne,
  rne_any,
  same,
  signbit,
  sqrt,
  sub,
)

ORACLE = {Ops.ADD: add, Ops.SUB: sub, Ops.MUL: mul, Ops.FDIV: div, Ops.SQRT: sqrt, Ops.RECIP: lambda x: div(1.0, x),
          Ops.NEG: lambda x: -x}
DT_IDS = [dtype_to_str(dt) for dt in ARITH_FLOATS]

def mismatches(op, dt, *arrays) -> list[str]:
  """Lanes where exec_alu differs from the oracle rounded to dt (values and sign of zero; any NaN for NaN), or where a
  NaN lane is not marked loose / a non-NaN lane is."""
  out = exec_alu(op, dt, *arrays)
  got, cols = as_floats(out.values), [as_floats(a) for a in arrays]
  loose = np.zeros(len(got), bool) if out.loose is None else out.loose.reshape(-1)
  bad = []
  for i, (g, *xs) in enumerate(zip(got, *cols)):
    want = rne_any(ORACLE[op](*xs), FMT[dt])
    if not same(g, want) or bool(loose[i]) != math.isnan(want): bad.append(f"{op.name}{tuple(xs)} = {g!r}, want {want!r}")
  return bad[:5]

def grid(dt, n: int = 2) -> list[np.ndarray]:
  """Every n-tuple of edge values of dt, as n arrays."""
  vals = np.array(edge_values(dt), dtype=np.float64).astype(FMT[dt].np)
  return [np.array(c, dtype=FMT[dt].np) for c in zip(*itertools.product(vals, repeat=n))]

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

# ---- MULACC ----

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

# ---- MAX and comparisons ----

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

def test_float_results_are_loose_only_where_nan():
  """Looseness: an exact float op marks exactly its NaN lanes loose (a produced NaN's payload is unspecified)."""
  for dt in ARITH_FLOATS:
    a, b = (np.array(v).astype(FMT[dt].np) for v in ([1.0, math.inf, 0.0, 2.0], [2.0, -math.inf, 0.0, 0.0]))
    assert exec_alu(Ops.ADD, dt, a, b).loose.tolist() == [False, True, False, False]
    assert exec_alu(Ops.FDIV, dt, a, b).loose.tolist() == [False, True, True, False]
    assert exec_alu(Ops.MUL, dt, a[:1], b[:1]).loose is None
