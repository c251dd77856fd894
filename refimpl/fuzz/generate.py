"""Random whole programs for the fuzzer, defined by construction: `make_case(seed, index, profile)`.

Program i of a campaign with seed s is a function of (s, i, profile) alone (every random choice is drawn from its
grow.Draw, seeded from them), so a shard, a worker or a replay regenerates exactly the same program and inputs.

Shape. A grid of gidx0 x gidx1 workgroups of lidx0 threads (each dimension often 1); tid is the linear thread id. Then
random steps: ALU ops, CAST/BITCAST, VECTORIZE/GEP, LOADs (vector, gated, data-dependent indices), STOREs, loops (RANGE
with constant or DEFINE_VAR bounds, nested) with accumulators (DEFINE_ACC/ASSIGN), IF blocks, WMMA, DEFINE_LOCAL, and
BARRIER where the profile allows it. Every result nothing else reads is stored, so every op is observed.

Modes (Profile.mode): "random" is the generator below; "tinygrad" (refimpl/fuzz/shapes.py) builds kernels shaped like
tinygrad's with the same machinery; "corpus" (refimpl/fuzz/mutate.py) mutates real kernels; "mix" draws one of them
per program from (seed, index) (MIX). All go through the same UB rewrites (make_program).

Steps aimed at classes a plain op x dtype draw rarely reaches: float MUL feeding ADD/SUB with operands of one magnitude
or kernel constants (contraction), products of tiny factors (flushing), conversion chains and double-rounding values
(refimpl/fuzz/bias.py); a quarter of all input buffers hold halfway values of their dtype's conversions.

Weights. Each ALU step draws an (op, dtype) pair uniformly from every pair the verifier accepts on the profile's dtypes,
and each conversion step a (CAST or BITCAST, source, target) pair uniformly: a campaign of a few hundred programs reaches
every op x dtype pair (see `coverage_keys` and the campaign summary).

Defined by construction (what the emulator would call undefined never happens):
  - memory: every index is a non-negative expression taken MOD the room left in the buffer; input buffers are only read;
    output buffers are written by each thread only in its own slots [tid*K, tid*K + K) (no races) and read back there;
    a DEFINE_LOCAL is initialised by every thread in its own slots first, then read in its own slots, or, with a BARRIER
    after the initialisation, anywhere (and never written again).
  - values: the YARPGen approach. The emulator runs the program (permissive mode) and each op it reports undefined is
    rewritten in place by the kind of its first undefined lane (REWRITES), then the emulator runs again (at most
    FIX_ROUNDS times):
      DIVISOR_ZERO       the divisor becomes (b | 1)
      DIVISION_OVERFLOW  the dividend becomes (a | 1)
      SHIFT_COUNT        the count becomes (b & (bits - 1))
      CAST_RANGE         the source is clamped first: NaN -> 0, below/above the target range -> its first/last
                         float inside it (WHERE/CMPLT/CMPNE; fp8 sources are clamped in float32 and cast back exactly)
    The rewrite applies only to ops that were undefined on these inputs, so the raw ops stay in most programs. A
    deferred kind (every ALU kind: SHIFT_COUNT, CAST_RANGE, DIVISOR_ZERO, DIVISION_OVERFLOW: an undefined value,
    undefined behaviour only where it is used) is, half the time, kept and discarded instead (DISCARDS): every use of
    the op's value becomes WHERE(its operands are out of the op's domain, 0, the value), tinygrad's pattern (its range
    reductions compute on every lane, a WHERE discards the overflowing ones; test_div_int's `(t > 0).where(1 // t, t)`
    divides by zero on the lanes it discards), so backends run the raw op on lanes whose value the spec leaves
    undefined and must neither trap there nor let it spoil the others.
What remains undefined after that is left to `refimpl.fuzz.case.prepare` (masked or discarded).
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from refimpl.dtype import DType, dtypes, to_np
from refimpl.emulator.machine import Emulation, emulate
from refimpl.emulator.ub import UB
from refimpl.fuzz.case import emulator_error_op
from refimpl.fuzz.graph import Graph, Node, const_node
from refimpl.fuzz.grow import (
  ALL_DTYPES,
  ARITH_FLOATS,
  Draw,
  Profile,
  _input,
  all_keys,
  alu_pairs,
  conversion_pairs,
  coverage_keys,
  pair_key,
  random_graph,
)
from refimpl.fuzz.mutate import corpus_graph
from refimpl.fuzz.shapes import tinygrad_graph
from refimpl.ir import Ops, Program, ProgramError
from refimpl.ir.verify import FP8
from refimpl.testing.values import from_bits, to_bits

__all__ = ["ALL_DTYPES", "ARITH_FLOATS", "FIX_ROUNDS", "MIX", "MODES", "REWRITES", "Generated", "Profile", "all_keys",
           "alu_pairs", "clamp_bounds", "conversion_pairs", "coverage_keys", "fix_node", "generate", "make_program", "mode_of",
           "pair_key"]  # grow.py's names too: the random mode's Profile and pairs are used from here

FIX_ROUNDS = 6

GRAPHS = {"random": random_graph, "tinygrad": tinygrad_graph, "corpus": corpus_graph}
"""mode -> (draw, profile) -> (graph, fills of the input buffers that are not the default mix), or None: the random one."""
MODES = tuple(GRAPHS)
MIX = (("random", 5), ("tinygrad", 3), ("corpus", 2))  # mode "mix": each program's mode drawn with these weights

def mode_of(seed: int, index: int, mode: str) -> str:
  """The mode program `index` is made in: `mode` itself, or for "mix" one drawn from (seed, index) with MIX's weights."""
  if mode != "mix": return mode
  names, weights = zip(*MIX)
  return Draw(seed, index).start("mode").rng.choices(names, weights)[0]

