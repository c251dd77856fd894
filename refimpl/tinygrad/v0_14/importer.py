"""Translate a tinygrad 0.14 linearized kernel (a KernelRecord, record.py) into a refimpl `Program`.

`translate(record)` walks the uops once, in order. Each becomes one refimpl uop, an alias of an earlier one, nothing (it
only orders or groups), or is rejected with `TranslationError` naming the uop. Ops keep their names except where a rule
below renames them. Where 0.14's form departs from refimpl's IR one of these rules rewrites it (TRANSLATION_RULES):

   1 weak-const       a CONST of a weak type (weakint, weakfloat) emits nothing: the CAST that types it is the CONST
   2 typed-const      CAST of a weak CONST is a CONST of the CAST's dtype (a float rounded as tinygrad's C renderers
                      round a literal, an fp8 one saturating as rule 21; an int wrapped as C's `-1u`)
   3 param-buffer     PARAM in GLOBAL memory is DEFINE_GLOBAL, numbered in list order, T.ptr(its element count)
   4 param-var        PARAM in the ALU space (a symbolic variable) is DEFINE_VAR (name, min, max)
   5 local-buffer     BUFFER in LOCAL memory is DEFINE_LOCAL, T.ptr(size, local=True)
   6 reg-accumulator  BUFFER in REG memory emits nothing; each element it is indexed at by a constant is an accumulator:
                      the first STORE to it is DEFINE_ACC (value), the later ones ASSIGN, and a LOAD of it reads it
   7 ordering-alias   AFTER (x, deps...) is x: refimpl's order is the list order; NOOP is its src
   8 no-op            SINK (its arg names the kernel), GROUP and an empty STACK emit nothing
   9 shrink-vector    SHRINK (buffer, offset, n) is INDEX (buffer, offset): a LOAD of it is a LOAD of T.vec(n), a STORE
                      of n values a vector STORE (refimpl's vector access: n consecutive elements)
  10 lane-index       INDEX of a vector value by a constant k is GEP (k,)
  11 renamed-op       RECIPROCAL is RECIP, CDIV is IDIV, CMOD is MOD (both truncate, as C does), STACK is VECTORIZE
  12 cmpeq            CMPEQ (a, b) is XOR (CMPNE (a, b), true)
  13 range-start      RANGE (end) is RANGE (0, end) with the axis id as its id; END (x, RANGE) is ENDRANGE (RANGE)
  14 order-srcs       BARRIER's srcs (the STOREs it orders) and IF's srcs after the gate are dropped
  15 special-size     SPECIAL name (size) is SPECIAL (name, size): a constant size, else the launched dimension
  16 function-name    the kernel's name (SINK's arg, "E_(n*4)" for a symbolic shape) is a C identifier: "E_n_4"
  17 (no rule)        TRUNC keeps its name: it is refimpl's TRUNC (alu.trunc: round toward zero, the sign kept), as
                      the ALU ops are theirs; a target with no TRUNC gets it written with other ops by refimpl.lower.trunc
  18 concrete-const   a CONST of a concrete dtype (bool, an int or a float type: 0.14's CPU and CL kernels have them,
                      its PYTHON ones type every constant by a CAST) is a CONST of that dtype, its value typed as rule 2
  19 core-id          PARAM core_id in the ALU space (0.14's CPU threads: its runtime calls the kernel once per
                      core_id in range(global_size[0]), passing no value for it) is SPECIAL ("gidx0", max + 1): a grid
                      of that many lanes, as the CPU runs it
  21 fp8-saturate     CAST x to an fp8 dtype saturates, as tinygrad 0.14 converts (its dtype.float_to_fp8): a finite x
                      beyond the format's largest finite value L (fp8e4m3 448, fp8e5m2 57344) is first made +-L with
                      refimpl's ops, then CAST (refimpl's rule: one rounding; an infinity stays one, so fp8e4m3's NaN and
                      fp8e5m2's inf; NaN stays NaN). The program so spells the saturating rule it chooses; refimpl's
                      CAST alone overflows to inf (fp8e4m3: NaN), tinygrad 0.10.1's rule
  22 fp8-arithmetic   an ALU op on fp8 values (refimpl keeps fp8 storage and casts only) computes on them CAST to
                      float32 (exact), and an fp8 result is CAST back saturating (rule 21): one rounding, as 0.14's
                      renderers lower fp8 arithmetic; a comparison compares the float32 values

DEFINE_GLOBALs are numbered in list order, which is the order the kernel is called with its buffers.

What refimpl cannot express raises TranslationError: a do-while END (x, RANGE, cond), a REG buffer indexed by a value
that is not a constant, a vector REG access, an INDEX of a vector value by a non-constant, a value of more than one
dimension, WMMA, CUSTOM, INS, CALL and any op refimpl does not have. A translated
program that breaks an IR rule raises TranslationError naming the tinygrad uop and the rule.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from refimpl.dtype import DType, dtypes, truncate
from refimpl.ir.ops import Ops
from refimpl.ir.program import Program, UOp
from refimpl.ir.verify import ProgramError, verify
from refimpl.tinygrad.translation import FLOAT_CONST_ROUNDING, Translation, TranslationError
from refimpl.tinygrad.v0_14.record import KernelRecord, Rec, float_of

__all__ = ["TRANSLATION_RULES", "TranslationError", "from_record", "translate"]

WEAK = ("weakint", "weakfloat")
RENAMED = {"RECIPROCAL": "RECIP", "CDIV": "IDIV", "CMOD": "MOD", "STACK": "VECTORIZE"}
# the ops that keep their name and form (the ALU ops, conversions, ENDIF)
SAME_NAME = frozenset({"EXP2", "LOG2", "SIN", "SQRT", "NEG", "TRUNC", "ADD", "SUB", "MUL", "FDIV", "MAX", "CMPLT", "CMPNE",
                       "XOR", "OR", "AND", "SHL", "SHR", "THREEFRY", "WHERE", "MULACC", "CAST", "BITCAST", "ENDIF"})
REJECTED = {"WMMA": "tinygrad 0.14's WMMA (warp fragments) has no refimpl form", "CUSTOM": "inline source code",
            "CUSTOMI": "inline source code", "INS": "a machine instruction", "CALL": "a call of native code"}


@dataclass
class _Ctx:
  """What the walk knows: the record, record index -> refimpl index, the output and the rules that fired."""
  k: KernelRecord
  out: list[UOp] = field(default_factory=list)
  to_ref: dict[int, int] = field(default_factory=dict)
  weak: dict[int, float | int] = field(default_factory=dict)        # rule 1: a weak CONST's value
  reg_at: dict[int, tuple[int, int]] = field(default_factory=dict)  # rule 6: an INDEX into a REG buffer -> (buffer, k)
  accs: dict[tuple[int, int], int] = field(default_factory=dict)    # rule 6: (buffer, k) -> its DEFINE_ACC
  shrink: dict[int, int] = field(default_factory=dict)              # rule 9: a SHRINK's record index -> its n
  nglobals: int = 0
  nlocals: int = 0
  fired: dict[str, list[int]] = field(default_factory=dict)

  def fire(self, rule: str, i: int) -> None: self.fired.setdefault(rule, []).append(i)
  def ref(self, i: int, j: int) -> int:
    """The refimpl index of src j of uop i (an error when j emitted nothing)."""
    if j not in self.to_ref: raise TranslationError(i, self.k.uops[i].op, f"src {j} ({self.k.uops[j].op}) has no value here")
    return self.to_ref[j]
  def emit(self, i: int, op: Ops, dt: DType, src: tuple[int, ...] = (), arg=None) -> int:
    self.out.append(UOp(op, dt, src, arg))
    self.to_ref[i] = len(self.out) - 1
    return self.to_ref[i]


def _scalar(i: int, r: Rec) -> DType:
  dt = getattr(dtypes, r.dtype, None)
  if not isinstance(dt, DType) or r.dtype in WEAK: raise TranslationError(i, r.op, f"dtype {r.dtype} has no refimpl equivalent")
  return dt

def _value_dtype(i: int, r: Rec) -> DType:
  """A value's dtype: the scalar, or T.vec(n) for shape (n,)."""
  dt, shape = _scalar(i, r), r.shape or ()
  if len(shape) > 1: raise TranslationError(i, r.op, f"a value of shape {shape}: refimpl's values are scalars or vectors")
  return dt.vec(shape[0]) if shape and shape[0] > 1 else dt

