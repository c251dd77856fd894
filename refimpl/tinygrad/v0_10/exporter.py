"""Translate a refimpl `Program` into tinygrad 0.10.1's linearized UOps: the reverse of `importer.py`.

`to_tinygrad(program, renderer=None)` returns the list of tinygrad UOps, in order, that tinygrad's renderers take
(`renderer.render(name, uops)`). With a tinygrad `renderer`, the uops are first rewritten the way tinygrad's own
`full_graph_rewrite` finishes a kernel for that renderer, by tinygrad's own pattern matchers: devectorized ALU
(`no_vectorized_alu`), THREEFRY expanded (`threefry2x32`), the late decompositions of ops the renderer's `code_for_op`
lacks (`get_late_rewrite_patterns`: tinygrad's xexp2 / xlog2 / xsin on CLANG, x*-1 -> NEG, ...), `pm_render` and the
renderer's `extra_matcher` (MAX -> CMPLT + WHERE, a NOOP before BITCAST, RECIP -> FDIV on LLVM, ...). tinygrad's
optimizing rewrites (symbolic, expander, loop collapse) are not applied: the kernel is refimpl's, as written.

The walk visits the uops once (declarations first, see below) and hands each to its op's handler in `EXPORT`, as the
importer's walk hands tinygrad's uops to its rules: `handler(walk, i, u, src)` gets the refimpl index, the uop and what
its srcs read (their tinygrad uops), emits what tinygrad lists for it, and returns the tinygrad uop that stands for it,
the one later srcs read (refimpl.ir.rewrite's walk, with tinygrad UOps as the new program).

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
  - TRUNC (tinygrad 0.10.1 has no such op) -> the ops refimpl.lower.trunc writes it with (decompose_trunc, the one
    rewrite every target without a TRUNC shares: CASTs through int64, MAX, NEG, CMPLT, CMPNE, MUL, WHERE), first;
  - tinygrad's UOps are hash-consed: two uops with the same op, dtype, srcs and arg are one object. Every uop other
    than a CONST gets a distinct arg where tinygrad leaves it None (LOAD, STORE, ALU, INDEX, CAST, ...; the renderers
    never read it), so that two LOADs of one address around a STORE stay two loads.

What tinygrad 0.10.1 has no form for raises `ExportError` naming the uop: refimpl's WMMA (one-thread a@b + c), fp8
dtypes (not in tinygrad 0.10.1), vector accumulators.
"""
from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from refimpl.dtype import DType, PtrDType, dtypes
from refimpl.errors import NotTranslatable
from refimpl.ir import GroupOp, Ops, Program, UOp, verify
from refimpl.lower.trunc import decompose_trunc

__all__ = ["ExportError", "tinygrad_dtype", "to_tinygrad"]


class ExportError(NotTranslatable, ValueError):
  """A refimpl uop with no tinygrad 0.10.1 form (refimpl's limit, not the device's failure). `.index` (position in the
  Program, None for the whole program), `.op` and `.why` say which and why."""
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


@dataclass
class _Export:
  """The walk's state: the program, refimpl index -> the tinygrad uop it stands for (an INDEX: its (buffer, index)
  pair), the DEFINE_ACC -> latest ASSIGN so far, the output list and what is in it, tinygrad's namespace `T`."""
  program: Program
  T: Any
  lower: _Lowerer | None
  has_mulacc: bool
  acc_ranges: dict[int, list[int]]
  assign_of: dict[int, int]
  tg: dict[int, Any] = field(default_factory=dict)
  latest_assign: dict[int, int] = field(default_factory=dict)
  out: list[Any] = field(default_factory=list)
  emitted: set = field(default_factory=set)
  ids: Iterator[int] = field(default_factory=itertools.count)

  def emit(self, u: Any) -> Any:
    """Appends u (rewritten for the renderer) and every new uop it needs, srcs first; returns the emitted uop."""
    if self.lower is not None: u = self.lower(u)
    for x in u.toposort:
      if x not in self.emitted:
        self.emitted.add(x)
        self.out.append(x)
    return u

  def new(self, op: Ops, dtype: Any, src: tuple = (), arg: Any = None) -> Any:
    """tinygrad's uop of the same name as refimpl's op (not emitted)."""
    return self.T.UOp(self.T.Ops[op.name], dtype, src, arg)

  def distinct(self, op: Ops, dtype: Any, src: tuple = ()) -> Any:
    """A new uop with an arg no other uop has (tinygrad's UOps are hash-consed; see the module docstring)."""
    return self.new(op, dtype, src, next(self.ids))

  def dt(self, i: int, d: DType) -> Any:
    """tinygrad's dtype for uop i's dtype d; ExportError names uop i when there is none."""
    try: return tinygrad_dtype(d)
    except ValueError as e: raise ExportError(i, self.program.uops[i].op, str(e)) from None

  def read(self, j: int) -> Any:
    """What a src j reads: for an accumulator, its latest ASSIGN so far (as tinygrad's graphs read it)."""
    return self.tg[self.latest_assign[j]] if j in self.latest_assign else self.tg[j]

  def index(self, buf: Any, idx: Any, k: int) -> Any:
    """INDEX of buf at idx + k (one per element of a vector access)."""
    if k: idx = self.distinct(Ops.ADD, self.T.dtypes.int32, (idx, self.T.UOp.const(self.T.dtypes.int32, k)))
    return self.distinct(Ops.INDEX, buf.dtype, (buf, idx))

  def range(self, r: int) -> Any:
    """RANGE r; its arg is the refimpl index, so that building it twice gives the one (hash-consed) uop."""
    return self.new(Ops.RANGE, self.T.dtypes.int32, tuple(self.read(j) for j in self.program.uops[r].src), r)


