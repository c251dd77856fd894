"""The spec's rules, checked on every backend (the `backend` fixture: every device that opens, PYTHON included; select
with --backend). Part of the packaged conformance suite (refimpl.conformance). What is specific to one of refimpl's own
backends (toolchains, flags, caches, ELF / IR / OpenCL details) lives in refimpl's spec_tests/test_backend_<name>.py;
spec_tests/test_backend_llvm.py also runs these tests unoptimized, on LLVM:O0.

Expected values come from the rule each test names, computed with Python ints / fractions, IEEE floats, the exact
rational oracle of refimpl.testing.oracle (one correct rounding of the exact result), or the emulator's op semantics
(refimpl.emulator) as the oracle for the broad op x dtype and cast sweeps and whole programs. Inputs the spec leaves
undefined are replaced by defined ones before a launch. A test that needs a capability (a dtype, subnormals,
correctly rounded float32 division) checks the device for it and is skipped where it is missing.
"""
import dataclasses
import functools
import math
import random
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.conformance import PROGRAMS_DIR
from refimpl.conformance.test_programs import accumulator_loop_bound, vars_declared_first  # shared with the program tests
from refimpl.device import Device
from refimpl.dtype import dtypes, to_np, truncate
from refimpl.emulator.alu import allowed_results, exec_cast
from refimpl.emulator.machine import emulate
from refimpl.ir import INDEX_DTYPE, GroupOp, Ops, ProgramBuilder, dtype_to_str, elementwise, load_program, save_program
from refimpl.ir.strategies import RandomChooser, random_program
from refimpl.runner import Kernel
from refimpl.testing.compare import compare
from refimpl.testing.differential import Case
from refimpl.testing.oracle import FMT, add, as_floats, div, mul, rne_any, sqrt, sub
from refimpl.testing.programs import (
  a,
  assert_allowed,
  assert_same,
  check_ops,
  defined_inputs,
  ew,
  exact_ops,
  mulacc_tie,
  ops_arrays,
  ops_kernel,
  require,
  run,
  run_against_emulator,
  same_bits,
  wrap,
)
from refimpl.testing.values import array_strategy, edge_values, from_bits, random_values, to_bits

i32, f32, f64, f16, bf16, bl = dtypes.int32, dtypes.float32, dtypes.float64, dtypes.float16, dtypes.bfloat16, dtypes.bool
i64, u64 = dtypes.int64, dtypes.uint64
FLOATS = (f16, bf16, f32, f64)
ALL = (bl, *dtypes.ints, *dtypes.floats)

# ***** memory, constants, the self-check *****

@pytest.mark.parametrize("dt", ALL, ids=dtype_to_str)
def test_every_supported_dtype_loads_and_stores_its_bits(backend, dt):
  require(backend, dt)
  x = from_bits(np.arange(256, dtype=np.uint64) * np.uint64(0x0101010101010101), dt) if dt != bl else np.arange(256) % 3 == 0
  b = ProgramBuilder("copy")
  out, inp = b.global_buf(dt, 256), b.global_buf(dt, 256)
  i = b.gidx(0, 256)
  b.store(out, i, b.load(inp, i))
  got = run(backend, b.build(), np.zeros(256, to_np(dt)), x)[0]
  assert (got == x).all() if dt == bl else (to_bits(got) == to_bits(x)).all()  # bits, signalling NaN payloads included

@pytest.mark.parametrize("dt", ALL, ids=dtype_to_str)
def test_constants_render_exactly(backend, dt):
  require(backend, dt)
  vals = edge_values(dt)
  b = ProgramBuilder("consts")
  out = b.global_buf(dt, len(vals))
  for k, v in enumerate(vals.tolist()): b.store(out, b.const(k, i32), b.const(v, dt))
  assert_same(run(backend, b.build(), np.zeros(len(vals), to_np(dt)))[0], vals, dt.name)  # -0.0, subnormals, MIN, MAX, inf

def test_selfcheck_reports_pass(backend):
  from refimpl.selfcheck import check_device
  assert check_device(backend) == ("PASS", "[1, 2, 3] * 2 = [2, 4, 6]")


# ***** integers *****

