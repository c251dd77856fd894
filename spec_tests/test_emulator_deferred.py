"""The deferred-undefined-value rule (SPEC.md, Decisions, "deferred undefined values"; refimpl/emulator/ub.py): an op of
a deferred kind (CAST_RANGE, SHIFT_COUNT, RACY_READ, UNINITIALISED) gives an undefined value in its lane; arithmetic and
moves carry it, a WHERE that picks the other value drops it, and the program is undefined only where the value is used:
stored, an index, a gate, an IF condition, a loop bound, a divisor. Strict mode raises at the use, with the op that made
the value as `origin`; immediate kinds still raise where the op runs."""
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
  if use == "where":
    b.store(out, g, b.alu(Ops.WHERE, b.alu(Ops.CMPLT, xv, b.const(2.0 ** 31, F32)), v, b.const(7, I32)))
  elif use == "arithmetic":
    b.store(out, g, b.alu(Ops.WHERE, b.alu(Ops.CMPLT, xv, b.const(2.0 ** 31, F32)), b.alu(Ops.ADD, v, one), one))
  elif use == "stored": b.store(out, g, b.alu(Ops.ADD, v, one))
  elif use == "index": b.store(out, b.alu(Ops.AND, v, one), g)
  elif use == "gate": b.store(out, g, one, gate=b.alu(Ops.CMPLT, v, one))
  elif use == "condition":
    with b.when(b.alu(Ops.CMPLT, v, one)): b.store(out, g, one)
  elif use == "loop bound":
    acc = b.acc(b.const(0, I32))
    with b.loop_uops(b.const(0, I32), b.alu(Ops.AND, v, b.const(3, I32))): b.assign(acc, b.alu(Ops.ADD, acc, one))
    b.store(out, g, acc)
  elif use == "divisor": b.store(out, g, b.alu(Ops.IDIV, one, b.alu(Ops.OR, v, one)))
  return b.build()

X = np.array([1.5, 3e9], np.float32)


@pytest.mark.parametrize("use", ["where", "arithmetic"])
def test_deferred_value_that_a_where_discards_is_defined(use):
  """Rule: the undefined lane of a CAST_RANGE carries through arithmetic, and a WHERE that picks the other value drops
  it: the program is defined, thread 1 stores WHERE's other value."""
  got = emulate(_cast_program(use), [np.zeros(2, np.int32), X]).buffers[0]
  assert got.tolist() == ([1, 7] if use == "where" else [2, 1])


@pytest.mark.parametrize("use", sorted(USES))
def test_deferred_value_used_is_undefined_at_the_use_with_its_origin(use):
  """Rule: an undefined value used as `use` is undefined behaviour at the using uop, on the thread that uses it; the
  report names the use and the op that made the value (CAST at thread 1, operand 3e9), whose kind it carries."""
  p = _cast_program(use)
  with pytest.raises(UndefinedBehavior) as e: emulate(p, [np.zeros(2, np.int32), X])
  err, cast = e.value, next(i for i, u in enumerate(p.uops) if u.op is Ops.CAST)
  assert (err.use, err.kind, err.lane[0]) == (use, UB.CAST_RANGE, 1), err
  assert p.uops[err.uop_index].op is {"stored": Ops.STORE, "index": Ops.STORE, "gate": Ops.STORE, "condition": Ops.IF,
                                      "loop bound": Ops.RANGE, "divisor": Ops.IDIV}[use]
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


def test_deferred_shift_count_is_a_value_and_division_by_zero_is_immediate():
  """Rule: SHIFT_COUNT is deferred (a shift by 40 discarded by WHERE is defined), DIVISOR_ZERO immediate (a division by
  zero discarded by WHERE is undefined where it runs)."""
  for op, kind in ((Ops.SHL, None), (Ops.IDIV, UB.DIVISOR_ZERO)):
    b = ProgramBuilder("kinds")
    out, a, n = b.global_buf(I32, 2), b.global_buf(I32, 2), b.global_buf(I32, 2)
    g = b.gidx(0, 2)
    nv = b.load(n, g)
    ok = b.alu(Ops.CMPLT, nv, b.const(32, I32)) if op is Ops.SHL else b.alu(Ops.CMPNE, nv, b.const(0, I32))
    b.store(out, g, b.alu(Ops.WHERE, ok, b.alu(op, b.load(a, g), nv), b.const(-1, I32)))
    inputs = [np.zeros(2, np.int32), np.array([3, 3], np.int32), np.array([1, 40 if op is Ops.SHL else 0], np.int32)]
    if kind is None:
      assert emulate(b.build(), inputs).buffers[0].tolist() == [6, -1]
      continue
    with pytest.raises(UndefinedBehavior) as e: emulate(b.build(), inputs)
    assert (e.value.op, e.value.kind, e.value.use, e.value.origin) == (op, kind, None, None)


def test_deferred_kinds_are_exactly_the_value_kinds():
  """Rule (ub.py): CAST_RANGE, SHIFT_COUNT, RACY_READ and UNINITIALISED are deferred; the rest are immediate."""
  assert {k for k in UB if k.deferred} == {UB.CAST_RANGE, UB.SHIFT_COUNT, UB.RACY_READ, UB.UNINITIALISED}
