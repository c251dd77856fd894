"""Rounding helpers and higher-precision references for the emulator's rules (refimpl/emulator/alu.py).

Rounding. Every float format here embeds exactly in float64, so a rule computes in float32/float64 and rounds once to
the op's dtype. numpy converts float64 -> float32 and float64 -> float16 directly (one rounding, nearest even); ml_dtypes
converts float64 -> bfloat16/fp8 through float32, which rounds twice. `round_odd` fixes that: rounding to odd into a
format with at least 2 more significand bits than the final one, then to nearest even into the final format, equals one
rounding to nearest even (Boldo & Melquiond, "Emulation of FMA and correctly-rounded sums: proved algorithms using
rounding to odd", IEEE TC 2008). `from_f64` and `from_longdouble` use it wherever a conversion would round twice.

Transcendental references (EXP2, LOG2, SIN), `correctly_rounded(op, x, dtype)`:
- where numpy's longdouble is x87 80-bit extended (64-bit significand, x86-64 Linux) or IEEE quad (aarch64 Linux), the
  function is evaluated by the C library's long double exp2l / log2l / sinl (glibc: errors of a few units of 2^-64
  relative; sinl reduces any argument exactly, Payne-Hanek style), then rounded to odd into float64 and to nearest even
  into the dtype (into float32 in one cast where numpy's long double -> float32 cast rounds once, `F32_IN_ONE_CAST`:
  the same value at about half the reference's cost). The result is the correctly rounded value except when the exact
  value lies within about 2^-62 (relative) of a rounding boundary of the dtype: the reference's own error is at most
  0.5 ulp + 2^-9 ulp for float64 (2^-62 / 2^-53) and 0.5 ulp + 2^-38 ulp for float32 and narrower.
- elsewhere (long double == double: macOS arm64, Windows), float32 and narrower use numpy's float64 functions (a few
  float64 ulp, i.e. < 2^-27 ulp of float32 after rounding), and float64 falls back to a slow per-element `decimal`
  evaluation with 40 significant digits (`decimal_reference`), error below 0.5 ulp + 2^-70 ulp.
"""
from __future__ import annotations

import decimal
import math
from decimal import Decimal

import numpy as np

from refimpl.dtype import DType, dtypes, to_np
from refimpl.ir.ops import Ops

F32, F64, LD = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.longdouble)
EXTENDED = np.finfo(np.longdouble).nmant >= 63  # long double has >= 11 more significand bits than double
_UINT_OF = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}

def bits_of(x: np.ndarray) -> np.ndarray:
  """The bit patterns of a float array as unsigned ints of the same size."""
  return x.view(_UINT_OF[x.dtype.itemsize])

def round_odd(x: np.ndarray, to: np.dtype) -> np.ndarray:
  """x (a float array of a wider format) rounded to `to` by round-to-odd: a value `to` holds stays, any other goes to
  whichever of its two neighbours in `to` has an odd last significand bit (beyond the largest finite: the largest finite).
  NaN stays NaN. A later round-to-nearest-even into a format >= 2 bits narrower than `to` is then exactly one rounding."""
  with np.errstate(all="ignore"):
    r = x.astype(to)
    back = r.astype(x.dtype)
    inexact = (back != x) & ~np.isnan(x)
    if not inexact.any(): return r
    r = np.where(inexact & (np.abs(back) > np.abs(x)), np.nextafter(r, to.type(0)), r)  # truncate toward zero first
    even = inexact & ((bits_of(r) & 1) == 0)
    return np.where(even, np.nextafter(r, np.copysign(to.type(np.inf), r)), r).astype(to)

def ro_sum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  """a + b (float64) rounded to odd instead of to nearest: the rounded sum s and its exact error e come from Knuth's
  TwoSum (s + e == a + b exactly when s is finite); a sum with e != 0 and an even s moves to s's neighbour toward e."""
  with np.errstate(all="ignore"):
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    fix = (e != 0) & np.isfinite(s) & ((bits_of(s) & 1) == 0)
    return np.where(fix, np.nextafter(s, np.copysign(np.inf, e)), s)

def from_f64(x: np.ndarray, dt: DType) -> np.ndarray:
  """float64 lanes rounded once, to nearest even, into the float dtype dt (overflow -> inf; fp8e4m3, which has no
  inf, gives NaN beyond 464 as ml_dtypes does). numpy converts to float32/float16 directly; bfloat16 and fp8 go
  through a round-to-odd float32, so that ml_dtypes' float32 -> dt rounding is the only one that matters."""
  with np.errstate(all="ignore"):
    if dt in (dtypes.float64, dtypes.float32, dtypes.float16): return x.astype(to_np(dt))
    return round_odd(x, F32).astype(to_np(dt))

