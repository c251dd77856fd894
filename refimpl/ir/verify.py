"""The program verifier: every static rule of the kernel IR, one check function per rule, applied in table order.

`verify(program)` raises `ProgramError` at the first broken rule. The message reads
  "uop 7 ADD: [alu-dtypes] src dtypes (float32, int32) must all equal the result dtype float32"
or, for whole-program rules, "program: [launch-dims] ...". `ProgramError` carries `.rule`, `.index`, `.op`, `.detail`.

Rules (name: what it demands), in the order they are checked:
  program-name      the name is a C identifier
  launch-dims       global_size and local_size are 3-tuples of ints >= 1; global*local per dimension fits int32
  uop-type          each uop is a UOp whose op is an Ops, dtype a DType, src a tuple of ints
  src-order         every src is an earlier uop (no use before definition)
  arity             the number of srcs the op takes (table ARITY)
  arg               the arg has the op's shape (table ARGS), e.g. SPECIAL (name, size), GEP a tuple of lanes
  result-dtype      void for STORE/IF/ENDIF/ENDRANGE/BARRIER; a pointer for DEFINE_GLOBAL/DEFINE_LOCAL/INDEX;
                    otherwise a value dtype (a known scalar or a vector of one; not void, not a pointer)
  src-kind          pointer vs value: each src is what its position takes (table SRC_KINDS): a value, a buffer,
                    an INDEX, a RANGE, an IF or a DEFINE_ACC; pointers reach only INDEX and LOAD/STORE
  scope             a src is visible: not defined inside a RANGE or IF that is already closed (an ASSIGN is
                    visible wherever its DEFINE_ACC is)
  block-nesting     ENDRANGE/ENDIF close the innermost open RANGE/IF
  top-level         DEFINE_GLOBAL, DEFINE_VAR and DEFINE_LOCAL are not inside a RANGE or IF
  global-numbering  DEFINE_GLOBAL numbers are 0, 1, 2, ... in program order
  buffer-dtype      buffers point to a non-void scalar, have a size in [1, 2**31), local=True exactly for DEFINE_LOCAL
  define-var        a DEFINE_VAR name is a unique identifier and min <= max inside int32
  define-local      a DEFINE_LOCAL name is a unique identifier
  const-value       CONST is scalar and its arg is a bool / int in range / float exactly representable in the dtype
  index-dtype       SPECIAL, RANGE (and its bounds), DEFINE_VAR and INDEX's index are int32 scalars
  special           SPECIAL names are gidx0-2 / lidx0-2, each at most once, sized as global_size / local_size
  range             RANGE ids are unique
  gate              IF's gate, LOAD's and STORE's gate are bool scalars
  alu-dtypes        ALU srcs equal the result dtype; CMPLT/CMPNE: two equal dtypes -> bool of the same count;
                    WHERE: a bool condition of the result's count and two values of the result dtype
  bool-op           IDIV MOD SUB NEG SHL SHR are rejected on bool
  op-dtype          float-only ops (EXP2 LOG2 SIN SQRT RECIP FDIV TRUNC) on floats; IDIV MOD SHL SHR on ints;
                    XOR OR AND on ints or bool; THREEFRY on uint64; fp8 is storage only (no ALU)
  index             INDEX's dtype is its buffer's dtype
  load-store        LOAD dtype / STORE value is the buffer's element T or T.vec(n) with n <= size; alt has the LOAD's dtype;
                    a STORE with arg MOVE stores into a DEFINE_LOCAL
  vectorize         VECTORIZE takes n >= 2 scalars of one dtype T and gives T.vec(n)
  gep               GEP lanes are inside the src's vector and the dtype is the scalar .vec(len(lanes))
  cast              CAST keeps the vector count
  bitcast           BITCAST keeps the vector count and the scalar size, and involves no bool
  acc               DEFINE_ACC's init and ASSIGN's value have the accumulator's dtype; accumulator ids are unique
  wmma              WMMA src dtypes follow arg (N, M, K) (see Ops) and are floats
  barrier           BARRIER only in programs with DEFINE_LOCAL, never inside an IF or inside a RANGE whose bounds
                    depend on the thread's lidx (every thread of the workgroup must reach it)
  unclosed-block    every RANGE and IF is closed by the end of the program
  launch-specials   every launch dimension larger than 1 has its SPECIAL
"""
from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from refimpl.dtype import DType, ImageDType, PtrDType, dtypes, to_np
from refimpl.ir.dtype_text import DTYPE_TO_NAME, NAME_TO_DTYPE, dtype_to_str
from refimpl.ir.ops import MOVE, GroupOp, Ops
from refimpl.ir.program import INDEX_DTYPE, Program, UOp

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
SPECIAL_NAMES = tuple(f"{p}idx{d}" for p in "gl" for d in range(3))
FP8 = frozenset(NAME_TO_DTYPE[n] for n in ("fp8e4m3", "fp8e5m2") if n in NAME_TO_DTYPE)


