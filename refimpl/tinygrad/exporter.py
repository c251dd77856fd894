"""Translate a refimpl `Program` into tinygrad 0.10.1's linearized UOps: the reverse of `importer.py`.

`to_tinygrad(program, renderer=None)` returns the list of tinygrad UOps, in order, that tinygrad's renderers take
(`renderer.render(name, uops)`). With a tinygrad `renderer`, the uops are first rewritten the way tinygrad's own
`full_graph_rewrite` finishes a kernel for that renderer, by tinygrad's own pattern matchers: devectorized ALU
(`no_vectorized_alu`), THREEFRY expanded (`threefry2x32`), the late decompositions of ops the renderer's `code_for_op`
lacks (`get_late_rewrite_patterns`: tinygrad's xexp2 / xlog2 / xsin on CLANG, x*-1 -> NEG, ...), `pm_render` and the
renderer's `extra_matcher` (MAX -> CMPLT + WHERE, a NOOP before BITCAST, RECIP -> FDIV on LLVM, ...). tinygrad's
optimizing rewrites (symbolic, expander, loop collapse) are not applied: the kernel is refimpl's, as written.

The reverse of each importer rule, and the other departures of refimpl's IR (`refimpl.ir`'s docstring):
  - declarations first: DEFINE_GLOBALs in number order, then DEFINE_VARs (the order of the kernel's parameters, which
    tinygrad's renderers take from the list), then DEFINE_LOCALs, SPECIALs and CONSTs (none has a src);
  - DEFINE_ACC (init,) id -> DEFINE_ACC (init, *RANGEs) arg (id,): the RANGEs open at its first ASSIGN that were opened
    after it (tinygrad's LLVM renderer puts the accumulator's phi in those loops); a read of the accumulator after an
    ASSIGN to it reads that ASSIGN (as tinygrad's graphs do), before any ASSIGN the DEFINE_ACC;
  - a gated STORE (INDEX, value, gate) -> IF (gate), STORE (INDEX, value, IF), ENDIF (what tinygrad's pm_render and
    linearizer make of a masked store);
  - vector LOAD / STORE of T.vec(n) through a scalar INDEX -> n scalar LOADs / STOREs at index + k (and a VECTORIZE):
    tinygrad's vector pointer casts assume alignment that refimpl's vector access does not promise;
  - refimpl's MULACC -> MUL then ADD when the renderer has no MULACC (tinygrad only makes MULACC for renderers that
    have it);
  - tinygrad's UOps are hash-consed: two uops with the same op, dtype, srcs and arg are one object. Every uop other
    than a CONST gets a distinct arg where tinygrad leaves it None (LOAD, STORE, ALU, INDEX, CAST, ...; the renderers
    never read it), so that two LOADs of one address around a STORE stay two loads.

What tinygrad 0.10.1 has no form for raises `ExportError` naming the uop: refimpl's WMMA (one-thread a@b + c), fp8
dtypes (not in tinygrad 0.10.1), vector accumulators.
"""
from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from refimpl.dtype import DType, PtrDType, dtypes
from refimpl.ir import GroupOp, Ops, Program, verify

__all__ = ["ExportError", "tinygrad_dtype", "to_tinygrad"]


class ExportError(ValueError):
  """A refimpl uop with no tinygrad 0.10.1 form. `.index` (position in the Program, None for the whole program), `.op`
  and `.why` say which and why."""
  def __init__(self, index: int | None, op: Ops | None, why: str):
    self.index, self.op, self.why = index, op, why
    where = "program" if index is None else f"uop {index} {op.name if op is not None else '?'}"
    super().__init__(f"{where}: {why}")


def tinygrad_dtype(dt: DType) -> Any:
  """refimpl DType -> tinygrad DType, by name (scalars, .vec(n), .ptr(size, local=...)). ValueError for fp8."""
  from tinygrad.dtype import DTYPES_DICT
  from tinygrad.dtype import dtypes as tdt
  if isinstance(dt, PtrDType): return tinygrad_dtype(dt.base).ptr(dt.size, local=dt.local)
  scalar = dt.scalar()
  if scalar == dtypes.void: return tdt.void
  tg = next((t for key, t in DTYPES_DICT.items() if getattr(dtypes, key, None) == scalar), None)
  if tg is None: raise ValueError(f"dtype {scalar!r} does not exist in tinygrad 0.10.1")
  return tg.vec(dt.count) if dt.count > 1 else tg


