"""The C-family renderer: a verified Program -> C source (CLANG) or, with another language table, OpenCL C (GPU).

Every rule of the spec (docs/semantics.md, "Decisions") must hold in the generated code whatever the optimizer does, so
nothing is left to C's undefined or unspecified corners:

  values      one C variable per uop, in program order (CONST is an inline literal; VECTORIZE, GEP and INDEX are only
              names). Vectors are scalarized: lane k of uop i is the variable v{i}_{k}; loads and stores of n lanes
              touch elements idx..idx+n-1. (The C compiler's SLP/loop vectorizers re-vectorize what pays.)
  ints        ADD SUB MUL NEG MULACC SHL run on the unsigned wrap type (unsigned int for widths <= 32, 64-bit
              otherwise: a narrow unsigned operand would promote to *signed* int, where 65535*65535 overflows) and are
              converted back (two's complement in every C compiler we target); SHR shifts the value itself
              (arithmetic on signed, logical on unsigned); IDIV/MOD are C's / and %, which truncate. Division by 0
              and MIN/-1 give an undefined value in the spec (deferred kinds: a WHERE may discard it) but are C's UB
              (x86 traps): the divisor arrives guarded by refimpl.lower.guard_division (1 on those lanes).
  bool        ADD=OR, MUL=AND, MAX=OR, MULACC=(a&b)|c, CMPLT=!a&&b, CMPNE=a!=b (the spec's table).
  floats      float32 and float64 use C's float and double (IEEE, compiled with -ffp-contract=off, no fast-math);
              MAX propagates NaN as one select, (a > b || a != a) ? a : b (see FLOAT_RULES); MULACC is a*b+c
              unfused; RECIP is 1/x; SQRT is the correctly rounded builtin. TRUNC is the dialect's `trunc` function
              (OpenCL C's trunc, CUDA's truncf/trunc); C has none it may call: on an x86-64 without SSE4.1 truncf is a
              libm call, which a freestanding kernel cannot make, so refimpl.lower.trunc writes it with other ops first.
  narrow      float16, bfloat16, fp8e4m3 and fp8e5m2 are lowered first by refimpl.lower.narrow (lower_narrow): their
              values are their bits, and every op on them is float32/float64 and integer ops with one rounding, written
              once for every backend. What reaches the renderer is the storage table: a narrow dtype's buffer element
              and register are the unsigned int of its size (unsigned short / unsigned char; `reg_type`), its LOAD
              and STORE move those bits, and BITCAST between it and that int is a plain int conversion. No _Float16,
              no compiler-rt call, no dependence on F16C: the same bits on every host and in OpenCL.
  casts       to bool: x != 0; int->int, int->float32/64, float->int (truncation) and float->float32/64: C
              conversions, each a single correct rounding (casts to and from narrow formats are lowered before). A
              float->int CAST arrives guarded by refimpl.lower.guard_poison (its operand is in range on every lane),
              and so does a shift count (masked into [0, bits)): C never runs an undefined conversion or shift.
  BITCAST     through the prelude's rf_fbits/rf_bitsf/rf_dbits/rf_bitsd (memcpy in C, as_* in OpenCL): no aliasing UB.
  memory      gated LOAD: gate ? p[i] : alt (no access when false); gated STORE: if (gate) p[i] = v.
  kernel      `void k_name(...)`: the symbol is kernel_symbol(name), never a keyword, built-in or helper.
  structure   RANGE: for loops; IF: if blocks; DEFINE_ACC: a local variable that ASSIGN overwrites; DEFINE_LOCAL: an
              array (function scope in C). THREEFRY is rewritten into integer ops by refimpl.lower.threefry first.
  WMMA        rewritten by refimpl.lower.wmma (decompose_wmma, after lower_narrow) into GEPs, CASTs to double, double
              products and sums in the emulator's order and one CAST to the output dtype: the renderer has no WMMA code.

What lives where. Every uop handler -- its lanes, names, order of reads, block depth -- is refimpl.backends.scalar's,
shared with llvmir.py (HANDLERS below is scalar.HANDLERS plus scalar.GRID_HANDLERS). This module holds C's tables (the
per-op rules INT_RULES / BOOL_RULES / FLOAT_RULES, by operand kind in ALU_TABLES; types and literals on
`CStyleRenderer`) and its spellings: `_Render`'s hooks (a lane becomes a declared variable; an INDEX is (buffer, index
expression); a gated LOAD a select, a gated STORE a one-line if; an accumulator a variable; RANGE a for loop and IF an
if block, closed by a brace) and `CStyleRenderer`'s per-lane expressions (`alu`, `cast`, `bitcast`, `literal`), which
_Render delegates to so that a subclass -- OpenCL C, the fuzzer's planted bugs -- changes one op without a handler of
its own. What differs between C and OpenCL C is `CStyleRenderer`'s class attributes (kernel prefix, buffer qualifiers,
type names, literal suffixes, the SPECIAL / BARRIER spellings `special_spelling` / `barrier_statement`, the bit
primitives, native transcendentals) and OpenCL's own alu/cast rounding. The program arrives lowered
(refimpl.lower.lower_for).
"""
from __future__ import annotations

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
ALU_TABLES = {"bool": BOOL_RULES, "int": INT_RULES, "float": FLOAT_RULES}  # by operand kind (scalar.alu_rule)

