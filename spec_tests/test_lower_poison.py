"""refimpl.lower.guard_poison and guard_division: the spec's deferred kinds (CAST_RANGE, SHIFT_COUNT, DIVISOR_ZERO,
DIVISION_OVERFLOW: an undefined value, not undefined behaviour) made defined for every input, for the languages that
trap or leave them undefined, without changing a lane the spec defines."""
from __future__ import annotations

import numpy as np
import pytest

from refimpl.dtype import dtypes, to_np
from refimpl.emulator import alu
from refimpl.emulator.machine import emulate
from refimpl.ir import Ops, ProgramBuilder
from refimpl.lower import guard_division, guard_poison
from refimpl.testing.values import edge_values

INTS = (dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.uint64)
FLOATS = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)


def _range_edges(src, dst) -> np.ndarray:
  """Values of src around dst's range ends and 0 (each one ulp either side too), NaN, infinities and signed zeros."""
  lo, hi = dtypes.min(dst), dtypes.max(dst)
  near = [float(v) + d for v in (lo, hi, lo - 1, hi + 1, 0) for d in (-1.5, -1, -0.5, 0, 0.5, 0.999, 1, 1.5)]
  with np.errstate(over="ignore"):
    x = np.array(near + [np.nan, np.inf, -np.inf, -0.0, 6e4, -6e4, 3e38, -3e38]).astype(to_np(src))
    wide = x.astype(np.float64)
    return np.concatenate([x, np.nextafter(wide, np.inf).astype(to_np(src)), np.nextafter(wide, -np.inf).astype(to_np(src))])


@pytest.mark.parametrize("src", FLOATS, ids=lambda d: d.name)
def test_guard_poison_cast_keeps_every_defined_lane_and_defines_the_rest(src):
  """Rule (CAST float->int, alu.cast): truncation toward zero where it lands in the target's range; CAST_RANGE (a
  deferred kind) elsewhere. After guard_poison, every lane is defined (strict mode runs it), lanes in range are alu's
  truncation bit for bit, and the others are 0 (the guard's stand-in: any value satisfies the spec there)."""
  for dst in INTS:
    x = _range_edges(src, dst)
    b = ProgramBuilder("cast")
    out, inp, g = b.global_buf(dst, len(x)), b.global_buf(src, len(x)), b.gidx(0, len(x))
    b.store(out, g, b.cast(b.load(inp, g), dst))
    got = emulate(guard_poison(b.build()), [np.zeros(len(x), to_np(dst)), x]).buffers[0]
    ref = alu.exec_cast(x, src, dst)
    undefined = np.zeros(len(x), bool) if ref.undefined is None else ref.undefined
    assert undefined.any() and (~undefined).any(), dst
    np.testing.assert_array_equal(got[~undefined], ref.values[~undefined], err_msg=f"{src.name} -> {dst.name}")
    assert (got[undefined] == 0).all(), (dst, x[undefined][got[undefined] != 0])


