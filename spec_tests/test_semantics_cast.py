"""CAST and BITCAST rules against exact arithmetic: int -> int wraps; to float rounds once to nearest even (fp8 per
ml_dtypes); float -> int truncates and is undefined for NaN, inf and out-of-range results; bool casts; BITCAST keeps bits."""
from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from refimpl.dtype import dtypes, to_np
from refimpl.emulator.alu import exec_alu, exec_bitcast, exec_cast
from refimpl.ir.dtype_text import dtype_to_str
from refimpl.ir.ops import Ops
from refimpl.testing.oracle import FMT, UINT, as_floats, edge_values, random_bits, rne, same

INTS = (dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.uint64)
FLOATS = (dtypes.fp8e4m3, dtypes.fp8e5m2, dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)
ALL = (dtypes.bool, *INTS, *FLOATS)
ids = lambda dts: [dtype_to_str(d) for d in dts]

def int_range(dt) -> tuple[int, int]:
  bits = 8 * dt.itemsize
  return (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if dt in dtypes.sints else (0, 2**bits - 1)

def oracle(x, src, dst):
  """The spec's value of CAST x (a Python bool / int / float holding the exact source value), or None if undefined."""
  if dst is dtypes.bool: return x != 0  # NaN != 0 is true, -0 != 0 is false
  if src is dtypes.bool: return (1.0 if x else 0.0) if dst in FLOATS else int(x)
  if dst in INTS:
    if src in INTS:
      lo, hi = int_range(dst)
      return (x - lo) % (hi - lo + 1) + lo
    if math.isnan(x) or math.isinf(x): return None
    t = math.trunc(x)  # exact for floats
    lo, hi = int_range(dst)
    return t if lo <= t <= hi else None
  if isinstance(x, float) and (math.isnan(x) or math.isinf(x) or x == 0): return rne(x, FMT[dst])
  return rne(Fraction(x), FMT[dst])

def values_of(a: np.ndarray, dt) -> list:
  return as_floats(a) if dt in FLOATS else a.reshape(-1).tolist()

def check(x: np.ndarray, src, dst) -> list[str]:
  out = exec_cast(x, src, dst)
  assert out.values.dtype == to_np(dst) and out.values.shape == x.shape
  got, xs = values_of(out.values, dst), values_of(x, src)
  undef = np.zeros(len(xs), bool) if out.undefined is None else out.undefined.reshape(-1)
  loose = np.zeros(len(xs), bool) if out.loose is None else out.loose.reshape(-1)
  bad = []
  for i, (g, v) in enumerate(zip(got, xs)):
    want = oracle(v, src, dst)
    if want is None: ok = bool(undef[i]) and g == 0
    elif dst in FLOATS: ok = same(g, want) and not undef[i] and bool(loose[i]) == math.isnan(want)
    else: ok = g == want and not undef[i] and not loose[i]
    if not ok: bad.append(f"CAST {v!r} {dtype_to_str(src)}->{dtype_to_str(dst)} = {g!r} ({bool(undef[i])=}), want {want!r}")
  return bad[:5]

def every(dt) -> np.ndarray:
  """Every value of an 8- or 16-bit dtype (bool: both)."""
  if dt is dtypes.bool: return np.array([False, True])
  return np.arange(2 ** (8 * dt.itemsize), dtype=np.uint64).astype(UINT[8 * dt.itemsize]).view(to_np(dt))

@pytest.mark.parametrize("src", [dtypes.bool, dtypes.int8, dtypes.uint8, dtypes.fp8e4m3, dtypes.fp8e5m2],
                         ids=ids([dtypes.bool, dtypes.int8, dtypes.uint8, dtypes.fp8e4m3, dtypes.fp8e5m2]))
def test_every_cast_from_every_8bit_value(src):
  """All rules of CAST, for every value of every 8-bit source type into every dtype."""
  for dst in ALL: assert check(every(src), src, dst) == [], dst

@pytest.mark.parametrize("src", [dtypes.float16, dtypes.bfloat16, dtypes.int16, dtypes.uint16],
                         ids=ids([dtypes.float16, dtypes.bfloat16, dtypes.int16, dtypes.uint16]))
def test_every_16bit_value_into_narrower_and_int_types(src):
  """Every value of a 16-bit source into every type it can round, wrap or truncate into (fp8, the other 16-bit
  float, every 8/16-bit int), against the oracle."""
  x = every(src)
  for dst in (dtypes.fp8e4m3, dtypes.fp8e5m2, dtypes.float16, dtypes.bfloat16, dtypes.int8, dtypes.uint8, dtypes.int16,
              dtypes.uint16, dtypes.bool):
    if dst is not src: assert check(x, src, dst) == [], dst

@pytest.mark.parametrize("src", [dtypes.float16, dtypes.bfloat16], ids=["float16", "bfloat16"])
def test_every_16bit_float_widens_exactly(src):
  """Rule: float -> a wider float keeps the value (and the sign of zero); NaN stays NaN (loose)."""
  x = every(src)
  for dst in (dtypes.float32, dtypes.float64):
    out = exec_cast(x, src, dst)
    got, want = as_floats(out.values), as_floats(x)
    assert all(same(g, w) for g, w in zip(got, want))
    assert out.loose.tolist() == [math.isnan(w) for w in want]

def midpoints(src, dst, n: int, seed: int) -> np.ndarray:
  """Values of src at and next to the midpoints between neighbouring values of dst (the rounding boundaries)."""
  ys = np.sort(np.abs(as_floats_arr(random_bits(dst, n, seed))))
  ys = ys[np.isfinite(ys)]
  nxt = np.nextafter(ys.astype(FMT[dst].np), FMT[dst].np.type(np.inf)).astype(np.float64)
  mids = (ys + nxt) / 2  # exact in float64 (dst has at most 24 significand bits)
  with np.errstate(over="ignore"):
    m = mids.astype(FMT[src].np)
  up, down = np.nextafter(m, FMT[src].np.type(np.inf)), np.nextafter(m, FMT[src].np.type(0))
  out = np.concatenate([m, up, down])
  return np.concatenate([out, -out])

def as_floats_arr(a: np.ndarray) -> np.ndarray: return np.array(as_floats(a))

@pytest.mark.parametrize("src,dst", [(s, d) for s in (dtypes.float32, dtypes.float64)
                                     for d in (dtypes.fp8e4m3, dtypes.fp8e5m2, dtypes.float16, dtypes.bfloat16, dtypes.float32)
                                     if s is not d])
def test_float_narrowing_rounds_once_to_nearest_even(src, dst):
  """Rule: float -> narrower float rounds the exact value once, ties to even; overflow -> inf (fp8e4m3: NaN). Tested at
  and beside every rounding boundary of a random sample, on edge values and on random bit patterns."""
  x = np.concatenate([midpoints(src, dst, 300, 5), np.array(edge_values(src)).astype(FMT[src].np), random_bits(src, 1000, 6)])
  assert check(x, src, dst) == []

def test_float64_to_bfloat16_rounds_once_not_through_float32():
  """1 + 2^-8 + 2^-40 is above the midpoint between 1 and 1 + 2^-7: one rounding gives 1 + 2^-7; rounding through
  float32 first (ml_dtypes' own float64 path) would land on the midpoint and tie to 1."""
  x = np.array([1 + 2**-8 + 2**-40, -(1 + 2**-8 + 2**-40)])
  assert as_floats(exec_cast(x, dtypes.float64, dtypes.bfloat16).values) == [1 + 2**-7, -(1 + 2**-7)]

def test_fp8_overflow_rules():
  """Rule (ml_dtypes): fp8e4m3 has no inf: |x| rounding beyond 448 (|x| > 464; 464 is a tie and goes to 448) and +-inf
  give NaN; fp8e5m2 overflows to +-inf beyond 57344 + 4096 (61440 is a tie and goes to inf: 57344's last bit is odd)."""
  x = np.array([448.0, 464.0, 464.0001, -465.0, math.inf])
  assert [str(v) for v in as_floats(exec_cast(x, dtypes.float64, dtypes.fp8e4m3).values)] == ["448.0", "448.0", "nan", "nan",
                                                                                               "nan"]
  y = np.array([57344.0, 61439.0, 61440.0, -math.inf])
  assert as_floats(exec_cast(y, dtypes.float64, dtypes.fp8e5m2).values) == [57344.0, 57344.0, math.inf, -math.inf]

def int_edges(dt) -> list[int]:
  lo, hi = int_range(dt)
  vals = {0, 1, -1, lo, hi, lo + 1, hi - 1} | {s * 2**k + d for k in (8, 11, 12, 16, 24, 25, 31, 52, 53, 54, 62, 63)
                                                for s in (1, -1) for d in (-1, 0, 1, 2**(k // 2))}
  return sorted(v for v in vals if lo <= v <= hi)

@pytest.mark.parametrize("src", INTS, ids=ids(INTS))
def test_int_to_every_dtype_edges(src):
  """Rules: int -> int wraps; int -> float rounds once to nearest even (64-bit ints too: 2^53 + 1 -> 2^53, 2^64 - 1 ->
  2^64 in float32); to bool is x != 0."""
  x = np.array(int_edges(src), dtype=to_np(src))
  for dst in ALL: assert check(x, src, dst) == [], dst

@pytest.mark.parametrize("src", [dtypes.int64, dtypes.uint64, dtypes.int32, dtypes.uint32], ids=["i64", "u64", "i32", "u32"])
@given(data=st.data())
def test_wide_int_to_float_hypothesis(src, data):
  lo, hi = int_range(src)
  vals = data.draw(st.lists(st.one_of(st.integers(lo, hi), st.sampled_from(int_edges(src))), min_size=1, max_size=16))
  x = np.array(vals, dtype=to_np(src))
  for dst in (*FLOATS, dtypes.int8, dtypes.uint16): assert check(x, src, dst) == [], dst

@pytest.mark.parametrize("src", [dtypes.float32, dtypes.float64], ids=["float32", "float64"])
def test_float_to_int_truncates_with_range_boundaries(src):
  """Rule: float -> int truncates toward zero; NaN, inf and truncated values outside the range are undefined. Values
  beside each range boundary (lo - 1, lo - 0.5, lo, hi, hi + 0.5, hi + 1 where representable) and edge floats."""
  xs = [v for v in edge_values(src)]
  for dst in INTS:
    lo, hi = int_range(dst)
    xs += [float(v) for v in (lo - 1, lo, hi, hi + 1)] + [lo - 0.5, hi + 0.5, -0.99, 0.99, 2.0**63 - 1024, 2.0**64 - 2048]
  x = np.array(xs).astype(FMT[src].np)
  for dst in INTS: assert check(x, src, dst) == [], dst

def test_ub_float_to_int_nan():
  out = exec_cast(np.array([1.5, math.nan], dtype=np.float32), dtypes.float32, dtypes.int32)
  assert out.undefined.tolist() == [False, True] and out.reason == "float->int cast of nan" and out.values.tolist() == [1, 0]

def test_ub_float_to_int_inf():
  out = exec_cast(np.array([-math.inf], dtype=np.float16), dtypes.float16, dtypes.uint8)
  assert out.undefined.tolist() == [True] and out.reason == "float->int cast of -inf"

def test_ub_float_to_int_out_of_range():
  out = exec_cast(np.array([127.9, 128.0, -128.9, -129.0]), dtypes.float64, dtypes.int8)
  assert out.undefined.tolist() == [False, True, False, True] and out.values.tolist() == [127, 0, -128, 0]
  assert out.reason == "float->int cast of 128.0 outside [-128, 127]"

def test_ub_float_to_unsigned_negative():
  """-0.5 truncates to 0, inside uint8's range; -1.0 does not."""
  out = exec_cast(np.array([-0.5, -1.0], dtype=np.float32), dtypes.float32, dtypes.uint8)
  assert out.undefined.tolist() == [False, True] and out.reason == "float->int cast of -1.0 outside [0, 255]"

def test_casts_to_and_from_bool():
  """Rule: to bool is x != 0, so NaN -> true and -0 -> false; bool -> 0 / 1 in every dtype."""
  x = np.array([0.0, -0.0, math.nan, 1e-300, -math.inf])
  assert exec_cast(x, dtypes.float64, dtypes.bool).values.tolist() == [False, False, True, True, True]
  for dst in (*INTS, *FLOATS):
    assert values_of(exec_cast(np.array([False, True]), dtypes.bool, dst).values, dst) == [0, 1]

@given(st.lists(st.integers(-(2**63), 2**64 - 1), min_size=1, max_size=16))
def test_int_to_int_keeps_low_bits(vals):
  """Rule: int -> int keeps the low bits of the two's complement pattern (wrap; sign extension when widening)."""
  for src, dst in itertools.product(INTS, INTS):
    lo, hi = int_range(src)
    x = np.array([(v - lo) % (hi - lo + 1) + lo for v in vals], dtype=to_np(src))
    assert check(x, src, dst) == [], (src, dst)

# ---- BITCAST ----

SAME_SIZE = [(s, d) for s, d in itertools.product(ALL, ALL) if s.itemsize == d.itemsize and dtypes.bool not in (s, d)]

@pytest.mark.parametrize("src,dst", SAME_SIZE, ids=[f"{dtype_to_str(s)}-{dtype_to_str(d)}" for s, d in SAME_SIZE])
def test_bitcast_preserves_bits(src, dst):
  """Rule: BITCAST keeps every bit (NaN payloads and -0 included) and is never loose or undefined."""
  bits = 8 * src.itemsize
  pattern = np.random.default_rng(bits).integers(0, 2**bits, size=500, dtype=np.uint64).astype(UINT[bits])
  pattern = np.concatenate([pattern, np.array([0, 1, 2 ** (bits - 1), 2**bits - 1], dtype=UINT[bits])])
  out = exec_bitcast(pattern.view(to_np(src)), src, dst)
  assert out.values.dtype == to_np(dst) and out.values.view(UINT[bits]).tolist() == pattern.tolist()
  assert out.loose is None and out.undefined is None

def test_bitcast_rejects_bool_and_size_changes():
  with pytest.raises(ValueError, match="one size"): exec_bitcast(np.float32(1), dtypes.float32, dtypes.int16)
  with pytest.raises(ValueError, match="bool"): exec_bitcast(np.array([1], np.uint8), dtypes.uint8, dtypes.bool)

def test_cast_of_nan_is_loose_but_bitcast_of_nan_is_not():
  """Looseness: a float cast producing NaN leaves its payload unspecified; BITCAST moves bits exactly."""
  nan = np.array([math.nan, 1.0], dtype=np.float32)
  assert exec_cast(nan, dtypes.float32, dtypes.float16).loose.tolist() == [True, False]
  assert exec_bitcast(nan, dtypes.float32, dtypes.int32).loose is None
  assert exec_alu(Ops.WHERE, dtypes.float32, np.array([True, False]), nan, nan).loose is None
