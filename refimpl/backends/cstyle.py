"""The C-family renderer: a verified Program -> C source (CLANG) or, with another language table, OpenCL C (GPU).

Every rule of the spec (docs/semantics.md, "Decisions") must hold in the generated code whatever the optimizer does, so
nothing is left to C's undefined or unspecified corners:

  values      one C variable per uop, in program order (CONST is an inline literal; VECTORIZE, GEP and INDEX are only
              names). Vectors are scalarized: lane k of uop i is the variable v{i}_{k}; loads and stores of n lanes
              touch elements idx..idx+n-1. (The C compiler's SLP/loop vectorizers re-vectorize what pays.)
  ints        ADD SUB MUL NEG MULACC SHL run on the unsigned wrap type (unsigned int for widths <= 32, 64-bit
              otherwise: a narrow unsigned operand would promote to *signed* int, where 65535*65535 overflows) and are
              converted back (two's complement in every C compiler we target); SHR shifts the value itself
              (arithmetic on signed, logical on unsigned); IDIV/MOD are C's / and %, which truncate. Counts outside
              [0, bits), division by 0 and MIN/-1 are undefined in the spec, so C's UB there is no loss.
  bool        ADD=OR, MUL=AND, MAX=OR, MULACC=(a&b)|c, CMPLT=!a&&b, CMPNE=a!=b (the spec's table).
  floats      float32 and float64 use C's float and double (IEEE, compiled with -ffp-contract=off, no fast-math);
              MAX propagates NaN as one select, (a > b || a != a) ? a : b (see FLOAT_RULES); MULACC is a*b+c
              unfused; RECIP is 1/x; SQRT is the correctly rounded builtin.
  narrow      float16, bfloat16, fp8e4m3 and fp8e5m2 are lowered first by refimpl.lower.narrow (lower_narrow): their
              values are their bits, and every op on them is float32/float64 and integer ops with one rounding, written
              once for every backend. What reaches the renderer is the storage table: a narrow dtype's buffer element
              and register are the unsigned int of its size (unsigned short / unsigned char; `reg_type`), its LOAD
              and STORE move those bits, and BITCAST between it and that int is a plain int conversion. No _Float16,
              no compiler-rt call, no dependence on F16C: the same bits on every host and in OpenCL.
  casts       to bool: x != 0; int->int, int->float32/64, float->int (truncation) and float->float32/64: C
              conversions, each a single correct rounding (casts to and from narrow formats are lowered before).
  BITCAST     through the prelude's rf_fbits/rf_bitsf/rf_dbits/rf_bitsd (memcpy in C, as_* in OpenCL): no aliasing UB.
  memory      gated LOAD: gate ? p[i] : alt (no access when false); gated STORE: if (gate) p[i] = v.
  kernel      `void k_name(...)`: the symbol is kernel_symbol(name), never a keyword, built-in or helper.
  structure   RANGE: for loops; IF: if blocks; DEFINE_ACC: a local variable that ASSIGN overwrites; DEFINE_LOCAL: an
              array (function scope in C). THREEFRY is rewritten into integer ops by refimpl.lower.threefry first.
  WMMA        rewritten by refimpl.lower.wmma (decompose_wmma, after lower_narrow) into GEPs, CASTs to double, double
              products and sums in the emulator's order and one CAST to the output dtype: the renderer has no WMMA code.

The lane bookkeeping, CONST/VECTORIZE/GEP/DEFINE_* and the dispatch loop are refimpl.backends.scalar's (shared with
llvmir.py); `_Render` supplies C's spellings. What differs between C and OpenCL C is the class attributes of
`CStyleRenderer` (kernel prefix, buffer qualifiers, type names, literal suffixes, SPECIAL/BARRIER spellings, the bit
primitives, native transcendentals); subclasses set them.
"""
from __future__ import annotations

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

