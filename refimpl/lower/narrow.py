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
  arithmetic  ADD SUB MUL FDIV RECIP SQRT: the float32 op on the decoded operands, then encode() rounds once to the
              format. This is the emulator's rule (alu.arith): float32 has >= 2p+2 significand bits for p = 11 and 8,
              so the two roundings are innocuous (fp8 has no ALU ops). MULACC is unfused, MUL then ADD, each rounded
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

from dataclasses import dataclass

import numpy as np

from refimpl.dtype import DType, PtrDType, dtypes, to_np
from refimpl.ir.ops import GroupOp, Ops
from refimpl.ir.program import Program, UOp
from refimpl.ir.verify import verify
from refimpl.lower.emit import Emitter, V
from refimpl.lower.transcendental import decompose_transcendentals

F32, F64, U8, U16, U32, U64 = dtypes.float32, dtypes.float64, dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64
BITS: dict[DType, DType] = {dtypes.float16: U16, dtypes.bfloat16: U16, dtypes.fp8e4m3: U8, dtypes.fp8e5m2: U8}
NARROW = frozenset(BITS)
UINT = {F32: U32, F64: U64}
ACC = (Ops.DEFINE_ACC, Ops.ASSIGN)  # a read of these is the register's value at the reading uop
ROUNDED = {Ops.ADD: lambda a, b: a + b, Ops.SUB: lambda a, b: a - b, Ops.MUL: lambda a, b: a * b,
           Ops.FDIV: lambda a, b: a / b, Ops.SQRT: lambda a: a.e.value(Ops.SQRT, F32, a),
           Ops.RECIP: lambda a: a.e.value(Ops.RECIP, F32, a)}


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


_VEC: dict[tuple[DType, int], DType] = {}

def _vec(dt: DType, count: int) -> DType:
  """dt.vec(count), made once (DType.vec builds and interns a new DType at every call)."""
  if (dt, count) not in _VEC: _VEC[(dt, count)] = dt.vec(count)
  return _VEC[(dt, count)]

def bits_dtype(dt: DType) -> DType:
  """The dtype holding dt's values after lowering: BITS for a narrow scalar or vector, dt itself otherwise."""
  s = dt.scalar()
  return _vec(BITS[s], dt.count) if s in BITS else dt


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