class ProgramError(ValueError):
  """A program broke a rule of the kernel IR. `index`/`op` are None for whole-program rules."""
  def __init__(self, rule: str, detail: str, index: int | None = None, op: Ops | None = None):
    self.rule, self.detail, self.index, self.op = rule, detail, index, op
    opname = op.name if isinstance(op, Ops) else repr(op)
    where = "program" if index is None else f"uop {index} {opname}"
    super().__init__(f"{where}: [{rule}] {detail}")


# ***** helpers *****

def _is_int(x) -> bool: return isinstance(x, int) and not isinstance(x, bool)
def _ident(x) -> bool: return isinstance(x, str) and x.isascii() and x.isidentifier()
def _ds(dt) -> str:
  try: return dtype_to_str(dt)
  except (ValueError, AttributeError): return repr(dt)

def is_value_dtype(dt) -> bool:
  """A dtype a value can have: a known non-void scalar or a vector of one (no pointers, no images)."""
  return isinstance(dt, DType) and not isinstance(dt, PtrDType) and dt.scalar() in DTYPE_TO_NAME and dt.scalar() != dtypes.void

def is_buffer_dtype(dt) -> bool:
  return isinstance(dt, PtrDType) and not isinstance(dt, ImageDType) and dt.v == 1

# the op-dtype families: (ops, the operand scalars they take, how the message names them)
OP_FAMILIES: tuple[tuple[frozenset, Callable[[DType], bool], str], ...] = (
  (GroupOp.FloatOnly, dtypes.is_float, "float dtypes"),
  (GroupOp.IntOnly, dtypes.is_int, "integer dtypes"),
  (GroupOp.IntOrBool, lambda d: dtypes.is_int(d) or d == dtypes.bool, "integer or bool dtypes"),
  (frozenset({Ops.THREEFRY}), lambda d: d == dtypes.uint64, "uint64"))

def alu_dtype_error(op: Ops, dt: DType) -> tuple[str, str] | None:
  """(rule, detail) when ALU op `op` is not defined on operand dtype `dt`, else None (the spec's dtype families)."""
  s = dt.scalar()
  if op in GroupOp.NotBool and s == dtypes.bool:
    return "bool-op", f"{op.name} is not defined on bool (the spec rejects IDIV, MOD, SUB, NEG, SHL, SHR on bool)"
  if s in FP8: return "op-dtype", f"{op.name} on {_ds(dt)}: fp8 dtypes are storage only (LOAD, STORE, CAST, BITCAST, CONST)"
  for ops, ok, what in OP_FAMILIES:
    if op in ops and not ok(s): return "op-dtype", f"{op.name} takes {what} only, got {_ds(dt)}"
  return None

def alu_allows(op: Ops, dt: DType) -> bool:
  """Whether ALU op `op` is defined on operand dtype `dt` (for generators and the spec table)."""
  return is_value_dtype(dt) and alu_dtype_error(op, dt) is None

