"""The fuzzer's comparison rules (refimpl/fuzz/compare.py): the kind of each buffer, and how loose elements are compared,
so that no finding is a false alarm and real differences are still caught."""
import math

import numpy as np
import pytest

from refimpl.dtype import dtypes
from refimpl.emulator.machine import emulate
from refimpl.fuzz.case import Case, discard_reason, prepare
from refimpl.fuzz.compare import EXACT, NANPAY, SET, TOL, UNKNOWN, WILD, analyze, compare, control_taint, join, variant_program
from refimpl.ir import Ops, ProgramBuilder
from refimpl.spec import ulp_bound

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


@pytest.mark.parametrize("make, level", [
  (lambda b, x, y: b.alu(Ops.ADD, x, y), NANPAY),                            # float arithmetic: only NaN payloads open
  (lambda b, x, y: b.alu(Ops.EXP2, x), TOL),                                 # tolerance op, one deep
  (lambda b, x, y: b.alu(Ops.MULACC, x, y, x), SET),                         # allowed set
  (lambda b, x, y: b.alu(Ops.MAX, x, y), SET),
  (lambda b, x, y: b.alu(Ops.ADD, b.alu(Ops.EXP2, x), y), UNKNOWN),          # computed on a tolerance result
  (lambda b, x, y: b.alu(Ops.NEG, b.alu(Ops.EXP2, x)), TOL),                 # a sign flip keeps the bound
  (lambda b, x, y: b.alu(Ops.NEG, b.alu(Ops.MAX, x, y)), SET),               # ... and the allowed set
  (lambda b, x, y: b.alu(Ops.WHERE, b.alu(Ops.CMPLT, b.alu(Ops.SIN, x), y), x, y), UNKNOWN),  # discontinuous op
  (lambda b, x, y: _select_sum(b, x, y), NANPAY),                            # a compare of NaN-loose values is exact
  (lambda b, x, y: b.alu(Ops.WHERE, b.alu(Ops.CMPLT, x, y), x, y), EXACT),   # moves of loaded values stay exact
])
def test_kind_of_float_results(make, level):
  """Rule: the kind lattice of the module docstring, op by op."""
  assert _kind(_kernel(make)) == level


def test_kind_of_integer_and_bitcast_results():
  """Rule: integer arithmetic is EXACT; a BITCAST of a computed float is UNKNOWN (a NaN's bits are open); a BITCAST of
  a NaN CONST is WILD (the IR leaves its bits open while the emulator reads them as exact)."""
  ints = (dtypes.int32, dtypes.int32)
  assert _kind(_kernel(lambda b, x, y: b.alu(Ops.MUL, x, y), out=dtypes.int32, ins=ints)) == EXACT
  assert _kind(_kernel(lambda b, x, y: b.bitcast(b.alu(Ops.ADD, x, y), dtypes.int32), out=dtypes.int32)) == UNKNOWN
  assert _kind(_kernel(lambda b, x, y: b.bitcast(b.const(math.nan, F32), dtypes.int32), out=dtypes.int32)) == WILD


def test_store_under_a_loose_gate_is_wild():
  """Rule: a store whose gate (or IF, or index) came from a loose value makes the whole buffer WILD: the emulator's
  masks follow data, not control."""
  b = ProgramBuilder("k")
  o, x = b.global_buf(F32, 4), b.global_buf(F32, 4)
  i = b.gidx(0, 4)
  v = b.load(x, i)
  with b.when(b.alu(Ops.CMPLT, b.alu(Ops.LOG2, v), b.const(0.5, F32))): b.store(o, i, v)
  p = b.build()
  assert _kind(p) == WILD


def test_join():
  """Rule: WILD > UNKNOWN > {TOL, SET} > NANPAY > EXACT; TOL with SET is UNKNOWN; TOL keeps the larger bound."""
  assert join((TOL, 2), (TOL, 4)) == (TOL, 4)
  assert join((TOL, 2), (SET, 0)) == (UNKNOWN, 0)
  assert join((NANPAY, 0), (SET, 0)) == (SET, 0)
  assert join((EXACT, 0), (NANPAY, 0)) == (NANPAY, 0)
  assert join((UNKNOWN, 0), (WILD, 0)) == (WILD, 0)


