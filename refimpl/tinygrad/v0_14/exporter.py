"""Translate a refimpl `Program` into tinygrad 0.14's linearized kernel form, as a KernelRecord (record.py): the reverse
of importer.py. Imports no tinygrad: `uops.py` builds 0.14's UOps from the record for a renderer.

`to_record(program)` walks the uops once, declarations first (DEFINE_GLOBALs by number, then DEFINE_VARs: the kernel's
parameter order, which 0.14's renderers take from the list), and hands each to its rule in EXPORT_RULES. A rule appends
the 0.14 uops it stands for and says which one later srcs read. The rules, each the inverse of the importer's rule of
that number (importer.py's docstring):

   2 typed-const      CONST v of dtype T is CAST T (CONST weak v): 0.14 spells every literal so (pm_casted_consts)
   3 param-buffer     DEFINE_GLOBAL n, T.ptr(size) is PARAM (size) slot n in GLOBAL memory
   4 param-var        DEFINE_VAR (name, min, max) is PARAM (STACK ()) in the ALU space, slot after the buffers
   5 local-buffer     DEFINE_LOCAL T.ptr(size, local=True) is BUFFER (size) in LOCAL memory
   6 reg-accumulator  DEFINE_ACC (init) is BUFFER (1) in REG memory (declared first) and a STORE of init to its element
                      0; ASSIGN (acc, v) a STORE of v there; a read of the accumulator (or of an ASSIGN: it reads as the
                      register) a LOAD of INDEX (AFTER (buffer, its last STORE), 0)
   9 shrink-vector    a LOAD / STORE of T.vec(n) through INDEX (buffer, i) goes through SHRINK (buffer, i, n), made
                      at the INDEX where all its accesses have one width, else at each access
  10 lane-index       GEP (k,) of a vector is INDEX (vector, k), of a STACK its src k; GEP of several lanes a STACK
  11 renamed-op       RECIP is RECIPROCAL, IDIV is CDIV, MOD is CMOD (both truncate), VECTORIZE is STACK
  13 range-start      RANGE (0, end) is RANGE (end), its axis id the loop id (the refimpl index where two loops share
                      an id); a RANGE (start, end) is RANGE (end - start) plus start; ENDRANGE is
                      END (GROUP (the loop's STOREs), RANGE)
  14 order-srcs       BARRIER is BARRIER (the STOREs since the last one); IF (gate) is IF (gate), ENDIF (IF) the same;
                      a gated STORE is IF (gate), STORE, ENDIF, as 0.14's linearizer spells it
  15 special-size     SPECIAL (name, size) is SPECIAL (size) named name
  16 function-name    the kernel is named by SINK's arg, last in the list
  20 devectorized-alu an ALU op (CAST, BITCAST, WHERE, MULACC) of vectors T.vec(n) is n scalar ops of their lanes
                      (INDEX (vector, k), rule 10) and a STACK of the n results: 0.14 hands its renderers scalar ALU
                      only (its ew_devectorizer); vectors live in LOADs, STOREs and STACKs

Other ops keep their name and srcs (the ALU ops, TRUNC among them: 0.14's Ops.TRUNC, CAST, BITCAST, WHERE, MULACC,
THREEFRY). What tinygrad 0.14 has no
form for, or this exporter builds none for, raises ExportError naming the uop: WMMA (refimpl's one-thread form), fp8
values (0.14 saturates on overflow where refimpl's rule gives inf/NaN: a program would have to name that rule), a
vector accumulator, a buffer of unknown size.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from refimpl.dtype import INVERSE_DTYPES_DICT, DType, PtrDType, dtypes
from refimpl.errors import NotTranslatable
from refimpl.ir import Ops, Program, UOp, verify
from refimpl.tinygrad.v0_14.record import KernelRecord, Rec, float_arg

__all__ = ["EXPORT_RULES", "ExportError", "to_record"]

RENAMED = {Ops.RECIP: "RECIPROCAL", Ops.IDIV: "CDIV", Ops.MOD: "CMOD", Ops.VECTORIZE: "STACK"}
SAME_NAME = frozenset({Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.NEG, Ops.TRUNC, Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.MAX,
                       Ops.CMPLT, Ops.CMPNE, Ops.XOR, Ops.OR, Ops.AND, Ops.SHL, Ops.SHR, Ops.THREEFRY, Ops.WHERE,
                       Ops.MULACC, Ops.CAST, Ops.BITCAST})
FP8 = frozenset(d for d in (getattr(dtypes, n, None) for n in ("fp8e4m3", "fp8e5m2")) if d is not None)


class ExportError(NotTranslatable, ValueError):
  """A refimpl uop with no tinygrad 0.14 form (refimpl's limit, not the device's failure). `.index` (position in the
  Program, None for the whole program), `.op` and `.why` say which and why."""
  def __init__(self, index: int | None, op: Ops | None, why: str):
    self.index, self.op, self.why = index, op, why
    where = "program" if index is None else f"uop {index} {op.name if op is not None else '?'}"
    super().__init__(f"tinygrad 0.14 export: {where}: {why}")


def dtype_name(i: int, u: UOp, dt: DType) -> str:
  """The record's name of dt's scalar dtype (tinygrad's attribute name); ExportError for fp8 and unknown dtypes."""
  scalar = dt.scalar()
  if scalar in FP8: raise ExportError(i, u.op, f"{scalar!r}: tinygrad 0.14 saturates fp8 where refimpl's rule overflows")
  name = INVERSE_DTYPES_DICT.get(scalar.name)
  if name is None: raise ExportError(i, u.op, f"dtype {scalar!r} has no tinygrad 0.14 name")
  return name


@dataclass
class _Walk:
  """The walk's state: the program, the output uops, refimpl index -> the record index standing for it, the constants
  already spelled, and what rules 6, 13 and 14 track (accumulators, open loops' STOREs, STOREs since a BARRIER)."""
  program: Program
  lanes: dict[int, set[int]]                                 # INDEX -> the widths of its accesses (rule 9)
  out: list[Rec] = field(default_factory=list)
  to_rec: dict[int, int] = field(default_factory=dict)
  made: dict[tuple, tuple[tuple, int]] = field(default_factory=dict)  # what `scoped` made: key -> (its scope, record)
  scope: list[int] = field(default_factory=list)             # the open RANGEs and IFs (refimpl indices)
  indices: dict[int, tuple[int, int]] = field(default_factory=dict)  # INDEX -> (buffer, index) records
  acc_buffer: dict[int, int] = field(default_factory=dict)   # DEFINE_ACC index -> its REG BUFFER
  acc_last: dict[int, int] = field(default_factory=dict)     # DEFINE_ACC index -> its last STORE
  assign_acc: dict[int, int] = field(default_factory=dict)   # ASSIGN index -> its DEFINE_ACC
  loop_stores: list[list[int]] = field(default_factory=list)
  since_barrier: list[int] = field(default_factory=list)
  ranges: dict[int, int] = field(default_factory=dict)       # RANGE index -> its RANGE record
  nparams: int = 0

  def axis_id(self, i: int) -> int:
    """RANGE i's axis id: its loop id when the program's loop ids are distinct (0.14's C names a loop by it), else i."""
    ids = [u.arg for u in self.program.uops if u.op is Ops.RANGE]
    return self.program.uops[i].arg if len(set(ids)) == len(ids) else i

  def add(self, op: str, dtype: str, shape: tuple | None, space: str | None, arg: Any = None, src: tuple = ()) -> int:
    self.out.append(Rec(op, dtype, shape, space, arg, tuple(src)))
    return len(self.out) - 1

  def scoped(self, key: tuple, make: Callable[[], int]) -> int:
    """make()'s record, once per key in each scope: one made inside a loop or IF that has closed is made again (refimpl
    uses a value only in the scope it was made in)."""
    made = self.made.get(key)
    if made is not None and made[0] == tuple(self.scope[:len(made[0])]): return made[1]
    rec = make()
    self.made[key] = (tuple(self.scope), rec)
    return rec

  def const(self, value: Any, dtype: str) -> int:
    """CAST dtype (CONST weak value) (rule 2), once per (value, dtype) in each scope."""
    weak = "weakfloat" if isinstance(value, float) else "weakint"
    arg = float_arg(value) if isinstance(value, float) else int(value)
    return self.scoped(("const", type(value), repr(value), dtype),
                       lambda: self.add("CAST", dtype, (), None, None, (self.add("CONST", weak, (), None, arg),)))

  def value(self, i: int, u: UOp, op: str, src: tuple) -> int:
    """A value uop of u's dtype (shape (n,) for T.vec(n)) in the ALU space."""
    shape = (u.dtype.count,) if u.dtype.count > 1 else ()
    return self.add(op, dtype_name(i, u, u.dtype), shape, "ALU", None, src)

  def lane(self, vec: int, k: int) -> int:
    """Lane k of vector record `vec`: INDEX (vec, k), or the STACK's own src k (as 0.14's UOp.index takes it: a STACK
    of constants has no address space, and 0.14's C renders an INDEX of it as a pointer offset)."""
    r = self.out[vec]
    if r.op == "STACK": return r.src[k]
    return self.add("INDEX", r.dtype, (), "ALU", None, (vec, self.const(k, "int")))

  def store(self, idx: int, value: int) -> int:
    """A STORE, remembered by the open loops (rule 13) and the next BARRIER (rule 14)."""
    r = self.out[idx]
    st = self.add("STORE", "void", r.shape, r.addrspace, None, (idx, value))
    for stores in self.loop_stores: stores.append(st)
    self.since_barrier.append(st)
    return st

  def src(self, i: int, j: int) -> int:
    """The record index a src j of uop i reads (an accumulator: a LOAD of it after its last STORE, rule 6)."""
    if j in self.acc_buffer: return self.read_acc(j)
    if j in self.assign_acc: return self.read_acc(self.assign_acc[j])
    if j not in self.to_rec: raise ExportError(i, self.program.uops[i].op, f"src {j} has no tinygrad 0.14 value here")
    return self.to_rec[j]

  def read_acc(self, acc: int) -> int:
    buf, last = self.acc_buffer[acc], self.acc_last[acc]
    b = self.out[buf]
    after = self.add("AFTER", b.dtype, b.shape, "REG", None, (buf, last))
    idx = self.add("INDEX", b.dtype, (), "REG", None, (after, self.const(0, "int")))
    return self.add("LOAD", b.dtype, (), "ALU", None, (idx,))


# ***** one rule per construct: (walk, refimpl index, uop) -> the record index later srcs read (None: nothing) *****

def rule_typed_const(w: _Walk, i: int, u: UOp) -> int:
  """Rule 2: CONST v of T is CAST T (CONST weak v)."""
  return w.const(u.arg, dtype_name(i, u, u.dtype))

def _size(i: int, u: UOp) -> int:
  ptr = u.dtype
  if not isinstance(ptr, PtrDType) or ptr.size <= 0: raise ExportError(i, u.op, "a buffer of unknown size")
  return ptr.size

def rule_param_buffer(w: _Walk, i: int, u: UOp) -> int:
  """Rule 3: DEFINE_GLOBAL n is PARAM (size) slot n in GLOBAL memory."""
  size = _size(i, u)
  w.nparams += 1
  arg = {"slot": u.arg, "name": None, "min": None, "max": None}
  return w.add("PARAM", dtype_name(i, u, u.dtype.base), (size,), "GLOBAL", arg, (w.const(size, "int"),))

def rule_param_var(w: _Walk, i: int, u: UOp) -> int:
  """Rule 4: DEFINE_VAR (name, min, max) is PARAM (STACK ()) in the ALU space, numbered after the buffers."""
  name, lo, hi = u.arg
  arg = {"slot": w.nparams, "name": name, "min": lo, "max": hi}
  w.nparams += 1
  return w.add("PARAM", "int", (), "ALU", arg, (w.add("STACK", "void", (), None),))

def rule_local_buffer(w: _Walk, i: int, u: UOp) -> int:
  """Rule 5: DEFINE_LOCAL is BUFFER (size) in LOCAL memory."""
  size = _size(i, u)
  slot = sum(1 for r in w.out if r.op == "BUFFER")
  arg = {"slot": slot, "name": None, "min": None, "max": None}
  return w.add("BUFFER", dtype_name(i, u, u.dtype.base), (size,), "LOCAL", arg, (w.const(size, "int"),))

def rule_reg_accumulator(w: _Walk, i: int, u: UOp) -> None:
  """Rule 6: DEFINE_ACC (init) is a REG BUFFER (1) and a STORE of init to its element 0; ASSIGN (acc, v) a STORE of v
  there (a read of it reads the register, `_Walk.src`)."""
  if u.dtype.count > 1: raise ExportError(i, u.op, "a vector accumulator (0.14's REG access is scalar here)")
  if u.op is Ops.ASSIGN:
    acc, value = u.src[0], w.src(i, u.src[1])
    buf = w.acc_buffer[acc]
    idx = w.add("INDEX", w.out[buf].dtype, (), "REG", None, (w.add("AFTER", w.out[buf].dtype, (1,), "REG", None,
                                                                     (buf, w.acc_last[acc])), w.const(0, "int")))
    w.acc_last[acc] = w.store(idx, value)
    w.assign_acc[i] = acc
    return None
  init, name = w.src(i, u.src[0]), dtype_name(i, u, u.dtype)
  arg = {"slot": sum(1 for r in w.out if r.op == "BUFFER"), "name": None, "min": None, "max": None}
  buf = w.add("BUFFER", name, (1,), "REG", arg, (w.const(1, "int"),))
  w.acc_buffer[i] = buf
  w.acc_last[i] = w.store(w.add("INDEX", name, (), "REG", None, (buf, w.const(0, "int"))), init)
  return None

def _lanes(program: Program) -> dict[int, set[int]]:
  """Per INDEX: the widths of the accesses through it (its LOADs and STOREs)."""
  out: dict[int, set[int]] = {}
  for u in program.uops:
    if u.op in (Ops.LOAD, Ops.STORE):
      out.setdefault(u.src[0], set()).add((u.dtype if u.op is Ops.LOAD else program.uops[u.src[1]].dtype).count)
  return out

def rule_index(w: _Walk, i: int, u: UOp) -> None:
  """INDEX (buffer, i) is INDEX (PARAM or BUFFER, i), or SHRINK (buffer, i, n) where it is accessed n lanes wide
  (rule 9): here when every access through it has one width, else at each access."""
  w.indices[i] = (w.src(i, u.src[0]), w.src(i, u.src[1]))
  lanes = w.lanes.get(i, set())
  if len(lanes) == 1: _access(w, i, i, next(iter(lanes)))

def _access(w: _Walk, i: int, j: int, n: int) -> int:
  """The INDEX of refimpl INDEX j, or for n lanes its SHRINK (buffer, i, n) (rule 9), once per (j, n) in a scope."""
  buf, idx = w.indices[j]
  b = w.out[buf]
  if n == 1: return w.scoped(("index", j), lambda: w.add("INDEX", b.dtype, (), b.addrspace, None, (buf, idx)))
  return w.scoped(("shrink", j, n), lambda: w.add("SHRINK", b.dtype, (n,), b.addrspace, None, (buf, idx, w.const(n, "int"))))

def rule_load(w: _Walk, i: int, u: UOp) -> int:
  """LOAD (INDEX[, alt, gate]) is LOAD (INDEX or SHRINK[, alt, gate]) (rule 9)."""
  idx = _access(w, i, u.src[0], u.dtype.count)
  return w.value(i, u, "LOAD", (idx, *(w.src(i, s) for s in u.src[1:])))

def rule_store(w: _Walk, i: int, u: UOp) -> None:
  """STORE (INDEX, v) is STORE (INDEX or SHRINK, v) (rule 9); a gated one is IF (gate), STORE, ENDIF (rule 14)."""
  n = w.program.uops[u.src[1]].dtype.count
  idx, value = _access(w, i, u.src[0], n), w.src(i, u.src[1])
  gate = w.add("IF", "void", None, None, None, (w.src(i, u.src[2]), idx)) if len(u.src) == 3 else None
  w.store(idx, value)
  if gate is not None: w.add("ENDIF", "void", None, None, None, (gate,))

def rule_lane_index(w: _Walk, i: int, u: UOp) -> int:
  """Rule 10: GEP (k,) is INDEX (vector, k); GEP of several lanes a STACK of those."""
  vec = w.src(i, u.src[0])
  lanes = tuple(w.lane(vec, k) for k in u.arg)
  return lanes[0] if len(lanes) == 1 else w.value(i, u, "STACK", lanes)

def _alu(w: _Walk, i: int, u: UOp, op: str) -> int:
  """An ALU op, CAST, BITCAST, WHERE or MULACC of u's srcs; one of vectors (T.vec(n)) is n of their lanes (INDEX
  (vector, k)) and a STACK of those (rule 20, devectorized-alu: 0.14 hands its renderers scalar ALU only)."""
  srcs = tuple(w.src(i, s) for s in u.src)
  n = u.dtype.count
  if n == 1: return w.value(i, u, op, srcs)
  name = dtype_name(i, u, u.dtype)
  lanes = tuple(w.add(op, name, (), "ALU", None, tuple(w.lane(s, k) for s in srcs)) for k in range(n))
  return w.value(i, u, "STACK", lanes)

def rule_renamed_op(w: _Walk, i: int, u: UOp) -> int:
  """Rule 11: RECIP is RECIPROCAL, IDIV is CDIV, MOD is CMOD, VECTORIZE is STACK."""
  if u.op is Ops.VECTORIZE: return w.value(i, u, "STACK", tuple(w.src(i, s) for s in u.src))
  return _alu(w, i, u, RENAMED[u.op])

def rule_same_op(w: _Walk, i: int, u: UOp) -> int:
  """The ALU ops, CAST, BITCAST, WHERE, MULACC, THREEFRY: the same op and srcs (rule 20 for vectors)."""
  return _alu(w, i, u, u.op.name)

def rule_range_start(w: _Walk, i: int, u: UOp) -> int | None:
  """Rule 13: RANGE (0, end) is RANGE (end) axis i; RANGE (start, end) is RANGE (end - start) + start. ENDRANGE is
  END (GROUP (the loop's STOREs), RANGE)."""
  if u.op is Ops.ENDRANGE:
    stores = w.loop_stores.pop()
    w.scope.pop()
    group = w.add("GROUP", "void", None, None, None, tuple(stores))
    w.add("END", "void", None, None, None, (group, w.ranges[u.src[0]]))
    return None
  start, end = (w.src(i, s) for s in u.src)
  p = w.program.uops[u.src[0]]
  zero = p.op is Ops.CONST and p.arg == 0
  count = end if zero else w.add("SUB", "int", (), "ALU", None, (end, start))
  rng = w.add("RANGE", "int", (), "ALU", (w.axis_id(i), "LOOP"), (count,))
  w.loop_stores.append([])
  w.scope.append(i)
  w.ranges[i] = rng  # ENDRANGE names the RANGE itself
  return rng if zero else w.add("ADD", "int", (), "ALU", None, (rng, start))

def rule_order_srcs(w: _Walk, i: int, u: UOp) -> int | None:
  """Rule 14: BARRIER is BARRIER (the STOREs since the last one); IF (gate) and ENDIF (IF) are the same."""
  if u.op is Ops.BARRIER:
    w.add("BARRIER", "void", None, None, None, tuple(w.since_barrier))
    w.since_barrier = []
    return None
  if u.op is Ops.IF:
    w.scope.append(i)
    return w.add("IF", "void", None, None, None, (w.src(i, u.src[0]),))
  w.scope.pop()
  w.add("ENDIF", "void", None, None, None, (w.to_rec[u.src[0]],))
  return None

def rule_special_size(w: _Walk, i: int, u: UOp) -> int:
  """Rule 15: SPECIAL (name, size) is SPECIAL (size) named name."""
  name, size = u.arg
  return w.add("SPECIAL", "int", (), "ALU", name, (w.const(int(size), "int"),))

def rule_rejected(w: _Walk, i: int, u: UOp) -> None:
  raise ExportError(i, u.op, "refimpl's one-thread WMMA (arg (N, M, K)) has no tinygrad 0.14 form")

EXPORT_RULES: dict[str, Callable[[_Walk, int, UOp], int | None]] = {
  "typed-const": rule_typed_const, "param-buffer": rule_param_buffer, "param-var": rule_param_var,
  "local-buffer": rule_local_buffer, "reg-accumulator": rule_reg_accumulator, "index": rule_index, "load": rule_load,
  "store": rule_store, "lane-index": rule_lane_index, "renamed-op": rule_renamed_op, "same-op": rule_same_op,
  "range-start": rule_range_start, "order-srcs": rule_order_srcs, "special-size": rule_special_size,
  "rejected": rule_rejected}
RULE_OF_OP: dict[Ops, str] = {
  Ops.CONST: "typed-const", Ops.DEFINE_GLOBAL: "param-buffer", Ops.DEFINE_VAR: "param-var",
  Ops.DEFINE_LOCAL: "local-buffer", Ops.DEFINE_ACC: "reg-accumulator", Ops.ASSIGN: "reg-accumulator",
  Ops.INDEX: "index", Ops.LOAD: "load", Ops.STORE: "store", Ops.GEP: "lane-index",
  **dict.fromkeys(RENAMED, "renamed-op"), **dict.fromkeys(SAME_NAME, "same-op"),
  Ops.RANGE: "range-start", Ops.ENDRANGE: "range-start", **dict.fromkeys((Ops.BARRIER, Ops.IF, Ops.ENDIF), "order-srcs"),
  Ops.SPECIAL: "special-size", Ops.WMMA: "rejected"}


def _order(uops: tuple[UOp, ...]) -> list[int]:
  """The walk's order: DEFINE_GLOBALs by number, DEFINE_VARs, then the rest as listed."""
  order = sorted((i for i, u in enumerate(uops) if u.op is Ops.DEFINE_GLOBAL), key=lambda i: uops[i].arg)
  order += [i for i, u in enumerate(uops) if u.op is Ops.DEFINE_VAR]
  placed = set(order)
  return order + [i for i in range(len(uops)) if i not in placed]


def to_record(program: Program, name: str | None = None) -> KernelRecord:
  """tinygrad 0.14's linearized form of `program` as a KernelRecord (module docstring). ExportError for what 0.14 has no
  form for, ProgramError for an invalid program."""
  program = verify(program)
  w = _Walk(program, lanes=_lanes(program))
  for i in _order(program.uops):
    u = program.uops[i]
    rule = RULE_OF_OP.get(u.op)
    if rule is None: raise ExportError(i, u.op, f"{u.op.name} has no tinygrad 0.14 form")
    rec = EXPORT_RULES[rule](w, i, u)
    if rec is not None: w.to_rec[i] = rec
  kname = name or program.name
  w.add("SINK", "void", None, None, {"name": kname}, ())
  return KernelRecord(kname, tuple(w.out), tuple(program.global_size), tuple(program.local_size))