def const_error(value, dt: DType) -> str | None:
  """Why `value` is not a valid CONST arg for scalar dtype `dt`, or None. Floats must be exactly representable."""
  s = dt.scalar()
  if s == dtypes.bool: return None if type(value) is bool else f"a bool CONST needs a bool arg, got {value!r}"
  if dtypes.is_int(s):
    if type(value) is not int: return f"an integer CONST needs an int arg, got {value!r}"
    lo, hi = dtypes.min(s), dtypes.max(s)
    return None if lo <= value <= hi else f"value {value} is out of range [{lo}, {hi}] of {_ds(s)}"
  if type(value) is not float: return f"a float CONST needs a float arg, got {value!r}"
  if math.isnan(value): return None
  with np.errstate(over="ignore", under="ignore", invalid="ignore"):
    back = float(np.asarray(value, dtype=np.float64).astype(to_np(s)).astype(np.float64))
  return None if back == value else f"value {value!r} is not exactly representable in {_ds(s)} (nearest {back!r})"


# ***** state carried through the walk *****

@dataclass
class _Ctx:
  program: Program
  uops: tuple
  open: list[int] = field(default_factory=list)       # indices of the open RANGE / IF blocks, outermost first
  scope: dict[int, tuple[int, ...]] = field(default_factory=dict)  # uop -> the blocks it lives in
  nglobals: int = 0
  names: dict[str, set] = field(default_factory=lambda: {k: set() for k in ("var", "local", "special", "range", "acc")})
  has_local: bool = False
  _varying: frozenset[int] | None = None

  @property
  def varying(self) -> frozenset[int]:
    if self._varying is None: self._varying = _varying(self.uops)
    return self._varying

  def srcs(self, u: UOp) -> list[UOp]: return [self.uops[j] for j in u.src]


NAMED = {Ops.DEFINE_VAR: "var", Ops.DEFINE_LOCAL: "local", Ops.SPECIAL: "special", Ops.RANGE: "range", Ops.DEFINE_ACC: "acc"}

def _advance(c: _Ctx, i: int, u: UOp) -> None:
  """Update the walk state after uop i passed every rule."""
  if u.op in GroupOp.BlockEnd: c.open.pop()
  c.scope[i] = c.scope[u.src[0]] if u.op is Ops.ASSIGN else tuple(c.open) + ((i,) if u.op in GroupOp.BlockStart else ())
  if u.op in GroupOp.BlockStart: c.open.append(i)
  if u.op is Ops.DEFINE_GLOBAL: c.nglobals += 1
  if (kind := NAMED.get(u.op)) is not None: c.names[kind].add(u.arg[0] if isinstance(u.arg, tuple) else u.arg)


def _varying(uops) -> frozenset[int]:
  """The uops whose value can differ between threads of one workgroup: those that depend on an lidx SPECIAL through their
  srcs (data), and ASSIGNs inside an IF or RANGE whose gate or bounds do (control), whose accumulator then does too.
  A fixpoint, since an ASSIGN makes the earlier reads of its accumulator varying as well."""
  inside: list[tuple[int, ...]] = []
  open_: list[int] = []
  for i, u in enumerate(uops):
    op = getattr(u, "op", None)
    if op in GroupOp.BlockEnd and open_: open_.pop()
    inside.append(tuple(open_))
    if op in GroupOp.BlockStart: open_.append(i)
  var: set[int] = set()
  while True:
    before = len(var)
    for i, u in enumerate(uops):
      if not isinstance(u, UOp) or not isinstance(u.src, tuple): continue
      lidx = u.op is Ops.SPECIAL and isinstance(u.arg, tuple) and str(u.arg[0]).startswith("lidx")
      if lidx or any(j in var for j in u.src) or (u.op is Ops.ASSIGN and any(b in var for b in inside[i])):
        var.add(i)
        if u.op is Ops.ASSIGN and u.src: var.add(u.src[0])
    if len(var) == before: return frozenset(var)


# ***** the rule tables *****

PROGRAM_RULES: list[tuple[str, Callable]] = []     # checked before the uops
FINAL_RULES: list[tuple[str, Callable]] = []       # checked after the uops
UOP_RULES: list[tuple[str, frozenset | None, Callable]] = []

def program_rule(name: str, final: bool = False):
  def deco(fn):
    (FINAL_RULES if final else PROGRAM_RULES).append((name, fn))
    return fn
  return deco

def uop_rule(name: str, ops=None):
  def deco(fn):
    UOP_RULES.append((name, None if ops is None else frozenset(ops), fn))
    return fn
  return deco


