"""The runs beside the reference (expect.py reads them): the emulator on variants of the program. *below*: every float
allowed-set op replaced by its set's other member (its rule's `@loose(ALLOWED_SET, other=...)`), every tolerance op's
result moved down; *above*: every tolerance op's result moved up, every float WMMA computing its magnitude sum S. Which
runs a case needs follows from its buffers' levels and kinds (`sides_needed`; kinds.py).
"""
from __future__ import annotations

import numpy as np

from refimpl import spec
from refimpl.dtype import dtypes
from refimpl.emulator import alu
from refimpl.emulator.certainty import Certainty
from refimpl.fuzz.graph import Graph, Node, const_node
from refimpl.fuzz.kinds import BOUND, MONO, SET, WILD, Kind
from refimpl.ir import GroupOp, Ops, Program

# ***** the runs beside the reference: below (allowed-set alternatives, errors down) and above (errors up) *****

def _abs(n: Node) -> list[Node]:
  """|n| as MAX(n, NEG n) (the nodes; the last is the value)."""
  neg = Node(Ops.NEG, n.dtype, [n])
  return [neg, Node(Ops.MAX, n.dtype, [n, neg])]

def _moved(g: Graph, n: Node, side: int) -> None:
  """Rewrites transcendental n in place into its result moved one error bound and one ulp more toward side (-1 down,
  +1 up): r +- (|r| * (b+1) * eps + (b+1) * tau), which is at least b+1 ulps at every finite r (eps the machine
  epsilon, tau the smallest subnormal); NaN and +-inf stay."""
  dt, s = n.dtype, n.dtype.scalar()
  e, m = dtypes.finfo(s)
  steps = (spec.ulp_bound(n.op, s) or 0) + 1
  tau = 2.0 ** (2 - 2 ** (e - 1) - m)
  r = Node(n.op, dt, list(n.src), n.arg)
  c1, c2, zero = const_node(steps * 2.0 ** -m, dt), const_node(steps * tau, dt), const_node(0.0, dt)
  mag = _abs(r)
  scaled = Node(Ops.MUL, dt, [mag[-1], c1[-1]])
  step = Node(Ops.ADD, dt, [scaled, c2[-1]])
  bdt = dtypes.bool.vec(dt.count) if dt.count > 1 else dtypes.bool
  infinite = Node(Ops.CMPNE, bdt, [Node(Ops.SUB, dt, [r, r]), zero[-1]])  # r - r is NaN exactly when r is not finite
  kept = Node(Ops.WHERE, dt, [infinite, zero[-1], step])
  g.insert_before(n, [r, *c1, *c2, *zero, *mag, scaled, step, infinite.src[0], infinite, kept])
  n.op, n.src, n.arg = (Ops.ADD if side > 0 else Ops.SUB), [r, kept], None

def _other_member(g: Graph, n: Node, other: alu.Expr) -> None:
  """Allowed-set op n rewritten in place into its set's other member: the ops its rule declares (alu.Looseness.other)
  over n's operands."""
  built: list[Node] = []
  srcs = [_expr_node(e, n, built) for e in other[1:]]
  g.insert_before(n, built)
  n.op, n.src = other[0], srcs

def _expr_node(expr: alu.Expr, n: Node, built: list[Node]) -> Node:
  """The node computing expr over n's operands (alu.Expr); the nodes it needs are appended to `built`, srcs first."""
  if isinstance(expr, int): return n.src[expr]
  if isinstance(expr, float):
    built += const_node(expr, n.dtype)
    return built[-1]
  srcs = [_expr_node(e, n, built) for e in expr[1:]]
  dt = srcs[-1].dtype
  if expr[0] in GroupOp.Comparison: dt = dtypes.bool.vec(dt.count) if dt.count > 1 else dtypes.bool
  built.append(Node(expr[0], dt, srcs))
  return built[-1]

def _magnitudes(g: Graph, n: Node) -> None:
  """WMMA n rewritten in place to compute S = |c| + sum |a_k b_k| (WMMA of the operands' magnitudes)."""
  srcs = [_abs(x) for x in n.src]
  g.insert_before(n, [x for s in srcs for x in s])
  n.src = [s[-1] for s in srcs]

def _varied(g: Graph, n: Node, side: int) -> bool:
  """Rewrites float node n for the below (side -1) or above (+1) run (variant_program); whether it did."""
  declared = alu.looseness(n.op)
  if declared is not None and declared.level is Certainty.TOLERANCE: _moved(g, n, side)
  elif declared is not None and declared.other is not None and side < 0: _other_member(g, n, declared.other)
  elif n.op is Ops.WMMA and side > 0: _magnitudes(g, n)
  else: return False
  return True

def variant_program(program: Program, side: int) -> Program | None:
  """The program of the below (side -1) or above (+1) run (module docstring), None when it would be the program.
  below: every float allowed-set op replaced by its set's other member (what its rule declares: MULACC unfused,
  MAX(+0, -0) giving -0), every tolerance op's result moved down; above: every tolerance op's result moved up, every
  float WMMA computing its magnitude sum S."""
  g = Graph.from_program(program)
  changed = False
  for n in list(g.nodes):
    if dtypes.is_float(n.dtype.scalar()) and _varied(g, n, side): changed = True
  return g.program(check=False) if changed else None

def sides_needed(levels: list[np.ndarray], kinds: list[Kind]) -> tuple[int, ...]:
  """Which of the runs (-1 below, +1 above) the comparison of buffers with these levels and kinds reads: below for
  ALLOWED_SET elements and UNKNOWN ones of SET or MONO buffers, above for ERROR_BOUND elements and UNKNOWN ones of
  BOUND or MONO buffers."""
  below = above = False
  for c, k in zip(levels, kinds):
    if k[0] == WILD: continue
    found = np.bincount(c.ravel(), minlength=len(Certainty)) > 0
    unknown = found[Certainty.UNKNOWN]
    below = below or found[Certainty.ALLOWED_SET] or (unknown and k[0] in (SET, MONO))
    above = above or found[Certainty.ERROR_BOUND] or (unknown and k[0] in (BOUND, MONO))
  return tuple(side for side, need in ((-1, below), (1, above)) if need)