def _casts_long_double_once() -> bool:
  """Whether numpy's long double -> float32 cast rounds once, to nearest even (x87's store to single, IEEE quad's
  conversion), as from_longdouble must: on values just past float32 midpoints (normal and subnormal, both signs, above
  and below), which float64 rounds onto the midpoint, the cast gives what rounding to odd into float64 then to float32
  gives (the Boldo-Melquiond single rounding); a cast through float64 differs on some of them."""
  if not EXTENDED: return False
  mids = np.array([1 + 2.0 ** -24, 1 + 3 * 2.0 ** -24, 1.5 * 2.0 ** -149, 2.5 * 2.0 ** -149], LD)
  nudged = np.concatenate([mids * (1 + np.longdouble(2.0) ** -60), mids * (1 - np.longdouble(2.0) ** -60)])
  probes = np.concatenate([nudged, -nudged])
  with np.errstate(all="ignore"):
    return bool(np.array_equal(bits_of(probes.astype(F32)), bits_of(round_odd(probes, F64).astype(F32))))

F32_IN_ONE_CAST = _casts_long_double_once()  # from_longdouble's float32: numpy's cast, else through round-to-odd float64

def from_longdouble(x: np.ndarray, dt: DType) -> np.ndarray:
  """long double lanes rounded once, to nearest even, into the float dtype dt: to float32 by numpy's cast where it
  rounds once (F32_IN_ONE_CAST), else through a round-to-odd float64."""
  with np.errstate(all="ignore"):
    if dt is dtypes.float32 and F32_IN_ONE_CAST: return x.astype(F32)
    return x.astype(F64) if dt is dtypes.float64 else from_f64(round_odd(x, F64), dt)

# ---- transcendental references ----

_NP_FN = {Ops.EXP2: np.exp2, Ops.LOG2: np.log2, Ops.SIN: np.sin}

def correctly_rounded(op: Ops, x: np.ndarray, dt: DType) -> np.ndarray:
  """The reference value of EXP2, LOG2 or SIN on the float lanes x of dtype dt, as an array of dt (method and error:
  see the module docstring). Special values follow C99 Annex F: exp2(-inf)=+0, exp2(+inf)=+inf, log2(+-0)=-inf,
  log2(x<0)=NaN, log2(+inf)=+inf, sin(+-0)=+-0, sin(+-inf)=NaN; NaN in gives NaN out."""
  x64 = x.astype(F64)
  with np.errstate(all="ignore"):
    if EXTENDED: return from_longdouble(_NP_FN[op](x64.astype(LD)), dt)
    if dt is not dtypes.float64: return from_f64(_NP_FN[op](x64), dt)
  return np.array([decimal_reference(op, v) for v in x64.tolist()], dtype=F64).reshape(x64.shape)

_PREC = 40  # significant digits of the decimal evaluation

def _pi(digits: int) -> Decimal:
  """pi to `digits` significant digits by Machin's formula: pi = 16 atan(1/5) - 4 atan(1/239)."""
  with decimal.localcontext() as ctx:
    ctx.prec = digits + 10
    def atan_inv(n: int) -> Decimal:
      term, total, k, n2 = Decimal(1) / n, Decimal(0), 0, n * n
      small = Decimal(10) ** -(digits + 10)  # an alternating series: the error is below the first term left out
      while term > small:
        total += term / (2 * k + 1) if k % 2 == 0 else -term / (2 * k + 1)
        term, k = term / n2, k + 1
      return total
    return +(16 * atan_inv(5) - 4 * atan_inv(239))

_PI_LONG = _pi(_PREC + 330)  # enough to reduce any float64 (|x| < 2^1024 < 10^309) with PREC digits left

def decimal_reference(op: Ops, v: float) -> float:
  """EXP2, LOG2 or SIN of one float64, evaluated in `decimal` with 40 significant digits, then rounded to float64 by
  float(Decimal) (correctly rounded from the decimal string). SIN reduces the argument with a 370-digit pi."""
  if math.isnan(v): return math.nan
  if op is Ops.EXP2:
    if v >= 1024: return math.inf
    if v <= -1076: return 0.0
    with decimal.localcontext() as ctx:
      ctx.prec = _PREC
      return float((Decimal(v) * Decimal(2).ln()).exp())
  if op is Ops.LOG2:
    if v < 0: return math.nan
    if v == 0: return -math.inf
    if math.isinf(v): return math.inf
    with decimal.localcontext() as ctx:
      ctx.prec = _PREC
      return float(Decimal(v).ln() / Decimal(2).ln())
  if op is Ops.SIN:
    if math.isinf(v): return math.nan
    if v == 0: return v
    with decimal.localcontext() as ctx:
      ctx.prec = _PREC + 340
      two_pi = 2 * _PI_LONG
      r = Decimal(v) - (Decimal(v) / two_pi).to_integral_value() * two_pi  # |r| <= pi
      ctx.prec = _PREC + 5
      term, total, k, r2 = +r, +r, 1, r * r
      while abs(term) > abs(total) * Decimal(10) ** -(_PREC + 3):
        term = -term * r2 / ((2 * k) * (2 * k + 1))
        total, k = total + term, k + 1
      return float(total)
  raise ValueError(f"no reference for {op!r}")