@program_rule("program-name")
def _program_name(c: _Ctx):
  if not _ident(c.program.name): return f"the program name must be a C identifier, got {c.program.name!r}"

@program_rule("launch-dims")
def _launch_dims(c: _Ctx):
  p = c.program
  for what, dims in (("global_size", p.global_size), ("local_size", p.local_size)):
    if not (isinstance(dims, tuple) and len(dims) == 3 and all(_is_int(d) and d >= 1 for d in dims)):
      return f"{what} must be 3 ints >= 1, got {dims!r}"
  for d in range(3):
    if p.global_size[d] * p.local_size[d] > INT32_MAX:
      return f"dimension {d} has {p.global_size[d]} x {p.local_size[d]} threads, more than int32 indexes"


@uop_rule("uop-type")
def _uop_type(c: _Ctx, i: int, u: UOp):
  if not isinstance(u, UOp): return f"not a UOp: {u!r}"
  if not isinstance(u.op, Ops): return f"op must be an Ops member, got {u.op!r}"
  if not isinstance(u.dtype, DType): return f"dtype must be a DType, got {u.dtype!r}"
  if not (isinstance(u.src, tuple) and all(_is_int(j) for j in u.src)):
    return f"src must be a tuple of uop indices, got {u.src!r}"

@uop_rule("src-order")
def _src_order(c: _Ctx, i: int, u: UOp):
  for j in u.src:
    if not 0 <= j < i: return f"src {j} is not an earlier uop (use before definition)"

UNARY, BINARY, TERNARY = (1,), (2,), (3,)
ARITY: dict[Ops, tuple[int, ...] | None] = {
  **{op: UNARY for op in GroupOp.Unary}, **{op: BINARY for op in GroupOp.Binary}, **{op: TERNARY for op in GroupOp.Ternary},
  Ops.DEFINE_GLOBAL: (0,), Ops.DEFINE_VAR: (0,), Ops.DEFINE_LOCAL: (0,), Ops.CONST: (0,), Ops.SPECIAL: (0,),
  Ops.DEFINE_ACC: (1,), Ops.ASSIGN: (2,), Ops.RANGE: (2,), Ops.ENDRANGE: (1,), Ops.IF: (1,), Ops.ENDIF: (1,),
  Ops.INDEX: (2,), Ops.LOAD: (1, 3), Ops.STORE: (2, 3), Ops.BARRIER: (0,), Ops.VECTORIZE: None,  # None: 2 or more
  Ops.GEP: (1,), Ops.CAST: (1,), Ops.BITCAST: (1,), Ops.WMMA: (3,)}

@uop_rule("arity")
def _arity(c: _Ctx, i: int, u: UOp):
  want = ARITY[u.op]
  if want is None and len(u.src) < 2: return f"takes 2 or more srcs, got {len(u.src)}"
  if want is not None and len(u.src) not in want: return f"takes {' or '.join(map(str, want))} src(s), got {len(u.src)}"

ARGS: dict[Ops, tuple[str, Callable]] = {
  Ops.DEFINE_GLOBAL: ("a buffer number (int >= 0)", lambda a: _is_int(a) and a >= 0),
  Ops.DEFINE_VAR: ("(name, min, max)", lambda a: isinstance(a, tuple) and len(a) == 3 and isinstance(a[0], str)
                   and _is_int(a[1]) and _is_int(a[2])),
  Ops.DEFINE_LOCAL: ("a name (str)", lambda a: isinstance(a, str)),
  Ops.CONST: ("a bool, int or float", lambda a: type(a) in (bool, int, float)),
  Ops.SPECIAL: ("(name, size)", lambda a: isinstance(a, tuple) and len(a) == 2 and isinstance(a[0], str) and _is_int(a[1])),
  Ops.DEFINE_ACC: ("an accumulator id (int)", _is_int),
  Ops.RANGE: ("a loop id (int)", _is_int),
  Ops.GEP: ("a non-empty tuple of lanes (ints)", lambda a: isinstance(a, tuple) and len(a) > 0 and all(map(_is_int, a))),
  Ops.STORE: (f"None or {MOVE!r}", lambda a: a is None or a == MOVE),
  Ops.WMMA: ("(N, M, K), ints >= 1", lambda a: isinstance(a, tuple) and len(a) == 3 and all(_is_int(x) and x >= 1 for x in a)),
}
assert set(ARITY) == set(Ops), "every op needs an arity"
NO_ARG = ("None", lambda a: a is None)

