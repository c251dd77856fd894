"""Narrow floats as float32/float64 and integer ops, for every renderer: `lower_narrow(program)`.

float16, bfloat16, fp8e4m3 and fp8e5m2 (NARROW) leave the program except as memory: a narrow value becomes its bits, an
unsigned int of its size (BITS: uint16, uint8), and every op on it is written with ops that every backend renders with
IEEE semantics. What is left of a narrow dtype is its buffers (DEFINE_GLOBAL, DEFINE_LOCAL, INDEX), a LOAD followed by
BITCAST to the bits, and a BITCAST of the bits before a STORE (or into a gated LOAD's alternative): a renderer only needs
the storage type of each narrow dtype and a BITCAST that moves bits between it and BITS (the same size).

  bits        CONST: the value's bits. WHERE, VECTORIZE, GEP, DEFINE_ACC, ASSIGN: the same op on the bits (so NaN payloads
              survive every move). NEG: XOR of the sign bit. BITCAST to or from a narrow dtype: the bits as they are.
  numbers     decode(bits) is the value as a float32, exactly (every narrow value is a float32): bfloat16 is float32's
              top half (SHL 16); the others rebias the exponent field (normal), set float32's all-ones exponent (inf,
              NaN; fp8e4m3's only NaN is all ones) or take CAST(mantissa) * 2^(1-bias-M) (subnormals: an exact int ->
              float32 conversion and an exact product by a power of two). A value that ops read as a number is decoded
              once, right after it is made (an accumulator at every read, since its value changes).
  arithmetic  ADD SUB MUL FDIV RECIP SQRT TRUNC: the float32 op on the decoded operands, then encode() rounds once to
              the format (TRUNC's result is a value of the format: exact). This is the emulator's rule (alu.arith,
              alu.trunc): float32 has >= 2p+2 significand bits for p = 11 and 8, so the two roundings are innocuous
              (fp8 has no ALU ops). MULACC is unfused, MUL then ADD, each rounded
              (the spec allows {fused, unfused}; the native backends were unfused before too). CMPLT/CMPNE compare the
              float32 values (exact); MAX is WHERE(b < a or a != a, a, b) on the bits: the NaN-propagating select, as
              float32/float64 MAX renders it. EXP2 LOG2 SIN are decomposed first (refimpl.lower.transcendental: float32
              method, CAST out) and their CAST is lowered here.
  encode      encode(x, d): float32 or float64 x rounded once, to nearest even, to d's bits, in the unsigned int of x's
              size: with e = x's biased exponent, lo = the e of d's smallest normal and the significand sig (hidden
              bit set), shift = (x's M - d's M) + (lo - min(e, lo)) (clamped to x's M + 2, past which everything rounds
              to 0), q = (sig + 2^(shift-1) - 1 + ((sig >> shift) & 1)) >> shift (round to nearest even), bits =
              q + ((max(e, lo) - lo) << M) (a carry moves into the exponent; a subnormal result has no exponent part).
              Past the largest finite: inf (fp8e4m3: NaN, so |x| > 464 gives NaN); NaN: d's quiet NaN; the sign bit is
              put back. float32 -> bfloat16 is the short form: (u + 0x7fff + bit 16 of u) >> 16 (same exponent field).
  casts       to narrow from float32 and float64: encode (one rounding). From bool and ints of <= 16 bits: CAST to
              float32 (exact), encode; from int32/uint32: CAST to float64 (exact), encode; from int64/uint64: the
              magnitude below 2^53 is CAST to float64 exactly, above it is ((u >> 11) | sticky) * 2^11, a round-to-odd
              at a fixed bit that keeps >= 43 significant bits, so the final rounding to <= 11 bits is the only one
              (the round bit and the sticky bits it looks at are the original's); the sign is put back by NEG.
              From narrow: to bool, (bits & ~sign) != 0 (NaN is true, -0 false); to float32 decode; to float64 decode
              then CAST (exact); to ints decode then CAST (C's truncation; undefined where the original was); to another
              narrow format decode then encode (one rounding: the decode is exact).
  WMMA        narrow a and b are decoded to float32 (exact); a narrow accumulator is decoded and CAST to float64, the
              WMMA made float64 (its sums are float64 already) and its result encoded: one rounding, as the rule says.

Every uop the pass emits is defined for every input (variable shift counts lie in [0, 2 * 23 + 2], wrap arithmetic is
unsigned); a float -> int CAST appears only where the program had one, on the same value. Size (uops other than CONST,
per scalar): decode 15 (bfloat16 2), encode about 30 (float32 -> bfloat16 8), int64 -> narrow 46; an elementwise ADD
kernel on float16 (two loads, one store) gains 65 uops, on bfloat16 20.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from refimpl.dtype import DType, PtrDType, dtypes, to_np
from refimpl.ir.builder import ProgramBuilder
from refimpl.ir.ops import GroupOp, Ops
from refimpl.ir.program import Program, UOp
from refimpl.ir.rewrite import Handler, copy, rewrite
from refimpl.ir.verify import verify
from refimpl.lower.emit import V, Values, vec
from refimpl.lower.transcendental import decompose_transcendentals

F32, F64, U8, U16, U32, U64 = dtypes.float32, dtypes.float64, dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64
BITS: dict[DType, DType] = {dtypes.float16: U16, dtypes.bfloat16: U16, dtypes.fp8e4m3: U8, dtypes.fp8e5m2: U8}
NARROW = frozenset(BITS)
UINT = {F32: U32, F64: U64}
ACC = (Ops.DEFINE_ACC, Ops.ASSIGN)  # a read of these is the register's value at the reading uop
ON_BITS = (Ops.VECTORIZE, Ops.GEP, Ops.DEFINE_ACC, Ops.ASSIGN, Ops.WHERE)  # on narrow values: the same op on the bits
ROUNDED = {Ops.ADD: lambda a, b: a + b, Ops.SUB: lambda a, b: a - b, Ops.MUL: lambda a, b: a * b,
           Ops.FDIV: lambda a, b: a / b, Ops.SQRT: lambda a: a.values.op(Ops.SQRT, F32, a),
           Ops.RECIP: lambda a: a.values.op(Ops.RECIP, F32, a), Ops.TRUNC: lambda a: a.values.op(Ops.TRUNC, F32, a)}


@dataclass(frozen=True)
class Fmt:
  """A binary float format: E exponent bits, M stored mantissa bits; fn: finite-only (fp8e4m3fn: no inf, all ones is
  the only NaN, and overflow gives NaN)."""
  E: int
  M: int
  fn: bool = False
  @property
  def nbits(self) -> int: return 1 + self.E + self.M
  @property
  def bias(self) -> int: return (1 << (self.E - 1)) - 1
  @property
  def inf(self) -> int: return ((1 << self.E) - 1) << self.M
  @property
  def nan(self) -> int:
    """The magnitude bits of the quiet NaN (fn: all ones)."""
    return (1 << (self.E + self.M)) - 1 if self.fn else self.inf | (1 << (self.M - 1))
  @property
  def overflow(self) -> int:
    """The first magnitude past the largest finite, and what an overflow gives: inf (fn: NaN)."""
    return self.nan if self.fn else self.inf

FMT: dict[DType, Fmt] = {dtypes.float16: Fmt(5, 10), dtypes.bfloat16: Fmt(8, 7), dtypes.fp8e4m3: Fmt(4, 3, True),
                         dtypes.fp8e5m2: Fmt(5, 2), F32: Fmt(8, 23), F64: Fmt(11, 52)}


def is_narrow(dt: DType) -> bool:
  """dt is a narrow float or a vector of one (not a pointer to one)."""
  return not isinstance(dt, PtrDType) and dt.scalar() in NARROW

def bits_dtype(dt: DType) -> DType:
  """The dtype holding dt's values after lowering: BITS for a narrow scalar or vector, dt itself otherwise."""
  s = dt.scalar()
  return vec(BITS[s], dt.count) if s in BITS else dt


