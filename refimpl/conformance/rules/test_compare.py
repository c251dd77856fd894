"""CMPLT and CMPNE on floats are IEEE's predicates (NaN, signed zeros). Rule: alu.compare (SPEC.md "Decisions",
row "CMPLT / CMPNE"); its emulator tests: spec_tests/semantics/test_compare.py.

Part of the packaged conformance suite (refimpl.conformance.rules, every backend through the `backend` fixture;
the conventions: refimpl/conformance/rules/__init__.py).
"""
import pytest

from refimpl.conformance.rules.common import FLOATS, IEEE_PAIRS
from refimpl.ir import Ops, dtype_to_str
from refimpl.testing.programs import a, ew, require


@pytest.mark.parametrize("dt", FLOATS, ids=dtype_to_str)
def test_compares_are_ieee_with_nan_and_signed_zero(backend, dt):
  """NaN < x is false (ordered), NaN != x is true (unordered), -0 == +0."""
  require(backend, dt)
  x, y = a([p[0] for p in IEEE_PAIRS], dt), a([p[1] for p in IEEE_PAIRS], dt)
  assert ew(backend, Ops.CMPLT, dt, x, y).tolist() == [p < q for p, q in IEEE_PAIRS]  # Python floats compare by IEEE 754
  assert ew(backend, Ops.CMPNE, dt, x, y).tolist() == [p != q for p, q in IEEE_PAIRS]