@uop_rule("arg")
def _arg(c: _Ctx, i: int, u: UOp):
  what, ok = ARGS.get(u.op, NO_ARG)
  if not ok(u.arg): return f"arg must be {what}, got {u.arg!r}"

@uop_rule("result-dtype")
def _result_dtype(c: _Ctx, i: int, u: UOp):
  if u.op in GroupOp.Void:
    if u.dtype != dtypes.void: return f"dtype must be void, got {_ds(u.dtype)}"
  elif u.op in GroupOp.Buffer or u.op is Ops.INDEX:
    if not is_buffer_dtype(u.dtype): return f"dtype must be a pointer (T.ptr(size)), got {_ds(u.dtype)}"
  elif not is_value_dtype(u.dtype):
    return f"dtype must be a value dtype (a scalar or vector, not void or a pointer), got {_ds(u.dtype)}"

KINDS: dict[str, tuple[str, Callable[[UOp], bool]]] = {
  "value": ("a value (not a pointer, not a void op)", lambda s: s.op not in GroupOp.Void and is_value_dtype(s.dtype)),
  "buffer": ("a DEFINE_GLOBAL or DEFINE_LOCAL", lambda s: s.op in GroupOp.Buffer),
  "index": ("an INDEX", lambda s: s.op is Ops.INDEX),
  "range": ("a RANGE", lambda s: s.op is Ops.RANGE),
  "if": ("an IF", lambda s: s.op is Ops.IF),
  "acc": ("a DEFINE_ACC", lambda s: s.op is Ops.DEFINE_ACC),
}
SRC_KINDS: dict[Ops, tuple[str, ...]] = {Ops.INDEX: ("buffer", "value"), Ops.LOAD: ("index", "value", "value"),
                                          Ops.STORE: ("index", "value", "value"), Ops.ENDRANGE: ("range",), Ops.ENDIF: ("if",),
                                          Ops.ASSIGN: ("acc", "value")}

@uop_rule("src-kind")
def _src_kind(c: _Ctx, i: int, u: UOp):
  kinds = SRC_KINDS.get(u.op, ())
  for k, (j, s) in enumerate(zip(u.src, c.srcs(u))):
    what, ok = KINDS[kinds[k] if k < len(kinds) else "value"]
    if not ok(s): return f"src {k} (uop {j} {s.op.name} {_ds(s.dtype)}) must be {what}"

@uop_rule("scope")
def _scope(c: _Ctx, i: int, u: UOp):
  if u.op in GroupOp.BlockEnd: return None
  for k, j in enumerate(u.src):
    for b in c.scope[j]:
      if b not in c.open:
        return f"src {k} (uop {j}) is not visible here: it lives inside {c.uops[b].op.name} {b}, which is closed"

@uop_rule("block-nesting", GroupOp.BlockEnd)
def _block_nesting(c: _Ctx, i: int, u: UOp):
  b = u.src[0]
  if b not in c.open: return f"{c.uops[b].op.name} {b} is not open"
  if c.open[-1] != b:
    return f"closes {c.uops[b].op.name} {b} but the innermost open block is {c.uops[c.open[-1]].op.name} {c.open[-1]}"

@uop_rule("top-level", GroupOp.Declaration)
def _top_level(c: _Ctx, i: int, u: UOp):
  if c.open: return f"declarations must be at top level, this one is inside {c.uops[c.open[-1]].op.name} {c.open[-1]}"

@uop_rule("global-numbering", {Ops.DEFINE_GLOBAL})
def _global_numbering(c: _Ctx, i: int, u: UOp):
  if u.arg != c.nglobals: return f"buffer number {u.arg} out of order: expected {c.nglobals} (numbers are 0, 1, 2, ... in order)"