# ***** the algorithms, on values *****

def decode(h: V, d: DType) -> V:
  """The value of narrow bits h (BITS[d]) as a float32, exactly (see the module docstring)."""
  f, w = FMT[d], h.cast(U32)
  if d is dtypes.bfloat16: return (w << 16).bitcast(F32)
  a = w & ((1 << (f.nbits - 1)) - 1)
  sign = (w ^ a) << (32 - f.nbits)
  sh = a << (23 - f.M)
  normal = sh + ((127 - f.bias) << 23)
  big = a.ne(f.nan).where(normal, 0x7FC00000) if f.fn else a.lt(f.inf).where(normal, sh | 0x7F800000)
  sub = (a.cast(F32) * 2.0 ** (1 - f.bias - f.M)).bitcast(U32)
  return (a.lt(1 << f.M).where(sub, big) | sign).bitcast(F32)

def encode(x: V, d: DType) -> V:
  """The bits (BITS[d]) of float32 or float64 x rounded once, to nearest even, to narrow d (see the module docstring)."""
  s, f = FMT[x.dt], FMT[d]
  u = x.bitcast(UINT[x.dt])
  if x.dt is F32 and d is dtypes.bfloat16: return _encode_bf16(u)
  lo = s.bias - f.bias + 1
  assert lo - f.M - 2 >= 1, "a source subnormal must round to 0"
  a = u & ((1 << (s.nbits - 1)) - 1)
  e = a >> s.M
  em = e.max(lo)
  sh = (s.M - f.M + lo) - ((e + lo) - em).max(lo - f.M - 2)
  sig = (a & ((1 << s.M) - 1)) | (1 << s.M)
  q = (sig + ((sig.c(1) << (sh - 1)) - 1) + ((sig >> sh) & 1)) >> sh
  bits = q + ((em - lo) << f.M)
  bits = a.c(s.inf).lt(a).where(f.nan, bits.lt(f.overflow).where(bits, f.overflow))
  return bits.cast(BITS[d]) | ((u >> (s.nbits - 1)).cast(BITS[d]) << (f.nbits - 1))

