"""Translate a tinygrad 0.10.1 linearized kernel into a refimpl `Program`.

`from_tinygrad(spec_or_uops)` walks tinygrad's linearized uop list once, in order. Each tinygrad uop becomes one
refimpl uop, or an alias of an earlier one (no uop emitted), or is rejected with `TranslationError`. Ops and dtypes
map by name (refimpl's `Ops` and `dtypes` use tinygrad's names). Where tinygrad's linearized form departs from
refimpl's IR (see `refimpl.ir`'s docstring) one of the thirteen rules below rewrites it; each is a small function in
`TRANSLATION_RULES`, in the order they are tried:

   1 noop-alias        NOOP (tinygrad puts one before some BITCASTs) is an alias of its src
   2 vector-ptr-cast   CAST of an INDEX to T.vec(n).ptr(size//n) is dropped: LOAD/STORE of T.vec(n) use the INDEX
   3 acc-srcs          DEFINE_ACC (init, *RANGEs) keeps (init,) (the RANGEs come after it in the list)
   4 acc-id            DEFINE_ACC's tuple arg ((0,), upcast (0, 0)..(0, 15)) becomes a fresh int id
   5 barrier-src       BARRIER (local STOREs) has no src (order is list order)
   6 if-barrier        IF (gate, BARRIER) is IF (gate,)
   7 load-barrier      LOAD (INDEX, IF) or (INDEX, BARRIER) after a barrier is LOAD (INDEX,)
   8 float-const       a float CONST not exact in its dtype is rounded as tinygrad's C renderers round it
   9 int-const         an int CONST out of its dtype's range wraps, as C's `-1u` does
  10 launch-none       launch dims that are None (CLANG kernels) are (1, 1, 1)
  11 special-size      a SPECIAL of symbolic size (symbolic shapes) takes the size the kernel was launched with
  12 unsized-pointer   a buffer pointer with no size (ptr(-1), hand-built kernels) takes its buffer's size at launch
  13 store-if          STORE (INDEX, value, IF) inside that IF's block is STORE (INDEX, value): the block gates it

Besides the rules, DEFINE_GLOBALs are numbered 0, 1, ... in list order (tinygrad's own numbers are the schedule
item's buffer numbers; the kernel is called with its buffers in that list order, `ProgramSpec.globals`).

Rules 11 and 12 need the launch (its dims, its buffers' sizes): a kernel that has such uops translates only when
`translate` is given them, which the REFIMPL device does at each launch (refimpl.tinygrad.v0_10.reference) and capture does
with the run it saw.

What refimpl cannot express raises `TranslationError` naming the uop index, the op and why: VCONST, a STORE gated
through an IF it is not inside, image dtypes, pointer CASTs other than rule 2, WMMA (tinygrad's warp-fragment arg form),
SPECIALs other than (gidx0-2 / lidx0-2, int size), symbolic launch dims or unsized buffers without the launch, and any
op refimpl does not have. A translated program that still breaks an IR rule (e.g. a shift whose count is uint32 while the value is
int32: refimpl's shifts take one dtype) raises TranslationError too, naming the tinygrad uop and the IR rule.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from refimpl.dtype import DType, dtypes, truncate
from refimpl.dtype import PtrDType as RefPtrDType
from refimpl.ir.ops import Ops
from refimpl.ir.program import Program, UOp
from refimpl.ir.verify import ProgramError, verify
from refimpl.tinygrad.translation import FLOAT_CONST_ROUNDING, Translation, TranslationError

__all__ = ["TRANSLATION_RULES", "TranslationError", "from_tinygrad", "translate_dtype"]


# ***** dtypes *****

def translate_dtype(dt: Any) -> DType:
  """tinygrad DType -> refimpl DType, by name: scalars, .vec(n), .ptr(size, local=...). Images are rejected."""
  from tinygrad.dtype import INVERSE_DTYPES_DICT, ImageDType, PtrDType
  if isinstance(dt, ImageDType): raise ValueError(f"image dtype {dt!r} has no refimpl equivalent")
  if isinstance(dt, PtrDType):
    base = translate_dtype(dt.base)
    if not isinstance(dt.size, int) or dt.size < 1: raise ValueError(f"pointer {dt!r} has no bounded size")
    return base.ptr(dt.size, local=dt.local)
  name = INVERSE_DTYPES_DICT.get(dt.scalar().name)
  scalar = dtypes.void if name == "void" else getattr(dtypes, name or "", None)
  if not isinstance(scalar, DType): raise ValueError(f"dtype {dt!r} has no refimpl equivalent")
  return scalar.vec(dt.count) if dt.count > 1 else scalar


# ***** the walk's state *****

@dataclass
class _Ctx:
  """What the walk knows: the tinygrad uops, tinygrad index -> refimpl index (aliases share one), the output."""
  tg: Sequence[Any]
  pos: dict[int, int] = field(default_factory=dict)   # id(tinygrad uop) -> its tinygrad index
  out: list[UOp] = field(default_factory=list)
  to_ref: dict[int, int] = field(default_factory=dict)  # tinygrad index -> refimpl index
  acc_ids: dict[Any, int] = field(default_factory=dict)
  nglobals: int = 0
  fired: dict[str, list[int]] = field(default_factory=dict)  # rule name -> tinygrad indices it rewrote
  launch: dict[str, int] = field(default_factory=dict)  # "gidx0" .. "lidx2" -> the launched size, when it is given
  sizes: Sequence[int] | None = None  # the launch's buffer sizes in elements, DEFINE_GLOBAL list order, when given

  def idx(self, u: Any) -> int: return self.pos[id(u)]
  def ref(self, u: Any) -> int: return self.to_ref[self.idx(u)]
  def fire(self, rule: str, i: int) -> None: self.fired.setdefault(rule, []).append(i)


@dataclass(frozen=True)
class Alias:
  """A rule's answer: tinygrad uop i is the refimpl uop of tinygrad uop `of` (no uop emitted)."""
  of: Any


