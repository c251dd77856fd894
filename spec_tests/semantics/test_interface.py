"""The interface around the rules: exec_alu, exec_cast, exec_bitcast and allowed_results (refimpl/emulator/alu.py).
Operands broadcast and masks take the broadcast shape; a lane set with no undefined lane has no mask; Python scalars are
converted and wrong numpy dtypes rejected; what the verifier rejects raises ValueError; every accepted (op, dtype) and
every CAST runs on edge values with no numpy warning; alu.ALU_RULES has a documented rule for every op.

Not a rule's home (it claims no rule and no decision row): each op's rule is tested in the file named after it
(spec_tests/test_rule_homes.py maps them).
"""
from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

from refimpl.dtype import dtypes, to_np
from refimpl.emulator import alu
from refimpl.emulator.alu import Outcome, allowed_results, exec_alu, exec_cast
from refimpl.ir.ops import GroupOp, Ops
from refimpl.spec import VALUE_DTYPES, kind

from .arrays import F32, I32, f32, i32

RULES = ()
DECISIONS: dict[str, str] = {}

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

@pytest.mark.parametrize("op,dt,why", [(Ops.ADD, dtypes.fp8e4m3, "fp8"), (Ops.FDIV, I32, "float"), (Ops.IDIV, F32, "integer"),
                                       (Ops.THREEFRY, dtypes.uint32, "uint64"), (Ops.XOR, F32, "integer or bool"),
                                       (Ops.ADD, F32.vec(4), "scalar"), (Ops.CAST, F32, "not an ALU op")])
def test_verifier_rejected_combinations_raise_value_error(op, dt, why):
  with pytest.raises(ValueError, match=why): exec_alu(op, dt, f32(1), f32(1))

def test_wrong_operand_count_raises_type_error():
  with pytest.raises(TypeError, match="takes 2"): exec_alu(Ops.ADD, F32, f32(1))

def test_defined_lanes_have_no_mask():
  """A lane set with no undefined lane reports undefined=None and an empty reason."""
  out = exec_alu(Ops.IDIV, dtypes.int32, np.array([1, 2], dtype=np.int32), np.array([1, 2], dtype=np.int32))
  assert out.undefined is None and out.reason == ""

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
  assert set(alu.ALU_RULES) == set(GroupOp.ALU) | {Ops.CAST, Ops.BITCAST}
  assert all(fn.__doc__ and fn.__doc__.strip() for fn in alu.ALU_RULES.values())
