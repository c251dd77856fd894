"""uops_of(record, renderer): a KernelRecord (record.py) as the linear list of tinygrad 0.14 UOps its renderers'
`render(uops)` take: the inverse of live.record_of. Needs tinygrad 0.14.

Each record uop becomes `UOp(op, dtype, srcs, arg)` with the arg 0.14 gives it (ParamArg for PARAM and BUFFER,
KernelInfo for SINK, (axis id, AxisType) for RANGE, the value for CONST, the name for SPECIAL); shapes and address
spaces are not built, 0.14 derives them from the srcs, as record_of read them. tinygrad 0.14's UOps are hash-consed
(two uops of one op, dtype, srcs and arg are one object, and a CONST of -0.0 is one of 0.0): every uop is tagged with
its record index, so that two LOADs of one address around a STORE stay two loads; 0.14's renderers read no tag.

With a renderer, each uop is first rewritten as 0.14's `full_rewrite_to_sink` finishes a kernel for that renderer, by
0.14's own pattern matchers, in its order (first, a vector LOAD or STORE 0.14's memory_coalescing would not have made,
of a dtype it does not fold or at an offset it cannot prove aligned, becomes n scalar ones; refimpl's MULACC becomes
MUL then ADD where the renderer has no MULACC: the spec allows either rounding, and 0.14 makes MULACC only for
renderers that have it): the simplifying
decompositions of ops the renderer's `code_for_op` lacks (`get_simplifying_rewrite_patterns`: MAX -> CMPLT + WHERE,
THREEFRY), the late ones (`get_late_rewrite_patterns`: x*-1 -> NEG, x*2^k -> x << k, a CDIV by a constant -> a
multiply-shift, a*b+c -> MULACC where the renderer has MULACC, ...), the transcendental ones
(`get_transcendental_patterns`: xexp2, xlog2, xsin on CPU's C) and the renderer's `extra_matcher` (bfloat16 through
float32 on CPU, ...), with the weak constants they make committed (pm_commit_weak, pm_cast_weak); then every literal
is spelled CAST (CONST weak), as 0.14's `pm_casted_consts` spells it. 0.14's optimizing rewrites (symbolic, the
expander) are not applied: the kernel is refimpl's, as written. New uops
a rewrite makes are listed before the uop that uses them.
"""
from __future__ import annotations

from typing import Any

from refimpl.tinygrad.lines import require
from refimpl.tinygrad.v0_14.record import KernelRecord, Rec, float_of

__all__ = ["elf_signature", "lowering", "uops_of"]


def _arg(r: Rec, dtype: Any) -> Any:
  """0.14's arg of a record uop."""
  from tinygrad.dtype import AddrSpace
  from tinygrad.uop.ops import AxisType, KernelInfo, ParamArg
  a = r.arg
  if r.op == "CONST": return float_of(a) if isinstance(a, dict) else a
  if r.op in ("PARAM", "BUFFER"):
    bounds = None if a.get("min") is None else (a["min"], a["max"])
    return ParamArg(a["slot"], dtype, bounds, name=a.get("name"), addrspace=AddrSpace[r.addrspace])
  if r.op == "SINK": return KernelInfo(name=a["name"])
  if r.op == "RANGE": return (int(a[0]), AxisType[a[1]])
  if r.op == "SPECIAL": return a
  if a is not None: raise ValueError(f"a {r.op} arg {a!r} that no rule builds")
  return None


COALESCED = ("float", "half", "int", "uint")  # the buffer dtypes 0.14's memory_coalescing folds into vector access


def _coalesced(renderer: Any, shrink: Any) -> bool:
  """Whether 0.14's memory_coalescing could have made this SHRINK: a buffer of a COALESCED dtype, a renderer with
  vector types (supports_float4), an offset tinygrad proves a multiple of the width (its vector types are aligned)."""
  from tinygrad.dtype import dtypes as tdt
  buf, off, n = shrink.src[0], shrink.src[1], int(shrink.shape[0])
  ok = buf.dtype in tuple(getattr(tdt, d) for d in COALESCED) and bool(renderer.supports_float4)
  return ok and off.divides(n) is not None


def _lanes(x: Any, shrink: Any, op: str) -> list:
  """The n scalar accesses of a vector LOAD / STORE through `shrink`, lane k at offset + k (tagged apart)."""
  from tinygrad.uop.ops import Ops, UOp
  buf, off, n = shrink.src[0], shrink.src[1], int(shrink.shape[0])
  out = []
  for k in range(n):
    rest = tuple(a.index(k) if a.shape else a for a in x.src[1:])
    out.append(UOp(Ops[op], x.dtype, (buf.index(off + k if k else off),) + rest, None, (x.tag, k)))
  return out