def _is(u: Any, name: str) -> bool: return u.op.name == name


# ***** the rules: each takes (ctx, index, tinygrad uop, current (op, dtype, srcs, arg)) and returns a rewritten
# (op, dtype, srcs, arg), an Alias, or None when it does not apply. srcs are still tinygrad uops here. *****

Parts = tuple[Ops, DType, tuple, Any]

def rule_noop_alias(c: _Ctx, i: int, u: Any, p: Parts) -> Alias | None:
  """Rule 1: a NOOP (tinygrad puts one before some BITCASTs) is an alias of its src: no uop is emitted."""
  if _is(u, "NOOP") and len(u.src) == 1: return Alias(u.src[0])
  return None

def rule_vector_ptr_cast(c: _Ctx, i: int, u: Any, p: Parts) -> Alias | None:
  """Rule 2: a CAST of an INDEX to T.vec(n).ptr(size//n) (before a vector LOAD/STORE) is dropped: it aliases the
  INDEX, and the LOAD/STORE of T.vec(n) goes through the scalar INDEX (refimpl's vector access)."""
  from tinygrad.dtype import PtrDType
  if not (_is(u, "CAST") and isinstance(u.dtype, PtrDType)): return None
  s = u.src[0]
  if _is(s, "INDEX") and isinstance(s.dtype, PtrDType) and u.dtype.base.scalar() == s.dtype.base and u.dtype.base.count > 1:
    return Alias(s)
  raise TranslationError(i, "CAST", f"pointer CAST to {u.dtype!r} of {s.op.name} {s.dtype!r}: only INDEX -> vector pointer "
                                    "before a vector LOAD/STORE is translatable")

def rule_acc_srcs(c: _Ctx, i: int, u: Any, p: Parts) -> Parts | None:
  """Rule 3: DEFINE_ACC's srcs (init, *RANGEs) become (init,): the RANGEs follow it in the list, and refimpl implies
  the loops from where the ASSIGNs are."""
  op, dt, src, arg = p
  if op is Ops.DEFINE_ACC and len(src) > 1 and all(_is(r, "RANGE") for r in src[1:]): return (op, dt, src[:1], arg)
  return None

def rule_acc_id(c: _Ctx, i: int, u: Any, p: Parts) -> Parts | None:
  """Rule 4: DEFINE_ACC's tuple arg ((0,), upcast accumulators (0, 0)..(0, 15)) becomes an int id, a fresh one per
  distinct tuple (and per DEFINE_ACC: ids must be unique), numbered 0, 1, ... in list order."""
  op, dt, src, arg = p
  if op is not Ops.DEFINE_ACC or not isinstance(arg, tuple): return None
  key = (arg, i) if arg in c.acc_ids else arg
  c.acc_ids[key] = len(c.acc_ids)
  return (op, dt, src, c.acc_ids[key])