def _constant(c: _Ctx, j: int) -> int | None:
  """The int value of record uop j when it is a constant (a weak CONST, or a CAST of one), else None."""
  r = c.k.uops[j]
  if j in c.weak: return int(c.weak[j])
  if r.op == "CAST" and r.src and r.src[0] in c.weak: return int(c.weak[r.src[0]])
  if r.op == "CONST" and isinstance(r.arg, int): return r.arg
  return None


# ***** the rules: each takes (ctx, record index, uop) and emits, aliases or skips *****

def rule_weak_const(c: _Ctx, i: int, r: Rec) -> None:
  """Rule 1: a CONST of a weak type emits nothing; the CAST that types it is the CONST (rule 2)."""
  c.weak[i] = float_of(r.arg) if isinstance(r.arg, dict) else r.arg

def _typed(i: int, dt: DType, value: float | int) -> float | int | bool:
  if dt == dtypes.bool: return bool(value)
  if dtypes.is_int(dt): return int(truncate[dt](int(value)))
  if dt in FP8_LARGEST: return _fp8_const(dt, float(value))
  if math.isnan(value) or math.isinf(value): return float(value)
  rnd = FLOAT_CONST_ROUNDING.get(dt)
  if rnd is None: raise TranslationError(i, "CAST", f"no known rendering of a {dt!r} constant")
  return rnd(float(value))

