"""The fuzzer's comparison rules (refimpl/fuzz/expect.py, kinds.py, variants.py): the kind of each buffer, and how loose
elements are compared, so that no finding is a false alarm and real differences are still caught."""
import itertools
import math

import numpy as np
import pytest

from refimpl.dtype import dtypes, to_np
from refimpl.emulator import alu
from refimpl.emulator.certainty import Certainty
from refimpl.emulator.compute import wmma_error_bound
from refimpl.emulator.machine import emulate
from refimpl.fuzz import kinds as fc
from refimpl.fuzz.case import Case, discard_reason, prepare
from refimpl.fuzz.expect import compare
from refimpl.fuzz.kinds import analyze, control_taint, join
from refimpl.fuzz.variants import variant_program
from refimpl.ir import Ops, ProgramBuilder
from refimpl.spec import OPS, ulp_bound
from refimpl.testing.compare import same_value, ulp_distance

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
F32 = dtypes.float32


def _kernel(make, n=4, out=F32, ins=(F32, F32)):
  """out[i] = make(b, loads...) for i < n (one thread per element)."""
  b = ProgramBuilder("k")
  o = b.global_buf(out, n)
  bufs = [b.global_buf(d, n) for d in ins]
  i = b.gidx(0, n)
  b.store(o, i, make(b, *[b.load(x, i) for x in bufs]))
  return b.build()

def _select_sum(b, x, y):
  s = b.alu(Ops.ADD, x, y)
  return b.alu(Ops.WHERE, b.alu(Ops.CMPLT, s, y), s, y)

def _kind(p):
  return analyze(p).of_global(p)[0][0]

def _full_kind(p):
  return analyze(p).of_global(p)[0]


@pytest.mark.parametrize("make, level", [
  (lambda b, x, y: b.alu(Ops.ADD, x, y), fc.NANPAY),                            # float arithmetic: only NaN payloads open
  (lambda b, x, y: b.alu(Ops.EXP2, x), fc.TOL),                                 # tolerance op, one deep
  (lambda b, x, y: b.alu(Ops.MULACC, x, y, x), fc.SET),                         # allowed set
  (lambda b, x, y: b.alu(Ops.MAX, x, y), fc.SET),
  (lambda b, x, y: b.alu(Ops.ADD, b.alu(Ops.EXP2, x), y), fc.MONO),             # a monotone chain on a tolerance result
  (lambda b, x, y: b.alu(Ops.MUL, b.alu(Ops.EXP2, x), b.alu(Ops.EXP2, y)), fc.OPAQUE),  # a product of two loose values
  (lambda b, x, y: b.alu(Ops.ADD, b.alu(Ops.MAX, x, y), y), fc.OPAQUE),        # computed on an allowed-set result
  (lambda b, x, y: b.alu(Ops.NEG, b.alu(Ops.EXP2, x)), fc.MONO),                # a sign flip: a decreasing chain
  (lambda b, x, y: b.alu(Ops.NEG, b.alu(Ops.MAX, x, y)), fc.SET),               # ... and the allowed set
  (lambda b, x, y: b.alu(Ops.WHERE, b.alu(Ops.CMPLT, b.alu(Ops.SIN, x), y), x, y), fc.OPAQUE),  # discontinuous op
  (lambda b, x, y: _select_sum(b, x, y), fc.NANPAY),                            # a compare of NaN-loose values is exact
  (lambda b, x, y: b.alu(Ops.WHERE, b.alu(Ops.CMPLT, x, y), x, y), fc.CLEAN),   # moves of loaded values stay exact
])
def test_kind_of_float_results(make, level):
  """Rule: the kind lattice of the module docstring, op by op."""
  assert _kind(_kernel(make)) == level


def test_kind_of_integer_and_bitcast_results():
  """Rule: integer arithmetic is CLEAN; a BITCAST of a computed float, or of a NaN CONST, is OPAQUE (a NaN's bits are
  open), and the emulator marks the NaN CONST's bits UNKNOWN too (certainty.carry_bits), so no element of it is
  compared."""
  ints = (dtypes.int32, dtypes.int32)
  assert _kind(_kernel(lambda b, x, y: b.alu(Ops.MUL, x, y), out=dtypes.int32, ins=ints)) == fc.CLEAN
  assert _kind(_kernel(lambda b, x, y: b.bitcast(b.alu(Ops.ADD, x, y), dtypes.int32), out=dtypes.int32)) == fc.OPAQUE
  p = _kernel(lambda b, x, y: b.bitcast(b.const(math.nan, F32), dtypes.int32), out=dtypes.int32)
  assert _kind(p) == fc.OPAQUE
  inputs = [np.zeros(4, np.int32), np.ones(4, np.float32), np.ones(4, np.float32)]
  assert prepare(Case(p, inputs)).expected.certainty[0].tolist() == [Certainty.UNKNOWN] * 4
  assert _check(p, inputs, np.arange(4, dtype=np.int32))[0] is None  # any NaN's bits


