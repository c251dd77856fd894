"""EXP2, LOG2, SIN are within refimpl.spec.ULP_BOUNDS of the correctly rounded reference; special values
exact. Rule: alu.transcendental (SPEC.md "Decisions", row "EXP2 LOG2 SIN"; "Tolerances"); its emulator
tests: spec_tests/semantics/test_transcendental.py.

Part of the packaged conformance suite (refimpl.conformance.rules, every backend through the `backend` fixture;
the conventions: refimpl/conformance/rules/__init__.py).
"""
import numpy as np
import pytest

from refimpl.conformance.rules.common import FLOATS, INF, NAN, bf16, f16, f32
from refimpl.dtype import dtypes, to_np
from refimpl.ir import Ops, ProgramBuilder, dtype_to_str
from refimpl.testing.compare import compare
from refimpl.testing.programs import require, run
from refimpl.testing.values import edge_values, from_bits, random_values


def _transcendental_inputs(dt):
  """float16/bfloat16: every bit pattern; float32/float64: edge values, random patterns, and the ranges where each
  function does its work (exp2 near the overflow/underflow thresholds, log2 over many decades, sin at large arguments)."""
  if dt in (f16, bf16): return from_bits(np.arange(1 << 16), dt)
  rng = np.random.default_rng(13)
  e = 1 << (dtypes.finfo(dt)[0] - 1)
  parts = [edge_values(dt), random_values(dt, 6000, rng), rng.uniform(-e - 60, e + 4, 3000), rng.uniform(-10, 10, 3000),
           rng.uniform(0, 1e6, 1000), np.exp2(rng.uniform(-60, 120 if dt == f32 else 1000, 1000)) * rng.choice([-1, 1], 1000),
           np.arange(-40, 41), rng.uniform(-140, 130, 1500), rng.uniform(1e-30, 1e4, 1500) * rng.choice([-1, 1], 1500),
           [0, -0.0, 1e30, INF, -INF, NAN, 3.0, 0.5]]
  with np.errstate(over="ignore"): return np.concatenate([np.asarray(p).astype(to_np(dt)) for p in parts])

@pytest.mark.parametrize("dt", FLOATS, ids=dtype_to_str)
def test_exp2_log2_sin_are_within_the_spec_bounds(backend, dt):
  """refimpl.spec.ULP_BOUNDS (float32/float64 3/3/4 ulp, narrow 2/2/2) against the correctly rounded reference; special
  values exact (refimpl.testing.compare)."""
  require(backend, dt)
  x = _transcendental_inputs(dt)
  n = len(x)
  ops = (Ops.EXP2, Ops.LOG2, Ops.SIN)
  b = ProgramBuilder(f"transcendental_{dt.name.replace(' ', '_')}")
  outs, inp = [b.global_buf(dt, n) for _ in ops], b.global_buf(dt, n)
  i = b.gidx(0, n)
  v = b.load(inp, i)
  for o, op in zip(outs, ops): b.store(o, i, b.alu(op, v))
  got = run(backend, b.build(), *[np.zeros(n, to_np(dt)) for _ in ops], x)
  for op, g in zip(ops, got):
    verdict = compare(op, dt, [x], g)
    bad = np.flatnonzero(verdict.bad)[:5]
    assert verdict.ok, f"{op.name} {dt.name} ({verdict.rule}): {[(x[k], g[k], verdict.expected[k]) for k in bad]}"
