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
  narrow      float16, bfloat16, fp8e4m3 and fp8e5m2 are lowered first by refimpl.lower.narrow (lower_narrow): a
              value is its bits and every op on one is float32/float64 and integer ops with one rounding, written once
              for every backend. What reaches the renderer is the storage table: a narrow dtype is the iN of its size
              (i16 / i8) in memory and in registers, its LOAD and STORE move those bits and BITCAST to or from that int
              is no instruction. LLVM's `half` and `bfloat` types are not used: x86 lowers half <-> double conversions
              (and every half conversion on CPUs without F16C) to compiler-rt calls (__truncdfhf2, __extendhfsf2, ...),
              which the ELF loader cannot resolve.
  casts       to bool: icmp ne 0 / fcmp une 0.0 (NaN -> true, -0 -> false); from bool: zext / uitofp. int -> int:
              trunc / sext (signed source) / zext. int -> float32/64: sitofp / uitofp (one correct rounding).
              float -> int: fptosi / fptoui (truncation; out-of-range inputs give poison in LLVM, undefined in the spec).
              float32 <-> float64: fpext / fptrunc (RNE). Casts to and from narrow formats are lowered before.
  BITCAST     bitcast between ints and float/double of one size; between ints of one size (a narrow float's bits
              included) nothing.
  memory      INDEX: getelementptr inbounds (int32 index, sign-extended); LOAD/STORE of n lanes touch elements
              idx..idx+n-1. bool is stored as i8 (loaded as != 0, stored as 0/1). A gated LOAD or STORE is a branch
              around the access (a false gate does no access; the LOAD yields its alternative through a phi).
  structure   RANGE: a header block with a phi counter (start, then r+1 from the latch), `icmp slt` against end (both
              read once, at the RANGE). IF: a conditional branch around the block. DEFINE_ACC: an alloca in the entry
              block (mem2reg/SROA promote it at -O1 and above); ASSIGN stores into it; every read of a DEFINE_ACC or
              ASSIGN uop is a load at the reading uop, so it sees the register's value at that point. DEFINE_LOCAL: an
              entry-block alloca array (loop form only: one thread at a time). BARRIER and SPECIAL are refused (the
              runner lowers grid programs to loops first).
  WMMA        rewritten by refimpl.lower.wmma (decompose_wmma, after lower_narrow) into GEPs, fpext to double, fmul and
              fadd in double in the emulator's order and one rounding to the output dtype: the renderer has no WMMA code.
  EXP2 LOG2 SIN are rewritten into ALU ops by refimpl.lower.transcendental before rendering (no libm), and THREEFRY
  into integer ops by refimpl.lower.threefry.

