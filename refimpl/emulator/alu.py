"""The reference semantics of every ALU op, CAST and BITCAST: one short vectorized rule per op family.

Each rule's docstring is the rule (SPEC.md prints them). The executor (machine.py) calls only:
  exec_alu(op, dtype, *operands)  -> Outcome     dtype is the operands' scalar dtype (for WHERE: of the two values)
  exec_cast(x, src, dst)          -> Outcome     scalar dtypes
  exec_bitcast(x, src, dst)       -> Outcome     scalar dtypes of one size
  allowed_results(op, dtype, *operands) -> list  every acceptable result array of an allowed-set op
Operands are numpy arrays (0-d too) of `to_np` of their scalar dtype (Python scalars are converted); they broadcast, and
vectors are just more array dimensions, so every rule is elementwise. Undefined lanes are reported in `Outcome.undefined` with the
kind (refimpl/emulator/ub.py) and the reason of the first one (in C order), never raised: strict or permissive is the
executor's choice. Their values are 0. A rule declares the kinds it can report with `@undefined(...)` (`undefined_kinds`).
An op/dtype pair that the verifier rejects raises ValueError; operands of the wrong numpy dtype raise TypeError.

Looseness (docs/semantics.md, "Looseness and certainty"): `Outcome.loose` marks lanes whose value is not the only acceptable bit
pattern: the lanes of a rule declared `@loose(...)` that its declaration leaves open (a tolerance rule's lanes off its
special values, an allowed-set rule's lanes where its members differ), and every float NaN an op or cast produces (its
payload is unspecified). WHERE and BITCAST move bits and are never loose; the executor carries looseness of operands
forward itself. `Outcome.certainty` is each lane's level (refimpl/emulator/certainty.py): a loose NaN is NAN_PAYLOAD, the
rule's other loose lanes are the level it declares (`looseness(op).level`: TOLERANCE or ALLOWED_SET).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, NamedTuple

import numpy as np

from refimpl.dtype import DType, PtrDType, dtypes, to_np
from refimpl.emulator.certainty import Certainty, of_loose, where_undefined
from refimpl.emulator.reference import F32, F64, bits_of, correctly_rounded, from_f64, ro_sum
from refimpl.emulator.ub import UB
from refimpl.ir.ops import GroupOp, Ops
from refimpl.ir.verify import alu_dtype_error


@dataclass(frozen=True)
class Outcome:
  """The result of one op over many lanes (see the module docstring)."""
  values: np.ndarray                   # result lanes: to_np(result dtype), the operands' broadcast shape
  undefined: np.ndarray | None = None  # bool mask of lanes the spec leaves undefined; None = no such lane
  reason: str = ""                     # how the first undefined lane broke the rule, with its operands
  loose: np.ndarray | None = None      # bool mask of lanes that are not bit-exact (tolerance, allowed set, NaN payload)
  kind: UB | None = None               # the kind of undefined behaviour of the first undefined lane
  looseness: Certainty = Certainty.NAN_PAYLOAD  # the level of the loose lanes that are not NaN (refimpl.emulator.certainty)

  @property
  def certainty(self) -> np.ndarray | None:
    """The level of every lane (refimpl.emulator.certainty): UNDEFINED where undefined, NAN_PAYLOAD on loose NaN lanes,
    `looseness` on the other loose lanes, EXACT elsewhere; None when every lane is EXACT."""
    return where_undefined(of_loose(self.values, self.loose, self.looseness), self.undefined)

def _some(mask: np.ndarray | None) -> np.ndarray | None: return mask if mask is not None and mask.any() else None
def _nan_loose(v: np.ndarray, also: np.ndarray | None = None) -> np.ndarray | None:
  """Loose lanes of a float result: every NaN (payload unspecified), plus `also`."""
  m = np.isnan(v)
  return _some(m if also is None else m | also)

Check = tuple[np.ndarray, UB, Callable[[Callable[[np.ndarray], Any]], str]]

def _undefined(values: np.ndarray, checks: list[Check]) -> Outcome:
  """An Outcome whose lanes failing any check (mask, kind, reason) are undefined (values 0). The kind and reason are
  the first failing lane's (its first failing check's); a reason function gets `at`, which picks that lane out of an
  operand."""
  bad = checks[0][0]
  for m, _, _ in checks[1:]: bad = bad | m
  if not bad.any(): return Outcome(values)
  bad = np.broadcast_to(bad, values.shape).copy()
  first = int(np.argmax(bad))
  at = lambda x: np.broadcast_to(x, values.shape).flat[first]
  kind, why = next((kind, why) for m, kind, why in checks if at(m))
  return Outcome(np.where(bad, values.dtype.type(0), values), bad, why(at), kind=kind)

def undefined(*kinds: UB) -> Callable[[Callable], Callable]:
  """Declares the kinds of undefined behaviour a rule can report (a rule without it is defined wherever it is
  accepted). SPEC.md and the fuzzer read the declaration (`undefined_kinds`)."""
  def declare(rule: Callable) -> Callable:
    rule.undefined = kinds  # type: ignore[attr-defined]
    return rule
  return declare

Expr = int | float | tuple  # an operand position, a float constant, or (op, *exprs): ops over a rule's operands

@dataclass(frozen=True)
class Looseness:
  """How a loose rule's float results may differ from its reference values (see `loose`)."""
  level: Certainty          # TOLERANCE or ALLOWED_SET: the level of its loose lanes that are not NaN
  other: Expr | None = None  # an allowed set's other member, as ops over the operands (None for a tolerance rule)

