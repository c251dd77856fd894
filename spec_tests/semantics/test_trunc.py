"""TRUNC: round toward zero. The float nearest x toward zero that is an integer, exact in every float dtype, the sign
kept (a zero result is a zero of x's sign), +-inf itself, NaN gives NaN; defined for every input.

Rule: alu.trunc (refimpl/emulator/alu.py; SPEC.md "Rules", `trunc`: TRUNC). Decision row: "TRUNC" (SPEC.md "Decisions").
Backend tests: refimpl/conformance/rules/test_trunc.py and every backend's op sweep (refimpl/conformance/test_ops.py,
cases TRUNC-f16 ... TRUNC-f64); the decomposition that targets without a TRUNC get: spec_tests/test_lower_trunc.py.
Oracle: `truncated` below, the rule on exact rationals (Python's int() of a Fraction truncates toward zero); the values
of the table are written out from the rule.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from refimpl.dtype import dtypes
from refimpl.emulator import alu
from refimpl.emulator.alu import exec_alu
from refimpl.ir.ops import Ops
from refimpl.ir.verify import alu_dtype_error
from refimpl.testing.oracle import ARITH_FLOATS, FMT, as_floats, float_bits, from_bits, random_bits, same

from .floats import DT_IDS

RULES = (alu.trunc,)
DECISIONS = {"TRUNC": "test_decision_trunc_rounds_toward_zero_keeping_the_sign"}

def truncated(x: float) -> float:
  """The rule on one value: NaN and +-inf are themselves; a finite x is its integer part toward zero (exact: the
  integer part of a float is a float of the same format), a zero carrying x's sign."""
  if math.isnan(x) or math.isinf(x): return x
  whole = int(Fraction(x))  # toward zero
  return float(whole) if whole != 0 else math.copysign(0.0, x)

def wrong_lanes(dt, x: np.ndarray) -> list[str]:
  """The lanes where alu.trunc differs from the rule (bits, NaN as one value), and NaN lanes not marked loose."""
  out = exec_alu(Ops.TRUNC, dt, x)
  loose = np.zeros(x.shape, bool) if out.loose is None else out.loose
  bad = [f"TRUNC({a!r}) = {g!r}, rule {truncated(a)!r}" for a, g in zip(as_floats(x), as_floats(out.values))
         if not same(g, truncated(a))]
  return bad + [f"NaN lane {k} not loose" for k in np.flatnonzero(np.isnan(out.values.astype(np.float64)) & ~loose)]

def below(v: float, dt) -> float:
  """The largest value of dt below v (v a positive power of two)."""
  return float(v - Fraction(v) * Fraction(2) ** -FMT[dt].p)

def table(dt) -> list[tuple[float, float]]:
  """(x, TRUNC x) pairs written from the rule, with M = the stored mantissa bits (p - 1): every x >= 2^M is an integer;
  the largest value below 2^M is 2^M - 1/2, whose integer part is 2^M - 1."""
  big = float(2 ** (FMT[dt].p - 1))
  tiny = float(FMT[dt].minsub)
  return [(-0.5, -0.0), (0.5, 0.0), (2.5, 2.0), (-2.5, -2.0), (1.0, 1.0), (-1.0, -1.0), (below(1.0, dt), 0.0),
          (-below(1.0, dt), -0.0), (1.5, 1.0), (-1.75, -1.0), (0.0, 0.0), (-0.0, -0.0), (tiny, 0.0), (-tiny, -0.0),
          (big - 0.5, big - 1.0), (-(big - 0.5), -(big - 1.0)), (big, big), (big + 2.0, big + 2.0),
          (float(FMT[dt].maxf), float(FMT[dt].maxf)), (-float(FMT[dt].maxf), -float(FMT[dt].maxf)),
          (math.inf, math.inf), (-math.inf, -math.inf)]

@pytest.mark.parametrize("dt", ARITH_FLOATS, ids=DT_IDS)
def test_decision_trunc_rounds_toward_zero_keeping_the_sign(dt):
  """Rule: TRUNC gives the integer toward zero (2.5 -> 2, -2.5 -> -2, 2^M - 1/2 -> 2^M - 1), a zero of x's sign
  (-0.5 -> -0, a subnormal -> its signed zero), integers, the largest finite and +-inf themselves; exact lanes."""
  xs, want = zip(*table(dt))
  out = exec_alu(Ops.TRUNC, dt, np.array(xs, np.float64).astype(FMT[dt].np))
  got = as_floats(out.values)
  assert all(same(g, w) for g, w in zip(got, want)), [(x, g, w) for x, g, w in zip(xs, got, want) if not same(g, w)]
  assert out.loose is None and out.undefined is None

@pytest.mark.parametrize("dt", ARITH_FLOATS, ids=DT_IDS)
def test_trunc_of_nan_is_nan_and_loose(dt):
  """Rule: NaN (quiet or signalling, either sign) gives NaN, whose payload is unspecified: a loose lane."""
  f = FMT[dt]
  m = f.p - 1  # stored mantissa bits; the exponent field is the bits between them and the sign
  ones = ((1 << (f.bits - 1 - m)) - 1) << m
  bits = [ones | (1 << (m - 1)), ones | 1, (1 << (f.bits - 1)) | ones | (1 << (m - 1))]  # quiet, signalling, -quiet
  out = exec_alu(Ops.TRUNC, dt, from_bits(bits, dt))
  assert np.isnan(out.values.astype(np.float64)).all() and out.loose is not None and out.loose.all()
  assert out.undefined is None

@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16], ids=["float16", "bfloat16"])
def test_trunc_every_16bit_input(dt):
  """Rule on every one of the 65536 inputs."""
  assert wrong_lanes(dt, from_bits(np.arange(2**16, dtype=np.uint16), dt)) == []

@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.float64], ids=["float32", "float64"])
def test_trunc_random_bit_patterns(dt):
  """Rule on 4000 uniformly random bit patterns (every exponent, subnormals, NaN payloads) and on 4000 values near
  the integers below 2^M, where the fraction is smallest."""
  big = 2 ** (FMT[dt].p - 1)
  near = np.random.default_rng(43).integers(-big, big, 4000).astype(np.float64)
  near = np.nextafter(near, near + np.where(np.arange(4000) % 2 == 0, 1.0, -1.0)).astype(FMT[dt].np)
  assert wrong_lanes(dt, random_bits(dt, 4000, 43)) == []
  assert wrong_lanes(dt, near) == []

@pytest.mark.parametrize("dt", ARITH_FLOATS, ids=DT_IDS)
@given(data=st.data())
def test_trunc_hypothesis(dt, data):
  """Rule on edge-biased hypothesis batches."""
  lanes = data.draw(st.lists(float_bits(dt), min_size=1, max_size=16))
  assert wrong_lanes(dt, from_bits(lanes, dt)) == []

@pytest.mark.parametrize("dt", [dtypes.bool, dtypes.int32, dtypes.uint8, dtypes.int64, dtypes.fp8e4m3, dtypes.fp8e5m2],
                         ids=lambda d: d.name)
def test_trunc_takes_floats_with_arithmetic_only(dt):
  """Rule: TRUNC is a float op (GroupOp.FloatOnly): rejected on bool and ints; fp8 is storage only."""
  assert alu_dtype_error(Ops.TRUNC, dt) is not None
