"""Reducing a failing case to a small one that fails the same way (delta debugging over uops, constants and inputs).

`Reducer(case)` proposes batches of candidate cases (`request()`); the caller runs them (on the failing backend, in
workers) and answers with one verdict per candidate (`answer(...)`): True when the candidate still fails the same way
(`same_failure`: same backend and the same kind, e.g. "wrong-value:exact" or "crash:SIGSEGV"), False when not, None for
a candidate that was not run. Verdicts must be complete up to the first True: the reducer takes the first candidate of
a batch that still fails, so that the caller may stop a batch there (a crash ends it anyway). `best` is the smallest
failing case so far, at any moment, so an interrupted reduction still has a result.

This module holds the passes (which candidates, in which order, kept when) and that protocol; the edits a candidate
makes are edits.py's (the program's structure) and value_edits.py's (constants, inputs, vars), on a copy of the case's
editable State (editable.py).

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

import numpy as np

from refimpl.dtype import PtrDType, dtypes
from refimpl.fuzz.case import Case
from refimpl.fuzz.editable import State
from refimpl.fuzz.edits import (
  drop_declarations,
  local_contents,
  local_to_input,
  one_iteration,
  pin_special,
  remove,
  replace_uses,
  retarget_store,
  scalarize,
  scopes,
  units,
  unused_declarations,
)
from refimpl.fuzz.value_edits import (
  fold_int_constants,
  folded,
  load_to_constant,
  loaded_constant,
  set_constant,
  stored_buffers,
  var_to_minimum,
  zero_input,
)
from refimpl.ir import GroupOp, Ops

MAX_BATCH = 16
MAX_ROUNDS = 20
MAX_CANDIDATES = 2000  # candidates one reduction may propose (its budget, in counts: the same on every machine)
MAX_SPECIAL = 64      # launch dimensions and loops up to this size get one candidate per value (pass 3)
SCALARIZE_SLACK = 8   # uops a scalarized case may have beyond the best (a lane's shifted indices); no pass makes vectors
VALUE_OPS = GroupOp.ALU | {Ops.CONST, Ops.LOAD, Ops.CAST, Ops.BITCAST, Ops.GEP, Ops.VECTORIZE, Ops.WMMA}
class BudgetSpent(Exception):
  """The reduction has proposed `max_candidates` candidates: it ends with the best case so far."""


def same_failure(original, candidate) -> bool:
  """Whether a candidate's Result fails the way the original Result did (same backend, same kind)."""
  return candidate is not None and candidate.status == "finding" and candidate.backend == original.backend \
    and candidate.kind == original.kind


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
    """Pass 1 (module docstring): units in chunks of halving size."""
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
        return lambda st, m: retarget_store(st, m[sid], j)
      yield from self._try([edit(id(s), j) for j in range(len(v.src))], smaller=True)

  def _locals_to_inputs(self):
    """Pass 3 (module docstring): in a one-workgroup case, each DEFINE_LOCAL becomes an input holding what the threads
    stored in it (the emulator's run of a copy that also stores every value written there into a shadow buffer)."""
    st0 = self._state
    if st0.graph.global_size != [1, 1, 1]: return
    def edit(lid, snapshot):
      return lambda st, m: local_to_input(st, m[lid], snapshot)
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
        return lambda st, m: pin_special(st, m[sid], v)
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
        return lambda st, m: one_iteration(st, m[rid], j)
      a, b = int(r.src[0].arg), int(r.src[1].arg)
      others = range(a, b - 1) if b - a <= MAX_SPECIAL else ()
      yield from self._try([edit(id(r), j) for j in (b - 1, *others)], slack=2)

  def _folds(self):
    """Pass 3 (module docstring): int ALU uops and int / bool CASTs of CONSTs become CONSTs, all at once (one
    candidate)."""
    edit = lambda st, m: fold_int_constants(st)
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
        return lambda st, m: load_to_constant(st, m[lid])
      yield from self._try([edit(id(n))], smaller=True)

  def _constants(self):
    """Pass 7 (module docstring): each CONST becomes 0, else 1 (never a RANGE's start)."""
    k = 0
    while True:
      starts = {id(n.src[0]) for n in self._state.graph.nodes if n.op is Ops.RANGE}  # kept: _one_iteration set them
      consts = [n for n in self._state.graph.nodes if n.op is Ops.CONST and n.dtype != dtypes.bool and id(n) not in starts]
      if k >= len(consts): return
      n, k = consts[k], k + 1
      def edit(i, v):
        return lambda st, m: set_constant(m[i], v)
      simpler = () if n.arg == 0 else (0,) if n.arg == 1 else (0, 1)  # only ever toward 0: no edit cycles
      yield from self._try([edit(id(n), v) for v in simpler])

  def _inputs(self):
    """Pass 8 (module docstring): each input all zeros, else zeros in halves, quarters, ...; each var its minimum."""
    for k in range(len(self._state.graph.globals())):
      b = self._state.graph.globals()[k]
      arr = self._state.arrays[id(b)]
      if not arr.view(np.uint8).any(): continue
      def zero(k, lo, hi):
        return lambda st, m: zero_input(st, k, lo, hi)
      n = arr.size
      if (yield from self._try([zero(k, 0, n)])): continue
      step = n // 2
      while step >= max(1, n // 64):
        yield from self._try([zero(k, lo, lo + step) for lo in range(0, n, step)])
        step //= 2
    for k, v in enumerate(n for n in self._state.graph.nodes if n.op is Ops.DEFINE_VAR):
      if self._state.vars[id(v)] != v.arg[1]:
        yield from self._try([lambda st, m, k=k: var_to_minimum(st, k)])
