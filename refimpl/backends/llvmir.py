"""The LLVM IR renderer: a verified loop-form Program -> one LLVM IR module (text) holding the kernel function.

The spec (docs/semantics.md, "Decisions") holds in the IR whatever LLVM's optimizer does, because every op is written
with LLVM's own defined semantics, and no instruction carries a fast-math flag (nnan ninf nsz arcp contract afn reassoc
fast) or a no-wrap flag (nsw nuw) -- except the loop counter's increment, which cannot wrap (r < end <= 2^31-1).

  values      SSA values, one per lane of each uop (vectors are scalarized: lane k of uop i is %v{i}_{k}; LLVM's SLP and
              loop vectorizers re-vectorize what pays). CONST is an inline literal, VECTORIZE/GEP/INDEX only name values.
  ints        add sub mul (NEG = sub 0, x; MULACC = mul then add): LLVM wraps modulo 2^bits when there is no nsw/nuw.
              IDIV/MOD: sdiv/srem (signed) udiv/urem (unsigned), which truncate; the inputs LLVM leaves undefined
              (divisor 0, MIN/-1) are undefined in the spec too. SHL: shl; SHR: ashr (signed) / lshr (unsigned); counts
              outside [0, bits) give poison in LLVM and are undefined in the spec. MAX: icmp sgt/ugt + select.
              CMPLT: icmp slt/ult; CMPNE: icmp ne. XOR OR AND: xor or and. WHERE: select.
  bool        i1: ADD = or, MUL = and, MAX = or, MULACC = (a and b) or c, CMPLT = (a xor true) and b, CMPNE = XOR = xor.
  floats      float32 / float64 are LLVM float / double: fadd fsub fmul fdiv (correctly rounded, RNE, subnormals kept),
              NEG = fneg (a sign flip), RECIP = fdiv 1.0, x, SQRT = llvm.sqrt (the IEEE square root instruction, no
              libm call). CMPLT = fcmp olt (NaN < x is false), CMPNE = fcmp une (NaN != x is true; -0 == +0).
              MAX = NaN-propagating: select(fcmp uno a, a; a; select(fcmp ult a, b; b; a)) -- not llvm.maxnum, which
              drops NaN; max(+0, -0) is a (both zeros are allowed). MULACC = fmul then fadd: unfused (the allowed set is
              {fused, unfused}; unfused needs no FMA hardware and no libcall), and with no `contract` flag LLVM never
              fuses them.
  narrow      float16, bfloat16, fp8e4m3 and fp8e5m2 are stored as their bits (i16 / i8) and held in registers as a
              float with the exact value. Each rounded op (ADD SUB MUL FDIV RECIP SQRT, MULACC's product and sum) runs
              in float and is rounded once more to the format by bit manipulation (the helper functions below, RNE,
              NaN stays NaN); double rounding through float is innocuous since float has >= 2p+2 significand bits for
              p = 11 (half) and 8 (bfloat16). NEG, MAX, compares and WHERE are exact in float. LLVM's `half` and
              `bfloat` types are not used: x86 lowers half <-> double conversions (and every half conversion on CPUs
              without F16C) to compiler-rt calls (__truncdfhf2, __extendhfsf2, ...), which the ELF loader cannot
              resolve, and the bit helpers give the same results on every host. fp8 formats are storage + casts only.
  casts       to bool: icmp ne 0 / fcmp une 0.0 (NaN -> true, -0 -> false); from bool: zext / uitofp. int -> int:
              trunc / sext (signed source) / zext. int -> float32/64: sitofp / uitofp (one correct rounding).
              float -> int: fptosi / fptoui (truncation; out-of-range inputs give poison in LLVM, undefined in the spec).
              float32 <-> float64: fpext / fptrunc (RNE). -> narrow: from an exact double (fpext of float32 or a narrow
              value; sitofp/uitofp of ints up to 32 bits) or a round-to-odd double (64-bit ints, @rf.u64.odd), then the
              helper rounds once; fp8e4m3 overflow gives NaN (it has no inf).
  BITCAST     bitcast between ints and float/double of one size; narrow formats through their exact bit helpers
              (@rf.bits.* keeps a NaN's payload, so loaded NaN bit patterns survive a round trip).
  memory      INDEX: getelementptr inbounds (int32 index, sign-extended); LOAD/STORE of n lanes touch elements
              idx..idx+n-1. bool is stored as i8 (loaded as != 0, stored as 0/1). A gated LOAD or STORE is a branch
              around the access (a false gate does no access; the LOAD yields its alternative through a phi).
  structure   RANGE: a header block with a phi counter (start, then r+1 from the latch), `icmp slt` against end (both
              read once, at the RANGE). IF: a conditional branch around the block. DEFINE_ACC: an alloca in the entry
              block (mem2reg/SROA promote it at -O1 and above); ASSIGN stores into it; every read of a DEFINE_ACC or
              ASSIGN uop is a load at the reading uop, so it sees the register's value at that point. DEFINE_LOCAL: an
              entry-block alloca array (loop form only: one thread at a time). BARRIER and SPECIAL are refused (the
              runner lowers grid programs to loops first).
  WMMA        scalarized as the emulator defines it: d[m][n] = c[m][n] + sum over k = 0..K-1 of a[m][k]*b[k][n], every
              product and sum in double in that order (fmul, fadd), then one rounding to the output dtype.
  EXP2 LOG2 SIN are rewritten into ALU ops by refimpl.lower.transcendental before rendering (no libm), and THREEFRY
  into integer ops by refimpl.lower.threefry.

The kernel is `define void @name(ptr noalias %data0, ..., i32 %var_x, ...)` (buffers in DEFINE_GLOBAL order, then the
DEFINE_VARs), nounwind (no unwind tables) and "no-builtins": LLVM may not turn loops into memset/memcpy calls or
recognise library calls, so the object never needs an external symbol. Helpers are `internal` functions named with a
'.' (never a C identifier, so never a kernel's name), emitted only when used.
"""
from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from refimpl.dtype import DType, PtrDType, dtypes
from refimpl.errors import CompileError
from refimpl.ir import GroupOp, Ops, Program, UOp, verify
from refimpl.lower import check_capabilities, decompose_threefry
from refimpl.renderer import Renderer

