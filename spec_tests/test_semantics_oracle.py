"""Independent oracles for the semantics tests (they share no code with refimpl/emulator), and tests of the oracles.

- `rne(q, fmt)`: an exact rational rounded to nearest even in a binary format described by literal IEEE parameters,
  with gradual underflow and overflow (to inf, or NaN for fp8e4m3, which has no inf). Results are Python floats, which
  hold every value of every format here exactly.
- exact IEEE 754 operations on Python floats (`add`, `sub`, `mul`, `div`, `sqrt`, `fma`): specials by the standard's
  rules, finite results as `fractions.Fraction` (SQRT through integer square roots) rounded by `rne`.
- edge values and random bit patterns per dtype, and a hypothesis strategy biased to the edges.
"""
from __future__ import annotations

import bisect
import itertools
import math
import struct
from dataclasses import dataclass
from fractions import Fraction

import ml_dtypes
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from refimpl.dtype import dtypes


@dataclass(frozen=True)
class Fmt:
  p: int          # significand bits including the hidden one
  emin: int       # exponent of the smallest normal
  maxf: Fraction  # largest finite value
  inf: bool       # has infinities (else overflow gives NaN)
  bits: int       # storage bits
  np: np.dtype

  @property
  def minsub(self) -> Fraction: return Fraction(2) ** (self.emin - self.p + 1)

# IEEE 754 / OCP FP8 parameters, written out here (not read from refimpl)
FMT = {
  dtypes.float64: Fmt(53, -1022, (2 - Fraction(1, 2**52)) * Fraction(2) ** 1023, True, 64, np.dtype(np.float64)),
  dtypes.float32: Fmt(24, -126, (2 - Fraction(1, 2**23)) * Fraction(2) ** 127, True, 32, np.dtype(np.float32)),
  dtypes.float16: Fmt(11, -14, Fraction(65504), True, 16, np.dtype(np.float16)),
  dtypes.bfloat16: Fmt(8, -126, (2 - Fraction(1, 2**7)) * Fraction(2) ** 127, True, 16, np.dtype(ml_dtypes.bfloat16)),
  dtypes.fp8e4m3: Fmt(4, -6, Fraction(448), False, 8, np.dtype(ml_dtypes.float8_e4m3fn)),
  dtypes.fp8e5m2: Fmt(3, -14, Fraction(57344), True, 8, np.dtype(ml_dtypes.float8_e5m2)),
}
ARITH_FLOATS = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)
UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}

def exponent(a: Fraction) -> int:
  """floor(log2(a)) for a > 0."""
  n, d = a.numerator, a.denominator
  e = n.bit_length() - d.bit_length()
  return e if (n << max(0, -e)) >= (d << max(0, e)) else e - 1

def rne(q, f: Fmt) -> float:
  """q (a Fraction, or a float for specials and exact zeros) rounded to nearest, ties to even, in format f."""
  if isinstance(q, float):
    return math.nan if math.isinf(q) and not f.inf else q
  if q == 0: return 0.0
  n, d = abs(q.numerator), q.denominator
  sh = max(exponent(Fraction(n, d)), f.emin) - f.p + 1  # the quantum (spacing of the format here) is 2^sh
  num, den = (n, d << sh) if sh >= 0 else (n << -sh, d)
  k, rest = divmod(num, den)
  if 2 * rest > den or (2 * rest == den and k % 2 == 1): k += 1
  if Fraction(k) * Fraction(2) ** sh > f.maxf: return (math.inf if q > 0 else -math.inf) if f.inf else math.nan
  out = math.ldexp(k, sh)  # exact: k has at most p + 1 bits and 2^sh is inside float64's range for every format here
  return out if q > 0 else -out

class Sqrt:
  """The square root of a positive Fraction, for rne_any: rounded through integer square roots."""
  def __init__(self, q: Fraction): self.q = q

def rne_any(r, f: Fmt) -> float:
  if not isinstance(r, Sqrt): return rne(r, f)
  k = 600  # 4^600 clears every binary float's denominator, and leaves >= 60 bits in the root of the smallest
  big = r.q * Fraction(4) ** k
  assert big.denominator == 1
  m = math.isqrt(big.numerator)
  exact = m * m == big.numerator
  # inexact: the root lies strictly inside (m, m+1); m has > p+1 bits, so m + 1/2 rounds the same way
  return rne(Fraction(m, 2**k) if exact else Fraction(2 * m + 1, 2 ** (k + 1)), f)