def _gated_store(loose_gate: bool, n: int = 4):
  """o[i] = 2 * x[i] where LOG2(x[i]) < 0.5 (loose) or x[i] < 1.5 (exact), o[i + n] = x[i] everywhere."""
  b = ProgramBuilder("k")
  o, x = b.global_buf(F32, 2 * n), b.global_buf(F32, n)
  i = b.gidx(0, n)
  v = b.load(x, i)
  test = b.alu(Ops.LOG2, v) if loose_gate else v
  with b.when(b.alu(Ops.CMPLT, test, b.const(0.5 if loose_gate else 1.5, F32))):
    b.store(o, i, b.alu(Ops.MUL, v, b.const(2.0, F32)))
  b.store(o, b.alu(Ops.ADD, i, b.const(n, dtypes.int32)), v)
  return b.build()

def test_store_under_a_loose_gate_is_unknown_and_its_exact_elements_are_compared():
  """Rule: a store under an IF gate (or a STORE gate) that came from a loose value makes the buffer OPAQUE, not WILD:
  the emulator's control rule marks what the lanes store, or might have stored, loose; every other element is exact
  and compared bit for bit."""
  p = _gated_store(loose_gate=True)
  assert _kind(p) == fc.OPAQUE
  x = np.array([1.25, 1.5, 3.0, 0.25], np.float32)  # log2: 0.32, 0.58, 1.58, -2: lanes 0 and 3 store
  inputs = [np.zeros(8, np.float32), x]
  e = prepare(Case(p, inputs)).expected
  assert (e.certainty[0][:4] == Certainty.UNKNOWN).all()       # the gated half is UNKNOWN on every lane (a backend may decide
  assert (e.certainty[0][4:] == Certainty.EXACT).all()        # each gate the other way), the ungated half EXACT
  other = e.buffers[0].copy()
  other[:4] = np.where(np.arange(4) < 2, x * 2, 0)            # the other decisions: accepted
  assert _check(p, inputs, other)[0] is None
  wrong = e.buffers[0].copy()
  wrong[5] = 99
  m, _ = _check(p, inputs, wrong)
  assert m is not None and m.element == 5 and m.rule == "exact"


def test_store_through_a_loose_index_or_under_a_loose_loop_bound_is_wild():
  """Rule: a store through a loose index, or inside a RANGE whose bound is loose, makes the whole buffer WILD (a
  backend may write another element, or run an iteration the emulator did not); a LOAD through a loose index is only
  OPAQUE (its element is loose, whatever it holds)."""
  b = ProgramBuilder("k")
  o, x = b.global_buf(dtypes.int32, 4), b.global_buf(F32, 4)
  i = b.gidx(0, 4)
  j = b.cast(b.alu(Ops.EXP2, b.load(x, i)), dtypes.int32)
  b.store(o, j, i)
  assert _kind(b.build()) == fc.WILD
  b = ProgramBuilder("k")
  o, x = b.global_buf(dtypes.int32, 4), b.global_buf(F32, 4)
  n = b.cast(b.alu(Ops.EXP2, b.load(x, b.const(0, dtypes.int32))), dtypes.int32)
  with b.loop_uops(b.const(0, dtypes.int32), n) as r: b.store(o, r, r)
  assert _kind(b.build()) == fc.WILD
  b = ProgramBuilder("k")
  o, x, y = b.global_buf(F32, 4), b.global_buf(F32, 4), b.global_buf(F32, 4)
  i = b.gidx(0, 4)
  j = b.cast(b.alu(Ops.EXP2, b.load(x, i)), dtypes.int32)
  b.store(o, i, b.load(y, j))
  assert _kind(b.build()) == fc.OPAQUE


def _exp2(b, x): return b.alu(Ops.EXP2, x)

