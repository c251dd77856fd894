"""Independent oracles for the spec's float rules: they share no code with refimpl/emulator, and the tests that use
them (spec_tests/semantics/, the conformance suite's backend rules) compare refimpl with them.

- `rne(q, fmt)`: an exact rational rounded to nearest even in a binary format described by literal IEEE parameters,
  with gradual underflow and overflow (to inf, or NaN for fp8e4m3, which has no inf). Results are Python floats, which
  hold every value of every format here exactly.
- exact IEEE 754 operations on Python floats (`add`, `sub`, `mul`, `div`, `sqrt`, `fma`): specials by the standard's
  rules, finite results as `fractions.Fraction` (SQRT through integer square roots) rounded by `rne`.
- edge values and random bit patterns per dtype, and a hypothesis strategy biased to the edges.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import ml_dtypes
import numpy as np
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
