"""The LLVM IR renderer: a verified loop-form Program -> one LLVM IR module (text) holding the kernel function.

The spec (docs/semantics.md, "Decisions") holds in the IR whatever LLVM's optimizer does, because every op is written
with LLVM's own defined semantics, and no instruction carries a fast-math flag (nnan ninf nsz arcp contract afn reassoc
fast) or a no-wrap flag (nsw nuw) -- except the loop counter's increment, which cannot wrap (r < end <= 2^31-1).

  values      SSA values, one per lane of each uop (vectors are scalarized: lane k of uop i is %v{i}_{k}; LLVM's SLP and
              loop vectorizers re-vectorize what pays). CONST is an inline literal, VECTORIZE/GEP/INDEX only name values.
  ints        add sub mul (NEG = sub 0, x; MULACC = mul then add): LLVM wraps modulo 2^bits when there is no nsw/nuw.
              IDIV/MOD: sdiv/srem (signed) udiv/urem (unsigned), which truncate; the inputs LLVM leaves undefined
              (divisor 0, MIN/-1: immediate UB, not poison) give an undefined value in the spec, which a WHERE may
              discard, so the divisor arrives guarded (refimpl.lower.guard_division). SHL: shl; SHR: ashr (signed) /
              lshr (unsigned); counts outside [0, bits) give poison in LLVM and are undefined in the spec. MAX: icmp
              sgt/ugt + select.
              CMPLT: icmp slt/ult; CMPNE: icmp ne. XOR OR AND: xor or and. WHERE: select.
  bool        i1: ADD = or, MUL = and, MAX = or, MULACC = (a and b) or c, CMPLT = (a xor true) and b, CMPNE = XOR = xor.
  floats      float32 / float64 are LLVM float / double: fadd fsub fmul fdiv (correctly rounded, RNE, subnormals kept),
              NEG = fneg (a sign flip), RECIP = fdiv 1.0, x, SQRT = llvm.sqrt (the IEEE square root instruction, no
              libm call). CMPLT = fcmp olt (NaN < x is false), CMPNE = fcmp une (NaN != x is true; -0 == +0).
              MAX = NaN-propagating: select(fcmp uno a, a; a; select(fcmp ult a, b; b; a)) -- not llvm.maxnum, which
              drops NaN; max(+0, -0) is a (both zeros are allowed). MULACC = fmul then fadd: unfused (the allowed set is
              {fused, unfused}; unfused needs no FMA hardware and no libcall), and with no `contract` flag LLVM never
              fuses them. TRUNC = llvm.trunc where the target rounds in one instruction (native_trunc: the LLVM device
              sets it for an aarch64 host or an x86-64 one with SSE4.1, `rounds_natively`); elsewhere llvm.trunc is a
              libm call (truncf), which the ELF loader cannot resolve, so TRUNC arrives written with other ops
              (refimpl.lower.trunc; the renderer's default).
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

What lives where. Every uop handler -- its lanes, names, order of reads, block depth -- is refimpl.backends.scalar's,
shared with cstyle.py (HANDLERS below is scalar.HANDLERS: no grid). This module holds LLVM's tables (LL, the per-op
rules INT_RULES / BOOL_RULES / FLOAT_RULES by operand kind in ALU_TABLES, `rule_fields`, `literal`) and `_Render`'s
hooks, which differ from C's where SSA does: a lane is emitted under its result name (a no-op CAST is the operand itself), an
accumulator is an alloca read by a load at each use, an INDEX is a getelementptr, a gated LOAD or STORE is a branch
around the access (the LOAD's lanes phis), and RANGE / ENDRANGE and IF / ENDIF open and close labelled blocks (the
loop's phi gets its latch block at ENDRANGE). The kernel is `define void @name(ptr noalias %data0, ..., i32 %var_x,
...)` (buffers in DEFINE_GLOBAL order, then the DEFINE_VARs), nounwind (no unwind tables) and "no-builtins": LLVM may
not turn loops into memset/memcpy calls or recognise library calls, so the object never needs an external symbol.
"""
from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import ClassVar

