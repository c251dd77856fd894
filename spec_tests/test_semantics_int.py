"""Integer and bool ALU rules against Python ints with an explicit two's complement wrap, THREEFRY against an independent
scalar Threefry-2x32 and Random123's known-answer vectors, and the undefined domains of IDIV, MOD, SHL and SHR."""
from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from refimpl.dtype import dtypes, to_np
from refimpl.emulator.alu import exec_alu
from refimpl.ir.dtype_text import dtype_to_str
from refimpl.ir.ops import Ops

INTS = (dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.uint64)
IDS = [dtype_to_str(dt) for dt in INTS]

def info(dt) -> tuple[int, bool, int, int]:
  bits, signed = 8 * dt.itemsize, dt in dtypes.sints
  return bits, signed, (-(2 ** (bits - 1)) if signed else 0), (2 ** (bits - 1) - 1 if signed else 2**bits - 1)

def wrap(v: int, dt) -> int:
  """v modulo 2^bits into dt's range (two's complement)."""
  bits, _, lo, _ = info(dt)
  return (v - lo) % 2**bits + lo

def tdiv(a: int, b: int) -> int:
  """Quotient truncated toward zero."""
  q = abs(a) // abs(b)
  return q if (a < 0) == (b < 0) else -q

def oracle(op, dt, a: int, b: int):
  """The spec's value for ints, or None where it is undefined."""
  bits, signed, lo, _ = info(dt)
  if op in (Ops.IDIV, Ops.MOD):
    if b == 0 or (signed and a == lo and b == -1): return None
    q = tdiv(a, b)
    return q if op is Ops.IDIV else a - q * b
  if op in (Ops.SHL, Ops.SHR):
    if not 0 <= b < bits: return None
    return wrap(a << b, dt) if op is Ops.SHL else a >> b  # Python's >> on a negative int is arithmetic
  return {Ops.ADD: lambda: wrap(a + b, dt), Ops.SUB: lambda: wrap(a - b, dt), Ops.MUL: lambda: wrap(a * b, dt),
          Ops.XOR: lambda: wrap(a ^ b, dt), Ops.OR: lambda: wrap(a | b, dt), Ops.AND: lambda: wrap(a & b, dt),
          Ops.MAX: lambda: max(a, b), Ops.CMPLT: lambda: a < b, Ops.CMPNE: lambda: a != b}[op]()

BINARY = (Ops.ADD, Ops.SUB, Ops.MUL, Ops.IDIV, Ops.MOD, Ops.SHL, Ops.SHR, Ops.XOR, Ops.OR, Ops.AND, Ops.MAX, Ops.CMPLT,
          Ops.CMPNE)

def check(op, dt, a: np.ndarray, b: np.ndarray) -> list[str]:
  out = exec_alu(op, dt, a, b)
  undef = np.zeros(a.shape, bool) if out.undefined is None else out.undefined
  bad = []
  for i, (x, y) in enumerate(zip(a.tolist(), b.tolist())):
    want = oracle(op, dt, x, y)
    if want is None: ok = bool(undef[i]) and out.values[i] == 0
    else: ok = not undef[i] and out.values[i].item() == want
    if not ok: bad.append(f"{op.name}({x}, {y}) = {out.values[i]!r} undefined={bool(undef[i])}, want {want}")
  return bad[:5]

@pytest.mark.parametrize("dt", [dtypes.int8, dtypes.uint8], ids=["int8", "uint8"])
@pytest.mark.parametrize("op", BINARY)
def test_every_8bit_pair_against_python_ints(op, dt):
  """Rules: wrap-around ADD SUB MUL; IDIV truncates toward zero, MOD takes the dividend's sign, divisor 0 and
  MIN / -1 undefined; shifts undefined outside [0, 8), SHR arithmetic on int8; bitwise ops; MAX; compares. All 65536."""
  vals = np.arange(256, dtype=np.uint8).view(to_np(dt))
  a, b = (np.ascontiguousarray(x.reshape(-1)) for x in np.meshgrid(vals, vals, indexing="ij"))
  assert check(op, dt, a, b) == []

