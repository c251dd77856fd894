"""WGSL: the scalar renderer core (scalar.py) with WGSL's spellings, for the WEBGPU device (ops_webgpu.py).

WGSL defines less than the spec, and a WebGPU shader compiler may assume that no float is NaN or infinity (WGSL allows
it: lavapipe folds `x - x` to 0 for x = inf, `x * 0` to 0 and `x != x` to false). Every rule below is how a spec rule
is made to hold in WGSL by rendering, never by relaxing a comparison:

  storage     every buffer is an array of unsigned words (`array<u32>`, `array<u64>` for 64-bit dtypes; signed ints and
              floats are bitcast on LOAD/STORE, so a NaN's payload is moved as bits). bool, 8- and 16-bit ints are
              packed into 32-bit words (`array<atomic<u32>>`, element i of a 1-byte dtype in byte i%4 of word i/4): a
              LOAD is atomicLoad plus a shift and mask, a STORE is atomicAnd (clear the element's bits) then atomicOr
              (set them), so a store never races with a neighbour's in the same word. DEFINE_LOCAL arrays are packed
              the same way (`var<workgroup>`).
  registers   bool is `bool`; int8/int16/int32 are `i32`, uint8/uint16/uint32 `u32`, kept normalized (sign- or
              zero-extended from their width): ADD SUB MUL NEG MULACC SHL IDIV re-normalize their result
              (`(x << 24u) >> 24u` on i32 for int8, `x & 0xffu` for uint8), the other int ops keep it.
  constants   no WGSL const-expression is ever formed (WGSL makes an overflowing, dividing-by-zero, over-shifting or
              NaN-producing const-expression a shader-creation error): an int constant is a function-scope `var`
              (rf_c...), so `2147483647 + 1` wraps at run time as the spec says; a float constant is its bits XORed with
              a zero the compiler cannot see (`rf_z0`, read from the parameter buffer), so it cannot be folded either.
  ints        ADD SUB MUL MULACC wrap (WGSL's run-time i32/u32 arithmetic is two's complement); NEG is 0 - x; SHL/SHR
              shift by u32(count) (SHR is arithmetic on i32, logical on u32; WGSL takes the count modulo 32, and a count
              outside [0, bits) is undefined in the spec); IDIV is WGSL's /, which truncates, and MOD a - a / b * b (WGSL's
              % on i32 came out as an unsigned remainder on lavapipe: -7 % 2 = 1); WGSL defines the divisions the spec
              leaves undefined (e1 / 0 and MIN / -1 are e1), so no guard (native_division); MAX is max().
  bool        ADD=OR, MUL=AND, MAX=OR, MULACC=(a&b)|c, CMPLT=!a&b, CMPNE=XOR=a!=b (the spec's table); WHERE is select.
  floats      the compiler's no-NaN/no-infinity/no-signed-zero algebra is kept out by opacity: every operand of ADD SUB
              MUL FDIV MULACC RECIP SQRT TRUNC passes through an XOR of its bits with a zero the compiler cannot see (rf_a for
              the first, rf_b for the others) and every result through rf_r, each with its own hidden zero (rf_z1,
              rf_z2, rf_z3; float constants rf_z0), so no two XORs cancel, no operand is a known constant and no
              identity (x-x, x*0, 0*x, x+0 with x=-0, 1/0, a*b+c fused) can be applied. NaN and
              infinity are tested on the bits (rf_isnan): CMPLT = a<b and neither is NaN, CMPNE = !(a==b) or either is
              NaN, MAX = select(b, a, a > b || isnan(a)) (NaN-propagating, as cstyle's), WHERE selects the bits.
              RECIP is 1/x, SQRT sqrt(); TRUNC is rf_trunc: trunc() on f32 (round toward zero, the sign kept; swept
              over every f32 on lavapipe), on f64 computed on the bits (|x| < 1 gives x's signed zero, an exponent of
              at least 52 gives x, NaN and infinity included, else the fraction bits are cleared), since lavapipe's
              f64 trunc() lost the sign of -0.5 and left 2^52 - 0.5 as it was. EXP2/LOG2/SIN are
              decomposed by refimpl.lower.transcendental (WGSL's built-ins are outside the spec's ulp bounds).
  casts       to bool: x != 0 (a float by its bits: (bits & 0x7fffffff) != 0); from bool: select(0, 1, b); int->int: the
              32-bit pattern re-normalized to the destination's width; to a float: f32()/f64() through rf_r (else
              f32(f64(i)) folds to f32(i), one rounding where the program asks for two); float->int: i32()/u32()
              (truncation; WGSL saturates out-of-range values, which the spec leaves undefined) XORed with a hidden
              zero (else f32(i32(x)) folds to trunc(x), which keeps the sign of -0.5 -> -0), then normalized.
  BITCAST     bitcast<T> between the 32-bit and between the 64-bit types; int8<->uint8, int16<->uint16 re-normalize the
              bits.
  memory      gated LOAD: a var holding the alternative, overwritten inside `if (gate)` (no access when false); gated
              STORE: `if (gate) { ... }`.
  grid        SPECIAL gidx{d} = workgroup_id, lidx{d} = local_invocation_id (tinygrad's convention: global_size[d]
              workgroups of local_size[d] invocations); @workgroup_size is the program's local_size.
  BARRIER     `workgroupBarrier(); storageBarrier();`: orders the workgroup's local and storage-buffer accesses.
  arena       a program with more buffers than the adapter binds (max_buffers, the parameter buffer included) gets arenas
              instead: every 32-bit buffer lives in `rf_arena_w`, every packed one in `rf_arena_p`, every 64-bit one in
              `rf_arena_d` (ARENAS), each from a base that the parameter buffer gives (after the offsets); a tag line
              (ARENA_TAG) says which buffer lives where, and the runtime copies the buffers in and out around the dispatch.
  vars        DEFINE_VAR values, the four hidden zeros and the dispatch's workgroup offset come in one read-only storage
              buffer bound after the buffers (binding n: var k is word k, then rf_z0..rf_z3, then the offset x, y, z
              added to workgroup_id: a grid wider than the adapter's dispatch limit runs as several dispatches).
  dtypes      bool, int8, uint8, int16, uint16, int32, uint32, float32 (tinygrad's WEBGPU rule); int64/uint64 as WGSL's
              i64/u64 where the adapter offers shader-int64 (wgpu-native; lavapipe does): 64-bit buffers are
              array<u64>, literals li/lu, widening by u64() of an unsigned value and by spelled-out sign bits of a
              signed one (on lavapipe a signed compare of i64(x) came out wrong for negative x), narrowing through the
              low 32 bits; float64 as f64 where it also offers shader-f64 (the float rules above with the rf_*64
              helpers, literals as u64 bits), and with it float16, bfloat16 and the fp8s, which refimpl.lower.narrow
              rewrites into their bits (u16/u8, packed) and float32/float64 ops. Without shader-f64, no float64, no
              narrow floats and no WMMA (decomposed in float64: refused as a capability); without shader-int64 no SIN on
              float32 (its decomposition reduces large arguments in uint64: refused, a declared known failure).
"""
from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from refimpl.backends import scalar
from refimpl.backends.scalar import Lane, ScalarRender
from refimpl.dtype import DType, PtrDType, dtypes
from refimpl.errors import CompileError
from refimpl.ir import Ops, Program, ProgramError, UOp
from refimpl.lower.narrow import BITS
from refimpl.renderer import Renderer

