"""refimpl.lower.guard_poison: the spec's deferred kinds (CAST_RANGE, SHIFT_COUNT: an undefined value, not undefined
behaviour) made defined for every input, for C-like languages, without changing a lane the spec defines."""
from __future__ import annotations

import numpy as np
import pytest

from refimpl.dtype import dtypes, to_np
from refimpl.emulator import alu
from refimpl.emulator.machine import emulate
from refimpl.ir import Ops, ProgramBuilder
from refimpl.lower import guard_poison

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
