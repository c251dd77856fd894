"""The deferred-undefined-value rule (SPEC.md, Decisions, "deferred undefined values"; refimpl/emulator/ub.py): an op of
a deferred kind (CAST_RANGE, SHIFT_COUNT, DIVISOR_ZERO, DIVISION_OVERFLOW, RACY_READ, UNINITIALISED) gives an undefined
value in its lane; arithmetic (a division included, as dividend or divisor) and moves carry it, a WHERE that picks the
other value drops it, and the program is undefined only where the value is used: stored, an index, a gate, an IF
condition, a loop bound. Strict mode raises at the use, with the op that made the value as `origin`; immediate kinds
still raise where the op runs."""
from __future__ import annotations

import numpy as np
import pytest

from refimpl import UndefinedBehavior
from refimpl.dtype import dtypes
from refimpl.emulator.machine import emulate
from refimpl.emulator.ub import UB, USES
from refimpl.fuzz.case import discard_reason
from refimpl.ir import Ops, ProgramBuilder

I32, F32 = dtypes.int32, dtypes.float32


def _cast_program(use: str):
  """Two threads: v = int32(x[g]) (x[1] = 3e9 is outside int32's range), then v is used as `use` (a word of USES) or,
  for "where", discarded by a WHERE that picks 7 wherever x >= 2^31 (tinygrad's range reductions do that)."""
  b = ProgramBuilder(f"deferred_{use.replace(' ', '_')}")
  out, x = b.global_buf(I32, 2), b.global_buf(F32, 2)
  g = b.gidx(0, 2)
  xv = b.load(x, g)
  v = b.cast(xv, I32)
  one = b.const(1, I32)
  in_range = b.alu(Ops.CMPLT, xv, b.const(2.0 ** 31, F32))
  if use == "where": b.store(out, g, b.alu(Ops.WHERE, in_range, v, b.const(7, I32)))
  elif use == "arithmetic": b.store(out, g, b.alu(Ops.WHERE, in_range, b.alu(Ops.ADD, v, one), one))
  elif use == "divisor": b.store(out, g, b.alu(Ops.WHERE, in_range, b.alu(Ops.IDIV, b.const(7, I32), b.alu(Ops.OR, v, one)), one))
  elif use == "divided": b.store(out, g, b.alu(Ops.IDIV, b.const(7, I32), b.alu(Ops.OR, v, one)))
  elif use == "stored": b.store(out, g, b.alu(Ops.ADD, v, one))
  elif use == "index": b.store(out, b.alu(Ops.AND, v, one), g)
  elif use == "gate": b.store(out, g, one, gate=b.alu(Ops.CMPLT, v, one))
  elif use == "condition":
    with b.when(b.alu(Ops.CMPLT, v, one)): b.store(out, g, one)
  elif use == "loop bound":
    acc = b.acc(b.const(0, I32))
    with b.loop_uops(b.const(0, I32), b.alu(Ops.AND, v, b.const(3, I32))): b.assign(acc, b.alu(Ops.ADD, acc, one))
    b.store(out, g, acc)
  return b.build()

X = np.array([1.5, 3e9], np.float32)


@pytest.mark.parametrize("use", ["where", "arithmetic", "divisor"])
def test_deferred_value_that_a_where_discards_is_defined(use):
  """Rule: the undefined lane of a CAST_RANGE carries through arithmetic (a division by it too: a divisor is no use),
  and a WHERE that picks the other value drops it: the program is defined, thread 1 stores WHERE's other value."""
  got = emulate(_cast_program(use), [np.zeros(2, np.int32), X]).buffers[0]
  assert got.tolist() == {"where": [1, 7], "arithmetic": [2, 1], "divisor": [7, 1]}[use]


def test_a_quotient_of_an_undefined_divisor_is_undefined_where_it_is_stored():
  """Rule: an IDIV by an undefined value gives an undefined value (not undefined behaviour at the IDIV, USES has no
  "divisor"); storing it is the use, and the origin is the CAST that made the divisor undefined."""
  p = _cast_program("divided")
  with pytest.raises(UndefinedBehavior) as e: emulate(p, [np.zeros(2, np.int32), X])
  assert (e.value.op, e.value.use, e.value.kind, e.value.origin.op, e.value.lane[0]) == \
         (Ops.STORE, "stored", UB.CAST_RANGE, Ops.CAST, 1), e.value