def loose(level: Certainty, other: Expr | None = None) -> Callable[[Callable], Callable]:
  """Declares a rule loose on floats (on ints and bool it is exact; a rule without it is exact but for the payload of
  the NaNs it produces): TOLERANCE (within the ULP bound of refimpl/spec.py), or ALLOWED_SET {the reference, `other`},
  `other` written as ops over the operands (0, 1, ...: the operands; a float: a constant of their dtype), which
  `allowed_results` evaluates and the fuzzer's below run builds. spec.kind, SPEC.md and the fuzzer read the
  declaration (`looseness`)."""
  def declare(rule: Callable) -> Callable:
    rule.looseness = Looseness(level, other)  # type: ignore[attr-defined]
    return rule
  return declare

def _bits(dt: DType) -> int: return 8 * dt.itemsize
def _is_signed(dt: DType) -> bool: return dt in dtypes.sints
class FloatFormat(NamedTuple):
  """A float dtype's format: significand bits with the hidden one, smallest and largest normal exponent, whether it
  has infinities (fp8e4m3 is "fn", finite: its top exponent holds numbers, and it has no inf)."""
  p: int
  emin: int
  emax: int
  has_inf: bool

def float_format(dt: DType) -> FloatFormat:
  """The FloatFormat of a float dtype."""
  e, m = dtypes.finfo(dt)
  finite = dt is dtypes.fp8e4m3
  return FloatFormat(m + 1, 2 - 2 ** (e - 1), 2 ** (e - 1) - 1 + finite, not finite)

# float rules compute in float32 (float64 for float64) and round once to the dtype
_WIDE = {dtypes.float16: F32, dtypes.bfloat16: F32, dtypes.float32: F32, dtypes.float64: F64}

def _rounded(fn: Callable, dt: DType, *xs: np.ndarray) -> np.ndarray:
  w = _WIDE[dt]
  return fn(*(x.astype(w, copy=False) for x in xs)).astype(to_np(dt), copy=False)

# the numpy ufunc each op's rule is built on, the one place that names it (the rules put rounding, NaN and signed-zero
# handling around it where they must; alu.ufunc_rule says where a rule is the ufunc alone; folds.fold tries it first)
UFUNCS: dict[Ops, np.ufunc] = {
  Ops.ADD: np.add, Ops.SUB: np.subtract, Ops.MUL: np.multiply, Ops.FDIV: np.divide, Ops.NEG: np.negative, Ops.SQRT: np.sqrt,
  Ops.AND: np.bitwise_and, Ops.OR: np.bitwise_or, Ops.XOR: np.bitwise_xor, Ops.MAX: np.maximum, Ops.CMPLT: np.less,
  Ops.CMPNE: np.not_equal, Ops.TRUNC: np.trunc}
_FLOAT_FN: dict[Ops, Callable] = {**{op: UFUNCS[op] for op in (Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.NEG, Ops.SQRT,
                                                               Ops.TRUNC)},
                                  Ops.RECIP: lambda x: x.dtype.type(1) / x}
_INT_FN: dict[Ops, Callable] = {op: UFUNCS[op] for op in (Ops.ADD, Ops.SUB, Ops.MUL, Ops.NEG)}
_BOOL_FN: dict[Ops, Callable] = {Ops.ADD: np.logical_or, Ops.MUL: np.logical_and}

# ---- the rules ----

def arith(op: Ops, dt: DType, *xs: np.ndarray) -> Outcome:
  """ADD, SUB, MUL, NEG.
  ints: two's complement wrap-around modulo 2^bits, signed included (NEG of INT_MIN is INT_MIN; NEG of unsigned x is
  2^bits - x). bool: ADD is OR, MUL is AND (SUB and NEG are rejected).
  floats: the exact result rounded once to nearest even in the dtype; subnormals kept; IEEE 754 specials (inf - inf and
  0 * inf are NaN; x + (-x) is +0; the sign of a zero product is the XOR of the signs). NEG flips the sign bit (exact).
  float16/bfloat16 compute in float32 and round once more: innocuous, because float32 has at least 2p+2 significand
  bits for p = 11 and 8 (Figueroa, "When is double rounding innocuous?", 1995)."""
  if dt is dtypes.bool: return Outcome(_BOOL_FN[op](*xs))
  if dtypes.is_int(dt): return Outcome(_INT_FN[op](*xs))
  v = _rounded(_FLOAT_FN[op], dt, *xs)
  return Outcome(v, loose=_nan_loose(v))