# ***** types *****

LL: dict[DType, str] = {
  dtypes.bool: "i1", dtypes.int8: "i8", dtypes.uint8: "i8", dtypes.int16: "i16", dtypes.uint16: "i16", dtypes.int32: "i32",
  dtypes.uint32: "i32", dtypes.int64: "i64", dtypes.uint64: "i64", dtypes.float32: "float", dtypes.float64: "double"}

# narrow float formats: dtype -> (helper suffix, exponent bits, mantissa bits, finite-only "fn" variant)
NARROW: dict[DType, tuple[str, int, int, bool]] = {
  dtypes.float16: ("half", 5, 10, False), dtypes.bfloat16: ("bf16", 8, 7, False),
  dtypes.fp8e4m3: ("e4m3", 4, 3, True), dtypes.fp8e5m2: ("e5m2", 5, 2, False)}

# ops whose narrow-float result is rounded to the format (the others are exact in float: NEG, MAX, compares, WHERE)
ROUNDED = frozenset({Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.RECIP, Ops.SQRT})

def reg_type(dt: DType) -> str:
  """The LLVM type of a register holding a scalar of dt (narrow floats: float, holding the exact value)."""
  return "float" if dt in NARROW else LL[dt]

def storage_type(dt: DType) -> str:
  """The LLVM type of a buffer element of dt (narrow floats: their bits; bool: i8)."""
  if dt in NARROW: return "i8" if dt.itemsize == 1 else "i16"
  return "i8" if dt == dtypes.bool else LL[dt]

def is_signed(dt: DType) -> bool: return dt in dtypes.sints

def float_literal(v: float) -> str:
  """An LLVM float/double constant: the float64 bit pattern in hex (exact; NaN is the quiet NaN)."""
  if v != v: return "0x7FF8000000000000"
  return f"0x{struct.unpack('<Q', struct.pack('<d', v))[0]:016X}"

def literal(v: bool | int | float, dt: DType) -> str:
  """An LLVM constant of scalar dt's register type. Ints are written in signed form (LLVM reads iN literals signed)."""
  if dt == dtypes.bool: return "true" if v else "false"
  if dtypes.is_int(dt):
    bits = 8 * dt.itemsize
    v = int(v) & ((1 << bits) - 1)
    return str(v - (1 << bits) if v >> (bits - 1) else v)
  return float_literal(float(v))


# ***** the per-op rules *****
# Each rule is a list of instructions. {r}: the result, {t0} {t1}: temporaries, {0} {1} {2}: operands, {T}: the register
# type, {s}: "s" or "u" by signedness, {sh}: ashr or lshr, {one}: 1.0, {sqrt}: the llvm.sqrt intrinsic of {T}.

INT_RULES: dict[Ops, list[str]] = {
  Ops.ADD: ["{r} = add {T} {0}, {1}"], Ops.SUB: ["{r} = sub {T} {0}, {1}"], Ops.MUL: ["{r} = mul {T} {0}, {1}"],
  Ops.NEG: ["{r} = sub {T} 0, {0}"], Ops.MULACC: ["{t0} = mul {T} {0}, {1}", "{r} = add {T} {t0}, {2}"],
  Ops.IDIV: ["{r} = {s}div {T} {0}, {1}"], Ops.MOD: ["{r} = {s}rem {T} {0}, {1}"],
  Ops.SHL: ["{r} = shl {T} {0}, {1}"], Ops.SHR: ["{r} = {sh} {T} {0}, {1}"],
  Ops.MAX: ["{t0} = icmp {s}gt {T} {0}, {1}", "{r} = select i1 {t0}, {T} {0}, {T} {1}"],
  Ops.CMPLT: ["{r} = icmp {s}lt {T} {0}, {1}"], Ops.CMPNE: ["{r} = icmp ne {T} {0}, {1}"],
  Ops.XOR: ["{r} = xor {T} {0}, {1}"], Ops.OR: ["{r} = or {T} {0}, {1}"], Ops.AND: ["{r} = and {T} {0}, {1}"],
  Ops.WHERE: ["{r} = select i1 {0}, {T} {1}, {T} {2}"]}
BOOL_RULES: dict[Ops, list[str]] = {
  Ops.ADD: ["{r} = or i1 {0}, {1}"], Ops.MUL: ["{r} = and i1 {0}, {1}"], Ops.MAX: ["{r} = or i1 {0}, {1}"],
  Ops.MULACC: ["{t0} = and i1 {0}, {1}", "{r} = or i1 {t0}, {2}"],
  Ops.CMPLT: ["{t0} = xor i1 {0}, true", "{r} = and i1 {t0}, {1}"], Ops.CMPNE: ["{r} = xor i1 {0}, {1}"],
  Ops.XOR: ["{r} = xor i1 {0}, {1}"], Ops.OR: ["{r} = or i1 {0}, {1}"], Ops.AND: ["{r} = and i1 {0}, {1}"],
  Ops.WHERE: ["{r} = select i1 {0}, i1 {1}, i1 {2}"]}