@uop_rule("buffer-dtype", GroupOp.Buffer)
def _buffer_dtype(c: _Ctx, i: int, u: UOp):
  dt = u.dtype
  if not (is_value_dtype(dt.base) and dt.base.count == 1): return f"a buffer must point to a non-void scalar, got {_ds(dt)}"
  if not (_is_int(dt.size) and 1 <= dt.size <= INT32_MAX): return f"buffer size must be in [1, 2**31), got {dt.size}"
  if dt.local != (u.op is Ops.DEFINE_LOCAL): return f"local={dt.local} is wrong for {u.op.name}"

@uop_rule("define-var", {Ops.DEFINE_VAR})
def _define_var(c: _Ctx, i: int, u: UOp):
  name, lo, hi = u.arg
  if not _ident(name): return f"var name must be an identifier, got {name!r}"
  if name in c.names["var"]: return f"var name {name!r} is defined twice"
  if not INT32_MIN <= lo <= hi <= INT32_MAX: return f"var {name!r} needs int32 bounds min <= max, got [{lo}, {hi}]"

@uop_rule("define-local", {Ops.DEFINE_LOCAL})
def _define_local(c: _Ctx, i: int, u: UOp):
  if not _ident(u.arg): return f"local name must be an identifier, got {u.arg!r}"
  if u.arg in c.names["local"]: return f"local name {u.arg!r} is defined twice"

@uop_rule("const-value", {Ops.CONST})
def _const_value(c: _Ctx, i: int, u: UOp):
  if u.dtype.count != 1: return f"CONST must be a scalar (build vectors with VECTORIZE), got {_ds(u.dtype)}"
  return const_error(u.arg, u.dtype)

@uop_rule("index-dtype", {Ops.SPECIAL, Ops.RANGE, Ops.DEFINE_VAR, Ops.INDEX})
def _index_dtype(c: _Ctx, i: int, u: UOp):
  if u.op is not Ops.INDEX and u.dtype != INDEX_DTYPE: return f"dtype must be the index dtype int32, got {_ds(u.dtype)}"
  for k, s in enumerate(c.srcs(u)):
    if (u.op is Ops.RANGE or k == 1) and s.dtype != INDEX_DTYPE:
      return f"src {k} must be an int32 scalar (the index dtype), got {_ds(s.dtype)}"

@uop_rule("special", {Ops.SPECIAL})
def _special(c: _Ctx, i: int, u: UOp):
  name, size = u.arg
  if name not in SPECIAL_NAMES: return f"name must be one of {', '.join(SPECIAL_NAMES)}, got {name!r}"
  if name in c.names["special"]: return f"{name} is defined twice"
  launch, what = (c.program.global_size, "global_size") if name[0] == "g" else (c.program.local_size, "local_size")
  if size != launch[int(name[-1])]: return f"{name} has size {size} but {what}[{name[-1]}] is {launch[int(name[-1])]}"

@uop_rule("range", {Ops.RANGE})
def _range(c: _Ctx, i: int, u: UOp):
  if u.arg in c.names["range"]: return f"loop id {u.arg} is used twice"

@uop_rule("gate", {Ops.IF, Ops.LOAD, Ops.STORE})
def _gate(c: _Ctx, i: int, u: UOp):
  k = 0 if u.op is Ops.IF else 2
  if len(u.src) > k and (g := c.uops[u.src[k]].dtype) != dtypes.bool:
    return f"the gate (src {k}) must be a bool scalar, got {_ds(g)}"

@uop_rule("alu-dtypes", GroupOp.ALU)
def _alu_dtypes(c: _Ctx, i: int, u: UOp):
  sd = [s.dtype for s in c.srcs(u)]
  names = ", ".join(map(_ds, sd))
  if u.op in GroupOp.Comparison:
    if sd[0] != sd[1]: return f"compares two different dtypes ({names})"
    if u.dtype != dtypes.bool.vec(sd[0].count): return f"result must be {_ds(dtypes.bool.vec(sd[0].count))}, got {_ds(u.dtype)}"
  elif u.op is Ops.WHERE:
    if sd[0] != (cond := dtypes.bool.vec(u.dtype.count)): return f"the condition must be {_ds(cond)}, got {_ds(sd[0])}"
    if sd[1] != u.dtype or sd[2] != u.dtype:
      return f"both values ({_ds(sd[1])}, {_ds(sd[2])}) must be the result dtype {_ds(u.dtype)}"
  elif any(d != u.dtype for d in sd): return f"src dtypes ({names}) must all equal the result dtype {_ds(u.dtype)}"