# the per-op rules, by operand kind. {0} {1} {2}: operands; {T}: the result's register type; {U}: the unsigned wrap
# type; {one}: 1 in the operands' float type; {sqrt}: its square root.
INT_RULES: dict[Ops, str] = {
  Ops.ADD: "({T})(({U}){0}+({U}){1})", Ops.SUB: "({T})(({U}){0}-({U}){1})", Ops.MUL: "({T})(({U}){0}*({U}){1})",
  Ops.NEG: "({T})(({U})0-({U}){0})", Ops.MULACC: "({T})(({U}){0}*({U}){1}+({U}){2})",
  Ops.SHL: "({T})(({U}){0}<<({U}){1})", Ops.SHR: "({T})({0}>>{1})",
  Ops.IDIV: "({T})({0}/{1})", Ops.MOD: "({T})({0}%{1})", Ops.MAX: "({0}>{1}?{0}:{1})",
  Ops.CMPLT: "({0}<{1})", Ops.CMPNE: "({0}!={1})", Ops.XOR: "({T})({0}^{1})", Ops.OR: "({T})({0}|{1})",
  Ops.AND: "({T})({0}&{1})", Ops.WHERE: "({0}?{1}:{2})"}
BOOL_RULES: dict[Ops, str] = {
  Ops.ADD: "({0}|{1})", Ops.MUL: "({0}&{1})", Ops.MAX: "({0}|{1})", Ops.MULACC: "(({0}&{1})|{2})",
  Ops.CMPLT: "(!{0}&&{1})", Ops.CMPNE: "({0}!={1})", Ops.XOR: "({0}^{1})", Ops.OR: "({0}|{1})", Ops.AND: "({0}&{1})",
  Ops.WHERE: "({0}?{1}:{2})"}
FLOAT_RULES: dict[Ops, str] = {
  Ops.ADD: "({0}+{1})", Ops.SUB: "({0}-{1})", Ops.MUL: "({0}*{1})", Ops.FDIV: "({0}/{1})",
  Ops.NEG: "(-{0})", Ops.RECIP: "({one}/{0})", Ops.SQRT: "{sqrt}({0})", Ops.MULACC: "({0}*{1}+{2})",
  # NaN-propagating, as one select (a NaN {0} is taken; a NaN {1} fails both tests). Not a!=a?a:b!=b?b:a>b?a:b: in an
  # unrolled reduction that form made LLVM 22's loop vectorizer take time exponential in the length (-march=native)
  Ops.MAX: "(({0}>{1}||{0}!={0})?{0}:{1})",
  Ops.CMPLT: "({0}<{1})", Ops.CMPNE: "({0}!={1})", Ops.WHERE: "({0}?{1}:{2})"}

def kernel_symbol(name: str) -> str:
  """The C / OpenCL C function name of the kernel `name`: k_ + name. The verifier accepts any identifier as a program
  name, and a bare one could be a keyword (`for`), an OpenCL built-in (`mad`, `dot`) or a prelude helper (`rf_u32`); no
  keyword, built-in or helper starts with k_. The runtimes look the kernel up by this symbol."""
  return f"k_{name}"


