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
     value it assigns), a SPECIAL (0, launch dimension 1), a DEFINE_VAR (its value as a CONST), or any value uop (its
     uses take its first operand of the same dtype, else a zero). Units are
     tried in chunks, halving the chunk size (ddmin's granularity), blocks and stores first; dead code is removed
     after every edit, so removing a STORE drops everything only it needed.
  2. retarget: a STORE stores an operand of its value instead (into a new buffer of the operand's dtype, same index),
     so the chain from the op that goes wrong to the STORE shortens.
  3. constants: each CONST becomes 0, else 1.
  4. inputs: each buffer all zeros, else zeros in halves, quarters, ... (down to single elements in buffers of up to 64,
     1/64ths in larger ones); each var its minimum.
  5. buffers nothing uses any more are dropped (with their inputs), and unused locals.
A candidate that fails verification is never proposed; one that has undefined behaviour is discarded by the worker
(never interesting), so reduction cannot slide into a UB false alarm.
"""
from __future__ import annotations

import contextlib
from collections.abc import Generator
from dataclasses import dataclass

import numpy as np

from refimpl.dtype import dtypes, to_np
from refimpl.fuzz.case import Case
from refimpl.fuzz.graph import Graph, Node, const_node
from refimpl.ir import INDEX_DTYPE, GroupOp, Ops, ProgramError

MAX_BATCH = 16
MAX_ROUNDS = 20
UNIT_OPS = GroupOp.ALU | {Ops.STORE, Ops.BARRIER, Ops.CAST, Ops.BITCAST, Ops.LOAD, Ops.GEP, Ops.VECTORIZE, Ops.WMMA,
                          Ops.ASSIGN, Ops.DEFINE_ACC, Ops.SPECIAL, Ops.DEFINE_VAR}


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

def units(g: Graph) -> list[tuple[str, Node]]:
  """What pass 1 may remove, blocks and stores first (see the module docstring)."""
  blocks = [(k, n) for n in g.nodes if n.op in GroupOp.BlockStart for k in ("block", "unwrap")]
  stores = [("node", n) for n in g.nodes if n.op is Ops.STORE]
  rest = [("node", n) for n in g.nodes if n.op in UNIT_OPS and n.op is not Ops.STORE]
  bypass = [("bypass", n) for n in g.nodes if n.op is Ops.ASSIGN]
  return blocks + stores + rest + bypass

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
  def __init__(self, case: Case, max_batch: int = MAX_BATCH):
    self.best, self.max_batch, self.tried = case, max_batch, 0
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

  def _try(self, edits, smaller: bool = False) -> Generator[list[Case], list, bool]:
    """Tries candidate edits (functions (State, node map) -> None applied to a copy) in order; keeps the first that still
    fails. smaller: only candidates with fewer uops, or as many with fewer that are not CONST (no edit cycles)."""
    cands: list[tuple[State, Case]] = []
    size = lambda c: (len(c.program.uops), sum(u.op is not Ops.CONST for u in c.program.uops))
    for edit in edits:
      st, m = self._state.copy()
      try: edit(st, m)
      except (ValueError, KeyError, StopIteration): continue
      case = st.case()
      if case is None or len(case.program.uops) > len(self.best.program.uops): continue
      if smaller and size(case) >= size(self.best): continue
      cands.append((st, case))
    for k in range(0, len(cands), self.max_batch):
      chunk = cands[k:k + self.max_batch]
      self.tried += len(chunk)
      verdicts = yield [c for _, c in chunk]
      for (st, case), v in zip(chunk, verdicts):
        if v:
          self._state, self.best = st, case
          return True
        if v is None: break
    return False

  def _run(self) -> Generator[list[Case], list, None]:
    for _ in range(MAX_ROUNDS):
      before = self.best
      yield from self._remove_units()
      yield from self._retarget()
      yield from self._constants()
      yield from self._inputs()
      yield from self._try([lambda st, m: self._drop_buffers(st)], smaller=True)
      if self.best is before: return

  def _remove_units(self):
    size = max(1, len(units(self._state.graph)) // 2)
    while True:
      us = units(self._state.graph)
      if not us: return
      chunks = [us[k:k + size] for k in range(0, len(us), size)]
      def edit(chunk):
        ids = [id(n) for _, n in chunk]
        return lambda st, m: remove(st, [(k, m[i]) for (k, _), i in zip(chunk, ids)])
      if (yield from self._try([edit(c) for c in chunks], smaller=True)): continue
      if size == 1: return
      size = max(1, size // 2)

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
          with contextlib.suppress(ValueError): self._drop_buffers(st)
        return f
      yield from self._try([edit(id(s), j) for j in range(len(v.src))], smaller=True)

  def _constants(self):
    k = 0
    while True:
      consts = [n for n in self._state.graph.nodes if n.op is Ops.CONST and n.dtype != dtypes.bool]
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

  @staticmethod
  def _drop_buffers(st: State) -> None:
    used = {id(s) for n in st.graph.nodes for s in n.src}
    barrier = any(n.op is Ops.BARRIER for n in st.graph.nodes)
    kinds = (Ops.DEFINE_GLOBAL,) if barrier else (Ops.DEFINE_GLOBAL, Ops.DEFINE_LOCAL)
    gone = [b for b in st.graph.nodes if b.op in kinds and id(b) not in used]
    if not gone: raise ValueError("nothing to drop")
    st.graph.nodes = [n for n in st.graph.nodes if n not in gone]
    for b in gone: st.arrays.pop(id(b), None)