def signbit(x: float) -> bool: return math.copysign(1.0, x) < 0

def add(x: float, y: float):
  if math.isnan(x) or math.isnan(y): return math.nan
  if math.isinf(x) and math.isinf(y): return x if x == y else math.nan
  if math.isinf(x) or math.isinf(y): return x if math.isinf(x) else y
  s = Fraction(x) + Fraction(y)
  if s == 0: return -0.0 if signbit(x) and signbit(y) and x == 0 and y == 0 else 0.0  # x + (-x) is +0
  return s

def sub(x: float, y: float): return add(x, -y)

def mul(x: float, y: float):
  if math.isnan(x) or math.isnan(y): return math.nan
  neg = signbit(x) != signbit(y)
  if math.isinf(x) or math.isinf(y): return math.nan if x == 0 or y == 0 else (-math.inf if neg else math.inf)
  if x == 0 or y == 0: return -0.0 if neg else 0.0
  return Fraction(x) * Fraction(y)

def div(x: float, y: float):
  if math.isnan(x) or math.isnan(y): return math.nan
  neg = signbit(x) != signbit(y)
  if (math.isinf(x) and math.isinf(y)) or (x == 0 and y == 0): return math.nan
  if math.isinf(x) or y == 0: return -math.inf if neg else math.inf
  if math.isinf(y) or x == 0: return -0.0 if neg else 0.0
  return Fraction(x) / Fraction(y)

def sqrt(x: float):
  if math.isnan(x) or x < 0: return math.nan
  if x == 0 or math.isinf(x): return x
  return Sqrt(Fraction(x))

def fma(x: float, y: float, z: float):
  """x*y + z with one rounding (the caller rounds)."""
  if math.isnan(x) or math.isnan(y) or math.isnan(z): return math.nan
  prod = mul(x, y)
  if isinstance(prod, float) and math.isnan(prod): return math.nan
  if isinstance(prod, float) and math.isinf(prod): return add(prod, z)
  if math.isinf(z): return z
  if isinstance(prod, float): return add(prod, z)  # a signed zero product
  s = prod + Fraction(z)
  return s if s != 0 else 0.0

def as_floats(a: np.ndarray) -> list[float]:
  """Array values as Python floats (exact for every float format here)."""
  with np.errstate(invalid="ignore"): return np.asarray(a).astype(np.float64).reshape(-1).tolist()

def same(x: float, y: float) -> bool:
  """Bit-level sameness of values: equal with equal signs, or both NaN."""
  return (math.isnan(x) and math.isnan(y)) or (x == y and signbit(x) == signbit(y))

def from_bits(bits, dt) -> np.ndarray:
  f = FMT[dt]
  return np.asarray(bits, dtype=UINT[f.bits]).view(f.np)