@dataclass(frozen=True)
class CStyleRenderer(Renderer):
  """Renders C (these defaults) or another C dialect (override the class attributes below). See the module docstring."""
  # ---- the language table: everything C and OpenCL C spell differently ----
  kernel_prefix: ClassVar[str] = "void "
  buffer_prefix: ClassVar[str] = ""                # e.g. "__global "
  buffer_suffix: ClassVar[str] = " restrict"       # after the '*': distinct buffers never alias
  local_prefix: ClassVar[str] = ""                 # DEFINE_LOCAL arrays, e.g. "__local "
  barrier: ClassVar[str | None] = ""               # "" renders nothing (C runs one thread); None refuses BARRIER
  special: ClassVar[dict[str, str] | None] = None  # {"gidx": "get_group_id({d})", "lidx": ...}; None: no grid
  types: ClassVar[dict[DType, str]] = {
    dtypes.bool: "_Bool", dtypes.int8: "signed char", dtypes.uint8: "unsigned char", dtypes.int16: "short",
    dtypes.uint16: "unsigned short", dtypes.int32: "int", dtypes.uint32: "unsigned int", dtypes.int64: "long long",
    dtypes.uint64: "unsigned long long", dtypes.float32: "float", dtypes.float64: "double"}
  bool_storage: ClassVar[str] = "_Bool"            # a bool buffer's element type (OpenCL: uchar, converted with != 0)
  int_suffix: ClassVar[dict[DType, str]] = {dtypes.uint32: "u", dtypes.int64: "ll", dtypes.uint64: "ull"}
  float_specials: ClassVar[dict[DType, tuple[str, str]]] = {  # (infinity, NaN)
    dtypes.float32: ("__builtin_inff()", "__builtin_nanf(\"\")"), dtypes.float64: ("__builtin_inf()", "__builtin_nan(\"\")")}
  sqrt: ClassVar[dict[DType, str]] = {dtypes.float32: "__builtin_sqrtf", dtypes.float64: "__builtin_sqrt"}
  transcendental: ClassVar[dict[Ops, str]] = {}    # native EXP2/LOG2/SIN spellings; C has none (decompose first)
  lang_prelude: ClassVar[str] = r"""typedef unsigned int rf_u32;
typedef unsigned long long rf_u64;
static inline rf_u32 rf_fbits(float x) { rf_u32 u; __builtin_memcpy(&u, &x, 4); return u; }
static inline float rf_bitsf(rf_u32 u) { float x; __builtin_memcpy(&x, &u, 4); return x; }
static inline rf_u64 rf_dbits(double x) { rf_u64 u; __builtin_memcpy(&u, &x, 8); return u; }
static inline double rf_bitsd(rf_u64 u) { double x; __builtin_memcpy(&x, &u, 8); return x; }"""

  # ---- types ----
  def reg_type(self, dt: DType) -> str:
    """The C type of a register holding a scalar of dt (a lowered narrow float: its bits, refimpl.lower.narrow.BITS)."""
    return self.types[BITS.get(dt, dt)]
  def storage_type(self, dt: DType) -> str:
    """The C type of a buffer element of dt (narrow floats: their bits)."""
    return self.bool_storage if dt == dtypes.bool else self.reg_type(dt)
  def wrap_type(self, dt: DType) -> str: return "rf_u64" if dt.itemsize == 8 else "rf_u32"
  def load_conv(self, dt: DType, mem: str) -> str:
    return f"({mem}!=0)" if dt == dtypes.bool and self.bool_storage != self.types[dtypes.bool] else mem
  def store_conv(self, dt: DType, val: str) -> str:
    return f"({self.bool_storage}){val}" if dt == dtypes.bool and self.bool_storage != self.types[dtypes.bool] else val

  def prelude(self) -> str: return f"#ifndef RF_PRELUDE\n#define RF_PRELUDE\n{self.lang_prelude}\n#endif\n"

  # ---- literals ----
  def literal(self, v: bool | int | float, dt: DType) -> str:
    """A C literal of scalar dt's register type (ints of < 32 bits are cast to their type)."""
    if dt == dtypes.bool: return "1" if v else "0"
    if dtypes.is_int(dt):
      sfx = self.int_suffix.get(dt, "")
      if dt in (dtypes.int32, dtypes.int64) and v == dtypes.min(dt): return f"({v + 1}{sfx}-1)"
      text = f"{v}{sfx}" if v >= 0 else f"({v}{sfx})"
      return f"(({self.types[dt]}){text})" if dt.itemsize < 4 else text
    fdt = dtypes.float64 if dt == dtypes.float64 else dtypes.float32
    inf, nan = self.float_specials[fdt]
    if v != v: return nan
    if v in (float("inf"), float("-inf")): return inf if v > 0 else f"(-{inf})"
    text = float(v).hex() + ("" if fdt == dtypes.float64 else "f")
    return f"({text})" if text.startswith("-") else text  # a bare "-x" after "-" would read as "--"

  # ---- expressions ----
  def alu(self, op: Ops, dt: DType, src: list[str], src_dt: DType) -> str:
    """The expression of one lane of an ALU op; dt is the result's scalar dtype, src_dt the last operand's."""
    s = src_dt
    if op in GroupOp.Transcendental:
      if op not in self.transcendental:
        raise CompileError(f"{self.device}: {op.name} on {s.name} must be decomposed into other ops before rendering "
                           f"(refimpl.lower.transcendental)")
      return self.transcendental[op].format(*src)
    if s == dtypes.bool: rules, fmt = BOOL_RULES, {}
    elif dtypes.is_int(s): rules, fmt = INT_RULES, {"T": self.types[dt], "U": self.wrap_type(s)}
    else: rules, fmt = FLOAT_RULES, {"one": self.literal(1.0, s), "sqrt": self.sqrt[s]}
    if op not in rules: raise CompileError(f"{self.device}: no rendering of {op.name} on {s.name}")
    return rules[op].format(*src, **fmt)

  def cast(self, x: str, s: DType, d: DType) -> str:
    """CAST of one lane from scalar s to scalar d."""
    if s == d: return x
    if d == dtypes.bool: return f"({x}!=0)"
    return f"(({self.reg_type(d)}){x})"

  def bitcast(self, x: str, s: DType, d: DType) -> str:
    """BITCAST of one lane between scalars of one size: to the bits as an unsigned int, then to d (a narrow float is
    its bits already)."""
    if s == dtypes.float32: bits = f"rf_fbits({x})"
    elif s == dtypes.float64: bits = f"rf_dbits({x})"
    else: bits = x
    if d == dtypes.float32: return f"rf_bitsf((rf_u32){bits})"
    if d == dtypes.float64: return f"rf_bitsd((rf_u64){bits})"
    return f"(({self.reg_type(d)}){bits})"

  # ---- the program ----
  def render(self, name: str, program: Program) -> str:
    """C source of the kernel `name`: the prelude, then one function taking the buffers then the int vars. THREEFRY, WMMA
    and narrow floats are lowered first (refimpl.lower.threefry, refimpl.lower.narrow, refimpl.lower.wmma)."""
    verify(program)
    check_capabilities(program, self)
    return self.prelude() + _Render(self, decompose_wmma(lower_narrow(decompose_threefry(program)))).function(name)


