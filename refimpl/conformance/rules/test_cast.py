"""CAST int -> float and float -> float round once to nearest even; a wider float keeps the value. Rule: alu.cast
(SPEC.md "Decisions", row "CAST int->int, int->float, float->float"); its emulator tests:
spec_tests/semantics/test_cast.py. Every CAST pair against the emulator: test_every_op.py.

Part of the packaged conformance suite (refimpl.conformance.rules, every backend through the `backend` fixture;
the conventions: refimpl/conformance/rules/__init__.py).
"""
import math

import numpy as np

from refimpl.conformance.rules.common import bf16, exactly, f16, f32, f64, i32, i64, rounded_once, u64
from refimpl.dtype import dtypes, truncate
from refimpl.ir import Ops
from refimpl.testing.programs import a, assert_same, ew, require
from refimpl.testing.values import from_bits, random_values


def test_casts_round_once_to_nearest_even(backend):
  """int -> float and float -> narrower float are one correct rounding: each value lies just above a tie of the target, so
  rounding through an intermediate format would land on the even neighbour instead. Expected values from the rule."""
  require(backend, f64, f16, bf16, dtypes.fp8e4m3)
  def cast(xs, s, d): return ew(backend, Ops.CAST, s, a(xs, s), out_dtype=d)
  assert float(cast([2**62 + 2**54 + 1], i64, bf16)[0]) == 2.0**62 + 2**55
  assert float(cast([2**30 + 2**22 + 1], i32, bf16)[0]) == 2.0**30 + 2**23
  assert float(cast([2**63 + 2**55 + 1], u64, bf16)[0]) == 2.0**63 + 2**56
  assert float(cast([-(2**62 + 2**51 + 1)], i64, f16)[0]) == -math.inf  # far beyond half's range
  assert float(cast([1 + 2**-11 + 2**-40], f64, f16)[0]) == 1 + 2**-10
  assert float(cast([1 + 2**-8 + 2**-40], f64, bf16)[0]) == 1 + 2**-7
  for big in ([2**64 - 1, 2**63 + 2**39 + 1, 2**53 + 1, 12345678901234567], [2**63 + 2**40]):  # u64 >= 2^63: no x86 instruction
    assert cast(big, u64, f32).tolist() == [truncate[f32](v) for v in big]
    assert cast(big, u64, f64).tolist() == [truncate[f64](v) for v in big]
  assert cast([2**53 + 1, -(2**53) - 3], i64, f64).tolist() == [2.0**53, -(2.0**53) - 4]
  assert cast([1 + 2**-24 + 2**-50, 1 + 2**-24], f64, f32).tolist() == [1 + 2**-23, 1.0]  # above the tie; the tie to even
  assert cast([464.0, 465.0, 57344.0, 61440.0], f32, dtypes.fp8e4m3).astype(np.float32)[:1].tolist() == [448.0]
  assert np.isnan(cast([465.0], f32, dtypes.fp8e4m3).astype(np.float32)).all()  # e4m3fn: beyond 464 is NaN (no inf)

def test_casts_between_float_formats_round_once_and_widen_exactly(backend):
  """float32 -> narrower: the exact value rounded once to nearest even (overflow: inf, or NaN in fp8e4m3); narrower ->
  float32: the same value (every pattern)."""
  rng = np.random.default_rng(3)
  x = np.concatenate([random_values(f32, 6000, rng), a([464, 465, 448, 61440, 61439, 65520, 65519, 3.4e38], f32)])
  for dt in (f16, bf16, dtypes.fp8e4m3, dtypes.fp8e5m2):
    require(backend, dt)
    assert_same(ew(backend, Ops.CAST, f32, x, out_dtype=dt), rounded_once(dt, exactly, x),
                f"float32 -> {dt.name}")
    src = from_bits(np.arange(1 << (8 * dt.itemsize)), dt)
    assert_same(ew(backend, Ops.CAST, dt, src, out_dtype=f32), rounded_once(f32, exactly, src),
                f"{dt.name} -> float32 (exhaustive)")