The lane bookkeeping, CONST/VECTORIZE/GEP/DEFINE_* and the dispatch loop are refimpl.backends.scalar's (shared with
cstyle.py); `_Render` supplies LLVM's spellings. The kernel is `define void @name(ptr noalias %data0, ..., i32 %var_x,
...)` (buffers in DEFINE_GLOBAL order, then the DEFINE_VARs), nounwind (no unwind tables) and "no-builtins": LLVM may
not turn loops into memset/memcpy calls or recognise library calls, so the object never needs an external symbol.
"""
from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from refimpl.backends import scalar
from refimpl.backends.scalar import ScalarRender
from refimpl.dtype import DType, PtrDType, dtypes
from refimpl.errors import CompileError
from refimpl.ir import GroupOp, Ops, Program, UOp, verify
from refimpl.lower import check_capabilities, decompose_threefry, decompose_wmma, lower_narrow
from refimpl.lower.narrow import BITS
from refimpl.renderer import Renderer

# ***** types *****

LL: dict[DType, str] = {
  dtypes.bool: "i1", dtypes.int8: "i8", dtypes.uint8: "i8", dtypes.int16: "i16", dtypes.uint16: "i16", dtypes.int32: "i32",
  dtypes.uint32: "i32", dtypes.int64: "i64", dtypes.uint64: "i64", dtypes.float32: "float", dtypes.float64: "double"}

FLOATS = (dtypes.float32, dtypes.float64)

def reg_type(dt: DType) -> str:
  """The LLVM type of a register holding a scalar of dt (a lowered narrow float: its bits, refimpl.lower.narrow.BITS)."""
  return LL[BITS.get(dt, dt)]

def storage_type(dt: DType) -> str:
  """The LLVM type of a buffer element of dt (narrow floats: their bits; bool: i8)."""
  return "i8" if dt == dtypes.bool else reg_type(dt)

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
INTRINSICS = {"@llvm.sqrt.f32": "declare float @llvm.sqrt.f32(float)", "@llvm.sqrt.f64": "declare double @llvm.sqrt.f64(double)"}


# ***** the renderer *****

@dataclass(frozen=True)
class LLVMRenderer(Renderer):
  """LLVM IR for the LLVM device: no grid, no locals beyond function-scope arrays. See the module docstring."""
  device: str = "LLVM"

  def render(self, name: str, program: Program) -> str:
    """The module text: the kernel `name` (buffers then int vars) and the intrinsic declarations; THREEFRY, WMMA, narrow
    floats and EXP2/LOG2/SIN are lowered first (refimpl.lower)."""
    verify(program)
    check_capabilities(program, self)
    if any(u.op in GroupOp.Transcendental for u in program.uops):
      from refimpl.lower.transcendental import decompose_transcendentals
      program = decompose_transcendentals(program)
    return _Render(self, decompose_wmma(lower_narrow(decompose_threefry(program)))).module(name)


class _Render(ScalarRender):
  """The state of one rendering (refimpl.backends.scalar.ScalarRender's; its decls are the entry block's allocas),
  plus the accumulators' allocas, the INDEX pointers, the intrinsics used, the loops and the current block."""
  sigil: ClassVar[str] = "%"
  var_type: ClassVar[str] = "i32"
  unsupported_hint: ClassVar[str] = (" (a loop-form program has no SPECIAL or BARRIER: lower grid programs with "
                                     "lower_grid_to_loops first)")

  def __init__(self, r: LLVMRenderer, program: Program):
    super().__init__(r, program)
    self.accs: dict[int, list[str]] = {}          # DEFINE_ACC / ASSIGN uop -> the allocas of its lanes
    self.index: dict[int, tuple[str, DType]] = {}  # INDEX uop -> (element pointer, element dtype)
    self.used: set[str] = set()
    self.loops: dict[int, int] = {}                # RANGE uop -> the line of its phi
    self.block, self.ntmp = "entry", 0

  def literal(self, v: bool | int | float, dt: DType) -> str: return literal(v, dt)
  def buffer_param(self, u: UOp, name: str) -> str: return f"ptr noalias {name}"
  def local_decl(self, u: UOp, name: str) -> str:
    assert isinstance(u.dtype, PtrDType)
    return f"{name} = alloca [{u.dtype.size} x {storage_type(u.dtype.base)}], align 16"

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
  def use(self, name: str) -> None: self.used.add(name)
  def name(self, i: int, k: int, n: int) -> str: return self.lane_name("%v", i, k, n)

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

  # ---- the module ----
  def module(self, name: str) -> str:
    """The module text: the kernel function (the uops rendered in order by HANDLERS, the allocas first in the entry
    block), the intrinsic declarations it uses and its attributes."""
    self.render_uops(HANDLERS)
    self.emit("ret void")
    body = "\n".join(["entry:", *["  " + a for a in self.decls], *self.lines])
    decls = [INTRINSICS[h] for h in sorted(self.used) if h in INTRINSICS]
    return "\n\n".join([f"define void @{name}({', '.join(self.args())}) #0 {{\n{body}\n}}", *decls,
                        'attributes #0 = { nounwind "no-builtins" }'])


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
  if dt != dtypes.bool:
    s.emit(f"{result} = load {st}, ptr {p}")
    return result
  m = s.tmp()
  s.emit(f"{m} = load {st}, ptr {p}")
  s.emit(f"{result} = icmp ne i8 {m}, 0")
  return result

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
  if dt != dtypes.bool: return v
  r = s.tmp()
  s.emit(f"{r} = zext i1 {v} to i8")
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
  ptrs = [s.lane_name("%acc", i, k, n) for k in range(n)]
  for p, v in zip(ptrs, init):
    s.decls.append(f"{p} = alloca {t}")
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

def _alu(s: _Render, i: int, u: UOp) -> None:
  """One ALU uop, lane by lane, by the rule of its operand kind (INT_RULES, BOOL_RULES, FLOAT_RULES)."""
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
    out.append(s.ins(rules[u.op], s.name(i, k, n), *s.srcs(u, k), **fmt))
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
    return one(f"{'sitofp' if is_signed(src) else 'uitofp'} {st} {x} to {dt}")
  if dtypes.is_int(dst): return one(f"{'fptosi' if is_signed(dst) else 'fptoui'} {st} {x} to {dt}")
  return one(f"fpext {st} {x} to {dt}" if dt == "double" else f"fptrunc {st} {x} to {dt}")

def _bitcast_lane(s: _Render, x: str, src: DType, dst: DType, result: str) -> str:
  """BITCAST of one lane between scalars of one size: to the bits as an iN, then to dst (a narrow float is its bits)."""
  ity = f"i{8 * src.itemsize}"
  if src in FLOATS:
    bits = s.tmp()
    s.emit(f"{bits} = bitcast {LL[src]} {x} to {ity}")
  else: bits = x
  if dst in FLOATS:
    s.emit(f"{result} = bitcast {ity} {bits} to {LL[dst]}")
    return result
  return bits

def _cast(s: _Render, i: int, u: UOp) -> None:
  src, dst, n = s.uops[u.src[0]].dtype.scalar(), u.dtype.scalar(), u.dtype.count
  conv = _bitcast_lane if u.op is Ops.BITCAST else _cast_lane
  s.lanes[i] = [conv(s, s.get(u.src[0], k), src, dst, s.name(i, k, n)) for k in range(n)]

HANDLERS: dict[Ops, Callable[[_Render, int, UOp], None]] = {
  **scalar.HANDLERS, **dict.fromkeys(GroupOp.ALU, _alu),
  Ops.INDEX: _index, Ops.LOAD: _load, Ops.STORE: _store, Ops.DEFINE_ACC: _define_acc, Ops.ASSIGN: _assign,
  Ops.RANGE: _range, Ops.ENDRANGE: _endrange, Ops.IF: _if, Ops.ENDIF: _endif, Ops.CAST: _cast, Ops.BITCAST: _cast}