def rule_barrier_src(c: _Ctx, i: int, u: Any, p: Parts) -> Parts | None:
  """Rule 5: BARRIER's srcs (the local STOREs it orders) are dropped: in refimpl the list order is the order."""
  op, dt, src, arg = p
  if op is Ops.BARRIER and src: return (op, dt, (), arg)
  return None

def rule_if_barrier(c: _Ctx, i: int, u: Any, p: Parts) -> Parts | None:
  """Rule 6: IF (gate, BARRIER) becomes IF (gate,)."""
  op, dt, src, arg = p
  if op is Ops.IF and len(src) == 2 and _is(src[1], "BARRIER"): return (op, dt, src[:1], arg)
  return None

def rule_load_barrier(c: _Ctx, i: int, u: Any, p: Parts) -> Parts | None:
  """Rule 7: LOAD (INDEX, IF) or LOAD (INDEX, BARRIER) (a load after a barrier, ordered through the IF that holds it or
  the BARRIER itself) becomes LOAD (INDEX,): the barrier comes before it in the list."""
  op, dt, src, arg = p
  if op is Ops.LOAD and len(src) == 2 and (_is(src[1], "IF") or _is(src[1], "BARRIER")): return (op, dt, src[:1], arg)
  return None

def rule_float_const(c: _Ctx, i: int, u: Any, p: Parts) -> Parts | None:
  """Rule 8: a float CONST that is not exact in its dtype (1.4426950408889634 or 1e-05 in float32) is rounded as
  tinygrad's C renderers round it: float32 like C's strtof of the literal, to nearest even from the float64 value;
  half and bfloat16 through float32 (they render as a cast of a float literal). Note that tinygrad's own PYTHON
  emulator keeps the float64 value (and computes with it before rounding the result), while its C backends use the
  rounded one: results can differ from the PYTHON device's in the last bit where such a constant is used."""
  op, dt, src, arg = p
  if op is not Ops.CONST or not dtypes.is_float(dt) or isinstance(arg, bool): return None
  x = float(arg)
  if math.isnan(x) or math.isinf(x): return None if type(arg) is float else (op, dt, src, x)
  rnd = FLOAT_CONST_ROUNDING.get(dt.scalar())
  if rnd is None: raise TranslationError(i, "CONST", f"no known rendering of a {dt!r} constant")
  y = rnd(x)
  if y == x and type(arg) is float and math.copysign(1, y) == math.copysign(1, x): return None
  return (op, dt, src, y)

def rule_int_const(c: _Ctx, i: int, u: Any, p: Parts) -> Parts | None:
  """Rule 9: an int CONST out of its dtype's range (uint32 -1, -127 in a uint) wraps modulo 2**bits, as C's `-1u`."""
  op, dt, src, arg = p
  if op is not Ops.CONST or not dtypes.is_int(dt): return None
  if type(arg) is float:
    if not arg.is_integer(): raise TranslationError(i, "CONST", f"non-integer value {arg!r} for an {dt!r} CONST")
    arg = int(arg)
  v = truncate[dt](int(arg))
  return None if v == arg and type(arg) is int else (op, dt, src, v)

def rule_launch_none(dims: Any) -> tuple[int, int, int] | None:
  """Rule 10: launch dims that are None (CLANG kernels have no launch grid) are (1, 1, 1)."""
  return (1, 1, 1) if dims is None else None

def rule_special_size(c: _Ctx, i: int, u: Any, p: Parts) -> Parts | None:
  """Rule 11: a SPECIAL whose size is symbolic (a symbolic shape: ('gidx0', n*4)) takes the size the kernel was
  launched with (the global_size / local_size given to the translation): the program is the kernel at its var values."""
  op, dt, src, arg = p
  if op is not Ops.SPECIAL or not (isinstance(arg, tuple) and len(arg) == 2) or type(arg[1]) is int: return None
  size = c.launch.get(arg[0])
  return None if size is None else (op, dt, src, (arg[0], size))