def kernel_symbol(name: str) -> str:
  """The C / OpenCL C function name of the kernel `name`: k_ + name. The verifier accepts any identifier as a program
  name, and a bare one could be a keyword (`for`), an OpenCL built-in (`mad`, `dot`) or a prelude helper (`rf_u32`); no
  keyword, built-in or helper starts with k_. The runtimes look the kernel up by this symbol."""
  return f"k_{name}"


@dataclass(frozen=True)
class CStyleRenderer(Renderer):
  """Renders C (these defaults) or another C dialect (override the class attributes below). See the module docstring.
  THREEFRY, narrow floats, WMMA and EXP2/LOG2/SIN are lowered before rendering (OpenCL C renders the last natively)."""
  native_trunc: bool = False  # truncf may be a libm call (module docstring): refimpl.lower.trunc
  native_transcendentals: bool = False
  native_threefry: bool = False
  native_narrow: bool = False
  native_wmma: bool = False
  native_poison: bool = False  # C's out-of-range conversions and over-wide shifts are UB: refimpl.lower.guard_poison
  native_division: bool = False  # C's division by 0 and INT_MIN / -1 are UB (x86 traps): refimpl.lower.guard_division
  # ---- the language table: everything C and OpenCL C spell differently ----
  kernel_prefix: ClassVar[str] = "void "
  buffer_prefix: ClassVar[str] = ""                # e.g. "__global "
  buffer_suffix: ClassVar[str] = " restrict"       # after the '*': distinct buffers never alias
  local_prefix: ClassVar[str] = ""                 # DEFINE_LOCAL arrays, e.g. "__local "
  barrier_statement: ClassVar[str | None] = ""               # "" renders nothing (C runs one thread); None refuses
  special_spelling: ClassVar[dict[str, str] | None] = None  # {"gidx": "get_group_id({d})", ...} ({xyz}: x y z); None: no grid
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
  trunc: ClassVar[dict[DType, str]] = {}           # the native TRUNC function by dtype; C has none (decompose first)
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
    """The expression of one lane of an ALU op; dt is the result's scalar dtype, src_dt the last operand's. Native
    transcendentals from `transcendental`, TRUNC from `trunc`, the rest by ALU_TABLES (OpenCL and the fuzzer's planted
    bugs override this)."""
    s = src_dt
    if op is Ops.TRUNC:
      if s not in self.trunc:
        raise CompileError(f"{self.device}: TRUNC on {s.name} must be decomposed into other ops before rendering "
                           f"(refimpl.lower.trunc)")
      return f"{self.trunc[s]}({src[0]})"
    if op in GroupOp.Transcendental:
      if op not in self.transcendental:
        raise CompileError(f"{self.device}: {op.name} on {s.name} must be decomposed into other ops before rendering "
                           f"(refimpl.lower.transcendental)")
      return self.transcendental[op].format(*src)
    kind, rule = scalar.alu_rule(self.device, ALU_TABLES, op, s)
    return rule.format(*src, **self.rule_fields(kind, dt, s))

  def rule_fields(self, kind: str, dt: DType, src_dt: DType) -> dict[str, str]:
    """The named fields of a rule of `kind` (see INT_RULES): {T} {U} for ints, {one} {sqrt} for floats."""
    if kind == "int": return {"T": self.types[dt], "U": self.wrap_type(src_dt)}
    if kind == "float": return {"one": self.literal(1.0, src_dt), "sqrt": self.sqrt[src_dt]}
    return {}

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
    """C source of the kernel `name`: the prelude, then one function taking the buffers then the int vars. The program
    is lowered (refimpl.lower.lower_for): no THREEFRY, WMMA or narrow-float op reaches here."""
    return self.prelude() + _Render(self, program).function(name)