FLOAT_RULES: dict[Ops, list[str]] = {
  Ops.ADD: ["{r} = fadd {T} {0}, {1}"], Ops.SUB: ["{r} = fsub {T} {0}, {1}"], Ops.MUL: ["{r} = fmul {T} {0}, {1}"],
  Ops.FDIV: ["{r} = fdiv {T} {0}, {1}"], Ops.NEG: ["{r} = fneg {T} {0}"], Ops.RECIP: ["{r} = fdiv {T} {one}, {0}"],
  Ops.SQRT: ["{r} = call {T} {sqrt}({T} {0})"], Ops.MULACC: ["{t0} = fmul {T} {0}, {1}", "{r} = fadd {T} {t0}, {2}"],
  Ops.MAX: ["{t0} = fcmp ult {T} {0}, {1}", "{t1} = select i1 {t0}, {T} {1}, {T} {0}", "{t2} = fcmp uno {T} {0}, {0}",
            "{r} = select i1 {t2}, {T} {0}, {T} {t1}"],
  Ops.CMPLT: ["{r} = fcmp olt {T} {0}, {1}"], Ops.CMPNE: ["{r} = fcmp une {T} {0}, {1}"],
  Ops.WHERE: ["{r} = select i1 {0}, {T} {1}, {T} {2}"]}
SQRT = {"float": "@llvm.sqrt.f32", "double": "@llvm.sqrt.f64"}
INTRINSICS = {"@llvm.sqrt.f32": "declare float @llvm.sqrt.f32(float)", "@llvm.sqrt.f64": "declare double @llvm.sqrt.f64(double)",
              "@llvm.ctlz.i64": "declare i64 @llvm.ctlz.i64(i64, i1)"}


# ***** helper functions (internal, emitted when used) *****

class _Body:
  """Straight-line SSA code: each call appends `%tN = <rhs>` and returns %tN."""
  def __init__(self): self.lines, self.n = [], 0
  def __call__(self, rhs: str) -> str:
    name = f"%t{self.n}"
    self.n += 1
    self.lines.append(f"  {name} = {rhs}")
    return name
  def define(self, sig: str, ret: str) -> str:
    return f"define internal {sig} #1 {{\n" + "\n".join(self.lines) + f"\n  ret {sig.split()[0]} {ret}\n}}"

def _to_small(E: int, M: int, fn: bool) -> str:
  """@rf.to.<f>(double x) -> i32: the bits of x rounded once to nearest even to the format (E exponent, M mantissa bits).
  Overflow gives inf (fn: NaN); a NaN keeps the top M bits of its payload when they are not all zero (fn: its NaN)."""
  f = _Body()
  bias, emin = (1 << (E - 1)) - 1, 2 - (1 << (E - 1))
  inf = ((1 << E) - 1) << M
  nan = inf | ((1 << M) - 1) if fn else inf | (1 << (M - 1))
  ovf = nan if fn else inf
  b = f("bitcast double %x to i64")
  a = f(f"and i64 {b}, {2**63 - 1}")
  frac = f(f"and i64 {a}, {2**52 - 1}")
  s64 = f(f"lshr i64 {b}, 63")
  s32 = f(f"trunc i64 {s64} to i32")
  sign = f(f"shl i32 {s32}, {E + M}")
  isnan = f(f"icmp ugt i64 {a}, {0x7ff << 52}")
  if fn: nanv = str(nan)
  else:
    pl64 = f(f"lshr i64 {frac}, {52 - M}")
    pl = f(f"trunc i64 {pl64} to i32")
    plnz = f(f"icmp ne i32 {pl}, 0")
    plinf = f(f"or i32 {pl}, {inf}")
    nanv = f(f"select i1 {plnz}, i32 {plinf}, i32 {nan}")
  e64 = f(f"lshr i64 {a}, 52")
  e32 = f(f"trunc i64 {e64} to i32")
  e = f(f"sub i32 {e32}, 1023")
  big = f(f"icmp sgt i32 {e}, {bias + 1}")
  sub = f(f"icmp slt i32 {e}, {emin}")
  extra = f(f"sub i32 {emin}, {e}")
  extra0 = f(f"select i1 {sub}, i32 {extra}, i32 0")
  sh0 = f(f"add i32 {extra0}, {52 - M}")
  shbig = f(f"icmp sgt i32 {sh0}, 63")
  sh32 = f(f"select i1 {shbig}, i32 63, i32 {sh0}")
  sh = f(f"zext i32 {sh32} to i64")
  sig = f(f"or i64 {frac}, {1 << 52}")
  q = f(f"lshr i64 {sig}, {sh}")
  one_sh = f(f"shl i64 1, {sh}")
  mask = f(f"sub i64 {one_sh}, 1")
  rem = f(f"and i64 {sig}, {mask}")
  sh1 = f(f"sub i64 {sh}, 1")
  half = f(f"shl i64 1, {sh1}")
  gt = f(f"icmp ugt i64 {rem}, {half}")
  eq = f(f"icmp eq i64 {rem}, {half}")
  odd = f(f"trunc i64 {q} to i1")
  tie = f(f"and i1 {eq}, {odd}")
  up = f(f"or i1 {gt}, {tie}")
  up64 = f(f"zext i1 {up} to i64")
  qr = f(f"add i64 {q}, {up64}")
  norm = f(f"icmp sge i32 {e}, {emin}")
  eb = f(f"add i32 {e}, {bias - 1}")
  eb64 = f(f"zext i32 {eb} to i64")
  ebs = f(f"shl i64 {eb64}, {M}")
  eadd = f(f"select i1 {norm}, i64 {ebs}, i64 0")
  bits64 = f(f"add i64 {qr}, {eadd}")  # a carry out of the significand moves into the exponent
  bits = f(f"trunc i64 {bits64} to i32")
  over = f(f"icmp uge i32 {bits}, {nan if fn else inf}")
  fin = f(f"select i1 {over}, i32 {ovf}, i32 {bits}")
  fin2 = f(f"select i1 {big}, i32 {ovf}, i32 {fin}")
  fin3 = f(f"select i1 {isnan}, i32 {nanv}, i32 {fin2}")
  r = f(f"or i32 {sign}, {fin3}")
  return f.define("i32 @rf.to.{n}(double %x)", r)

