"""Float ADD SUB MUL FDIV RECIP SQRT NEG are correctly rounded (rounded once to nearest even in the op's
dtype) and subnormals are kept, unless the device declares otherwise. Rules: alu.arith, alu.float_arith (SPEC.md
"Decisions", row "float ADD SUB MUL FDIV RECIP SQRT NEG"); their emulator tests:
spec_tests/semantics/test_float_arith.py.

Part of the packaged conformance suite (refimpl.conformance.rules, every backend through the `backend` fixture;
the conventions: refimpl/conformance/rules/__init__.py).
"""
import functools

import numpy as np
import pytest

from refimpl.conformance.rules.common import bf16, f16, f32, f64, rounded_once
from refimpl.device import Device
from refimpl.ir import Ops
from refimpl.testing.oracle import add, div, mul, sqrt, sub
from refimpl.testing.programs import a, assert_same, ew, require
from refimpl.testing.values import from_bits, random_values, to_bits


def test_float32_fdiv_sqrt_recip_are_correctly_rounded(backend):
  """Correctly rounded, like numpy's IEEE float32/float64 ops; a device may declare them inexact (an OpenCL device with
  neither correctly rounded divide/sqrt nor fp64)."""
  inexact = Device[backend].renderer.inexact_ops & {Ops.FDIV, Ops.SQRT, Ops.RECIP}
  if inexact: pytest.skip(f"{backend} declares {sorted(o.name for o in inexact)} inexact")
  rng = np.random.default_rng(5)
  x, y = random_values(f32, 3000, rng), random_values(f32, 3000, rng)
  with np.errstate(all="ignore"):
    assert_same(ew(backend, Ops.FDIV, f32, x, y), x / y, "FDIV")
    assert_same(ew(backend, Ops.SQRT, f32, x), np.sqrt(x), "SQRT")
    assert_same(ew(backend, Ops.RECIP, f32, x), np.float32(1) / x, "RECIP")
    if not Device[backend].supports_dtype(f64): return
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    assert_same(ew(backend, Ops.ADD, f64, x64, y64), x64 + y64, "float64 ADD")
    assert_same(ew(backend, Ops.SQRT, f64, x64), np.sqrt(x64), "float64 SQRT")

def test_subnormals_are_kept(backend):
  """Subnormal results survive unless the device declares that it flushes them. Expected values: exact powers of two."""
  if Device[backend].renderer.flushes_subnormals: pytest.skip(f"{backend} declares that it flushes subnormals")
  require(backend, f64, f16)
  tiny32, tiny64 = np.float32(2.0**-149), 2.0**-1074
  assert ew(backend, Ops.MUL, f32, a([2.0**-140, 3.0 * 2**-149], f32), a([2.0**-9, 1.0], f32)).tolist() == [tiny32, 3 * tiny32]
  assert ew(backend, Ops.FDIV, f32, a([2.0**-126], f32), a([4.0], f32)).tolist() == [2.0**-128]
  assert ew(backend, Ops.ADD, f64, a([tiny64, 2.0**-1022], f64), a([tiny64, -(2.0**-1023)], f64)).tolist() == \
    [2 * tiny64, 2.0**-1023]
  assert ew(backend, Ops.MUL, f16, a([2.0**-14], f16), a([2.0**-10], f16)).tolist() == [2.0**-24]

@functools.cache
def float16_square_roots_and_reciprocals() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """(every float16, its square roots, its reciprocals), by the rounded-once rule (computed once for every backend)."""
  x = from_bits(np.arange(1 << 16), f16)
  return x, rounded_once(f16, sqrt, x), rounded_once(f16, lambda v: div(1.0, v), x)

def test_float16_unary_ops_exhaustively_round_once(backend):
  require(backend, f16)
  x, roots, reciprocals = float16_square_roots_and_reciprocals()
  assert_same(ew(backend, Ops.SQRT, f16, x), roots, "SQRT")
  assert_same(ew(backend, Ops.RECIP, f16, x), reciprocals, "RECIP")
  assert_same(ew(backend, Ops.NEG, f16, x), from_bits(to_bits(x) ^ np.uint16(0x8000), f16), "NEG")  # the sign bit flips

@pytest.mark.parametrize("dt", [f16, bf16], ids=["float16", "bfloat16"])
def test_half_and_bfloat16_binary_ops_round_once(backend, dt):
  require(backend, dt)
  rng = np.random.default_rng(7)
  x, y = random_values(dt, 4000, rng), random_values(dt, 4000, rng)
  for op, exact_op in ((Ops.ADD, add), (Ops.SUB, sub), (Ops.MUL, mul), (Ops.FDIV, div)):
    assert_same(ew(backend, op, dt, x, y), rounded_once(dt, exact_op, x, y), op.name)