SUPPORTED = frozenset({dtypes.bool, dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32,
                       dtypes.float32})
UNSUPPORTED_REASONS: dict[DType, str] = {
  **dict.fromkeys((dtypes.int64, dtypes.uint64), "core WGSL has no 64-bit ints and the adapter lacks shader-int64"),
  dtypes.float64: "core WGSL has no float64 and the adapter lacks shader-f64 (or shader-int64)",
  **dict.fromkeys((dtypes.float16, dtypes.bfloat16, dtypes.fp8e4m3, dtypes.fp8e5m2),
                  "narrow floats are lowered through float64 and int64 (refimpl.lower.narrow), which the adapter lacks"),
}
HIDDEN_ZEROS = 4  # rf_z0..rf_z3: words after the DEFINE_VAR values in the parameter buffer, always 0
# then the launch's workgroup offset (x, y, z): a grid wider than the adapter's dispatch limit runs as several dispatches

REG: dict[DType, str] = {dtypes.bool: "bool", **dict.fromkeys((dtypes.int8, dtypes.int16, dtypes.int32), "i32"),
                         **dict.fromkeys((dtypes.uint8, dtypes.uint16, dtypes.uint32), "u32"), dtypes.float32: "f32",
                         dtypes.int64: "i64", dtypes.uint64: "u64",  # the 64-bit ints with the adapter's shader-int64
                         dtypes.float64: "f64"}                      # with shader-f64
