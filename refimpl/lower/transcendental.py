"""EXP2, LOG2 and SIN as plain ALU ops, for backends with no libm (CLANG, LLVM).

`decompose_transcendentals(program, only=None)` replaces every EXP2, LOG2 and SIN uop (scalar or vector; float16, bfloat16,
float32, float64; `only` limits it to some scalar dtypes) by a straight-line sequence of ALU ops, CONST (VECTORIZEd for
vectors), CAST, BITCAST and WHERE -- no loops, no memory -- and returns the verified result.

Rules every decomposition keeps:
- Defined everywhere: no uop it emits can be undefined for any input, NaN and inf included (every shift count is a
  constant or masked into range, there is no float->int CAST, integer overflow wraps as the spec says). Lanes are
  computed in full and chosen with WHERE, so this matters for the lanes that are discarded too.
- Exactly specified: it uses only correctly rounded float ops (ADD SUB MUL FDIV NEG), compares, WHERE and integer ops;
  never MULACC (fused or not is the backend's choice), so a decomposed program gives the same bits on every backend
  that follows the spec, and the parenthesization written here is the evaluation order.
- float16 and bfloat16 run the float32 method (CAST in is exact) and round once at the end (CAST out).
- float32 computes in float32 (int32/uint32, and uint64/int64 for the large-argument reduction); float64 computes in
  float64 with int64/uint64.
- Polynomial coefficients are Taylor coefficients, each computed in exact rational arithmetic and rounded once to the
  dtype; degrees are the least that keep the truncation error below 1/20 ulp on the reduced range (the bounds are in
  spec_tests). The constants pi, ln 2 and the bits of 2/pi are computed here in integer arithmetic (Machin's formula,
  the atanh series for ln 2).

EXP2(x): n = round-to-nearest-even(x) by the 1.5*2^mant "magic number" addition after clamping x to +-(bias+mant+10)
  (far past overflow and underflow), s = x - n exactly (|s| <= 1/2), 2^s = 1 + s*ln2 + s^2*Q(s) by the Taylor series
  (float32 to degree 8, float64 to 14) with s*ln2 carried exactly (a double-float product with ln 2 as hi + lo), then
  times 2^(n>>1) and 2^(n-(n>>1)), each built from exponent bits (two steps: a subnormal result is rounded once, an
  overflowing one becomes inf).
  Specials: NaN -> NaN, +inf -> +inf, -inf -> +0, integer x -> 2^x exactly.
LOG2(x): subnormals are scaled by 2^(mant+2) first; the exponent and significand come from the bits, with the significand
  m in [sqrt(1/2), sqrt(2)); f = m - 1 (exact), s = f/(2+f), log(1+f) = f - f^2/2 + s*(f^2/2 + R(s^2)) with
  R(z) = sum 2 z^k/(2k+1) (float32 4 terms, float64 10), then log2 = k + log(1+f)/ln 2 with f - f^2/2 split into a
  short head (whose product with the short head of 1/ln 2 is exact) and a tail (fdlibm's e_log2 scheme).
  Specials: x < 0, -inf, NaN -> NaN; +-0 -> -inf; +inf -> +inf; 2^k -> k exactly (1 -> +0).
SIN(x): on a = |x|, with the sign put back at the end by XOR of the sign bit (so sin(-0) = -0).
  a < pi/4: r = a, quadrant 0. Otherwise Payne-Hanek: a = M*2^E (M the integer significand) is multiplied by the
  window of 2/pi's bits that starts at bit E-1 (earlier bits only add multiples of 4 quadrants), in 32-bit limbs with
  uint64 products: float32 a 128-bit window, float64 a 192-bit one. The window is cut from 64-bit constant words chosen
  by a WHERE tree on the word index (no memory), the table having 64 leading zero bits so that one formula covers every
  a >= pi/4. The product mod 2^L gives the quadrant (top 2 bits, rounded to nearest) and the signed fraction f in
  [-1/2, 1/2), summed from exactly representable pieces into a double-float, and r = f*pi/2 in double-float.
  (Cody-Waite reduction would only add uops here: the decomposition has no branches, every lane runs every path, and
  the exact reduction is accurate for every a.) Then sin(r) = r + r^3*S(r^2), cos(r) = 1 - r^2/2 + r^4*C(r^2)
  (Taylor; float32 to r^9 / r^10, float64 to r^17 / r^16) with the low part of r and the rounding error of r^2 and of
  1 - r^2/2 carried, and the quadrant picks +-sin or +-cos.
  Specials: +-0 -> +-0, +-inf and NaN -> NaN; tiny x -> x.

Accuracy: every result is within MAX_ULP = 1 ulp of the exact value (faithful rounding), well inside the spec's bounds
(refimpl.spec.ULP_BOUNDS: float32 and float64 3/3/4, float16 and bfloat16 2/2/2); spec_tests/test_lower_transcendental.py
holds both. Worst errors measured by bench/measure_transcendental_ulp.py (ulps of the result dtype, against the exact
value; float16/bfloat16 every input; float32 and float64 the larger of two runs (seeds 0 and 11) of ~1.2-1.7M inputs each
against long double, float64 also 5000-20000 against decimal):
            float16  bfloat16  float32  float64
    EXP2    0.500    0.500     0.753    0.744      (the float32/float64 worst cases are subnormal results)
    LOG2    0.500    0.500     0.775    0.750
    SIN     0.500    0.500     0.754    0.760
Not correctly rounded: float32/float64 about 0.4% (LOG2), 0.7% (EXP2) and 1.1% (SIN) of inputs; float16/bfloat16 almost
none. Size per scalar op (uops): EXP2 78 (float32) / 96 (float64), LOG2 74 / 92, SIN 250 / 408.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from refimpl.dtype import DType, dtypes, to_np
from refimpl.ir.builder import ProgramBuilder
from refimpl.ir.ops import Ops
from refimpl.ir.program import Program, UOp
from refimpl.ir.rewrite import copy, rewrite
from refimpl.ir.verify import verify
from refimpl.lower.emit import V, Values

MAX_ULP = 1.0  # the decomposition's own bound, every op and dtype (see the docstring)
VIA_FLOAT32 = frozenset({dtypes.float16, dtypes.bfloat16})


# ***** exact constants *****

def _atan_inv(n: int, one: int, alternate: bool = True) -> int:
  """atan(1/n) * one (atanh(1/n) * one when not alternate), the series summed in fixed point (error < 1 per term)."""
  total, power, k, sign = 0, one // n, 1, 1
  while power:
    total += sign * (power // k)
    power, k, sign = power // (n * n), k + 2, -sign if alternate else sign
  return total

@functools.cache
def pi_fraction(bits: int = 1400) -> Fraction:
  """pi within 2^-bits: Machin's formula pi = 16 atan(1/5) - 4 atan(1/239), with 32 guard bits."""
  one = 1 << (bits + 32)
  return Fraction(16 * _atan_inv(5, one) - 4 * _atan_inv(239, one), one)