# ***** the rewrites tinygrad applies before rendering *****

def _late_matcher(renderer: Any) -> Any:
  """tinygrad's own final rewrites for `renderer` (see the module docstring), one PatternMatcher."""
  from tinygrad.codegen.rewriter import get_late_rewrite_patterns, no_vectorized_alu, pm_render, threefry2x32
  from tinygrad.dtype import dtypes as tdt
  from tinygrad.helpers import TRANSCENDENTAL
  from tinygrad.ops import GroupOp as TGroupOp
  from tinygrad.ops import Ops as TOps
  from tinygrad.ops import PatternMatcher, UPat
  ops = tuple(renderer.code_for_op.keys())
  pats = [(UPat((*TGroupOp.ALU, TOps.CAST, TOps.BITCAST), name="alu"), no_vectorized_alu),
          (UPat(TOps.GEP, src=(UPat(TOps.VECTORIZE, name="v"),), name="g"),
           lambda v, g: v.src[g.arg[0]] if len(g.arg) == 1 else None)]
  if TOps.THREEFRY not in ops:
    pats.append((UPat(TOps.THREEFRY, dtype=tdt.uint64, src=(UPat.var("x"), UPat.var("key"))), threefry2x32))
  pm = PatternMatcher(pats)
  pm = pm + get_late_rewrite_patterns(ops, TRANSCENDENTAL >= 2) + pm_render
  return pm + renderer.extra_matcher if getattr(renderer, "extra_matcher", None) is not None else pm


class _Lowerer:
  """Rewrites one uop at a time to a fixpoint with a PatternMatcher, srcs first, never touching uops already emitted."""
  def __init__(self, pm: Any, done: set):
    self.pm, self.done, self.memo = pm, done, {}

  def __call__(self, u: Any) -> Any:
    if u in self.done: return u
    if u in self.memo: return self.memo[u]
    src = tuple(self(s) for s in u.src)
    v = u if src == u.src else u.replace(src=src)
    for _ in range(100):
      r = self.pm.rewrite(v)
      if r is None or r is v: break
      v = self(r)
    self.memo[u] = v
    return v


# ***** the translation *****

def _open_blocks(program: Program) -> tuple[dict[int, list[int]], dict[int, int]]:
  """Per DEFINE_ACC index: the RANGE indices open at its first ASSIGN and opened after it. Per ASSIGN index: its acc."""
  stack: list[int] = []
  ranges: dict[int, list[int]] = {}
  assign_of: dict[int, int] = {}
  for i, u in enumerate(program.uops):
    if u.op is Ops.RANGE: stack.append(i)
    elif u.op is Ops.ENDRANGE: stack.pop()
    elif u.op is Ops.ASSIGN:
      acc = u.src[0]
      assign_of[i] = acc
      ranges.setdefault(acc, [r for r in stack if r > acc])
  return ranges, assign_of