FLOATS = frozenset({dtypes.float32, dtypes.float64})
INT64 = frozenset({dtypes.int64, dtypes.uint64})
# with shader-f64 (and shader-int64): float64, and the narrow floats, which refimpl.lower.narrow computes through it
WITH_F64 = frozenset({dtypes.float64, dtypes.float16, dtypes.bfloat16, dtypes.fp8e4m3, dtypes.fp8e5m2})
WORD = {4: "u32", 8: "u64"}  # the storage word of a 4- or 8-byte element (narrower ones are packed into u32)
SUFFIX = {"i32": "i", "u32": "u", "i64": "li", "u64": "lu"}  # WGSL's int literal suffixes

def int_literal(v: int, reg: str) -> str:
  """A WGSL literal of int register type `reg` (the most negative value as a subtraction: its magnitude has no literal)."""
  bits = 64 if reg.endswith("64") else 32
  if reg.startswith("i") and v == -2 ** (bits - 1): return f"({v + 1}{SUFFIX[reg]} - 1{SUFFIX[reg]})"
  return f"{v}{SUFFIX[reg]}"

def unsigned_reg(dt: DType) -> str:
  """The unsigned register type of dt's width (u32 up to 4 bytes, u64 for 8)."""
  return "u64" if dt.itemsize == 8 else "u32"
AXES = "xyz"
SIN_REFUSED = ("SIN on float32 cannot be made to hold without the adapter's shader-int64: refimpl's decomposition "
               "(refimpl.lower.transcendental) reduces large arguments in uint64, and WGSL's sin() promises an absolute "
               "error, outside the spec's 4 ulp")
KNOWN_FAILURES = {  # the suite's tests that fail on WEBGPU without int64, by pattern (the pytest plugin applies them)
  "WEBGPU-SIN-f32": SIN_REFUSED,
  "test_exp2_log2_sin_are_within_the_spec_bounds?WEBGPU-float32?": SIN_REFUSED}
ARENA_TAG = "// rf_arena: "  # arena mode's tag line: each buffer's arena kind, in DEFINE_GLOBAL order
# arena kind -> (its array, its element type, the bytes of one element): 32-bit words, packed words, 64-bit words. The
# arenas a program uses are bound in this order, from binding 0; a buffer's base counts the arena's elements.
ARENAS: dict[str, tuple[str, str, int]] = {"w": ("rf_arena_w", "array<u32>", 4), "p": ("rf_arena_p", "array<atomic<u32>>", 4),
                                           "d": ("rf_arena_d", "array<u64>", 8)}

def arena_kind(dt: DType) -> str:
  """The arena a buffer of dt lives in (arena mode)."""
  return "p" if packed(dt) else "d" if dt.itemsize == 8 else "w"

def packed(dt: DType) -> bool:
  """Whether elements of dt share a 32-bit storage word (bool, 8- and 16-bit ints)."""
  return dt.itemsize < 4

def words(dt: DType, n: int) -> int:
  """The 32-bit words n elements of dt take."""
  return (n * dt.itemsize + 3) // 4

def norm(x: str, dt: DType) -> str:
  """Register x (i32 or u32 arithmetic result) normalized to dt's width: sign-extended or zero-extended."""
  if dt.itemsize >= 4 or dt == dtypes.bool: return x
  bits = dt.itemsize * 8
  if dtypes.is_unsigned(dt): return f"({x} & {hex((1 << bits) - 1)}u)"
  return f"(({x} << {32 - bits}u) >> {32 - bits}u)"

def from_bits(bits: str, dt: DType) -> str:
  """A register of int dt from the unsigned `bits` (u32, or u64 for a 64-bit dt) whose low dt.itemsize bytes hold it."""
  if dtypes.is_unsigned(dt): return norm(bits, dt)
  return norm(f"bitcast<{REG[dt]}>({bits})", dt)

def to_bits(x: str, dt: DType) -> str:
  """The unsigned pattern (u32, or u64 for 8 bytes) of register x of scalar dt (bool: 0/1)."""
  if dt == dtypes.bool: return f"select(0u, 1u, {x})"
  return x if REG[dt] in ("u32", "u64") else f"bitcast<{unsigned_reg(dt)}>({x})"

