"""MULACC on floats is fused or unfused (its allowed set), and MUL then ADD is never contracted into an FMA.
Rule: alu.mulacc (SPEC.md "Decisions", row "MULACC (floats)"); its emulator tests:
spec_tests/semantics/test_mulacc.py.

Part of the packaged conformance suite (refimpl.conformance.rules, every backend through the `backend` fixture;
the conventions: refimpl/conformance/rules/__init__.py).
"""
import pytest

from refimpl.conformance.rules.common import FLOATS
from refimpl.ir import INDEX_DTYPE, Ops, ProgramBuilder, dtype_to_str
from refimpl.testing.programs import a, ew, mulacc_tie, require, run


@pytest.mark.parametrize("dt", FLOATS, ids=dtype_to_str)
def test_mulacc_is_fused_or_unfused(backend, dt):
  require(backend, dt)
  av, bv, cv, fused, unfused = mulacc_tie(dt)
  assert float(ew(backend, Ops.MULACC, dt, a([av], dt), a([bv], dt), a([cv], dt))[0]) in (fused, unfused)

@pytest.mark.parametrize("dt", FLOATS, ids=dtype_to_str)
def test_mul_then_add_is_never_contracted(backend, dt):
  """ADD and MUL each round once: a*b + c written as MUL then ADD is the unfused result, never an FMA's."""
  require(backend, dt)
  av, bv, cv, _, unfused = mulacc_tie(dt)
  b = ProgramBuilder("mul_add")
  out, xa, xb, xc = (b.global_buf(dt, 1) for _ in range(4))
  z = b.const(0, INDEX_DTYPE)
  b.store(out, z, b.alu(Ops.ADD, b.alu(Ops.MUL, b.load(xa, z), b.load(xb, z)), b.load(xc, z)))
  assert float(run(backend, b.build(), a([0], dt), a([av], dt), a([bv], dt), a([cv], dt))[0][0]) == unfused
