"""Measuring the accuracy of EXP2, LOG2 and SIN results: their error in ulps of the dtype against the exact value
(`ulp_errors`), which comes from long double where it is wide enough, else from `decimal` (`decimal_value`). A tool of
the tests and benchmarks that hold refimpl.lower.transcendental (and backends' own functions) to the spec's bounds.
"""
from __future__ import annotations

import decimal
import functools
import math
from decimal import Decimal

import numpy as np

from refimpl.dtype import DType, dtypes, to_np
from refimpl.emulator.reference import EXTENDED
from refimpl.ir.ops import Ops
from refimpl.lower.transcendental import pi_fraction

_LD_FN = {Ops.EXP2: np.exp2, Ops.LOG2: np.log2, Ops.SIN: np.sin}

def decimal_value(op: Ops, v: float, digits: int = 40) -> Decimal | float:
  """op(v) for one float64 v in `decimal` with `digits` significant digits, unrounded (a Decimal), or a float where the
  result is a special value (NaN, +-inf) or beyond float64's range. SIN reduces v mod pi/2 with digits+330 digits of pi."""
  if math.isnan(v) or (op is Ops.SIN and math.isinf(v)) or (op is Ops.LOG2 and v < 0): return math.nan
  if op is Ops.EXP2 and v >= 1025: return math.inf
  if op is Ops.EXP2: v = max(v, -1200.0)            # below 2^-1200 every dtype rounds to +0 either way
  if op is Ops.LOG2 and (v == 0 or math.isinf(v)): return -math.inf if v == 0 else math.inf
  with decimal.localcontext() as ctx:
    ctx.prec = digits
    if op is Ops.EXP2: return (Decimal(v) * _decimal_ln2(digits)).exp()
    if op is Ops.LOG2: return Decimal(v).ln() / _decimal_ln2(digits)
    ctx.prec = digits + 330                          # |v| < 2^1024 < 10^309: k*pi/2 keeps `digits` digits after the point
    pio2 = _decimal_pi(digits + 330) / 2
    k = (Decimal(v) / pio2).to_integral_value()
    r = Decimal(v) - k * pio2
    ctx.prec = digits + 5
    sin_r, cos_r = _decimal_taylor(r, 1), _decimal_taylor(r, 0)
    return (sin_r, cos_r, -sin_r, -cos_r)[int(k) % 4]

def _decimal_taylor(r: Decimal, first: int) -> Decimal:
  """sin(r) (first=1) or cos(r) (first=0) by their Taylor series, summed until terms no longer count."""
  term = r if first else Decimal(1)
  total, k, r2 = term, first, r * r
  while term and abs(term) > abs(total) * Decimal(10) ** -(decimal.getcontext().prec + 2):
    term = -term * r2 / ((k + 1) * (k + 2))
    total, k = total + term, k + 2
  return total

@functools.cache
def _decimal_pi(digits: int) -> Decimal:
  with decimal.localcontext() as ctx:
    ctx.prec = digits
    pi = pi_fraction(int(digits * 3.33) + 16)
    return Decimal(pi.numerator) / Decimal(pi.denominator)

@functools.cache
def _decimal_ln2(digits: int) -> Decimal:
  with decimal.localcontext() as ctx:
    ctx.prec = digits + 5
    return Decimal(2).ln()

def ulp_errors(op: Ops, dt: DType, x: np.ndarray, got: np.ndarray, exact: bool = False) -> np.ndarray:
  """Per lane, the error of `got` (claimed op(x), both of dtype dt) in ulps of dt: |got - v| / ulp(v) with v the exact
  value and ulp(v) = 2^(max(floor(log2 |v|), emin) - mant). Specials are exact: where v is NaN or rounds to +-inf in dt,
  the error is 0 when got is that same value and inf otherwise; a NaN or inf `got` elsewhere is inf.
  v comes from long double (numpy's exp2/log2/sin on x87 extended: glibc's exp2l/log2l/sinl, a few 2^-64 relative,
  any argument reduced exactly) unless exact=True or long double is no wider than float64; then from `decimal_value`
  lane by lane (slow)."""
  ebits, mant = dtypes.finfo(dt)
  emin = 2 - 2 ** (ebits - 1)
  xs, gs = _as_f64(x), _as_f64(got)
  if EXTENDED and not exact:
    with np.errstate(all="ignore"):
      v = _LD_FN[op](xs.astype(np.longdouble))
      e = np.maximum(np.frexp(np.where(v == 0, 1, v))[1] - 1, emin)
      err = np.abs(gs.astype(np.longdouble) - v) / np.ldexp(np.longdouble(1), e - mant)
      rounded = v.astype(np.float64).astype(np.float32).astype(to_np(dt)).astype(np.float64) if dt is not dtypes.float64 \
        else v.astype(np.float64)
    special = np.isnan(v) | np.isinf(rounded)
    same = (np.isnan(v) & np.isnan(gs)) | (rounded == gs)
    return np.where(special, np.where(same, 0.0, np.inf), np.where(np.isfinite(gs), err.astype(np.float64), np.inf))
  return np.array([_decimal_error(op, dt, a, g, emin, mant) for a, g in zip(xs.tolist(), gs.tolist())], np.float64)

def _decimal_error(op: Ops, dt: DType, a: float, g: float, emin: int, mant: int) -> float:
  v = decimal_value(op, a)
  if isinstance(v, float): return 0.0 if v == g or (math.isnan(v) and math.isnan(g)) else math.inf
  with np.errstate(over="ignore"):  # v rounded to dt, for its class only (inf or finite)
    rounded = float(v) if dt is dtypes.float64 else float(np.float64(float(v)).astype(np.float32).astype(to_np(dt)))
  if math.isinf(rounded): return 0.0 if rounded == g else math.inf
  if not math.isfinite(g): return math.inf
  e, two = emin, Decimal(2)
  if float(abs(v)) != 0: e = max(math.frexp(float(abs(v)))[1] - 1, emin)  # floor(log2 |v|), corrected in decimal below
  while e > emin and two ** e > abs(v): e -= 1
  while two ** (e + 1) <= abs(v): e += 1
  with decimal.localcontext() as ctx:
    ctx.prec = 40
    return float(abs(Decimal(g) - v) / two ** (e - mant))

def _as_f64(a: np.ndarray) -> np.ndarray:
  a = np.asarray(a)
  with np.errstate(invalid="ignore"):  # NaNs of bfloat16 convert quietly
    return a.astype(np.float32).astype(np.float64) if a.dtype.itemsize < 4 else a.astype(np.float64)
