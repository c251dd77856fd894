"""Tests of the exact oracles (refimpl.testing.oracle) against independent references: CPython's correctly rounded
float(Fraction), C's double -> float conversion, a search of the whole float16 grid, the stored formats' bit patterns.
Not a rule's home (it claims no rule and no decision row): the oracles every family's expected values come from.
"""
import bisect
import itertools
import math
import struct
from fractions import Fraction

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from refimpl.dtype import dtypes
from refimpl.testing.oracle import FMT, as_floats, from_bits, rne, rne_any, same, sqrt

RULES = ()
DECISIONS: dict[str, str] = {}

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