@functools.cache
def ln2_fraction(bits: int = 256) -> Fraction:
  """ln 2 within 2^-bits: ln 2 = 2 atanh(1/3), with 32 guard bits."""
  one = 1 << (bits + 32)
  return Fraction(2 * _atan_inv(3, one, alternate=False), one)

def _round(x: Fraction, bits: int) -> float:
  """x rounded to nearest even to `bits` significant bits (a normal value of the dtype: no range handling)."""
  if x == 0: return 0.0
  sign, x = (-1 if x < 0 else 1), abs(x)
  e = x.numerator.bit_length() - x.denominator.bit_length()
  if x >= Fraction(2) ** e: e += 1  # now 2^(e-1) <= x < 2^e
  scaled = x * Fraction(2) ** (bits - e)
  m = round(scaled)  # Fraction rounds half to even
  return sign * math.ldexp(m, e - bits)

@functools.cache
def two_over_pi_words(nwords: int) -> tuple[int, ...]:
  """floor(2/pi * 2^(64*nwords - 64)) as 64-bit words, most significant first: 64 zero bits, then 2/pi's bits."""
  nb = 64 * nwords
  pi = pi_fraction(nb + 64)
  t = (2 * pi.denominator << (nb - 64)) // pi.numerator
  return tuple((t >> (nb - 64 * (w + 1))) & (2**64 - 1) for w in range(nwords))


# ***** the formats *****

