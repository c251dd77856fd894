"""The reducer's edits of a case (reduce.py proposes them, one candidate each): the case as an editable graph with its
inputs and vars (`State`), and the edits its passes make: remove units (`units`, `remove`), drop unused declarations,
retarget uses (`replace_uses`), fold int constants, scalarize a lane, turn loads and locals into constants or inputs.
Every edit leaves a graph whose program is built (and verified) only when the candidate is made.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refimpl.dtype import PtrDType, dtypes, to_np
from refimpl.emulator.alu import exec_cast
from refimpl.emulator.machine import emulate
from refimpl.fuzz.case import Case
from refimpl.fuzz.graph import Graph, Node, const_node
from refimpl.ir import INDEX_DTYPE, GroupOp, Ops, ProgramError

DECLARATION_OPS = (Ops.DEFINE_GLOBAL, Ops.DEFINE_VAR, Ops.DEFINE_LOCAL)
UNIT_OPS = GroupOp.ALU | {Ops.STORE, Ops.BARRIER, Ops.CAST, Ops.BITCAST, Ops.LOAD, Ops.GEP, Ops.VECTORIZE, Ops.WMMA,
                          Ops.ASSIGN, Ops.DEFINE_ACC, Ops.SPECIAL, Ops.DEFINE_VAR}



@dataclass
class State:
  """A case as an editable graph: inputs by buffer node, var values by var node."""
  graph: Graph
  arrays: dict[int, np.ndarray]
  vars: dict[int, int]

  @staticmethod
  def of(case: Case) -> State:
    g = Graph.from_program(case.program)
    var_nodes = [n for n in g.nodes if n.op is Ops.DEFINE_VAR]
    return State(g, {id(b): a for b, a in zip(g.globals(), case.inputs)}, {id(v): x for v, x in zip(var_nodes, case.vals)})

  def case(self) -> Case | None:
    try: p = self.graph.program()
    except ProgramError: return None
    vals = tuple(self.vars[id(n)] for n in self.graph.nodes if n.op is Ops.DEFINE_VAR)
    return Case(p, [self.arrays[id(b)] for b in self.graph.globals()], vals)

  def copy(self) -> tuple[State, dict[int, Node]]:
    g, m = self.graph.copy()
    return State(g, {id(m[k]): a for k, a in self.arrays.items()}, {id(m[k]): v for k, v in self.vars.items()}), m


def _closer(g: Graph, n: Node) -> Node:
  return next(m for m in g.nodes if m.op in GroupOp.BlockEnd and m.src[0] is n)

def _zero(g: Graph, dt, cache: dict) -> Node:
  """A zero of dt placed at the top of the program (visible everywhere)."""
  if dt not in cache:
    nodes = const_node(False if dt.scalar() == dtypes.bool else 0, dt)
    g.nodes[0:0] = nodes
    cache[dt] = nodes[-1]
  return cache[dt]

def scopes(g: Graph) -> dict[int, tuple[int, ...]]:
  """id(node) -> the ids of the blocks that enclose it, outermost first (a block's opener and closer are outside it)."""
  scope: list[int] = []
  out: dict[int, tuple[int, ...]] = {}
  for n in g.nodes:
    if n.op in GroupOp.BlockEnd and scope: scope.pop()
    out[id(n)] = tuple(scope)
    if n.op in GroupOp.BlockStart: scope.append(id(n))
  return out

def replace_uses(g: Graph, old: Node, new: Node) -> None:
  """Every use of `old` reads `new` instead; what is then dead is removed."""
  for n in g.nodes: n.src = [new if x is old else x for x in n.src]
  g.dce()

def unused_declarations(g: Graph) -> list[Node]:
  """The DEFINE_GLOBAL, DEFINE_VAR and DEFINE_LOCAL nodes nothing reads."""
  used = {id(s) for n in g.nodes for s in n.src}
  return [n for n in g.nodes if n.op in DECLARATION_OPS and id(n) not in used]

def drop_declarations(s: State, gone: list[Node]) -> None:
  """Pass 9 (module docstring) on s, in place: the nodes `gone` (unused declarations) go with their inputs and var
  values, and the BARRIERs once no DEFINE_LOCAL is left (a barrier orders only a workgroup's memory)."""
  if not gone: raise ValueError("nothing to drop")
  ids = {id(n) for n in gone}
  g = s.graph
  g.nodes = [n for n in g.nodes if id(n) not in ids]
  if not any(n.op is Ops.DEFINE_LOCAL for n in g.nodes): g.nodes = [n for n in g.nodes if n.op is not Ops.BARRIER]
  for i in ids:
    s.arrays.pop(i, None)
    s.vars.pop(i, None)

def stored_buffers(g: Graph) -> set[int]:
  return {id(n.src[0].src[0]) for n in g.nodes if n.op is Ops.STORE and n.src[0].op is Ops.INDEX}

def loaded_constant(s: State, n: Node, stored: set[int]):
  """The value a scalar, ungated LOAD at a CONST index of an input buffer nothing stores to reads, else None."""
  if n.op is not Ops.LOAD or n.dtype.count != 1 or len(n.src) != 1 or n.src[0].op is not Ops.INDEX: return None
  ix = n.src[0]
  buf, i = ix.src[0], ix.src[1] if len(ix.src) == 2 else None
  if buf.op is not Ops.DEFINE_GLOBAL or id(buf) in stored or i is None or i.op is not Ops.CONST: return None
  arr = s.arrays.get(id(buf))
  if arr is None or not 0 <= int(i.arg) < arr.size: return None
  x = arr[int(i.arg)]
  return bool(x) if n.dtype == dtypes.bool else int(x) if dtypes.is_int(n.dtype) else float(x)

def local_contents(s: State, local: Node) -> np.ndarray | None:
  """What the threads of a case stored in `local` by the end of its run (the emulator on a copy in which every STORE
  into it also stores into a shadow output), or None when that run has undefined behaviour."""
  st, m = s.copy()
  g, copy = st.graph, m[id(local)]
  shadow = Node(Ops.DEFINE_GLOBAL, copy.dtype.base.ptr(copy.dtype.size))
  g.nodes.append(shadow)
  for n in list(g.nodes):
    if n.op is Ops.STORE and n.src[0].src[0] is copy:
      ix = Node(Ops.INDEX, shadow.dtype, [shadow, n.src[0].src[1]])
      g.insert_before(n, [ix, Node(Ops.STORE, dtypes.void, [ix, *n.src[1:]])])
  st.arrays[id(shadow)] = np.zeros(shadow.dtype.size, to_np(shadow.dtype.base))
  case = st.case()
  if case is None: return None
  run = emulate(case.program, case.inputs, case.vals, strict=False)
  return None if run.events else run.buffers[g.globals().index(shadow)]

def _shift_index(g: Graph, access: Node, lane: int) -> None:
  """The LOAD or STORE `access` goes through a new INDEX at its index + lane (a new CONST, or an ADD)."""
  ix = access.src[0]
  i = ix.src[1]
  if i.op is Ops.CONST: moved = [Node(Ops.CONST, i.dtype, (), i.arg + lane)]
  else:
    c = Node(Ops.CONST, i.dtype, (), lane)
    moved = [c, Node(Ops.ADD, i.dtype, [i, c])]
  new_ix = Node(Ops.INDEX, ix.dtype, [ix.src[0], moved[-1], *ix.src[2:]])
  g.insert_before(access, [*moved, new_ix])
  access.src = [new_ix, *access.src[1:]]

def scalarize(g: Graph, lane: int) -> None:
  """Pass 5 (module docstring) on g, in place; ValueError when g has nothing to scalarize or a WMMA."""
  if any(n.op is Ops.WMMA for n in g.nodes): raise ValueError("WMMA keeps its vectors")
  vec = lambda n: not isinstance(n.dtype, PtrDType) and n.dtype.count > 1
  if not any(vec(n) for n in g.nodes): raise ValueError("no vectors")
  access = {id(n) for n in g.nodes if (n.op is Ops.LOAD and vec(n)) or (n.op is Ops.STORE and vec(n.src[1]))}
  repl: dict[int, Node] = {}
  for n in list(g.nodes):
    n.src = [repl.get(id(x), x) for x in n.src]
    if n.op in (Ops.VECTORIZE, Ops.GEP):
      repl[id(n)] = n.src[0]
      continue
    if id(n) in access and lane: _shift_index(g, n, lane)
    if vec(n): n.dtype = n.dtype.scalar()
  g.nodes = [n for n in g.nodes if id(n) not in repl]
  g.dce()

INT_FOLDS = {Ops.ADD: lambda a, b: a + b, Ops.SUB: lambda a, b: a - b, Ops.MUL: lambda a, b: a * b,
             Ops.SHL: lambda a, b: a << b if 0 <= b < 64 else None, Ops.SHR: lambda a, b: a >> b if 0 <= b < 64 else None,
             Ops.AND: lambda a, b: a & b, Ops.OR: lambda a, b: a | b, Ops.XOR: lambda a, b: a ^ b, Ops.MAX: max,
             Ops.IDIV: lambda a, b: abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1) if b else None,
             Ops.MOD: lambda a, b: a - b * (abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)) if b else None}