@pytest.mark.parametrize("make, kind", [
  (lambda b, x, y: b.alu(Ops.SUB, y, _exp2(b, x)), (fc.MONO, fc.DOWN)),                         # SUB flips its second operand
  (lambda b, x, y: b.alu(Ops.MUL, _exp2(b, x), b.const(-2.0, F32)), (fc.MONO, fc.DOWN)),        # a negative constant flips
  (lambda b, x, y: b.alu(Ops.MUL, _exp2(b, x), y), (fc.MONO, fc.EITHER)),                        # a sign known per element
  (lambda b, x, y: b.alu(Ops.FDIV, y, _exp2(b, x)), (fc.OPAQUE, 0)),                         # 1/x is not monotone
  (lambda b, x, y: b.alu(Ops.ADD, _exp2(b, x), _exp2(b, y)), (fc.MONO, fc.UP)),                  # two increasing chains
  (lambda b, x, y: b.alu(Ops.SUB, _exp2(b, x), _exp2(b, y)), (fc.OPAQUE, 0)),                # opposite directions
  (lambda b, x, y: b.alu(Ops.ADD, b.alu(Ops.MUL, _exp2(b, x), y), y), (fc.MONO, fc.EITHER)),
  (lambda b, x, y: b.alu(Ops.ADD, b.alu(Ops.MUL, _exp2(b, x), y), _exp2(b, y)), (fc.OPAQUE, 0)),  # EITHER + UP
  (lambda b, x, y: _exp2(b, b.alu(Ops.ADD, _exp2(b, x), y)), (fc.MONO, fc.UP)),                   # EXP2 of an increasing chain
  (lambda b, x, y: _exp2(b, b.alu(Ops.NEG, _exp2(b, x))), (fc.OPAQUE, 0)),                    # ... of a decreasing one
  (lambda b, x, y: b.alu(Ops.SQRT, b.alu(Ops.NEG, _exp2(b, x))), (fc.MONO, fc.DOWN)),
  (lambda b, x, y: b.alu(Ops.ADD, b.alu(Ops.SIN, b.alu(Ops.ADD, _exp2(b, x), y)), y), (fc.OPAQUE, 0)),  # SIN of a chain
  (lambda b, x, y: b.alu(Ops.MAX, _exp2(b, x), y), (fc.OPAQUE, 0)),                          # MAX is not a chain op
])
def test_kind_of_loose_chains(make, kind):
  """Rule: MONO chains and their direction (module docstring): monotone exact ops of tolerance results, two loose
  operands only when they share a direction, EXP2/LOG2 only of an increasing chain."""
  assert _full_kind(_kernel(make)) == kind


def test_kind_of_an_accumulated_chain_and_of_wmma():
  """Rule: a loop sum of EXP2 results is an increasing chain (the accumulator joins its updates); a WMMA of loaded
  values is BOUND with its K; NEG keeps it; anything computed on it is OPAQUE."""
  b = ProgramBuilder("k")
  o, x = b.global_buf(F32, 1), b.global_buf(F32, 8)
  acc = b.acc(b.const(0.0, F32))
  with b.loop(8) as r: b.assign(acc, b.alu(Ops.ADD, acc, _exp2(b, b.load(x, r))))
  b.store(o, b.const(0, dtypes.int32), acc)
  assert _full_kind(b.build()) == (fc.MONO, fc.UP)
  for wrap, kind in ((lambda b, w: w, (fc.BOUND, 2)), (lambda b, w: b.alu(Ops.NEG, w), (fc.BOUND, 2)),
                     (lambda b, w: b.alu(Ops.ADD, w, w), (fc.OPAQUE, 0))):
    b = ProgramBuilder("k")
    o, a, c = b.global_buf(F32, 1), b.global_buf(dtypes.float16, 2), b.global_buf(F32, 1)
    zero = b.const(0, dtypes.int32)
    w = b.wmma(b.load(a, zero, count=2), b.load(a, zero, count=2), b.load(c, zero), (1, 1, 2))
    b.store(o, zero, wrap(b, w))
    assert _full_kind(b.build()) == kind