def float_arith(op: Ops, dt: DType, *xs: np.ndarray) -> Outcome:
  """FDIV, RECIP, SQRT (floats only).
  The exact result rounded once to nearest even in the dtype (RECIP x is 1 / x), computed as `arith` says. IEEE 754
  specials: x / +-0 is +-inf with the XOR of the signs, 0/0 and inf/inf are NaN, x / inf is a signed zero;
  SQRT(-0) is -0, SQRT(x < 0) is NaN, SQRT(+inf) is +inf."""
  v = _rounded(_FLOAT_FN[op], dt, *xs)
  return Outcome(v, loose=_nan_loose(v))

def trunc(op: Ops, dt: DType, x: np.ndarray) -> Outcome:
  """TRUNC (floats only): round toward zero. The result is the float nearest to x toward zero that is an integer
  (trunc(2.5) = 2, trunc(-2.5) = -2, trunc(0.99999994) = 0); exact, so it needs no rounding in any dtype. It keeps x's
  sign: a result of zero is a zero of x's sign (trunc(-0.5) = -0, every subnormal gives a signed zero). An integer
  (every x with |x| >= 2^M, M the dtype's stored mantissa bits) is itself; +-inf is +-inf; NaN gives NaN (payload
  unspecified: loose). Defined for every input."""
  v = _rounded(_FLOAT_FN[op], dt, x)  # half/bf16 through float32: the integer part of a narrow value is one of its values
  return Outcome(v, loose=_nan_loose(v))

def ufunc_rule(op: Ops, dt: DType) -> np.ufunc | None:
  """The numpy ufunc that is this module's rule for `op` on `dt`, lane for lane and bit for bit in dt's numpy type,
  where the rule is that ufunc and nothing more: ADD, SUB, MUL, NEG on ints (`arith`: numpy's wrap-around) and on
  float32 and float64 (`arith`: one rounding in the dtype itself, _WIDE); FDIV and SQRT on float32 and float64
  (`float_arith`); TRUNC on float32 and float64 (`trunc`); AND, OR, XOR and MAX on ints (`bitwise`, `maximum`); CMPLT
  and CMPNE on ints, floats and bool (`compare`; on bool numpy's less is !a && b and its not_equal XOR). None for every
  other pair. Each such rule is defined on every lane and loose exactly on the NaNs it returns (NaN operands give
  NaN, so a chain of one is loose exactly where its result is NaN). The emulator applies these ufuncs directly to
  exact operands (compute._ufunc_alu, folds.fold_ufunc)."""
  if op not in GroupOp.ALU or alu_dtype_error(op, dt) is not None: return None
  if op in (Ops.CMPLT, Ops.CMPNE): return UFUNCS[op]
  if dt is dtypes.bool: return None
  if dtypes.is_int(dt): return UFUNCS[op] if op in _INT_FN or op in (Ops.AND, Ops.OR, Ops.XOR, Ops.MAX) else None
  if dt in (dtypes.float32, dtypes.float64) and _WIDE[dt] == to_np(dt) and op is not Ops.RECIP: return _FLOAT_FN.get(op)
  return None

def conversion_rule(op: Ops, src: DType, dst: DType) -> Callable[[np.ndarray], np.ndarray] | None:
  """The numpy function that is this module's rule for CAST or BITCAST from src to dst, lane for lane and bit for bit,
  where the rule is that function and nothing more, defined everywhere and loose exactly on the NaNs it returns:
  BITCAST (the bits read as dst: never loose); CAST to bool from ints, bool, float32 and float64 (x != 0); from bool
  (0 or 1); between ints (wrap: numpy's astype); from ints to float64, and from ints of at most 32 bits to float32 (the
  exact value rounded once: numpy's astype); float32 to float64 (exact; a NaN stays NaN, loose). None for every other
  pair. The emulator applies them directly to exact operands (compute._convert)."""
  native = (dtypes.float32, dtypes.float64)
  if op is Ops.BITCAST: return lambda x: bitcast(x, src, dst).values
  if dst is dtypes.bool and (dtypes.is_int(src) or src is dtypes.bool or src in native): return lambda x: x != 0
  if src is dtypes.bool or (dtypes.is_int(src) and dtypes.is_int(dst)): return lambda x: x.astype(to_np(dst))
  if dtypes.is_int(src) and (dst is dtypes.float64 or (dst is dtypes.float32 and src.itemsize <= 4)):
    return lambda x: x.astype(to_np(dst))
  if src is dtypes.float32 and dst is dtypes.float64: return lambda x: x.astype(np.float64)
  return None

@undefined(UB.DIVISOR_ZERO, UB.DIVISION_OVERFLOW)
def idiv_mod(op: Ops, dt: DType, a: np.ndarray, b: np.ndarray) -> Outcome:
  """IDIV, MOD (ints only).
  IDIV truncates toward zero (7 / -2 = -3); MOD is a - (a IDIV b) * b, so it takes the dividend's sign (-7 % 2 = -1).
  Undefined: DIVISOR_ZERO (reason "division by zero"), DIVISION_OVERFLOW (reason "signed INT_MIN / -1")."""
  sym = "/" if op is Ops.IDIV else "%"
  checks: list[Check] = [(b == 0, UB.DIVISOR_ZERO, lambda at: "division by zero")]
  minus1 = b == -1 if _is_signed(dt) else None
  if minus1 is not None and minus1.any():
    checks.append(((a == dtypes.min(dt)) & minus1, UB.DIVISION_OVERFLOW, lambda at: f"signed INT_MIN {sym} -1"))
  bad = checks[0][0] | checks[-1][0]
  bs = np.where(bad, b.dtype.type(1), b) if bad.any() else b
  return _undefined(_quotient(op, a, bs), checks)