def _graph(draw: Draw, profile: Profile) -> tuple[Graph, dict[int, tuple]]:
  """The program's graph and the fills of its input buffers that are not the default mix, made in its mode."""
  mode = mode_of(draw.seed, draw.index, profile.mode)
  if mode not in GRAPHS: raise ValueError(f"unknown generation mode {mode!r} (one of {', '.join(MODES)}, mix)")
  made = GRAPHS[mode](draw, profile)
  return random_graph(draw, profile) if made is None else made


def generate(seed: int, index: int, profile: Profile) -> tuple[Graph, dict[int, np.ndarray], tuple[int, ...]]:
  """Program `index` of campaign `seed` (made in the profile's mode) before any UB rewrite: (graph, id(DEFINE_GLOBAL
  node) -> its initial contents, the DEFINE_VAR values)."""
  draw = Draw(seed, index)
  g, fill = _graph(draw, profile)
  rng = draw.inputs()
  arrays = {id(b): _input(b.dtype.base, b.dtype.size, rng, fill.get(id(b))) for b in g.globals()}
  vals = tuple(int(rng.integers(n.arg[1], n.arg[2] + 1)) for n in g.nodes if n.op is Ops.DEFINE_VAR)
  return g, arrays, vals


# ***** the UB rewrites *****

def _float_bound(s: DType, v: int, down: bool) -> float:
  """The finite float of dtype s nearest to the integer v on the side of zero (down: the largest <= v, else the
  smallest >= v): v rounded to s, then stepped one float toward zero (the bit pattern minus one) until it fits."""
  with np.errstate(over="ignore"): x = np.array([v], np.float64).astype(to_np(s))  # may round to inf: stepped below
  for _ in range(64):
    f = float(x[0])
    if (f <= v if down else f >= v) and np.isfinite(f): return f
    x = from_bits(to_bits(x).astype(np.uint64) - np.uint64(1), s)
  raise AssertionError(f"no float of {s!r} near {v}")

@functools.cache
def clamp_bounds(s: DType, d: DType) -> tuple[float, float]:
  """(lo, hi): the floats of s nearest to int dtype d's range from inside it, so that truncating a value clamped to
  [lo, hi] is defined. For fp8 sources (clamped in float32) they are fp8 values too."""
  lo, hi = int(dtypes.min(d)), int(dtypes.max(d))
  if s in FP8:
    every = [float(x) for x in from_bits(np.arange(256), s).tolist()]
    finite = [x for x in every if np.isfinite(x)]
    return min(x for x in finite if x >= lo), max(x for x in finite if x <= hi)
  return _float_bound(s, lo, down=False), _float_bound(s, hi, down=True)

def _binop(op: Ops, x: Node, value) -> list[Node]:
  c = const_node(value, x.dtype)
  return c + [Node(op, x.dtype, [x, c[-1]], tag="fix")]

