"""CAST float -> int truncates toward zero. Rule: alu.cast (SPEC.md "Decisions", row "CAST float->int"); its
emulator tests: spec_tests/semantics/test_float_to_int.py.

Part of the packaged conformance suite (refimpl.conformance.rules, every backend through the `backend` fixture;
the conventions: refimpl/conformance/rules/__init__.py).
"""
import math

from refimpl.conformance.rules.common import f16, f32, f64, i32, i64
from refimpl.dtype import dtypes
from refimpl.ir import Ops
from refimpl.testing.programs import a, ew, require


def test_float_to_int_truncates_toward_zero(backend):
  require(backend, f16, f64)
  x = [-2.75, -0.5, -0.0, 0.5, 2.75, 126.9, -128.9]
  for src in (f16, f32, f64):
    for dst in (dtypes.int8, i32, i64):
      assert ew(backend, Ops.CAST, src, a(x, src), out_dtype=dst).tolist() == [math.trunc(float(v)) for v in a(x, src)]
  assert ew(backend, Ops.CAST, f32, a([255.9, 0.99, 4294967040.0], f32), out_dtype=dtypes.uint32).tolist() == \
    [255, 0, 4294967040]
