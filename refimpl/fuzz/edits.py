"""The reducer's edits of a case's structure (reduce.py's passes propose them, one candidate each, on a copy of the
case's `State`, in place): remove units (`units`, `remove`), drop unused declarations, redirect uses (`replace_uses`),
store an operand of a stored value instead (`retarget_store`), pin a SPECIAL to one value or a RANGE to one iteration,
turn a DEFINE_LOCAL into an input of what the threads stored there (`local_contents`, `local_to_input`), scalarize a
lane. The edits of values (constants, inputs, vars) are value_edits.py's. Every edit leaves a graph whose program is
built (and verified) only when the candidate is made; an edit that does not apply raises ValueError.
"""
from __future__ import annotations

import contextlib

import numpy as np

from refimpl.dtype import PtrDType, dtypes, to_np
from refimpl.emulator.machine import emulate
from refimpl.fuzz.editable import State
from refimpl.fuzz.graph import Graph, Node, const_node
from refimpl.ir import INDEX_DTYPE, GroupOp, Ops

DECLARATION_OPS = (Ops.DEFINE_GLOBAL, Ops.DEFINE_VAR, Ops.DEFINE_LOCAL)
UNIT_OPS = GroupOp.ALU | {Ops.STORE, Ops.BARRIER, Ops.CAST, Ops.BITCAST, Ops.LOAD, Ops.GEP, Ops.VECTORIZE, Ops.WMMA,
                          Ops.ASSIGN, Ops.DEFINE_ACC, Ops.SPECIAL, Ops.DEFINE_VAR}


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
  """reduce.py's pass 9 on s, in place: the nodes `gone` (unused declarations) go with their inputs and var
  values, and the BARRIERs once no DEFINE_LOCAL is left (a barrier orders only a workgroup's memory)."""
  if not gone: raise ValueError("nothing to drop")
  ids = {id(n) for n in gone}
  g = s.graph
  g.nodes = [n for n in g.nodes if id(n) not in ids]
  if not any(n.op is Ops.DEFINE_LOCAL for n in g.nodes): g.nodes = [n for n in g.nodes if n.op is not Ops.BARRIER]
  for i in ids:
    s.arrays.pop(i, None)
    s.vars.pop(i, None)

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
  """reduce.py's pass 5 on g, in place; ValueError when g has nothing to scalarize or a WMMA."""
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

def units(g: Graph) -> list[tuple[str, Node]]:
  """What reduce.py's pass 1 may remove, blocks and stores first (see its module docstring)."""
  blocks = [(k, n) for n in g.nodes if n.op in GroupOp.BlockStart for k in ("block", "unwrap")]
  stores = [("node", n) for n in g.nodes if n.op is Ops.STORE]
  rest = [("node", n) for n in g.nodes if n.op in UNIT_OPS and n.op is not Ops.STORE]
  bypass = [("bypass", n) for n in g.nodes if n.op is Ops.ASSIGN]
  ungate = [("ungate", n) for n in g.nodes if n.op in (Ops.LOAD, Ops.STORE) and len(n.src) == 3]
  return blocks + stores + rest + bypass + ungate

def remove(s: State, chosen: list[tuple[str, Node]]) -> None:
  """Removes the chosen units from s (in place; see reduce.py's pass 1)."""
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

def retarget_store(s: State, store: Node, j: int) -> None:
  """reduce.py's pass 2 on s, in place: `store` stores operand j of its value instead, into a new buffer of the
  operand's dtype (zeros) at the same index; then dead code and unused declarations go."""
  x, ix = store.src[1].src[j], store.src[0]
  if x.dtype.count != store.src[1].dtype.count or x.op in GroupOp.Buffer: raise ValueError("not storable")
  buf = Node(Ops.DEFINE_GLOBAL, x.dtype.scalar().ptr(ix.src[0].dtype.size))
  new_ix = Node(Ops.INDEX, buf.dtype, [buf, ix.src[1]])
  s.graph.nodes.append(buf)
  s.graph.insert_before(store, [new_ix])
  store.src = [new_ix, x, *store.src[2:]]
  s.arrays[id(buf)] = np.zeros(buf.dtype.size, to_np(buf.dtype.base))
  s.graph.dce()
  with contextlib.suppress(ValueError): drop_declarations(s, unused_declarations(s.graph))

def local_to_input(s: State, local: Node, contents: np.ndarray) -> None:
  """reduce.py's pass 3 on s, in place: the DEFINE_LOCAL `local` becomes an input buffer holding `contents` (what the
  threads stored there: `local_contents`), its STOREs go, and the BARRIERs once no local is left."""
  g = s.graph
  buf = Node(Ops.DEFINE_GLOBAL, local.dtype.base.ptr(local.dtype.size))
  g.nodes = [buf if n is local else n for n in g.nodes if not (n.op is Ops.STORE and n.src[0].src[0] is local)]
  for n in g.nodes:
    if n.op is Ops.INDEX and n.src[0] is local: n.src[0], n.dtype = buf, buf.dtype
  if not any(n.op is Ops.DEFINE_LOCAL for n in g.nodes): g.nodes = [n for n in g.nodes if n.op is not Ops.BARRIER]
  s.arrays[id(buf)] = contents
  g.dce()

def pin_special(s: State, special: Node, value: int) -> None:
  """reduce.py's pass 3 on s, in place: the SPECIAL becomes the CONST `value`, its launch dimension 1."""
  name = special.arg[0]
  (s.graph.global_size if name[0] == "g" else s.graph.local_size)[int(name[-1])] = 1
  c = Node(Ops.CONST, special.dtype, (), value)
  s.graph.nodes.insert(0, c)
  replace_uses(s.graph, special, c)

def one_iteration(s: State, loop: Node, j: int) -> None:
  """reduce.py's pass 3 on s, in place: the RANGE `loop` runs its iteration j alone ([j, j+1), two new CONSTs)."""
  start, end = Node(Ops.CONST, loop.src[0].dtype, (), j), Node(Ops.CONST, loop.src[1].dtype, (), j + 1)
  s.graph.nodes[0:0] = [start, end]
  loop.src = [start, end, *loop.src[2:]]
  s.graph.dce()