def test_join():
  """Rule: WILD > OPAQUE > {TOL, SET, BOUND, MONO} > NANPAY > CLEAN; TOL keeps the larger bound, BOUND the larger
  K; TOL with MONO is MONO; MONO keeps a shared direction, else EITHER; other middle pairs are OPAQUE."""
  assert join((fc.TOL, 2), (fc.TOL, 4)) == (fc.TOL, 4)
  assert join((fc.TOL, 2), (fc.SET, 0)) == (fc.OPAQUE, 0)
  assert join((fc.BOUND, 2), (fc.BOUND, 1)) == (fc.BOUND, 2) and join((fc.BOUND, 2), (fc.TOL, 1)) == (fc.OPAQUE, 0)
  assert join((fc.TOL, 2), (fc.MONO, fc.UP)) == (fc.MONO, fc.UP) and join((fc.TOL, 2), (fc.MONO, fc.DOWN)) == (fc.MONO, fc.EITHER)
  assert join((fc.MONO, fc.DOWN), (fc.NANPAY, 0)) == (fc.MONO, fc.DOWN) and join((fc.MONO, fc.UP), (fc.SET, 0)) == (fc.OPAQUE, 0)
  assert join((fc.NANPAY, 0), (fc.SET, 0)) == (fc.SET, 0)
  assert join((fc.CLEAN, 0), (fc.NANPAY, 0)) == (fc.NANPAY, 0)
  assert join((fc.OPAQUE, 0), (fc.WILD, 0)) == (fc.WILD, 0)


def _check(p, inputs, got_out):
  """(first mismatch, expectation) of a backend that returned got_out in buffer 0 and left the inputs alone."""
  prep = prepare(Case(p, inputs))
  e = prep.expected
  got = [got_out, *inputs[1:]]
  return compare(p, e, got)[0], e


def test_exact_elements_compare_every_bit():
  """Rule: exact elements are compared bit for bit: +0 and -0 differ, one flipped bit is a mismatch."""
  p = _kernel(lambda b, x, y: b.alu(Ops.MUL, x, y))
  x, y = np.array([1, 2, 0, -1], np.float32), np.array([3, 0.5, -1, 0], np.float32)
  want = x * y  # [3, 1, -0, -0]
  assert _check(p, [np.zeros(4, np.float32), x, y], want)[0] is None
  m, _ = _check(p, [np.zeros(4, np.float32), x, y], np.abs(want))
  assert m is not None and m.element == 2 and m.rule == "exact"
  flipped = want.copy()
  flipped.view(np.uint32)[1] ^= 1
  assert _check(p, [np.zeros(4, np.float32), x, y], flipped)[0].element == 1


def test_nan_payloads_of_computed_nans_are_not_compared():
  """Rule: a NaN an op produced is loose only in its payload: any NaN matches, a number does not."""
  p = _kernel(lambda b, x, y: b.alu(Ops.SUB, x, y))
  x, y = np.array([np.inf, 1, 2, 3], np.float32), np.array([np.inf, 1, 2, 3], np.float32)
  other_nan = np.array([0x7FC01234, 0, 0, 0], np.uint32).view(np.float32)
  assert _check(p, [np.zeros(4, np.float32), x, y], other_nan)[0] is None
  m, _ = _check(p, [np.zeros(4, np.float32), x, y], np.zeros(4, np.float32))
  assert m is not None and m.element == 0


def test_tolerance_elements_allow_the_ulp_bound_and_no_more():
  """Rule: a loose EXP2 result passes within ulp_bound(EXP2, float32) ulps of the reference, fails one ulp beyond."""
  p = _kernel(lambda b, x: b.alu(Ops.EXP2, x), ins=(F32,))
  x = np.array([0.3, 1.7, -2.2, 5.1], np.float32)
  inputs = [np.zeros(4, np.float32), x]
  ref = prepare(Case(p, inputs)).expected.buffers[0]
  bound = ulp_bound(Ops.EXP2, F32)
  at_bound = (ref.view(np.int32) + bound).view(np.float32)
  assert _check(p, inputs, at_bound)[0] is None
  beyond = (ref.view(np.int32) + bound + 1).view(np.float32)
  m, _ = _check(p, inputs, beyond)
  assert m is not None and m.rule.startswith("tolerance")


def test_allowed_set_accepts_either_member_only():
  """Rule: a loose MULACC result may be the fused or the unfused value (the variant run), nothing else; MAX(+0, -0)
  may be either zero."""
  p = _kernel(lambda b, x, y: b.alu(Ops.MULACC, x, x, y))
  x = np.array([1 + 2 ** -12, 3, 1, 1], np.float32)
  y = np.array([-(1 + 2 ** -11), 0.1, 1, 1], np.float32)
  inputs = [np.zeros(4, np.float32), x, y]
  fused = (x.astype(np.float64) * x + y).astype(np.float32)  # x*x is exact in float64
  unfused = x * x + y
  assert (fused != unfused).any(), "the inputs must tell fused from unfused"
  assert _check(p, inputs, fused)[0] is None
  assert _check(p, inputs, unfused)[0] is None
  wrong = fused.copy()
  wrong[0] = np.nextafter(max(fused[0], unfused[0]), np.float32(np.inf))
  m, _ = _check(p, inputs, wrong)
  assert m is not None and m.rule == "allowed set"
  pm = _kernel(lambda b, x, y: b.alu(Ops.MAX, x, y))
  zeros = [np.zeros(4, np.float32), np.array([0.0, -0.0, 0, 0], np.float32), np.array([-0.0, 0.0, 0, 0], np.float32)]
  for z in (0.0, -0.0):
    assert _check(pm, zeros, np.array([z, z, 0, 0], np.float32))[0] is None


