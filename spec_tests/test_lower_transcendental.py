"""The EXP2/LOG2/SIN decomposition (refimpl/lower/transcendental.py): the decomposed program verifies and holds no
transcendental, memory or loop uop it did not have; it is defined for every input (the emulator is strict); special
values come out exact; and the error against a correctly rounded reference stays within the spec's ULP bounds
(refimpl.spec.ULP_BOUNDS) and within the decomposition's own tighter claim, MAX_ULP (1 ulp): exhaustively for float16 and
bfloat16, on ~200k inputs per op for float32 and a decimal-referenced sample for float64 (both with edge values, huge
SIN arguments and the hardest reductions).

Programs run on the emulator in strict mode (refimpl.emulator.machine.emulate), so running every input also checks that
no uop of a decomposition is undefined for any lane."""
import math
from decimal import Decimal, localcontext

import numpy as np
import pytest
from hypothesis import given

from refimpl.dtype import dtypes, to_np
from refimpl.emulator.alu import exec_cast
from refimpl.emulator.machine import emulate
from refimpl.ir import GroupOp, Ops, ProgramBuilder, elementwise, verify
from refimpl.ir.strategies import programs
from refimpl.lower.transcendental import (
  FORMATS,
  MAX_ULP,
  decompose_transcendentals,
  ln2_fraction,
  pi_fraction,
  two_over_pi_words,
)
from refimpl.spec import ULP_BOUNDS
from refimpl.testing.ulp import decimal_value, ulp_errors

OPS = (Ops.EXP2, Ops.LOG2, Ops.SIN)
FLOATS = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)
UNSIGNED = {2: np.uint16, 4: np.uint32, 8: np.uint64}


# ***** running programs *****

def run(program, arrays):
  """The program's buffers after a strict emulator run (an undefined lane anywhere raises UndefinedBehavior)."""
  return emulate(program, [np.array(a) for a in arrays]).buffers

def decomposed(op, dt, x):
  """op(x) computed by the decomposed elementwise program."""
  p = decompose_transcendentals(elementwise(op, dt, n=x.size))
  return run(p, [np.zeros(x.size, to_np(dt)), x])[0]


# ***** inputs *****

def from_bits(bits, dt): return np.asarray(bits, np.uint64).astype(UNSIGNED[dt.itemsize]).view(to_np(dt))
def every_value(dt): return from_bits(np.arange(2 ** (8 * dt.itemsize), dtype=np.uint64), dt)

def edge_values(dt):
  """Zeros, infinities, NaNs, the extremes, and every power of two with its two neighbours."""
  ebits, mant = dtypes.finfo(dt)
  powers = [(e << mant) for e in range(1, 2 ** ebits - 1)]
  bits = [0, 1, 2, (1 << mant) - 1, (2 ** ebits - 1) << mant, ((2 ** ebits - 1) << mant) + 1, ((2 ** ebits - 1) << mant) - 1]
  bits += [b + d for b in powers for d in (-1, 0, 1)]
  sign = 1 << (8 * dt.itemsize - 1)
  return from_bits(bits + [b | sign for b in bits], dt)

# the float32 / float64 arguments closest to a multiple of pi/2 (worst cases of argument reduction, Muller,
# "Elementary Functions"; the distances, 2^-29.2 and 2^-60.9, checked by test_hard_sin_arguments_are_near_multiples)
HARD_SIN = {dtypes.float32: [16367173 * 2.0 ** 72, 16367173 * 2.0 ** 73], dtypes.float64: [6381956970095103 * 2.0 ** 797]}