def _quotient(op: Ops, a: np.ndarray, b: np.ndarray) -> np.ndarray:
  """IDIV's or MOD's result where b is neither 0 nor (signed) -1 under INT_MIN."""
  r = np.fmod(a, b)  # C's % on ints: the truncated remainder, with the dividend's sign
  return r if op is Ops.MOD else (a - r) // b  # a - r is a multiple of b: the floor is exact

@undefined(UB.SHIFT_COUNT)
def shift(op: Ops, dt: DType, a: np.ndarray, b: np.ndarray) -> Outcome:
  """SHL, SHR (ints only; the count b has a's dtype).
  SHL shifts the two's complement bit pattern left, dropping high bits (1 << 31 in int32 is INT_MIN). SHR is arithmetic
  on signed (copies of the sign bit come in), logical on unsigned (zeros come in).
  Undefined: SHIFT_COUNT (reason "shift count 40 outside [0, 32)")."""
  bits = _bits(dt)
  bad = (b < 0) | (b >= bits)
  some = bad.any()
  v = _shifted(op, dt, a, np.where(bad, b.dtype.type(0), b) if some else b)
  if not some: return Outcome(v)
  return _undefined(v, [(bad, UB.SHIFT_COUNT, lambda at: f"shift count {int(at(b))} outside [0, {bits})")])

def _shifted(op: Ops, dt: DType, a: np.ndarray, n: np.ndarray) -> np.ndarray:
  """SHL's or SHR's result where every count n is in [0, bits)."""
  u = a.view(np.dtype(f"u{dt.itemsize}"))  # the bit pattern
  return (u << n.view(u.dtype)).view(a.dtype) if op is Ops.SHL else a >> n

def constant_rule(op: Ops, dt: DType, c: Any) -> Callable[[np.ndarray], np.ndarray] | None:
  """This module's rule for `op` on `dt` when its second operand is the constant c, as a function of the first operand,
  where with that constant the rule is defined on every lane and exact: SHL and SHR by c in [0, bits) (`shift`), IDIV
  and MOD by c other than 0 and, on signed ints, -1 (`idiv_mod`); None otherwise. The emulator binds these once per
  program (machine.Plan.constant_rules)."""
  if not dtypes.is_int(dt) or op not in (Ops.SHL, Ops.SHR, Ops.IDIV, Ops.MOD): return None
  c = int(c)
  b = np.array([c], dtype=to_np(dt))
  if op in (Ops.SHL, Ops.SHR): return (lambda a: _shifted(op, dt, a, b)) if 0 <= c < _bits(dt) else None
  if c == 0 or (c == -1 and _is_signed(dt)): return None
  return lambda a: _quotient(op, a, b)

def bitwise(op: Ops, dt: DType, a: np.ndarray, b: np.ndarray) -> Outcome:
  """XOR, OR, AND (ints and bool): bit by bit on the two's complement pattern; on bool the logical operation."""
  return Outcome(UFUNCS[op](a, b))