def int_to_int(x: str, src: DType, dst: DType) -> str:
  """CAST between ints: the value's two's complement pattern, sign- or zero-extended from src, cut to dst's width."""
  if src.itemsize < 8 and dst.itemsize == 8:  # widen: u64() of an unsigned value; a signed one's sign bits spelled out
    if dtypes.is_unsigned(src): wide = f"u64({x})"
    else: wide = f"(u64(bitcast<u32>({x})) | select(0lu, 0xffffffff00000000lu, {x} < 0i))"  # i64(x) compared wrongly
    return wide if REG[dst] == "u64" else f"bitcast<{REG[dst]}>({wide})"
  if src.itemsize == 8 and dst.itemsize < 8: return from_bits(f"u32({to_bits(x, src)} & 0xfffffffflu)", dst)
  return from_bits(to_bits(x, src), dst)

# the per-op rules, by operand kind. {0} {1} {2}: operands; {Z}: zero of the operands' register type; a rule written
# N(...) has its result normalized to the dtype's width (`norm`).
INT_RULES: dict[Ops, str] = {
  Ops.ADD: "N({0} + {1})", Ops.SUB: "N({0} - {1})", Ops.MUL: "N({0} * {1})", Ops.NEG: "N({Z} - {0})",
  Ops.MULACC: "N({0} * {1} + {2})", Ops.SHL: "N({0} << u32({1}))", Ops.SHR: "({0} >> u32({1}))",
  Ops.IDIV: "N({0} / {1})", Ops.MOD: "({0} - {0} / {1} * {1})", Ops.MAX: "max({0}, {1})", Ops.CMPLT: "({0} < {1})",
  Ops.CMPNE: "({0} != {1})", Ops.XOR: "({0} ^ {1})", Ops.OR: "({0} | {1})", Ops.AND: "({0} & {1})",
  Ops.WHERE: "select({2}, {1}, {0})"}
BOOL_RULES: dict[Ops, str] = {
  Ops.ADD: "({0} | {1})", Ops.MUL: "({0} & {1})", Ops.MAX: "({0} | {1})", Ops.MULACC: "(({0} & {1}) | {2})",
  Ops.CMPLT: "(!{0} & {1})", Ops.CMPNE: "({0} != {1})", Ops.XOR: "({0} != {1})", Ops.OR: "({0} | {1})",
  Ops.AND: "({0} & {1})", Ops.WHERE: "select({2}, {1}, {0})"}
# {s}: the helpers' suffix ("" for f32, "64" for f64); {F} the float type, {U} the unsigned int of its size
FLOAT_RULES: dict[Ops, str] = {
  Ops.ADD: "rf_r{s}(rf_a{s}({0}) + rf_b{s}({1}))", Ops.SUB: "rf_r{s}(rf_a{s}({0}) - rf_b{s}({1}))",
  Ops.MUL: "rf_r{s}(rf_a{s}({0}) * rf_b{s}({1}))", Ops.FDIV: "rf_r{s}(rf_a{s}({0}) / rf_b{s}({1}))", Ops.NEG: "(-{0})",
  Ops.RECIP: "rf_r{s}({one} / rf_b{s}({0}))", Ops.SQRT: "rf_r{s}(sqrt(rf_a{s}({0})))",
  Ops.TRUNC: "rf_r{s}(rf_trunc{s}(rf_a{s}({0})))",
  Ops.MULACC: "rf_r{s}(rf_r{s}(rf_a{s}({0}) * rf_b{s}({1})) + rf_b{s}({2}))",
  Ops.MAX: "select({1}, {0}, ({0} > {1}) || rf_isnan{s}({0}))",
  Ops.CMPLT: "(({0} < {1}) && !(rf_isnan{s}({0}) || rf_isnan{s}({1})))",
  Ops.CMPNE: "(!({0} == {1}) || rf_isnan{s}({0}) || rf_isnan{s}({1}))",
  Ops.WHERE: "bitcast<{F}>(select(bitcast<{U}>({2}), bitcast<{U}>({1}), {0}))"}
ALU_TABLES = {"bool": BOOL_RULES, "int": INT_RULES, "float": FLOAT_RULES}  # by operand kind (scalar.alu_rule)

