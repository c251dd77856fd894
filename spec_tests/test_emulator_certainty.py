"""The certainty rule (refimpl/emulator/certainty.py, SPEC.md "Certainty"): one level per element, the join of the level
an op's rule gives it and the carried levels of what it is computed from; moves keep a level; what decides control or
an address gives what it decides its carried level. Expected levels below are read off those rules for small programs.
"""
import math

import numpy as np
import pytest

from refimpl.dtype import dtypes
from refimpl.emulator import settings
from refimpl.emulator.alu import exec_alu, exec_bitcast
from refimpl.emulator.certainty import LEVEL, Certainty, carried_level, carry, carry_bits, join
from refimpl.emulator.machine import emulate
from refimpl.ir import Ops, ProgramBuilder

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
C = Certainty
F32, I32 = dtypes.float32, dtypes.int32
NAN = math.nan


# ***** the lattice *****

def test_carry_rule_keeps_exact_nan_payload_and_undefined_and_makes_the_rest_unknown():
  """Rule: through a computation EXACT, NAN_PAYLOAD and UNDEFINED stay and TOLERANCE, ERROR_BOUND, ALLOWED_SET and
  UNKNOWN become UNKNOWN; through BITCAST (the payload shows) NAN_PAYLOAD becomes UNKNOWN too."""
  stays = {C.EXACT, C.NAN_PAYLOAD, C.UNDEFINED}
  for level in C:
    assert carried_level(level) == (level if level in stays else C.UNKNOWN)
    assert carried_level(level, payload_shows=True) == (level if level in stays - {C.NAN_PAYLOAD} else C.UNKNOWN)
  every = np.arange(len(C), dtype=LEVEL)
  assert carry(every).tolist() == [carried_level(c) for c in C]
  assert carry_bits(every).tolist() == [carried_level(c, True) for c in C]
  assert carry(None) is None

def test_join_is_the_elementwise_maximum_and_none_is_exact():
  """Rule: join is the maximum; None stands for EXACT everywhere."""
  a, b = np.array([0, 1, 5, 6], LEVEL), np.array([[2], [0]], LEVEL)
  assert join(None, None) is None and join(None, a) is a
  assert join(a, b).tolist() == [[2, 2, 5, 6], [0, 1, 5, 6]]


# ***** an op's own level (alu.Outcome.certainty) *****

def test_outcome_levels_by_rule():
  """Rule: a produced NaN is NAN_PAYLOAD; a tolerance op's other loose lanes TOLERANCE, an allowed-set op's
  ALLOWED_SET; undefined lanes UNDEFINED; exact lanes EXACT."""
  x = np.array([0.0, 0.5, NAN], np.float32)
  assert exec_alu(Ops.EXP2, F32, x).certainty.tolist() == [C.EXACT, C.TOLERANCE, C.NAN_PAYLOAD]
  assert exec_alu(Ops.MAX, F32, np.array([0.0, 1.0], np.float32), np.array([-0.0, NAN], np.float32)).certainty.tolist() \
    == [C.ALLOWED_SET, C.NAN_PAYLOAD]
  assert exec_alu(Ops.ADD, F32, np.array([math.inf, 1.0], np.float32), np.array([-math.inf, 1.0], np.float32)).certainty \
    .tolist() == [C.NAN_PAYLOAD, C.EXACT]
  assert exec_alu(Ops.SHL, I32, np.array([1, 1], np.int32), np.array([40, 1], np.int32)).certainty.tolist() \
    == [C.UNDEFINED, C.EXACT]
  assert exec_alu(Ops.MUL, F32, np.array([2.0], np.float32), np.array([3.0], np.float32)).certainty is None
  assert exec_bitcast(np.array([NAN], np.float32), F32, I32).certainty is None  # BITCAST moves bits exactly

def test_mulacc_lanes_where_fused_and_unfused_differ_are_allowed_set():
  """Rule: MULACC's allowed set {fused, unfused}: lanes where they differ are ALLOWED_SET, the others EXACT."""
  rng = np.random.default_rng(0)
  a, b, c = (rng.standard_normal(256).astype(np.float32) for _ in range(3))
  out = exec_alu(Ops.MULACC, F32, a, b, c)
  unfused = (a * b + c).astype(np.float32)
  differ = out.values.view(np.uint32) != unfused.view(np.uint32)
  assert differ.any() and (out.certainty == np.where(differ, C.ALLOWED_SET, C.EXACT)).all()


