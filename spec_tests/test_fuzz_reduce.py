"""The fuzzer's reducer (refimpl/fuzz/reduce.py), driven in-process by predicates (no backend needed): it only ever
proposes valid programs, keeps the first still-failing candidate of each batch, and shrinks uops, constants and inputs."""
import numpy as np
import pytest

from refimpl.dtype import PtrDType, dtypes, to_np
from refimpl.fuzz.case import Case
from refimpl.fuzz.generate import Profile, make_program
from refimpl.fuzz.graph import Graph, Node
from refimpl.fuzz.reduce import Reducer
from refimpl.ir import Ops, verify
from refimpl.runner import run_program

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _reduce(case: Case, interesting, seen: list | None = None) -> Reducer:
  """Drives a Reducer: verdicts in order, stopping each batch at its first True (as the campaign does)."""
  r = Reducer(case)
  batch = r.request()
  while batch is not None:
    verdicts: list = []
    for c in batch:
      if seen is not None: seen.append(c)
      verdicts.append(interesting(c))
      if verdicts[-1]: break
    r.answer(verdicts + [None] * (len(batch) - len(verdicts)))
    batch = r.request()
  return r

def _case_with(op: Ops, max_uops: int = 400) -> Case:
  for i in range(200):
    g = make_program(0, i, Profile())
    p = g.graph.program()
    if g.emulation is not None and len(p.uops) <= max_uops and any(u.op is op for u in p.uops):
      return Case(p, g.inputs(), g.vals)
  raise AssertionError(f"no program with {op}")

def _has(op):
  return lambda c: any(u.op is op for u in c.program.uops)


def test_reduces_to_a_few_uops_and_only_proposes_valid_programs():
  """Rule: delta debugging over uops keeps a failing case failing while removing what it can; every candidate verifies;
  the result is a handful of uops around the op that matters."""
  case = _case_with(Ops.IDIV)
  seen: list = []
  r = _reduce(case, _has(Ops.IDIV), seen)
  for c in seen: verify(c.program)
  assert _has(Ops.IDIV)(r.best)
  assert len(r.best.program.uops) <= 10 < len(case.program.uops), r.best.program.listing()


def test_constants_and_inputs_shrink_toward_zero():
  """Rule: constants become 0 (else 1) and input elements are zeroed wherever the failure does not need them."""
  case = _case_with(Ops.IDIV)
  b0 = case.inputs[0]
  probe = int(np.argmax(b0.view(np.uint8).reshape(b0.size, -1).any(axis=1)))
  needs = lambda c: _has(Ops.IDIV)(c) and len(c.inputs) == len(case.inputs) and \
    c.inputs[0].view(np.uint8).reshape(c.inputs[0].size, -1)[probe].tobytes() == \
    b0.view(np.uint8).reshape(b0.size, -1)[probe].tobytes()
  r = _reduce(case, needs)
  rows = r.best.inputs[0].view(np.uint8).reshape(b0.size, -1)
  assert rows[probe].tobytes() == b0.view(np.uint8).reshape(b0.size, -1)[probe].tobytes()
  assert not np.delete(rows, probe, axis=0).any(), "every element the predicate does not need is zero"
  consts = [u.arg for u in r.best.program.uops if u.op is Ops.CONST and not isinstance(u.arg, bool)]
  assert consts and all(c in (0, 1) for c in consts), consts


def test_best_is_always_a_failing_case():
  """Rule: `best` only ever holds a candidate the caller called failing (or the original): an interrupted reduction
  still has a valid result."""
  case = _case_with(Ops.MAX)
  calls = {"n": 0}
  def flaky(c):
    calls["n"] += 1
    return _has(Ops.MAX)(c) and calls["n"] % 3 != 0
  r = Reducer(case)
  batch = r.request()
  steps = 0
  while batch is not None and steps < 15:
    verdicts = [flaky(c) for c in batch]
    first = next((k for k, v in enumerate(verdicts) if v), None)
    r.answer(verdicts if first is None else verdicts[:first + 1] + [None] * (len(batch) - first - 1))
    assert r.best is case or _has(Ops.MAX)(r.best)
    batch, steps = r.request(), steps + 1