def test_variant_program_is_the_other_member():
  """Rule: the below run unfuses float MULACC and makes MAX(+0, -0) give -0, and changes nothing else."""
  p = _kernel(lambda b, x, y: b.alu(Ops.MAX, x, y))
  vp = variant_program(p, -1)
  xs = [np.zeros(3, np.float32), np.array([0.0, -0.0, 2], np.float32), np.array([-0.0, 0.0, 1], np.float32)]
  pz = _kernel(lambda b, x, y: b.alu(Ops.MAX, x, y), n=3)
  got = emulate(variant_program(pz, -1), xs).buffers[0]
  assert np.signbit(got).tolist() == [True, True, False] and got[2] == 2
  assert vp is not None and variant_program(_kernel(lambda b, x, y: b.alu(Ops.ADD, x, y)), -1) is None
  assert variant_program(p, 1) is None  # the above run leaves MAX alone


ALLOWED_SET_OPS = [op for op in alu.ALU_RULES if alu.looseness(op) is not None and alu.looseness(op).other is not None]

def _edge_operands(dt, arity):
  """Operands of dtype dt holding every combination of signed zeros, infinities, NaN and a few numbers, then random
  values."""
  edges = [0.0, -0.0, 1.0, -1.5, np.inf, -np.inf, np.nan, 3e-39]
  grid = np.array(list(itertools.product(edges, repeat=arity))).T
  rand = np.random.default_rng(arity).standard_normal((arity, 64)) * 8
  return [np.concatenate([g, r]).astype(to_np(dt)) for g, r in zip(grid, rand)]

@pytest.mark.parametrize("dt", [F32, dtypes.float16, dtypes.float64])
@pytest.mark.parametrize("op", ALLOWED_SET_OPS, ids=lambda op: op.name)
def test_below_run_takes_the_other_member_the_rule_declares(op, dt):
  """Rule: the below run gives, lane for lane, the other member of each allowed-set op's set: alu.allowed_results's
  second array, which the rule's `@loose(ALLOWED_SET, other=...)` declares."""
  arity = OPS[op].arity
  xs = _edge_operands(dt, arity)
  p = _kernel(lambda b, *v: b.alu(op, *v), n=len(xs[0]), out=dt, ins=(dt,) * arity)
  got = emulate(variant_program(p, -1), [np.zeros_like(xs[0]), *xs]).buffers[0]
  assert same_value(got, alu.allowed_results(op, dt, *xs)[1]).all()

def test_below_run_follows_a_changed_declaration(monkeypatch):
  """Rule: the below run builds the member the rule declares, not a set of its own: declaring MAX's other member as
  min(a, b) makes the below run compute min."""
  minimum = (Ops.NEG, (Ops.MAX, (Ops.NEG, 0), (Ops.NEG, 1)))
  monkeypatch.setattr(alu.maximum, "looseness", alu.Looseness(Certainty.ALLOWED_SET, other=minimum))
  xs = [np.array([1.0, -2.0, 5.0], np.float32), np.array([3.0, -1.0, -4.0], np.float32)]
  p = _kernel(lambda b, x, y: b.alu(Ops.MAX, x, y), n=3)
  assert emulate(variant_program(p, -1), [np.zeros(3, np.float32), *xs]).buffers[0].tolist() == [1.0, -2.0, -4.0]


@pytest.mark.parametrize("dt", [F32, dtypes.float16, dtypes.bfloat16, dtypes.float64])
def test_variant_program_moves_each_transcendental_result_past_its_bound(dt):
  """Rule: the below / above runs move each finite tolerance result at least b + 1 ulps down / up (b its bound) and
  keep NaN and +-inf, for subnormal, normal and binade-edge results."""
  p = _kernel(lambda b, x: b.alu(Ops.EXP2, x), n=8, out=dt, ins=(dt,))
  x = np.array([0.0, 1.0, -1.0, 0.37, -140.0, -1e4, np.inf, np.nan], to_np(dt))
  inputs = [np.zeros(8, to_np(dt)), x]
  ref = emulate(p, inputs).buffers[0]
  steps = ulp_bound(Ops.EXP2, dt) + 1
  lo, hi = (emulate(variant_program(p, side), inputs).buffers[0] for side in (-1, 1))
  finite = np.isfinite(ref.astype(np.float64))
  assert (lo[finite] < ref[finite]).all() and (hi[finite] > ref[finite]).all()
  assert (ulp_distance(lo, ref)[finite] >= steps).all() and (ulp_distance(hi, ref)[finite] >= steps).all()
  assert same_value(lo[~finite], ref[~finite]).all() and same_value(hi[~finite], ref[~finite]).all()