def rule_unsized_pointer(c: _Ctx, i: int, u: Any) -> DType | None:
  """Rule 12: a buffer pointer with no size (tinygrad's ptr(-1), which hand-built kernels use) is sized by the buffer
  bound at launch: DEFINE_GLOBAL number k takes the launch's k-th buffer size, and a uop derived from it (INDEX)
  its buffer's. Without the launch's sizes the kernel does not translate."""
  from tinygrad.dtype import PtrDType
  dt = u.dtype
  if not isinstance(dt, PtrDType) or dt.local or (isinstance(dt.size, int) and dt.size >= 1): return None
  if u.op.name == "DEFINE_GLOBAL":
    if c.sizes is None or c.nglobals >= len(c.sizes):
      raise TranslationError(i, u.op.name, f"pointer {dt!r} has no size: it takes its buffer's at launch (buffer_sizes)")
    size = c.sizes[c.nglobals]
  else:
    of = c.out[c.ref(u.src[0])].dtype if u.src and id(u.src[0]) in c.pos else None
    if not isinstance(of, RefPtrDType): return None
    size = of.size
  return translate_dtype(dt.base).ptr(size)

def rule_store_if(c: _Ctx, i: int, u: Any, p: Parts) -> Parts | None:
  """Rule 13: STORE (INDEX, value, IF) (a gated STORE: tinygrad puts it in an IF block on its gate) is STORE (INDEX,
  value): the block around it gates it. A STORE after that IF's ENDIF does not translate."""
  op, dt, src, arg = p
  if op is not Ops.STORE or len(src) != 3 or not _is(src[2], "IF"): return None
  block = c.ref(src[2])
  if any(x.op is Ops.ENDIF and x.src[0] == block for x in c.out):
    raise TranslationError(i, "STORE", "a STORE gated through an IF whose block has ended")
  return (op, dt, src[:2], arg)

UopRule = Callable[[_Ctx, int, Any, Parts], Any]
TRANSLATION_RULES: dict[str, UopRule | Callable] = {
  "noop-alias": rule_noop_alias, "vector-ptr-cast": rule_vector_ptr_cast, "acc-srcs": rule_acc_srcs, "acc-id": rule_acc_id,
  "barrier-src": rule_barrier_src, "if-barrier": rule_if_barrier, "load-barrier": rule_load_barrier,
  "float-const": rule_float_const, "int-const": rule_int_const, "launch-none": rule_launch_none,
  "special-size": rule_special_size, "unsized-pointer": rule_unsized_pointer, "store-if": rule_store_if}
ALIAS_RULES = ("noop-alias", "vector-ptr-cast")
PART_RULES = ("acc-srcs", "acc-id", "barrier-src", "if-barrier", "load-barrier", "float-const", "int-const", "special-size",
              "store-if")


# ***** checks of what refimpl cannot express *****

SPECIAL_NAMES = tuple(f"{p}idx{d}" for p in "gl" for d in range(3))

def _check(c: _Ctx, i: int, u: Any, p: Parts) -> None:
  """Raise TranslationError for a translated uop refimpl cannot express (after the rules)."""
  op, _, src, arg = p
  name = u.op.name
  if op is Ops.WMMA: raise TranslationError(i, name, f"tinygrad's WMMA arg {arg!r} (warp fragments) has no refimpl form")
  if op is Ops.SPECIAL and not (isinstance(arg, tuple) and len(arg) == 2 and arg[0] in SPECIAL_NAMES and type(arg[1]) is int):
    raise TranslationError(i, name, f"SPECIAL arg {arg!r}: refimpl takes (name, int size) with gidx0-2 / lidx0-2 names")
  if op is Ops.DEFINE_ACC and len(src) != 1: raise TranslationError(i, name, f"DEFINE_ACC srcs {[s.op.name for s in src]}")
  if op in (Ops.IF, Ops.LOAD, Ops.STORE, Ops.BARRIER):
    if any(_is(s, "BARRIER") or (op is not Ops.STORE and _is(s, "IF")) for s in src):
      raise TranslationError(i, name, f"ordering srcs {[s.op.name for s in src]} that refimpl cannot express")