def _fp8_const(dt: DType, value: float) -> float:
  """An fp8 constant as tinygrad 0.14 types one (its float_to_fp8, as rule 21 converts): a finite value past +-L is
  +-L, then one rounding to nearest even; an infinity is fp8e4m3's NaN, fp8e5m2's inf; NaN stays NaN."""
  largest = FP8_LARGEST[dt]
  if math.isfinite(value): value = max(-largest, min(largest, value))
  return float(truncate[dt](value))

def rule_typed_const(c: _Ctx, i: int, r: Rec) -> None:
  """Rule 2: CAST of a weak CONST is a CONST of the CAST's dtype: a float rounded as tinygrad's C renderers round a
  literal (to nearest even through float32 for float32, half and bfloat16; an fp8 one saturating, _fp8_const), an int
  wrapped modulo 2**bits."""
  dt = _scalar(i, r)
  c.emit(i, Ops.CONST, dt, (), _typed(i, dt, c.weak[r.src[0]]))

def rule_concrete_const(c: _Ctx, i: int, r: Rec) -> None:
  """Rule 18: a CONST of a concrete dtype (not weak) is a CONST of that dtype, its value typed as rule 2 types one."""
  if r.shape not in (None, ()): raise TranslationError(i, r.op, f"a CONST of shape {r.shape} (a vector constant)")
  dt = _scalar(i, r)
  c.emit(i, Ops.CONST, dt, (), _typed(i, dt, float_of(r.arg) if isinstance(r.arg, dict) else r.arg))

def rule_param_buffer(c: _Ctx, i: int, r: Rec) -> None:
  """Rule 3: PARAM in GLOBAL memory is DEFINE_GLOBAL number n (list order), T.ptr(its element count)."""
  size = math.prod(r.shape or (1,))
  c.emit(i, Ops.DEFINE_GLOBAL, _scalar(i, r).ptr(size), (), c.nglobals)
  c.nglobals += 1

def rule_param_var(c: _Ctx, i: int, r: Rec) -> None:
  """Rule 4: PARAM in the ALU space (a symbolic variable, bound at launch) is DEFINE_VAR (name, min, max)."""
  a = r.arg
  c.emit(i, Ops.DEFINE_VAR, dtypes.int32, (), (a["name"], int(a["min"]), int(a["max"])))

def rule_core_id(c: _Ctx, i: int, r: Rec) -> None:
  """Rule 19: PARAM core_id (ALU) is SPECIAL ("gidx0", max + 1): 0.14's CPU runtime calls the kernel once per core_id
  in range(global_size[0]) and passes no value for it (ProgramInfo.vals gives None), so it is the lane's grid index."""
  c.emit(i, Ops.SPECIAL, dtypes.int32, (), ("gidx0", int(r.arg["max"]) + 1))