from refimpl.backends import scalar
from refimpl.backends.scalar import Lane, ScalarRender
from refimpl.dtype import DType, PtrDType, dtypes
from refimpl.errors import CompileError
from refimpl.ir import GroupOp, Ops, Program, UOp
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
  Ops.TRUNC: ["{r} = call {T} {trunc}({T} {0})"],
  Ops.MAX: ["{t0} = fcmp ult {T} {0}, {1}", "{t1} = select i1 {t0}, {T} {1}, {T} {0}", "{t2} = fcmp uno {T} {0}, {0}",
            "{r} = select i1 {t2}, {T} {0}, {T} {t1}"],
  Ops.CMPLT: ["{r} = fcmp olt {T} {0}, {1}"], Ops.CMPNE: ["{r} = fcmp une {T} {0}, {1}"],
  Ops.WHERE: ["{r} = select i1 {0}, {T} {1}, {T} {2}"]}
ALU_TABLES = {"bool": BOOL_RULES, "int": INT_RULES, "float": FLOAT_RULES}  # by operand kind (scalar.alu_rule)
SQRT = {"float": "@llvm.sqrt.f32", "double": "@llvm.sqrt.f64"}
TRUNC = {"float": "@llvm.trunc.f32", "double": "@llvm.trunc.f64"}
INTRINSICS = {name: f"declare {t} {name}({t})" for table in (SQRT, TRUNC) for t, name in table.items()}


# ***** the renderer *****

@dataclass(frozen=True)
class LLVMRenderer(Renderer):
  """LLVM IR for the LLVM device: no grid, no locals beyond function-scope arrays. See the module docstring."""
  device: str = "LLVM"
  native_trunc: bool = False  # llvm.trunc only where the target rounds natively (module docstring): the device says
  native_transcendentals: bool = False
  native_threefry: bool = False
  native_narrow: bool = False
  native_wmma: bool = False
  native_poison: bool = True  # an out-of-range fptosi / fptoui and an over-wide shl / lshr / ashr give poison: a value
  native_division: bool = False  # sdiv / udiv by 0 and sdiv of MIN by -1 are immediate UB: refimpl.lower.guard_division

  def render(self, name: str, program: Program) -> str:
    """The module text: the kernel `name` (buffers then int vars) and the intrinsic declarations. The program is lowered
    (refimpl.lower.lower_for): no THREEFRY, WMMA, narrow-float op or EXP2/LOG2/SIN reaches here."""
    return _Render(self, program).module(name)