class _Render(ScalarRender):
  """The state of one rendering (refimpl.backends.scalar.ScalarRender's, plus the INDEX pointers and the block depth)."""
  def __init__(self, r: CStyleRenderer, program: Program):
    super().__init__(r, program)
    self.r: CStyleRenderer = r
    self.var_type = r.types[dtypes.int32]
    self.index: dict[int, tuple[str, str]] = {}
    self.depth = 1

  def emit(self, line: str) -> None: self.lines.append("  " * self.depth + line)
  def src(self, u: UOp, k: int) -> list[str]: return self.lanes[u.src[k]]
  def sdt(self, u: UOp, k: int) -> DType: return self.uops[u.src[k]].dtype

  def literal(self, v: bool | int | float, dt: DType) -> str: return self.r.literal(v, dt)
  def buffer_param(self, u: UOp, name: str) -> str:
    assert isinstance(u.dtype, PtrDType)
    return f"{self.r.buffer_prefix}{self.r.storage_type(u.dtype.base)}*{self.r.buffer_suffix} {name}"
  def local_decl(self, u: UOp, name: str) -> str:
    assert isinstance(u.dtype, PtrDType)
    return f"{self.r.local_prefix}{self.r.storage_type(u.dtype.base)} {name}[{u.dtype.size}];"

  def define(self, i: int, dt: DType, exprs: list[str], prefix: str = "v") -> None:
    """Declares one variable per lane of uop i, initialised to exprs."""
    names = [self.lane_name(prefix, i, k, len(exprs)) for k in range(len(exprs))]
    for n, e in zip(names, exprs): self.emit(f"{self.r.reg_type(dt.scalar())} {n} = {e};")
    self.lanes[i] = names

  def function(self, name: str) -> str:
    """The kernel function: the uops rendered in order (HANDLERS), the declarations first."""
    self.render_uops(HANDLERS)
    body = "\n".join(["  " + d for d in self.decls] + self.lines)
    return f"{self.r.kernel_prefix}{kernel_symbol(name)}({', '.join(self.args()) or 'void'}) {{\n{body}\n}}\n"


