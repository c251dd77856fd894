"""CAST to bool is x != 0 (NaN -> true, -0 -> false), from bool 0 / 1. Rule: alu.cast (SPEC.md "Decisions", row
"CAST to/from bool"); its emulator tests: spec_tests/semantics/test_cast_bool.py.

Part of the packaged conformance suite (refimpl.conformance.rules, every backend through the `backend` fixture;
the conventions: refimpl/conformance/rules/__init__.py).
"""
from refimpl.conformance.rules.common import INF, NAN, bl, f16, f32, f64, i32
from refimpl.ir import Ops
from refimpl.testing.programs import a, ew, require


def test_casts_to_bool_are_nonzero_tests(backend):
  require(backend, f16, f64)
  for dt, tiny in ((f32, 1e-45), (f64, 5e-324)):  # NaN is nonzero, -0 is zero, the smallest subnormal is nonzero
    got = ew(backend, Ops.CAST, dt, a([NAN, -0.0, 0.0, tiny, -INF], dt), out_dtype=bl)
    assert got.tolist() == [True, False, False, True, True]
  assert ew(backend, Ops.CAST, i32, a([256, 0, -1], i32), out_dtype=bl).tolist() == [True, False, True]  # not the low bit
  assert ew(backend, Ops.CAST, bl, a([True, False], bl), out_dtype=f16).tolist() == [1.0, 0.0]