def _encode_bf16(u: V) -> V:
  """float32 bits u rounded to nearest even to bfloat16, float32's top half: (u + 0x7fff + bit 16) >> 16, the carry
  giving the next binade or inf; a NaN keeps its sign and top payload bits and is quieted (| 0x40)."""
  top = u >> 16
  r = (u + 0x7FFF + (top & 1)) >> 16
  return u.c(0x7F800000).lt(u & 0x7FFFFFFF).where(top | 0x40, r).cast(U16)

def int_to_narrow(x: V, d: DType) -> V:
  """The bits of int (or bool) x rounded once to narrow d: through an exact float32/float64, or for 64-bit ints a
  float64 rounded to odd at bit 11 above 2^53 (see the module docstring)."""
  if x.dt is dtypes.bool or x.dt.itemsize <= 2: return encode(x.cast(F32), d)
  if x.dt.itemsize == 4: return encode(x.cast(F64), d)
  signed = x.dt in dtypes.sints
  neg = x.lt(0) if signed else None
  u = (neg.where(0 - x, x) if neg is not None else x).cast(U64)
  sticky = (u & 0x7FF).ne(0).cast(U64)
  f = u.c((1 << 53) - 1).lt(u).where(((u >> 11) | sticky).cast(F64) * 2048.0, u.cast(F64))
  return encode(neg.where(-f, f) if neg is not None else f, d)


# ***** the pass *****

def _float_reads(uops: tuple[UOp, ...]) -> set[int]:
  """The narrow values some uop reads as a number (to be decoded): operands of ALU ops other than NEG and WHERE, CAST
  sources going to a non-bool dtype other than their own, WMMA operands."""
  out: set[int] = set()
  for u in uops:
    if not u.src or isinstance(u.dtype, PtrDType): continue
    last = uops[u.src[-1]].dtype
    if isinstance(last, PtrDType) or (last.scalar() not in NARROW and u.op is not Ops.WMMA): continue
    if u.op in GroupOp.ALU and u.op not in (Ops.NEG, Ops.WHERE): out.update(u.src)
    elif u.op is Ops.CAST and u.dtype.scalar() not in (dtypes.bool, last.scalar()): out.add(u.src[0])
    elif u.op is Ops.WMMA: out.update(j for j in u.src if uops[j].dtype.scalar() in NARROW)
  return out