def _check(p, inputs, got_out):
  """(first mismatch, expectation) of a backend that returned got_out in buffer 0 and left the inputs alone."""
  prep = prepare(Case(p, inputs))
  e = prep.expected
  got = [got_out, *inputs[1:]]
  return compare(p, e.buffers, e.undefined, e.loose, e.kinds, e.variant, got)[0], e


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
  """Rule: the variant program unfuses float MULACC and makes MAX(+0, -0) give -0, and changes nothing else."""
  p = _kernel(lambda b, x, y: b.alu(Ops.MAX, x, y))
  vp = variant_program(p)
  xs = [np.zeros(3, np.float32), np.array([0.0, -0.0, 2], np.float32), np.array([-0.0, 0.0, 1], np.float32)]
  pz = _kernel(lambda b, x, y: b.alu(Ops.MAX, x, y), n=3)
  got = emulate(variant_program(pz), xs).buffers[0]
  assert np.signbit(got).tolist() == [True, True, False] and got[2] == 2
  assert vp is not None and variant_program(_kernel(lambda b, x, y: b.alu(Ops.ADD, x, y))) is None


def test_undefined_and_unknown_elements_are_skipped():
  """Rule: undefined elements (here a shift count out of range) are never compared, nor loose elements of UNKNOWN kind."""
  ints = (dtypes.int32, dtypes.int32)
  p = _kernel(lambda b, x, y: b.alu(Ops.SHL, x, y), out=dtypes.int32, ins=ints)
  inputs = [np.zeros(4, np.int32), np.array([1, 1, 1, 1], np.int32), np.array([1, 40, 2, 3], np.int32)]
  got = np.array([2, 12345, 4, 8], np.int32)
  assert _check(p, inputs, got)[0] is None
  got[0] = 3
  assert _check(p, inputs, got)[0].element == 0
  pu = _kernel(lambda b, x, y: b.alu(Ops.ADD, b.alu(Ops.SIN, x), y))
  xs = [np.zeros(4, np.float32), np.array([1, 2, 3, 4], np.float32), np.ones(4, np.float32)]
  assert _check(pu, xs, np.full(4, 99, np.float32))[0] is None


def test_which_undefined_programs_run_natively():
  """Rule: undefined values that only flow into data are masked (run); an undefined division (it traps natively) or an
  undefined value that reaches an index or a gate is discarded."""
  ints = (dtypes.int32, dtypes.int32)
  shl = _kernel(lambda b, x, y: b.alu(Ops.SHL, x, y), out=dtypes.int32, ins=ints)
  ev = emulate(shl, [np.zeros(4, np.int32), np.ones(4, np.int32), np.full(4, 40, np.int32)], strict=False).events
  assert ev and discard_reason(shl, ev) is None
  div = _kernel(lambda b, x, y: b.alu(Ops.IDIV, x, y), out=dtypes.int32, ins=ints)
  ev = emulate(div, [np.zeros(4, np.int32), np.ones(4, np.int32), np.zeros(4, np.int32)], strict=False).events
  assert "division" in discard_reason(div, ev)
  b = ProgramBuilder("k")
  o, x = b.global_buf(dtypes.int32, 4), b.global_buf(dtypes.int32, 4)
  i = b.gidx(0, 4)
  bad = b.alu(Ops.SHL, b.load(x, i), b.const(40, dtypes.int32))
  with b.when(b.alu(Ops.CMPLT, bad, b.const(3, dtypes.int32))): b.store(o, i, b.load(x, i))
  p = b.build()
  assert control_taint(p, {bad}) and not control_taint(shl, {next(k for k, u in enumerate(shl.uops) if u.op is Ops.SHL)})