def _from_small(E: int, M: int, fn: bool) -> str:
  """@rf.from.<f>(i32 h) -> float: the value of the format's bits h (E <= 5: every value is a float, exactly)."""
  f = _Body()
  bias = (1 << (E - 1)) - 1
  s = f(f"lshr i32 %h, {E + M}")
  s1 = f(f"and i32 {s}, 1")
  sign = f(f"shl i32 {s1}, 31")
  efs = f(f"lshr i32 %h, {M}")
  ef = f(f"and i32 {efs}, {(1 << E) - 1}")
  m = f(f"and i32 %h, {(1 << M) - 1}")
  special = f(f"icmp eq i32 {ef}, {(1 << E) - 1}")
  if fn:
    mall = f(f"icmp eq i32 {m}, {(1 << M) - 1}")
    special = f(f"and i1 {special}, {mall}")
    spbits = f(f"or i32 {sign}, {0x7f800000 | 0x400000}")
  else:
    msh = f(f"shl i32 {m}, {23 - M}")
    sp = f(f"or i32 {msh}, {0x7f800000}")
    spbits = f(f"or i32 {sign}, {sp}")
  mf = f(f"uitofp i32 {m} to float")
  subv = f(f"fmul float {mf}, {float_literal(2.0 ** (1 - bias - M))}")  # exact: a small integer times a power of two
  subb = f(f"bitcast float {subv} to i32")
  subbits = f(f"or i32 {sign}, {subb}")
  ne = f(f"add i32 {ef}, {127 - bias}")
  nes = f(f"shl i32 {ne}, 23")
  mm = f(f"shl i32 {m}, {23 - M}")
  nb = f(f"or i32 {nes}, {mm}")
  normbits = f(f"or i32 {sign}, {nb}")
  iszero = f(f"icmp eq i32 {ef}, 0")
  r1 = f(f"select i1 {iszero}, i32 {subbits}, i32 {normbits}")
  r2 = f(f"select i1 {special}, i32 {spbits}, i32 {r1}")
  r = f(f"bitcast i32 {r2} to float")
  return f.define("float @rf.from.{n}(i32 %h)", r)

def _bits_small(E: int, M: int, fn: bool) -> str:
  """@rf.bits.<f>(float x) -> i32: the format's bits of x, a float holding one of its values; a NaN keeps its sign and
  the top M bits of its payload (fn: the format's NaN), so loaded bit patterns survive. Bit operations only."""
  f = _Body()
  inf = ((1 << E) - 1) << M
  nan = inf | ((1 << M) - 1) if fn else inf | (1 << (M - 1))
  u = f("bitcast float %x to i32")
  a = f(f"and i32 {u}, {0x7fffffff}")
  isnan = f(f"icmp ugt i32 {a}, {0x7f800000}")
  s = f(f"lshr i32 {u}, 31")
  sign = f(f"shl i32 {s}, {E + M}")
  if fn: nanv = f(f"or i32 {sign}, {nan}")
  else:
    frac = f(f"and i32 {u}, {0x7fffff}")
    pl = f(f"lshr i32 {frac}, {23 - M}")
    plnz = f(f"icmp ne i32 {pl}, 0")
    plinf = f(f"or i32 {pl}, {inf}")
    nb = f(f"select i1 {plnz}, i32 {plinf}, i32 {nan}")
    nanv = f(f"or i32 {sign}, {nb}")
  d = f("fpext float %x to double")
  b = f(f"call i32 @rf.to.{{n}}(double {d})")
  r = f(f"select i1 {isnan}, i32 {nanv}, i32 {b}")
  return f.define("i32 @rf.bits.{n}(float %x)", r)

def _round_small() -> str:
  """@rf.round.<f>(double x) -> float: x rounded once to the format, as a float."""
  f = _Body()
  b = f("call i32 @rf.to.{n}(double %x)")
  r = f(f"call float @rf.from.{{n}}(i32 {b})")
  return f.define("float @rf.round.{n}(double %x)", r)

def _bf16_helpers() -> dict[str, str]:
  """bfloat16 is float32's top half: its bits are float32's bits shifted right by 16 (payloads included)."""
  f, g = _Body(), _Body()
  s = f("shl i32 %h, 16")
  r = f(f"bitcast i32 {s} to float")
  u = g("bitcast float %x to i32")
  b = g(f"lshr i32 {u}, 16")
  return {"from": f.define("float @rf.from.bf16(i32 %h)", r), "bits": g.define("i32 @rf.bits.bf16(float %x)", b)}

