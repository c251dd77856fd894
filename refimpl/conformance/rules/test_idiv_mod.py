"""IDIV truncates toward zero, MOD takes the dividend's sign. Rule: alu.idiv_mod (SPEC.md "Decisions", row
"IDIV / MOD (ints)"); its emulator tests: spec_tests/semantics/test_idiv_mod.py.

Part of the packaged conformance suite (refimpl.conformance.rules, every backend through the `backend` fixture;
the conventions: refimpl/conformance/rules/__init__.py).
"""
import pytest

from refimpl.dtype import dtypes
from refimpl.ir import Ops, dtype_to_str
from refimpl.testing.programs import a, ew, require


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