PRELUDE = """var<private> rf_z0: u32;
var<private> rf_z1: u32;
var<private> rf_z2: u32;
var<private> rf_z3: u32;
fn rf_isnan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn rf_a(x: f32) -> f32 { return bitcast<f32>(bitcast<u32>(x) ^ rf_z1); }
fn rf_b(x: f32) -> f32 { return bitcast<f32>(bitcast<u32>(x) ^ rf_z2); }
fn rf_r(x: f32) -> f32 { return bitcast<f32>(bitcast<u32>(x) ^ rf_z3); }
fn rf_trunc(x: f32) -> f32 { return trunc(x); }
"""
PRELUDE_F64 = """fn rf_isnan64(x: f64) -> bool { return (bitcast<u64>(x) & 0x7ffffffffffffffflu) > 0x7ff0000000000000lu; }
fn rf_a64(x: f64) -> f64 { return bitcast<f64>(bitcast<u64>(x) ^ u64(rf_z1)); }
fn rf_b64(x: f64) -> f64 { return bitcast<f64>(bitcast<u64>(x) ^ u64(rf_z2)); }
fn rf_r64(x: f64) -> f64 { return bitcast<f64>(bitcast<u64>(x) ^ u64(rf_z3)); }
fn rf_trunc64(x: f64) -> f64 {
  let b = bitcast<u64>(x);
  let e = u32((b >> 52u) & 0x7fflu);                                 // biased exponent: |x| >= 2^(e - 1023)
  if (e < 1023u) { return bitcast<f64>(b & 0x8000000000000000lu); }   // |x| < 1: x's signed zero
  if (e >= 1075u) { return x; }                                       // |x| >= 2^52, inf, NaN: x itself
  return bitcast<f64>(b & ~((1lu << (1075u - e)) - 1lu));             // clear the 1075 - e fraction bits
}
"""

def kernel_symbol(name: str) -> str:
  """The entry point of kernel `name`: k_ + name (no WGSL keyword or built-in starts with k_)."""
  return f"k_{name}"


@dataclass(frozen=True)
class WGSLRenderer(Renderer):
  """WGSL for one WebGPU adapter (see the module docstring). Beyond Renderer's fields (set from the adapter's limits by
  ops_webgpu.WebGPUDevice):
    max_invocations       maxComputeInvocationsPerWorkgroup: the product of local_size must not exceed it
    workgroup_bytes       maxComputeWorkgroupStorageSize: the DEFINE_LOCALs (in 32-bit words) must fit in it
    has_int64             the adapter's shader-int64 (wgpu-native's WGSL i64/u64): int64 and uint64 are supported, and
                          SIN on float32 (its decomposition reduces large arguments in uint64) renders
    max_buffers           maxStorageBuffersPerShaderStage: more DEFINE_GLOBALs (plus the parameter buffer) than this are
                          rendered in arena mode (module docstring)"""
  native_transcendentals: bool = False
  native_threefry: bool = False
  native_narrow: bool = False
  native_wmma: bool = False
  native_poison: bool = True  # WGSL defines both: float->int saturates, a runtime shift count is taken modulo the width
  native_division: bool = True  # WGSL defines e1 / 0 and MIN / -1 (both e1): no trap, some value
  max_invocations: int | None = None
  workgroup_bytes: int | None = None
  max_buffers: int | None = None
  has_int64: bool = False
  has_f64: bool = False

  def check_program(self, program: Program) -> None:
    """ProgramError (rule "capability") for a workgroup or local memory beyond the adapter's limits;
    and for SIN without int64 (SIN_REFUSED) and WMMA (its decomposition accumulates in float64)."""
    threads = program.local_size[0] * program.local_size[1] * program.local_size[2]
    if self.max_invocations is not None and threads > self.max_invocations:
      raise ProgramError("capability", f"{self.device}: local_size {program.local_size} has {threads} invocations, the "
                         f"adapter's maximum per workgroup is {self.max_invocations}")
    used = sum(4 * words(p.base, p.size) for p in program.locals.values() if isinstance(p, PtrDType))
    if self.workgroup_bytes is not None and used > self.workgroup_bytes:
      raise ProgramError("capability", f"{self.device}: the DEFINE_LOCALs take {used} bytes, the adapter has "
                         f"{self.workgroup_bytes} bytes of workgroup memory")
    for i, u in enumerate(program.uops):
      if u.op is Ops.SIN and not self.has_int64: raise ProgramError("capability", f"{self.device}: {SIN_REFUSED}", i, u.op)
      if u.op is Ops.WMMA and not self.has_f64:
        raise ProgramError("capability", f"{self.device}: WMMA accumulates in float64 (refimpl.lower.wmma), which WGSL lacks",
                           i, u.op)

  def render(self, name: str, program: Program) -> str:
    """WGSL source of entry point kernel_symbol(name); the program is lowered (refimpl.lower.lower_for)."""
    return _Render(self, program).module(name)