# ***** the executor *****

def _levels(make, x, out=F32) -> list[int]:
  b = ProgramBuilder("k")
  o, xb = b.global_buf(out, len(x)), b.global_buf(F32, len(x))
  i = b.gidx(0, len(x))
  b.store(o, i, make(b, b.load(xb, i), i))
  zeros = np.zeros(len(x), np.int32 if out == I32 else np.float32)
  return emulate(b.build(), [zeros, x], strict=False).certainty[0].tolist()

X = np.array([0.0, 0.5, 3.0, NAN], np.float32)  # EXP2: exact at 0, tolerance at 0.5 and 3, NaN at NaN

@pytest.mark.parametrize("make, want", [
  (lambda b, x, i: b.alu(Ops.EXP2, x), [C.EXACT, C.TOLERANCE, C.TOLERANCE, C.NAN_PAYLOAD]),          # the rule's own
  (lambda b, x, i: b.alu(Ops.ADD, b.alu(Ops.EXP2, x), b.const(1.0, F32)),                          # computed on it
   [C.EXACT, C.UNKNOWN, C.UNKNOWN, C.NAN_PAYLOAD]),
  (lambda b, x, i: b.alu(Ops.ADD, x, b.const(NAN, F32)), [C.NAN_PAYLOAD] * 4),                      # a NaN CONST
  (lambda b, x, i: b.alu(Ops.WHERE, b.alu(Ops.CMPLT, i, b.const(2, I32)), b.alu(Ops.EXP2, x), x),   # WHERE moves
   [C.EXACT, C.TOLERANCE, C.EXACT, C.EXACT]),
  (lambda b, x, i: b.alu(Ops.WHERE, b.alu(Ops.CMPLT, b.alu(Ops.EXP2, x), b.const(4.0, F32)), x, x),  # an uncertain cond
   [C.EXACT, C.UNKNOWN, C.UNKNOWN, C.NAN_PAYLOAD]),
  (lambda b, x, i: b.alu(Ops.WHERE, b.alu(Ops.CMPNE, b.const(NAN, F32), x), x, x), [C.NAN_PAYLOAD] * 4),  # NaN compare
])
def test_certainty_rule_op_by_op(make, want):
  """Rule: own level joined with the operands' carried levels; WHERE keeps the chosen value's level joined with the
  condition's carried one (a compare with a NaN-payload operand is still payload-free)."""
  assert _levels(make, X) == want

def test_bitcast_of_a_nan_const_is_unknown():
  """Rule: BITCAST carries NAN_PAYLOAD as UNKNOWN (carry_bits): the bits of a NaN the IR does not pin down."""
  assert _levels(lambda b, x, i: b.bitcast(b.const(NAN, F32), I32), X, out=I32) == [C.UNKNOWN] * 4
  assert _levels(lambda b, x, i: b.bitcast(x, I32), X, out=I32) == [C.EXACT] * 4  # a loaded NaN's bits are known

def test_a_gated_load_joins_its_gates_level():
  """Rule: a gated LOAD's value is memory's (or the alternative's) level joined with the gate's carried level: under a
  gate decided by a tolerance result the other value might be loaded."""
  def levels(gate_of, alt_of) -> list[int]:
    b = ProgramBuilder("k")
    o, xb = b.global_buf(F32, 4), b.global_buf(F32, 4)
    i = b.gidx(0, 4)
    x = b.load(xb, i)
    b.store(o, i, b.load(xb, i, gate=gate_of(b, x, i), alt=alt_of(b, x)))
    return emulate(b.build(), [np.zeros(4, np.float32), X]).certainty[0].tolist()
  loose_gate = lambda b, x, i: b.alu(Ops.CMPLT, b.alu(Ops.EXP2, x), b.const(4.0, F32))
  assert levels(loose_gate, lambda b, x: b.const(-1.0, F32)) == [C.EXACT, C.UNKNOWN, C.UNKNOWN, C.NAN_PAYLOAD]
  exact_gate = lambda b, x, i: b.alu(Ops.CMPLT, i, b.const(2, I32))
  assert levels(exact_gate, lambda b, x: b.alu(Ops.EXP2, x)) == [C.EXACT, C.EXACT, C.TOLERANCE, C.NAN_PAYLOAD]