@pytest.mark.parametrize("use", sorted(USES))
def test_deferred_value_used_is_undefined_at_the_use_with_its_origin(use):
  """Rule: an undefined value used as `use` is undefined behaviour at the using uop, on the thread that uses it; the
  report names the use and the op that made the value (CAST at thread 1, operand 3e9), whose kind it carries."""
  p = _cast_program(use)
  with pytest.raises(UndefinedBehavior) as e: emulate(p, [np.zeros(2, np.int32), X])
  err, cast = e.value, next(i for i, u in enumerate(p.uops) if u.op is Ops.CAST)
  assert (err.use, err.kind, err.lane[0]) == (use, UB.CAST_RANGE, 1), err
  assert p.uops[err.uop_index].op is {"stored": Ops.STORE, "index": Ops.STORE, "gate": Ops.STORE, "condition": Ops.IF,
                                      "loop bound": Ops.RANGE}[use]
  assert (err.origin.op, err.origin.uop_index, err.origin.lane[0], err.origin.operands) == (Ops.CAST, cast, 1, (3e9,))
  assert f"uop {cast} (CAST)" in str(err)


def test_deferred_value_in_permissive_mode_is_one_event_at_the_use():
  """Rule: permissive mode records the use (not the op that made the value) and marks what it stores undefined; the
  fuzzer runs such a case natively, the stored element masked (refimpl.fuzz.case.discard_reason)."""
  p = _cast_program("stored")
  em = emulate(p, [np.zeros(2, np.int32), X], strict=False)
  assert [(ev.op, ev.use, ev.kind) for ev in em.events] == [(Ops.STORE, "stored", UB.CAST_RANGE)]
  assert em.undefined[0].tolist() == [False, True]
  assert discard_reason(p, em.events) is None
  q = _cast_program("index")
  assert discard_reason(q, emulate(q, [np.zeros(2, np.int32), X], strict=False).events).startswith("an undefined value")


def _division_program(op: Ops, dt, discard: bool):
  """out[g] = a[g] op d[g] on four threads; with `discard`, WHERE(d != 0 && !(a == MIN && d == -1), a op d, a): the
  lanes alu.idiv_mod leaves undefined are discarded, as tinygrad's `(t > 0).where(1 // t, t)` does."""
  b = ProgramBuilder(f"division_{op.name.lower()}")
  out, x, y = b.global_buf(dt, 4), b.global_buf(dt, 4), b.global_buf(dt, 4)
  g = b.gidx(0, 4)
  a, d = b.load(x, g), b.load(y, g)
  q = b.alu(op, a, d)
  if discard:
    ne = lambda v, c: b.alu(Ops.CMPNE, v, b.const(c, dt))
    ok = b.alu(Ops.AND, ne(d, 0), b.alu(Ops.OR, ne(a, dtypes.min(dt)), ne(d, -1)))
    q = b.alu(Ops.WHERE, ok, q, a)
  b.store(out, g, q)
  return b.build()

DIVISIONS = {UB.DIVISOR_ZERO: ([7, 7, -2**31, 5], [2, 0, 0, 0]), UB.DIVISION_OVERFLOW: ([7, -2**31, -2**31, 5], [2, -1, -1, 1])}

@pytest.mark.parametrize("op", [Ops.IDIV, Ops.MOD])
@pytest.mark.parametrize("kind", sorted(DIVISIONS, key=lambda k: k.name), ids=lambda k: k.name)
def test_division_by_zero_or_overflow_that_a_where_discards_is_defined(op, kind):
  """Rule: DIVISOR_ZERO and DIVISION_OVERFLOW (alu.idiv_mod) are deferred: the quotient is undefined in those lanes,
  and a WHERE that picks the dividend instead drops it: the program is defined (strict mode runs it), the other lanes
  are alu.idiv_mod's (7 / 2 = 3, 7 % 2 = 1; 5 / 1 = 5, 5 % 1 = 0) and the discarded ones the dividend."""
  a, d = (np.array(v, np.int32) for v in DIVISIONS[kind])
  got = emulate(_division_program(op, I32, True), [np.zeros(4, np.int32), a, d]).buffers[0].tolist()
  quotient = {Ops.IDIV: [3, 5], Ops.MOD: [1, 0]}[op]
  assert got == [quotient[0], *a[1:3].tolist(), quotient[1] if kind is UB.DIVISION_OVERFLOW else a[3]], got