class _Render(ScalarRender):
  """The state of one rendering: ScalarRender's, with WGSL's spellings."""
  var_type = "i32"
  unsupported_hint = " in WGSL"

  def __init__(self, r: WGSLRenderer, program: Program):
    super().__init__(r, program)
    self.program = program
    self.consts: dict[tuple[DType, int], str] = {}  # (dtype, value) -> the function-scope var holding an int constant
    self.packed: dict[str, DType] = {}              # buffer or local name -> its packed element dtype
    self.globals: list[str] = []                    # module-scope declarations (workgroup arrays)
    self.buffer_dtypes: dict[int, DType] = {}       # DEFINE_GLOBAL number -> its element dtype
    nbufs = sum(1 for u in program.uops if u.op is Ops.DEFINE_GLOBAL)
    self.arena = r.max_buffers is not None and nbufs + 1 > r.max_buffers  # more buffers than bindings: two arenas
    self.packed["rf_arena_p"] = dtypes.uint8  # (only its membership matters: the arena of packed buffers uses atomics)

  def module(self, name: str) -> str:
    self.render_uops(HANDLERS)
    nvars = len(self.vars)
    if self.arena:
      kinds = "".join(arena_kind(self.buffer_dtypes[k]) for k in sorted(self.buffer_dtypes))
      used = [kind for kind in ARENAS if kind in kinds]
      head = [f"{ARENA_TAG}{kinds}", f"const rf_nvars: u32 = {nvars}u;"]
      head += [f"@group(0) @binding({j}) var<storage, read_write> {ARENAS[kind][0]}: {ARENAS[kind][1]};"
               for j, kind in enumerate(used)]
      head += [f"@group(0) @binding({len(used)}) var<storage, read> rf_params: array<u32>;"] + self.globals
    else:
      nbuf = max(self.params, default=-1) + 1
      params = f"@group(0) @binding({nbuf}) var<storage, read> rf_params: array<u32>;"
      head = [f"@group(0) @binding({k}) {decl}" for k, decl in sorted(self.params.items())] + [params] + self.globals
    start = [f"rf_z{k} = rf_params[{nvars + k}];" for k in range(HIDDEN_ZEROS)]
    start += [f"let {v.split()[1]} = bitcast<i32>(rf_params[{k}]);" for k, v in enumerate(self.vars)]
    body = "\n".join("  " + line for line in start + self.decls) + "\n" + "\n".join(self.lines)
    lx, ly, lz = self.program.local_size
    sig = "@builtin(workgroup_id) rf_gid: vec3<u32>, @builtin(local_invocation_id) rf_lid: vec3<u32>"
    prelude = PRELUDE + (PRELUDE_F64 if self.r.has_f64 else "")
    return (prelude + "\n".join(head) + f"\n@compute @workgroup_size({lx}, {ly}, {lz})\nfn {kernel_symbol(name)}({sig}) {{\n"
            + body + "\n}\n")

  # ---- values: a lane is an expression bound by `let`; int constants live in vars ----
  def emit(self, line: str) -> None: self.lines.append("  " * self.depth + line)
  def literal(self, v: bool | int | float, dt: DType) -> str:
    dt = BITS.get(dt, dt)
    if dt == dtypes.bool: return "true" if v else "false"
    if dt == dtypes.float32:
      return f"bitcast<f32>({struct.unpack('<I', struct.pack('<f', float(v)))[0]:#010x}u ^ rf_z0)"
    if dt == dtypes.float64:
      return f"bitcast<f64>({struct.unpack('<Q', struct.pack('<d', float(v)))[0]:#018x}lu ^ u64(rf_z0))"
    if dt not in REG: raise CompileError(f"{self.r.device}: no WGSL register type for {dt.name}")
    key = (dt, int(v))
    if key not in self.consts:
      name = f"rf_c{len(self.consts)}"
      text = int_literal(int(v), REG[dt])
      self.decls.append(f"var {name}: {REG[dt]} = {text};")
      self.consts[key] = name
    return self.consts[key]
  def bind_lane(self, dt: DType, name: str, value: str) -> str:
    self.emit(f"let {name}: {self.reg(dt)} = {value};")
    return name
  def reg(self, dt: DType) -> str:
    dt = BITS.get(dt, dt)
    if dt not in REG:
      raise CompileError(f"{self.r.device}: {dt.name} is not supported in WGSL ({UNSUPPORTED_REASONS.get(dt, 'no type')})")
    return REG[dt]

  def alu_lane(self, op: Ops, dt: DType, src_dt: DType, operands: list[str], result: str) -> str:
    if op in (Ops.EXP2, Ops.LOG2, Ops.SIN):
      raise CompileError(f"{self.r.device}: {op.name} on {src_dt.name} must be decomposed before rendering "
                         f"(refimpl.lower.transcendental)")
    kind, rule = scalar.alu_rule(self.r.device, ALU_TABLES, op, src_dt)
    fields: dict[str, str] = {}
    if kind == "int": fields = {"Z": f"0{SUFFIX[REG[src_dt]]}"}
    if kind == "float":
      fields = {"one": self.literal(1.0, src_dt), "s": "64" if src_dt == dtypes.float64 else "", "F": REG[src_dt],
                "U": unsigned_reg(src_dt)}
    expr = rule.format(*operands, **fields)
    return norm(expr[1:], dt) if expr.startswith("N(") else expr

  def cast(self, x: str, src: DType, dst: DType, result: str) -> str:
    src, dst = BITS.get(src, src), BITS.get(dst, dst)  # a lowered narrow float is its bits (refimpl.lower.narrow)
    if src == dst: return x
    self.reg(dst)
    if dst == dtypes.bool:
      if src == dtypes.float32: return f"((bitcast<u32>({x}) & 0x7fffffffu) != 0u)"
      if src == dtypes.float64: return f"((bitcast<u64>({x}) & 0x7ffffffffffffffflu) != 0lu)"
      return f"({x} != 0{SUFFIX[REG[src]]})"
    if src == dtypes.bool:
      sfx = {"f32": ".0f", "f64": ".0lf"}.get(REG[dst], SUFFIX.get(REG[dst], ""))
      one, zero = f"1{sfx}", f"0{sfx}"
      return f"select({zero}, {one}, {x})"
    if dst in FLOATS:  # opaque: f32(f64(i)) would fold to f32(i), one rounding where the program has two (lavapipe)
      return f"rf_r{'64' if dst == dtypes.float64 else ''}({REG[dst]}({x}))"
    if src in FLOATS:  # opaque: f32(i32(x)) would fold to trunc(x), which keeps -0 (lavapipe)
      zero = "rf_z0" if REG[dst] == "u32" else f"{REG[dst]}(rf_z0)"
      return norm(f"({REG[dst]}({x}) ^ {zero})", dst)
    return int_to_int(x, src, dst)

  def bitcast(self, x: str, src: DType, dst: DType, result: str) -> str:
    src, dst = BITS.get(src, src), BITS.get(dst, dst)
    if dst in FLOATS: return f"bitcast<{REG[dst]}>({to_bits(x, src)})"
    return from_bits(to_bits(x, src), dst)

  # ---- memory: 32-bit words; packed dtypes through atomics on their word ----
  def storage(self, dt: DType) -> str: return "array<atomic<u32>>" if packed(dt) else f"array<{WORD[dt.itemsize]}>"
  def buffer_param(self, u: UOp, name: str) -> str:
    assert isinstance(u.dtype, PtrDType)
    if packed(u.dtype.base): self.packed[name] = u.dtype.base
    self.buffer_dtypes[u.arg] = u.dtype.base
    return f"var<storage, read_write> {name}: {self.storage(u.dtype.base)};"
  def local_decl(self, u: UOp, name: str) -> str:
    assert isinstance(u.dtype, PtrDType)
    dt = u.dtype.base
    n = words(dt, u.dtype.size) if packed(dt) else u.dtype.size
    if packed(dt): self.packed[name] = dt
    self.globals.append(f"var<workgroup> {name}: array<{'atomic<u32>' if packed(dt) else WORD[dt.itemsize]}, {n}>;")
    return f"// {name}: {u.dtype.size} x {dt.name} in {n} words (workgroup)"
  def address(self, i: int, buf: str, idx: str, dt: DType) -> tuple[str, str]:
    """(the array, the element index): in arena mode a buffer's elements start at its word base (a parameter word)."""
    if not self.arena or not buf.startswith("data"): return buf, idx
    k = int(buf[4:])
    base = f"bitcast<i32>(rf_params[rf_nvars + {HIDDEN_ZEROS + 3 + k}u])"
    dt = self.buffer_dtypes[k]
    if packed(dt): return "rf_arena_p", f"({base} * {4 // dt.itemsize}i + {idx})"
    return ARENAS[arena_kind(dt)][0], f"({base} + {idx})"

  @staticmethod
  def element(index: tuple[str, str], k: int) -> str:
    idx = index[1]
    return idx if k == 0 else f"({idx} + {k}i)"

  def word(self, index: tuple[str, str], dt: DType, k: int) -> tuple[str, str]:
    """(the pointer to the word holding element k, the element's bit offset in it) of a packed buffer."""
    buf, e = index[0], f"u32({self.element(index, k)})"
    per = 4 // dt.itemsize
    return f"&{buf}[{e} / {per}u]", f"(({e} % {per}u) * {dt.itemsize * 8}u)"

  def load_element(self, index: tuple[str, str], dt: DType, k: int, result: str) -> str:
    buf, dt = index[0], BITS.get(dt, dt)
    if buf in self.packed:
      ptr, shift = self.word(index, dt, k)
      bits = f"(atomicLoad({ptr}) >> {shift})"
      if dt == dtypes.bool: return f"(({bits} & 0xffu) != 0u)"
      return from_bits(bits, dt)
    w = f"{buf}[{self.element(index, k)}]"
    return w if REG[dt] in ("u32", "u64") else f"bitcast<{REG[dt]}>({w})"

  def store_element(self, index: tuple[str, str], dt: DType, k: int, value: str) -> str:
    buf, dt = index[0], BITS.get(dt, dt)
    if buf in self.packed:
      ptr, shift = self.word(index, dt, k)
      mask = hex((1 << (8 * dt.itemsize)) - 1)
      return (f"atomicAnd({ptr}, ~({mask}u << {shift})); "
              f"atomicOr({ptr}, ({to_bits(value, dt)} & {mask}u) << {shift});")
    return f"{buf}[{self.element(index, k)}] = {to_bits(value, dt)};"

  def gated_load(self, label: str, gate: str, alts: list[str], dt: DType, names: list[str], load: Lane) -> list[str]:
    out = []
    for name, alt in zip(names, alts):
      self.emit(f"var {name}_g: {self.reg(dt)} = {alt};")
      out.append(f"{name}_g")
    self.emit(f"if ({gate}) {{ {' '.join(f'{g} = {load(k, n)};' for k, (g, n) in enumerate(zip(out, names)))} }}")
    return out
  def guarded(self, gate: str, label: str, stmts: Iterable[str]) -> None: self.emit(f"if ({gate}) {{ {' '.join(stmts)} }}")

  # ---- accumulators: vars ----
  def declare_acc(self, dt: DType, name: str, init: str) -> None: self.emit(f"var {name}: {self.reg(dt)} = {init};")
  def read_acc(self, dt: DType, name: str) -> str: return name
  def assign_acc(self, dt: DType, name: str, value: str) -> str: return f"{name} = {value};"

  # ---- blocks ----
  def open_loop(self, i: int, counter: str, start: str, end: str) -> None:
    self.emit(f"let {counter}_end: i32 = {end};")
    self.emit(f"for (var {counter}: i32 = {start}; {counter} < {counter}_end; {counter}++) {{")
  def close_loop(self, i: int, counter: str) -> None: self.emit("}")
  def open_if(self, i: int, cond: str) -> None: self.emit(f"if ({cond}) {{")
  def close_if(self, i: int) -> None: self.emit("}")

  # ---- the grid ----
  def special(self, name: str, result: str) -> str:
    d = int(name[-1])
    if name[0] == "l": return f"bitcast<i32>(rf_lid.{AXES[d]})"
    return f"bitcast<i32>(rf_gid.{AXES[d]} + rf_params[{len(self.vars) + HIDDEN_ZEROS + d}])"
  def barrier(self) -> None: self.emit("workgroupBarrier(); storageBarrier();")


HANDLERS: dict[Ops, Callable[..., None]] = {**scalar.HANDLERS, **scalar.GRID_HANDLERS}
"""Every handler is the shared core's (refimpl.backends.scalar)."""