def sample(op, dt, n, seed):
  """Edge values, uniform bit patterns, the op's interesting range, and (SIN) huge and hard arguments."""
  rng = np.random.default_rng(seed)
  npdt = to_np(dt)
  rand_bits = from_bits(rng.integers(0, 2 ** 63, n, dtype=np.uint64) * 2 + rng.integers(0, 2, n, dtype=np.uint64), dt)
  ranged = {Ops.EXP2: rng.uniform(-1100 if dt is dtypes.float64 else -160, 1030 if dt is dtypes.float64 else 130, n),
            Ops.LOG2: np.exp(rng.uniform(-3, 3, n)), Ops.SIN: rng.uniform(-100, 100, n) * 10.0 ** rng.integers(0, 6, n)}[op]
  xs = [edge_values(dt), rand_bits, ranged.astype(npdt)]
  if op is Ops.SIN: xs += [np.array(HARD_SIN[dt], npdt), (np.pi / 2 * np.arange(1, n // 10)).astype(npdt)]
  return np.concatenate(xs)

def errors(op, dt, x, exact=False):
  got = decomposed(op, dt, x)
  return ulp_errors(op, dt, x, got, exact=exact), got


# ***** structure *****

def vector_program(op, dt, count, n):
  b = ProgramBuilder(f"v_{op.name.lower()}")
  out, x = b.global_buf(dt, n * count), b.global_buf(dt, n * count)
  i = b.alu(Ops.MUL, b.gidx(0, n), b.const(count, dtypes.int32))
  b.store(out, i, b.alu(op, b.load(x, i, count=count)))
  return b.build()

@pytest.mark.parametrize("dt", FLOATS, ids=str)
@pytest.mark.parametrize("op", OPS, ids=lambda o: o.name)
@pytest.mark.parametrize("count", [1, 4])
def test_decomposition_verifies_and_uses_only_alu_const_cast_bitcast_where(op, dt, count):
  before = vector_program(op, dt, count, 4)
  after = decompose_transcendentals(before)
  verify(after)
  added = {Ops.CONST, Ops.VECTORIZE, Ops.CAST, Ops.BITCAST} | GroupOp.ALU
  assert not [u for u in after.uops if u.op in GroupOp.Transcendental or u.op is Ops.MULACC]
  assert {u.op for u in after.uops} - {u.op for u in before.uops} <= added
  kept = [u.op for u in after.uops if u.op not in added]
  assert kept == [u.op for u in before.uops if u.op not in added]  # no memory, loop or declaration uop added or lost
  scalar = lambda p: [(u.op, u.dtype) for u in p.uops if u.op in GroupOp.ALU and u.dtype.count != count]
  assert scalar(after) == scalar(before)  # the decomposition works on whole vectors (its ALU uops have `count` lanes)

@given(programs(max_steps=16))
def test_random_programs_decompose_into_valid_programs(p):
  """Transcendentals anywhere (in loops, IF blocks, on vectors) are replaced in place: the result verifies, has none left
  and keeps every other uop in order."""
  q = decompose_transcendentals(p)
  verify(q)
  assert not any(u.op in GroupOp.Transcendental for u in q.uops)
  if not any(u.op in GroupOp.Transcendental for u in p.uops): assert q is p
  structure = lambda prog: [(u.op, u.arg) for u in prog.uops if u.op not in GroupOp.ALU and u.op not in
                            (Ops.CONST, Ops.VECTORIZE, Ops.CAST, Ops.BITCAST)]
  assert structure(q) == structure(p)

def test_only_limits_the_dtypes_decomposed():
  b = ProgramBuilder()
  o32, o64, x32, x64 = (b.global_buf(dt, 1) for dt in (dtypes.float32, dtypes.float64, dtypes.float32, dtypes.float64))
  zero = b.const(0, dtypes.int32)
  b.store(o32, zero, b.alu(Ops.SIN, b.load(x32, zero)))
  b.store(o64, zero, b.alu(Ops.SIN, b.load(x64, zero)))
  p = decompose_transcendentals(b.build(), only={dtypes.float64})
  assert [u.dtype for u in p.uops if u.op is Ops.SIN] == [dtypes.float32]

def test_program_without_transcendentals_comes_back_unchanged():
  p = elementwise(Ops.SQRT, dtypes.float32)
  assert decompose_transcendentals(p) is p
  p = elementwise(Ops.EXP2, dtypes.float32)
  assert decompose_transcendentals(p, only={dtypes.float64}) is p

@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.float64], ids=str)
@pytest.mark.parametrize("op", OPS, ids=lambda o: o.name)
def test_vector_lanes_equal_the_scalar_decomposition(op, dt):
  x = sample(op, dt, 64, seed=1)[:256]
  x = x[: x.size // 4 * 4]
  p = decompose_transcendentals(vector_program(op, dt, 4, x.size // 4))
  vec = run(p, [np.zeros_like(x), x])[0]
  scalar = decomposed(op, dt, x)
  nan, u = np.isnan(scalar), UNSIGNED[dt.itemsize]
  assert (np.isnan(vec) == nan).all()
  np.testing.assert_array_equal(vec.view(u)[~nan], scalar.view(u)[~nan])


# ***** constants *****

def _decimal_pi(digits):
  """pi by the Gauss-Legendre (AGM) iteration, independent of the module's Machin series."""
  with localcontext() as ctx:
    ctx.prec = digits + 10
    a, b, t, p = Decimal(1), Decimal(1) / Decimal(2).sqrt(), Decimal(1) / 4, Decimal(1)
    for _ in range(int(math.log2(digits)) + 3):
      a, b, t, p = (a + b) / 2, (a * b).sqrt(), t - p * ((a - b) / 2) ** 2, 2 * p
    return (a + b) ** 2 / (4 * t)

@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.float64], ids=str)
def test_polynomial_truncation_is_below_a_twentieth_ulp(dt):
  """Each Taylor polynomial's remainder bound, relative to the function's smallest value on the reduced range, in ulps
  (an ulp of v is at least |v| * 2^-p): EXP2 on |s| <= 1/2 (Lagrange: |t|^(d+1)/(d+1)! * e^|t|, t = s ln 2, 2^s >= 2^-1/2),
  LOG2's R(z) for z <= ((sqrt2-1)/(sqrt2+1))^2 (geometric tail, relative to log(1+f) >= 2|s|), SIN and COS on
  |r| <= pi/4 (alternating series: the first omitted term; sin r >= 0.9 r, cos r >= 1/sqrt2)."""
  f = FORMATS[dt]
  ulps = 2.0 ** f.bits
  t = math.log(2) / 2
  z = ((math.sqrt(2) - 1) / (math.sqrt(2) + 1)) ** 2
  r = math.pi / 4
  bounds = {
    "exp2": t ** (f.exp2_degree + 1) / math.factorial(f.exp2_degree + 1) * math.sqrt(2) * math.sqrt(2),
    "log2": z ** (f.log_terms + 1) / (2 * f.log_terms + 3) / (1 - z),
    "sin": r ** (2 * f.sin_terms + 2) / math.factorial(2 * f.sin_terms + 3) / 0.9,
    "cos": r ** (2 * f.cos_terms + 4) / math.factorial(2 * f.cos_terms + 4) / math.sqrt(0.5)}
  assert {k: v * ulps for k, v in bounds.items() if v * ulps > 0.05} == {}

def test_two_over_pi_table_holds_the_bits_of_two_over_pi():
  words = two_over_pi_words(20)
  assert words[0] == 0  # 64 leading zero bits
  table = int("".join(f"{w:016x}" for w in words), 16)
  with localcontext() as ctx:
    ctx.prec = 450
    want = int((2 / _decimal_pi(440)) * Decimal(2) ** (64 * 19))
  assert table == want
  for f in FORMATS.values(): assert f.table == words[:len(f.table)]  # each format's table: the same bits, fewer words

def test_pi_and_ln2_are_accurate():
  with localcontext() as ctx:
    ctx.prec = 440
    pi = pi_fraction()
    assert abs(Decimal(pi.numerator) / Decimal(pi.denominator) - _decimal_pi(430)) < Decimal(10) ** -420
    ln2 = ln2_fraction()
    assert abs(Decimal(ln2.numerator) / Decimal(ln2.denominator) - Decimal(2).ln()) < Decimal(2) ** -250

def test_hard_sin_arguments_are_near_multiples_of_half_pi():
  with localcontext() as ctx:
    ctx.prec = 420
    pio2 = _decimal_pi(420) / 2
    for x, dist in ((HARD_SIN[dtypes.float32][0], 2 ** -29.2), (HARD_SIN[dtypes.float64][0], 2 ** -60.8)):
      r = Decimal(x) - (Decimal(x) / pio2).to_integral_value() * pio2
      assert abs(r) < Decimal(dist)

def test_long_double_reference_agrees_with_decimal():
  """ulp_errors' fast reference (long double) and its exact one (decimal) measure the same errors on float64."""
  x = sample(Ops.SIN, dtypes.float64, 300, seed=5)
  for op in OPS:
    got = decomposed(op, dtypes.float64, x)
    fast, exact = ulp_errors(op, dtypes.float64, x, got), ulp_errors(op, dtypes.float64, x, got, exact=True)
    finite = np.isfinite(exact)
    assert (np.isfinite(fast) == finite).all()
    assert np.abs(fast[finite] - exact[finite]).max() < 0.01

def test_ulp_errors_counts_ulps_of_the_exact_value():
  # 2^-149 is float32's least subnormal: one ulp there is 2^-149; an answer of 0 for exp2(-149) is 1 ulp off
  x = np.array([-149.0, 3.0, 0.5], np.float32)
  got = np.array([0.0, 8.0, np.nextafter(np.float32(2 ** 0.5), np.float32(2))], np.float32)
  err = ulp_errors(Ops.EXP2, dtypes.float32, x, got, exact=True)
  want_last = (Decimal(float(got[2])) - Decimal(2).sqrt()) / Decimal(2) ** -23
  np.testing.assert_allclose(err, [1.0, 0.0, float(want_last)], rtol=1e-9, atol=1e-20)
  assert ulp_errors(Ops.EXP2, dtypes.float32, np.array([128.0], np.float32), np.array([3e38], np.float32))[0] == np.inf


# ***** special values *****

INF, NAN = math.inf, math.nan
SPECIALS = {
  Ops.EXP2: [(0.0, 1.0), (-0.0, 1.0), (INF, INF), (-INF, 0.0), (NAN, NAN), (1.0, 2.0), (-1.0, 0.5), (10.0, 1024.0)],
  Ops.LOG2: [(0.0, -INF), (-0.0, -INF), (1.0, 0.0), (INF, INF), (-INF, NAN), (-1.0, NAN), (NAN, NAN), (2.0, 1.0),
             (0.5, -1.0), (1024.0, 10.0)],
  Ops.SIN: [(0.0, 0.0), (-0.0, -0.0), (INF, NAN), (-INF, NAN), (NAN, NAN)]}

def _format_specials(dt):
  """Exact results at each dtype's own boundaries: powers of two (EXP2 of ints, LOG2 of powers), overflow, underflow."""
  ebits, mant = dtypes.finfo(dt)
  emax, emin = 2 ** (ebits - 1) - 1, 2 - 2 ** (ebits - 1)
  tiny = 2.0 ** (emin - mant)
  return {
    Ops.EXP2: [(float(emax + 1), INF), (float(emax), 2.0 ** emax), (float(emin - mant), tiny), (float(emin), 2.0 ** emin),
               (float(emin - mant - 1), 0.0), (-1e4 if dt is not dtypes.float16 else -6e4, 0.0),
               (1e4 if dt is not dtypes.float16 else 6e4, INF)],
    Ops.LOG2: [(tiny, float(emin - mant)), (2.0 ** emax, float(emax)), (2.0 ** emin, float(emin))],
    Ops.SIN: [(tiny, tiny), (-tiny, -tiny), (2.0 ** emin, 2.0 ** emin)]}

@pytest.mark.parametrize("dt", FLOATS, ids=str)
@pytest.mark.parametrize("op", OPS, ids=lambda o: o.name)
def test_special_values_are_exact(op, dt):
  cases = SPECIALS[op] + _format_specials(dt)[op]
  x = np.array([c[0] for c in cases], np.float64).astype(to_np(dt))
  want = np.array([c[1] for c in cases], np.float64).astype(to_np(dt))
  got = decomposed(op, dt, x)
  u = UNSIGNED[dt.itemsize]
  ok = (got.view(u) == want.view(u)) | (np.isnan(got) & np.isnan(want))
  assert ok.all(), [(c, float(g)) for c, g, k in zip(cases, got.astype(np.float64), ok) if not k]


# ***** accuracy *****

def _check_bounds(op, dt, x, err, got):
  bound = min(ULP_BOUNDS[dt][op], MAX_ULP)
  worst = int(np.argmax(err))
  assert err[worst] <= bound, f"{op.name} {dt}: {err[worst]:.3f} ulp at x={x[worst]!r} (got {got[worst]!r}), bound {bound}"

@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16], ids=str)
@pytest.mark.parametrize("op", OPS, ids=lambda o: o.name)
def test_half_and_bfloat16_exhaustively_within_bounds(op, dt):
  x = every_value(dt)
  err, got = errors(op, dt, x)
  _check_bounds(op, dt, x, err, got)