def rule_local_buffer(c: _Ctx, i: int, r: Rec) -> None:
  """Rule 5: BUFFER in LOCAL memory is DEFINE_LOCAL temp<n>, T.ptr(size, local=True)."""
  c.emit(i, Ops.DEFINE_LOCAL, _scalar(i, r).ptr(math.prod(r.shape or (1,)), local=True), (), f"temp{c.nlocals}")
  c.nlocals += 1

def rule_reg_accumulator(c: _Ctx, i: int, r: Rec) -> None:
  """Rule 6: a REG buffer emits nothing; its elements, each indexed by a constant, are accumulators (reg_index,
  reg_store, reg_load)."""

def _buffer_of(c: _Ctx, j: int) -> int:
  """Record uop j with AFTERs looked through."""
  while c.k.uops[j].op == "AFTER": j = c.k.uops[j].src[0]
  return j

def rule_ordering_alias(c: _Ctx, i: int, r: Rec) -> None:
  """Rule 7: AFTER (x, deps...) is x (refimpl's order is the list order); NOOP is its src."""
  if r.src[0] in c.to_ref: c.to_ref[i] = c.to_ref[r.src[0]]

def rule_no_op(c: _Ctx, i: int, r: Rec) -> None:
  """Rule 8: SINK, GROUP and an empty STACK only group uops: nothing is emitted."""

def rule_shrink_vector(c: _Ctx, i: int, r: Rec) -> None:
  """Rule 9: SHRINK (buffer, offset, n) is INDEX (buffer, offset); its LOAD or STORE moves n consecutive elements."""
  buf = c.ref(i, r.src[0])
  c.shrink[i] = math.prod(r.shape or (1,))
  c.emit(i, Ops.INDEX, c.out[buf].dtype, (buf, c.ref(i, r.src[1])))

def rule_lane_index(c: _Ctx, i: int, r: Rec) -> None:
  """Rule 10: INDEX of a vector value by a constant k is GEP (k,)."""
  k = _constant(c, r.src[1])
  if k is None: raise TranslationError(i, r.op, "a vector value indexed by a value that is not a constant")
  c.emit(i, Ops.GEP, _value_dtype(i, r), (c.ref(i, r.src[0]),), (k,))

def rule_cmpeq(c: _Ctx, i: int, r: Rec) -> None:
  """Rule 12: CMPEQ (a, b) is XOR (CMPNE (a, b), true)."""
  _cmpeq(c, i, _value_dtype(i, r), [c.ref(i, s) for s in r.src])

def _cmpeq(c: _Ctx, i: int, dt: DType, srcs: list[int]) -> int:
  ne = c.emit(i, Ops.CMPNE, dt, tuple(srcs))
  true = c.emit(i, Ops.CONST, dtypes.bool, (), True)
  if dt.count > 1: true = c.emit(i, Ops.VECTORIZE, dt, (true,) * dt.count)
  return c.emit(i, Ops.XOR, dt, (ne, true))

def rule_renamed_op(c: _Ctx, i: int, r: Rec) -> None:
  """Rule 11: RECIPROCAL is RECIP, CDIV is IDIV, CMOD is MOD (both truncate toward zero, as C does), STACK is
  VECTORIZE."""
  c.emit(i, Ops[RENAMED[r.op]], _value_dtype(i, r), tuple(c.ref(i, s) for s in r.src))

def _splat(c: _Ctx, i: int, value: float | int | bool, dt: DType) -> int:
  """A CONST of dt's scalar dtype, VECTORIZEd to dt's width when dt is a vector."""
  k = c.emit(i, Ops.CONST, dt.scalar(), (), value)
  return k if dt.count == 1 else c.emit(i, Ops.VECTORIZE, dt, (k,) * dt.count)

FP8_LARGEST = {dtypes.fp8e4m3: 448.0, dtypes.fp8e5m2: 57344.0}  # the largest finite value of each fp8 format

