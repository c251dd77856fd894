"""TRUNC rounds toward zero: the float nearest x toward zero that is an integer, exact, a zero keeping x's sign,
+-inf and NaN themselves. Rule: alu.trunc (SPEC.md "Decisions", row "TRUNC"); its emulator tests:
spec_tests/semantics/test_trunc.py.

Part of the packaged conformance suite (refimpl.conformance.rules, every backend through the `backend` fixture;
the conventions: refimpl/conformance/rules/__init__.py).
"""
import math

import numpy as np
import pytest

from refimpl.conformance.rules.common import FLOATS
from refimpl.device import Device
from refimpl.dtype import dtypes, to_np
from refimpl.ir import Ops
from refimpl.spec import short_name
from refimpl.testing.programs import assert_same, ew, require


def table(dt) -> list[tuple[float, float]]:
  """(x, TRUNC x) written from the rule, with M the dtype's stored mantissa bits: 2^M - 1/2 is the largest value below
  2^M (its integer part 2^M - 1), and every value from 2^M on is an integer; the smallest subnormal gives a signed
  zero."""
  e, m = dtypes.finfo(dt)
  big, tiny = float(2 ** m), 2.0 ** (2 - 2 ** (e - 1) - m)
  largest = (2 - 2.0 ** -m) * 2.0 ** (2 ** (e - 1) - 1)
  return [(-0.5, -0.0), (0.5, 0.0), (2.5, 2.0), (-2.5, -2.0), (-1.75, -1.0), (1 - 2.0 ** -(m + 1), 0.0),
          (-(1 - 2.0 ** -(m + 1)), -0.0), (0.0, 0.0), (-0.0, -0.0), (big - 0.5, big - 1), (-(big - 0.5), -(big - 1)),
          (big, big), (-(big + 2), -(big + 2)), (largest, largest), (-largest, -largest), (math.inf, math.inf),
          (-math.inf, -math.inf), (math.nan, math.nan), (tiny, 0.0), (-tiny, -0.0)]

@pytest.mark.parametrize("dt", FLOATS, ids=short_name)
def test_trunc_rounds_toward_zero_keeping_the_sign(backend, dt):
  """The rule's values: 2.5 -> 2, -2.5 -> -2, -0.5 -> -0, 2^M - 1/2 -> 2^M - 1, integers, the largest finite and +-inf
  themselves, NaN a NaN; a subnormal gives its signed zero unless the device declares that it flushes subnormals."""
  require(backend, dt)
  rows = table(dt)
  if Device[backend].renderer.flushes_subnormals: rows = rows[:-2]
  xs, want = (np.array(col, np.float64).astype(to_np(dt)) for col in zip(*rows))
  assert_same(ew(backend, Ops.TRUNC, dt, xs), want, f"TRUNC on {dt.name}")
