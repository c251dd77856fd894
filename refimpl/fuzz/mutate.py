"""Generation mode "corpus": real tinygrad 0.10.1 kernels (corpus/tinygrad-0.10.1/, loaded with finding.load_finding),
mutated. `corpus_graph(draw, profile)` picks a kernel (the loop-form CLANG ones; on backends with workgroups the
GPU ones too, with their locals and barriers) and applies one to three mutations:

  swap-op     an ALU op becomes another of its arity that the verifier accepts on its dtype (ADD -> MUL, CMPLT -> CMPNE,
              EXP2 -> SIN, ...)
  retype      every value, buffer and constant of one float dtype becomes another float dtype (float32 -> float16, ...);
              the kernel's inputs are converted with it
  constant    a CONST becomes another value of its dtype (edge values, halfway values, random bits; grow.Draw)
  shape       a constant RANGE bound or a launch dimension shrinks (every index of a smaller iteration space was already
              in bounds)
  mul-add     a float value x becomes x * c1 + c2 (kernel constants: a MUL feeding an ADD)
  round-trip  a value x becomes CAST(CAST(x, d), dtype of x): a conversion chain through another dtype
Only data is mutated: nothing that reaches an index, a gate, an IF or a RANGE bound is swapped, retyped or changed
(except the shape mutation's bounds, which only shrink). The kernel's own inputs are kept in half of the programs,
replaced by the generator's biased inputs in the other half. What is still undefined afterwards is rewritten by
generate.make_program or discarded by case.prepare, as for random programs. A kernel with a dtype outside the
profile is retyped into the profile, or left for a random program (generate.py makes it). A program is a function of
(seed, index, profile).
"""
from __future__ import annotations

import functools
import warnings
from pathlib import Path

import numpy as np

from refimpl.dtype import DType, PtrDType, dtypes, to_np, truncate
from refimpl.fuzz.finding import load_finding
from refimpl.fuzz.graph import Graph, Node
from refimpl.fuzz.grow import ARITH_FLOATS, Draw, Profile
from refimpl.fuzz.kinds import CONTROL_SRCS
from refimpl.ir import INDEX_DTYPE, GroupOp, Ops, ProgramError, alu_allows, verify

CORPUS = Path(__file__).resolve().parents[2] / "corpus" / "tinygrad-0.10.1"
LOOP_FOLDER, GRID_FOLDER = "CLANG", "GPU"
SWAPPABLE = (GroupOp.Unary, GroupOp.Binary - GroupOp.Comparison, GroupOp.Comparison, GroupOp.Ternary)


@functools.cache
def kernel_files(grid: bool) -> tuple[Path, ...]:
  """The corpus kernels a campaign draws from: the loop-form ones, and with `grid` the grid-form ones too."""
  folders = (LOOP_FOLDER, GRID_FOLDER) if grid else (LOOP_FOLDER,)
  return tuple(p for f in folders for p in sorted((CORPUS / f).glob("*.json")))


def control_nodes(g: Graph) -> set[int]:
  """id() of every node whose value reaches an index, a gate, an IF or a RANGE bound (compare.CONTROL_SRCS)."""
  roots: list[Node] = []
  for n in g.nodes:
    if n.op in CONTROL_SRCS: roots += n.src[CONTROL_SRCS[n.op]]
  seen: set[int] = set()
  while roots:
    n = roots.pop()
    if id(n) in seen: continue
    seen.add(id(n))
    roots += n.src
  return seen


def _retyped(dt: DType, old: DType, new: DType) -> DType:
  if isinstance(dt, PtrDType):
    return new.ptr(dt.size, dt.local) if dt.base == old else dt
  if dt.scalar() == old: return new.vec(dt.count) if dt.count > 1 else new
  return dt