def test_a_store_through_an_uncertain_index_is_unknown():
  """Rule: a STORE whose index is uncertain joins the index's carried level into the element it writes."""
  b = ProgramBuilder("k")
  o, xb = b.global_buf(F32, 4), b.global_buf(F32, 4)
  i = b.gidx(0, 4)
  j = b.alu(Ops.MOD, b.cast(b.alu(Ops.EXP2, b.load(xb, i)), I32), b.const(4, I32))
  b.store(o, j, b.const(2.0, F32), gate=b.alu(Ops.CMPLT, i, b.const(1, I32)))
  res = emulate(b.build(), [np.zeros(4, np.float32), np.array([0.5, 0, 0, 0], np.float32)])
  assert res.certainty[0].tolist() == [C.EXACT, C.UNKNOWN, C.EXACT, C.EXACT]  # exp2(0.5) = 1.41: element 1

def test_wmma_results_are_error_bound():
  """Rule: every WMMA result is ERROR_BOUND (a NaN result NAN_PAYLOAD), joined with the carried levels of a's row,
  b's column and c."""
  b = ProgramBuilder("k")
  o, xb = b.global_buf(F32, 3), b.global_buf(F32, 3)
  t = b.gidx(0, 3)
  a = b.load(xb, b.const(0, I32), count=2)
  c = b.alu(Ops.WHERE, b.alu(Ops.CMPLT, t, b.const(1, I32)), b.const(NAN, F32),
            b.alu(Ops.WHERE, b.alu(Ops.CMPLT, t, b.const(2, I32)), b.const(1.0, F32), b.alu(Ops.EXP2, b.load(xb, t))))
  b.store(o, t, b.wmma(a, a, c, (1, 1, 2)))
  res = emulate(b.build(), [np.zeros(3, np.float32), np.array([0.5, 0.25, 0.5], np.float32)])
  assert res.certainty[0].tolist() == [C.NAN_PAYLOAD, C.ERROR_BOUND, C.UNKNOWN]

def test_undefined_wins_over_loose_and_is_seen_as_a_mask():
  """Rule: UNDEFINED is the top of the lattice; Emulation.undefined and .loose are the levels as masks."""
  b = ProgramBuilder("k")
  o, xb = b.global_buf(I32, 2), b.global_buf(F32, 2)
  i = b.gidx(0, 2)
  shifted = b.alu(Ops.SHL, b.cast(b.alu(Ops.EXP2, b.load(xb, i)), I32), b.alu(Ops.MUL, i, b.const(40, I32)))
  b.store(o, i, shifted)
  res = emulate(b.build(), [np.zeros(2, np.int32), np.array([0.5, 0.5], np.float32)], strict=False)
  assert res.certainty[0].tolist() == [C.UNKNOWN, C.UNDEFINED]
  assert res.undefined[0].tolist() == [False, True] and res.loose[0].tolist() == [True, False]


# ***** loops: the fold keeps the sequential levels *****

def _max_loop(x: np.ndarray):
  b = ProgramBuilder("max_chain")
  out, xb = b.global_buf(F32, 1), b.global_buf(F32, len(x))
  acc = b.acc(b.const(-1.0, F32))
  with b.loop(len(x)) as r: b.assign(acc, b.alu(Ops.MAX, acc, b.load(xb, r)))
  b.store(out, b.const(0, I32), acc)
  return b.build()

@pytest.mark.parametrize("zeros_at, want", [((6, 7), C.ALLOWED_SET), ((2, 3), C.UNKNOWN), ((), C.EXACT)])
def test_a_folded_chain_has_the_sequential_level(zeros_at, want, monkeypatch):
  """Rule: a chain's last step keeps its own level and earlier steps' levels arrive carried: max(+0, -0) at the last
  step leaves ALLOWED_SET, at an earlier one UNKNOWN; a loop run as lanes (folds.fold) and one run step by step agree."""
  x = np.full(8, -5.0, np.float32)
  if zeros_at: x[zeros_at[0]], x[zeros_at[1]] = 0.0, -0.0
  levels = []
  for lanes in (True, False):
    monkeypatch.setattr(settings, "LOOPS_AS_LANES", lanes)
    levels.append(emulate(_max_loop(x), [np.zeros(1, np.float32), x]).certainty[0].tolist())
  assert levels == [[want], [want]]