class _Lowering:
  """The state of one pass: the old uops and the float32 value of each new narrow value that is read as a number. Its
  handlers take an old uop u and its srcs' new indices; an operand is old uop j (its format) at new index n."""
  def __init__(self, program: Program):
    self.program, self.uops = program, program.uops
    self.num: dict[tuple[int, DType], int] = {}  # (new uop of narrow bits, the format they are read in) -> the decode
    self.reads = _float_reads(program.uops)

  def run(self) -> Program:
    """The rewrite: a handler per op that can hold a narrow value (a copy where it holds none), each then `decoded`."""
    handlers: dict[Ops, Handler] = {
      Ops.LOAD: self.load, Ops.STORE: self.store, Ops.CONST: self.const, Ops.CAST: self.convert, Ops.BITCAST: self.convert,
      Ops.WMMA: self.wmma, **dict.fromkeys(GroupOp.ALU - {Ops.WHERE}, self.alu), **dict.fromkeys(ON_BITS, self.on_bits)}
    return rewrite(self.program, {op: functools.partial(self.decoded, h) for op, h in handlers.items()})

  def decoded(self, lower: Handler, b: ProgramBuilder, i: int, u: UOp, src: tuple[int, ...]) -> int:
    """lower(b, i, u, src), then the float32 decode of its result when a later uop reads old uop i as a number (made
    once per new bits and format; an accumulator is decoded at every read instead, since its value changes)."""
    n = lower(b, i, u, src)
    if i in self.reads and b.uops[n].op not in ACC:
      d = u.dtype.scalar()
      if (n, d) not in self.num: self.num[(n, d)] = decode(Values(b, u.dtype.count).of(n, BITS[d]), d).i
    return n

  def bits(self, values: Values, j: int, n: int) -> V:
    """Old uop j's new value n (for narrow j: its bits)."""
    return values.of(n, bits_dtype(self.uops[j].dtype).scalar())

  def value(self, values: Values, j: int, n: int) -> V:
    """Old narrow uop j (new value n) as a float32: its decode made right after it, or (accumulators) decoded here."""
    key = (n, self.uops[j].dtype.scalar())  # a BITCAST between formats shares the bits, not the decode
    if key in self.num: return values.of(self.num[key], F32)
    return decode(self.bits(values, j, n), key[1])

  def alias(self, b: ProgramBuilder, n: int) -> int:
    """New value n as the result of another uop: itself, or for an accumulator a copy of its value now."""
    return n if b.uops[n].op not in ACC else b.uop(Ops.CAST, b.dtype(n), (n,))

  def load(self, b: ProgramBuilder, i: int, u: UOp, src: tuple[int, ...]) -> int:
    """LOAD of the narrow dtype itself, then BITCAST to the bits (a gated LOAD's alternative is BITCAST back first)."""
    if not is_narrow(u.dtype): return copy(b, i, u, src)
    if len(src) == 3: src = (src[0], b.bitcast(src[1], u.dtype), src[2])
    return b.bitcast(b.uop(Ops.LOAD, u.dtype, src, u.arg), bits_dtype(u.dtype))

  def store(self, b: ProgramBuilder, i: int, u: UOp, src: tuple[int, ...]) -> int:
    """STORE of narrow bits: BITCAST back to the narrow dtype first."""
    stored = self.uops[u.src[1]].dtype
    if not is_narrow(stored): return copy(b, i, u, src)
    return b.uop(Ops.STORE, u.dtype, (src[0], b.bitcast(src[1], stored), *src[2:]), u.arg)

  def const(self, b: ProgramBuilder, i: int, u: UOp, src: tuple[int, ...]) -> int:
    """A narrow CONST: the bits of its value."""
    if not is_narrow(u.dtype): return copy(b, i, u, src)
    return b.uop(Ops.CONST, BITS[u.dtype], (), _bits_of(u.arg, u.dtype))

  def on_bits(self, b: ProgramBuilder, i: int, u: UOp, src: tuple[int, ...]) -> int:
    """VECTORIZE, GEP, DEFINE_ACC, ASSIGN or WHERE of narrow values: the same op on the bits."""
    if not is_narrow(u.dtype): return copy(b, i, u, src)
    return b.uop(u.op, bits_dtype(u.dtype), src, u.arg)

  def alu(self, b: ProgramBuilder, i: int, u: UOp, src: tuple[int, ...]) -> int:
    """An ALU op on narrow operands (see "arithmetic" in the module docstring)."""
    d = self.uops[u.src[-1]].dtype.scalar()
    if d not in NARROW: return copy(b, i, u, src)
    values = Values(b, u.dtype.count)
    if u.op is Ops.NEG: return (self.bits(values, u.src[0], src[0]) ^ (1 << (FMT[d].nbits - 1))).i
    if u.op in GroupOp.Transcendental: raise AssertionError("transcendentals are decomposed before")
    xs = [self.value(values, j, n) for j, n in zip(u.src, src)]
    if u.op is Ops.CMPLT: return xs[0].lt(xs[1]).i
    if u.op is Ops.CMPNE: return xs[0].ne(xs[1]).i
    if u.op is Ops.MAX:
      take_a = values.op(Ops.OR, dtypes.bool, xs[1].lt(xs[0]), xs[0].ne(xs[0]))
      return take_a.where(self.bits(values, u.src[0], src[0]), self.bits(values, u.src[1], src[1])).i
    if u.op is Ops.MULACC: return encode(decode(encode(xs[0] * xs[1], d), d) + xs[2], d).i
    return encode(ROUNDED[u.op](*xs), d).i

  def convert(self, b: ProgramBuilder, i: int, u: UOp, src: tuple[int, ...]) -> int:
    """CAST or BITCAST with a narrow source or result (see "casts" in the module docstring)."""
    j, n = u.src[0], src[0]
    s, d = self.uops[j].dtype.scalar(), u.dtype.scalar()
    if s not in NARROW and d not in NARROW: return copy(b, i, u, src)
    values = Values(b, u.dtype.count)
    if u.op is Ops.BITCAST:
      bits = self.bits(values, j, n).bitcast(BITS[d] if d in NARROW else d)
      return self.alias(b, n) if bits.i == n else bits.i
    if s == d: return self.alias(b, n)
    if s not in NARROW:
      x = self.bits(values, j, n)
      return (encode(x, d) if s in (F32, F64) else int_to_narrow(x, d)).i
    if d == dtypes.bool: return (self.bits(values, j, n) & ((1 << (FMT[s].nbits - 1)) - 1)).ne(0).i
    x = self.value(values, j, n)
    return (encode(x, d) if d in NARROW else x.cast(d)).i

  def wmma(self, b: ProgramBuilder, i: int, u: UOp, src: tuple[int, ...]) -> int:
    """WMMA with narrow inputs (decoded to float32) or a narrow accumulator (decoded, made float64, result encoded)."""
    if not any(is_narrow(self.uops[j].dtype) for j in u.src): return copy(b, i, u, src)
    srcs = []
    for k, (j, n) in enumerate(zip(u.src, src)):
      operand = self.uops[j].dtype
      if not is_narrow(operand):
        srcs.append(n)
        continue
      x = self.value(Values(b, operand.count), j, n)
      srcs.append((x.cast(F64) if k == 2 else x).i)
    d = u.dtype.scalar()
    if d not in NARROW: return b.uop(Ops.WMMA, u.dtype, tuple(srcs), u.arg)
    return encode(Values(b, u.dtype.count).of(b.uop(Ops.WMMA, F64.vec(u.dtype.count), tuple(srcs), u.arg), F64), d).i


def _bits_of(value: float, dt: DType) -> int:
  """The bits of a CONST's value in narrow dt (the value is exact there, as the verifier checks; NaN: numpy's NaN)."""
  return int(np.array([value], to_np(dt)).view(to_np(BITS[dt]))[0])


def lower_narrow(program: Program) -> Program:
  """The program with every narrow-float value held as its bits and every op on one written with float32/float64 and
  integer ops (see the module docstring); transcendentals on float16/bfloat16 are decomposed first. A program with no
  narrow value comes back unchanged. The result is not verified again: verifying its thousands of uops costs more than
  rendering them (renderers call this on every compile); spec_tests/test_lower_narrow.py verifies every lowering."""
  verify(program)
  if not any(is_narrow(u.dtype) for u in program.uops): return program
  trans = {u.dtype.scalar() for u in program.uops if u.op in GroupOp.Transcendental} & NARROW
  if trans: program = decompose_transcendentals(program, only=trans)
  return _Lowering(program).run()