@dataclass(frozen=True)
class _Fmt:
  dt: DType
  it: DType             # signed int of the same size
  ut: DType             # unsigned int of the same size
  mant: int             # stored significand bits
  bias: int
  exp2_degree: int      # Taylor degree of 2^s on [-1/2, 1/2]
  log_terms: int        # terms of R(z) = sum 2 z^k/(2k+1)
  sin_terms: int        # terms of S(z) = sum (-1)^k z^(k-1)/(2k+1)!, k >= 1
  cos_terms: int        # terms of C(z) = sum (-1)^k z^(k-2)/(2k)!, k >= 2
  window_words: int     # Payne-Hanek window, 64-bit words
  mant_limbs: int       # 32-bit limbs of the integer significand
  piece_bits: int       # the fraction is summed from pieces this wide (exact in the dtype)

  @property
  def bits(self) -> int: return self.mant + 1
  def round(self, x: Fraction) -> float: return _round(x, self.bits)
  @property
  def j_max(self) -> int: return (self.bias - self.mant + 62) >> 6  # the largest window word index (largest finite a)
  @property
  def table(self) -> tuple[int, ...]: return two_over_pi_words(self.j_max + self.window_words + 1)

FORMATS: dict[DType, _Fmt] = {
  dtypes.float32: _Fmt(dtypes.float32, dtypes.int32, dtypes.uint32, 23, 127, exp2_degree=8, log_terms=4, sin_terms=4,
                       cos_terms=4, window_words=2, mant_limbs=1, piece_bits=16),
  dtypes.float64: _Fmt(dtypes.float64, dtypes.int64, dtypes.uint64, 52, 1023, exp2_degree=14, log_terms=10, sin_terms=8,
                       cos_terms=7, window_words=3, mant_limbs=2, piece_bits=32)}


def _bits(x: float, f: _Fmt) -> int:
  """The bit pattern of x in f's dtype, as a signed int (x must be exactly representable)."""
  return int(np.array(x, to_np(f.dt)).view(to_np(f.it)))

def _poly(x: V, coeffs: list[float]) -> V:
  """coeffs[0] + x*(coeffs[1] + x*(...)) by Horner's rule."""
  acc = x.c(coeffs[-1])
  for c in reversed(coeffs[:-1]): acc = acc * x + c
  return acc

def _two_sum(a: V, b: V) -> tuple[V, V]:
  """s + e == a + b exactly, s = fl(a + b) (Knuth)."""
  s = a + b
  bb = s - a
  return s, (a - (s - bb)) + (b - bb)

def _fast_two_sum(a: V, b: V) -> tuple[V, V]:
  """s + e == a + b exactly when |a| >= |b| or a == 0 (Dekker)."""
  s = a + b
  return s, b - (s - a)