def test_a_case_nothing_can_shrink_ends_the_reduction():
  """Rule: when no candidate fails, the reduction ends with the original case."""
  a, out = _buf(dtypes.int32, 4), _buf(dtypes.int32, 4)
  la, lb = _load(a, 1, dtypes.int32), _load(a, 2, dtypes.int32)
  add = Node(Ops.ADD, dtypes.int32, [la[-1], lb[-1]])
  g = Graph([a, out, *la, *lb, add, *_store(out, 0, add)])
  case = Case(g.program(), [np.arange(4, dtype=np.int32), np.zeros(4, np.int32)], ())
  r = _reduce(case, lambda c: False)
  assert r.best is case and r.request() is None


# ***** passes that need values: predicates run the emulator *****

def _buf(dt, n: int) -> Node: return Node(Ops.DEFINE_GLOBAL, dt.ptr(n))

def _load(buf: Node, i: int, dt) -> list[Node]:
  c = Node(Ops.CONST, dtypes.int32, (), i)
  ix = Node(Ops.INDEX, buf.dtype, [buf, c])
  return [c, ix, Node(Ops.LOAD, dt, [ix])]

def _store(buf: Node, i: int, value: Node, *gate: Node) -> list[Node]:
  c = Node(Ops.CONST, dtypes.int32, (), i)
  ix = Node(Ops.INDEX, buf.dtype, [buf, c])
  return [c, ix, Node(Ops.STORE, dtypes.void, [ix, value, *gate])]

def _emulated(c: Case) -> list[np.ndarray]: return run_program(c.program, *[a.copy() for a in c.inputs], device="PYTHON")

def _out_is(k: int, want) -> object:
  """A predicate: the last buffer's element k is `want` (emulated); programs that do not run are not interesting."""
  def f(c: Case) -> bool:
    try: return bool(_emulated(c)[-1][k] == want)
    except Exception: return False
  return f


def test_operands_merge_into_one_input():
  """Rule: uses of a value may read an earlier value of the same dtype instead, so a failure that needs a real product
  feeding an ADD (three float inputs) ends with one input buffer, one output and nothing else."""
  a, b, c, out = _buf(dtypes.float32, 4), _buf(dtypes.float32, 4), _buf(dtypes.float32, 4), _buf(dtypes.float32, 4)
  la, lb, lc = _load(a, 0, dtypes.float32), _load(b, 1, dtypes.float32), _load(c, 2, dtypes.float32)
  mul = Node(Ops.MUL, dtypes.float32, [la[-1], lb[-1]])
  add = Node(Ops.ADD, dtypes.float32, [mul, lc[-1]])
  g = Graph([a, b, c, out, *la, *lb, *lc, mul, add, *_store(out, 0, add)])
  inputs = [np.arange(1, 5, dtype=np.float32) * s for s in (1.5, 2.5, 3.5)] + [np.zeros(4, np.float32)]
  case = Case(g.program(), inputs, ())
  def fused(x: Case) -> bool:  # an ADD of a MUL whose operands are both loaded
    us = x.program.uops
    return any(u.op is Ops.ADD and any(us[s].op is Ops.MUL and all(us[t].op is Ops.LOAD for t in us[s].src) for s in u.src)
               for u in us)
  r = _reduce(case, fused)
  assert fused(r.best)
  assert sum(u.op is Ops.DEFINE_GLOBAL for u in r.best.program.uops) == 2, r.best.program.listing()
  assert len(r.best.program.uops) <= 10 < len(case.program.uops), r.best.program.listing()