def _clamp(c: _Ctx, i: int, x: int, dt: DType, bound: float | int, above: bool) -> int:
  """x, with every finite lane beyond `bound` (above it, or below it) made `bound`; NaN and infinities stay x."""
  flags = dtypes.bool.vec(dt.count) if dt.count > 1 else dtypes.bool
  limit = _splat(c, i, bound, dt)
  beyond = c.emit(i, Ops.CMPLT, flags, (limit, x) if above else (x, limit))
  if dtypes.is_float(dt.scalar()):
    finite = c.emit(i, Ops.CMPNE, flags, (x, _splat(c, i, math.inf if above else -math.inf, dt)))
    beyond = c.emit(i, Ops.AND, flags, (beyond, finite))
  return c.emit(i, Ops.WHERE, dt, (beyond, limit, x))

def _saturating_cast(c: _Ctx, i: int, x: int, dt: DType) -> int:
  """Refimpl value x CAST to the fp8 dtype dt as tinygrad 0.14 converts (rule 21); the index of the result."""
  src = c.out[x].dtype
  if src.scalar() in FP8_LARGEST: x = c.emit(i, Ops.CAST, _widened(src), (x,))
  src = c.out[x].dtype
  largest = FP8_LARGEST[dt.scalar()]
  if dtypes.is_float(src.scalar()):
    x = _clamp(c, i, _clamp(c, i, x, src, largest, True), src, -largest, False)
  elif dtypes.is_int(src.scalar()):
    if dtypes.max(src.scalar()) > largest: x = _clamp(c, i, x, src, int(largest), True)
    if dtypes.min(src.scalar()) < -largest: x = _clamp(c, i, x, src, -int(largest), False)
  return c.emit(i, Ops.CAST, dt, (x,))

def _widened(dt: DType) -> DType:
  """float32 of dt's width: every fp8 value is a float32 value (fp8 is storage and casts only in refimpl's spec)."""
  return dtypes.float32.vec(dt.count) if dt.count > 1 else dtypes.float32

def rule_fp8_saturate(c: _Ctx, i: int, r: Rec) -> None:
  """Rule 21: CAST x to fp8 saturates (tinygrad 0.14's float_to_fp8): a finite x beyond the largest finite value L
  becomes +-L, then refimpl's CAST rounds it (an infinity stays one, NaN stays NaN). An fp8 x is CAST to float32 first
  (exact: fp8 is storage and casts only); a bool or an int whose range lies within +-L needs no clamp."""
  _saturating_cast(c, i, c.ref(i, r.src[0]), _value_dtype(i, r))

def rule_fp8_arithmetic(c: _Ctx, i: int, r: Rec) -> None:
  """Rule 22: an ALU op on fp8 values computes on them widened to float32 (exact) and rounds an fp8 result once back
  to fp8, saturating (rule 21), as tinygrad 0.14's renderers lower fp8 arithmetic (create_non_native_float_pats).
  Its emulator computes in float64 and rounds once: the same fp8 for ADD, SUB, MUL, FDIV and SQRT, whose float32
  result is correctly rounded and float32 holds more than 2p + 2 of fp8's p bits (a second rounding then cannot
  change the first's result). A comparison compares the widened values."""
  srcs = []
  for s in r.src:
    x = c.ref(i, s)
    if c.out[x].dtype.scalar() in FP8_LARGEST: x = c.emit(i, Ops.CAST, _widened(c.out[x].dtype), (x,))
    srcs.append(x)
  dt = _value_dtype(i, r)
  if r.op == "CMPEQ": return _cmpeq(c, i, dt, srcs)
  wide = _widened(dt) if dt.scalar() in FP8_LARGEST else dt
  x = c.emit(i, Ops[RENAMED.get(r.op, r.op)], wide, tuple(srcs), r.arg)
  if wide != dt: _saturating_cast(c, i, x, dt)

def rule_range_start(c: _Ctx, i: int, r: Rec) -> None:
  """Rule 13: RANGE (end) is RANGE (0, end), its id the axis id; END (x, RANGE) is ENDRANGE (RANGE)."""
  if r.op == "END":
    if len(r.src) != 2: raise TranslationError(i, r.op, "a do-while loop (END with a condition)")
    c.emit(i, Ops.ENDRANGE, dtypes.void, (c.ref(i, r.src[1]),))
    return
  zero = c.emit(i, Ops.CONST, dtypes.int32, (), 0)
  c.emit(i, Ops.RANGE, dtypes.int32, (zero, c.ref(i, r.src[0])), int(r.arg[0]))

