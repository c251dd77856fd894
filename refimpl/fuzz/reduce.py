"""Reducing a failing case to a small one that fails the same way (delta debugging over uops, constants and inputs).

`Reducer(case)` proposes batches of candidate cases (`request()`); the caller runs them (on the failing backend, in
workers) and answers with one verdict per candidate (`answer(...)`): True when the candidate still fails the same way
(`same_failure`: same backend and the same kind, e.g. "wrong-value:exact" or "crash:SIGSEGV"), False when not, None for
a candidate that was not run. Verdicts must be complete up to the first True: the reducer takes the first candidate of
a batch that still fails, so that the caller may stop a batch there (a crash ends it anyway). `best` is the smallest
failing case so far, at any moment, so an interrupted reduction still has a result.

Passes, repeated until a whole round changes nothing:
  1. remove units: a block with its body, a block's braces alone (a RANGE's counter becomes its start), a STORE, a
     BARRIER, an accumulator (its uses read the initial value), an ASSIGN (its uses read the register, or else the
     value it assigns), a SPECIAL (0, launch dimension 1), a DEFINE_VAR (its value as a CONST), a gate (a gated LOAD or
     STORE that always happens), or any value uop (its uses take its first operand of the same dtype, else a zero).
     Units are tried in chunks, halving the chunk size (ddmin's granularity), blocks and stores first; dead code is
     removed after every edit, so removing a STORE drops everything only it needed.
  2. retarget: a STORE stores an operand of its value instead (into a new buffer of the operand's dtype, same index),
     so the chain from the op that goes wrong to the STORE shortens.
  3. one work item, one iteration: a SPECIAL becomes each of its values k > 0 in turn (launch dimension 1; pass 1
     tries 0), so the work item left computes the element that failed; a RANGE of constant bounds runs only its last
     iteration (what an accumulator read after the loop holds), else only its iteration j for each j in turn (the one
     that computes the element that failed; loops of up to MAX_SPECIAL iterations); pass 1 then unwraps it; int ALU
     uops and int / bool CASTs of CONSTs become CONSTs of their values (so indices become constants). Locals to
     inputs: in a case of one workgroup, a DEFINE_LOCAL becomes an input buffer holding what the threads stored there
     (from an emulator run), its STOREs go, and BARRIERs go once no local is left: a value another thread computed and
     exchanged through local memory is then an input that pass 6 turns into a constant.
  4. merge: the uses of a value read an earlier value of the same dtype instead (the nearest two visible there), so
     operands the failure does not need to be distinct collapse into one (and their loads, buffers and inputs go).
  5. scalarize: every vector value becomes the scalar of one lane j (each vector access reads or writes element
     index+j alone, VECTORIZE and GEP become their operand), one candidate per lane.
  6. loads to constants: a scalar ungated LOAD at a constant index of a buffer nothing stores to becomes a CONST of
     the value it loads.
  7. constants: each CONST becomes 0, else 1 (not a RANGE's start).
  8. inputs: each buffer all zeros, else zeros in halves, quarters, ... (down to single elements in buffers of up to 64,
     1/64ths in larger ones); each var its minimum.
  9. declarations nothing uses (DEFINE_GLOBAL with its input, DEFINE_VAR with its value, DEFINE_LOCAL; BARRIERs go
     once no local is left) are dropped in one cheap candidate, else in halves (ddmin); this pass also runs first in
     every round and right after pass 1, before the expensive passes, so no reproducer keeps an unused buffer.
Passes 3 (a RANGE) and 5 may grow a case by a few CONSTs (no later pass undoes them: no pass widens a RANGE or makes
vectors); every other edit must shrink it.
A reduction's budget is a count of candidates (`max_candidates`), so where it ends does not depend on the machine's
speed. A candidate that fails verification is never proposed; one that has undefined behaviour is discarded by the worker
(never interesting), so reduction cannot slide into a UB false alarm.
"""
from __future__ import annotations

import contextlib
from collections.abc import Generator
from dataclasses import dataclass

import numpy as np

from refimpl.dtype import PtrDType, dtypes, to_np
from refimpl.emulator.alu import exec_cast
from refimpl.emulator.machine import emulate
from refimpl.fuzz.case import Case
from refimpl.fuzz.graph import Graph, Node, const_node
from refimpl.ir import INDEX_DTYPE, GroupOp, Ops, ProgramError