# ***** one handler per op: (walk, refimpl index, uop, what its srcs read) -> the tinygrad uop standing for it *****

def _declaration(c: _Export, i: int, u: UOp, src: tuple) -> Any:
  """DEFINE_GLOBAL, DEFINE_LOCAL and CONST as they are; DEFINE_VAR and SPECIAL with int32 and a tuple arg."""
  if u.op in (Ops.DEFINE_VAR, Ops.SPECIAL): return c.emit(c.new(u.op, c.T.dtypes.int32, (), tuple(u.arg)))
  return c.emit(c.new(u.op, c.dt(i, u.dtype), (), u.arg))

def _define_acc(c: _Export, i: int, u: UOp, src: tuple) -> Any:
  """DEFINE_ACC (init, *RANGEs) arg (id,), listed here, before its RANGEs (see the module docstring)."""
  if u.dtype.count > 1: raise ExportError(i, u.op, "vector accumulators have no form this exporter builds")
  rngs = []
  for r in c.acc_ranges.get(i, []):
    if any(j not in c.tg for j in c.program.uops[r].src):
      raise ExportError(i, u.op, f"the bounds of RANGE {r}, a loop of this accumulator, come after it")
    rngs.append(c.range(r))
  acc = c.new(u.op, c.dt(i, u.dtype), (src[0], *rngs), (u.arg,))
  c.emit(src[0])
  c.emitted.add(acc)  # here, before its RANGEs (as tinygrad lists it), not at its first use
  c.out.append(acc)
  return acc

def _assign(c: _Export, i: int, u: UOp, src: tuple) -> Any:
  """ASSIGN to the DEFINE_ACC itself; later reads of the accumulator read this ASSIGN."""
  acc = c.tg[u.src[0]]
  assign = c.emit(c.distinct(u.op, acc.dtype, (acc, src[1])))
  c.latest_assign[c.assign_of[i]] = i
  return assign

def _block(c: _Export, i: int, u: UOp, src: tuple) -> Any:
  """RANGE, ENDRANGE, IF, ENDIF and BARRIER (IF and BARRIER distinct)."""
  if u.op is Ops.RANGE: return c.emit(c.range(i))
  if u.op in (Ops.IF, Ops.BARRIER): return c.emit(c.distinct(u.op, c.T.dtypes.void, src))
  return c.emit(c.new(u.op, c.T.dtypes.void, src))

def _index(c: _Export, i: int, u: UOp, src: tuple) -> tuple[Any, Any]:
  """Nothing yet: (buffer, index), built at each LOAD / STORE (one per vector element)."""
  return src

def _load(c: _Export, i: int, u: UOp, src: tuple) -> Any:
  """n scalar LOADs at index + k (each gated with its lane of the alternative), VECTORIZEd for n > 1."""
  (buf, idx), n = src[0], u.dtype.count
  alt, gate = (src[1], src[2]) if len(src) == 3 else (None, None)
  lanes = []
  for k in range(n):
    a = None if alt is None else (alt if n == 1 else c.new(Ops.GEP, alt.dtype.scalar(), (alt,), (k,)))
    srcs = (c.index(buf, idx, k),) + (() if gate is None else (a, gate))
    lanes.append(c.distinct(u.op, c.dt(i, u.dtype.scalar()), srcs))
  return c.emit(lanes[0] if n == 1 else c.distinct(Ops.VECTORIZE, c.dt(i, u.dtype), tuple(lanes)))

def _store(c: _Export, i: int, u: UOp, src: tuple) -> None:
  """n scalar STOREs at index + k; a gated one inside IF (gate) ... ENDIF."""
  (buf, idx), val, n = src[0], src[1], src[1].dtype.count
  gate = c.emit(c.distinct(Ops.IF, c.T.dtypes.void, (src[2],))) if len(src) == 3 else None
  for k in range(n):
    v = val if n == 1 else c.new(Ops.GEP, val.dtype.scalar(), (val,), (k,))
    c.emit(c.distinct(u.op, c.T.dtypes.void, (c.index(buf, idx, k), v) + (() if gate is None else (gate,))))
  if gate is not None: c.emit(c.new(Ops.ENDIF, c.T.dtypes.void, (gate,)))