def _nudged(ref, bound, rng):
  """ref with every element moved by a random whole number of ulps within +-bound (what a backend may return)."""
  k = rng.integers(-bound, bound + 1, ref.size).astype(np.int64)
  ordered = ref.view(np.int32).astype(np.int64)
  ordered = np.where(ordered < 0, -(ordered & 0x7FFFFFFF), ordered) + k
  bits = np.where(ordered < 0, (-ordered) | 0x80000000, ordered)
  return bits.astype(np.uint32).view(np.float32)

def test_monotone_bracket_accepts_any_error_within_the_bounds_and_not_beyond():
  """Rule: MONO elements pass when each transcendental of the chain is within its bound (a backend's exp2 off by up to
  b ulps, then exactly rounded ops: out = sum_k 3 * exp2(x_k) - y), and fail when the chain is computed wrong."""
  b = ProgramBuilder("k")
  n, k = 64, 4
  o, x, y = b.global_buf(F32, n), b.global_buf(F32, n * k), b.global_buf(F32, n)
  i = b.gidx(0, n)
  acc = b.acc(b.const(0.0, F32))
  with b.loop(k) as r:
    ix = b.alu(Ops.ADD, b.alu(Ops.MUL, i, b.const(k, dtypes.int32)), r)
    b.assign(acc, b.alu(Ops.ADD, acc, b.alu(Ops.MUL, _exp2(b, b.load(x, ix)), b.const(3.0, F32))))
  b.store(o, i, b.alu(Ops.SUB, acc, b.load(y, i)))
  p = b.build()
  assert _full_kind(p) == (fc.MONO, fc.UP)
  rng = np.random.default_rng(1)
  xs = rng.uniform(-3, 3, n * k).astype(np.float32)
  ys = rng.uniform(0, 40, n).astype(np.float32)
  inputs = [np.zeros(n, np.float32), xs, ys]
  ref_exp = emulate(_kernel(lambda b, v: _exp2(b, v), n=n * k, ins=(F32,)), [np.zeros(n * k, np.float32), xs]).buffers[0]
  bound = ulp_bound(Ops.EXP2, F32)
  def backend(exps):
    s = np.zeros(n, np.float32)
    for r in range(k): s = s + exps.reshape(n, k)[:, r] * np.float32(3)
    return s - ys
  for _ in range(5):
    m, e = _check(p, inputs, backend(_nudged(ref_exp, bound, rng)))
    assert m is None, m.describe()
  assert e.below is not None and e.above is not None
  m, _ = _check(p, inputs, backend(_nudged(ref_exp, 4 * bound + 8, np.random.default_rng(2))))
  assert m is not None and m.rule == "monotone bracket"
  m, _ = _check(p, inputs, backend(ref_exp) + ys * np.float32(2 ** -20))  # one small term too many
  assert m is not None and m.rule == "monotone bracket"


def _wmma_kernel(dt_in, dt_out, n, K):
  """out[t] = WMMA(a[t], b[t], c[t]) with (N, M, K) = (1, 1, K): a K-term dot product plus c per thread."""
  b = ProgramBuilder("k")
  o, a, bb, c = b.global_buf(dt_out, n), b.global_buf(dt_in, n * K), b.global_buf(dt_in, n * K), b.global_buf(dt_out, n)
  t = b.gidx(0, n)
  base = b.alu(Ops.MUL, t, b.const(K, dtypes.int32))
  w = b.wmma(b.load(a, base, count=K), b.load(bb, base, count=K), b.load(c, t), (1, 1, K))
  b.store(o, t, w)
  return b.build()