def folded(n: Node):
  """The value of an int ALU uop (INT_FOLDS) of scalar CONSTs, wrapped to its dtype, or of a CAST between ints and bool
  of a scalar CONST (alu's rule); None when it is not one (or the fold is undefined: a zero divisor). A wrong fold would
  only make a candidate that does not fail: every candidate runs."""
  if n.op is Ops.CAST: return _folded_cast(n)
  if n.op not in INT_FOLDS or n.dtype.count != 1 or not dtypes.is_int(n.dtype) or len(n.src) != 2: return None
  if any(x.op is not Ops.CONST or x.dtype != n.dtype for x in n.src): return None
  v = INT_FOLDS[n.op](int(n.src[0].arg), int(n.src[1].arg))
  if v is None: return None
  bits = 8 * n.dtype.itemsize
  v &= (1 << bits) - 1
  return v - (1 << bits) if n.dtype in dtypes.sints and v >> (bits - 1) else v

def _folded_cast(n: Node):
  """folded() of a CAST: int or bool to int or bool, of a scalar CONST."""
  src = n.src[0]
  if n.dtype.count != 1 or src.op is not Ops.CONST or src.dtype.count != 1: return None
  if not all(dt is dtypes.bool or dtypes.is_int(dt) for dt in (src.dtype, n.dtype)): return None
  v = exec_cast(np.array([src.arg], to_np(src.dtype)), src.dtype, n.dtype).values[0]
  return bool(v) if n.dtype is dtypes.bool else int(v)