MAX_BATCH = 16
MAX_ROUNDS = 20
MAX_CANDIDATES = 2000  # candidates one reduction may propose (its budget, in counts: the same on every machine)
MAX_SPECIAL = 64      # launch dimensions and loops up to this size get one candidate per value (pass 3)
SCALARIZE_SLACK = 8   # uops a scalarized case may have beyond the best (a lane's shifted indices); no pass makes vectors
VALUE_OPS = GroupOp.ALU | {Ops.CONST, Ops.LOAD, Ops.CAST, Ops.BITCAST, Ops.GEP, Ops.VECTORIZE, Ops.WMMA}
DECLARATION_OPS = (Ops.DEFINE_GLOBAL, Ops.DEFINE_VAR, Ops.DEFINE_LOCAL)
UNIT_OPS = GroupOp.ALU | {Ops.STORE, Ops.BARRIER, Ops.CAST, Ops.BITCAST, Ops.LOAD, Ops.GEP, Ops.VECTORIZE, Ops.WMMA,
                          Ops.ASSIGN, Ops.DEFINE_ACC, Ops.SPECIAL, Ops.DEFINE_VAR}


class BudgetSpent(Exception):
  """The reduction has proposed `max_candidates` candidates: it ends with the best case so far."""


def same_failure(original, candidate) -> bool:
  """Whether a candidate's Result fails the way the original Result did (same backend, same kind)."""
  return candidate is not None and candidate.status == "finding" and candidate.backend == original.backend \
    and candidate.kind == original.kind


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