def test_wmma_results_are_compared_within_the_error_bound():
  """Rule: the WMMA error bound: a result accumulated in the result dtype in reverse order, products rounded (an
  allowed execution) passes; one that drops c or reads b in a wrong order fails; a NaN reference wants a NaN."""
  n, K = 64, 8
  p = _wmma_kernel(dtypes.float16, dtypes.float16, n, K)
  rng = np.random.default_rng(3)
  a = rng.uniform(-2, 2, n * K).astype(np.float16)
  bb = rng.uniform(-2, 2, n * K).astype(np.float16)
  c = rng.uniform(-4, 4, n).astype(np.float16)
  c[0], a[K] = np.nan, np.inf  # thread 0: NaN c; thread 1: inf times a finite b
  inputs = [np.zeros(n, np.float16), a, bb, c]
  ref = prepare(Case(p, inputs)).expected.buffers[0]
  def dot(a_, b_, with_c=True):
    s = c.copy() if with_c else np.zeros(n, np.float16)
    for k in reversed(range(K)): s = (s + (a_.reshape(n, K)[:, k] * b_.reshape(n, K)[:, k]).astype(np.float16))
    return s.astype(np.float16)
  with np.errstate(all="ignore"):
    other_order = dot(a, bb)
    assert (other_order != ref)[2:].any(), "the inputs must tell the orders apart"
    assert _check(p, inputs, other_order)[0] is None
    no_c = dot(a, bb, with_c=False)
    m, _ = _check(p, inputs, no_c)  # thread 0's reference is a NaN (NAN_PAYLOAD): without c it is not
    assert m is not None and m.element == 0 and m.rule == "exact"
    no_c[0] = np.nan
    m, _ = _check(p, inputs, no_c)
    assert m is not None and m.element > 1 and m.rule == "WMMA error bound"
    m, _ = _check(p, inputs, dot(a, bb[::-1].copy()))
    assert m is not None and m.rule == "WMMA error bound"
    not_nan = other_order.copy()
    not_nan[0] = 1
    assert _check(p, inputs, not_nan)[0].element == 0


def test_a_negated_wmma_result_keeps_its_bound():
  """Rule: NEG of a BOUND value keeps the bound (the above run gives -S there): the reference itself passes, a value
  far off fails."""
  b = ProgramBuilder("k")
  o, a, c = b.global_buf(dtypes.float64, 1), b.global_buf(dtypes.float64, 2), b.global_buf(dtypes.float64, 1)
  zero = b.const(0, dtypes.int32)
  b.store(o, zero, b.alu(Ops.NEG, b.wmma(b.load(a, zero, count=2), b.load(a, zero, count=2), b.load(c, zero), (1, 1, 2))))
  p = b.build()
  inputs = [np.zeros(1), np.array([3.0, -0.1]), np.array([1.5])]
  ref = prepare(Case(p, inputs)).expected.buffers[0]
  assert _check(p, inputs, ref.copy())[0] is None
  assert _check(p, inputs, ref + 1e-3)[0].rule == "WMMA error bound"


def test_wmma_error_bound_is_gamma_times_the_magnitude_sum():
  """Rule: |d - exact| <= gamma(K + 1) * S + (2K + 1) * tau, gamma(n) = n eps / (1 - n eps); unbounded once (K+1) eps
  reaches 1."""
  eps, tau = 2.0 ** -10, 2.0 ** -24
  assert wmma_error_bound(dtypes.float16, 3, 8.0) == pytest.approx(4 * eps / (1 - 4 * eps) * 8 + 7 * tau, rel=1e-12)
  assert wmma_error_bound(dtypes.bfloat16, 127, 1.0) == np.inf


def test_undefined_and_unknown_elements_are_skipped():
  """Rule: undefined elements (here a shift count out of range) are never compared, nor loose elements of OPAQUE kind."""
  ints = (dtypes.int32, dtypes.int32)
  p = _kernel(lambda b, x, y: b.alu(Ops.SHL, x, y), out=dtypes.int32, ins=ints)
  inputs = [np.zeros(4, np.int32), np.array([1, 1, 1, 1], np.int32), np.array([1, 40, 2, 3], np.int32)]
  got = np.array([2, 12345, 4, 8], np.int32)
  assert _check(p, inputs, got)[0] is None
  got[0] = 3
  assert _check(p, inputs, got)[0].element == 0
  pu = _kernel(lambda b, x, y: b.alu(Ops.MUL, b.alu(Ops.SIN, x), b.alu(Ops.SIN, y)))
  xs = [np.zeros(4, np.float32), np.array([1, 2, 3, 4], np.float32), np.ones(4, np.float32)]
  assert _check(pu, xs, np.full(4, 99, np.float32))[0] is None