def units(g: Graph) -> list[tuple[str, Node]]:
  """What pass 1 may remove, blocks and stores first (see the module docstring)."""
  blocks = [(k, n) for n in g.nodes if n.op in GroupOp.BlockStart for k in ("block", "unwrap")]
  stores = [("node", n) for n in g.nodes if n.op is Ops.STORE]
  rest = [("node", n) for n in g.nodes if n.op in UNIT_OPS and n.op is not Ops.STORE]
  bypass = [("bypass", n) for n in g.nodes if n.op is Ops.ASSIGN]
  ungate = [("ungate", n) for n in g.nodes if n.op in (Ops.LOAD, Ops.STORE) and len(n.src) == 3]
  return blocks + stores + rest + bypass + ungate

def remove(s: State, chosen: list[tuple[str, Node]]) -> None:
  """Removes the chosen units from s (in place; see the module docstring)."""
  g, repl, drop, zeros = s.graph, {}, set(), {}
  assigns: dict[int, list[Node]] = {}
  for n in g.nodes:
    if n.op is Ops.ASSIGN: assigns.setdefault(id(n.src[0]), []).append(n)
  for kind, n in chosen:
    if id(n) in drop: continue
    if kind in ("block", "unwrap"):
      end = _closer(g, n)
      if kind == "block":
        i, j = g.nodes.index(n), g.nodes.index(end)
        for m in g.nodes[i:j + 1]:
          drop.add(id(m))
          if m.op is Ops.ASSIGN: repl[id(m)] = m.src[0]
      else:
        drop |= {id(n), id(end)}
        if n.op is Ops.RANGE: repl[id(n)] = n.src[0]
      continue
    if kind == "ungate":  # a gated LOAD / STORE that always happens (UB where the gate was off: such candidates are dropped)
      n.src = n.src[:1] if n.op is Ops.LOAD else n.src[:2]
      continue
    drop.add(id(n))
    if kind == "bypass":  # an ASSIGN read as the value it assigns (valid where that value is visible)
      repl[id(n)] = n.src[1]
      continue
    if n.op is Ops.DEFINE_ACC:
      for a in assigns.get(id(n), ()): drop.add(id(a)); repl[id(a)] = n.src[0]
      repl[id(n)] = n.src[0]
    elif n.op is Ops.ASSIGN: repl[id(n)] = n.src[0]
    elif n.op is Ops.SPECIAL:
      name = n.arg[0]
      (g.global_size if name[0] == "g" else g.local_size)[int(name[-1])] = 1
      repl[id(n)] = _zero(g, INDEX_DTYPE, zeros)
    elif n.op is Ops.DEFINE_VAR:
      c = Node(Ops.CONST, INDEX_DTYPE, (), s.vars.pop(id(n)))
      g.nodes.insert(0, c)
      repl[id(n)] = c
    elif n.op is Ops.LOAD and len(n.src) == 3: repl[id(n)] = n.src[1]
    elif n.op not in (Ops.STORE, Ops.BARRIER):
      same = [x for x in n.src if x.dtype == n.dtype and x.op not in GroupOp.Buffer and x.op is not Ops.INDEX]
      repl[id(n)] = same[0] if same else _zero(g, n.dtype, zeros)
  def resolve(x: Node) -> Node:
    seen = 0
    while id(x) in repl and seen < 1000: x, seen = repl[id(x)], seen + 1
    return _zero(g, x.dtype, zeros) if id(x) in drop else x
  g.nodes = [n for n in g.nodes if id(n) not in drop]
  for n in g.nodes: n.src = [resolve(x) for x in n.src]
  g.dce()