def test_loads_of_inputs_become_constants():
  """Rule: a scalar LOAD of an input nothing writes, at a constant index, may become a CONST of the value it loads."""
  a, b, out = _buf(dtypes.int32, 4), _buf(dtypes.int32, 4), _buf(dtypes.int32, 4)
  la, lb = _load(a, 1, dtypes.int32), _load(b, 2, dtypes.int32)
  div = Node(Ops.IDIV, dtypes.int32, [la[-1], lb[-1]])
  g = Graph([a, b, out, *la, *lb, div, *_store(out, 0, div)])
  inputs = [np.array([0, -7, 0, 0], np.int32), np.array([0, 0, 2, 0], np.int32), np.zeros(4, np.int32)]
  case = Case(g.program(), inputs, ())
  truncated = _out_is(0, -3)  # -7 / 2 toward zero
  assert truncated(case)
  r = _reduce(case, truncated)
  assert truncated(r.best) and not any(u.op is Ops.LOAD for u in r.best.program.uops), r.best.program.listing()
  assert len(r.best.program.uops) <= 7, r.best.program.listing()


def test_vectors_are_scalarized_at_the_lane_that_fails():
  """Rule: a vector program may become scalar at any one lane (each access at index + lane), so a failure in lane 1 of
  a vec2 IDIV ends as a scalar IDIV of that lane's elements."""
  a, out = _buf(dtypes.int32, 4), _buf(dtypes.int32, 4)
  v2 = dtypes.int32.vec(2)
  la, lb = _load(a, 0, v2), _load(a, 2, v2)
  div = Node(Ops.IDIV, v2, [la[-1], lb[-1]])
  g = Graph([a, out, *la, *lb, div, *_store(out, 0, div)])
  inputs = [np.array([6, -7, 3, 2], np.int32), np.zeros(4, np.int32)]
  case = Case(g.program(), inputs, ())
  lane1 = _out_is(1, -3)
  assert lane1(case)
  r = _reduce(case, lane1)
  assert lane1(r.best)
  assert all(u.dtype.count == 1 for u in r.best.program.uops if not isinstance(u.dtype, PtrDType)), r.best.program.listing()
  assert len(r.best.program.uops) <= 7, r.best.program.listing()


def test_gates_are_removed():
  """Rule: a gated STORE or LOAD may become an ungated one (the gate and what only it needs go)."""
  a, out = _buf(dtypes.int32, 4), _buf(dtypes.int32, 4)
  la = _load(a, 1, dtypes.int32)
  gate = Node(Ops.CMPLT, dtypes.bool, [la[0], Node(Ops.CONST, dtypes.int32, (), 3)])
  neg = Node(Ops.NEG, dtypes.int32, [la[-1]])
  g = Graph([a, out, *la, gate.src[1], gate, neg, *_store(out, 0, neg, gate)])
  case = Case(g.program(), [np.array([0, 5, 0, 0], np.int32), np.zeros(4, np.int32)], ())
  negated = lambda c: _out_is(0, -5)(c) and any(u.op is Ops.NEG for u in c.program.uops)
  assert negated(case)
  r = _reduce(case, negated)
  assert negated(r.best) and not any(u.op is Ops.CMPLT for u in r.best.program.uops), r.best.program.listing()