def _split(a: V, f: _Fmt) -> tuple[V, V]:
  """a = hi + lo with both halves short enough that products of halves are exact (Veltkamp)."""
  c = a * float(2 ** ((f.bits + 1) // 2) + 1)
  hi = c - (c - a)
  return hi, a - hi

def _two_prod(a: V, b: V, f: _Fmt) -> tuple[V, V]:
  """p + e == a * b exactly, p = fl(a * b) (Dekker, without a fused multiply-add)."""
  p = a * b
  (ah, al), (bh, bl) = _split(a, f), _split(b, f)
  return p, (((ah * bh - p) + ah * bl) + al * bh) + al * bl


# ***** EXP2 *****

def _exp2(x: V, f: _Fmt) -> V:
  lim = float(f.bias + f.mant + 10)
  xc = x.lt(lim).where(x, lim)                       # NaN -> lim (replaced at the end)
  xc = xc.lt(-lim).where(-lim, xc)
  magic = 1.5 * 2.0 ** f.mant
  t = xc + magic                                     # the integer nearest xc (ties to even) sits in t's low bits
  n = t.bitcast(f.it) - _bits(magic, f)
  s = xc - (t - magic)                               # exact, |s| <= 1/2
  ln2 = ln2_fraction()
  c1 = f.round(ln2)
  q = _poly(s, [f.round(ln2 ** k / math.factorial(k)) for k in range(2, f.exp2_degree + 1)])
  th, tl = _two_prod(s, s.c(c1), f)                 # 2^s = 1 + s*ln2 + s^2*q(s), the linear term exactly
  yh, e = _fast_two_sum(s.c(1.0), th)
  y = yh + (e + (tl + (s * f.round(ln2 - Fraction(c1)) + (s * s) * q)))
  n1 = n >> 1
  scale = [((m + f.bias) << f.mant).bitcast(f.dt) for m in (n1, n - n1)]
  return x.ne(x).where(x, (y * scale[0]) * scale[1])


# ***** LOG2 *****

def _log2(x: V, f: _Fmt) -> V:
  sub_scale = f.mant + 2
  tiny = x.lt(2.0 ** (1 - f.bias))
  xs = tiny.where(x * 2.0 ** sub_scale, x)
  c = _bits(float(np.sqrt(np.array(0.5, to_np(f.dt)))), f)  # significands are put in [c, 2c), c ~ sqrt(1/2)
  ix = xs.bitcast(f.it) + (_bits(1.0, f) - c)
  k = (ix >> f.mant) - f.bias
  k = k + tiny.where(k.c(-sub_scale), 0)
  m = ((ix & ((1 << f.mant) - 1)) + c).bitcast(f.dt)
  fm = m - 1.0                                       # exact (Sterbenz)
  hfsq = 0.5 * (fm * fm)
  s = fm / (fm + 2.0)
  z = s * s
  r = s * (hfsq + z * _poly(z, [f.round(Fraction(2, 2 * j + 1)) for j in range(1, f.log_terms + 1)]))
  head = f.bits // 2                                 # significant bits kept in hi, and (bits - head) in IVLN2HI
  hi = ((fm - hfsq).bitcast(f.it) & -(1 << (f.bits - head))).bitcast(f.dt)
  lo = ((fm - hi) - hfsq) + r
  inv_ln2 = 1 / ln2_fraction()
  ivln2hi = _round(inv_ln2, f.bits - head)
  ivln2lo = f.round(inv_ln2 - Fraction(ivln2hi))
  vhi = hi * ivln2hi                                 # exact
  vlo = (lo + hi) * ivln2lo + lo * ivln2hi
  y = k.cast(f.dt)
  w = y + vhi
  vlo = vlo + ((y - w) + vhi)                        # y is 0 or |y| >= 1 > |vhi|: the error of w, exactly
  res = vlo + w
  res = x.lt(math.inf).where(res, x)                 # +inf -> +inf, NaN -> NaN
  res = x.ne(0.0).where(res, -math.inf)              # +-0 -> -inf
  return x.lt(0.0).where(math.nan, res)              # x < 0 -> NaN


# ***** SIN *****

def _reduce_pio2(a: V, f: _Fmt) -> tuple[V, V, V]:
  """(rh, rl, k) with a = k*pi/2 + rh + rl (mod 2 pi), |rh + rl| <= pi/4, rl a double-float tail, k in 0..3 (uint64).
  Valid for finite a >= pi/4 (other lanes compute a value that is discarded)."""
  u64, i64, m32 = dtypes.uint64, dtypes.int64, 2**32 - 1
  bits = a.bitcast(f.ut).cast(u64)
  m = (bits & ((1 << f.mant) - 1)) | (1 << f.mant)  # a = m * 2^E, E = exponent field - bias - mant
  t = (bits >> f.mant).cast(i64) + (62 - f.bias - f.mant)  # table bit of 2/pi's bit E-1 (64 leading zero bits)
  j, b = t >> 6, (t & 63).cast(u64)
  sel = [((j >> level) & 1).ne(0) for level in range(f.j_max.bit_length())]
  def pick(w0: int) -> V:
    level = [a.values.const(f.table[w] if w < len(f.table) else 0, u64) for w in range(w0, w0 + 2 ** len(sel))]
    for s in sel: level = [lo if lo.i == hi.i else s.where(hi, lo) for lo, hi in zip(level[0::2], level[1::2])]
    return level[0]
  words = [pick(w) for w in range(f.window_words + 1)]
  window = [(words[w] << b) | ((words[w + 1] >> 1) >> (63 - b)) for w in range(f.window_words)]
  wl = [p for w in reversed(window) for p in (w & m32, w >> 32)]  # 32-bit limbs, least significant first
  ml = [m] if f.mant_limbs == 1 else [m & m32, m >> 32]
  cols: list[V | None] = [None] * len(wl)           # the product mod 2^(32*len(wl)), column sums of 32-bit halves
  def add(col: int, v: V) -> None: cols[col] = v if cols[col] is None else cols[col] + v
  for i, mi in enumerate(ml):
    for k, wk in enumerate(wl):
      if i + k >= len(wl): continue
      p = mi * wk
      add(i + k, p & m32)
      if i + k + 1 < len(wl): add(i + k + 1, p >> 32)
  limbs, carry = [], None
  for col in cols:
    s = col if carry is None else col + carry
    limbs.append(s & m32)
    carry = s >> 32
  top = (limbs[-1] + (1 << 29)) & m32               # + 1/2 quadrant: round to the nearest quadrant
  k = top >> 30
  ftop = (top & ((1 << 30) - 1)).cast(i64) - (1 << 29)  # fraction = ftop*2^-30 + limbs[-2]*2^-62 + ..., in [-1/2, 1/2)
  if f.piece_bits == 32: pieces = [(ftop, 30), (limbs[-2], 62), (limbs[-3], 94), (limbs[-4], 126)]
  else: pieces = [(ftop >> 16, 14), (ftop & 0xffff, 30), (limbs[-2] >> 16, 46), (limbs[-2] & 0xffff, 62)]
  vals = [p.cast(f.dt) * 2.0 ** -w for p, w in pieces]  # each exact
  h, lo = _two_sum(vals[0], vals[1])
  for v in vals[2:]:
    h, e = _two_sum(h, v)
    h, lo = _fast_two_sum(h, e + lo)
  pio2 = pi_fraction() / 2
  pio2_hi = f.round(pio2)
  ph, pl = _two_prod(h, h.c(pio2_hi), f)
  rh, rl = _fast_two_sum(ph, pl + (h * f.round(pio2 - Fraction(pio2_hi)) + lo * pio2_hi))
  return rh, rl, k

def _sin(x: V, f: _Fmt) -> V:
  sign = 1 << (8 * f.dt.itemsize - 1)
  a = (x.bitcast(f.ut) & (sign - 1)).bitcast(f.dt)
  small = a.lt(f.round(pi_fraction() / 4))
  ph, pl, pk = _reduce_pio2(a, f)
  rh, rl, k = small.where(a, ph), small.where(0.0, pl), small.where(0, pk)
  zh, zl = _two_prod(rh, rh, f)
  sin_coeffs = [f.round(Fraction((-1) ** j, math.factorial(2 * j + 1))) for j in range(1, f.sin_terms + 1)]
  sin_r = rh + ((rh * zh) * _poly(zh, sin_coeffs) + rl * (1.0 - 0.5 * zh))
  cos_coeffs = [f.round(Fraction((-1) ** j, math.factorial(2 * j))) for j in range(2, f.cos_terms + 2)]
  hz = 0.5 * zh
  w = 1.0 - hz
  cos_r = w + (((1.0 - w) - hz) + ((zh * zh) * _poly(zh, cos_coeffs) - (0.5 * zl + rh * rl)))
  v = (k & 1).ne(0).where(cos_r, sin_r)
  v = (k & 2).ne(0).where(-v, v)
  res = (v.bitcast(f.ut) ^ (x.bitcast(f.ut) & sign)).bitcast(f.dt)
  return a.lt(math.inf).where(res, math.nan)


# ***** the pass *****

METHODS = {Ops.EXP2: _exp2, Ops.LOG2: _log2, Ops.SIN: _sin}

def _decompose(b: ProgramBuilder, i: int, u: UOp, src: tuple[int, ...], only: set[DType] | None = None) -> int:
  """The rewrite of one EXP2, LOG2 or SIN uop: its method on its new operand (float16 / bfloat16 through float32); one
  of a scalar dtype not in `only` is copied."""
  if only is not None and u.dtype.scalar() not in only: return copy(b, i, u, src)
  x = Values(b, u.dtype.count).of(src[0], u.dtype.scalar())
  if x.dt in VIA_FLOAT32: return METHODS[u.op](x.cast(dtypes.float32), FORMATS[dtypes.float32]).cast(x.dt).i
  return METHODS[u.op](x, FORMATS[x.dt]).i

def decompose_transcendentals(program: Program, only: set[DType] | None = None) -> Program:
  """The program with every EXP2, LOG2 and SIN (of a scalar dtype in `only`, default all) replaced by ALU ops (see the
  module docstring). Other uops keep their order; a program with nothing to replace comes back unchanged."""
  verify(program)
  if not any(u.op in METHODS and (only is None or u.dtype.scalar() in only) for u in program.uops): return program
  return verify(rewrite(program, dict.fromkeys(METHODS, functools.partial(_decompose, only=only))))