def _translate_uop(c: _Ctx, i: int, u: Any) -> None:
  name = u.op.name
  for rule in ALIAS_RULES:
    a = TRANSLATION_RULES[rule](c, i, u, None)
    if a is not None:
      c.fire(rule, i)
      if c.pos.get(id(a.of), i) >= i: raise TranslationError(i, name, f"src {a.of.op.name} is not an earlier uop in the list")
      c.to_ref[i] = c.ref(a.of)
      return
  if name == "VCONST": raise TranslationError(i, name, "vector constants: refimpl builds them as a VECTORIZE of CONSTs")
  if name not in Ops.__members__: raise TranslationError(i, name, f"{name} is not an op of refimpl's kernel language")
  try: dt = translate_dtype(u.dtype)
  except ValueError as e:
    sized = rule_unsized_pointer(c, i, u)
    if sized is None: raise TranslationError(i, name, str(e)) from None
    c.fire("unsized-pointer", i)
    dt = sized
  if isinstance(u.arg, tuple) and name == "DEFINE_GLOBAL": raise TranslationError(i, name, f"arg {u.arg!r}")
  p: Parts = (Ops[name], dt, tuple(u.src), u.arg)
  for rule in PART_RULES:
    q = TRANSLATION_RULES[rule](c, i, u, p)
    if q is not None:
      c.fire(rule, i)
      p = q
  _check(c, i, u, p)
  op, dt, src, arg = p
  if op is Ops.DEFINE_GLOBAL:
    arg, c.nglobals = c.nglobals, c.nglobals + 1
  for s in src:
    if id(s) not in c.pos or c.idx(s) >= i: raise TranslationError(i, name, f"src {s.op.name} is not an earlier uop in the list")
  c.out.append(UOp(op, dt, tuple(c.ref(s) for s in src), arg))
  c.to_ref[i] = len(c.out) - 1


def _dims(dims: Any, what: str, fired: dict[str, list[int]]) -> tuple[int, int, int]:
  d = rule_launch_none(dims)
  if d is not None:
    fired.setdefault("launch-none", []).append(-1)
    return d
  dims = tuple(dims)
  if not all(isinstance(x, int) for x in dims): raise TranslationError(None, None, f"{what} {dims!r} is symbolic or not ints")
  return (*dims, *(1,) * (3 - len(dims)))[:3]


def translate(spec_or_uops: Any, name: str | None = None, global_size: Sequence[int] | None = None,
              local_size: Sequence[int] | None = None, buffer_sizes: Sequence[int] | None = None) -> Translation:
  """`from_tinygrad`, also returning which rules fired where (see `Translation`)."""
  uops = getattr(spec_or_uops, "uops", spec_or_uops)
  if uops is None: raise TranslationError(None, None, "the ProgramSpec has no uops")
  uops = list(uops)
  is_spec = hasattr(spec_or_uops, "uops")
  if name is None: name = getattr(spec_or_uops, "function_name", None) or "kernel"
  c = _Ctx(uops, pos={id(u): i for i, u in enumerate(uops)}, sizes=buffer_sizes)
  for prefix, dims in (("gidx", global_size), ("lidx", local_size)):
    if dims is None or not all(isinstance(x, int) for x in dims): continue
    c.launch.update({f"{prefix}{d}": x for d, x in enumerate(dims)})
  for i, u in enumerate(uops): _translate_uop(c, i, u)
  specials = {u.arg[0]: u.arg[1] for u in c.out if u.op is Ops.SPECIAL}
  def dims(given, attr, prefix):
    if given is not None: return _dims(given, attr, c.fired)
    if is_spec: return _dims(getattr(spec_or_uops, attr), attr, c.fired)
    return tuple(specials.get(f"{prefix}{d}", 1) for d in range(3))
  program = Program(name, tuple(c.out), dims(global_size, "global_size", "gidx"), dims(local_size, "local_size", "lidx"))
  try: return Translation(verify(program), c.fired)
  except ProgramError as e:  # say which tinygrad uop the refimpl uop came from
    if e.index is None: raise
    tg_index = min(i for i, r in c.to_ref.items() if r == e.index)
    raise TranslationError(tg_index, uops[tg_index].op.name, f"its refimpl translation is not valid IR: {e}") from e


def from_tinygrad(spec_or_uops: Any, name: str | None = None, global_size: Sequence[int] | None = None,
                  local_size: Sequence[int] | None = None, buffer_sizes: Sequence[int] | None = None) -> Program:
  """Translate a tinygrad 0.10.1 linearized kernel into a verified refimpl Program.

  spec_or_uops: a `tinygrad.renderer.ProgramSpec` (its `.uops`, `.global_size`/`.local_size`, `.function_name`) or
  the linearized list of tinygrad UOps itself (then the launch dims come from the SPECIALs). name, global_size,
  local_size override the spec's (pass the dims a CompiledRunner actually launched with); buffer_sizes are the sizes
  (elements) of the buffers it is launched with, in DEFINE_GLOBAL list order (rule 12 needs them for unsized pointers).
  Raises TranslationError for what refimpl cannot express, a translation that breaks an IR rule (`refimpl.ir.verify`)
  included."""
  return translate(spec_or_uops, name, global_size, local_size, buffer_sizes).program