class Reducer:
  """See the module docstring. `tried` counts the candidates proposed so far."""
  def __init__(self, case: Case, max_batch: int = MAX_BATCH, max_candidates: int = MAX_CANDIDATES):
    self.best, self.max_batch, self.max_candidates, self.tried = case, max_batch, max_candidates, 0
    self._state = State.of(case)
    self._gen = self._run()
    self._pending: list[Case] | None = next(self._gen, None)

  def request(self) -> list[Case] | None:
    """The next batch of candidates, or None when the reduction is over."""
    return self._pending

  def answer(self, verdicts: list[bool | None]) -> None:
    try: self._pending = self._gen.send(verdicts)
    except StopIteration: self._pending = None

  # ***** the passes, as a generator that yields batches and receives verdicts *****

  def _try(self, edits, smaller: bool = False, slack: int = 0) -> Generator[list[Case], list, bool]:
    """Tries candidate edits (functions (State, node map) -> None applied to a copy) in order; keeps the first that still
    fails. smaller: only candidates with fewer uops, or as many with fewer that are not CONST (no edit cycles); else at
    most `slack` uops more than the best case (for an edit no later pass undoes: scalarize)."""
    cands: list[tuple[State, Case]] = []
    size = lambda c: (len(c.program.uops), sum(u.op is not Ops.CONST for u in c.program.uops))
    for edit in edits:
      st, m = self._state.copy()
      try: edit(st, m)
      except (ValueError, KeyError, StopIteration): continue
      case = st.case()
      if case is None or len(case.program.uops) > len(self.best.program.uops) + slack: continue
      if smaller and size(case) >= size(self.best): continue
      cands.append((st, case))
    for k in range(0, len(cands), self.max_batch):
      chunk = cands[k:k + min(self.max_batch, self.max_candidates - self.tried)]
      if not chunk: raise BudgetSpent
      self.tried += len(chunk)
      verdicts = yield [c for _, c in chunk]
      for (st, case), v in zip(chunk, verdicts):
        if v:
          self._state, self.best = st, case
          return True
        if v is None: break
    return False

  def _run(self) -> Generator[list[Case], list, None]:
    with contextlib.suppress(BudgetSpent): yield from self._rounds()

  def _rounds(self) -> Generator[list[Case], list, None]:
    for _ in range(MAX_ROUNDS):
      before = self.best
      yield from self._drop_declarations()
      yield from self._remove_units()
      yield from self._drop_declarations()
      yield from self._retarget()
      yield from self._specials()
      yield from self._locals_to_inputs()
      yield from self._one_iteration()
      yield from self._folds()
      yield from self._merge_values()
      yield from self._scalarize()
      yield from self._loads_to_constants()
      yield from self._constants()
      yield from self._inputs()
      yield from self._drop_declarations()
      if self.best is before: return

  def _ddmin(self, items, apply, size: int):
    """Tries applying chunks of `items(graph)` (lists of (kind, node)) with `apply(state, chosen)`, chunks of `size`
    first, halving the size while no chunk still fails (ddmin's granularity); starts again after each success."""
    while True:
      us = items(self._state.graph)
      if not us: return
      chunks = [us[k:k + size] for k in range(0, len(us), size)]
      def edit(chunk):
        ids = [id(n) for _, n in chunk]
        return lambda st, m: apply(st, [(k, m[i]) for (k, _), i in zip(chunk, ids)])
      if (yield from self._try([edit(c) for c in chunks], smaller=True)): continue
      if size == 1: return
      size = max(1, size // 2)

  def _remove_units(self):
    yield from self._ddmin(units, remove, max(1, len(units(self._state.graph)) // 2))

  def _drop_declarations(self):
    """Pass 9 (module docstring): every unused declaration in one candidate first, then halves."""
    unused = lambda g: [("node", n) for n in unused_declarations(g)]
    yield from self._ddmin(unused, lambda st, chosen: drop_declarations(st, [n for _, n in chosen]),
                           len(unused(self._state.graph)))

  def _retarget(self):
    """Stores an operand of a stored value instead of the value (into a new buffer of the operand's dtype, at the same
    index): the chain between the op that goes wrong and the STORE shortens by one op per step."""
    k = 0
    while True:
      stores = [n for n in self._state.graph.nodes if n.op is Ops.STORE]
      if k >= len(stores): return
      s, k = stores[k], k + 1
      v = s.src[1]
      if v.op not in GroupOp.ALU | {Ops.CAST, Ops.BITCAST}: continue
      def edit(sid, j):
        def f(st, m):
          store = m[sid]
          x, ix = store.src[1].src[j], store.src[0]
          if x.dtype.count != store.src[1].dtype.count or x.op in GroupOp.Buffer: raise ValueError("not storable")
          buf = Node(Ops.DEFINE_GLOBAL, x.dtype.scalar().ptr(ix.src[0].dtype.size))
          new_ix = Node(Ops.INDEX, buf.dtype, [buf, ix.src[1]])
          st.graph.nodes.append(buf)
          st.graph.insert_before(store, [new_ix])
          store.src = [new_ix, x, *store.src[2:]]
          st.arrays[id(buf)] = np.zeros(buf.dtype.size, to_np(buf.dtype.base))
          st.graph.dce()
          with contextlib.suppress(ValueError): drop_declarations(st, unused_declarations(st.graph))
        return f
      yield from self._try([edit(id(s), j) for j in range(len(v.src))], smaller=True)

  def _locals_to_inputs(self):
    """Pass 3 (module docstring): in a one-workgroup case, each DEFINE_LOCAL becomes an input holding what the threads
    stored in it (the emulator's run of a copy that also stores every value written there into a shadow buffer)."""
    st0 = self._state
    if st0.graph.global_size != [1, 1, 1]: return
    def edit(lid, snapshot):
      def f(st, m):
        g, local = st.graph, m[lid]
        buf = Node(Ops.DEFINE_GLOBAL, local.dtype.base.ptr(local.dtype.size))
        g.nodes = [buf if n is local else n for n in g.nodes if not (n.op is Ops.STORE and n.src[0].src[0] is local)]
        for n in g.nodes:
          if n.op is Ops.INDEX and n.src[0] is local: n.src[0], n.dtype = buf, buf.dtype
        if not any(n.op is Ops.DEFINE_LOCAL for n in g.nodes): g.nodes = [n for n in g.nodes if n.op is not Ops.BARRIER]
        st.arrays[id(buf)] = snapshot
        g.dce()
      return f
    edits = []
    for local in (n for n in st0.graph.nodes if n.op is Ops.DEFINE_LOCAL):
      snapshot = local_contents(st0, local)
      if snapshot is not None: edits.append(edit(id(local), snapshot))
    yield from self._try(edits)

  def _specials(self):
    """Pass 3 (module docstring): a SPECIAL becomes one of its values k > 0 (launch dimension 1)."""
    for k in range(len([n for n in self._state.graph.nodes if n.op is Ops.SPECIAL])):
      sp = [n for n in self._state.graph.nodes if n.op is Ops.SPECIAL]
      if k >= len(sp): return
      size = int(sp[k].arg[1])
      def edit(sid, v):
        def f(st, m):
          n = m[sid]
          (st.graph.global_size if n.arg[0][0] == "g" else st.graph.local_size)[int(n.arg[0][-1])] = 1
          c = Node(Ops.CONST, n.dtype, (), v)
          st.graph.nodes.insert(0, c)
          replace_uses(st.graph, n, c)
        return f
      if 1 < size <= MAX_SPECIAL: yield from self._try([edit(id(sp[k]), v) for v in range(1, size)], smaller=True)

  def _one_iteration(self):
    """Pass 3 (module docstring): a RANGE [a, b) of CONST bounds becomes [b-1, b), else (up to MAX_SPECIAL iterations)
    [j, j+1) for j = a, a+1, ...; never undone (slack: its CONSTs)."""
    k = 0
    while True:
      ranges = [n for n in self._state.graph.nodes if n.op is Ops.RANGE and all(x.op is Ops.CONST for x in n.src[:2])
                and int(n.src[1].arg) - int(n.src[0].arg) > 1]
      if k >= len(ranges): return
      r, k = ranges[k], k + 1
      def edit(rid, j):
        def f(st, m):
          n = m[rid]
          start, end = Node(Ops.CONST, n.src[0].dtype, (), j), Node(Ops.CONST, n.src[1].dtype, (), j + 1)
          st.graph.nodes[0:0] = [start, end]
          n.src = [start, end, *n.src[2:]]
          st.graph.dce()
        return f
      a, b = int(r.src[0].arg), int(r.src[1].arg)
      others = range(a, b - 1) if b - a <= MAX_SPECIAL else ()
      yield from self._try([edit(id(r), j) for j in (b - 1, *others)], slack=2)

  def _folds(self):
    """Pass 3 (module docstring): int ALU uops and int / bool CASTs of CONSTs become CONSTs, all at once (one
    candidate)."""
    def edit(st, m):
      while True:
        n = next((x for x in st.graph.nodes if folded(x) is not None), None)
        if n is None: return
        c = Node(Ops.CONST, n.dtype, (), folded(n))
        st.graph.insert_before(n, [c])
        replace_uses(st.graph, n, c)
    if any(folded(n) is not None for n in self._state.graph.nodes): yield from self._try([edit], smaller=True)

  def _merge_values(self):
    """Pass 4 (module docstring): uses of a value read the nearest earlier visible value of the same dtype."""
    k = 0
    while True:
      g = self._state.graph
      vals = [n for n in g.nodes if n.op in VALUE_OPS]
      if k >= len(vals): return
      v, k = vals[k], k + 1
      sc = scopes(g)
      here = sc[id(v)]
      earlier = [u for u in reversed(vals[:k - 1]) if u.dtype == v.dtype and here[:len(sc[id(u)])] == sc[id(u)]][:2]
      def edit(vid, uid):
        return lambda st, m: replace_uses(st.graph, m[vid], m[uid])
      yield from self._try([edit(id(v), id(u)) for u in earlier], smaller=True)

  def _scalarize(self):
    """Pass 5 (module docstring): one candidate per lane of the widest vector."""
    lanes = max((n.dtype.count for n in self._state.graph.nodes if not isinstance(n.dtype, PtrDType)), default=1)
    def edit(lane):
      return lambda st, m: scalarize(st.graph, lane)
    if lanes > 1: yield from self._try([edit(j) for j in range(lanes)], slack=SCALARIZE_SLACK)

  def _loads_to_constants(self):
    """Pass 6 (module docstring): a scalar LOAD of an input at a constant index becomes a CONST of what it loads."""
    k = 0
    while True:
      st0 = self._state
      stored = stored_buffers(st0.graph)
      loads = [n for n in st0.graph.nodes if loaded_constant(st0, n, stored) is not None]
      if k >= len(loads): return
      n, k = loads[k], k + 1
      def edit(lid):
        def f(st, m):
          load = m[lid]
          c = Node(Ops.CONST, load.dtype, (), loaded_constant(st, load, stored_buffers(st.graph)))
          st.graph.nodes.insert(0, c)
          replace_uses(st.graph, load, c)
        return f
      yield from self._try([edit(id(n))], smaller=True)

  def _constants(self):
    k = 0
    while True:
      starts = {id(n.src[0]) for n in self._state.graph.nodes if n.op is Ops.RANGE}  # kept: _one_iteration set them
      consts = [n for n in self._state.graph.nodes if n.op is Ops.CONST and n.dtype != dtypes.bool and id(n) not in starts]
      if k >= len(consts): return
      n, k = consts[k], k + 1
      def edit(i, v):
        def f(st, m): m[i].arg = float(v) if dtypes.is_float(m[i].dtype) else v
        return f
      simpler = () if n.arg == 0 else (0,) if n.arg == 1 else (0, 1)  # only ever toward 0: no edit cycles
      yield from self._try([edit(id(n), v) for v in simpler])

  def _inputs(self):
    for k in range(len(self._state.graph.globals())):
      b = self._state.graph.globals()[k]
      arr = self._state.arrays[id(b)]
      if not arr.view(np.uint8).any(): continue
      def zero(k, lo, hi):
        def f(st, m):
          buf = st.graph.globals()[k]
          a = st.arrays[id(buf)].copy()
          if not a.view(np.uint8).reshape(a.size, -1)[lo:hi].any(): raise ValueError("already zero")
          a.view(np.uint8).reshape(a.size, -1)[lo:hi] = 0
          st.arrays[id(buf)] = a
        return f
      n = arr.size
      if (yield from self._try([zero(k, 0, n)])): continue
      step = n // 2
      while step >= max(1, n // 64):
        yield from self._try([zero(k, lo, lo + step) for lo in range(0, n, step)])
        step //= 2
    for k, v in enumerate(n for n in self._state.graph.nodes if n.op is Ops.DEFINE_VAR):
      if self._state.vars[id(v)] != v.arg[1]:
        def f(st, m, k=k):
          var = [n for n in st.graph.nodes if n.op is Ops.DEFINE_VAR][k]
          st.vars[id(var)] = var.arg[1]
        yield from self._try([f])