def rule_order_srcs(c: _Ctx, i: int, r: Rec) -> None:
  """Rule 14: BARRIER's srcs and IF's srcs after its gate are dropped (the list order orders them)."""
  if r.op == "BARRIER": c.emit(i, Ops.BARRIER, dtypes.void)
  else: c.emit(i, Ops.IF, dtypes.void, (c.ref(i, r.src[0]),))

def rule_special_size(c: _Ctx, i: int, r: Rec) -> None:
  """Rule 15: SPECIAL name (size) is SPECIAL (name, size): its constant size, else the dimension it was launched with."""
  size = _constant(c, r.src[0]) if r.src else None
  if size is None: size = (c.k.global_size if r.arg[0] == "g" else c.k.local_size)[int(r.arg[-1])]
  c.emit(i, Ops.SPECIAL, dtypes.int32, (), (r.arg, size))

TRANSLATION_RULES: dict[str, Callable] = {
  "weak-const": rule_weak_const, "typed-const": rule_typed_const, "param-buffer": rule_param_buffer,
  "param-var": rule_param_var, "local-buffer": rule_local_buffer, "reg-accumulator": rule_reg_accumulator,
  "ordering-alias": rule_ordering_alias, "no-op": rule_no_op, "shrink-vector": rule_shrink_vector,
  "lane-index": rule_lane_index, "renamed-op": rule_renamed_op, "cmpeq": rule_cmpeq, "range-start": rule_range_start,
  "order-srcs": rule_order_srcs, "special-size": rule_special_size,
  "concrete-const": rule_concrete_const, "core-id": rule_core_id, "fp8-saturate": rule_fp8_saturate,
  "fp8-arithmetic": rule_fp8_arithmetic}


# ***** memory: plain, vector (rule 9) and accumulator (rule 6) accesses *****

def _index(c: _Ctx, i: int, r: Rec) -> None:
  buf = _buffer_of(c, r.src[0])
  if c.k.uops[buf].addrspace == "REG":
    k = _constant(c, r.src[1])
    if k is None: raise TranslationError(i, r.op, "a REG buffer indexed by a value that is not a constant")
    c.reg_at[i] = (buf, k)
    c.fire("reg-accumulator", i)
    return
  ptr = c.ref(i, r.src[0])
  c.emit(i, Ops.INDEX, c.out[ptr].dtype, (ptr, c.ref(i, r.src[1])))

def _load(c: _Ctx, i: int, r: Rec) -> None:
  ptr = r.src[0]
  if ptr in c.reg_at:
    acc = c.accs.get(c.reg_at[ptr])
    if acc is None: raise TranslationError(i, r.op, "a REG element read before any STORE to it")
    c.to_ref[i] = acc
    return
  if (r.shape or ()) != () and ptr not in c.shrink: raise TranslationError(i, r.op, "a vector LOAD not through a SHRINK")
  c.emit(i, Ops.LOAD, _value_dtype(i, r), tuple(c.ref(i, s) for s in r.src))

def _store(c: _Ctx, i: int, r: Rec) -> None:
  ptr, value = r.src[0], c.ref(i, r.src[1])
  if ptr in c.reg_at:
    if (c.k.uops[r.src[1]].shape or ()) != (): raise TranslationError(i, r.op, "a vector STORE into a REG buffer")
    acc = c.accs.get(c.reg_at[ptr])
    if acc is None: c.accs[c.reg_at[ptr]] = c.emit(i, Ops.DEFINE_ACC, c.out[value].dtype, (value,), len(c.accs))
    else: c.emit(i, Ops.ASSIGN, c.out[value].dtype, (acc, value))
    return
  c.emit(i, Ops.STORE, dtypes.void, (c.ref(i, ptr), value))


# ***** the walk *****

FP8_ARITHMETIC = frozenset({"EXP2", "LOG2", "SIN", "SQRT", "NEG", "TRUNC", "RECIPROCAL", "ADD", "SUB", "MUL", "FDIV", "MAX",
                            "MULACC", "CMPLT", "CMPNE", "CMPEQ", "WHERE"})  # the ALU ops rule 22 computes on fp8