def _special(s: _Render, i: int, u: UOp) -> None:
  name = u.arg[0]
  if s.r.special is None: raise CompileError(f"{s.r.device}: SPECIAL {name}: no grid here (lower_grid_to_loops first)")
  s.define(i, u.dtype, [s.r.special[name[:-1]].format(d=name[-1])])

def _index(s: _Render, i: int, u: UOp) -> None: s.index[i] = (s.src(u, 0)[0], s.src(u, 1)[0])

def _element(s: _Render, index_uop: int, k: int) -> str:
  buf, idx = s.index[index_uop]
  return f"{buf}[{idx}]" if k == 0 else f"{buf}[{idx}+{k}]"

def _load(s: _Render, i: int, u: UOp) -> None:
  dt = u.dtype.scalar()
  vals = [s.r.load_conv(dt, _element(s, u.src[0], k)) for k in range(u.dtype.count)]
  if len(u.src) == 3:
    alt, gate = s.src(u, 1), s.src(u, 2)[0]
    vals = [f"({gate}?{v}:{a})" for v, a in zip(vals, alt)]
  s.define(i, u.dtype, vals)

def _store(s: _Render, i: int, u: UOp) -> None:
  dt = s.sdt(u, 1).scalar()
  stmts = [f"{_element(s, u.src[0], k)} = {s.r.store_conv(dt, v)};" for k, v in enumerate(s.src(u, 1))]
  if len(u.src) == 3: stmts = [f"if ({s.src(u, 2)[0]}) {{ {' '.join(stmts)} }}"]
  for st in stmts: s.emit(st)

def _define_acc(s: _Render, i: int, u: UOp) -> None: s.define(i, u.dtype, list(s.src(u, 0)), prefix="acc")

def _assign(s: _Render, i: int, u: UOp) -> None:
  for name, v in zip(s.src(u, 0), s.src(u, 1)): s.emit(f"{name} = {v};")
  s.lanes[i] = s.lanes[u.src[0]]

def _range(s: _Render, i: int, u: UOp) -> None:
  var, end = f"r{i}", f"r{i}_end"  # the bounds are read once, at the RANGE (an accumulator bound may change inside)
  s.emit(f"for ({s.r.types[dtypes.int32]} {var} = {s.src(u, 0)[0]}, {end} = {s.src(u, 1)[0]}; {var} < {end}; {var}++) {{")
  s.lanes[i] = [var]
  s.depth += 1

def _if(s: _Render, i: int, u: UOp) -> None:
  s.emit(f"if ({s.src(u, 0)[0]}) {{")
  s.depth += 1

def _end(s: _Render, i: int, u: UOp) -> None:
  s.depth -= 1
  s.emit("}")

def _barrier(s: _Render, i: int, u: UOp) -> None:
  if s.r.barrier is None: raise CompileError(f"{s.r.device}: BARRIER is not supported")
  if s.r.barrier: s.emit(s.r.barrier)

def _cast(s: _Render, i: int, u: UOp) -> None:
  src, d = s.sdt(u, 0).scalar(), u.dtype.scalar()
  conv = s.r.bitcast if u.op is Ops.BITCAST else s.r.cast
  s.define(i, u.dtype, [conv(x, src, d) for x in s.src(u, 0)])

def _alu(s: _Render, i: int, u: UOp) -> None:
  d, sd = u.dtype.scalar(), s.sdt(u, len(u.src) - 1).scalar()
  srcs = [s.lanes[j] for j in u.src]
  s.define(i, u.dtype, [s.r.alu(u.op, d, [x[k] for x in srcs], sd) for k in range(u.dtype.count)])

HANDLERS: dict[Ops, Callable[[_Render, int, UOp], None]] = {
  **scalar.HANDLERS, **dict.fromkeys(GroupOp.ALU, _alu),
  Ops.SPECIAL: _special, Ops.INDEX: _index, Ops.LOAD: _load, Ops.STORE: _store, Ops.DEFINE_ACC: _define_acc,
  Ops.ASSIGN: _assign, Ops.RANGE: _range, Ops.ENDRANGE: _end, Ops.IF: _if, Ops.ENDIF: _end, Ops.BARRIER: _barrier,
  Ops.CAST: _cast, Ops.BITCAST: _cast}