def _float_max(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
  """np.maximum (which propagates NaN) with +0 at the lanes holding one +0 and one -0, and those lanes."""
  v = np.maximum(a, b)
  both = (a == 0) & (b == 0)
  if not both.any(): return v, None
  mixed = both & (np.signbit(a) != np.signbit(b))
  return np.where(mixed, v.dtype.type(0.0), v), mixed

# MAX, except that max(+0, -0) is -0: where either operand is non-zero MAX, else -MAX(-a, -b)
NEGATIVE_ZERO_MAX = (Ops.WHERE, (Ops.OR, (Ops.CMPNE, 0, 0.0), (Ops.CMPNE, 1, 0.0)), (Ops.MAX, 0, 1),
                     (Ops.NEG, (Ops.MAX, (Ops.NEG, 0), (Ops.NEG, 1))))

@loose(Certainty.ALLOWED_SET, other=NEGATIVE_ZERO_MAX)
def maximum(op: Ops, dt: DType, a: np.ndarray, b: np.ndarray) -> Outcome:
  """MAX.
  ints: the larger. bool: OR.
  floats: NaN if either input is NaN; otherwise the larger, where max(+0, -0) (either order) is the allowed set
  {+0, -0}. The reference value is +0 (IEEE 754-2019 maximum); such lanes are loose."""
  if dt is dtypes.bool: return Outcome(a | b)
  if dtypes.is_int(dt): return Outcome(np.maximum(a, b))
  v, mixed = _float_max(a, b)
  return Outcome(v, loose=_nan_loose(v, mixed), looseness=maximum.looseness.level)

def compare(op: Ops, dt: DType, a: np.ndarray, b: np.ndarray) -> Outcome:
  """CMPLT, CMPNE (result bool).
  ints: by value (signed or unsigned per the dtype). bool: CMPLT is (!a && b), CMPNE is XOR.
  floats: IEEE 754: any comparison with NaN is unordered, so NaN < x is false and NaN != x is true (NaN != NaN too);
  -0 == +0."""
  if dt is dtypes.bool: return Outcome(~a & b if op is Ops.CMPLT else a ^ b)
  return Outcome(a < b if op is Ops.CMPLT else a != b)

def where(op: Ops, dt: DType, c: np.ndarray, a: np.ndarray, b: np.ndarray) -> Outcome:
  """WHERE (c ? a : b): selects the bits of a where the bool c is true, else of b. Exact for every dtype, NaN payloads
  included (it moves bits; a NaN it passes on is only as loose as its operand was)."""
  return Outcome(select(c, a, b))

select = np.where  # WHERE's rule on the operands' arrays, for every dtype (the exact path, loops' select chains)

UNFUSED = (Ops.ADD, (Ops.MUL, 0, 1), 2)  # a * b + c with MUL rounded, then ADD rounded

@loose(Certainty.ALLOWED_SET, other=UNFUSED)
def mulacc(op: Ops, dt: DType, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> Outcome:
  """MULACC (a * b + c).
  ints: two's complement wrap-around (as MUL then ADD). bool: (a AND b) OR c.
  floats: allowed set {fused, unfused}: fused = the exact a*b + c rounded once to nearest even; unfused = MUL rounded,
  then ADD rounded. The reference value is the fused one; lanes where the two differ (and NaN lanes) are loose.
  Fused for float32 and narrower: a*b is exact in float64, the sum is rounded to odd in float64 (TwoSum), then once to
  the dtype. Fused for float64: Dekker's exact product and TwoSum with a round-to-odd tail (Boldo & Melquiond 2008);
  lanes outside that method's exponent range fall back to exact rational arithmetic (fractions.Fraction)."""
  if dt is dtypes.bool: return Outcome((a & b) | c)
  if dtypes.is_int(dt): return Outcome(a * b + c)
  fused, unfused = _fused(dt, a, b, c), evaluate(UNFUSED, dt, (a, b, c))
  return Outcome(fused, loose=_nan_loose(fused, bits_of(fused) != bits_of(unfused)), looseness=mulacc.looseness.level)

def _fused(dt: DType, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
  wa, wb, wc = a.astype(F64), b.astype(F64), c.astype(F64)
  if dt is not dtypes.float64: return from_f64(ro_sum(wa * wb, wc), dt)  # the product is exact in float64
  return _fma64(wa, wb, wc)

_SPLIT = 2.0 ** 27 + 1  # Veltkamp's constant for float64

def _fma64(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
  """a * b + c rounded once (float64). Exact product p + pe (Dekker), p + c = s + se (TwoSum), result s + RO(se + pe).
  Valid while nothing overflows and the product's error term cannot underflow; other finite lanes use Fractions."""
  a, b, c = np.broadcast_arrays(a, b, c)
  def split(x):
    t = x * _SPLIT
    hi = t - (t - x)
    return hi, x - hi
  p = a * b
  (ah, al), (bh, bl) = split(a), split(b)
  pe = ((ah * bh - p) + ah * bl + al * bh) + al * bl
  s = c + p
  bb = s - c
  se = (c - (s - bb)) + (p - bb)
  r = s + ro_sum(se, pe)
  lo, hi = 2.0 ** -900, 2.0 ** 990
  finite = np.isfinite(a) & np.isfinite(b) & np.isfinite(c)
  zero_product = finite & ((a == 0) | (b == 0))
  fast = finite & ~zero_product & (np.abs(a) < hi) & (np.abs(b) < hi) & (np.abs(p) >= lo) & (np.abs(p) < hi) & (np.abs(c) < hi)
  fast &= (np.abs(r) >= lo) | ((s == 0) & (se == 0) & (pe == 0))
  # a zero or non-finite factor makes a*b exact; an infinite c with finite factors is the result
  r = np.where(zero_product | ~finite, a * b + c, r)
  r = np.where(np.isfinite(a) & np.isfinite(b) & np.isinf(c), c, r)
  slow = np.flatnonzero(finite & ~zero_product & ~fast)
  if slow.size:
    r = r.copy()
    for i in slow.tolist():
      r.flat[i] = _fraction_to_f64(Fraction(float(a.flat[i])) * Fraction(float(b.flat[i])) + Fraction(float(c.flat[i])))
  return r

def _fraction_to_f64(q: Fraction) -> float:
  """The rational q rounded once to nearest even in float64 (CPython's int division is correctly rounded)."""
  try: return q.numerator / q.denominator
  except OverflowError: return float("inf") if q > 0 else float("-inf")

@loose(Certainty.TOLERANCE)
def transcendental(op: Ops, dt: DType, x: np.ndarray) -> Outcome:
  """EXP2, LOG2, SIN (floats only): tolerance.
  The reference value is the exact result rounded to nearest even in the dtype, computed in higher precision
  (refimpl/emulator/reference.py states the method and its own error, at most 0.5 ulp + 2^-9 ulp); an implementation
  may differ from it by the dtype's ULP bound in refimpl/spec.py (ULP_BOUNDS). SIN covers the full range.
  Exact lanes (special values, overflow thresholds): EXP2 of +-0 is 1, of -inf is +0, of +inf is +inf, of x >= emax+1
  is +inf, of x <= emin-p is +0; LOG2 of +-0 is -inf, of 1 is +0, of +inf is +inf, of x < 0 is NaN; SIN of +-0 is +-0,
  of +-inf is NaN. NaN in gives NaN out. Every other lane is loose (and every NaN, its payload being unspecified)."""
  v = correctly_rounded(op, x, dt)
  w = x.astype(F64)
  p, emin, emax, _ = float_format(dt)
  exact = {Ops.EXP2: lambda: (w == 0) | np.isinf(w) | (w >= emax + 1) | (w <= emin - p),
           Ops.LOG2: lambda: (w == 0) | (w == 1) | (w == np.inf) | (w < 0),
           Ops.SIN: lambda: (w == 0) | np.isinf(w)}[op]()
  return Outcome(v, loose=_nan_loose(v, ~exact & ~np.isnan(w)), looseness=transcendental.looseness.level)

THREEFRY_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))  # rotation counts of the even and the odd rounds
THREEFRY_PARITY = 0x1BD11BDA  # the key schedule's third word is K0 ^ K1 ^ this

def threefry(op: Ops, dt: DType, x: np.ndarray, key: np.ndarray) -> Outcome:
  """THREEFRY (uint64 only): Threefry-2x32 with 20 rounds (Salmon et al., "Parallel random numbers: as easy as 1, 2,
  3", SC'11; the Random123 threefry2x32_20), as tinygrad 0.10.1's threefry2x32(x, key) defines it. Exact.
  All arithmetic is on uint32 words, modulo 2^32. The counter is x = (X1 << 32) | X0 and the key key = (K1 << 32) | K0
  (low word first). Key schedule ks = (K0, K1, K0 ^ K1 ^ 0x1BD11BDA). Start: X0 += ks[0], X1 += ks[1]. Then for
  i = 0..4: four rounds, each X0 += X1; X1 = rotl(X1, r) ^ X0, with r from (13, 15, 26, 6) when i is even and
  (17, 29, 16, 24) when i is odd; then the key injection X0 += ks[(i+1) % 3], X1 += ks[(i+2) % 3] + (i + 1).
  The result is (X1 << 32) | X0: the first output word is the low word."""
  u32 = np.uint32
  lo32 = lambda v: (v & 0xFFFFFFFF).astype(u32)
  ks = (lo32(key), lo32(key >> 32), lo32(key) ^ lo32(key >> 32) ^ u32(THREEFRY_PARITY))
  x0, x1 = lo32(x) + ks[0], lo32(x >> 32) + ks[1]
  for i in range(5):
    for r in THREEFRY_ROTATIONS[i % 2]:
      x0 = x0 + x1
      x1 = ((x1 << u32(r)) | (x1 >> u32(32 - r))) ^ x0
    x0, x1 = x0 + ks[(i + 1) % 3], x1 + ks[(i + 2) % 3] + u32(i + 1)
  return Outcome((x1.astype(np.uint64) << np.uint64(32)) | x0.astype(np.uint64))

@undefined(UB.CAST_RANGE)
def cast(x: np.ndarray, src: DType, dst: DType) -> Outcome:
  """CAST (any scalar dtype to any other).
  to bool: x != 0 (NaN -> true, -0 -> false). from bool: false -> 0, true -> 1.
  int -> int: wrap (keep the low bits of the two's complement pattern; sign-extend when widening a signed source).
  int -> float, float -> float: the exact value rounded once to nearest even; beyond the largest finite -> +-inf
  (fp8e4m3 has no inf: a value that rounds beyond 448 (|x| > 464), or an inf, becomes NaN, as in ml_dtypes);
  NaN stays NaN (payload unspecified: loose).
  float -> int: truncate toward zero. Undefined: CAST_RANGE (reasons "float->int cast of nan", "float->int cast of inf",
  "float->int cast of 300.5 outside [-128, 127]")."""
  if dst is dtypes.bool: return Outcome((x.astype(F64) if dtypes.is_float(src) else x) != 0)
  if src is dtypes.bool: return Outcome(x.astype(to_np(dst)))
  if dtypes.is_int(src) and dtypes.is_int(dst): return Outcome(x.astype(to_np(dst)))
  if dtypes.is_int(dst): return _float_to_int(x, dst)
  if dtypes.is_int(src): v = _int_to_float(x, dst)
  else: v = from_f64(x.astype(F64), dst)
  return Outcome(v, loose=_nan_loose(v))

def _int_to_float(x: np.ndarray, dst: DType) -> np.ndarray:
  if x.dtype.itemsize < 8 or dst is dtypes.float64: return from_f64(x.astype(F64), dst)  # exact, or one rounding
  # 64-bit ints: hi + lo are both exact in float64; their round-to-odd sum makes the final rounding the only one
  hi, lo = (x >> 32).astype(F64) * 2.0 ** 32, (x & 0xFFFFFFFF).astype(F64)
  return from_f64(ro_sum(hi, lo), dst)

def _float_to_int(x: np.ndarray, dst: DType) -> Outcome:
  w = x.astype(F32 if x.dtype.itemsize <= 4 else F64, copy=False)  # exact; holds the range bounds (powers of two)
  t = np.trunc(w)
  lo, hi = dtypes.min(dst), dtypes.max(dst)
  nan, inf = np.isnan(w), np.isinf(w)
  out = ~nan & ~inf & ~((t >= float(lo)) & (t < float(hi + 1)))  # both bounds are 0 or powers of two: exact in w
  checks: list[Check] = [(nan, UB.CAST_RANGE, lambda at: "float->int cast of nan"),
                         (inf, UB.CAST_RANGE, lambda at: f"float->int cast of {float(at(w))}"),
                         (out, UB.CAST_RANGE, lambda at: f"float->int cast of {float(at(w))!r} outside [{lo}, {hi}]")]
  return _undefined(np.where(nan | inf | out, 0.0, t).astype(to_np(dst)), checks)

def bitcast(x: np.ndarray, src: DType, dst: DType) -> Outcome:
  """BITCAST (same itemsize, no bool): the same bits read as the other dtype. Exact, never loose by itself (the bits
  of a NaN an earlier op produced are unspecified; the executor keeps that operand's looseness)."""
  return Outcome(np.ascontiguousarray(x).view(to_np(dst)))

ALU_RULES: dict[Ops, Callable] = {
  **{op: arith for op in (Ops.ADD, Ops.SUB, Ops.MUL, Ops.NEG)}, **{op: float_arith for op in (Ops.FDIV, Ops.RECIP, Ops.SQRT)},
  Ops.IDIV: idiv_mod, Ops.MOD: idiv_mod, Ops.SHL: shift, Ops.SHR: shift, **{op: bitwise for op in (Ops.XOR, Ops.OR, Ops.AND)},
  Ops.MAX: maximum, Ops.CMPLT: compare, Ops.CMPNE: compare, Ops.WHERE: where, Ops.MULACC: mulacc,
  **{op: transcendental for op in GroupOp.Transcendental}, Ops.TRUNC: trunc, Ops.THREEFRY: threefry, Ops.CAST: cast,
  Ops.BITCAST: bitcast}
"""op -> its rule. ALU rules take (op, dtype, *operands), arrays of >= 1 dimension that broadcast; CAST and BITCAST
take (x, src, dst). Call them through exec_alu / exec_cast / exec_bitcast, which check dtypes and shape the Outcome
(the emulator, whose programs are verified, calls run_alu / run_conversion)."""
assert set(ALU_RULES) == set(GroupOp.ALU) | {Ops.CAST, Ops.BITCAST}

def undefined_kinds(op: Ops) -> tuple[UB, ...]:
  """The kinds of undefined behaviour op's rule declares (`undefined`); () for a rule defined everywhere."""
  return getattr(ALU_RULES[op], "undefined", ())

def looseness(op: Ops) -> Looseness | None:
  """The looseness op's rule declares (`loose`); None for an op without a rule or whose rule declares none."""
  return getattr(ALU_RULES.get(op), "looseness", None)

def evaluate(expr: Expr, dt: DType, xs: tuple[np.ndarray, ...]) -> np.ndarray:
  """The values of ops over operands (`Looseness.other`: an allowed set's other member) on operands xs of dtype dt,
  each op computed by its rule (undefined lanes 0)."""
  return _evaluated(expr, dt, xs)[0]

def _evaluated(expr: Expr, dt: DType, xs: tuple[np.ndarray, ...]) -> tuple[np.ndarray, DType]:
  """expr's values and their dtype: bool for a comparison, else its operands' (WHERE: its values')."""
  if isinstance(expr, int): return xs[expr], dt
  if isinstance(expr, float): return np.full(1, expr, to_np(dt)), dt
  op, *args = expr
  parts = [_evaluated(a, dt, xs) for a in args]
  operand_dt = parts[-1][1]
  values = ALU_RULES[op](op, operand_dt, *(v for v, _ in parts)).values
  return values, dtypes.bool if op in GroupOp.Comparison else operand_dt

# ---- the interface ----

def _scalar_dtype(dt: DType, what: str) -> DType:
  if not isinstance(dt, DType) or isinstance(dt, PtrDType) or dt.count != 1 or dt is dtypes.void:
    raise ValueError(f"{what} must be a scalar value dtype, got {dt!r}")
  return dt

def _lanes(dts: tuple[DType, ...], xs: tuple) -> tuple[tuple[int, ...], list[np.ndarray]]:
  """The operands' broadcast shape, and the operands as arrays of at least one dimension (numpy dtypes checked, Python
  scalars converted). They are not broadcast: numpy's ufuncs do that, and a divisor that is one value (a constant)
  stays one value, which lets numpy divide by it fast. At least 1-d, so that no op runs on numpy scalars (which warn)."""
  arrs = []
  for k, (dt, x) in enumerate(zip(dts, xs)):
    want = to_np(dt)
    a = np.asarray(x) if isinstance(x, (np.ndarray, np.generic)) else np.asarray(x, dtype=want)
    if a.dtype != want: raise TypeError(f"operand {k} must be an array of {want} (for {dt!r}), got {a.dtype}")
    arrs.append(a)
  shape = np.broadcast_shapes(*(a.shape for a in arrs))
  return shape, [np.atleast_1d(a) for a in arrs]

def _full(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
  return x.reshape(shape) if x.size == math.prod(shape) else np.broadcast_to(x, shape).copy()

def _shaped(out: Outcome, shape: tuple[int, ...]) -> Outcome:
  r = lambda m: None if m is None else _full(m, shape)
  return Outcome(_full(out.values, shape), r(out.undefined), out.reason, r(out.loose), out.kind, out.looseness)

_ARITY = {**{op: 1 for op in GroupOp.Unary}, **{op: 2 for op in GroupOp.Binary}, **{op: 3 for op in GroupOp.Ternary}}

def _check_alu(op: Ops, dtype: DType, n: int) -> None:
  if op not in GroupOp.ALU: raise ValueError(f"{op!r} is not an ALU op (use exec_cast / exec_bitcast for CAST / BITCAST)")
  if n != _ARITY[op]: raise TypeError(f"{op.name} takes {_ARITY[op]} operand(s), got {n}")
  err = alu_dtype_error(op, _scalar_dtype(dtype, f"{op.name}'s dtype"))
  if err is not None: raise ValueError(err[1])

def exec_alu(op: Ops, dtype: DType, *operands) -> Outcome:
  """Runs ALU op `op` on operands of scalar dtype `dtype` (WHERE: operands[0] is bool, the values are `dtype`).
  The result dtype is bool for CMPLT/CMPNE, else `dtype`."""
  _check_alu(op, dtype, len(operands))
  dts = (dtypes.bool, dtype, dtype) if op is Ops.WHERE else (dtype,) * len(operands)
  shape, xs = _lanes(dts, operands)
  with np.errstate(all="ignore"): return _shaped(ALU_RULES[op](op, dtype, *xs), shape)

def run_alu(op: Ops, dtype: DType, *xs: np.ndarray) -> Outcome:
  """exec_alu for a caller that has checked everything: a verified program's op, operands that are arrays of at least
  one dimension of the dtypes' numpy types, and floating-point warnings off (np.errstate(all="ignore")). The Outcome
  is the rule's own: its arrays broadcast against the operands' shape but need not have it."""
  return ALU_RULES[op](op, dtype, *xs)

def exec_cast(x, src: DType, dst: DType) -> Outcome:
  """CAST of lanes x of scalar dtype src to scalar dtype dst (see `cast`)."""
  _scalar_dtype(src, "CAST's source"), _scalar_dtype(dst, "CAST's target")
  shape, (a,) = _lanes((src,), (x,))
  with np.errstate(all="ignore"): return _shaped(cast(a, src, dst), shape)

def run_conversion(op: Ops, x: np.ndarray, src: DType, dst: DType) -> Outcome:
  """exec_cast / exec_bitcast (op CAST / BITCAST) for a caller that has checked everything, as run_alu says."""
  return ALU_RULES[op](x, src, dst)

def exec_bitcast(x, src: DType, dst: DType) -> Outcome:
  """BITCAST of lanes x of scalar dtype src to scalar dtype dst of the same size, neither bool (see `bitcast`)."""
  _scalar_dtype(src, "BITCAST's source"), _scalar_dtype(dst, "BITCAST's target")
  if src.itemsize != dst.itemsize: raise ValueError(f"BITCAST needs dtypes of one size, got {src!r} -> {dst!r}")
  if dtypes.bool in (src, dst): raise ValueError(f"BITCAST does not take bool, got {src!r} -> {dst!r}")
  shape, (a,) = _lanes((src,), (x,))
  return _shaped(bitcast(a, src, dst), shape)

def allowed_results(op: Ops, dtype: DType, *operands) -> list[np.ndarray]:
  """Every acceptable result array of an ALU op; lane k may be any list element's lane k. An allowed-set op on floats
  (`loose`): [the reference values, its other member] (MULACC: [fused, unfused]; MAX: [+0 at max(+0, -0) lanes, -0
  there]); any other op: [the reference values] (for tolerance ops that is the reference; the bound is in
  refimpl/spec.py). Undefined lanes hold 0."""
  out = exec_alu(op, dtype, *operands)
  declared = looseness(op)
  if declared is None or declared.other is None or not dtypes.is_float(dtype): return [out.values]
  shape, xs = _lanes((dtype,) * len(operands), operands)
  with np.errstate(all="ignore"): other = evaluate(declared.other, dtype, tuple(xs))
  return [out.values, _full(other, shape)]