@pytest.mark.parametrize("dt", dtypes.ints, ids=dtype_to_str)
def test_add_sub_mul_neg_mulacc_wrap_around_twos_complement(backend, dt):
  """No signed-overflow UB, no nsw/nuw: INT_MAX + 1 is INT_MIN. Expected values from Python ints, wrapped."""
  lo, hi = int(dtypes.min(dt)), int(dtypes.max(dt))
  vals = sorted({lo, lo + 1, -1 if lo else 2, 0, 1, hi - 1, hi, hi // 2 + 1, lo // 2 - 1 if lo else hi // 3})
  pairs = [(x, y) for x in vals for y in vals]
  xa, ya = a([p[0] for p in pairs], dt), a([p[1] for p in pairs], dt)
  for op, f in ((Ops.ADD, lambda x, y: x + y), (Ops.SUB, lambda x, y: x - y), (Ops.MUL, lambda x, y: x * y)):
    assert ew(backend, op, dt, xa, ya).tolist() == [wrap(f(x, y), dt) for x, y in pairs], op
  assert ew(backend, Ops.NEG, dt, xa).tolist() == [wrap(-x, dt) for x, _ in pairs]
  assert ew(backend, Ops.MULACC, dt, xa, ya, xa).tolist() == [wrap(x * y + x, dt) for x, y in pairs]

def test_narrow_unsigned_products_do_not_overflow_through_int_promotion(backend):
  # 65535 * 65535 overflows a C int: the rendering must multiply in unsigned int
  u16, i16 = dtypes.uint16, dtypes.int16
  assert ew(backend, Ops.MUL, u16, a([65535, 65535], u16), a([65535, 2], u16)).tolist() == [1, 65534]
  assert ew(backend, Ops.MUL, i16, a([-32768], i16), a([-32768], i16)).tolist() == [0]

@pytest.mark.parametrize("dt", dtypes.ints, ids=dtype_to_str)
def test_idiv_truncates_toward_zero_and_mod_takes_the_dividends_sign(backend, dt):
  lo, hi = int(dtypes.min(dt)), int(dtypes.max(dt))
  xs = [v for v in (7, -7, 13, -13, 0, hi, lo, lo + 1, 1, -1) if lo <= v <= hi]
  ys = [v for v in (2, -2, 3, -3, 1, -1, hi, lo, 7) if lo <= v <= hi and v != 0]
  pairs = [(x, y) for x in xs for y in ys if not (x == lo and y == -1)]  # MIN / -1 is undefined
  q = [(abs(x) // abs(y)) * (1 if (x < 0) == (y < 0) else -1) for x, y in pairs]
  xa, ya = a([p[0] for p in pairs], dt), a([p[1] for p in pairs], dt)
  assert ew(backend, Ops.IDIV, dt, xa, ya).tolist() == q
  assert ew(backend, Ops.MOD, dt, xa, ya).tolist() == [x - qq * y for (x, y), qq in zip(pairs, q)]

@pytest.mark.parametrize("dt", dtypes.ints, ids=dtype_to_str)
def test_shl_works_on_the_bit_pattern_and_shr_is_arithmetic_on_signed_logical_on_unsigned(backend, dt):
  # every shift count in [0, bits): below C's promoted width and OpenCL's mask, so nothing there may change the result
  bits = 8 * dt.itemsize
  xs = [int(v) for v in edge_values(dt)]
  pairs = [(x, s) for x in xs for s in range(bits)]
  xa, sa = a([p[0] for p in pairs], dt), a([p[1] for p in pairs], dt)
  assert ew(backend, Ops.SHL, dt, xa, sa).tolist() == [wrap(x << s, dt) for x, s in pairs]
  assert ew(backend, Ops.SHR, dt, xa, sa).tolist() == [x >> s for x, s in pairs]  # Python's >> is arithmetic; unsigned x >= 0
  if dt == i32: assert ew(backend, Ops.SHL, dt, a([1], dt), a([31], dt)).tolist() == [-(2**31)]


# ***** floats *****

NAN, INF = float("nan"), float("inf")
IEEE_PAIRS = [(NAN, 1), (1, NAN), (NAN, NAN), (-0.0, 0.0), (0.0, -0.0), (-INF, INF), (1, 1), (1, 2), (INF, INF), (NAN, -INF),
              (-INF, 3), (2, -5), (INF, -INF)]

@pytest.mark.parametrize("dt", FLOATS, ids=dtype_to_str)
def test_max_propagates_nan(backend, dt):
  """MAX is NaN when either input is NaN; max(+0, -0) is either zero. Expected values from Python's max on IEEE floats."""
  require(backend, dt)
  x, y = a([p[0] for p in IEEE_PAIRS], dt), a([p[1] for p in IEEE_PAIRS], dt)
  got = ew(backend, Ops.MAX, dt, x, y).astype(np.float64)
  for (p, q), m in zip(IEEE_PAIRS, got.tolist()):
    assert (math.isnan(m) if math.isnan(p) or math.isnan(q) else m == max(p, q)), (p, q, m)

@pytest.mark.parametrize("dt", FLOATS, ids=dtype_to_str)
def test_compares_are_ieee_with_nan_and_signed_zero(backend, dt):
  """NaN < x is false (ordered), NaN != x is true (unordered), -0 == +0."""
  require(backend, dt)
  x, y = a([p[0] for p in IEEE_PAIRS], dt), a([p[1] for p in IEEE_PAIRS], dt)
  assert ew(backend, Ops.CMPLT, dt, x, y).tolist() == [p < q for p, q in IEEE_PAIRS]  # Python floats compare by IEEE 754
  assert ew(backend, Ops.CMPNE, dt, x, y).tolist() == [p != q for p, q in IEEE_PAIRS]

def test_bool_ops_follow_the_spec_table(backend):
  x, y = a([0, 0, 1, 1], bl), a([0, 1, 0, 1], bl)
  table = {Ops.ADD: lambda p, q: p or q, Ops.MUL: lambda p, q: p and q, Ops.MAX: lambda p, q: p or q,
           Ops.CMPLT: lambda p, q: (not p) and q, Ops.CMPNE: lambda p, q: p != q, Ops.XOR: lambda p, q: p != q,
           Ops.OR: lambda p, q: p or q, Ops.AND: lambda p, q: p and q}
  for op, f in table.items(): assert ew(backend, op, bl, x, y).tolist() == [f(p, q) for p, q in zip(x, y)], op
  c = a([0, 0, 0, 0, 1, 1, 1, 1], bl)
  x2, y2 = np.tile(x, 2), np.tile(y, 2)
  assert ew(backend, Ops.MULACC, bl, x2, y2, c).tolist() == [bool((p and q) or r) for p, q, r in zip(x2, y2, c)]
  assert ew(backend, Ops.WHERE, bl, c, x2, y2).tolist() == [bool(p if r else q) for p, q, r in zip(x2, y2, c)]

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

def exactly(v: float):
  """v as the oracle's exact value (a Fraction; zeros, infinities and NaN stay floats)."""
  return Fraction(v) if math.isfinite(v) and v != 0 else v

def rounded_once(dt, exact_op, *xs) -> np.ndarray:
  """The IEEE rule for a basic operation: the exact result (an oracle op of refimpl.testing.oracle) rounded once to dt."""
  lanes = zip(*(as_floats(x) for x in xs))
  exact = np.array([rne_any(exact_op(*v), FMT[dt]) for v in lanes], np.float64)
  with np.errstate(invalid="ignore"): return exact.astype(to_np(dt))  # exact: values of dt (NaN stays NaN)

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


# ***** casts and bitcasts *****

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

def test_float_to_int_truncates_toward_zero(backend):
  require(backend, f16, f64)
  x = [-2.75, -0.5, -0.0, 0.5, 2.75, 126.9, -128.9]
  for src in (f16, f32, f64):
    for dst in (dtypes.int8, i32, i64):
      assert ew(backend, Ops.CAST, src, a(x, src), out_dtype=dst).tolist() == [math.trunc(float(v)) for v in a(x, src)]
  assert ew(backend, Ops.CAST, f32, a([255.9, 0.99, 4294967040.0], f32), out_dtype=dtypes.uint32).tolist() == \
    [255, 0, 4294967040]

def test_casts_to_bool_are_nonzero_tests(backend):
  require(backend, f16, f64)
  for dt, tiny in ((f32, 1e-45), (f64, 5e-324)):  # NaN is nonzero, -0 is zero, the smallest subnormal is nonzero
    got = ew(backend, Ops.CAST, dt, a([NAN, -0.0, 0.0, tiny, -INF], dt), out_dtype=bl)
    assert got.tolist() == [True, False, False, True, True]
  assert ew(backend, Ops.CAST, i32, a([256, 0, -1], i32), out_dtype=bl).tolist() == [True, False, True]  # not the low bit
  assert ew(backend, Ops.CAST, bl, a([True, False], bl), out_dtype=f16).tolist() == [1.0, 0.0]

@pytest.mark.parametrize("src, dst", [(f16, dtypes.int16), (f16, bf16), (bf16, dtypes.uint16), (dtypes.fp8e4m3, dtypes.uint8),
                                      (dtypes.fp8e5m2, dtypes.int8), (dtypes.fp8e4m3, dtypes.fp8e5m2)], ids=dtype_to_str)
def test_bitcast_keeps_every_bit_pattern(backend, src, dst):
  require(backend, src, dst)
  bits = np.arange(1 << (8 * src.itemsize))
  x = from_bits(bits, src)
  assert (to_bits(ew(backend, Ops.BITCAST, src, x, out_dtype=dst)) == bits).all()  # NaN payloads and signalling NaNs included
  assert (to_bits(ew(backend, Ops.BITCAST, dst, from_bits(bits, dst), out_dtype=src)) == bits).all()

def test_bitcast_of_32_and_64_bit_floats_keeps_bits(backend):
  require(backend, f64)
  rng = np.random.default_rng(11)
  b32 = np.concatenate([rng.integers(0, 2**32, 2000, dtype=np.uint64), [0x7f800001, 0xffc00001, 0x80000000, 1]])
  b64 = np.concatenate([rng.integers(0, 2**63, 2000, dtype=np.uint64) * 2 + 1, [0x7ff0000000000001]]).astype(np.uint64)
  assert (ew(backend, Ops.BITCAST, f32, from_bits(b32, f32), out_dtype=dtypes.uint32) == b32).all()
  assert (to_bits(ew(backend, Ops.BITCAST, i32, from_bits(b32, i32), out_dtype=f32)) == b32).all()
  assert (ew(backend, Ops.BITCAST, f64, from_bits(b64, f64), out_dtype=u64) == b64).all()
  assert (to_bits(ew(backend, Ops.BITCAST, i64, from_bits(b64, i64), out_dtype=f64)) == b64).all()

def test_every_bitcast_pair_keeps_every_bit(backend):
  """BITCAST between every same-size pair the device supports, in one kernel: every pattern of 8/16-bit sources (NaN
  payloads and signalling NaNs of the narrow formats included), random patterns of 32/64-bit ones."""
  dev = Device[backend]
  pairs = [(s, d) for s in ALL for d in ALL if s != d and s.itemsize == d.itemsize and bl not in (s, d)
           and dev.supports_dtype(s) and dev.supports_dtype(d)]
  n = 1 << 16
  rng = np.random.default_rng(9)
  pattern = {1: np.arange(n) % 256, 2: np.arange(n), 4: rng.integers(0, 2**32, n, dtype=np.uint64),
             8: rng.integers(0, 2**63, n, dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, n, dtype=np.uint64)}
  arrays = []
  for s, d in pairs: arrays += [np.zeros(n, to_np(d)), from_bits(pattern[s.itemsize], s)]
  got = run(backend, ops_kernel("bitcasts", [Case(Ops.BITCAST, s, d) for s, d in pairs], n), *arrays)
  for (s, d), g in zip(pairs, got[0::2]):
    assert (to_bits(g).astype(np.uint64) == pattern[s.itemsize].astype(np.uint64)).all(), f"BITCAST {s.name} -> {d.name}"

def test_threefry_matches_the_random123_known_answers(backend):
  # threefry2x32_20 known-answer vectors (Random123 kat_vectors): (ctr0, ctr1, key0, key1) -> (out0, out1); low word first
  kat = [((0, 0, 0, 0), (0x6b200159, 0x99ba4efe)), ((0xffffffff,) * 4, (0x1cb996fc, 0xbb002be7)),
         ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xc4923a9c, 0x483df7a0))]
  x = a([c1 << 32 | c0 for (c0, c1, _, _), _ in kat], u64)
  key = a([k1 << 32 | k0 for (_, _, k0, k1), _ in kat], u64)
  assert ew(backend, Ops.THREEFRY, u64, x, key).tolist() == [o1 << 32 | o0 for _, (o0, o1) in kat]


# ***** EXP2 LOG2 SIN *****

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


# ***** every op and cast against the emulator's semantics, many ops to a kernel *****

@pytest.mark.parametrize("dt", [bl, *dtypes.ints, *FLOATS], ids=dtype_to_str)
def test_every_alu_op_matches_the_emulator(backend, dt):
  """Every exact and allowed-set ALU op on dt in one kernel, edge-biased random inputs (a third edge values); each result
  is an allowed result (exact ops bit for bit, MAX/MULACC from their allowed sets; EXP2/LOG2/SIN have their own test)."""
  require(backend, dt)
  n, rng = 1024, np.random.default_rng(dt.priority * 31 + dt.itemsize)
  ops = exact_ops(dt)
  inputs = {op: defined_inputs(op, dt, [random_values(d, n, rng) for d in Case(op, dt).input_dtypes]) for op in ops}
  check_ops(backend, dt, ops, inputs, n)

@pytest.mark.parametrize("dt", [bl, dtypes.int8, dtypes.uint8], ids=dtype_to_str)
def test_every_8bit_input_pair_matches_the_emulator(backend, dt):
  """Exhaustive: every binary op over all 2^16 operand pairs (ternary ops: every pair, the third operand random)."""
  vals = np.array([False, True]) if dt == bl else from_bits(np.arange(256), dt)
  x, y = np.repeat(vals, len(vals)), np.tile(vals, len(vals))
  z = np.random.default_rng(1).permutation(x)
  inputs = {}
  for op in exact_ops(dt):
    xs = [y] if op in GroupOp.Unary else [x, y] if op in GroupOp.Binary else [x.astype(np.bool_) if op is Ops.WHERE else x, y, z]
    inputs[op] = defined_inputs(op, dt, xs)
  check_ops(backend, dt, exact_ops(dt), inputs, len(x))

@pytest.mark.parametrize("dt", [t for t in (*dtypes.ints, *FLOATS) if t.itemsize > 1], ids=dtype_to_str)
def test_every_edge_value_pair_and_every_16bit_input_match_the_emulator(backend, dt):
  """Binary and ternary ops over every pair of edge values (ternary: the third operand random); unary ops over every
  input of a 16-bit dtype (NEG; SQRT and RECIP on floats), edge and random values of wider ones."""
  require(backend, dt)
  edges = edge_values(dt)
  n = max(1 << 17 if dt.itemsize == 2 else 0, len(edges) ** 2)
  rng = np.random.default_rng(dt.itemsize + dt.priority)
  fill = random_values(dt, n - len(edges) ** 2, rng)
  x = np.concatenate([np.repeat(edges, len(edges)), fill])
  y = np.concatenate([np.tile(edges, len(edges)), rng.permutation(fill)])
  every = np.resize(from_bits(np.arange(1 << 16), dt), n) if dt.itemsize == 2 else x
  inputs = {}
  for op in exact_ops(dt):
    if op in GroupOp.Unary: xs = [every]
    elif op in GroupOp.Binary: xs = [x, y]
    else: xs = [rng.integers(0, 2, n).astype(np.bool_) if op is Ops.WHERE else rng.permutation(x), x, y]
    inputs[op] = defined_inputs(op, dt, xs)
  check_ops(backend, dt, exact_ops(dt), inputs, n)

@pytest.mark.parametrize("src", ALL, ids=dtype_to_str)
def test_every_cast_from_a_dtype_matches_the_emulator(backend, src):
  """CAST from src to every dtype the device supports, in one kernel: every bit pattern of an 8/16-bit src, else
  edge-biased random values. Lanes the spec leaves undefined for a target (float -> int of NaN, inf, out of range) are
  replaced by 0."""
  require(backend, src)
  bits = 8 * src.itemsize
  if src == bl: x = np.arange(512) % 3 == 0
  elif bits <= 16: x = from_bits(np.arange(1 << bits), src)
  else: x = random_values(src, 4096, np.random.default_rng(bits + src.priority))
  targets = [d for d in ALL if Device[backend].supports_dtype(d)]
  arrays, wants = [], []
  for d in targets:
    out = exec_cast(x, src, d)
    xd = x if out.undefined is None else np.where(out.undefined, np.zeros(1, x.dtype), x)
    arrays += [np.zeros(len(x), to_np(d)), xd]
    wants.append(exec_cast(xd, src, d).values)
  p = ops_kernel(f"casts_{src.name.replace(' ', '_')}", [Case(Ops.CAST, src, d) for d in targets], len(x))
  got = run(backend, p, *arrays)
  for d, g, w in zip(targets, got[0::2], wants): assert_same(g, w, f"CAST {src.name} -> {d.name}")

HYPOTHESIS_N = 8

@functools.cache
def _all_ops_kernel(backend: str, dt) -> Kernel:
  """One compiled kernel of every exact op on dt over HYPOTHESIS_N lanes, for all the hypothesis examples of a backend."""
  return Kernel(ops_kernel(f"hyp_{dt.name.replace(' ', '_')}", [Case(op, dt) for op in exact_ops(dt)], HYPOTHESIS_N), backend)

@pytest.mark.parametrize("dt", [f16, f32, i32, u64], ids=dtype_to_str)
@settings(max_examples=60)
@given(data=st.data())
def test_hypothesis_edge_biased_inputs_match_the_emulator(backend, dt, data):
  """Hypothesis (edge-biased values, shrinking to one lane): every exact/allowed-set op on dt, one kernel."""
  require(backend, dt)
  ops = exact_ops(dt)
  count = sum(len(Case(op, dt).input_dtypes) for op in ops)
  it = iter(np.split(data.draw(array_strategy(dt, HYPOTHESIS_N * count)), count))
  inputs = {}
  for op in ops:
    xs = [next(it) for _ in Case(op, dt).input_dtypes]
    if op is Ops.WHERE: xs[0] = xs[0] != 0
    inputs[op] = defined_inputs(op, dt, xs)
  assert_allowed(_all_ops_kernel(backend, dt)(*ops_arrays(dt, ops, inputs, HYPOTHESIS_N)), dt, ops, inputs, backend)


# ***** whole programs *****

def test_loop_accumulator_sums_rows_like_the_emulator(backend):
  b = ProgramBuilder("row_sums")
  out, x = b.global_buf(f32, 8), b.global_buf(f32, 8 * 16)
  row = b.gidx(0, 8)
  acc = b.acc(b.const(0.0, f32))
  with b.loop(16) as k:
    v = b.load(x, b.alu(Ops.ADD, b.alu(Ops.MUL, row, b.const(16, i32)), k))
    b.assign(acc, b.alu(Ops.ADD, acc, b.alu(Ops.MUL, v, v)))
  b.store(out, row, acc)
  xs = np.random.default_rng(0).standard_normal(128).astype(np.float32)
  got = run_against_emulator(backend, b.build(), [np.zeros(8, np.float32), xs])[0][0]
  want = np.zeros(8, np.float32)
  for k in range(16): want = want + xs.reshape(8, 16)[:, k] ** 2  # in order, float32, unfused
  assert_same(got, want, "row sums")

def test_loops_and_accumulators_match_the_emulator(backend):
  """Row sums of squares (unfused, in order), a max accumulator re-initialised for every row, a vector accumulator, and
  accumulators read after their loop closed."""
  require(backend, f16)
  b = ProgramBuilder("acc_loops")
  sums, maxes, pair, x = b.global_buf(f32, 8), b.global_buf(f16, 8), b.global_buf(i64, 16), b.global_buf(f32, 8 * 16)
  row = b.gidx(0, 8)
  s = b.acc(b.const(0.0, f32))
  v = b.acc(b.const((0, 1), i64.vec(2)))
  with b.loop(8) as rep:
    m = b.acc(b.const(-math.inf, f16))
    with b.loop(16) as k:
      e = b.load(x, b.alu(Ops.ADD, b.alu(Ops.MUL, row, b.const(16, i32)), k))
      b.assign(m, b.alu(Ops.MAX, m, b.cast(e, f16)))
      with b.when(b.alu(Ops.CMPLT, rep, b.const(1, i32))): b.assign(s, b.alu(Ops.ADD, s, b.alu(Ops.MUL, e, e)))
    b.store(maxes, row, m)
    b.assign(v, b.alu(Ops.MUL, v, b.vectorize(b.cast(rep, i64), b.const(3, i64))))
  b.store(sums, row, s)
  b.store(pair, b.alu(Ops.MUL, row, b.const(2, i32)), v)
  xs = np.random.default_rng(0).standard_normal(128).astype(np.float32) * 100
  init = [np.zeros(8, np.float32), np.zeros(8, np.float16), np.zeros(16, np.int64)]
  got, _ = run_against_emulator(backend, b.build(), [*init, xs])
  want = np.zeros(8, np.float32)
  for k in range(16): want = want + xs.reshape(8, 16)[:, k] ** 2  # float32, in order, unfused
  assert_same(got[0], want, "row sums")
  assert got[2].tolist() == [0, 3**8] * 8  # lane 0: 0 * rep, lane 1: 1 * 3^8 (wraps nowhere)

def test_gated_loads_and_stores_touch_only_gated_elements(backend):
  b = ProgramBuilder("gated")
  out, x, lim = b.global_buf(i32, 16), b.global_buf(i32, 16), b.var("lim", 0, 16)
  i = b.gidx(0, 16)
  v = b.load(x, i, gate=b.alu(Ops.CMPLT, i, lim), alt=b.const(-7, i32))
  b.store(out, i, b.alu(Ops.ADD, v, b.const(100, i32)), gate=b.alu(Ops.CMPNE, i, b.const(3, i32)))
  xs, init = np.arange(16, dtype=np.int32) * 10, np.full(16, -1, np.int32)
  got = run_against_emulator(backend, b.build(), [init, xs], vals=(9,))[0][0]
  assert got.tolist() == [-1 if k == 3 else (10 * k if k < 9 else -7) + 100 for k in range(16)]

def test_gated_loads_and_stores_with_a_false_gate_touch_no_memory(backend, tmp_path):
  """A false gate does no access: the index of a false-gated LOAD/STORE points 2^28 elements past the buffer (a segfault
  if touched), and the run happens in a child process so that a fault fails this test instead of the suite."""
  b = ProgramBuilder("gated_far")
  out, x, lim = b.global_buf(i32, 16), b.global_buf(i32, 16), b.var("lim", 0, 16)
  i = b.gidx(0, 16)
  gate = b.alu(Ops.CMPLT, i, lim)
  far = b.alu(Ops.WHERE, gate, i, b.alu(Ops.ADD, i, b.const(1 << 28, i32)))
  v = b.load(x, far, gate=gate, alt=b.const(-7, i32))
  b.store(out, far, b.alu(Ops.ADD, v, b.const(100, i32)), gate=gate)
  b.store(out, i, v, gate=b.alu(Ops.CMPLT, lim, b.alu(Ops.ADD, i, b.const(1, i32))))
  p = b.build()
  init, xs = np.full(16, -1, np.int32), np.arange(16, dtype=np.int32) * 10
  want = emulate(p, [init, xs], vals=(9,)).buffers[0]
  assert want.tolist() == [10 * k + 100 for k in range(9)] + [-7] * 7  # the rule, stated
  code = ("import sys, numpy as np\nfrom refimpl.ir import load_program\nfrom refimpl.runner import Kernel\n"
          "p = load_program(sys.argv[1])\n"
          "out = Kernel(p, sys.argv[2])(np.full(16, -1, np.int32), np.arange(16, dtype=np.int32) * 10, vals=(9,))[0]\n"
          "print(out.tolist())\n")
  save_program(p, tmp_path / "p.json")
  res = subprocess.run([sys.executable, "-c", code, str(tmp_path / "p.json"), backend], capture_output=True, timeout=300,
                       text=True)
  assert res.returncode == 0, f"exit status {res.returncode}: {res.stderr[-2000:]}"
  assert res.stdout.strip() == str(want.tolist())

def test_range_bounds_are_read_once_at_the_range(backend):
  """RANGE's srcs are values at the RANGE: a loop bounded by an accumulator its body increments still runs the number of
  times the accumulator held when the loop began (3 here), as the emulator runs it."""
  assert run_against_emulator(backend, accumulator_loop_bound(), [np.zeros(16, np.int32)])[0][0].tolist() == [1, 1, 1] + [0] * 13

def test_if_blocks_and_define_var_loop_bounds(backend):
  b = ProgramBuilder("if_loop")
  out, n = b.global_buf(i32, 32), b.var("n", 0, 32)
  with b.loop_uops(b.const(0, i32), n) as r:
    not_third = b.alu(Ops.CMPNE, b.alu(Ops.MOD, r, b.const(3, i32)), b.const(0, i32))
    with b.when(not_third): b.store(out, r, b.alu(Ops.MUL, r, r))
  p = b.build()
  for n_ in (20, 0, 32):
    got = run_against_emulator(backend, p, [np.zeros(32, np.int32)], vals=(n_,))[0][0]
    assert got.tolist() == [k * k if k < n_ and k % 3 else 0 for k in range(32)]

def test_arguments_are_the_buffers_then_the_vars_whatever_the_declaration_order(backend):
  """The call signature is every buffer (DEFINE_GLOBAL number order), then every DEFINE_VAR, even when a DEFINE_VAR is
  declared first: out[r] = r + m for r < n."""
  got = run_against_emulator(backend, vars_declared_first(), [np.zeros(8, np.int32)], vals=(5, 40))[0][0]
  assert got.tolist() == [40, 41, 42, 43, 44, 0, 0, 0]

def test_vectors_load_compute_shuffle_and_store(backend):
  """float4 loads, a vector MUL, GEP shuffles, VECTORIZE, gated vector stores, and MULACC of half vectors (its allowed set:
  fused or unfused, lane by lane)."""
  require(backend, f16)
  b = ProgramBuilder("vec4")
  out, hout, x = b.global_buf(f32, 32), b.global_buf(f16, 32), b.global_buf(f32, 32)
  g = b.gidx(0, 8)
  base = b.alu(Ops.MUL, g, b.const(4, i32))
  v = b.load(x, base, count=4)
  w = b.alu(Ops.MUL, v, b.const((1.0, 2.0, 3.0, 4.0), f32.vec(4)))
  rev = b.gep(w, 3, 2, 1, 0)
  pair = b.vectorize(b.gep(rev, 0), b.gep(v, 0))
  b.store(out, base, rev)
  b.store(out, b.alu(Ops.ADD, base, b.const(0, i32)), b.gep(pair, 0, 1), gate=b.alu(Ops.CMPLT, g, b.const(2, i32)))
  hv = b.cast(v, f16.vec(4))
  b.store(hout, base, b.alu(Ops.MULACC, hv, hv, b.alu(Ops.SQRT, hv)))
  xs = np.arange(32, dtype=np.float32) + 0.5
  got, _ = run_against_emulator(backend, b.build(), [np.zeros(32, np.float32), np.zeros(32, np.float16), xs])
  quad = (xs.reshape(8, 4) * [1, 2, 3, 4])[:, ::-1].copy()
  quad[:2, 1] = xs.reshape(8, 4)[:2, 0]
  assert got[0].tolist() == quad.ravel().tolist()
  h = xs.astype(np.float16)
  ok = np.zeros(32, bool)
  for want in allowed_results(Ops.MULACC, f16, h, h, rounded_once(f16, sqrt, h)): ok |= same_bits(got[1], want)
  assert ok.all(), f"MULACC of half vectors: {got[1][~ok]}"

@pytest.mark.parametrize("through_local", [False, True], ids=["global", "local"])
def test_grid_programs_and_locals_run_through_the_loop_lowering(backend, through_local):
  """A 2D grid of 2 x 6 workgroups of 4 threads (a device without a grid runs it as loops), optionally staging each value
  in a DEFINE_LOCAL slot of its thread: out[idx] = x[idx] + gidx1."""
  b = ProgramBuilder("grid2d")
  out, x = b.global_buf(f32, 6 * 8), b.global_buf(f32, 6 * 8)
  tmp = b.local_buf(f32, 4) if through_local else None
  g0, g1, l0 = b.gidx(0, 2), b.gidx(1, 6), b.lidx(0, 4)
  col = b.alu(Ops.ADD, b.alu(Ops.MUL, g0, b.const(4, i32)), l0)
  idx = b.alu(Ops.ADD, b.alu(Ops.MUL, g1, b.const(8, i32)), col)
  value = b.alu(Ops.ADD, b.load(x, idx), b.cast(g1, f32))
  if through_local:
    b.store(tmp, l0, value)
    value = b.load(tmp, l0)
  b.store(out, idx, value)
  xs = np.arange(48, dtype=np.float32)
  got = run_against_emulator(backend, b.build(), [np.zeros(48, np.float32), xs])[0][0]
  assert got.tolist() == (xs + np.repeat(np.arange(6), 8)).tolist()

def test_define_local_is_a_function_scope_array_in_the_loop_form(backend):
  b = ProgramBuilder("local_scratch")
  out, tmp = b.global_buf(i32, 8), b.local_buf(i32, 8)
  with b.loop(8) as r: b.store(tmp, r, b.alu(Ops.MUL, r, b.const(3, i32)))
  with b.loop(8) as r: b.store(out, r, b.load(tmp, b.alu(Ops.SUB, b.const(7, i32), r)))
  assert run(backend, b.build(), np.zeros(8, np.int32))[0].tolist() == [3 * (7 - k) for k in range(8)]

def test_wmma_accumulates_like_the_emulator(backend):
  require(backend, f16)
  N, M, K = 2, 3, 4
  b = ProgramBuilder("wmma")
  out, abuf, bbuf, cbuf = b.global_buf(f32, M * N), b.global_buf(f16, M * K), b.global_buf(f16, K * N), b.global_buf(f32, M * N)
  zero = b.const(0, INDEX_DTYPE)
  d = b.wmma(b.load(abuf, zero, count=M * K), b.load(bbuf, zero, count=K * N), b.load(cbuf, zero, count=M * N), (N, M, K))
  b.store(out, zero, d)
  p = b.build()
  rng = np.random.default_rng(4)
  av, bv, cv = (rng.standard_normal(s).astype(t) for s, t in ((M * K, np.float16), (K * N, np.float16), (M * N, np.float32)))
  got = run(backend, p, np.zeros(M * N, np.float32), av, bv, cv)[0]
  assert_same(got, emulate(p, [np.zeros(M * N, np.float32), av, bv, cv]).buffers[0], "WMMA")
  want = cv.reshape(M, N).astype(np.float64) + av.reshape(M, K).astype(np.float64) @ bv.reshape(K, N).astype(np.float64)
  np.testing.assert_allclose(got, want.ravel().astype(np.float32), rtol=1e-6)

def test_random_programs_match_the_emulator(backend):
  """refimpl.ir.strategies' random programs (every op family, casts, bitcasts, vectors, gated and vector memory, loops,
  IF blocks, grids, locals) on edge-biased inputs; programs where the emulator finds undefined behaviour are skipped,
  and elements the emulator marks loose (NaN payloads, allowed sets) are not compared."""
  compared = 0
  for seed in range(120):
    p = random_program(RandomChooser(random.Random(seed)), steps=20)
    if not all(Device[backend].supports_dtype(dt) for dt in {u.dtype.base.scalar() for u in p.uops} - {dtypes.void}): continue
    rng = np.random.default_rng(seed)
    bufs = [random_values(ptr.base, ptr.size, rng) for _, ptr in sorted(p.buffers.items())]
    vals = [int(rng.integers(lo, hi + 1)) for _, lo, hi in p.vars]
    if emulate(p, bufs, vals, strict=False).events: continue
    run_against_emulator(backend, p, bufs, vals, strict=False)
    compared += 1
  assert compared >= 30  # enough programs are free of undefined behaviour to mean something


# ***** the grid: workgroups, local ids, __local memory, barriers *****

def test_gidx_is_the_workgroup_id_and_lidx_the_id_within_it_in_every_dimension(backend):
  """Launch = global_size workgroups of local_size work items (tinygrad's convention): thread (g, l) writes
  g0 + 10 g1 + 100 g2 + 1000 l0 + 10000 l1 at its own linear index."""
  G, L = (3, 2, 2), (4, 2, 1)
  b = ProgramBuilder("ids3d")
  total = math.prod(G) * math.prod(L)
  out = b.global_buf(i32, total)
  g = [b.gidx(d, G[d]) for d in range(3)]
  lid = [b.lidx(d, L[d]) for d in range(2)]
  code, idx = b.const(0, i32), b.const(0, i32)
  for k, (u, weight) in enumerate(zip([*g, *lid], (1, 10, 100, 1000, 10000))):
    code = b.alu(Ops.ADD, code, b.alu(Ops.MUL, u, b.const(weight, i32)))
    stride = math.prod([*G, *L][:k])
    idx = b.alu(Ops.ADD, idx, b.alu(Ops.MUL, u, b.const(stride, i32)))
  b.store(out, idx, code)
  p = b.build()
  assert p.global_size == G and p.local_size == L
  got = run_against_emulator(backend, p, [np.full(total, -1, np.int32)])[0][0]
  want = [g0 + 10 * g1 + 100 * g2 + 1000 * l0 + 10000 * l1
          for l1 in range(L[1]) for l0 in range(L[0]) for g2 in range(G[2]) for g1 in range(G[1]) for g0 in range(G[0])]
  assert got.tolist() == want

def test_local_memory_is_one_array_per_workgroup(backend):
  # every workgroup fills tmp with its own id, then reads a neighbour's slot after the barrier: it sees its own group's values
  G, L = 6, 8
  b = ProgramBuilder("local_per_group")
  out, tmp = b.global_buf(i32, G * L), b.local_buf(i32, L)
  g, lid = b.gidx(0, G), b.lidx(0, L)
  b.store(tmp, lid, b.alu(Ops.ADD, b.alu(Ops.MUL, g, b.const(100, i32)), lid))
  b.barrier()
  other = b.alu(Ops.SUB, b.const(L - 1, i32), lid)
  b.store(out, b.alu(Ops.ADD, b.alu(Ops.MUL, g, b.const(L, i32)), lid), b.load(tmp, other))
  got = run_against_emulator(backend, b.build(), [np.zeros(G * L, np.int32)])[0][0]
  assert got.tolist() == [100 * gg + (L - 1 - ll) for gg in range(G) for ll in range(L)]

def _tree_reduction(G: int, L: int, dt):
  """out[g] = sum of x[g*L : g*L+L], a workgroup tree: tmp[l] = x; barrier; for s = L/2 .. 1: tmp[l] += tmp[l+s] on the
  threads l < s (gated load and store), barrier; thread 0 stores tmp[0]."""
  b = ProgramBuilder(f"tree_sum_{dt.name.replace(' ', '_')}")
  out, x, tmp = b.global_buf(dt, G), b.global_buf(dt, G * L), b.local_buf(dt, L)
  g, lid = b.gidx(0, G), b.lidx(0, L)
  b.store(tmp, lid, b.load(x, b.alu(Ops.ADD, b.alu(Ops.MUL, g, b.const(L, i32)), lid)))
  b.barrier()
  s = L // 2
  while s >= 1:
    active = b.alu(Ops.CMPLT, lid, b.const(s, i32))
    mine, theirs = b.load(tmp, lid, gate=active), b.load(tmp, b.alu(Ops.ADD, lid, b.const(s, i32)), gate=active)
    b.store(tmp, lid, b.alu(Ops.ADD, mine, theirs), gate=active)
    b.barrier()
    s //= 2
  b.store(out, g, b.load(tmp, b.const(0, i32)), gate=b.alu(Ops.CMPLT, lid, b.const(1, i32)))
  return b.build()

@pytest.mark.parametrize("dt", [f32, i32, f16], ids=dtype_to_str)
def test_workgroup_tree_reduction_with_define_local_and_barriers_matches_the_emulator(backend, dt):
  require(backend, dt)
  G, L = 16, 64
  p = _tree_reduction(G, L, dt)
  rng = np.random.default_rng(21)
  xs = random_values(dt, G * L, rng) if dt == i32 else (rng.standard_normal(G * L) * 8).astype(to_np(dt))
  got = run(backend, p, np.zeros(G, to_np(dt)), xs)[0]
  assert_same(got, emulate(p, [np.zeros(G, to_np(dt)), xs]).buffers[0], "tree sum vs emulator")
  tree = xs.reshape(G, L).copy()
  while tree.shape[1] > 1:  # the same pairing, in the dtype: ints wrap, float adds round once (the exact oracle)
    h = tree.shape[1] // 2
    if dt == i32: tree = (tree[:, :h].astype(np.int64) + tree[:, h:]).astype(np.int32)
    else: tree = rounded_once(dt, add, tree[:, :h], tree[:, h:]).reshape(G, h)
  assert_same(got, tree[:, 0], "tree sum vs the rules")

def test_grid_with_vector_loads_gated_stores_and_a_var(backend):
  """2D grid, float4 loads from global, a gated vector store into __local, a barrier, and a DEFINE_VAR limit."""
  G0, G1, L = 4, 3, 8
  n = G0 * G1 * L * 4
  b = ProgramBuilder("grid_vec")
  out, x, tmp, lim = b.global_buf(f32, n), b.global_buf(f32, n), b.local_buf(f32, L * 4), b.var("lim", 0, 1 << 20)
  g0, g1, lid = b.gidx(0, G0), b.gidx(1, G1), b.lidx(0, L)
  group = b.alu(Ops.ADD, b.alu(Ops.MUL, g1, b.const(G0, i32)), g0)
  base = b.alu(Ops.MUL, b.alu(Ops.ADD, b.alu(Ops.MUL, group, b.const(L, i32)), lid), b.const(4, i32))
  v = b.load(x, base, count=4)
  b.store(tmp, b.alu(Ops.MUL, lid, b.const(4, i32)), b.alu(Ops.MUL, v, b.const(2.0, f32.vec(4))))
  b.barrier()
  back = b.load(tmp, b.alu(Ops.MUL, b.alu(Ops.SUB, b.const(L - 1, i32), lid), b.const(4, i32)), count=4)
  b.store(out, base, back, gate=b.alu(Ops.CMPLT, base, lim))
  xs = np.arange(n, dtype=np.float32) * 0.25
  got = run_against_emulator(backend, b.build(), [np.full(n, -1, np.float32), xs], vals=(n - 37,))[0][0]
  want = (xs.reshape(G0 * G1, L, 4)[:, ::-1, :] * 2).ravel()
  assert got[: n - 40].tolist() == want[: n - 40].tolist() and (got[n - 36:] == -1).all()


# ***** real kernels, any name *****

@pytest.mark.parametrize("path", sorted(PROGRAMS_DIR.glob("clang-hang-*.json")),
                         ids=lambda p: p.stem)
def test_tinygrad_max_reductions_over_a_local_array_match_the_emulator(backend, path):
  """Two max reductions tinygrad 0.10.1 generates (a softmax max and an argmax's max, staged through a local array);
  inputs with NaN, infinities and signed zeros. MAX propagates NaN; everything the emulator marks exact is bit-exact."""
  p = load_program(path)
  n_in, n_out = (u.dtype.size for u in reversed([u for u in p.uops if u.op is Ops.DEFINE_GLOBAL]))
  xs = random_values(f32, n_in, np.random.default_rng(5))
  xs[::17] = np.nan
  xs[5::23] = -0.0
  run_against_emulator(backend, p, [np.zeros(n_out, np.float32), xs])

NAMES = ["mad", "sin", "max", "dot", "for", "int", "kernel", "half", "barrier", "get_global_id", "main", "rf_u32", "data0"]

@pytest.mark.parametrize("name", NAMES)
def test_any_identifier_the_verifier_accepts_names_a_kernel(backend, name):
  """Rule (program-name): the name is any C identifier, and the program runs under it on every backend (names like
  OpenCL built-ins, C keywords or refimpl's own helpers included)."""
  p = dataclasses.replace(elementwise(Ops.MUL, i32, n=8), name=name)
  x = np.arange(8, dtype=np.int32)
  assert run_against_emulator(backend, p, [np.zeros(8, np.int32), x, x])[0][0].tolist() == (x * x).tolist()
