"""MAX on floats propagates NaN; max(+0, -0) is either zero. Rule: alu.maximum (SPEC.md "Decisions", row
"MAX (floats)"); its emulator tests: spec_tests/semantics/test_max.py. MAX reductions of real kernels:
test_grid.py.

Part of the packaged conformance suite (refimpl.conformance.rules, every backend through the `backend` fixture;
the conventions: refimpl/conformance/rules/__init__.py).
"""
import math

import numpy as np
import pytest

from refimpl.conformance.rules.common import FLOATS, IEEE_PAIRS
from refimpl.ir import Ops, dtype_to_str
from refimpl.testing.programs import a, ew, require


@pytest.mark.parametrize("dt", FLOATS, ids=dtype_to_str)
def test_max_propagates_nan(backend, dt):
  """MAX is NaN when either input is NaN; max(+0, -0) is either zero. Expected values from Python's max on IEEE floats."""
  require(backend, dt)
  x, y = a([p[0] for p in IEEE_PAIRS], dt), a([p[1] for p in IEEE_PAIRS], dt)
  got = ew(backend, Ops.MAX, dt, x, y).astype(np.float64)
  for (p, q), m in zip(IEEE_PAIRS, got.tolist()):
    assert (math.isnan(m) if math.isnan(p) or math.isnan(q) else m == max(p, q)), (p, q, m)