class _Mutator:
  """A corpus kernel drawn with `draw`, and the mutations (the module docstring) that change it in place."""
  def __init__(self, draw: Draw, profile: Profile):
    self.draw, self.rng, self.profile = draw, draw.rng, profile
    path = self.rng.choice(kernel_files(profile.barrier))
    f = load_finding(path)
    self.graph = Graph.from_program(f.case.program)
    self.given = {id(b): a for b, a in zip(self.graph.globals(), f.case.inputs)}
    self.vals = f.case.vals

  def data_nodes(self, ops) -> list[Node]:
    ctrl = control_nodes(self.graph)
    return [n for n in self.graph.nodes if n.op in ops and id(n) not in ctrl]

  def value_dtypes(self) -> set[DType]:
    """The scalar dtypes of the kernel's values (not its pointers: an INDEX's dtype is a pointer)."""
    return {n.dtype.scalar() for n in self.graph.nodes if not isinstance(n.dtype, PtrDType) and n.dtype != dtypes.void}

  # ***** mutations *****
  def swap_op(self) -> None:
    nodes = self.data_nodes(GroupOp.ALU)
    if not nodes: return
    n = self.rng.choice(nodes)
    group = next(g for g in SWAPPABLE if n.op in g)
    s = n.src[-1].dtype.scalar()
    others = sorted((op for op in group if op is not n.op and op is not Ops.MULACC and alu_allows(op, s)), key=lambda o: o.value)
    if others: n.op = self.rng.choice(others)

  def retype(self, old: DType | None = None, new: DType | None = None) -> None:
    floats = [d for d in ARITH_FLOATS if d in self.profile.dtypes]
    present = sorted(self.value_dtypes() & set(dtypes.floats), key=lambda d: d.name)
    old = old or (self.rng.choice(present) if present else None)
    choices = [d for d in floats if d != old]
    if old is None or not choices: return
    new = new or self.rng.choice(choices)
    for n in self.graph.nodes:
      n.dtype = _retyped(n.dtype, old, new)
      if n.op is Ops.CONST and n.dtype.scalar() == new: n.arg = float(truncate[new](float(n.arg)))
    for b in self.graph.globals():
      if b.dtype.base == new and id(b) in self.given:
        with np.errstate(all="ignore"), warnings.catch_warnings():
          warnings.simplefilter("ignore")
          self.given[id(b)] = self.given[id(b)].astype(to_np(new))
    for n in self.graph.nodes:  # a CAST that became new -> new is a move
      if n.op is Ops.CAST and n.src[0].dtype == n.dtype: self.graph.replace_uses(n, n.src[0])

  def constant(self) -> None:
    consts = self.data_nodes((Ops.CONST,))
    if consts:
      n = self.rng.choice(consts)
      n.arg = self.draw.scalar_value(n.dtype.scalar())

  def shape(self) -> None:
    ends = [n for n in self.graph.nodes if n.op is Ops.RANGE and n.src[1].op is Ops.CONST and n.src[1].arg > 1]
    specials = [n for n in self.graph.nodes if n.op is Ops.SPECIAL and n.arg[1] > 1 and n.arg[0].startswith("gidx")]
    if ends and (not specials or self.draw.chance(0.6)):
      r = self.rng.choice(ends)
      c = Node(Ops.CONST, INDEX_DTYPE, (), self.rng.randint(1, r.src[1].arg - 1))
      self.graph.insert_before(r, [c])
      r.src[1] = c
    elif specials:
      s = self.rng.choice(specials)
      name, size = s.arg
      s.arg = (name, self.rng.randint(1, size - 1))
      self.graph.global_size[int(name[-1])] = s.arg[1]

  def wrap(self, make, floats: bool) -> None:
    """Replaces the uses of a random data value x (a float one with `floats`) by make(x) -> the new nodes (the last is
    the value)."""
    cands = [n for n in self.data_nodes(GroupOp.ALU | {Ops.LOAD, Ops.CAST}) if dtypes.is_float(n.dtype.scalar()) or not floats]
    if not cands: return
    x = self.rng.choice(cands)
    new = make(x)
    if not new: return
    users = [n for n in self.graph.nodes if x in n.src]
    at = next(k for k, n in enumerate(self.graph.nodes) if n is x) + 1
    self.graph.nodes[at:at] = new
    for u in users: u.src = [new[-1] if s is x else s for s in u.src]

  def _mul_add(self, x: Node) -> list[Node]:
    s, dt = x.dtype.scalar(), x.dtype
    if s in (dtypes.fp8e4m3, dtypes.fp8e5m2): return []
    c1, c2 = (Node(Ops.CONST, s, (), self.draw.scalar_value(s)) for _ in range(2))
    lanes = lambda c: [c] if dt.count == 1 else [c, Node(Ops.VECTORIZE, dt, [c] * dt.count)]
    a, b = lanes(c1), lanes(c2)
    m = Node(Ops.MUL, dt, [x, a[-1]])
    return [*a, *b, m, Node(Ops.ADD, dt, [m, b[-1]] if self.draw.chance(0.5) else [b[-1], m])]

  def _round_trip(self, x: Node) -> list[Node]:
    s, n = x.dtype.scalar(), x.dtype.count
    via = self.rng.choice([d for d in self.profile.dtypes if d != s])
    vec = lambda d: d.vec(n) if n > 1 else d
    a = Node(Ops.CAST, vec(via), [x])
    return [a, Node(Ops.CAST, x.dtype, [a])]

  def mutate(self) -> Graph:
    table = [(self.swap_op, 3), (self.retype, 2), (self.constant, 3), (self.shape, 2),
             (lambda: self.wrap(self._mul_add, True), 3), (lambda: self.wrap(self._round_trip, False), 2)]
    fns, weights = zip(*table)
    for _ in range(self.rng.randint(1, 3)): self.rng.choices(fns, weights)[0]()
    outside = sorted(self.value_dtypes() - set(self.profile.dtypes) - {dtypes.void}, key=lambda d: d.name)
    for d in outside:
      if dtypes.is_float(d): self.retype(d)
    self.graph.dce()
    return self.graph


def corpus_graph(draw: Draw, profile: Profile) -> tuple[Graph, dict[int, tuple]] | None:
  """Program (draw.seed, draw.index) in mode "corpus" (see the module docstring): its graph and buffer fills. None when
  the mutated kernel does not verify or uses a dtype outside the profile, or there is no corpus folder (an installed
  refimpl without the repository's): generate.py then makes the random program of (seed, index)."""
  if not kernel_files(profile.barrier): return None
  m = _Mutator(draw.start("corpus"), profile)
  g = m.mutate()
  keep = m.draw.chance(0.5)
  try: verify(g.program(check=False))
  except ProgramError: return None
  if m.value_dtypes() - set(profile.dtypes) - {dtypes.void}: return None
  fill = {id(b): ("given", m.given[id(b)]) for b in g.globals() if keep and id(b) in m.given}
  return g, fill