@uop_rule("bool-op", GroupOp.ALU)
def _bool_op(c: _Ctx, i: int, u: UOp):
  if (err := alu_dtype_error(u.op, c.uops[u.src[-1]].dtype)) and err[0] == "bool-op": return err[1]

@uop_rule("op-dtype", GroupOp.ALU)
def _op_dtype(c: _Ctx, i: int, u: UOp):
  if (err := alu_dtype_error(u.op, c.uops[u.src[-1]].dtype)) and err[0] == "op-dtype": return err[1]

@uop_rule("index", {Ops.INDEX})
def _index(c: _Ctx, i: int, u: UOp):
  if u.dtype != (b := c.uops[u.src[0]].dtype): return f"dtype must be the buffer's {_ds(b)}, got {_ds(u.dtype)}"

@uop_rule("load-store", {Ops.LOAD, Ops.STORE})
def _load_store(c: _Ctx, i: int, u: UOp):
  ptr = c.uops[u.src[0]].dtype
  val = u.dtype if u.op is Ops.LOAD else c.uops[u.src[1]].dtype
  what = "dtype" if u.op is Ops.LOAD else "the stored value"
  if val.scalar() != ptr.base: return f"{what} {_ds(val)} does not match the buffer element {_ds(ptr.base)}"
  if val.count > ptr.size: return f"{what} {_ds(val)} has more lanes than the buffer has elements ({ptr.size})"
  if u.op is Ops.LOAD and len(u.src) == 3 and (alt := c.uops[u.src[1]].dtype) != u.dtype:
    return f"the alternative value is {_ds(alt)}, not the LOAD's dtype {_ds(u.dtype)}"
  if u.op is Ops.STORE and u.arg == MOVE and not ptr.local: return f"a {MOVE} STORE must store into a DEFINE_LOCAL"

@uop_rule("vectorize", {Ops.VECTORIZE})
def _vectorize(c: _Ctx, i: int, u: UOp):
  sd = [s.dtype for s in c.srcs(u)]
  if any(d != sd[0] for d in sd) or sd[0].count != 1: return f"srcs must be scalars of one dtype, got ({', '.join(map(_ds, sd))})"
  if u.dtype != sd[0].vec(len(sd)): return f"dtype must be {_ds(sd[0].vec(len(sd)))}, got {_ds(u.dtype)}"

@uop_rule("gep", {Ops.GEP})
def _gep(c: _Ctx, i: int, u: UOp):
  sdt = c.uops[u.src[0]].dtype
  if bad := [lane for lane in u.arg if not 0 <= lane < sdt.count]:
    return f"lane {bad[0]} is outside the {sdt.count} lanes of {_ds(sdt)}"
  if u.dtype != (want := sdt.scalar().vec(len(u.arg))): return f"dtype must be {_ds(want)}, got {_ds(u.dtype)}"

@uop_rule("cast", {Ops.CAST})
def _cast(c: _Ctx, i: int, u: UOp):
  if (s := c.uops[u.src[0]].dtype).count != u.dtype.count: return f"changes the vector count ({_ds(s)} -> {_ds(u.dtype)})"

@uop_rule("bitcast", {Ops.BITCAST})
def _bitcast(c: _Ctx, i: int, u: UOp):
  s = c.uops[u.src[0]].dtype
  if s.count != u.dtype.count or s.scalar().itemsize != u.dtype.scalar().itemsize:
    return f"needs the same count and element size ({_ds(s)} -> {_ds(u.dtype)})"
  if dtypes.bool in (s.scalar(), u.dtype.scalar()): return f"bool has no bit pattern to reinterpret ({_ds(s)} -> {_ds(u.dtype)})"

