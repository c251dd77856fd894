"""One test per row of the decision table (docs/semantics.md, "Decisions") that the ALU rules own (LOAD/STORE, races and
uninitialised locals are the executor's: spec_tests/test_emulator_*.py), with values derived from the row's rule; then the
interface."""
from __future__ import annotations

import itertools
import math
import warnings

import ml_dtypes
import numpy as np
import pytest

from refimpl.dtype import dtypes, to_np
from refimpl.emulator.alu import RULES, Outcome, allowed_results, exec_alu, exec_bitcast, exec_cast
from refimpl.ir.ops import GroupOp, Ops
from refimpl.spec import VALUE_DTYPES, kind

I32, F32, F16, BF16 = dtypes.int32, dtypes.float32, dtypes.float16, dtypes.bfloat16
i32 = lambda *v: np.array(v, dtype=np.int32)
f32 = lambda *v: np.array(v, dtype=np.float32)

def test_decision_int_add_sub_mul_neg_mulacc_wrap():
  """int ADD SUB MUL NEG MULACC: two's complement wrap-around, every width, signed included."""
  for dt in dtypes.ints:
    npdt, bits = to_np(dt), 8 * dt.itemsize
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if dt in dtypes.sints else (0, 2**bits - 1)
    assert exec_alu(Ops.ADD, dt, np.array([hi], npdt), np.array([1], npdt)).values.tolist() == [lo]
    assert exec_alu(Ops.SUB, dt, np.array([lo], npdt), np.array([1], npdt)).values.tolist() == [hi]
    half = np.array([2 ** (bits // 2)], npdt)
    assert exec_alu(Ops.MUL, dt, half, half).values.tolist() == [0]  # 2^bits wraps to 0
    assert exec_alu(Ops.MULACC, dt, half, half, np.array([hi], npdt)).values.tolist() == [hi]
    assert exec_alu(Ops.NEG, dt, np.array([lo], npdt)).values.tolist() == [lo]

def test_decision_idiv_mod_truncate_toward_zero():
  """IDIV truncates toward zero; MOD takes the dividend's sign; divisor 0 and MIN / -1, MIN % -1 are undefined."""
  a, b = i32(7, -7, 7, -7, 5, -(2**31)), i32(2, 2, -2, -2, 0, -1)
  q, r = exec_alu(Ops.IDIV, I32, a, b), exec_alu(Ops.MOD, I32, a, b)
  assert q.values.tolist() == [3, -3, -3, 3, 0, 0] and r.values.tolist() == [1, -1, 1, -1, 0, 0]
  assert q.undefined.tolist() == r.undefined.tolist() == [False] * 4 + [True, True]

def test_decision_shifts():
  """SHL/SHR: count outside [0, bits) undefined; SHR arithmetic on signed, logical on unsigned; SHL on the bit pattern."""
  assert exec_alu(Ops.SHL, I32, i32(1), i32(31)).values.item() == -(2**31)  # 1 << 31 is INT_MIN
  assert exec_alu(Ops.SHR, I32, i32(-8, -1), i32(1, 31)).values.tolist() == [-4, -1]
  assert exec_alu(Ops.SHR, dtypes.uint8, np.uint8(0x80), np.uint8(7)).values.item() == 1
  assert exec_alu(Ops.SHL, dtypes.uint8, np.uint8(0xFF), np.uint8(4)).values.item() == 0xF0
  assert exec_alu(Ops.SHL, I32, i32(1, 1), i32(32, -1)).undefined.tolist() == [True, True]

def test_decision_bool_ops():
  """bool: ADD=OR, MUL=AND, MAX=OR, CMPNE=XOR, CMPLT=(!a&&b); IDIV MOD SUB NEG SHL SHR are rejected."""
  a, b = np.array([False, False, True, True]), np.array([False, True, False, True])
  want = {Ops.ADD: [0, 1, 1, 1], Ops.MUL: [0, 0, 0, 1], Ops.MAX: [0, 1, 1, 1], Ops.CMPNE: [0, 1, 1, 0], Ops.CMPLT: [0, 1, 0, 0]}
  for op, w in want.items(): assert exec_alu(op, dtypes.bool, a, b).values.tolist() == [bool(v) for v in w], op
  for op in (Ops.IDIV, Ops.MOD, Ops.SUB, Ops.SHL, Ops.SHR):
    with pytest.raises(ValueError, match="bool"): exec_alu(op, dtypes.bool, a, b)
  with pytest.raises(ValueError, match="bool"): exec_alu(Ops.NEG, dtypes.bool, a)

def test_decision_float_arith_correctly_rounded():
  """Float ADD SUB MUL FDIV RECIP SQRT NEG: the exact result rounded once to nearest even in the op's dtype; subnormals
  kept. float16: 1 + 2^-11 is a tie (-> 1), 1 + 3*2^-11 rounds up to 1 + 2^-9... (ties to the even neighbour 1 + 2^-9);
  half the smallest subnormal is a tie (-> 0), 3/2 of it goes to 2 * it. bfloat16: 1 + 2^-8 ties to 1.
  float32: 1/3 is 0x3EAAAAAB (the exact 1/3 = 0x3EAAAAAA.AAA..., rounded up)."""
  one = lambda dt, *v: np.array(v).astype(to_np(dt))
  assert exec_alu(Ops.ADD, F16, one(F16, 1, 1), one(F16, 2**-11, 3 * 2**-11)).values.tolist() == [1.0, 1 + 2**-9]
  tiny = one(F16, 2**-24)
  assert exec_alu(Ops.MUL, F16, tiny, one(F16, 0.5)).values.tolist() == [0.0]
  assert exec_alu(Ops.MUL, F16, tiny, one(F16, 1.5)).values.tolist() == [2**-23]
  assert float(exec_alu(Ops.ADD, BF16, one(BF16, 1), one(BF16, 2**-8)).values[0]) == 1.0
  assert exec_alu(Ops.FDIV, F32, f32(1), f32(3)).values.view(np.uint32).item() == 0x3EAAAAAB
  assert exec_alu(Ops.RECIP, F32, f32(3)).values.view(np.uint32).item() == 0x3EAAAAAB
  assert exec_alu(Ops.SQRT, dtypes.float64, np.array([2.0])).values.item() == float.fromhex("0x1.6a09e667f3bcdp+0")
  assert np.signbit(exec_alu(Ops.NEG, F32, f32(0)).values).item()

def test_decision_mulacc_allowed_set():
  """MULACC (floats): allowed set {fused, unfused}; fused is the reference. (1+2^-23)(1-2^-23) - 1 is -2^-46 fused and
  0 unfused (the product rounds to 1)."""
  a, b, c = f32(1 + 2**-23), f32(1 - 2**-23), f32(-1)
  out = exec_alu(Ops.MULACC, F32, a, b, c)
  assert out.values.tolist() == [-(2.0**-46)] and out.loose.tolist() == [True]
  assert [r.tolist() for r in allowed_results(Ops.MULACC, F32, a, b, c)] == [[-(2.0**-46)], [0.0]]
  exact = exec_alu(Ops.MULACC, F32, f32(2), f32(3), f32(1))
  assert exact.values.tolist() == [7.0] and exact.loose is None

def test_decision_max_nan_and_signed_zeros():
  """MAX (floats): NaN if either input is NaN; max(+0, -0) may be +0 or -0."""
  out = exec_alu(Ops.MAX, F32, f32(np.nan, 1, 0, -0.0, -0.0), f32(1, np.nan, -0.0, 0, -0.0))
  v = out.values
  assert np.isnan(v[:2]).all() and (v[2:] == 0).all() and np.signbit(v[4])
  assert out.loose.tolist() == [True, True, True, True, False]
  plus, minus = allowed_results(Ops.MAX, F32, f32(0, -0.0), f32(-0.0, 0))
  assert np.signbit(plus).tolist() == [False, False] and np.signbit(minus).tolist() == [True, True]

def test_decision_cmplt_cmpne_ieee():
  """CMPLT/CMPNE: IEEE: NaN < x is false, NaN != x is true, -0 == +0."""
  a, b = f32(np.nan, 1, np.nan, -0.0), f32(1, np.nan, np.nan, 0)
  assert exec_alu(Ops.CMPLT, F32, a, b).values.tolist() == [False, False, False, False]
  assert exec_alu(Ops.CMPNE, F32, a, b).values.tolist() == [True, True, True, False]

def test_decision_exp2_log2_sin_tolerance():
  """EXP2 LOG2 SIN: tolerance against a correctly rounded reference; special values exact. The reference of exp2(0.5)
  in float32 is sqrt(2) rounded (0x3FB504F3), of log2(3) 0x3FCAE00D, of sin(1) 0x3F576AA4."""
  out = [exec_alu(op, F32, f32(x)) for op, x in ((Ops.EXP2, 0.5), (Ops.LOG2, 3), (Ops.SIN, 1))]
  assert [o.values.view(np.uint32).item() for o in out] == [0x3FB504F3, 0x3FCAE00D, 0x3F576AA4]
  assert all(o.loose.tolist() == [True] for o in out)
  assert [kind(op, F32) for op in GroupOp.Transcendental] == ["tolerance"] * 3
  assert exec_alu(Ops.EXP2, F32, f32(0)).loose is None  # exp2(0) = 1 exactly: no loose lane

def test_decision_cast_int_and_float_conversions():
  """CAST int->int wraps (keeps the low bits); int->float and float->float round to nearest even, overflow -> +-inf
  (fp8e4m3: NaN). 300 -> int8 is 44; 2^24 + 1 -> float32 ties to 2^24, 2^24 + 3 to 2^24 + 4; 1e10 -> float16 is inf;
  500 -> fp8e4m3 is NaN; 65519 -> float16 is 65504 and 65520 (the tie past the largest finite) is inf."""
  assert exec_cast(i32(300, -129), I32, dtypes.int8).values.tolist() == [44, 127]
  assert exec_cast(i32(2**24 + 1, 2**24 + 3), I32, F32).values.tolist() == [2.0**24, 2.0**24 + 4]
  assert exec_cast(f32(1e10, -1e10), F32, F16).values.tolist() == [math.inf, -math.inf]
  assert np.isnan(exec_cast(f32(500), F32, dtypes.fp8e4m3).values.astype(np.float32)).all()
  assert exec_cast(f32(65519, 65520), F32, F16).values.tolist() == [65504.0, math.inf]

def test_decision_cast_float_to_int_truncates():
  """CAST float->int: truncate toward zero; a truncated value outside the target range, NaN or inf -> undefined."""
  out = exec_cast(f32(2.9, -2.9, 2**31, np.nan, -np.inf, -(2**31)), F32, I32)
  assert out.values.tolist() == [2, -2, 0, 0, 0, -(2**31)]
  assert out.undefined.tolist() == [False, False, True, True, True, False]

def test_decision_cast_bool():
  """CAST to/from bool: x != 0 (NaN -> true, -0 -> false); bool -> 0 / 1."""
  assert exec_cast(f32(np.nan, -0.0, 0.5), F32, dtypes.bool).values.tolist() == [True, False, True]
  assert exec_cast(i32(0, -5), I32, dtypes.bool).values.tolist() == [False, True]
  assert exec_cast(np.array([True, False]), dtypes.bool, F32).values.tolist() == [1.0, 0.0]

def test_decision_bitcast_preserves_bits():
  """BITCAST: same size only; bits preserved exactly (a NaN's payload and -0 too)."""
  pattern = np.array([0x7FC00001, 0x80000000, 0x3F800000], dtype=np.uint32)
  out = exec_bitcast(pattern.view(np.float32), F32, dtypes.uint32)
  assert out.values.tolist() == pattern.tolist() and out.loose is None
  assert exec_bitcast(np.float32(1), F32, I32).values.item() == 0x3F800000

def test_decision_threefry():
  """THREEFRY: threefry2x32, 20 rounds, on uint64; Random123's first known answer (zero counter, zero key) is
  (0x6b200159, 0x99ba4efe), packed low word first."""
  assert exec_alu(Ops.THREEFRY, dtypes.uint64, np.uint64(0), np.uint64(0)).values.item() == 0x99BA4EFE6B200159

# ---- the interface ----

def test_outcome_fields_broadcast_and_keep_shape():
  """Operands broadcast; values, undefined and loose all have the broadcast shape (vectors are extra dimensions)."""
  a, b = i32(1, 0, -3).reshape(3, 1), i32(1, 0, 2, 5).reshape(1, 4)
  out = exec_alu(Ops.IDIV, I32, a, b)
  assert out.values.shape == out.undefined.shape == (3, 4) and out.values.dtype == np.int32
  f = exec_alu(Ops.FDIV, F32, f32(0, 1).reshape(2, 1, 1), np.zeros((1, 5, 4), np.float32))
  assert f.values.shape == f.loose.shape == (2, 5, 4) and f.loose[0].all() and not f.loose[1].any()
  assert exec_alu(Ops.ADD, I32, np.int32(1), np.int32(2)).values.shape == ()

def test_one_value_operands_broadcast_in_masks_and_reasons():
  """A 0-d or one-element operand (a constant) applies to every lane: masks get the full shape, the reason its value."""
  out = exec_alu(Ops.IDIV, I32, i32(4, 5, 6), np.array(0, np.int32))
  assert out.undefined.tolist() == [True] * 3 and out.values.tolist() == [0] * 3 and out.reason == "division by zero"
  sh = exec_alu(Ops.SHL, dtypes.int8, np.array([[1], [2]], np.int8), np.array([9], np.int8))
  assert sh.undefined.shape == (2, 1) and sh.undefined.all() and sh.reason == "shift count 9 outside [0, 8)"
  assert exec_alu(Ops.MOD, I32, i32(-7, 7), np.int32(3)).values.tolist() == [-1, 1]

def test_python_scalars_are_converted_but_wrong_numpy_dtypes_are_rejected():
  assert exec_alu(Ops.ADD, dtypes.uint8, np.array([250], np.uint8), 10).values.tolist() == [4]
  with pytest.raises(TypeError, match="operand 1"): exec_alu(Ops.ADD, F32, f32(1), np.array([1.0]))
  with pytest.raises(TypeError, match="int32"): exec_cast(np.array([1], np.int64), I32, F32)

def test_where_selects_bits():
  """WHERE: c ? a : b, bit for bit (NaN payloads included), never loose."""
  nan = np.array([0x7FC12345], np.uint32).view(np.float32)
  out = exec_alu(Ops.WHERE, F32, np.array([True, False]), np.concatenate([nan, nan]), f32(1, 2))
  assert out.values.view(np.uint32).tolist() == [0x7FC12345, 0x40000000] and out.loose is None
  with pytest.raises(TypeError): exec_alu(Ops.WHERE, F32, f32(1), f32(1), f32(2))

@pytest.mark.parametrize("op,dt,why", [(Ops.ADD, dtypes.fp8e4m3, "fp8"), (Ops.FDIV, I32, "float"), (Ops.IDIV, F32, "integer"),
                                       (Ops.THREEFRY, dtypes.uint32, "uint64"), (Ops.XOR, F32, "integer or bool"),
                                       (Ops.ADD, F32.vec(4), "scalar"), (Ops.CAST, F32, "not an ALU op")])
def test_verifier_rejected_combinations_raise_value_error(op, dt, why):
  with pytest.raises(ValueError, match=why): exec_alu(op, dt, f32(1), f32(1))

def test_wrong_operand_count_raises_type_error():
  with pytest.raises(TypeError, match="takes 2"): exec_alu(Ops.ADD, F32, f32(1))

def edge_array(dt) -> np.ndarray:
  """A handful of values of dt including its extremes, zero, NaN and inf (floats)."""
  if dt is dtypes.bool: return np.array([False, True])
  if dtypes.is_int(dt):
    info = np.iinfo(to_np(dt))
    return np.array([info.min, info.min + 1, -1 if info.min else 1, 0, 1, 2, 7, info.bits, info.max - 1, info.max],
                    dtype=to_np(dt))
  vals = [0.0, -0.0, 1.0, -1.0, 0.5, 3.0, np.nan, np.inf, -np.inf, 1e-45, 65504.0, 1e300]
  with np.errstate(all="ignore"): return np.array(vals).astype(to_np(dt))

ALU_CASES = [(op, dt) for op in sorted(GroupOp.ALU, key=lambda o: o.value) for dt in VALUE_DTYPES]

@pytest.mark.parametrize("op,dt", ALU_CASES, ids=[f"{op.name}-{dt.name}" for op, dt in ALU_CASES])
def test_every_op_and_dtype_runs_quietly_or_is_rejected(op, dt):
  """Every accepted (op, dtype) runs on every pair/triple of edge values with no numpy warning, giving values of the
  result dtype and masks of the same shape; every rejected one (spec.kind) raises ValueError."""
  n = 3 if op in GroupOp.Ternary else 2 if op in GroupOp.Binary else 1
  x = edge_array(dt)
  cols = [np.array(c, dtype=x.dtype) for c in zip(*itertools.product(x, repeat=n))]
  if op is Ops.WHERE: cols[0] = np.resize(np.array([True, False]), cols[0].shape)
  if kind(op, dt) == "rejected":
    with pytest.raises(ValueError): exec_alu(op, dt, *cols)
    return
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    out = exec_alu(op, dt, *cols)
    sets = allowed_results(op, dt, *cols)
  assert isinstance(out, Outcome) and out.values.shape == cols[0].shape
  assert out.values.dtype == (np.dtype(np.bool_) if op in GroupOp.Comparison else to_np(dt))
  for m in (out.undefined, out.loose): assert m is None or (m.dtype == np.bool_ and m.shape == cols[0].shape)
  assert len(sets) == (2 if kind(op, dt) == "allowed" else 1) and all(s.dtype == out.values.dtype for s in sets)

def test_every_cast_runs_quietly():
  """Every CAST between value dtypes runs on edge values with no numpy warning and gives the target's numpy dtype."""
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    for src, dst in itertools.product(VALUE_DTYPES, VALUE_DTYPES):
      out = exec_cast(edge_array(src), src, dst)
      assert out.values.dtype == to_np(dst) and out.values.shape == edge_array(src).shape

def test_rules_table_covers_every_alu_op_and_the_conversions():
  assert set(RULES) == set(GroupOp.ALU) | {Ops.CAST, Ops.BITCAST}
  assert all(fn.__doc__ and fn.__doc__.strip() for fn in RULES.values())

def test_fp8_values_exist_for_casts():
  """fp8 is storage and casts only: casts in and out work, the numpy types are ml_dtypes' e4m3fn and e5m2."""
  assert to_np(dtypes.fp8e4m3) == np.dtype(ml_dtypes.float8_e4m3fn) and to_np(dtypes.fp8e5m2) == np.dtype(ml_dtypes.float8_e5m2)
  assert exec_cast(np.array([1.5], dtype=ml_dtypes.float8_e4m3fn), dtypes.fp8e4m3, F32).values.tolist() == [1.5]