def _is_fp8(c: _Ctx, j: int) -> bool:
  return j in c.to_ref and c.out[c.to_ref[j]].dtype.scalar() in FP8_LARGEST

def _rule_of(c: _Ctx, r: Rec) -> str | None:
  """The rule that translates uop r, or None when it maps one to one."""
  op, space = r.op, r.addrspace
  if op == "CONST": return "weak-const" if r.dtype in WEAK else "concrete-const"
  if op == "CAST" and r.src and r.src[0] in c.weak: return "typed-const"
  if op == "CAST" and getattr(dtypes, r.dtype, None) in FP8_LARGEST: return "fp8-saturate"
  if op in FP8_ARITHMETIC and any(_is_fp8(c, j) for j in r.src): return "fp8-arithmetic"
  if op == "PARAM" and space == "ALU": return "core-id" if r.arg.get("name") == "core_id" else "param-var"
  if op == "PARAM": return "param-buffer"
  if op == "BUFFER": return {"LOCAL": "local-buffer", "REG": "reg-accumulator"}.get(space or "")
  if op in ("AFTER", "NOOP"): return "ordering-alias"
  if op in ("SINK", "GROUP") or (op == "STACK" and not r.src): return "no-op"
  if op == "SHRINK": return "shrink-vector"
  if op == "INDEX" and space == "ALU": return "lane-index"
  if op in RENAMED: return "renamed-op"
  return {"CMPEQ": "cmpeq", "RANGE": "range-start", "END": "range-start",
          "BARRIER": "order-srcs", "IF": "order-srcs", "SPECIAL": "special-size"}.get(op)

def _translate_uop(c: _Ctx, i: int, r: Rec) -> None:
  if any(s >= i for s in r.src): raise TranslationError(i, r.op, "a src that is not an earlier uop in the list")
  if r.op in REJECTED: raise TranslationError(i, r.op, REJECTED[r.op])
  rule = _rule_of(c, r)
  if rule is not None:
    c.fire(rule, i)
    TRANSLATION_RULES[rule](c, i, r)
    return
  if r.op == "INDEX": return _index(c, i, r)
  if r.op == "LOAD": return _load(c, i, r)
  if r.op == "STORE": return _store(c, i, r)
  if r.op not in SAME_NAME: raise TranslationError(i, r.op, f"{r.op} is not an op of refimpl's kernel language")
  if r.op == "ENDIF": return c.emit(i, Ops.ENDIF, dtypes.void, (c.ref(i, r.src[0]),))
  c.emit(i, Ops[r.op], _value_dtype(i, r), tuple(c.ref(i, s) for s in r.src), None if r.op in ("CAST", "BITCAST") else r.arg)


def rule_function_name(name: str) -> str | None:
  """Rule 16: the kernel's name as a C identifier (what a renderer names the function): every run of other characters
  is one "_" ("E_(n*4)" is "E_n_4"); None when it is one already."""
  ident = re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_") or "kernel"
  if ident[0].isdigit(): ident = "k_" + ident
  return None if ident == name else ident

TRANSLATION_RULES["function-name"] = rule_function_name


def translate(k: KernelRecord) -> Translation:
  """The verified Program of a tinygrad 0.14 kernel record, and which rules fired where (`Translation`)."""
  c = _Ctx(k)
  for i, r in enumerate(k.uops): _translate_uop(c, i, r)
  name = rule_function_name(k.name)
  if name is not None: c.fire("function-name", -1)
  program = Program(name or k.name, tuple(c.out), k.global_size, k.local_size)
  try: return Translation(verify(program), c.fired)
  except ProgramError as e:  # say which tinygrad uop the refimpl uop came from
    if e.index is None: raise TranslationError(None, None, f"its refimpl translation is not valid IR: {e}") from e
    tg_index = min(i for i, ref in c.to_ref.items() if ref == e.index)
    raise TranslationError(tg_index, k.uops[tg_index].op, f"its refimpl translation is not valid IR: {e}") from e


def from_record(k: KernelRecord) -> Program:
  """Translate a tinygrad 0.14 kernel record into a verified refimpl Program (TranslationError where it cannot)."""
  return translate(k).program