def to_tinygrad(program: Program, renderer: Any = None) -> list[Any]:
  """The tinygrad 0.10.1 UOps of `program`, linearized (see the module docstring); rewritten for `renderer` when given.
  Raises ExportError for what tinygrad has no form for, ProgramError for an invalid program."""
  from tinygrad.dtype import dtypes as tdt
  from tinygrad.ops import Ops as TOps
  from tinygrad.ops import UOp as TUOp
  program = verify(program)
  uops = program.uops
  ids = itertools.count(len(program.uops))  # distinct from the RANGE args (refimpl indices)
  acc_ranges, assign_of = _open_blocks(program)
  tg: dict[int, Any] = {}           # refimpl index -> tinygrad uop (the value it reads as)
  latest_assign: dict[int, int] = {}  # DEFINE_ACC index -> the latest ASSIGN index seen so far
  out: list[Any] = []
  emitted: set = set()
  lower = _Lowerer(_late_matcher(renderer), emitted) if renderer is not None else None
  has_mulacc = renderer is not None and TOps.MULACC in renderer.code_for_op

  def emit(u: Any) -> Any:
    """Appends u (rewritten for the renderer) and every new uop it needs, srcs first; returns the emitted uop."""
    if lower is not None: u = lower(u)
    for x in u.toposort:
      if x not in emitted:
        emitted.add(x)
        out.append(x)
    return u

  def dt(i: int, d: DType) -> Any:
    try: return tinygrad_dtype(d)
    except ValueError as e: raise ExportError(i, uops[i].op, str(e)) from None

  def src(i: int, k: int) -> Any:
    j = uops[i].src[k]
    if uops[j].op is Ops.DEFINE_ACC and j in latest_assign: return tg[latest_assign[j]]
    return tg[j]

  def index(i: int, buf: Any, idx: Any, k: int) -> Any:
    if k: idx = TUOp(TOps.ADD, tdt.int32, (idx, TUOp.const(tdt.int32, k)), next(ids))
    return TUOp(TOps.INDEX, buf.dtype, (buf, idx), next(ids))

  def range_uop(r: int) -> Any:  # arg: the refimpl index, so that building it twice gives the one (hash-consed) uop
    return TUOp(TOps.RANGE, tdt.int32, (src(r, 0), src(r, 1)), r)

  order = [i for i, u in enumerate(uops) if u.op is Ops.DEFINE_GLOBAL]
  order.sort(key=lambda i: uops[i].arg)
  order += [i for i, u in enumerate(uops) if u.op is Ops.DEFINE_VAR]
  order += [i for i, u in enumerate(uops) if u.op in (Ops.DEFINE_LOCAL, Ops.SPECIAL, Ops.CONST)]
  placed = set(order)
  order += [i for i in range(len(uops)) if i not in placed]
  for i in order:
    u = uops[i]
    op = u.op
    if op is Ops.DEFINE_GLOBAL: tg[i] = emit(TUOp(TOps.DEFINE_GLOBAL, dt(i, u.dtype), (), u.arg))
    elif op is Ops.DEFINE_VAR: tg[i] = emit(TUOp(TOps.DEFINE_VAR, tdt.int32, (), tuple(u.arg)))
    elif op is Ops.DEFINE_LOCAL: tg[i] = emit(TUOp(TOps.DEFINE_LOCAL, dt(i, u.dtype), (), u.arg))
    elif op is Ops.CONST: tg[i] = emit(TUOp(TOps.CONST, dt(i, u.dtype), (), u.arg))
    elif op is Ops.SPECIAL: tg[i] = emit(TUOp(TOps.SPECIAL, tdt.int32, (), tuple(u.arg)))
    elif op is Ops.DEFINE_ACC:
      if u.dtype.count > 1: raise ExportError(i, op, "vector accumulators have no form this exporter builds")
      rngs = []
      for r in acc_ranges.get(i, []):
        if any(s not in tg for s in uops[r].src):
          raise ExportError(i, op, f"the bounds of RANGE {r}, a loop of this accumulator, come after it")
        rngs.append(range_uop(r))
      init = src(i, 0)
      tg[i] = acc = TUOp(TOps.DEFINE_ACC, dt(i, u.dtype), (init, *rngs), (u.arg,))
      emit(init)
      emitted.add(acc)  # here, before its RANGEs (as tinygrad lists it), not at its first use
      out.append(acc)
    elif op is Ops.RANGE: tg[i] = emit(range_uop(i))
    elif op is Ops.ENDRANGE: tg[i] = emit(TUOp(TOps.ENDRANGE, tdt.void, (tg[u.src[0]],)))
    elif op is Ops.IF: tg[i] = emit(TUOp(TOps.IF, tdt.void, (src(i, 0),), next(ids)))
    elif op is Ops.ENDIF: tg[i] = emit(TUOp(TOps.ENDIF, tdt.void, (tg[u.src[0]],)))
    elif op is Ops.BARRIER: tg[i] = emit(TUOp(TOps.BARRIER, tdt.void, (), next(ids)))
    elif op is Ops.INDEX: tg[i] = (src(i, 0), src(i, 1))  # built at each LOAD / STORE (one per vector element)
    elif op is Ops.LOAD:
      buf, idx = tg[u.src[0]]
      n = u.dtype.count
      alt, gate = (src(i, 1), src(i, 2)) if len(u.src) == 3 else (None, None)
      lanes = []
      for k in range(n):
        a = None if alt is None else (alt if n == 1 else TUOp(TOps.GEP, alt.dtype.scalar(), (alt,), (k,)))
        srcs = (index(i, buf, idx, k),) + (() if gate is None else (a, gate))
        lanes.append(TUOp(TOps.LOAD, dt(i, u.dtype.scalar()), srcs, next(ids)))
      tg[i] = emit(lanes[0] if n == 1 else TUOp(TOps.VECTORIZE, dt(i, u.dtype), tuple(lanes), next(ids)))
    elif op is Ops.STORE:
      buf, idx = tg[u.src[0]]
      val = src(i, 1)
      n = val.dtype.count
      gate = emit(TUOp(TOps.IF, tdt.void, (src(i, 2),), next(ids))) if len(u.src) == 3 else None
      for k in range(n):
        v = val if n == 1 else TUOp(TOps.GEP, val.dtype.scalar(), (val,), (k,))
        emit(TUOp(TOps.STORE, tdt.void, (index(i, buf, idx, k), v) + (() if gate is None else (gate,)), next(ids)))
      if gate is not None: emit(TUOp(TOps.ENDIF, tdt.void, (gate,)))
    elif op is Ops.ASSIGN:
      acc = tg[u.src[0]]
      tg[i] = emit(TUOp(TOps.ASSIGN, acc.dtype, (acc, src(i, 1)), next(ids)))
      latest_assign[assign_of[i]] = i
    elif op is Ops.GEP: tg[i] = emit(TUOp(TOps.GEP, dt(i, u.dtype), (src(i, 0),), tuple(u.arg)))
    elif op is Ops.VECTORIZE:
      tg[i] = emit(TUOp(TOps.VECTORIZE, dt(i, u.dtype), tuple(src(i, k) for k in range(len(u.src))), next(ids)))
    elif op in (Ops.CAST, Ops.BITCAST):
      tg[i] = emit(TUOp(TOps[op.name], dt(i, u.dtype), (src(i, 0),), next(ids)))
    elif op is Ops.MULACC and not has_mulacc:
      a, b, c = (src(i, k) for k in range(3))
      mul = TUOp(TOps.MUL, a.dtype, (a, b), next(ids))
      tg[i] = emit(TUOp(TOps.ADD, a.dtype, (mul, c), next(ids)))
    elif op in GroupOp.ALU:
      tg[i] = emit(TUOp(TOps[op.name], dt(i, u.dtype), tuple(src(i, k) for k in range(len(u.src))), next(ids)))
    elif op is Ops.WMMA: raise ExportError(i, op, "refimpl's one-thread WMMA (arg (N, M, K)) has no tinygrad 0.10.1 form")
    else: raise ExportError(i, op, f"{op.name} has no tinygrad translation")
  return out


def render(program: Program, renderer: Any, name: str | None = None) -> tuple[str, list[Any]]:
  """(tinygrad's source for `program` from `renderer`, the uops it rendered)."""
  uops = to_tinygrad(program, renderer)
  return renderer.render(name or program.name, uops), uops


def listing(uops: Sequence[Any]) -> str:
  """A numbered listing of tinygrad uops (op, dtype, src positions, arg), for error messages."""
  pos = {id(u): k for k, u in enumerate(uops)}
  return "\n".join(f"{k:4d} {u.op.name:<14} {u.dtype} {[pos.get(id(s)) for s in u.src]} {u.arg!r}" for k, u in enumerate(uops))
