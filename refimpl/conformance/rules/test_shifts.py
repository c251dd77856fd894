"""SHL on the bit pattern, SHR arithmetic on signed and logical on unsigned, every count in [0, bits). Rule:
alu.shift (SPEC.md "Decisions", row "SHL / SHR"); its emulator tests: spec_tests/semantics/test_shifts.py.

Part of the packaged conformance suite (refimpl.conformance.rules, every backend through the `backend` fixture;
the conventions: refimpl/conformance/rules/__init__.py).
"""
import pytest

from refimpl.conformance.rules.common import i32
from refimpl.dtype import dtypes
from refimpl.ir import Ops, dtype_to_str
from refimpl.testing.programs import a, ew, require, wrap
from refimpl.testing.values import edge_values


@pytest.mark.parametrize("dt", dtypes.ints, ids=dtype_to_str)
def test_shl_works_on_the_bit_pattern_and_shr_is_arithmetic_on_signed_logical_on_unsigned(backend, dt):
  require(backend, dt)
  # every shift count in [0, bits): below C's promoted width and OpenCL's mask, so nothing there may change the result
  bits = 8 * dt.itemsize
  xs = [int(v) for v in edge_values(dt)]
  pairs = [(x, s) for x in xs for s in range(bits)]
  xa, sa = a([p[0] for p in pairs], dt), a([p[1] for p in pairs], dt)
  assert ew(backend, Ops.SHL, dt, xa, sa).tolist() == [wrap(x << s, dt) for x, s in pairs]
  assert ew(backend, Ops.SHR, dt, xa, sa).tolist() == [x >> s for x, s in pairs]  # Python's >> is arithmetic; unsigned x >= 0
  if dt == i32: assert ew(backend, Ops.SHL, dt, a([1], dt), a([31], dt)).tolist() == [-(2**31)]