def _gep(c: _Export, i: int, u: UOp, src: tuple) -> Any: return c.emit(c.new(u.op, c.dt(i, u.dtype), src, tuple(u.arg)))

def _alu(c: _Export, i: int, u: UOp, src: tuple) -> Any:
  """ALU ops, VECTORIZE, CAST and BITCAST: the same op, distinct."""
  return c.emit(c.distinct(u.op, c.dt(i, u.dtype), src))

def _mulacc(c: _Export, i: int, u: UOp, src: tuple) -> Any:
  """MULACC, or MUL then ADD when the renderer has no MULACC."""
  if c.has_mulacc: return _alu(c, i, u, src)
  a, b, acc = src
  return c.emit(c.distinct(Ops.ADD, a.dtype, (c.distinct(Ops.MUL, a.dtype, (a, b)), acc)))

def _wmma(c: _Export, i: int, u: UOp, src: tuple) -> Any:
  raise ExportError(i, u.op, "refimpl's one-thread WMMA (arg (N, M, K)) has no tinygrad 0.10.1 form")

EXPORT: dict[Ops, Callable[[_Export, int, UOp, tuple], Any]] = {
  **dict.fromkeys((Ops.DEFINE_GLOBAL, Ops.DEFINE_VAR, Ops.DEFINE_LOCAL, Ops.CONST, Ops.SPECIAL), _declaration),
  Ops.DEFINE_ACC: _define_acc, Ops.ASSIGN: _assign,
  **dict.fromkeys((Ops.RANGE, Ops.ENDRANGE, Ops.IF, Ops.ENDIF, Ops.BARRIER), _block),
  Ops.INDEX: _index, Ops.LOAD: _load, Ops.STORE: _store, Ops.GEP: _gep,
  **dict.fromkeys((*GroupOp.ALU, Ops.VECTORIZE, Ops.CAST, Ops.BITCAST), _alu), Ops.MULACC: _mulacc, Ops.WMMA: _wmma}


def _order(uops: tuple[UOp, ...]) -> list[int]:
  """The walk's order: DEFINE_GLOBALs by number, DEFINE_VARs, DEFINE_LOCALs, SPECIALs and CONSTs, then the rest."""
  order = sorted((i for i, u in enumerate(uops) if u.op is Ops.DEFINE_GLOBAL), key=lambda i: uops[i].arg)
  order += [i for i, u in enumerate(uops) if u.op is Ops.DEFINE_VAR]
  order += [i for i, u in enumerate(uops) if u.op in (Ops.DEFINE_LOCAL, Ops.SPECIAL, Ops.CONST)]
  placed = set(order)
  return order + [i for i in range(len(uops)) if i not in placed]


@functools.cache
def _tinygrad() -> SimpleNamespace:
  """tinygrad's Ops, UOp and dtypes, imported at the first export (tinygrad is needed only then)."""
  from tinygrad.dtype import dtypes as tdt
  from tinygrad.ops import Ops as TOps
  from tinygrad.ops import UOp as TUOp
  return SimpleNamespace(Ops=TOps, UOp=TUOp, dtypes=tdt)


def to_tinygrad(program: Program, renderer: Any = None) -> list[Any]:
  """The tinygrad 0.10.1 UOps of `program`, linearized (see the module docstring); rewritten for `renderer` when given.
  Raises ExportError for what tinygrad has no form for, ProgramError for an invalid program."""
  program = decompose_trunc(verify(program))  # tinygrad 0.10.1 has no TRUNC
  T = _tinygrad()
  acc_ranges, assign_of = _open_blocks(program)
  c = _Export(program, T, None, renderer is not None and T.Ops.MULACC in renderer.code_for_op, acc_ranges, assign_of,
              ids=itertools.count(len(program.uops)))  # distinct from the RANGE args (refimpl indices)
  if renderer is not None: c.lower = _Lowerer(_late_matcher(renderer), c.emitted)
  for i in _order(program.uops):
    u = program.uops[i]
    if u.op not in EXPORT: raise ExportError(i, u.op, f"{u.op.name} has no tinygrad translation")
    c.tg[i] = EXPORT[u.op](c, i, u, tuple(c.read(j) for j in u.src))
  return c.out


def render(program: Program, renderer: Any, name: str | None = None) -> tuple[str, list[Any]]:
  """(tinygrad's source for `program` from `renderer`, the uops it rendered)."""
  uops = to_tinygrad(program, renderer)
  return renderer.render(name or program.name, uops), uops


def listing(uops: Sequence[Any]) -> str:
  """A numbered listing of tinygrad uops (op, dtype, src positions, arg), for error messages."""
  pos = {id(u): k for k, u in enumerate(uops)}
  return "\n".join(f"{k:4d} {u.op.name:<14} {u.dtype} {[pos.get(id(s)) for s in u.src]} {u.arg!r}" for k, u in enumerate(uops))