def _u64_odd() -> str:
  """@rf.u64.odd(i64 u) -> double: u rounded to odd (exact below 2^53); one more rounding to <= 51 bits is then a single
  correct rounding of u."""
  f = _Body()
  small = f("icmp ult i64 %u, 9007199254740992")
  exact = f("uitofp i64 %u to double")
  lz = f("call i64 @llvm.ctlz.i64(i64 %u, i1 false)")
  sh0 = f(f"sub i64 11, {lz}")
  sh = f(f"select i1 {small}, i64 1, i64 {sh0}")
  hi = f(f"lshr i64 %u, {sh}")
  one_sh = f(f"shl i64 1, {sh}")
  mask = f(f"sub i64 {one_sh}, 1")
  lost = f(f"and i64 %u, {mask}")
  sticky = f(f"icmp ne i64 {lost}, 0")
  st = f(f"zext i1 {sticky} to i64")
  m = f(f"or i64 {hi}, {st}")
  mf = f(f"uitofp i64 {m} to double")
  eb = f(f"add i64 {sh}, 1023")
  ebs = f(f"shl i64 {eb}, 52")
  scale = f(f"bitcast i64 {ebs} to double")
  big = f(f"fmul double {mf}, {scale}")  # exact: times a power of two
  r = f(f"select i1 {small}, double {exact}, double {big}")
  return f.define("double @rf.u64.odd(i64 %u)", r)

def _i64_odd() -> str:
  """@rf.i64.odd(i64 x) -> double: x rounded to odd (the magnitude by @rf.u64.odd, 0 - MIN as unsigned is 2^63)."""
  f = _Body()
  neg = f("icmp slt i64 %x, 0")
  mag0 = f("sub i64 0, %x")
  mag = f(f"select i1 {neg}, i64 {mag0}, i64 %x")
  d = f(f"call double @rf.u64.odd(i64 {mag})")
  nd = f(f"fneg double {d}")
  r = f(f"select i1 {neg}, double {nd}, double {d}")
  return f.define("double @rf.i64.odd(i64 %x)", r)

def _helper_table() -> dict[str, tuple[str, tuple[str, ...]]]:
  """helper name -> (its IR, the helpers and intrinsics it calls)."""
  table: dict[str, tuple[str, tuple[str, ...]]] = {}
  bf = _bf16_helpers()
  for n, E, M, fn in NARROW.values():
    table[f"@rf.to.{n}"] = (_to_small(E, M, fn).replace("{n}", n), ())
    if n == "bf16":
      table[f"@rf.from.{n}"] = (bf["from"], ())
      table[f"@rf.bits.{n}"] = (bf["bits"], ())
    else:
      table[f"@rf.from.{n}"] = (_from_small(E, M, fn).replace("{n}", n), ())
      table[f"@rf.bits.{n}"] = (_bits_small(E, M, fn).replace("{n}", n), (f"@rf.to.{n}",))
    table[f"@rf.round.{n}"] = (_round_small().replace("{n}", n), (f"@rf.to.{n}", f"@rf.from.{n}"))
  table["@rf.u64.odd"] = (_u64_odd(), ("@llvm.ctlz.i64",))
  table["@rf.i64.odd"] = (_i64_odd(), ("@rf.u64.odd",))
  return table

HELPERS = _helper_table()


# ***** the renderer *****

@dataclass(frozen=True)
class LLVMRenderer(Renderer):
  """LLVM IR for the LLVM device: no grid, no locals beyond function-scope arrays. See the module docstring."""
  device: str = "LLVM"

  def render(self, name: str, program: Program) -> str:
    """The module text: the kernel `name` (buffers then int vars), the helpers it uses, the intrinsic declarations."""
    verify(program)
    check_capabilities(program, self)
    if any(u.op in GroupOp.Transcendental for u in program.uops):
      from refimpl.lower.transcendental import decompose_transcendentals
      program = decompose_transcendentals(program)
    return _Render(self, decompose_threefry(program)).module(name)


