"""The fuzzer's reducer (refimpl/fuzz/reduce.py), driven in-process by predicates (no backend needed): it only ever
proposes valid programs, keeps the first still-failing candidate of each batch, and shrinks uops, constants and inputs."""
import numpy as np
import pytest

from refimpl.fuzz.case import Case
from refimpl.fuzz.generate import Profile, make_program
from refimpl.fuzz.reduce import Reducer
from refimpl.ir import Ops, verify

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
  case = _case_with(Ops.ADD, max_uops=70)
  r = _reduce(case, lambda c: False)
  assert r.best is case and r.request() is None