def test_a_grid_becomes_the_work_item_that_fails():
  """Rule: a SPECIAL may become any one of its values (the launch dimension 1) and int arithmetic of constants folds, so
  a failure at work item 4 of 8 ends as one work item computing that element from constants."""
  a, out = _buf(dtypes.int32, 9), _buf(dtypes.int32, 8)
  gid = Node(Ops.SPECIAL, dtypes.int32, (), ("gidx0", 8))
  one = Node(Ops.CONST, dtypes.int32, (), 1)
  nxt = Node(Ops.ADD, dtypes.int32, [gid, one])
  ix = Node(Ops.INDEX, a.dtype, [a, nxt])
  ld = Node(Ops.LOAD, dtypes.int32, [ix])
  two = Node(Ops.CONST, dtypes.int32, (), 2)
  div = Node(Ops.IDIV, dtypes.int32, [ld, two])
  ox = Node(Ops.INDEX, out.dtype, [out, gid])
  g = Graph([a, out, gid, one, nxt, ix, ld, two, div, ox, Node(Ops.STORE, dtypes.void, [ox, div])], global_size=(8, 1, 1))
  case = Case(g.program(), [np.array([0, 2, 4, 6, 8, -7, 12, 14, 16], np.int32), np.zeros(8, np.int32)], ())
  item4 = _out_is(4, -3)
  assert item4(case)
  r = _reduce(case, item4)
  assert item4(r.best) and r.best.program.global_size == (1, 1, 1)
  assert not any(u.op in (Ops.SPECIAL, Ops.LOAD) for u in r.best.program.uops), r.best.program.listing()


def test_a_loop_runs_only_its_last_iteration():
  """Rule: a RANGE of constant bounds may run only its last iteration, so an accumulator read after the loop that holds
  the last element loaded ends as that element, without the loop."""
  a, out = _buf(dtypes.int32, 8), _buf(dtypes.int32, 1)
  zero, eight = Node(Ops.CONST, dtypes.int32, (), 0), Node(Ops.CONST, dtypes.int32, (), 8)
  acc = Node(Ops.DEFINE_ACC, dtypes.int32, [zero], 0)
  rng = Node(Ops.RANGE, dtypes.int32, [zero, eight], 1)
  ix = Node(Ops.INDEX, a.dtype, [a, rng])
  ld = Node(Ops.LOAD, dtypes.int32, [ix])
  asg = Node(Ops.ASSIGN, dtypes.int32, [acc, ld])
  end = Node(Ops.ENDRANGE, dtypes.void, [rng])
  neg = Node(Ops.NEG, dtypes.int32, [asg])
  g = Graph([a, out, zero, eight, acc, rng, ix, ld, asg, end, neg, *_store(out, 0, neg)])
  case = Case(g.program(), [np.arange(10, 18, dtype=np.int32), np.zeros(1, np.int32)], ())
  last = lambda c: _out_is(0, -17)(c) and any(u.op is Ops.NEG for u in c.program.uops)
  assert last(case)
  r = _reduce(case, last)
  assert last(r.best) and not any(u.op is Ops.RANGE for u in r.best.program.uops), r.best.program.listing()



def _exchange_through_local_memory():
  """out[l] = tmp[3 - l] * z[l], where each of 4 threads first stores x[l] + y[l] into tmp (a DEFINE_LOCAL), then
  BARRIER: every thread multiplies a value another thread computed."""
  from refimpl.ir import ProgramBuilder
  b = ProgramBuilder("k")
  f32, i32 = dtypes.float32, dtypes.int32
  out, x, y, z = (b.global_buf(f32, 4) for _ in range(4))
  tmp = b.local_buf(f32, 4)
  lane = b.lidx(0, 4)
  b.store(tmp, lane, b.alu(Ops.ADD, b.load(x, lane), b.load(y, lane)))
  b.barrier()
  other = b.load(tmp, b.alu(Ops.SUB, b.const(3, i32), lane))
  b.store(out, lane, b.alu(Ops.MUL, other, b.load(z, lane)))
  return b.build()

