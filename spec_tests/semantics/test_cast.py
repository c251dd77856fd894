"""CAST between value dtypes: int -> int wraps (keeps the low bits); int -> float and float -> float round the exact
value once to nearest even, overflow -> +-inf (fp8e4m3, which has no inf: NaN, as in ml_dtypes); a wider float keeps the
value; NaN stays NaN (loose).

Rule: alu.cast (refimpl/emulator/alu.py; SPEC.md "Rules", `cast`: CAST, and "CAST by source (rows) and target
(columns)"). Decision row: "CAST int->int, int->float, float->float" (SPEC.md "Decisions"). The other parts of alu.cast
have their own rows and files: "CAST float->int" (test_float_to_int.py), "CAST to/from bool" (test_cast_bool.py); the
all-pairs sweeps here check every part. Backend tests: refimpl/conformance/rules/test_cast.py. Oracle: exact arithmetic
(casts.py).
"""
from __future__ import annotations

import itertools
import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from refimpl.dtype import dtypes, to_np
from refimpl.emulator import alu
from refimpl.emulator.alu import exec_cast
from refimpl.testing.oracle import FMT, as_floats, edge_values, random_bits, same

from .arrays import F16, F32, I32, f32, i32
from .casts import ALL, FLOATS, INTS, check, every, ids, int_edges, int_range, midpoints

RULES = (alu.cast,)
DECISIONS = {"CAST int->int, int->float, float->float": "test_decision_cast_int_and_float_conversions"}

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

@given(st.lists(st.integers(-(2**63), 2**64 - 1), min_size=1, max_size=16))
def test_int_to_int_keeps_low_bits(vals):
  """Rule: int -> int keeps the low bits of the two's complement pattern (wrap; sign extension when widening)."""
  for src, dst in itertools.product(INTS, INTS):
    lo, hi = int_range(src)
    x = np.array([(v - lo) % (hi - lo + 1) + lo for v in vals], dtype=to_np(src))
    assert check(x, src, dst) == [], (src, dst)

def test_decision_cast_int_and_float_conversions():
  """CAST int->int wraps (keeps the low bits); int->float and float->float round to nearest even, overflow -> +-inf
  (fp8e4m3: NaN). 300 -> int8 is 44; 2^24 + 1 -> float32 ties to 2^24, 2^24 + 3 to 2^24 + 4; 1e10 -> float16 is inf;
  500 -> fp8e4m3 is NaN; 65519 -> float16 is 65504 and 65520 (the tie past the largest finite) is inf."""
  assert exec_cast(i32(300, -129), I32, dtypes.int8).values.tolist() == [44, 127]
  assert exec_cast(i32(2**24 + 1, 2**24 + 3), I32, F32).values.tolist() == [2.0**24, 2.0**24 + 4]
  assert exec_cast(f32(1e10, -1e10), F32, F16).values.tolist() == [math.inf, -math.inf]
  assert np.isnan(exec_cast(f32(500), F32, dtypes.fp8e4m3).values.astype(np.float32)).all()
  assert exec_cast(f32(65519, 65520), F32, F16).values.tolist() == [65504.0, math.inf]

def test_fp8_values_exist_for_casts():
  """fp8 is storage and casts only: casts in and out work, the numpy types are ml_dtypes' e4m3fn and e5m2."""
  assert to_np(dtypes.fp8e4m3) == np.dtype(ml_dtypes.float8_e4m3fn) and to_np(dtypes.fp8e5m2) == np.dtype(ml_dtypes.float8_e5m2)
  assert exec_cast(np.array([1.5], dtype=ml_dtypes.float8_e4m3fn), dtypes.fp8e4m3, F32).values.tolist() == [1.5]