@uop_rule("acc", {Ops.DEFINE_ACC, Ops.ASSIGN})
def _acc(c: _Ctx, i: int, u: UOp):
  sd = [s.dtype for s in c.srcs(u)]
  if u.op is Ops.DEFINE_ACC and sd[0] != u.dtype: return f"the init value is {_ds(sd[0])}, not the accumulator's {_ds(u.dtype)}"
  if u.op is Ops.DEFINE_ACC and u.arg in c.names["acc"]: return f"accumulator id {u.arg} is used twice"
  if u.op is Ops.ASSIGN and not sd[0] == sd[1] == u.dtype:
    return f"accumulator {_ds(sd[0])}, value {_ds(sd[1])} and result {_ds(u.dtype)} must be one dtype"

@uop_rule("wmma", {Ops.WMMA})
def _wmma(c: _Ctx, i: int, u: UOp):
  N, M, K = u.arg
  a, b, acc = (s.dtype for s in c.srcs(u))
  tin, tout = a.scalar(), acc.scalar()
  if not all(dtypes.is_float(t) and t not in FP8 for t in (tin, tout)):
    return f"takes float dtypes, got {_ds(tin)} -> {_ds(tout)}"
  want = (tin.vec(M * K), tin.vec(K * N), tout.vec(M * N), tout.vec(M * N))
  if (a, b, acc, u.dtype) != want:
    return f"for (N, M, K)={u.arg} needs a {_ds(want[0])}, b {_ds(want[1])}, c and result {_ds(want[2])}; " \
           f"got {_ds(a)}, {_ds(b)}, {_ds(acc)} -> {_ds(u.dtype)}"

@uop_rule("barrier", {Ops.BARRIER})
def _barrier(c: _Ctx, i: int, u: UOp):
  if not c.has_local: return "BARRIER in a program with no DEFINE_LOCAL (there is no workgroup memory to order)"
  for b in c.open:
    if c.uops[b].op is Ops.IF: return f"BARRIER inside IF {b}: every thread of the workgroup must reach it"
    if any(j in c.varying for j in c.uops[b].src):
      return f"BARRIER inside RANGE {b} whose bounds depend on lidx (through data or control): threads diverge"

@program_rule("unclosed-block", final=True)
def _unclosed(c: _Ctx):
  if c.open: return c.open[-1], f"{c.uops[c.open[-1]].op.name} {c.open[-1]} is never closed"

@program_rule("launch-specials", final=True)
def _launch_specials(c: _Ctx):
  for what, dims, prefix in (("global_size", c.program.global_size, "gidx"), ("local_size", c.program.local_size, "lidx")):
    for d, n in enumerate(dims):
      if n > 1 and f"{prefix}{d}" not in c.names["special"]: return f"{what}[{d}] is {n} but there is no SPECIAL {prefix}{d}"

RULE_NAMES: tuple[str, ...] = (*(n for n, _ in PROGRAM_RULES), *(n for n, _, _ in UOP_RULES), *(n for n, _ in FINAL_RULES))


_VERIFIED: weakref.WeakSet = weakref.WeakSet()  # programs are frozen: one that passed once passes again

def verify(program: Program) -> Program:
  """Check every rule (see the module docstring); return the program, or raise ProgramError at the first broken rule."""
  if not isinstance(program, Program): raise ProgramError("program-type", f"not a Program: {type(program).__name__}")
  try:
    if program in _VERIFIED: return program
  except TypeError: pass  # a malformed program may not even hash: the rules below say what is wrong with it
  uops = program.uops
  c = _Ctx(program, uops, has_local=any(isinstance(u, UOp) and u.op is Ops.DEFINE_LOCAL for u in uops))
  def run(rule, fn):
    if (r := fn(c)) is not None:
      idx, detail = r if isinstance(r, tuple) else (None, r)
      raise ProgramError(rule, detail, idx, None if idx is None else uops[idx].op)
  for rule, fn in PROGRAM_RULES: run(rule, fn)
  for i, u in enumerate(uops):
    for rule, ops, fn in UOP_RULES:
      if (ops is None or u.op in ops) and (detail := fn(c, i, u)) is not None:
        raise ProgramError(rule, detail, i, getattr(u, "op", None))
    _advance(c, i, u)
  for rule, fn in FINAL_RULES: run(rule, fn)
  _VERIFIED.add(program)
  return program