class _Render:
  """The state of one rendering: lane values per uop, the lines written so far, the current block."""
  def __init__(self, r: LLVMRenderer, program: Program):
    self.r, self.uops = r, program.uops
    self.lanes: dict[int, list[str]] = {}
    self.accs: dict[int, list[str]] = {}          # DEFINE_ACC / ASSIGN uop -> the allocas of its lanes
    self.index: dict[int, tuple[str, DType]] = {}  # INDEX uop -> (element pointer, element dtype)
    self.params: dict[int, str] = {}               # DEFINE_GLOBAL number -> parameter
    self.vars: list[str] = []
    self.allocas: list[str] = []
    self.lines: list[str] = []
    self.used: set[str] = set()
    self.loops: dict[int, int] = {}                # RANGE uop -> the line of its phi
    self.block, self.ntmp = "entry", 0

  # ---- emitting ----
  def emit(self, line: str) -> None: self.lines.append("  " + line)
  def label(self, name: str) -> None:
    self.lines.append(f"{name}:")
    self.block = name
  def branch(self, to: str) -> None:
    self.emit(f"br label %{to}")
    self.label(to)
  def tmp(self) -> str:
    self.ntmp += 1
    return f"%t{self.ntmp}"
  def ins(self, rule: list[str], result: str, *operands: str, **fmt: str) -> str:
    """Emits one rule's instructions with fresh temporaries; returns the result's name."""
    names = {f"t{k}": self.tmp() for k in range(3) if any(f"{{t{k}}}" in line for line in rule)}
    for line in rule: self.emit(line.format(*operands, r=result, **names, **fmt))
    return result
  def call(self, helper: str, ret: str, args: str, result: str | None = None) -> str:
    self.use(helper)
    r = result or self.tmp()
    self.emit(f"{r} = call {ret} {helper}({args})")
    return r
  def use(self, name: str) -> None:
    if name in self.used: return
    self.used.add(name)
    for dep in HELPERS.get(name, ("", ()))[1]: self.use(dep)
  def name(self, i: int, k: int, n: int) -> str: return f"%v{i}" if n == 1 else f"%v{i}_{k}"

  # ---- values ----
  def get(self, j: int, k: int = 0) -> str:
    """Lane k of uop j at this point of the program (an accumulator is read here, by a load)."""
    if j in self.accs:
      dt = self.uops[j].dtype.scalar()
      r = self.tmp()
      self.emit(f"{r} = load {reg_type(dt)}, ptr {self.accs[j][k]}")
      return r
    return self.lanes[j][k]
  def srcs(self, u: UOp, k: int) -> list[str]: return [self.get(j, k) for j in u.src]

  # ---- narrow floats ----
  def round_narrow(self, x: str, dt: DType, wide: str, result: str | None = None) -> str:
    """The narrow dtype dt's value nearest x (a float or double register), as a float."""
    if wide == "float":
      d = self.tmp()
      self.emit(f"{d} = fpext float {x} to double")
      x = d
    return self.call(f"@rf.round.{NARROW[dt][0]}", "float", f"double {x}", result)

  # ---- the module ----
  def module(self, name: str) -> str:
    for i, u in enumerate(self.uops):
      handler = HANDLERS.get(u.op)
      if handler is None: handler = _alu if u.op in GroupOp.ALU else _unsupported
      handler(self, i, u)
    self.emit("ret void")
    params = [self.params[k] for k in sorted(self.params)] + self.vars
    body = "\n".join(["entry:", *["  " + a for a in self.allocas], *self.lines])
    helpers = [HELPERS[h][0] for h in sorted(self.used) if h in HELPERS]
    decls = [INTRINSICS[h] for h in sorted(self.used) if h in INTRINSICS]
    return "\n\n".join([f"define void @{name}({', '.join(params)}) #0 {{\n{body}\n}}", *helpers, *decls,
                        'attributes #0 = { nounwind "no-builtins" }\nattributes #1 = { nounwind alwaysinline "no-builtins" }'])


def _unsupported(s: _Render, i: int, u: UOp) -> None:
  raise CompileError(f"{s.r.device}: uop {i} {u.op.name} has no rendering (a loop-form program has no SPECIAL or BARRIER: "
                     "lower grid programs with lower_grid_to_loops first)")

def _define_global(s: _Render, i: int, u: UOp) -> None:
  s.params[u.arg] = f"ptr noalias %data{u.arg}"
  s.lanes[i] = [f"%data{u.arg}"]

def _define_var(s: _Render, i: int, u: UOp) -> None:
  s.vars.append(f"i32 %var_{u.arg[0]}")
  s.lanes[i] = [f"%var_{u.arg[0]}"]

def _define_local(s: _Render, i: int, u: UOp) -> None:
  assert isinstance(u.dtype, PtrDType)
  s.allocas.append(f"%local_{u.arg} = alloca [{u.dtype.size} x {storage_type(u.dtype.base)}], align 16")
  s.lanes[i] = [f"%local_{u.arg}"]

def _const(s: _Render, i: int, u: UOp) -> None: s.lanes[i] = [literal(u.arg, u.dtype)]

def _index(s: _Render, i: int, u: UOp) -> None:
  dt = s.uops[u.src[0]].dtype.base
  p = f"%p{i}"
  s.emit(f"{p} = getelementptr inbounds {storage_type(dt)}, ptr {s.get(u.src[0])}, i32 {s.get(u.src[1])}")
  s.index[i] = (p, dt)

def _element(s: _Render, ptr: str, dt: DType, k: int) -> str:
  if k == 0: return ptr
  p = s.tmp()
  s.emit(f"{p} = getelementptr inbounds {storage_type(dt)}, ptr {ptr}, i64 {k}")
  return p

def _load_lane(s: _Render, ptr: str, dt: DType, k: int, result: str) -> str:
  st, p = storage_type(dt), _element(s, ptr, dt, k)
  if dt not in NARROW and dt != dtypes.bool:
    s.emit(f"{result} = load {st}, ptr {p}")
    return result
  m = s.tmp()
  s.emit(f"{m} = load {st}, ptr {p}")
  if dt == dtypes.bool:
    s.emit(f"{result} = icmp ne i8 {m}, 0")
    return result
  h = s.tmp()
  s.emit(f"{h} = zext {st} {m} to i32")
  return s.call(f"@rf.from.{NARROW[dt][0]}", "float", f"i32 {h}", result)

def _load(s: _Render, i: int, u: UOp) -> None:
  dt, n = u.dtype.scalar(), u.dtype.count
  ptr, _ = s.index[u.src[0]]
  names = [s.name(i, k, n) for k in range(n)]
  if len(u.src) == 1:
    s.lanes[i] = [_load_lane(s, ptr, dt, k, names[k]) for k in range(n)]
    return
  alts, gate, before = [s.get(u.src[1], k) for k in range(n)], s.get(u.src[2]), s.block
  s.emit(f"br i1 {gate}, label %load{i}, label %load{i}_done")
  s.label(f"load{i}")
  vals = [_load_lane(s, ptr, dt, k, s.tmp()) for k in range(n)]
  s.branch(f"load{i}_done")
  for nm, v, alt in zip(names, vals, alts): s.emit(f"{nm} = phi {reg_type(dt)} [ {v}, %load{i} ], [ {alt}, %{before} ]")
  s.lanes[i] = names