def _split_load(ctx: Any, x: Any, s: Any) -> Any:
  from tinygrad.uop.ops import UOp
  return None if _coalesced(ctx, s) else UOp.stack(*_lanes(x, s, "LOAD"))


def _split_store(ctx: Any, x: Any, s: Any) -> Any:
  from tinygrad.uop.ops import UOp
  return None if _coalesced(ctx, s) else UOp.group(*_lanes(x, s, "STORE"))


def _stack_lane(v: Any, c: Any) -> Any:
  """INDEX (STACK, k) is the STACK's src k (0.14's UOp.index takes it so)."""
  return v.src[int(c.arg)] if 0 <= int(c.arg) < len(v.src) else None


def _fold_weak(a: Any) -> Any:
  """A weak-typed ALU op of constants (only 0.14's decompositions make weak ops: refimpl's are all typed) folded as
  0.14's symbolic folds it (fold_const_alu), which its final rewrite has and this lowering otherwise leaves out."""
  from tinygrad.uop.symbolic import fold_const_alu
  return fold_const_alu(a)


def split_unaligned() -> Any:
  """A vector LOAD / STORE through a SHRINK 0.14 would not have made (_coalesced; ctx is the renderer) as n scalar ones
  (a STACK of the loads, a GROUP of the stores): refimpl's vector access promises no alignment, 0.14's vector types
  assume it."""
  from tinygrad.dtype import dtypes as tdt
  from tinygrad.uop.ops import GroupOp, Ops, PatternMatcher, UPat
  lane = UPat(Ops.CONST, name="c")
  return PatternMatcher([(UPat(GroupOp.ALU, dtype=tdt.weaks, name="a"), _fold_weak),
                         (UPat(Ops.LOAD, src=(UPat(Ops.SHRINK, name="s"),), allow_any_len=True, name="x"), _split_load),
                         (UPat(Ops.STORE, src=(UPat(Ops.SHRINK, name="s"), UPat()), name="x"), _split_store),
                         (UPat(Ops.INDEX, src=(UPat(Ops.STACK, name="v"), lane)), _stack_lane),
                         (UPat(Ops.INDEX, src=(UPat(Ops.STACK, name="v"), UPat(Ops.CAST, src=(lane,)))), _stack_lane)])


def lowering(renderer: Any) -> tuple[Any, Any]:
  """0.14's final rewrites for `renderer` (module docstring), as two PatternMatchers applied in turn (their ctx is the
  renderer): the decompositions with weak constants committed (pm_commit_weak, pm_cast_weak), then every literal
  spelled CAST (CONST weak) (pm_casted_consts)."""
  from tinygrad.codegen import pm_casted_consts
  from tinygrad.codegen.decomp.op import get_late_rewrite_patterns, get_simplifying_rewrite_patterns
  from tinygrad.codegen.decomp.transcendental import get_transcendental_patterns
  from tinygrad.helpers import DISABLE_FAST_IDIV, TRANSCENDENTAL
  from tinygrad.uop.ops import Ops, PatternMatcher, UPat
  from tinygrad.uop.weak import pm_cast_weak, pm_commit_weak
  ops = tuple(renderer.code_for_op.keys())
  unfused = [] if Ops.MULACC in ops else [(UPat(Ops.MULACC, src=(UPat.var("a"), UPat.var("b"), UPat.var("c"))),
                                           lambda a, b, c: a * b + c)]
  pm = pm_commit_weak + pm_cast_weak + split_unaligned() + PatternMatcher(unfused) + \
    get_simplifying_rewrite_patterns(ops) + \
    get_late_rewrite_patterns(ops, bool(DISABLE_FAST_IDIV)) + get_transcendental_patterns(ops, TRANSCENDENTAL >= 2)
  return (pm + renderer.extra_matcher if renderer.extra_matcher is not None else pm), pm_casted_consts