def int_edges(dt) -> list[int]:
  bits, _, lo, hi = info(dt)
  vals = {0, 1, 2, 3, lo, lo + 1, hi, hi - 1, bits - 1, bits, bits + 1, 7, 100}
  ks = {*range(0, bits, max(1, bits // 8)), bits // 2 - 1, bits - 2, bits - 1}
  vals |= {wrap(s * 2**k + d, dt) for k in ks for s in (1, -1) for d in (-1, 0, 1)}
  return sorted(vals)

def int_values(dt) -> st.SearchStrategy[int]:
  _, _, lo, hi = info(dt)
  return st.one_of(st.sampled_from(int_edges(dt)), st.integers(lo, hi))

@pytest.mark.parametrize("dt", INTS, ids=IDS)
@given(data=st.data())
def test_int_binary_ops_against_python_ints_hypothesis(dt, data):
  """Every int rule above on every width (edge-biased: MIN, MAX, powers of two and neighbours, shift widths)."""
  op = data.draw(st.sampled_from(BINARY))
  pairs = data.draw(st.lists(st.tuples(int_values(dt), int_values(dt)), min_size=1, max_size=16))
  a, b = (np.array(c, dtype=to_np(dt)) for c in zip(*pairs))
  assert check(op, dt, a, b) == []

@pytest.mark.parametrize("dt", INTS, ids=IDS)
def test_int_edge_grid_against_python_ints(dt):
  """Every pair of edge values, every binary op (covers MIN / -1, MIN % -1, 1 << (bits-1), x >> (bits-1))."""
  e = int_edges(dt)
  a, b = (np.array(c, dtype=to_np(dt)) for c in zip(*itertools.product(e, e)))
  for op in BINARY: assert check(op, dt, a, b) == [], op

@pytest.mark.parametrize("dt", INTS, ids=IDS)
def test_neg_and_mulacc_wrap(dt):
  """Rule: NEG x = wrap(-x) (NEG MIN = MIN; unsigned: 2^bits - x); MULACC a*b+c = wrap(a*b + c)."""
  e = int_edges(dt)
  x = np.array(e, dtype=to_np(dt))
  assert exec_alu(Ops.NEG, dt, x).values.tolist() == [wrap(-v, dt) for v in e]
  trip = list(itertools.product(e[::3], repeat=3))
  a, b, c = (np.array(col, dtype=to_np(dt)) for col in zip(*trip))
  assert exec_alu(Ops.MULACC, dt, a, b, c).values.tolist() == [wrap(p * q + r, dt) for p, q, r in trip]

def test_int64_and_uint64_wrap_without_warnings_for_scalars_and_arrays():
  """numpy warns on overflowing scalar int64 math; the rules wrap silently for 0-d, scalar and array operands."""
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    big = np.int64(2**62)
    assert exec_alu(Ops.MUL, dtypes.int64, big, np.int64(4)).values.item() == 0
    assert exec_alu(Ops.ADD, dtypes.int64, np.int64(2**63 - 1), 1).values.item() == -(2**63)
    assert exec_alu(Ops.SUB, dtypes.uint64, np.uint64(0), np.uint64(1)).values.item() == 2**64 - 1
    assert exec_alu(Ops.NEG, dtypes.int64, np.array(-(2**63), dtype=np.int64)).values.item() == -(2**63)
    assert exec_alu(Ops.MUL, dtypes.uint64, np.array([2**63], dtype=np.uint64), np.uint64(2)).values.tolist() == [0]

@pytest.mark.parametrize("op", [Ops.ADD, Ops.MUL, Ops.MAX, Ops.CMPLT, Ops.CMPNE, Ops.XOR, Ops.OR, Ops.AND])
def test_bool_truth_tables(op):
  """Rule (bool): ADD=OR, MUL=AND, MAX=OR, CMPNE=XOR, CMPLT=(!a && b), XOR/OR/AND logical."""
  table = {Ops.ADD: lambda a, b: a or b, Ops.MUL: lambda a, b: a and b, Ops.MAX: lambda a, b: a or b,
           Ops.CMPLT: lambda a, b: (not a) and b, Ops.CMPNE: lambda a, b: a != b, Ops.XOR: lambda a, b: a != b,
           Ops.OR: lambda a, b: a or b, Ops.AND: lambda a, b: a and b}[op]
  a, b = np.array([False, False, True, True]), np.array([False, True, False, True])
  out = exec_alu(op, dtypes.bool, a, b)
  assert out.values.dtype == np.bool_ and out.values.tolist() == [table(x, y) for x, y in zip(a.tolist(), b.tolist())]

def test_bool_mulacc_is_and_then_or():
  trip = list(itertools.product([False, True], repeat=3))
  a, b, c = (np.array(col) for col in zip(*trip))
  assert exec_alu(Ops.MULACC, dtypes.bool, a, b, c).values.tolist() == [(x and y) or z for x, y, z in trip]

# ---- undefined domains: the mask and the reason ----

def test_ub_idiv_by_zero():
  out = exec_alu(Ops.IDIV, dtypes.int32, np.array([7, 7, -7], dtype=np.int32), np.array([2, 0, 0], dtype=np.int32))
  assert out.undefined.tolist() == [False, True, True] and out.reason == "division by zero"
  assert out.values.tolist() == [3, 0, 0]

def test_ub_mod_by_zero_unsigned():
  out = exec_alu(Ops.MOD, dtypes.uint8, np.array([5, 5], dtype=np.uint8), np.array([0, 3], dtype=np.uint8))
  assert out.undefined.tolist() == [True, False] and out.reason == "division by zero" and out.values.tolist() == [0, 2]

@pytest.mark.parametrize("dt", [dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64], ids=["i8", "i16", "i32", "i64"])
def test_ub_signed_min_divided_by_minus_one(dt):
  lo = info(dt)[2]
  a, b = np.array([lo, lo, lo + 1], dtype=to_np(dt)), np.array([-1, 1, -1], dtype=to_np(dt))
  out = exec_alu(Ops.IDIV, dt, a, b)
  assert out.undefined.tolist() == [True, False, False] and out.reason == "signed INT_MIN / -1"
  assert out.values.tolist()[1:] == [lo, -(lo + 1)]

def test_ub_signed_min_mod_minus_one():
  out = exec_alu(Ops.MOD, dtypes.int64, np.array([-(2**63)], dtype=np.int64), np.array([-1], dtype=np.int64))
  assert out.undefined.tolist() == [True] and out.reason == "signed INT_MIN % -1"

def test_ub_reason_names_the_first_undefined_lane():
  """The reason belongs to the first undefined lane in C order, whichever check it failed."""
  a = np.array([[1, -128], [5, 5]], dtype=np.int8)
  b = np.array([[1, -1], [0, 1]], dtype=np.int8)
  out = exec_alu(Ops.IDIV, dtypes.int8, a, b)
  assert out.undefined.tolist() == [[False, True], [True, False]] and out.reason == "signed INT_MIN / -1"

def test_ub_shift_count_too_large():
  out = exec_alu(Ops.SHL, dtypes.int32, np.int32(1), np.array([31, 32, 40], dtype=np.int32))
  assert out.undefined.tolist() == [False, True, True] and out.reason == "shift count 32 outside [0, 32)"
  assert out.values.tolist() == [-(2**31), 0, 0]

def test_ub_shift_count_negative():
  out = exec_alu(Ops.SHR, dtypes.int16, np.int16(-4), np.array([-1, 1], dtype=np.int16))
  assert out.undefined.tolist() == [True, False] and out.reason == "shift count -1 outside [0, 16)"
  assert out.values.tolist() == [0, -2]

def test_ub_shift_unsigned_count_at_width():
  out = exec_alu(Ops.SHR, dtypes.uint64, np.uint64(2**63), np.array([63, 64], dtype=np.uint64))
  assert out.undefined.tolist() == [False, True] and out.reason == "shift count 64 outside [0, 64)"
  assert out.values.tolist() == [1, 0]

def test_defined_lanes_have_no_mask():
  """A lane set with no undefined lane reports undefined=None and an empty reason."""
  out = exec_alu(Ops.IDIV, dtypes.int32, np.array([1, 2], dtype=np.int32), np.array([1, 2], dtype=np.int32))
  assert out.undefined is None and out.reason == ""

# ---- THREEFRY ----

def threefry2x32_20(ctr: tuple[int, int], key: tuple[int, int]) -> tuple[int, int]:
  """Scalar Threefry-2x32-20 as Random123 (threefry.h) defines it: ks[2] = 0x1BD11BDA ^ k0 ^ k1; X += ks at the start;
  after every 4 rounds X0 += ks[(s) % 3], X1 += ks[(s+1) % 3] + s, s = 1..5."""
  m = 0xFFFFFFFF
  ks = [key[0], key[1], 0x1BD11BDA ^ key[0] ^ key[1]]
  x = [(ctr[0] + ks[0]) & m, (ctr[1] + ks[1]) & m]
  rot = [13, 15, 26, 6, 17, 29, 16, 24]
  for rnd in range(20):
    x[0] = (x[0] + x[1]) & m
    r = rot[rnd % 8]
    x[1] = (((x[1] << r) | (x[1] >> (32 - r))) & m) ^ x[0]
    if rnd % 4 == 3:
      s = rnd // 4 + 1
      x[0] = (x[0] + ks[s % 3]) & m
      x[1] = (x[1] + ks[(s + 1) % 3] + s) & m
  return x[0], x[1]

def pack(lo: int, hi: int) -> int: return (hi << 32) | lo

# Random123 kat_vectors, threefry2x32 20 rounds: (ctr0, ctr1), (key0, key1) -> (out0, out1); also in JAX's
# tests/random_test.py (testThreefry2x32), which cites Random123's test_threefry.cpp.
KAT = [((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6B200159, 0x99BA4EFE)),
       ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
       ((0x243F6A88, 0x85A308D3), (0x13198A2E, 0x03707344), (0xC4923A9C, 0x483DF7A0))]

@pytest.mark.parametrize("ctr,key,want", KAT)
def test_threefry_random123_known_answers(ctr, key, want):
  """Rule: THREEFRY(x, key) is threefry2x32_20 with x = ctr1:ctr0 and key = key1:key0; result out1:out0."""
  assert threefry2x32_20(ctr, key) == want  # the independent scalar version agrees with the published vectors
  out = exec_alu(Ops.THREEFRY, dtypes.uint64, np.uint64(pack(*ctr)), np.uint64(pack(*key)))
  assert out.values.item() == pack(*want) and out.loose is None and out.undefined is None

@given(st.lists(st.tuples(st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1)), min_size=1, max_size=16))
def test_threefry_matches_scalar_reference(pairs):
  xs, ks = (np.array(c, dtype=np.uint64) for c in zip(*pairs))
  got = exec_alu(Ops.THREEFRY, dtypes.uint64, xs, ks).values.tolist()
  split = lambda v: (v & 0xFFFFFFFF, v >> 32)
  assert got == [pack(*threefry2x32_20(split(x), split(k))) for x, k in pairs]