def _store_value(s: _Render, dt: DType, v: str) -> str:
  """A register value as the buffer element's storage type."""
  if dt == dtypes.bool:
    r = s.tmp()
    s.emit(f"{r} = zext i1 {v} to i8")
    return r
  if dt not in NARROW: return v
  b = s.call(f"@rf.bits.{NARROW[dt][0]}", "i32", f"float {v}")
  r = s.tmp()
  s.emit(f"{r} = trunc i32 {b} to {storage_type(dt)}")
  return r

def _store(s: _Render, i: int, u: UOp) -> None:
  ptr, dt = s.index[u.src[0]]
  vals = [s.get(u.src[1], k) for k in range(s.uops[u.src[1]].dtype.count)]
  if len(u.src) == 3:
    s.emit(f"br i1 {s.get(u.src[2])}, label %store{i}, label %store{i}_done")
    s.label(f"store{i}")
  for k, v in enumerate(vals):
    m = _store_value(s, dt, v)
    s.emit(f"store {storage_type(dt)} {m}, ptr {_element(s, ptr, dt, k)}")
  if len(u.src) == 3: s.branch(f"store{i}_done")

def _define_acc(s: _Render, i: int, u: UOp) -> None:
  t, n = reg_type(u.dtype.scalar()), u.dtype.count
  init = [s.get(u.src[0], k) for k in range(n)]
  ptrs = [f"%acc{i}" if n == 1 else f"%acc{i}_{k}" for k in range(n)]
  for p, v in zip(ptrs, init):
    s.allocas.append(f"{p} = alloca {t}")
    s.emit(f"store {t} {v}, ptr {p}")
  s.accs[i] = ptrs

def _assign(s: _Render, i: int, u: UOp) -> None:
  t, ptrs = reg_type(u.dtype.scalar()), s.accs[u.src[0]]
  vals = [s.get(u.src[1], k) for k in range(u.dtype.count)]
  for p, v in zip(ptrs, vals): s.emit(f"store {t} {v}, ptr {p}")
  s.accs[i] = ptrs

def _range(s: _Render, i: int, u: UOp) -> None:
  start, end, before = s.get(u.src[0]), s.get(u.src[1]), s.block
  s.branch(f"loop{i}")
  s.loops[i] = len(s.lines)
  s.emit(f"%r{i} = phi i32 [ {start}, %{before} ], [ %r{i}_next, %LATCH ]")  # the latch is filled in at ENDRANGE
  s.emit(f"%r{i}_go = icmp slt i32 %r{i}, {end}")
  s.emit(f"br i1 %r{i}_go, label %loop{i}_body, label %loop{i}_exit")
  s.label(f"loop{i}_body")
  s.lanes[i] = [f"%r{i}"]

def _endrange(s: _Render, i: int, u: UOp) -> None:
  r = u.src[0]
  line = s.loops[r]
  s.lines[line] = s.lines[line].replace("%LATCH", f"%{s.block}")
  s.emit(f"%r{r}_next = add nsw i32 %r{r}, 1")  # r < end <= 2^31-1: the counter cannot wrap
  s.emit(f"br label %loop{r}")
  s.label(f"loop{r}_exit")

def _if(s: _Render, i: int, u: UOp) -> None:
  s.emit(f"br i1 {s.get(u.src[0])}, label %if{i}, label %if{i}_end")
  s.label(f"if{i}")

def _endif(s: _Render, i: int, u: UOp) -> None: s.branch(f"if{u.src[0]}_end")

def _vectorize(s: _Render, i: int, u: UOp) -> None: s.lanes[i] = [s.get(j) for j in u.src]
def _gep(s: _Render, i: int, u: UOp) -> None: s.lanes[i] = [s.get(u.src[0], lane) for lane in u.arg]

def _alu(s: _Render, i: int, u: UOp) -> None:
  """One ALU uop, lane by lane, by the rule of its operand kind (INT_RULES, BOOL_RULES, FLOAT_RULES; narrow floats
  compute in float and round once to the format)."""
  dt = s.uops[u.src[-1]].dtype.scalar()
  if u.op in GroupOp.Transcendental:
    raise CompileError(f"{s.r.device}: {u.op.name} must be decomposed before rendering (refimpl.lower.transcendental)")
  if dt == dtypes.bool: rules, fmt = BOOL_RULES, {}
  elif dtypes.is_int(dt):
    rules, fmt = INT_RULES, {"T": LL[dt], "s": "s" if is_signed(dt) else "u", "sh": "ashr" if is_signed(dt) else "lshr"}
  else:
    t = reg_type(dt)
    rules, fmt = FLOAT_RULES, {"T": t, "one": float_literal(1.0), "sqrt": SQRT[t]}
  if u.op not in rules: raise CompileError(f"{s.r.device}: no rendering of {u.op.name} on {dt.name}")
  if u.op is Ops.SQRT: s.use(SQRT[reg_type(dt)])
  n, out = u.dtype.count, []
  for k in range(n):
    ops, res = s.srcs(u, k), s.name(i, k, n)
    if dt in NARROW and u.op is Ops.MULACC:  # unfused: the product is rounded to the format, then the sum
      prod = s.round_narrow(s.ins(["{r} = fmul float {0}, {1}"], s.tmp(), *ops[:2]), dt, "float")
      out.append(s.round_narrow(s.ins(["{r} = fadd float {0}, {1}"], s.tmp(), prod, ops[2]), dt, "float", res))
    elif dt in NARROW and u.op in ROUNDED: out.append(s.round_narrow(s.ins(rules[u.op], s.tmp(), *ops, **fmt), dt, "float", res))
    else: out.append(s.ins(rules[u.op], res, *ops, **fmt))
  s.lanes[i] = out