def _wrong_mul_near(case: Case) -> bool:
  """A backend whose float MUL adds 1 when its operands are in (1.75, 1.875) and (1.625, 1.75): the case fails when that
  changes an output (and it has no undefined behaviour, which a campaign's worker would discard)."""
  from refimpl.emulator.machine import emulate
  good = emulate(case.program, case.inputs, case.vals, strict=False)
  if good.events: return False
  g = Graph.from_program(case.program)
  for n in list(g.nodes):
    if n.op is Ops.MUL and dtypes.is_float(n.dtype):
      m = Node(Ops.MUL, n.dtype, list(n.src))
      one = Node(Ops.CONST, n.dtype, (), 1.0)
      near = []
      for s, (lo, hi) in zip(n.src, ((1.75, 1.875), (1.625, 1.75))):
        clo, chi = Node(Ops.CONST, n.dtype, (), lo), Node(Ops.CONST, n.dtype, (), hi)
        near += [clo, chi, Node(Ops.CMPLT, dtypes.bool, [clo, s]), Node(Ops.CMPLT, dtypes.bool, [s, chi])]
      both = Node(Ops.AND, dtypes.bool, [Node(Ops.AND, dtypes.bool, near[2:4]), Node(Ops.AND, dtypes.bool, near[6:8])])
      plus = Node(Ops.ADD, n.dtype, [m, one])
      g.insert_before(n, [m, one, *near, *both.src, both, plus])
      n.op, n.src = Ops.WHERE, [both, plus, m]
  bad = emulate(g.program(), case.inputs, case.vals, strict=False)
  return any((a.view(np.uint8) != b.view(np.uint8)).any() for a, b in zip(good.buffers, bad.buffers))

def test_a_value_exchanged_through_local_memory_reduces_to_the_op():
  """Rule: locals become inputs (pass 3): a failure that needs the values threads exchanged through local memory, behind
  a BARRIER, reduces to the op that fails on those values, without the local or the barrier."""
  p = _exchange_through_local_memory()
  x, y = np.array([0.9, 0.3, 0.2, 0.1], np.float32), np.array([0.9, 0.2, 0.3, 0.4], np.float32)
  z = np.array([1.1, 1.2, 1.3, 1.7], np.float32)
  case = Case(p, [np.zeros(4, np.float32), x, y, z])
  assert _wrong_mul_near(case)  # only thread 3 fails: tmp[0] = 0.9 + 0.9 times z[3] = 1.7
  r = _reduce(case, _wrong_mul_near)
  ops = [u.op for u in r.best.program.uops]
  assert _wrong_mul_near(r.best) and Ops.MUL in ops
  assert not {Ops.DEFINE_LOCAL, Ops.BARRIER} & set(ops) and len(ops) <= 10, r.best.program.listing()


# ***** pass 9 and the budget *****

def _case_with_unused_declarations() -> Case:
  """out[0] = a[1] + a[2], with five buffers, a var and a local that nothing reads declared around it."""
  a, out = _buf(dtypes.int32, 4), _buf(dtypes.int32, 4)
  unused = [_buf(dt, 8) for dt in (dtypes.uint8, dtypes.float32, dtypes.int64, dtypes.bool, dtypes.uint16)]
  var = Node(Ops.DEFINE_VAR, dtypes.int32, (), ("n", 1, 9))
  local = Node(Ops.DEFINE_LOCAL, dtypes.float32.ptr(4, local=True), (), "lbuf")
  la, lb = _load(a, 1, dtypes.int32), _load(a, 2, dtypes.int32)
  add = Node(Ops.ADD, dtypes.int32, [la[-1], lb[-1]])
  g = Graph([local, a, *unused[:3], var, out, *unused[3:], *la, *lb, add, *_store(out, 0, add)])
  arrays = [np.arange(4, dtype=np.int32), *[np.ones(8, to_np(b.dtype.base)) for b in unused[:3]], np.zeros(4, np.int32),
            *[np.ones(8, to_np(b.dtype.base)) for b in unused[3:]]]
  return Case(g.program(), arrays, (5,))

def _unused(p) -> list:
  used = {i for u in p.uops for i in u.src}
  return [u for i, u in enumerate(p.uops) if u.op in (Ops.DEFINE_GLOBAL, Ops.DEFINE_VAR, Ops.DEFINE_LOCAL) and i not in used]

