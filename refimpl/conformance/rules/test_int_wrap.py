"""ADD SUB MUL NEG MULACC on ints wrap around (two's complement), with no signed-overflow UB and no overflow
through C's int promotion. Rule: alu.arith (SPEC.md "Decisions", row "int ADD SUB MUL NEG MULACC"); its emulator
tests: spec_tests/semantics/test_int_wrap.py.

Part of the packaged conformance suite (refimpl.conformance.rules, every backend through the `backend` fixture;
the conventions: refimpl/conformance/rules/__init__.py).
"""
import pytest

from refimpl.dtype import dtypes
from refimpl.ir import Ops, dtype_to_str
from refimpl.testing.programs import a, ew, require, wrap


@pytest.mark.parametrize("dt", dtypes.ints, ids=dtype_to_str)
def test_add_sub_mul_neg_mulacc_wrap_around_twos_complement(backend, dt):
  """No signed-overflow UB, no nsw/nuw: INT_MAX + 1 is INT_MIN. Expected values from Python ints, wrapped."""
  require(backend, dt)
  lo, hi = int(dtypes.min(dt)), int(dtypes.max(dt))
  vals = sorted({lo, lo + 1, -1 if lo else 2, 0, 1, hi - 1, hi, hi // 2 + 1, lo // 2 - 1 if lo else hi // 3})
  pairs = [(x, y) for x in vals for y in vals]
  xa, ya = a([p[0] for p in pairs], dt), a([p[1] for p in pairs], dt)
  for op, f in ((Ops.ADD, lambda x, y: x + y), (Ops.SUB, lambda x, y: x - y), (Ops.MUL, lambda x, y: x * y)):
    assert ew(backend, op, dt, xa, ya).tolist() == [wrap(f(x, y), dt) for x, y in pairs], op
  assert ew(backend, Ops.NEG, dt, xa).tolist() == [wrap(-x, dt) for x, _ in pairs]
  assert ew(backend, Ops.MULACC, dt, xa, ya, xa).tolist() == [wrap(x * y + x, dt) for x, y in pairs]

def test_narrow_unsigned_products_do_not_overflow_through_int_promotion(backend):
  # 65535 * 65535 overflows a C int: the rendering must multiply in unsigned int
  u16, i16 = dtypes.uint16, dtypes.int16
  assert ew(backend, Ops.MUL, u16, a([65535, 65535], u16), a([65535, 2], u16)).tolist() == [1, 65534]
  assert ew(backend, Ops.MUL, i16, a([-32768], i16), a([-32768], i16)).tolist() == [0]