class _Lowerer:
  """Rewrites one uop at a time, srcs first, never touching uops already listed: to a fixpoint, or once per uop (as
  0.14's walk of pm_casted_consts, whose CAST (CONST bool) would match again)."""
  def __init__(self, pm: Any, ctx: Any, done: set, fixpoint: bool = True):
    self.pm, self.ctx, self.done, self.fixpoint, self.memo = pm, ctx, done, fixpoint, {}

  def __call__(self, u: Any) -> Any:
    if u in self.done: return u
    if u in self.memo: return self.memo[u]
    src = tuple(self(s) for s in u.src)
    v = u if src == u.src else u.replace(src=src)
    for _ in range(100 if self.fixpoint else 1):
      r = self.pm.rewrite(v, ctx=self.ctx)
      if r is None or r is v: break
      v = self(r) if self.fixpoint else r
    self.memo[u] = v
    return v


def uops_of(k: KernelRecord, renderer: Any = None) -> list[Any]:
  """The linear list of tinygrad 0.14 UOps of record `k` (module docstring); rewritten for `renderer` when given."""
  require("0.14.0", "refimpl.tinygrad.v0_14.uops")
  from tinygrad.dtype import dtypes as tdt
  from tinygrad.uop.ops import Ops as TOps
  from tinygrad.uop.ops import UOp as TUOp
  live: list[Any] = []
  out: list[Any] = []
  listed: set = set()
  lowerers = [] if renderer is None else [_Lowerer(pm, renderer, listed, fixpoint=k == 0)
                                          for k, pm in enumerate(lowering(renderer))]
  for i, r in enumerate(k.uops):
    dtype = getattr(tdt, r.dtype)
    u = TUOp(TOps[r.op], dtype, tuple(live[s] for s in r.src), _arg(r, dtype), i)
    for lower in lowerers: u = lower(u)
    if lowerers: u = _own(u, i, listed, {})
    for x in u.toposort():
      if x not in listed:
        listed.add(x)
        out.append(x)
    live.append(u)
  if renderer is None: return out
  out = _reachable(out)
  _check_renderable(out, renderer)
  return out


def _own(u: Any, i: int, listed: set, memo: dict) -> Any:
  """u with every new uop a rewrite made for record uop i (untagged, not listed yet) tagged ("lowered", i): one that a
  rewrite makes for two record uops (a bfloat16 value's CAST to float) is then two uops, each listed where its own
  user is, never one declared inside an IF or loop and read after it."""
  if u in listed: return u
  if u in memo: return memo[u]
  src = tuple(_own(s, i, listed, memo) for s in u.src)
  tag = ("lowered", i) if u.tag is None else u.tag
  memo[u] = u if (src == u.src and tag == u.tag) else u.replace(src=src, tag=tag)
  return memo[u]


def _reachable(uops: list[Any]) -> list[Any]:
  """The uops a kernel's effects reach (STOREs, loop ENDs, IFs, BARRIERs) and its PARAMs, in list order: 0.14's
  linearized kernels hold only what its SINK reaches, and its C would declare a value no one reads (an OpenCL bool4
  that OpenCL C does not have, when every lane of a bool vector is read alone)."""
  roots = [u for u in uops if u.op.name in ("STORE", "END", "IF", "ENDIF", "BARRIER", "SINK", "PARAM")]
  live: set = set()
  for r in roots: live.update(r.toposort())
  return [u for u in uops if u in live]


def _check_renderable(uops: list[Any], renderer: Any) -> None:
  """ExportError for an ALU op left that the renderer has no code for (`code_for_op`) and 0.14 lowers to nothing
  (FDIV on CL's OpenCL C: 0.14 divides as x * RECIPROCAL(y) before its kernels, so its form has no FDIV there)."""
  from tinygrad.uop.ops import GroupOp

  from refimpl.tinygrad.v0_14.exporter import ExportError
  for u in uops:
    if u.op in GroupOp.ALU and u.op not in renderer.code_for_op:
      raise ExportError(None, None, f"{u.op.name} (record uop {u.tag}) has no form for tinygrad 0.14's "
                                    f"{type(renderer).__name__}: its code_for_op has none and 0.14 lowers it to nothing")


def elf_signature(uops: list[Any]) -> tuple:
  """0.14's TinyELF signature of a kernel's uops: (name, slot, dtype, shape) of each buffer PARAM, then each variable
  PARAM (what PROGRAM.to_elf gives its runtime)."""
  from tinygrad.dtype import AddrSpace
  params = [u for u in uops if u.op.name == "PARAM"]
  bufs = [u for u in params if u.addrspace != AddrSpace.ALU]
  vars_ = [u for u in params if u.addrspace == AddrSpace.ALU]
  return tuple((u.arg.name, u.arg.slot, u.dtype, u._shape) for u in bufs + vars_)