@pytest.mark.parametrize("op", [Ops.SHL, Ops.SHR])
def test_guard_poison_shift_keeps_every_count_in_range_and_defines_the_rest(op):
  """Rule (SHL, SHR, alu.shift): defined for counts in [0, bits); SHIFT_COUNT (deferred) elsewhere. After
  guard_poison every count is defined and counts in range shift exactly as alu's rule."""
  for dt in INTS:
    bits = 8 * dt.itemsize
    counts = np.array([c for c in range(-3, bits + 4) if dtypes.min(dt) <= c <= dtypes.max(dt)]).astype(to_np(dt))
    x = np.full(len(counts), dtypes.max(dt) // 3 * 2 + 1).astype(to_np(dt))
    b = ProgramBuilder("shift")
    out, a, n, g = b.global_buf(dt, len(x)), b.global_buf(dt, len(x)), b.global_buf(dt, len(x)), b.gidx(0, len(x))
    b.store(out, g, b.alu(op, b.load(a, g), b.load(n, g)))
    got = emulate(guard_poison(b.build()), [np.zeros(len(x), to_np(dt)), x, counts]).buffers[0]
    ref = alu.exec_alu(op, dt, x, counts)
    ok = (counts >= 0) & (counts < bits)
    np.testing.assert_array_equal(got[ok], ref.values[ok], err_msg=dt.name)


def test_guard_poison_leaves_a_program_without_casts_or_shifts_alone():
  """Rule: the pass only touches float->int CASTs and shifts; a program with neither comes back as it is."""
  b = ProgramBuilder("plain")
  out, g = b.global_buf(dtypes.float32, 4), b.gidx(0, 4)
  b.store(out, g, b.cast(g, dtypes.float32))
  p = b.build()
  assert guard_poison(p) is p


def _division_program(dt, n: int, width: int = 1):
  """out_idiv[i] = a[i] IDIV b[i], out_mod[i] = a[i] MOD b[i] over n lanes (width 2: each thread does two lanes as one
  vector op)."""
  b = ProgramBuilder("division")
  q, r, x, y = (b.global_buf(dt, n) for _ in range(4))
  g = b.gidx(0, n // width)
  if width == 1: xs, ys, idx = b.load(x, g), b.load(y, g), g
  else:
    idx = b.alu(Ops.MUL, g, b.const(width, dtypes.int32))
    at = [b.alu(Ops.ADD, idx, b.const(k, dtypes.int32)) for k in range(width)]
    xs, ys = (b.vectorize(*(b.load(buf, i) for i in at)) for buf in (x, y))
  for out, op in ((q, Ops.IDIV), (r, Ops.MOD)):
    v = b.alu(op, xs, ys)
    if width == 1: b.store(out, idx, v)
    else:
      for k in range(width): b.store(out, b.alu(Ops.ADD, idx, b.const(k, dtypes.int32)), b.gep(v, k))
  return b.build()

@pytest.mark.parametrize("width", [1, 2])
def test_guard_division_keeps_every_defined_lane_and_defines_the_rest(width):
  """Rule (IDIV, MOD, alu.idiv_mod): the truncated quotient and remainder where the divisor is neither 0 nor (signed)
  -1 under INT_MIN; DIVISOR_ZERO, DIVISION_OVERFLOW (deferred) elsewhere. After guard_division every lane is defined
  (strict mode stores every quotient), every pair of edge values the rule defines gives alu's value bit for bit, and
  the others divide by 1 (the guard's stand-in: any value satisfies the spec there)."""
  for dt in INTS:
    e = edge_values(dt)
    x, y = np.repeat(e, len(e)), np.tile(e, len(e))
    if len(x) % width: x, y = np.append(x, x[:1]), np.append(y, y[:1])  # whole vectors
    got = emulate(guard_division(_division_program(dt, len(x), width)),
                  [np.zeros(len(x), to_np(dt)), np.zeros(len(x), to_np(dt)), x, y]).buffers
    for k, op in enumerate((Ops.IDIV, Ops.MOD)):
      ref = alu.exec_alu(op, dt, x, y)
      undefined = np.zeros(len(x), bool) if ref.undefined is None else ref.undefined
      assert undefined.any() and (~undefined).any(), dt
      np.testing.assert_array_equal(got[k][~undefined], ref.values[~undefined], err_msg=f"{op.name} {dt.name}")
      assert (got[k][undefined] == (x[undefined] if op is Ops.IDIV else 0)).all(), (op, dt)

def test_guard_division_leaves_a_constant_divisor_that_cannot_fail_alone():
  """Rule: a divisor that is a constant with no element 0 (nor -1, signed) makes no lane undefined: the division is
  left as it is; a divisor of -1 under a dividend that may be INT_MIN, or of 0, is guarded; a program with no IDIV or
  MOD comes back unchanged."""
  def program(dt, divisor):
    b = ProgramBuilder("by_constant")
    out, x, g = b.global_buf(dt, 4), b.global_buf(dt, 4), b.gidx(0, 4)
    b.store(out, g, b.alu(Ops.IDIV, b.load(x, g), b.const(divisor, dt)))
    return b.build()
  for dt, divisor, guarded in ((dtypes.int32, 7, False), (dtypes.uint8, 255, False), (dtypes.int32, -1, True),
                               (dtypes.int8, 0, True)):
    p = guard_division(program(dt, divisor))
    assert any(u.op is Ops.WHERE for u in p.uops) == guarded, (dt, divisor)
  b = ProgramBuilder("plain")
  out, g = b.global_buf(dtypes.int32, 4), b.gidx(0, 4)
  b.store(out, g, b.alu(Ops.MUL, g, g))
  p = b.build()
  assert guard_division(p) is p
