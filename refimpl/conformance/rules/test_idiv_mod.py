"""IDIV truncates toward zero, MOD takes the dividend's sign; a division by zero or of INT_MIN by -1 gives an undefined
value (DIVISOR_ZERO, DIVISION_OVERFLOW: deferred kinds), which a WHERE may discard. Rule: alu.idiv_mod (SPEC.md
"Decisions", rows "IDIV / MOD (ints)" and "deferred undefined values"); its emulator tests:
spec_tests/semantics/test_idiv_mod.py and spec_tests/test_emulator_deferred.py.

Part of the packaged conformance suite (refimpl.conformance.rules, every backend through the `backend` fixture;
the conventions: refimpl/conformance/rules/__init__.py).
"""
import pytest

from refimpl.dtype import DType, dtypes
from refimpl.ir import Ops, Program, ProgramBuilder, dtype_to_str
from refimpl.testing.programs import a, ew, require, run


@pytest.mark.parametrize("dt", dtypes.ints, ids=dtype_to_str)
def test_idiv_truncates_toward_zero_and_mod_takes_the_dividends_sign(backend, dt):
  require(backend, dt)
  lo, hi = int(dtypes.min(dt)), int(dtypes.max(dt))
  xs = [v for v in (7, -7, 13, -13, 0, hi, lo, lo + 1, 1, -1) if lo <= v <= hi]
  ys = [v for v in (2, -2, 3, -3, 1, -1, hi, lo, 7) if lo <= v <= hi and v != 0]
  pairs = [(x, y) for x in xs for y in ys if not (x == lo and y == -1)]  # MIN / -1 is undefined
  q = [(abs(x) // abs(y)) * (1 if (x < 0) == (y < 0) else -1) for x, y in pairs]
  xa, ya = a([p[0] for p in pairs], dt), a([p[1] for p in pairs], dt)
  assert ew(backend, Ops.IDIV, dt, xa, ya).tolist() == q
  assert ew(backend, Ops.MOD, dt, xa, ya).tolist() == [x - qq * y for (x, y), qq in zip(pairs, q)]


def _trunc_div(x: int, y: int) -> int: return (abs(x) // abs(y)) * (1 if (x < 0) == (y < 0) else -1)

def _discarding_program(dt: DType, n: int) -> Program:
  """Three outputs over n lanes of t, x, y: WHERE(0 < t, 1 IDIV t, t) (tinygrad's test_div_int), and WHERE(defined,
  x IDIV y, x), WHERE(defined, x MOD y, y) with defined = y != 0 && (x != MIN || y != -1) (unsigned: y != 0)."""
  b = ProgramBuilder(f"discarded_division_{dt.name.replace(' ', '_')}")
  outs, ins = [b.global_buf(dt, n) for _ in range(3)], [b.global_buf(dt, n) for _ in range(3)]
  i = b.gidx(0, n)
  t, x, y = (b.load(buf, i) for buf in ins)
  b.store(outs[0], i, b.alu(Ops.WHERE, b.alu(Ops.CMPLT, b.const(0, dt), t), b.alu(Ops.IDIV, b.const(1, dt), t), t))
  ok = b.alu(Ops.CMPNE, y, b.const(0, dt))
  if dt in dtypes.sints:
    ok = b.alu(Ops.AND, ok, b.alu(Ops.OR, b.alu(Ops.CMPNE, x, b.const(dtypes.min(dt), dt)),
                                  b.alu(Ops.CMPNE, y, b.const(-1, dt))))
  b.store(outs[1], i, b.alu(Ops.WHERE, ok, b.alu(Ops.IDIV, x, y), x))
  b.store(outs[2], i, b.alu(Ops.WHERE, ok, b.alu(Ops.MOD, x, y), y))
  return b.build()

@pytest.mark.parametrize("dt", dtypes.ints, ids=dtype_to_str)
def test_a_division_by_zero_or_of_min_by_minus_one_that_a_where_discards_is_defined(backend, dt):
  """Rule: IDIV / MOD by 0 and INT_MIN / -1 give an undefined value in the lane (deferred kinds), and a WHERE that picks
  the other operand drops it: the program is defined, so the backend must neither trap nor let those lanes change the
  others. Each lane: the truncated quotient / remainder where defined, WHERE's other operand elsewhere."""
  require(backend, dt)
  lo, hi = int(dtypes.min(dt)), int(dtypes.max(dt))
  pairs = [(x, y) for x in (7, -7, 0, 1, lo, hi, lo + 1) for y in (0, -1, 2, -3, 1, lo, hi) if lo <= x <= hi and lo <= y <= hi]
  ts = [v for v in (-1, 0, 1, 2, 0, lo, hi, 5) if lo <= v <= hi]
  n = len(pairs)
  t = (ts * n)[:n]
  xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
  got = run(backend, _discarding_program(dt, n), *(a([0] * n, dt) for _ in range(3)), a(t, dt), a(xs, dt), a(ys, dt))
  defined = [y != 0 and not (x == lo and y == -1 and lo < 0) for x, y in pairs]
  assert got[0].tolist() == [_trunc_div(1, v) if v > 0 else v for v in t]
  assert got[1].tolist() == [_trunc_div(x, y) if ok else x for (x, y), ok in zip(pairs, defined)]
  assert got[2].tolist() == [x - _trunc_div(x, y) * y if ok else y for (x, y), ok in zip(pairs, defined)]