def edge_values(dt) -> list[float]:
  """0, -0, +-1 and neighbours, the smallest and largest subnormal, the smallest normal and its neighbour, the largest
  finite and its neighbour, powers of two near both ends and in the middle, +-inf, NaN (all exact in the format)."""
  f = FMT[dt]
  ulp1, minnorm = Fraction(2) ** (1 - f.p), Fraction(2) ** f.emin
  vals = [Fraction(0), Fraction(1), 1 + ulp1, 1 - ulp1 / 2, Fraction(2), Fraction(3), Fraction(1, 2), f.minsub, 2 * f.minsub,
          minnorm - f.minsub, minnorm, minnorm + f.minsub, f.maxf, f.maxf - Fraction(2) ** (exponent(f.maxf) - f.p + 1),
          Fraction(2) ** (exponent(f.maxf) // 2), Fraction(2) ** (f.emin // 2), 1 + 3 * ulp1]
  out = sorted({float(v) for v in vals})
  return out + [-v for v in out if v != 0] + [-0.0, math.inf, -math.inf, math.nan]

def edge_bits(dt) -> list[int]:
  return [int(b) for b in np.array(edge_values(dt), dtype=np.float64).astype(FMT[dt].np).view(UINT[FMT[dt].bits])]

def random_bits(dt, n: int, seed: int) -> np.ndarray:
  f = FMT[dt]
  return np.random.default_rng(seed).integers(0, 2**f.bits, size=n, dtype=np.uint64).astype(UINT[f.bits]).view(f.np)

def float_bits(dt) -> st.SearchStrategy[int]:
  """Bit patterns of dt: half the time an edge value, else any pattern."""
  return st.one_of(st.sampled_from(edge_bits(dt)), st.integers(0, 2 ** FMT[dt].bits - 1))

# ---- tests of the oracle itself, against the platform's conversions ----

def test_rne_float64_matches_python_float_of_fraction():
  """Rule: CPython's float(Fraction) is correctly rounded (int true division), subnormals and all."""
  rng = np.random.default_rng(1)
  for _ in range(2000):
    num, den = int(rng.integers(1, 2**62)), int(rng.integers(1, 2**62))
    q = Fraction(num, den) * Fraction(2) ** int(rng.integers(-1100, 1000))
    assert same(rne(q, FMT[dtypes.float64]), float(q)), q

@given(st.integers(0, 2**64 - 1))
def test_rne_float32_matches_c_double_to_float_conversion(bits):
  """Rule: C's double -> float conversion (CPython's struct 'f', a C cast) is IEEE round to nearest even."""
  x = struct.unpack("<d", struct.pack("<Q", bits))[0]
  if math.isnan(x) or math.isinf(x): return
  try: want = struct.unpack("<f", struct.pack("<f", x))[0]
  except OverflowError: want = math.copysign(math.inf, x)  # beyond float32's range: struct refuses, IEEE overflows
  assert same(rne(Fraction(x) if x != 0 else x, FMT[dtypes.float32]), want)

def float16_grid() -> list[Fraction]:
  """Every finite float16 value >= 0 in increasing order, from the format's definition (10 stored mantissa bits,
  exponents -14..15, subnormals below 2^-14)."""
  return [Fraction(m, 2**24) for m in range(2**10)] + [Fraction(2**10 + m, 2**10) * Fraction(2) ** e
                                                      for e in range(-14, 16) for m in range(2**10)]

def test_rne_float16_is_the_nearest_grid_value_ties_to_even():
  """Rule: IEEE round to nearest, ties to the even significand, overflow beyond 65520 (the tie above 65504) to inf.
  Checked against a search of the whole float16 grid, at every midpoint, beside it, and at random rationals."""
  grid = float16_grid()
  f = FMT[dtypes.float16]
  rng = np.random.default_rng(2)
  eps = Fraction(1, 2**40)
  qs = [(a + b) / 2 + d for a, b in itertools.pairwise(grid) if rng.random() < 0.05 for d in (0, eps, -eps)]
  qs += [Fraction(int(rng.integers(1, 2**40)), int(rng.integers(1, 2**40))) for _ in range(2000)] + [Fraction(65520)]
  for q in qs:
    k = bisect.bisect_left(grid, q)
    if k == len(grid): want = math.inf
    elif grid[k] == q or k == 0: want = float(grid[k])
    else:
      lo, hi = grid[k - 1], grid[k]
      want = float(lo if q - lo < hi - q or (q - lo == hi - q and (k - 1) % 2 == 0) else hi)  # even index: even significand
    if q >= 65520: want = math.inf
    assert same(rne(q, f), want), q

def test_format_constants_describe_the_storage_formats():
  """The literal parameters above against the stored formats (refimpl's to_np types): the largest finite value and the
  smallest subnormal are what the formats' bit patterns decode to (every pattern of the 8- and 16-bit formats)."""
  for dt, f in FMT.items():
    if f.bits <= 16:
      with np.errstate(invalid="ignore"): values = as_floats(from_bits(np.arange(2 ** f.bits), dt))
      finite = [v for v in values if math.isfinite(v)]
      assert max(finite) == float(f.maxf) and min(v for v in finite if v > 0) == float(f.minsub), dt
    else:
      top = (2 ** (f.p - 1) - 1) | ((2 ** (f.bits - f.p) - 2) << (f.p - 1))  # all-ones significand, largest exponent
      assert as_floats(from_bits([top, 1], dt)) == [float(f.maxf), float(f.minsub)], dt

def test_sqrt_oracle_on_perfect_and_imperfect_squares():
  """sqrt(4) = 2 exactly; sqrt(2) rounds to float64's 0x3FF6A09E667F3BCD (IEEE sqrt is correctly rounded in C too)."""
  f = FMT[dtypes.float64]
  assert rne_any(sqrt(4.0), f) == 2.0
  assert rne_any(sqrt(2.0), f) == math.sqrt(2.0) == float.fromhex("0x1.6a09e667f3bcdp+0")
  assert rne_any(sqrt(5e-324), f) == math.sqrt(5e-324)