def _clamp(x: Node, d: DType) -> list[Node]:
  s, n = x.dtype.scalar(), x.dtype.count
  w = dtypes.float32 if s in FP8 else s
  vec = lambda t: t.vec(n) if n > 1 else t
  v = x if w == s else Node(Ops.CAST, vec(w), [x], tag="fix")
  out: list[Node] = [] if v is x else [v]
  lo_v, hi_v = clamp_bounds(s, d)
  lo, hi, zero = const_node(lo_v, vec(w)), const_node(hi_v, vec(w)), const_node(0.0, vec(w))
  out += lo + hi + zero
  b = vec(dtypes.bool)
  below = Node(Ops.CMPLT, b, [v, lo[-1]], tag="fix")
  a = Node(Ops.WHERE, vec(w), [below, lo[-1], v], tag="fix")
  above = Node(Ops.CMPLT, b, [hi[-1], a], tag="fix")
  c = Node(Ops.WHERE, vec(w), [above, hi[-1], a], tag="fix")
  nan = Node(Ops.CMPNE, b, [v, v], tag="fix")
  r = Node(Ops.WHERE, vec(w), [nan, zero[-1], c], tag="fix")
  out += [below, a, above, c, nan, r]
  if w != s: out.append(Node(Ops.CAST, x.dtype, [r], tag="fix"))
  return out

REWRITES: dict[UB, Callable[[Node], tuple[int, list[Node]]]] = {
  UB.DIVISOR_ZERO: lambda n: (1, _binop(Ops.OR, n.src[1], 1)),
  UB.DIVISION_OVERFLOW: lambda n: (0, _binop(Ops.OR, n.src[0], 1)),
  UB.SHIFT_COUNT: lambda n: (1, _binop(Ops.AND, n.src[1], 8 * n.dtype.scalar().itemsize - 1)),
  UB.CAST_RANGE: lambda n: (0, _clamp(n.src[0], n.dtype.scalar())),
}
"""UB kind -> node -> (the src it replaces, the nodes that compute the replacement, last): the module docstring's table.
Every kind an ALU rule declares has one; the memory kinds have none (generation avoids them by construction)."""

def _outside_cast(n: Node) -> tuple[Node, list[Node]]:
  """Whether CAST n's source is outside its target's range (NaN included), computed in float32 for fp8 sources."""
  x, d = n.src[0], n.dtype.scalar()
  s, count = x.dtype.scalar(), x.dtype.count
  vec = lambda t: t.vec(count) if count > 1 else t
  w = dtypes.float32 if s in FP8 else s
  v = x if w == s else Node(Ops.CAST, vec(w), [x], tag="fix")
  out: list[Node] = [] if v is x else [v]
  lo_v, hi_v = clamp_bounds(s, d)
  lo, hi = const_node(lo_v, vec(w)), const_node(hi_v, vec(w))
  b = vec(dtypes.bool)
  below, above, nan = (Node(Ops.CMPLT, b, [v, lo[-1]], tag="fix"), Node(Ops.CMPLT, b, [hi[-1], v], tag="fix"),
                       Node(Ops.CMPNE, b, [v, v], tag="fix"))
  either = Node(Ops.OR, b, [below, above], tag="fix")
  bad = Node(Ops.OR, b, [either, nan], tag="fix")
  return bad, out + lo + hi + [below, above, nan, either, bad]

def _outside_shift(n: Node) -> tuple[Node, list[Node]]:
  """Whether shift n's count is outside [0, bits)."""
  count, dt = n.src[1], n.dtype
  b = dtypes.bool.vec(dt.count) if dt.count > 1 else dtypes.bool
  top = const_node(8 * dt.scalar().itemsize - 1, dt)
  above = Node(Ops.CMPLT, b, [top[-1], count], tag="fix")
  if dt.scalar() not in dtypes.sints: return above, top + [above]
  zero = const_node(0, dt)
  below = Node(Ops.CMPLT, b, [count, zero[-1]], tag="fix")
  bad = Node(Ops.OR, b, [below, above], tag="fix")
  return bad, top + zero + [above, below, bad]