# ---- CAST and BITCAST ----

def _cast_lane(s: _Render, x: str, src: DType, dst: DType, result: str) -> str:
  """CAST of one lane from scalar src to scalar dst (see the module docstring)."""
  if src == dst: return x
  def one(text: str) -> str:
    s.emit(f"{result} = {text}")
    return result
  st, dt = reg_type(src), reg_type(dst)
  if dst == dtypes.bool: return one(f"icmp ne {st} {x}, 0" if dtypes.is_int(src) else f"fcmp une {st} {x}, 0.0")
  if src == dtypes.bool: return one(f"zext i1 {x} to {dt}" if dtypes.is_int(dst) else f"uitofp i1 {x} to {dt}")
  if dtypes.is_int(src) and dtypes.is_int(dst):
    if src.itemsize == dst.itemsize: return x
    if src.itemsize > dst.itemsize: return one(f"trunc {st} {x} to {dt}")
    return one(f"{'sext' if is_signed(src) else 'zext'} {st} {x} to {dt}")
  if dtypes.is_int(src):
    conv = "sitofp" if is_signed(src) else "uitofp"
    if dst not in NARROW: return one(f"{conv} {st} {x} to {dt}")
    if src.itemsize == 8: d = s.call("@rf.i64.odd" if is_signed(src) else "@rf.u64.odd", "double", f"i64 {x}")
    else:
      d = s.tmp()
      s.emit(f"{d} = {conv} {st} {x} to double")  # exact: at most 32 bits
    return s.round_narrow(d, dst, "double", result)
  if dtypes.is_int(dst): return one(f"{'fptosi' if is_signed(dst) else 'fptoui'} {st} {x} to {dt}")
  if dst in NARROW: return s.round_narrow(x, dst, st, result)  # from an exact float or double
  if st == dt: return x  # a narrow value is already a float
  return one(f"fpext {st} {x} to {dt}" if dt == "double" else f"fptrunc {st} {x} to {dt}")

def _bitcast_lane(s: _Render, x: str, src: DType, dst: DType, result: str) -> str:
  """BITCAST of one lane between scalars of one size: to the bits as an iN, then to dst."""
  ity = f"i{8 * src.itemsize}"
  if src in NARROW:
    b32 = s.call(f"@rf.bits.{NARROW[src][0]}", "i32", f"float {x}")
    bits = s.tmp()
    s.emit(f"{bits} = trunc i32 {b32} to {ity}")
  elif dtypes.is_float(src):
    bits = s.tmp()
    s.emit(f"{bits} = bitcast {LL[src]} {x} to {ity}")
  else: bits = x
  if dst in NARROW:
    h = s.tmp()
    s.emit(f"{h} = zext {ity} {bits} to i32")
    return s.call(f"@rf.from.{NARROW[dst][0]}", "float", f"i32 {h}", result)
  if dtypes.is_float(dst):
    s.emit(f"{result} = bitcast {ity} {bits} to {LL[dst]}")
    return result
  return bits

def _cast(s: _Render, i: int, u: UOp) -> None:
  src, dst, n = s.uops[u.src[0]].dtype.scalar(), u.dtype.scalar(), u.dtype.count
  conv = _bitcast_lane if u.op is Ops.BITCAST else _cast_lane
  s.lanes[i] = [conv(s, s.get(u.src[0], k), src, dst, s.name(i, k, n)) for k in range(n)]

def _wmma(s: _Render, i: int, u: UOp) -> None:
  """d[m][n] = c[m][n] + sum_k a[m][k]*b[k][n]: every product and sum in double, k in order, then one rounding."""
  N, M, K = u.arg
  tin, tout = s.uops[u.src[0]].dtype.scalar(), u.dtype.scalar()
  a, b, c = ([s.get(u.src[j], k) for k in range(s.uops[u.src[j]].dtype.count)] for j in range(3))
  def wide(x: str, dt: DType) -> str: return _cast_lane(s, x, dt, dtypes.float64, s.tmp()) if dt != dtypes.float64 else x
  out = []
  for m in range(M):
    for n in range(N):
      acc = wide(c[m * N + n], tout)
      for k in range(K):
        p = s.ins(["{r} = fmul double {0}, {1}"], s.tmp(), wide(a[m * K + k], tin), wide(b[k * N + n], tin))
        acc = s.ins(["{r} = fadd double {0}, {1}"], s.tmp(), acc, p)
      out.append(_cast_lane(s, acc, dtypes.float64, tout, s.name(i, len(out), M * N)))
  s.lanes[i] = out

HANDLERS: dict[Ops, Callable[[_Render, int, UOp], None]] = {
  Ops.DEFINE_GLOBAL: _define_global, Ops.DEFINE_VAR: _define_var, Ops.DEFINE_LOCAL: _define_local, Ops.CONST: _const,
  Ops.INDEX: _index, Ops.LOAD: _load, Ops.STORE: _store, Ops.DEFINE_ACC: _define_acc, Ops.ASSIGN: _assign,
  Ops.RANGE: _range, Ops.ENDRANGE: _endrange, Ops.IF: _if, Ops.ENDIF: _endif, Ops.VECTORIZE: _vectorize, Ops.GEP: _gep,
  Ops.CAST: _cast, Ops.BITCAST: _cast, Ops.WMMA: _wmma}