class _Emitter(Emitter):
  """Emitter with each vector dtype made once (_vec)."""
  def value(self, op: Ops, dt: DType, *src: V) -> V:
    return V(self, self.emit(op, _vec(dt, self.count), tuple(s.i for s in src)), dt)

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
  """The state of one pass: the new uop list, where each old uop went, and the float32 value of each new narrow value
  that is read as a number."""
  def __init__(self, program: Program):
    self.uops = program.uops
    self.out: list[UOp] = []
    self.new: dict[int, int] = {}
    self.num: dict[tuple[int, DType], int] = {}  # (new uop of narrow bits, the format they are read in) -> the decode
    self.reads = _float_reads(program.uops)

  def emit(self, op: Ops, dt: DType, src: tuple[int, ...], arg=None) -> int:
    self.out.append(UOp(op, dt, src, arg))
    return len(self.out) - 1

  def bits(self, e: Emitter, j: int) -> V:
    """Old uop j's new value (for narrow j: its bits)."""
    return V(e, self.new[j], bits_dtype(self.uops[j].dtype).scalar())

  def value(self, e: Emitter, j: int) -> V:
    """Old narrow uop j as a float32: its decode made right after it, or (accumulators) decoded here."""
    key = (self.new[j], self.uops[j].dtype.scalar())  # a BITCAST between formats shares the bits, not the decode
    if key in self.num: return V(e, self.num[key], F32)
    return decode(self.bits(e, j), key[1])

  def alias(self, j: int) -> int:
    """Old uop j's new value as the result of another uop: itself, or for an accumulator a copy of its value now."""
    k = self.new[j]
    if self.out[k].op not in ACC: return k
    return self.emit(Ops.CAST, self.out[k].dtype, (k,))

  def run(self) -> list[UOp]:
    for i, u in enumerate(self.uops):
      self.new[i] = self.lower(u)
      key = (self.new[i], None if isinstance(u.dtype, PtrDType) else u.dtype.scalar())
      if i in self.reads and self.out[key[0]].op not in ACC and key not in self.num:
        self.num[key] = decode(V(_Emitter(self.out, u.dtype.count), key[0], BITS[key[1]]), key[1]).i
    return self.out

  def lower(self, u: UOp) -> int:
    """The new uop standing for old uop u."""
    src = tuple(self.new[j] for j in u.src)
    dt = None if isinstance(u.dtype, PtrDType) else u.dtype.scalar()
    last = None if not u.src or isinstance(self.uops[u.src[-1]].dtype, PtrDType) else self.uops[u.src[-1]].dtype.scalar()
    if u.op is Ops.LOAD and dt in NARROW: return self.load(u, src)
    if u.op is Ops.STORE and self.uops[u.src[1]].dtype.scalar() in NARROW:
      value = self.emit(Ops.BITCAST, self.uops[u.src[1]].dtype, (src[1],))
      return self.emit(Ops.STORE, u.dtype, (src[0], value, *src[2:]), u.arg)
    if u.op is Ops.CONST and dt in NARROW:
      return self.emit(Ops.CONST, BITS[dt], (), _bits_of(u.arg, dt))
    if u.op in (Ops.VECTORIZE, Ops.GEP, Ops.DEFINE_ACC, Ops.ASSIGN, Ops.WHERE) and dt in NARROW:
      return self.emit(u.op, bits_dtype(u.dtype), src, u.arg)
    if u.op in (Ops.CAST, Ops.BITCAST) and (dt in NARROW or last in NARROW): return self.convert(u)
    if u.op is Ops.WMMA and any(self.uops[j].dtype.scalar() in NARROW for j in u.src): return self.wmma(u)
    if u.op in GroupOp.ALU and last in NARROW: return self.alu(u)
    return self.emit(u.op, u.dtype, src, u.arg)

  def load(self, u: UOp, src: tuple[int, ...]) -> int:
    """LOAD of the narrow dtype itself, then BITCAST to the bits (a gated LOAD's alternative is BITCAST back first)."""
    if len(src) == 3: src = (src[0], self.emit(Ops.BITCAST, u.dtype, (src[1],)), src[2])
    return self.emit(Ops.BITCAST, bits_dtype(u.dtype), (self.emit(Ops.LOAD, u.dtype, src, u.arg),))

  def alu(self, u: UOp) -> int:
    """An ALU op on narrow operands (see "arithmetic" in the module docstring)."""
    e, d = _Emitter(self.out, u.dtype.count), self.uops[u.src[-1]].dtype.scalar()
    if u.op is Ops.NEG: return (self.bits(e, u.src[0]) ^ (1 << (FMT[d].nbits - 1))).i
    if u.op in GroupOp.Transcendental: raise AssertionError("transcendentals are decomposed before")
    xs = [self.value(e, j) for j in u.src]
    if u.op is Ops.CMPLT: return xs[0].lt(xs[1]).i
    if u.op is Ops.CMPNE: return xs[0].ne(xs[1]).i
    if u.op is Ops.MAX:
      take_a = e.value(Ops.OR, dtypes.bool, xs[1].lt(xs[0]), xs[0].ne(xs[0]))
      return take_a.where(self.bits(e, u.src[0]), self.bits(e, u.src[1])).i
    if u.op is Ops.MULACC: return encode(decode(encode(xs[0] * xs[1], d), d) + xs[2], d).i
    return encode(ROUNDED[u.op](*xs), d).i

  def convert(self, u: UOp) -> int:
    """CAST or BITCAST with a narrow source or result (see "casts" in the module docstring)."""
    s, d, j = self.uops[u.src[0]].dtype.scalar(), u.dtype.scalar(), u.src[0]
    e = _Emitter(self.out, u.dtype.count)
    if u.op is Ops.BITCAST:
      bits = self.bits(e, j).bitcast(BITS[d]) if d in NARROW else self.bits(e, j).bitcast(d)
      return self.alias(j) if bits.i == self.new[j] else bits.i
    if s == d: return self.alias(j)
    if s not in NARROW: return (encode(self.bits(e, j), d) if s in (F32, F64) else int_to_narrow(self.bits(e, j), d)).i
    if d == dtypes.bool: return (self.bits(e, j) & ((1 << (FMT[s].nbits - 1)) - 1)).ne(0).i
    x = self.value(e, j)
    return (encode(x, d) if d in NARROW else x.cast(d)).i

  def wmma(self, u: UOp) -> int:
    """WMMA with narrow inputs (decoded to float32) or a narrow accumulator (decoded, made float64, result encoded)."""
    srcs = []
    for k, j in enumerate(u.src):
      jd = self.uops[j].dtype
      if jd.scalar() not in NARROW:
        srcs.append(self.new[j])
        continue
      x = self.value(_Emitter(self.out, jd.count), j)
      srcs.append((x.cast(F64) if k == 2 else x).i)
    d = u.dtype.scalar()
    if d not in NARROW: return self.emit(Ops.WMMA, u.dtype, tuple(srcs), u.arg)
    e = _Emitter(self.out, u.dtype.count)
    return encode(V(e, self.emit(Ops.WMMA, F64.vec(u.dtype.count), tuple(srcs), u.arg), F64), d).i


def _bits_of(value: float, dt: DType) -> int:
  """The bits of a CONST's value in narrow dt (the value is exact there, as the verifier checks; NaN: numpy's NaN)."""
  return int(np.array([value], to_np(dt)).view(to_np(BITS[dt]))[0])


def lower_narrow(program: Program) -> Program:
  """The program with every narrow-float value held as its bits and every op on one written with float32/float64 and
  integer ops (see the module docstring); transcendentals on float16/bfloat16 are decomposed first. A program with no
  narrow value comes back unchanged. The result is not verified again: verifying its thousands of uops costs more than
  rendering them (renderers call this on every compile); spec_tests/test_lower_narrow.py verifies every lowering."""
  verify(program)
  if not any(not isinstance(u.dtype, PtrDType) and u.dtype.scalar() in NARROW for u in program.uops): return program
  trans = {u.dtype.scalar() for u in program.uops if u.op in GroupOp.Transcendental} & NARROW
  if trans: program = decompose_transcendentals(program, only=trans)
  out = _Lowering(program).run()
  return Program(program.name, tuple(out), program.global_size, program.local_size)