def test_which_undefined_programs_run_natively():
  """Rule: undefined values that only flow into data are masked (run): an over-wide shift, a division by zero (deferred
  kinds; refimpl's renderers guard the division, so it does not trap natively); an undefined value that reaches an
  index or a gate is discarded (a division by zero used as an index too)."""
  ints = (dtypes.int32, dtypes.int32)
  shl = _kernel(lambda b, x, y: b.alu(Ops.SHL, x, y), out=dtypes.int32, ins=ints)
  ev = emulate(shl, [np.zeros(4, np.int32), np.ones(4, np.int32), np.full(4, 40, np.int32)], strict=False).events
  assert ev and discard_reason(shl, ev) is None
  div = _kernel(lambda b, x, y: b.alu(Ops.IDIV, x, y), out=dtypes.int32, ins=ints)
  ev = emulate(div, [np.zeros(4, np.int32), np.ones(4, np.int32), np.zeros(4, np.int32)], strict=False).events
  assert ev and discard_reason(div, ev) is None
  b = ProgramBuilder("div_index")
  o, x = b.global_buf(dtypes.int32, 4), b.global_buf(dtypes.int32, 4)
  i = b.gidx(0, 4)
  b.store(o, b.alu(Ops.AND, b.alu(Ops.IDIV, i, b.load(x, i)), b.const(3, dtypes.int32)), i)
  q = b.build()
  ev = emulate(q, [np.zeros(4, np.int32), np.zeros(4, np.int32)], strict=False).events
  why = discard_reason(q, ev)
  assert why is not None and "index" in why and "division by zero" in why
  b = ProgramBuilder("k")
  o, x = b.global_buf(dtypes.int32, 4), b.global_buf(dtypes.int32, 4)
  i = b.gidx(0, 4)
  bad = b.alu(Ops.SHL, b.load(x, i), b.const(40, dtypes.int32))
  with b.when(b.alu(Ops.CMPLT, bad, b.const(3, dtypes.int32))): b.store(o, i, b.load(x, i))
  p = b.build()
  assert control_taint(p, {bad}) and not control_taint(shl, {next(k for k, u in enumerate(shl.uops) if u.op is Ops.SHL)})


def test_each_element_is_compared_by_its_own_level():
  """Rule: the element's level decides its comparison, whatever the buffer's kind: one buffer holding EXP2 results and
  MULACC results is OPAQUE as a whole (TOL joined with SET), yet its TOLERANCE elements are held to the ULP bound and
  its ALLOWED_SET elements to the two members of the set."""
  n = 64
  b = ProgramBuilder("k")
  o, xb, yb = b.global_buf(F32, 2 * n), b.global_buf(F32, n), b.global_buf(F32, n)
  i = b.gidx(0, n)
  x, y = b.load(xb, i), b.load(yb, i)
  b.store(o, i, b.alu(Ops.EXP2, x))
  b.store(o, b.alu(Ops.ADD, i, b.const(n, dtypes.int32)), b.alu(Ops.MULACC, x, y, x))
  p = b.build()
  assert _kind(p) == fc.OPAQUE
  rng = np.random.default_rng(5)
  x, y = rng.uniform(-4, 4, n).astype(np.float32), rng.uniform(-4, 4, n).astype(np.float32)
  inputs = [np.zeros(2 * n, np.float32), x, y]
  e = prepare(Case(p, inputs)).expected
  levels, ref = e.certainty[0], e.buffers[0]
  tol, allowed = np.flatnonzero(levels == Certainty.TOLERANCE), np.flatnonzero(levels == Certainty.ALLOWED_SET)
  assert len(tol) and len(allowed) and tol.max() < n <= allowed.min()
  bound = ulp_bound(Ops.EXP2, F32)
  def away(v, ulps):  # v moved `ulps` representable values up
    for _ in range(ulps): v = np.nextafter(v, np.float32(np.inf))
    return v
  fine = ref.copy()
  fine[tol] = away(ref[tol], bound)
  fine[allowed] = (x * y + x)[allowed - n]  # the unfused member
  assert _check(p, inputs, fine)[0] is None
  too_far = fine.copy()
  too_far[tol[0]] = away(ref[tol[0]], bound + 1)
  m, _ = _check(p, inputs, too_far)
  assert m is not None and m.element == tol[0] and m.rule == f"tolerance {bound} ulp"
  neither = fine.copy()
  neither[allowed[0]] = away(max(ref[allowed[0]], fine[allowed[0]]), 1)
  m, _ = _check(p, inputs, neither)
  assert m is not None and m.element == allowed[0] and m.rule == "allowed set"