@pytest.mark.parametrize("op", [Ops.IDIV, Ops.MOD])
@pytest.mark.parametrize("kind", sorted(DIVISIONS, key=lambda k: k.name), ids=lambda k: k.name)
def test_division_by_zero_or_overflow_stored_is_undefined_at_the_store(op, kind):
  """Rule: storing the undefined quotient is the use: undefined behaviour at the STORE (use "stored") on thread 1, the
  first such lane, whose origin is the division (its operands, its reason) and whose kind is the division's."""
  a, d = (np.array(v, np.int32) for v in DIVISIONS[kind])
  p = _division_program(op, I32, False)
  with pytest.raises(UndefinedBehavior) as e: emulate(p, [np.zeros(4, np.int32), a, d])
  err = e.value
  assert (err.op, err.use, err.kind, err.lane[0]) == (Ops.STORE, "stored", kind, 1), err
  assert (err.origin.op, err.origin.kind, err.origin.operands) == (op, kind, (int(a[1]), int(d[1]))), err.origin
  reason = "division by zero" if kind is UB.DIVISOR_ZERO else f"signed INT_MIN {'/' if op is Ops.IDIV else '%'} -1"
  assert err.origin.reason == reason
  assert err.count == (3 if kind is UB.DIVISOR_ZERO else 2)


def test_deferred_kinds_are_exactly_the_value_kinds():
  """Rule (ub.py): CAST_RANGE, SHIFT_COUNT, DIVISOR_ZERO, DIVISION_OVERFLOW, RACY_READ and UNINITIALISED are deferred;
  the memory kinds that fault or race (OUT_OF_BOUNDS, RACE) are immediate."""
  assert {k for k in UB if k.deferred} == {UB.CAST_RANGE, UB.SHIFT_COUNT, UB.DIVISOR_ZERO, UB.DIVISION_OVERFLOW,
                                            UB.RACY_READ, UB.UNINITIALISED}


def _moved_program(discard: bool):
  """One thread: v = int32(x[0]) with x[0] = 3e9 (CAST_RANGE: undefined), MOVEd into a local and loaded back; then
  out[0] = WHERE(x[0] < 2^31, reloaded, 7) (discarded) or out[0] = reloaded (used)."""
  b = ProgramBuilder("moved")
  out, x = b.global_buf(I32, 1), b.global_buf(F32, 1)
  tmp = b.local_buf(I32, 1)
  zero = b.const(0, I32)
  xv = b.load(x, zero)
  b.store(tmp, zero, b.cast(xv, I32), move=True)
  back = b.load(tmp, zero)
  in_range = b.alu(Ops.CMPLT, xv, b.const(2.0 ** 31, F32))
  b.store(out, zero, b.alu(Ops.WHERE, in_range, back, b.const(7, I32)) if discard else back)
  return b.build()

def test_a_move_carries_an_undefined_value_without_using_it():
  """Rule (moves a compiler introduces): a MOVE STORE of an undefined value is no use; the element holds it undefined,
  so a WHERE that discards the reloaded value leaves the program defined (out = 7)."""
  got = emulate(_moved_program(discard=True), [np.zeros(1, np.int32), np.array([3e9], np.float32)])
  assert got.buffers[0].tolist() == [7] and [d.kind for d in got.deferred] == [UB.CAST_RANGE]

def test_a_use_after_a_move_names_the_op_that_made_the_value_undefined():
  """Rule (moves a compiler introduces): storing the reloaded value is the use; its origin is the CAST, through the
  MOVE (Plan.deferred_sources), not the LOAD of the local."""
  with pytest.raises(UndefinedBehavior) as e:
    emulate(_moved_program(discard=False), [np.zeros(1, np.int32), np.array([3e9], np.float32)])
  assert (e.value.use, e.value.kind, e.value.origin.op) == ("stored", UB.CAST_RANGE, Ops.CAST)