def _outside_division(n: Node) -> tuple[Node, list[Node]]:
  """Whether IDIV / MOD n's divisor is 0, or (signed) its dividend INT_MIN and its divisor -1: !(b != 0 && (a != MIN ||
  b != -1)) (unsigned: !(b != 0))."""
  a, d, dt = n.src[0], n.src[1], n.dtype
  b = dtypes.bool.vec(dt.count) if dt.count > 1 else dtypes.bool
  zero, true = const_node(0, dt), const_node(True, b)
  nonzero = ok = Node(Ops.CMPNE, b, [d, zero[-1]], tag="fix")
  out = zero + true + [nonzero]
  if dt.scalar() in dtypes.sints:
    lo, minus1 = const_node(dtypes.min(dt.scalar()), dt), const_node(-1, dt)
    not_lo, not_minus1 = Node(Ops.CMPNE, b, [a, lo[-1]], tag="fix"), Node(Ops.CMPNE, b, [d, minus1[-1]], tag="fix")
    either = Node(Ops.OR, b, [not_lo, not_minus1], tag="fix")
    ok = Node(Ops.AND, b, [nonzero, either], tag="fix")
    out += lo + minus1 + [not_lo, not_minus1, either, ok]
  bad = Node(Ops.CMPNE, b, [ok, true[-1]], tag="fix")
  return bad, out + [bad]

DISCARDS: dict[UB, Callable[[Node], tuple[Node, list[Node]]]] = {
  UB.CAST_RANGE: _outside_cast, UB.SHIFT_COUNT: _outside_shift,
  UB.DIVISOR_ZERO: _outside_division, UB.DIVISION_OVERFLOW: _outside_division,
}
"""A deferred ALU kind -> node -> (the bool node that is true where the node's value is undefined, the nodes that
compute it, last): discard_node's tests. Every deferred kind an ALU rule declares has one (spec_tests/test_ub_kinds.py)."""

def discard_node(g: Graph, n: Node, kind: UB | None) -> bool:
  """Keeps node n (undefined on some lane, of deferred kind `kind`) and makes every use of its value WHERE(undefined
  there, 0, n) (DISCARDS). False when the kind is not one of DISCARDS."""
  test = DISCARDS.get(kind) if kind is not None else None
  if test is None: return False
  bad, new = test(n)
  zero = const_node(0, n.dtype)
  kept = Node(Ops.WHERE, n.dtype, [bad, zero[-1], n], tag="fix")
  g.replace_uses(n, kept)  # kept is not in the graph yet: it still reads n
  at = next(k for k, m in enumerate(g.nodes) if m is n) + 1
  g.nodes[at:at] = new + zero + [kept]
  return True

def fix_node(g: Graph, n: Node, kind: UB | None) -> bool:
  """Rewrites node n (undefined on some lane, the first of kind `kind`) into a defined form in place (REWRITES). False
  when there is no rewrite for the kind."""
  rewrite = REWRITES.get(kind) if kind is not None else None
  if rewrite is None: return False
  k, new = rewrite(n)
  g.insert_before(n, new)
  n.src[k] = new[-1]
  return True


@dataclass
class Generated:
  """A generated program after the UB rewrites (`program`, verified by the emulator's run), with that emulation."""
  program: Program
  graph: Graph
  arrays: dict[int, np.ndarray]
  vals: tuple[int, ...]
  emulation: Emulation | None
  rounds: int
  fixed: int
  error: str | None = None
  error_op: str = ""

  def inputs(self) -> list[np.ndarray]: return [self.arrays[id(b)] for b in self.graph.globals()]


def make_program(seed: int, index: int, profile: Profile, name: str = "fuzz") -> Generated:
  """Program `index` of campaign `seed`, rewritten until the emulator finds no undefined ALU op (or FIX_ROUNDS runs:
  then `emulation` is None). An exception of the emulator is returned in `error` (a finding against the emulator), with
  the program it failed on."""
  g, arrays, vals = generate(seed, index, profile)
  g.name = name
  keep = Draw(seed, index).start("fix")  # which deferred values are discarded by a WHERE rather than rewritten away
  fixed, em = 0, None
  for rounds in range(1, FIX_ROUNDS + 1):
    _, _, order = g.linearize()
    program = g.program(check=False)
    try: em = emulate(program, [arrays[id(b)] for b in g.globals()], vals, strict=False)
    except ProgramError: raise  # a generator bug, not an emulator finding
    except Exception as e:
      return Generated(program, g, arrays, vals, None, rounds, fixed, f"{type(e).__name__}: {e}",
                       emulator_error_op(e, program, program))
    todo = [(order[where.uop_index], e.kind) for e in em.events for where in (e.origin or e,) if where.uop_index is not None]
    applied = sum((keep.chance(0.5) and discard_node(g, n, why)) or fix_node(g, n, why) for n, why in todo)
    fixed += applied
    if not applied: return Generated(program, g, arrays, vals, em, rounds, fixed)
  return Generated(g.program(), g, arrays, vals, None, FIX_ROUNDS, fixed)