def test_unused_declarations_go_in_the_first_candidate():
  """Rule (pass 9, run first in every round): one cheap candidate drops every DEFINE_GLOBAL, DEFINE_VAR and DEFINE_LOCAL
  that nothing uses, with their inputs and var values, before any other pass proposes anything."""
  case = _case_with_unused_declarations()
  seen: list = []
  r = _reduce(case, _has(Ops.ADD), seen)
  first = seen[0].program
  decls = [u.op for u in first.uops if u.op in (Ops.DEFINE_GLOBAL, Ops.DEFINE_VAR, Ops.DEFINE_LOCAL)]
  assert decls == [Ops.DEFINE_GLOBAL, Ops.DEFINE_GLOBAL], first.listing()
  assert len(seen[0].inputs) == 2 and seen[0].vals == ()
  assert [a.tolist() for a in seen[0].inputs] == [[0, 1, 2, 3], [0, 0, 0, 0]]
  assert not _unused(r.best.program), r.best.program.listing()

def test_unused_declarations_a_failure_needs_are_kept_and_the_rest_go():
  """Rule (pass 9): when dropping every unused declaration at once loses the failure (here: it needs the local), the
  declarations are dropped in halves (ddmin), so the reproducer keeps only what the failure needs."""
  case = _case_with_unused_declarations()
  needs_local = lambda c: _has(Ops.ADD)(c) and _has(Ops.DEFINE_LOCAL)(c)
  r = _reduce(case, needs_local)
  assert [u.op for u in _unused(r.best.program)] == [Ops.DEFINE_LOCAL], r.best.program.listing()

def test_the_budget_is_a_count_of_candidates():
  """Rule: a reduction proposes at most `max_candidates` candidates and then ends with its best case, so where it ends
  depends on the verdicts alone, not on the machine's speed."""
  case = _case_with(Ops.IDIV)
  full = _reduce(case, _has(Ops.IDIV))
  for budget in (1, 7, full.tried // 2):
    seen: list = []
    r = Reducer(case, max_candidates=budget)
    batch = r.request()
    while batch is not None:
      verdicts = [_has(Ops.IDIV)(c) for c in batch]
      seen += batch
      cut = verdicts.index(True) + 1 if True in verdicts else len(verdicts)
      r.answer(verdicts[:cut] + [None] * (len(batch) - cut))
      batch = r.request()
    assert r.tried <= budget and len(seen) <= budget, (budget, r.tried)
    assert _has(Ops.IDIV)(r.best)
  assert full.tried > 7


def test_a_loop_runs_only_the_iteration_that_fails():
  """Rule: a RANGE of constant bounds may run only one iteration j (each tried in turn after the last), so a loop that
  stores the wrong element in its iteration 5 of 8 reduces to that iteration alone, without the loop."""
  a, out = _buf(dtypes.int32, 8), _buf(dtypes.int32, 8)
  zero, eight = Node(Ops.CONST, dtypes.int32, (), 0), Node(Ops.CONST, dtypes.int32, (), 8)
  rng = Node(Ops.RANGE, dtypes.int32, [zero, eight], 0)
  ld_ix = Node(Ops.INDEX, a.dtype, [a, rng])
  ld = Node(Ops.LOAD, dtypes.int32, [ld_ix])
  neg = Node(Ops.NEG, dtypes.int32, [ld])
  st_ix = Node(Ops.INDEX, out.dtype, [out, rng])
  g = Graph([a, out, zero, eight, rng, ld_ix, ld, neg, st_ix, Node(Ops.STORE, dtypes.void, [st_ix, neg]),
             Node(Ops.ENDRANGE, dtypes.void, [rng])])
  case = Case(g.program(), [np.arange(10, 18, dtype=np.int32), np.zeros(8, np.int32)], ())
  fifth = lambda c: _out_is(5, -15)(c) and any(u.op is Ops.NEG for u in c.program.uops)
  assert fifth(case)
  r = _reduce(case, fifth)
  assert fifth(r.best) and not any(u.op is Ops.RANGE for u in r.best.program.uops), r.best.program.listing()