@pytest.mark.parametrize("op", OPS, ids=lambda o: o.name)
def test_float32_sample_within_bounds(op):
  x = sample(op, dtypes.float32, 100_000, seed=2)
  err, got = errors(op, dtypes.float32, x)
  _check_bounds(op, dtypes.float32, x, err, got)

@pytest.mark.parametrize("op", OPS, ids=lambda o: o.name)
def test_float64_sample_within_bounds_against_decimal(op):
  x = sample(op, dtypes.float64, 1_500, seed=3)
  err, got = errors(op, dtypes.float64, x, exact=True)
  _check_bounds(op, dtypes.float64, x, err, got)

def test_float64_sin_hard_reductions_are_accurate():
  """The worst cases of argument reduction (result ~1e-19 away from a multiple of pi/2) and the largest double."""
  x = np.array(HARD_SIN[dtypes.float64] + [1.7976931348623157e308, -1.7976931348623157e308, 1e22, 2.0 ** 1000], np.float64)
  err, got = errors(Ops.SIN, dtypes.float64, x, exact=True)
  _check_bounds(Ops.SIN, dtypes.float64, x, err, got)
  assert abs(decimal_value(Ops.SIN, 1e22) - Decimal("-0.8522008497671888017727058937530293682618")) < Decimal(10) ** -35

def test_half_and_bfloat16_are_the_float32_result_rounded_once():
  """float16/bfloat16 results are the float32 method's results rounded once (CAST), nothing else."""
  for dt in (dtypes.float16, dtypes.bfloat16):
    x = every_value(dt)[::97]
    x32 = x.astype(np.float32)
    for op in OPS:
      with np.errstate(over="ignore", invalid="ignore"):
        want = exec_cast(decomposed(op, dtypes.float32, x32), dtypes.float32, dt).values  # the spec's CAST rule
      got = decomposed(op, dt, x)
      nan = np.isnan(want.astype(np.float32))
      assert (np.isnan(got.astype(np.float32)) == nan).all() and (got.view(np.uint16) == want.view(np.uint16))[~nan].all()

