"""Input values biased to where the four classes the campaigns used to miss live (issue 17), built from the suite's edge
values (refimpl.testing.values.edge_values) and the dtype facts in refimpl.dtype, never restated:

  halfway_values(src)   values of src at and next to the rounding ties of every conversion src -> a float of less
                        precision: the midpoints between neighbouring values of the target around each of its edge
                        values, in src, and their neighbours in src (ints: +-1; floats: the adjacent bit patterns).
                        An int64 one above a float32 tie is where rounding through float64 first goes wrong; a float64
                        just above a float16 tie is where rounding through float32 first goes wrong.
  tiny_factors(s, n)    floats whose pairwise products are subnormal in s (exponents around half of the subnormal
                        range): where a backend that flushes subnormal results (FTZ) differs.
  CHAINS                conversion chains whose direct form and whose form through a wider format differ by a double
                        rounding: the generator emits both, from one value.
"""
from __future__ import annotations

import functools
import warnings
from fractions import Fraction

import numpy as np

from refimpl.dtype import DType, dtypes, to_np, truncate
from refimpl.testing.values import edge_values, from_bits, to_bits

# (source, the direct target, the format a double-rounding backend goes through)
CHAINS: tuple[tuple[DType, DType, DType], ...] = (
  (dtypes.int64, dtypes.float32, dtypes.float64), (dtypes.uint64, dtypes.float32, dtypes.float64),
  (dtypes.float64, dtypes.float16, dtypes.float32), (dtypes.float64, dtypes.bfloat16, dtypes.float32),
  (dtypes.int64, dtypes.bfloat16, dtypes.float32), (dtypes.int32, dtypes.bfloat16, dtypes.float32),
  (dtypes.float32, dtypes.fp8e4m3, dtypes.float16), (dtypes.float64, dtypes.fp8e5m2, dtypes.float16),
)


def precision(dt: DType) -> int:
  """Significand bits (with the implicit one) of a float dtype; the bit width of an int dtype."""
  return dtypes.finfo(dt)[1] + 1 if dtypes.is_float(dt) else 8 * dt.itemsize

def _next_up(y: np.ndarray, dt: DType) -> np.ndarray:
  """The next value of dt above each positive finite y (its bit pattern plus one)."""
  return from_bits(to_bits(y).astype(np.uint64) + np.uint64(1), dt)

def _midpoints(dst: DType) -> list[Fraction]:
  """The midpoints between each positive finite edge value of dst and the next value of dst."""
  ys = edge_values(dst)
  with np.errstate(invalid="ignore"): ys = ys[np.isfinite(ys.astype(np.float64)) & (ys.astype(np.float64) > 0)]
  up = _next_up(ys, dst)
  out = []
  for y, u in zip(ys.astype(np.float64).tolist(), up.astype(np.float64).tolist()):
    if np.isfinite(u): out.append((Fraction(y) + Fraction(u)) / 2)
  return out

def _int_around(mids: list[Fraction], src: DType) -> list[int]:
  lo, hi = int(dtypes.min(src)), int(dtypes.max(src))
  out = {round(m) + d for m in mids for d in (-1, 0, 1)}
  out |= {-v for v in out}
  return sorted(v for v in out if lo <= v <= hi)

def _float_around(mids: list[Fraction], src: DType) -> np.ndarray:
  with np.errstate(over="ignore", invalid="ignore"), warnings.catch_warnings():
    warnings.simplefilter("ignore", RuntimeWarning)
    m = np.array([float(x) for x in mids], np.float64).astype(to_np(src))
  m = m[np.isfinite(m.astype(np.float64)) & (m.astype(np.float64) > 0)]
  both = np.concatenate([m, _next_up(m, src), from_bits(to_bits(m).astype(np.uint64) - np.uint64(1), src)])
  return np.concatenate([both, -both])

@functools.cache
def halfway_values(src: DType, dst: DType | None = None) -> np.ndarray:
  """Values of src at and next to the rounding ties of its conversion to dst (None: to every float of less precision;
  see the module docstring). Empty for bool and where no conversion rounds."""
  if src == dtypes.bool: return np.array([], np.bool_)
  targets = [d for d in dtypes.floats if d != src and precision(d) < precision(src) and dst in (None, d)]
  mids = [m for d in targets for m in _midpoints(d)]
  if dtypes.is_int(src):  # and the ties just above every power of two the int reaches, where most int roundings are
    bits = 8 * src.itemsize
    mids += [Fraction(2**k + 2 ** (k - precision(d))) for d in targets for k in range(precision(d), bits)]
    return np.array(_int_around(mids, src), to_np(src))
  return _float_around(mids, src) if mids else np.array([], to_np(src))

@functools.cache
def double_rounding_values(src: DType, dst: DType, via: DType) -> np.ndarray:
  """The halfway values of src -> dst whose conversion through `via` first rounds differently from the direct one (by
  the spec's roundings, refimpl.dtype.truncate)."""
  xs = halfway_values(src, dst)
  one = lambda x: int(x) if dtypes.is_int(src) else float(x)
  keep = [x for x in xs.tolist() if not _same(truncate[dst](one(x)), truncate[dst](truncate[via](one(x))))]
  return np.array(keep, to_np(src))

def _same(a: float, b: float) -> bool: return a == b or (a != a and b != b)

def tiny_factors(s: DType, n: int, rng: np.random.Generator) -> np.ndarray:
  """n floats of s, +-2^k * (1 + f) with k uniform in [(emin - M) / 2, emin / 2]: the product of any two is subnormal
  (or zero) in s, with emin the smallest normal exponent and M the mantissa bits."""
  exp_bits, man_bits = dtypes.finfo(s)
  emin = 2 - 2 ** (exp_bits - 1)
  k = rng.integers((emin - man_bits) // 2, emin // 2 + 1, n)
  f = 1 + rng.random(n)
  sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
  return (sign * f * np.exp2(k.astype(np.float64))).astype(to_np(s))