class _Render(ScalarRender):
  """The state of one rendering: refimpl.backends.scalar.ScalarRender's (its decls are the entry block's allocas), with
  LLVM's spellings, plus the intrinsics used, the loops' phi lines, the current block and the temporaries."""
  sigil: ClassVar[str] = "%"
  var_type: ClassVar[str] = "i32"
  unsupported_hint: ClassVar[str] = (" (a loop-form program has no SPECIAL or BARRIER: lower grid programs with "
                                     "lower_grid_to_loops first)")

  def __init__(self, r: LLVMRenderer, program: Program):
    super().__init__(r, program)
    self.used: set[str] = set()
    self.loops: dict[int, int] = {}  # RANGE uop -> the line of its phi
    self.block, self.ntmp = "entry", 0

  def module(self, name: str) -> str:
    """The module text: the kernel function (the uops rendered in order by HANDLERS, the allocas first in the entry
    block), the intrinsic declarations it uses and its attributes."""
    self.render_uops(HANDLERS)
    self.emit("ret void")
    body = "\n".join(["entry:", *["  " + a for a in self.decls], *self.lines])
    decls = [INTRINSICS[h] for h in sorted(self.used) if h in INTRINSICS]
    return "\n\n".join([f"define void @{name}({', '.join(self.args())}) #0 {{\n{body}\n}}", *decls,
                        'attributes #0 = { nounwind "no-builtins" }'])

  # ---- emitting (no indentation by depth: blocks are labels) ----
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

  # ---- values: a lane is an SSA value, emitted under its result name (or an existing value, for a no-op) ----
  def literal(self, v: bool | int | float, dt: DType) -> str: return literal(v, dt)
  def bind_lane(self, dt: DType, name: str, value: str) -> str: return value
  def alu_lane(self, op: Ops, dt: DType, src_dt: DType, operands: list[str], result: str) -> str:
    """One lane by the rule of the operand kind (INT_RULES, BOOL_RULES, FLOAT_RULES); EXP2/LOG2/SIN are refused."""
    if op in GroupOp.Transcendental:
      raise CompileError(f"{self.r.device}: {op.name} must be decomposed before rendering (refimpl.lower.transcendental)")
    kind, rule = scalar.alu_rule(self.r.device, ALU_TABLES, op, src_dt)
    if op is Ops.SQRT: self.used.add(SQRT[reg_type(src_dt)])
    if op is Ops.TRUNC:
      if not self.r.native_trunc:
        raise CompileError(f"{self.r.device}: TRUNC must be decomposed before rendering (refimpl.lower.trunc)")
      self.used.add(TRUNC[reg_type(src_dt)])
    return self.ins(rule, result, *operands, **rule_fields(kind, src_dt))
  def cast(self, x: str, src: DType, dst: DType, result: str) -> str:
    """CAST of one lane from scalar src to scalar dst (see the module docstring)."""
    if src == dst: return x
    def one(text: str) -> str:
      self.emit(f"{result} = {text}")
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

  def bitcast(self, x: str, src: DType, dst: DType, result: str) -> str:
    """BITCAST of one lane between scalars of one size: to the bits as an iN, then to dst (a narrow float is its bits)."""
    ity = f"i{8 * src.itemsize}"
    if src in FLOATS:
      bits = self.tmp()
      self.emit(f"{bits} = bitcast {LL[src]} {x} to {ity}")
    else: bits = x
    if dst in FLOATS:
      self.emit(f"{result} = bitcast {ity} {bits} to {LL[dst]}")
      return result
    return bits

  # ---- memory: an INDEX is (element pointer, storage type); a gated access is a branch around it ----
  def buffer_param(self, u: UOp, name: str) -> str: return f"ptr noalias {name}"
  def local_decl(self, u: UOp, name: str) -> str:
    assert isinstance(u.dtype, PtrDType)
    return f"{name} = alloca [{u.dtype.size} x {storage_type(u.dtype.base)}], align 16"
  def address(self, i: int, buf: str, idx: str, dt: DType) -> tuple[str, str]:
    self.emit(f"%p{i} = getelementptr inbounds {storage_type(dt)}, ptr {buf}, i32 {idx}")
    return f"%p{i}", storage_type(dt)
  def element(self, index: tuple[str, str], k: int) -> str:
    """The pointer to element k of an INDEX (a getelementptr past the first)."""
    ptr, st = index
    if k == 0: return ptr
    p = self.tmp()
    self.emit(f"{p} = getelementptr inbounds {st}, ptr {ptr}, i64 {k}")
    return p
  def load_element(self, index: tuple[str, str], dt: DType, k: int, result: str) -> str:
    """A load of the storage type; bool is stored as i8 and loaded as != 0."""
    st, p = storage_type(dt), self.element(index, k)
    if dt != dtypes.bool:
      self.emit(f"{result} = load {st}, ptr {p}")
      return result
    m = self.tmp()
    self.emit(f"{m} = load {st}, ptr {p}")
    self.emit(f"{result} = icmp ne i8 {m}, 0")
    return result
  def store_element(self, index: tuple[str, str], dt: DType, k: int, value: str) -> str:
    """A store of the storage type; a bool is stored as 0 / 1 (zext to i8)."""
    if dt == dtypes.bool:
      m = self.tmp()
      self.emit(f"{m} = zext i1 {value} to i8")
      value = m
    return f"store {storage_type(dt)} {value}, ptr {self.element(index, k)}"
  def gated_load(self, label: str, gate: str, alts: list[str], dt: DType, names: list[str], load: Lane) -> list[str]:
    """The loads in block `label`, reached only when the gate holds; each lane a phi of the loaded value and its
    alternative (from the block before)."""
    before = self.block
    self.emit(f"br i1 {gate}, label %{label}, label %{label}_done")
    self.label(label)
    vals = [load(k, self.tmp()) for k in range(len(names))]
    self.branch(f"{label}_done")
    for name, v, alt in zip(names, vals, alts):
      self.emit(f"{name} = phi {reg_type(dt)} [ {v}, %{label} ], [ {alt}, %{before} ]")
    return names
  def guarded(self, gate: str, label: str, stmts: Iterable[str]) -> None:
    self.emit(f"br i1 {gate}, label %{label}, label %{label}_done")
    self.label(label)
    for st in stmts: self.emit(st)
    self.branch(f"{label}_done")

  # ---- accumulators: entry-block allocas, read by a load where used ----
  def declare_acc(self, dt: DType, name: str, init: str) -> None:
    self.decls.append(f"{name} = alloca {reg_type(dt)}")
    self.emit(self.assign_acc(dt, name, init))
  def read_acc(self, dt: DType, name: str) -> str:
    r = self.tmp()
    self.emit(f"{r} = load {reg_type(dt)}, ptr {name}")
    return r
  def assign_acc(self, dt: DType, name: str, value: str) -> str: return f"store {reg_type(dt)} {value}, ptr {name}"

  # ---- blocks: labels and branches ----
  def open_loop(self, i: int, counter: str, start: str, end: str) -> None:
    """A header block with the counter's phi (the latch block is filled in at ENDRANGE), the test and the body."""
    before = self.block
    self.branch(f"loop{i}")
    self.loops[i] = len(self.lines)
    self.emit(f"{counter} = phi i32 [ {start}, %{before} ], [ {counter}_next, %LATCH ]")
    self.emit(f"{counter}_go = icmp slt i32 {counter}, {end}")
    self.emit(f"br i1 {counter}_go, label %loop{i}_body, label %loop{i}_exit")
    self.label(f"loop{i}_body")
  def close_loop(self, i: int, counter: str) -> None:
    line = self.loops[i]
    self.lines[line] = self.lines[line].replace("%LATCH", f"%{self.block}")
    self.emit(f"{counter}_next = add nsw i32 {counter}, 1")  # r < end <= 2^31-1: the counter cannot wrap
    self.emit(f"br label %loop{i}")
    self.label(f"loop{i}_exit")
  def open_if(self, i: int, cond: str) -> None:
    self.emit(f"br i1 {cond}, label %if{i}, label %if{i}_end")
    self.label(f"if{i}")
  def close_if(self, i: int) -> None: self.branch(f"if{i}_end")


def rule_fields(kind: str, dt: DType) -> dict[str, str]:
  """The named fields of a rule of `kind` on operand dtype dt (see INT_RULES)."""
  if kind == "int": return {"T": LL[dt], "s": "s" if is_signed(dt) else "u", "sh": "ashr" if is_signed(dt) else "lshr"}
  if kind == "float":
    return {"T": reg_type(dt), "one": float_literal(1.0), "sqrt": SQRT[reg_type(dt)], "trunc": TRUNC[reg_type(dt)]}
  return {}

HANDLERS: dict[Ops, Callable[..., None]] = scalar.HANDLERS
"""Every handler is the shared core's (refimpl.backends.scalar); no grid: SPECIAL and BARRIER have none."""