class _Render(ScalarRender):
  """The state of one rendering: refimpl.backends.scalar.ScalarRender's, with C's spellings (the renderer's language
  table gives the words: CStyleRenderer and its subclasses)."""
  def __init__(self, r: CStyleRenderer, program: Program):
    super().__init__(r, program)
    self.r: CStyleRenderer = r
    self.var_type = r.types[dtypes.int32]

  def function(self, name: str) -> str:
    """The kernel function: the uops rendered in order (HANDLERS), the declarations first."""
    self.render_uops(HANDLERS)
    body = "\n".join(["  " + d for d in self.decls] + self.lines)
    return f"{self.r.kernel_prefix}{kernel_symbol(name)}({', '.join(self.args()) or 'void'}) {{\n{body}\n}}\n"

  # ---- values: a lane is an expression; a uop's lanes are variables declared with it ----
  def emit(self, line: str) -> None: self.lines.append("  " * self.depth + line)
  def literal(self, v: bool | int | float, dt: DType) -> str: return self.r.literal(v, dt)
  def bind_lane(self, dt: DType, name: str, value: str) -> str:
    self.emit(f"{self.r.reg_type(dt)} {name} = {value};")
    return name
  def alu_lane(self, op: Ops, dt: DType, src_dt: DType, operands: list[str], result: str) -> str:
    return self.r.alu(op, dt, operands, src_dt)
  def cast(self, x: str, src: DType, dst: DType, result: str) -> str: return self.r.cast(x, src, dst)
  def bitcast(self, x: str, src: DType, dst: DType, result: str) -> str: return self.r.bitcast(x, src, dst)

  # ---- memory: an INDEX is (buffer, index expression); a gated LOAD is a select, a gated STORE an if ----
  def buffer_param(self, u: UOp, name: str) -> str:
    assert isinstance(u.dtype, PtrDType)
    return f"{self.r.buffer_prefix}{self.r.storage_type(u.dtype.base)}*{self.r.buffer_suffix} {name}"
  def local_decl(self, u: UOp, name: str) -> str:
    assert isinstance(u.dtype, PtrDType)
    return f"{self.r.local_prefix}{self.r.storage_type(u.dtype.base)} {name}[{u.dtype.size}];"
  def address(self, i: int, buf: str, idx: str, dt: DType) -> tuple[str, str]: return buf, idx
  @staticmethod
  def element(index: tuple[str, str], k: int) -> str:
    buf, idx = index
    return f"{buf}[{idx}]" if k == 0 else f"{buf}[{idx}+{k}]"
  def load_element(self, index: tuple[str, str], dt: DType, k: int, result: str) -> str:
    return self.r.load_conv(dt, self.element(index, k))
  def store_element(self, index: tuple[str, str], dt: DType, k: int, value: str) -> str:
    return f"{self.element(index, k)} = {self.r.store_conv(dt, value)};"
  def gated_load(self, label: str, gate: str, alts: list[str], dt: DType, names: list[str], load: Lane) -> list[str]:
    return [f"({gate}?{load(k, name)}:{alt})" for k, (name, alt) in enumerate(zip(names, alts))]
  def guarded(self, gate: str, label: str, stmts: Iterable[str]) -> None: self.emit(f"if ({gate}) {{ {' '.join(stmts)} }}")

  # ---- accumulators: variables ----
  def declare_acc(self, dt: DType, name: str, init: str) -> None: self.bind_lane(dt, name, init)
  def read_acc(self, dt: DType, name: str) -> str: return name
  def assign_acc(self, dt: DType, name: str, value: str) -> str: return f"{name} = {value};"

  # ---- blocks: for and if, closed by a brace ----
  def open_loop(self, i: int, counter: str, start: str, end: str) -> None:
    int_t = self.r.types[dtypes.int32]
    self.emit(f"for ({int_t} {counter} = {start}, {counter}_end = {end}; {counter} < {counter}_end; {counter}++) {{")
  def close_loop(self, i: int, counter: str) -> None: self.emit("}")
  def open_if(self, i: int, cond: str) -> None: self.emit(f"if ({cond}) {{")
  def close_if(self, i: int) -> None: self.emit("}")

  # ---- the grid ----
  def special(self, name: str, result: str) -> str:
    if self.r.special_spelling is None:
      raise CompileError(f"{self.r.device}: SPECIAL {name}: no grid here (lower_grid_to_loops first)")
    d = name[-1]  # the dimension, as a digit ({d}) or as CUDA's x/y/z ({xyz})
    return self.r.special_spelling[name[:-1]].format(d=d, xyz="xyz"[int(d)])
  def barrier(self) -> None:
    if self.r.barrier_statement is None: raise CompileError(f"{self.r.device}: BARRIER is not supported")
    if self.r.barrier_statement: self.emit(self.r.barrier_statement)


HANDLERS: dict[Ops, Callable[..., None]] = {**scalar.HANDLERS, **scalar.GRID_HANDLERS}
"""Every handler is the shared core's (refimpl.backends.scalar); C has a grid (OpenCL's; CLANG refuses SPECIAL)."""
