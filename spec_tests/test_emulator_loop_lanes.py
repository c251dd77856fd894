"""Loops run as lanes (refimpl/emulator/loops.py): the RANGE rule is sequential, and running a loop's iterations at
once must never show. Each test names the rule its expected value comes from."""
from __future__ import annotations

import pathlib

import numpy as np
import pytest
from generated import both_forms, scaled

from refimpl.dtype import dtypes, to_np
from refimpl.emulator import blocks, folds, loops, settings
from refimpl.emulator.machine import emulate
from refimpl.emulator.plan import Plan
from refimpl.errors import UndefinedBehavior
from refimpl.ir import Ops, ProgramBuilder, program_from_json
from refimpl.testing.programs import emulation_outcome

F32, I32 = dtypes.float32, dtypes.int32


def _sum_loop(n: int, dt=F32):
  """out[0] = in[0] + in[1] + ... + in[n-1], in order, through an accumulator (tinygrad's reduce loop)."""
  b = ProgramBuilder("sum")
  out, x = b.global_buf(dt, 1), b.global_buf(dt, n)
  acc = b.acc(b.const(0, dt))
  with b.loop(n) as r: b.assign(acc, b.alu(Ops.ADD, acc, b.load(x, r)))
  b.store(out, b.const(0, I32), acc)
  return b.build()


def test_range_rule_in_order_sum_under_lanes():
  """RANGE runs iterations in order and ADD rounds each step to nearest even: 2^24 + 1 is a tie and rounds back to 2^24,
  so fifteen 1.0s added one at a time to 2^24 leave it 2^24 (a pairwise sum would give 2^24 + 16)."""
  p = _sum_loop(16)
  assert Plan.of(p, ()).lane_loops, "the reduce loop should run as lanes"
  x = np.array([2.0**24] + [1.0] * 15, np.float32)
  got = emulate(p, [np.zeros(1, np.float32), x]).buffers[0]
  assert got[0] == np.float32(2.0**24)


def test_range_rule_iterations_that_communicate_stay_sequential():
  """RANGE: iteration r sees what iteration r-1 stored. out[r+1] = out[r] * 2 from out[0] = 1 gives out[r] = 2^r."""
  b = ProgramBuilder("doubling")
  out = b.global_buf(I32, 9)
  with b.loop(8) as r:
    nxt = b.alu(Ops.ADD, r, b.const(1, I32))
    b.store(out, nxt, b.alu(Ops.MUL, b.load(out, r), b.const(2, I32)))
  p = b.build()
  assert not Plan.of(p, ()).lane_loops
  got = emulate(p, [np.array([1] + [0] * 8, np.int32)]).buffers[0]
  np.testing.assert_array_equal(got, 2 ** np.arange(9))


def test_undefined_behavior_rule_first_in_sequential_order():
  """Strict mode reports the first undefined op the sequential rule reaches: iteration 2's store of a shift by 40 (SHL's
  count outside [0, 32): a deferred kind, undefined where the value is stored) comes before iteration 5's index that
  a division by zero made undefined (DIVISOR_ZERO, deferred: undefined where the quotient is used as an index),
  although the division is the earlier uop."""
  b = ProgramBuilder("ub_order")
  out, where, d, s = b.global_buf(I32, 8), b.global_buf(I32, 8), b.global_buf(I32, 8), b.global_buf(I32, 8)
  with b.loop(8) as r:
    q = b.alu(Ops.IDIV, b.const(7, I32), b.load(d, r))
    b.store(out, r, b.alu(Ops.SHL, b.const(7, I32), b.load(s, r)))
    b.store(where, r, b.load(d, b.alu(Ops.AND, q, b.const(7, I32))))
  p = b.build()
  assert Plan.of(p, ()).lane_loops
  divisors, shifts = np.ones(8, np.int32), np.zeros(8, np.int32)
  divisors[5], shifts[2] = 0, 40
  inputs = [np.zeros(8, np.int32), np.zeros(8, np.int32), divisors, shifts]
  with pytest.raises(UndefinedBehavior) as e: emulate(p, inputs)
  assert (e.value.op, e.value.use, e.value.count) == (Ops.STORE, "stored", 1)
  assert e.value.origin.op is Ops.SHL and e.value.origin.operands == (7, 40)
  events = emulate(p, inputs, strict=False).events  # permissive: in the order the sequential rule meets them
  assert [(ev.use, ev.origin.op) for ev in events] == [("stored", Ops.SHL), ("index", Ops.IDIV), ("stored", Ops.IDIV)]


@pytest.mark.parametrize("inner", ["parallel", "scan"])
def test_undefined_behavior_rule_first_in_sequential_order_of_nested_loops(inner, monkeypatch):
  """Strict mode reports the first undefined op in the sequential order of nested loops, outer counter first: with
  a[4i + j] / d[4i + j] and d zero at (i, j) = (1, 3) and (2, 0), the division at (1, 3) comes first (IDIV by zero:
  DIVISOR_ZERO, deferred: reported where the quotient is stored, with the division as its origin), although (2, 0) has
  the lower inner counter. Inner loop: each quotient stored (parallel, lane-major lanes) or summed into out[i] (a scan
  of computed terms, iteration-major lanes)."""
  b = ProgramBuilder("nested_ub_order")
  out, a, d = b.global_buf(I32, 16), b.global_buf(I32, 16), b.global_buf(I32, 16)
  with b.loop(4) as i:
    acc = b.acc(b.const(0, I32)) if inner == "scan" else None
    with b.loop(4) as j:
      k = b.alu(Ops.ADD, b.alu(Ops.MUL, i, b.const(4, I32)), j)
      q = b.alu(Ops.IDIV, b.load(a, k), b.load(d, k))
      if acc is None: b.store(out, k, q)
      else: b.assign(acc, b.alu(Ops.ADD, acc, q))
    if acc is not None: b.store(out, i, acc)
  p = b.build()
  loops = Plan.of(p, ()).lane_loops
  assert len(loops) == 2, "both loops should run as lanes"
  assert [loop.iteration_major for _, loop in sorted(loops.items())] == [False, inner == "scan"]
  divisors = np.ones(16, np.int32)
  divisors[[7, 8]] = 0
  for as_lanes in (True, False):
    monkeypatch.setattr(settings, "LOOPS_AS_LANES", as_lanes)
    with pytest.raises(UndefinedBehavior) as e: emulate(p, [np.zeros(16, np.int32), np.arange(16, dtype=np.int32), divisors])
    assert (e.value.op, e.value.origin.op, e.value.origin.operands) == (Ops.STORE, Ops.IDIV, (7, 0)), as_lanes


def _nested_sum(outer: int, inner: int, threads: int = 1, dt=F32, term: str = "load", short: int = 0):
  """out[t] = the sum over i < outer, then j < inner, of x[t, i, j] (term "load"), of x[t, i, j] * y[i, j] ("product")
  or of the quotient a[t, i, j] / d[t, i, j] ("idiv"), in that order, through one accumulator declared before both
  loops (tinygrad's reduction over a batch axis and a row axis). x is `short` elements shorter than its indices reach."""
  b = ProgramBuilder("nested_sum")
  size = threads * outer * inner
  out, x, y = b.global_buf(dt, threads), b.global_buf(dt, size - short), b.global_buf(dt, outer * inner)
  t = b.special("gidx0", threads)
  acc = b.acc(b.const(0, dt))
  with b.loop(outer) as i:
    row = b.alu(Ops.ADD, b.alu(Ops.MUL, t, b.const(outer * inner, I32)), b.alu(Ops.MUL, i, b.const(inner, I32)))
    with b.loop(inner) as j:
      k = b.alu(Ops.ADD, row, j)
      v = b.load(x, k)
      if term == "product": v = b.alu(Ops.MUL, v, b.load(y, b.alu(Ops.ADD, b.alu(Ops.MUL, i, b.const(inner, I32)), j)))
      if term == "idiv": v = b.alu(Ops.IDIV, v, b.load(y, b.alu(Ops.ADD, b.alu(Ops.MUL, i, b.const(inner, I32)), j)))
      b.assign(acc, b.alu(Ops.ADD, acc, v))
  b.store(out, t, acc)
  return b.build()


def test_range_rule_nested_reduction_folds_in_sequential_order():
  """RANGE runs the outer loop's iterations in order and, in each, the inner loop's: a reduction over both, one
  accumulator, runs as one fold over both loops' iterations (LaneLoop.nested) and keeps that order. ADD rounds each
  step to nearest even, so 2^24 then thirty-one 1.0s stay 2^24 (tie to even at every step), and on random values with
  NaNs, infinities and signed zeros the outputs, levels and bits are the sequential rule's."""
  p = _nested_sum(4, 8)
  (_, outer), (inner, last) = sorted(Plan.of(p, ()).lane_loops.items())
  assert outer.nested == inner and last.nested is None, "both loops should run as one fold"
  x = np.array([2.0**24] + [1.0] * 31, np.float32)
  assert emulate(p, [np.zeros(1, np.float32), x, np.zeros(32, np.float32)]).buffers[0][0] == np.float32(2.0**24)


@pytest.mark.parametrize("threads", [8, 512], ids=["narrow", "wide"])
@pytest.mark.parametrize("term", ["load", "product"])
def test_range_rule_nested_reduction_lanes_match_the_rule(threads, term, monkeypatch):
  """The nested fold (narrow lanes: one accumulate along each lane's chain; wide: one ufunc call per step) gives the
  sequential rule's outcome exactly, on values with NaNs, infinities and signed zeros, also when the outer loop runs in
  chunks of a few iterations (LANE_MEMORY)."""
  p = _nested_sum(6, 5, threads, term=term)
  rng = np.random.default_rng(threads)
  x = rng.standard_normal(threads * 30).astype(np.float32) * np.float32(1e30)
  x[rng.random(x.size) < 0.02], x[rng.random(x.size) < 0.02], x[rng.random(x.size) < 0.05] = np.nan, np.inf, -0.0
  inputs = [np.zeros(threads, np.float32), x, rng.standard_normal(30).astype(np.float32)]
  want = None
  for as_lanes, memory in ((False, settings.LANE_MEMORY), (True, settings.LANE_MEMORY), (True, None)):
    monkeypatch.setattr(settings, "LOOPS_AS_LANES", as_lanes)
    monkeypatch.setattr(settings, "LANE_MEMORY", memory or 3 * 5 * threads * Plan.of(p, ()).lane_bytes)
    got = emulation_outcome(p, inputs, (), False)
    assert want is None or got == want, (as_lanes, memory)
    want = got


def test_undefined_behavior_rule_first_in_sequential_order_of_a_nested_reduction(monkeypatch):
  """Strict mode reports the first undefined op in the sequential order of a reduction over two loops, outer counter
  first: with d zero at (i, j) = (1, 3) and (2, 0), the quotient a / d (IDIV by zero: DIVISOR_ZERO, deferred) makes the
  sum undefined and is reported where it is stored, the division at (1, 3) its origin; permissive mode gives the same
  events, outputs and levels with or without lanes."""
  p = _nested_sum(4, 4, dt=I32, term="idiv")
  assert any(loop.nested is not None for loop in Plan.of(p, ()).lane_loops.values())
  divisors = np.ones(16, np.int32)
  divisors[[7, 8]] = 0
  inputs = [np.zeros(1, np.int32), np.arange(16, dtype=np.int32), divisors]
  outcomes = []
  for as_lanes in (True, False):
    monkeypatch.setattr(settings, "LOOPS_AS_LANES", as_lanes)
    with pytest.raises(UndefinedBehavior) as e: emulate(p, inputs)
    assert (e.value.op, e.value.origin.op, e.value.origin.operands) == (Ops.STORE, Ops.IDIV, (7, 0)), as_lanes
    outcomes.append((emulation_outcome(p, inputs, (), True), emulation_outcome(p, inputs, (), False)))
  assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("strict", [True, False], ids=["strict", "permissive"])
def test_undefined_behavior_rule_out_of_bounds_in_a_nested_reduction(strict, monkeypatch):
  """An out-of-bounds LOAD in the inner loop of a reduction over two loops (x three elements short, so the loads at
  (i, j) = (3, 1), (3, 2), (3, 3) are out of bounds) is reported as the sequential rule reports it: strict mode the first
  in its order, permissive mode every event, the outputs and their levels, with or without lanes."""
  p = _nested_sum(4, 4, short=3)
  assert any(loop.nested is not None for loop in Plan.of(p, ()).lane_loops.values())
  inputs = [np.zeros(1, np.float32), np.arange(13, dtype=np.float32), np.zeros(16, np.float32)]
  outcomes = []
  for as_lanes in (True, False):
    monkeypatch.setattr(settings, "LOOPS_AS_LANES", as_lanes)
    outcomes.append(emulation_outcome(p, inputs, (), strict))
  assert outcomes[0] == outcomes[1]
  if strict:
    with pytest.raises(UndefinedBehavior) as e: emulate(p, inputs)
    assert e.value.op is Ops.LOAD


def test_looseness_rule_nan_in_a_max_chain():
  """MAX of NaN is NaN, and a NaN result is loose (its payload is unspecified); looseness follows the chain to the end."""
  b = ProgramBuilder("max_chain")
  out, x = b.global_buf(F32, 1), b.global_buf(F32, 8)
  acc = b.acc(b.const(float("-inf"), F32))
  with b.loop(8) as r: b.assign(acc, b.alu(Ops.MAX, b.load(x, r), acc))
  b.store(out, b.const(0, I32), acc)
  p = b.build()
  x = np.arange(8, dtype=np.float32)
  x[3] = np.nan
  em = emulate(p, [np.zeros(1, np.float32), x], strict=False)
  assert np.isnan(em.buffers[0][0]) and em.loose[0][0]


def test_lane_memory_bound_chunks_a_loop(monkeypatch):
  """A loop whose lanes do not fit in LANE_MEMORY runs in chunks of iterations, in order: the in-order sum rule above
  still holds with chunks of a few iterations."""
  p = _sum_loop(64)
  monkeypatch.setattr(settings, "LANE_MEMORY", 5 * Plan.of(p, ()).lane_bytes)
  x = np.array([2.0**24] + [1.0] * 63, np.float32)
  assert emulate(p, [np.zeros(1, np.float32), x]).buffers[0][0] == np.float32(2.0**24)




def _lanes_match_the_rule(seed: int, programs, monkeypatch) -> int:
  """Runs each program with loops as lanes and by the sequential rule, strict and permissive, and asserts the same
  outcome (emulation_outcome); returns how many runs compared (programs with a loop that runs as lanes)."""
  checked = 0
  for index, p, inputs, vals in programs:
    if not Plan.of(p, tuple(vals)).lane_loops: continue
    for strict in (True, False):
      monkeypatch.setattr(settings, "LOOPS_AS_LANES", True)
      lanes = emulation_outcome(p, inputs, vals, strict)
      monkeypatch.setattr(settings, "LOOPS_AS_LANES", False)
      assert lanes == emulation_outcome(p, inputs, vals, strict), f"seed {seed} program {index} strict={strict}"
      checked += 1
  return checked

FLUSHED = [(1, 128), (1, 178), (1, 1359), (2, 216), (2, 240)]
"""(seed, program index) of generated programs the flush run (docs/architecture.md, "Flushing out") found where loops
as lanes named another origin than the sequential rule for a use (two deferred ops, one of a later iteration; 1359:
nested loops as lanes, the inner one in chunks)."""

@pytest.mark.parametrize("seed,index", FLUSHED)
def test_range_rule_lanes_name_the_origin_the_rule_names(seed, index, monkeypatch):
  """Deferred undefined values in loops run as lanes: a use names the deferred ops whose value is undefined on the lane
  now (Machine.undefined_now), else those that made the thread's values undefined before it in the sequential order
  (origins.Origin.before), as the sequential rule does, never one of a later iteration."""
  assert _lanes_match_the_rule(seed, both_forms(seed, 1, start=index), monkeypatch)

@pytest.mark.generated
@pytest.mark.parametrize("seed", [1, 2])
def test_range_rule_lanes_match_the_rule_on_generated_loops(seed, monkeypatch):
  """Fuzzer programs (grid form and lowered to loops, undefined behaviour left in): running loops as lanes gives the
  outputs, masks, events and strict-mode report of the sequential rule (LOOPS_AS_LANES=False) exactly."""
  assert _lanes_match_the_rule(seed, both_forms(seed, scaled(40)), monkeypatch) >= 20


def test_range_rule_max_written_as_a_select_runs_as_a_scan():
  """tinygrad's int max reduction, acc = WHERE(CMPLT(acc, x), x, acc): by the CMPLT and WHERE rules each step keeps the
  larger of acc and x, so from INT_MIN the loop leaves the largest element, here -3 (all negative), and at once."""
  n = 64
  b = ProgramBuilder("imax")
  out, x = b.global_buf(I32, 1), b.global_buf(I32, n)
  acc = b.acc(b.const(-2**31, I32))
  with b.loop(n) as r:
    v = b.load(x, r)
    b.assign(acc, b.alu(Ops.WHERE, b.alu(Ops.CMPLT, acc, v), v, acc))
  b.store(out, b.const(0, I32), acc)
  p = b.build()
  (loop,) = Plan.of(p, ()).lane_loops.values()
  assert [scan.op for scan in loop.scans] == [Ops.WHERE]
  xs = -np.arange(3, 3 + n, dtype=np.int32)[::-1].copy()
  np.random.default_rng(0).shuffle(xs)
  assert emulate(p, [np.zeros(1, np.int32), xs]).buffers[0][0] == -3


def _select_max_loop(dt, n: int, start):
  b = ProgramBuilder("smax")
  out, x = b.global_buf(dt, 1), b.global_buf(dt, n)
  acc = b.acc(b.const(start, dt))
  with b.loop(n) as r:
    v = b.load(x, r)
    b.assign(acc, b.alu(Ops.WHERE, b.alu(Ops.CMPLT, acc, v), v, acc))
  b.store(out, b.const(0, I32), acc)
  return b.build()


def test_range_rule_float_select_chain_keeps_cmplt_and_where_semantics():
  """A float select chain is CMPLT then WHERE per step, not MAX: CMPLT(-0, +0) and CMPLT(x, NaN) are false, so from -inf
  over [-0, +0, NaN, -0, NaN] the accumulator becomes -0 and stays -0 (bit for bit), where MAX's rule would give NaN."""
  xs = np.array([-0.0, 0.0, np.nan, -0.0, np.nan], np.float32)
  p = _select_max_loop(F32, len(xs), float("-inf"))
  (loop,) = Plan.of(p, ()).lane_loops.values()
  assert [scan.op for scan in loop.scans] == [Ops.WHERE]
  got = emulate(p, [np.zeros(1, np.float32), xs]).buffers[0]
  assert got.view(np.uint32)[0] == np.float32(-0.0).view(np.uint32)



def _select_chains(dt, threads: int, n: int, acc_first: bool, spelled: str = "select"):
  """Thread t folds x[t*n .. t*n+n-1] by a max chain from the dtype's smallest value (dtypes.min: -inf for floats),
  spelled as a select, acc = WHERE(CMPLT(acc, v), v, acc), or as MAX, acc = MAX(acc, v) (spelled="max"); with the
  operands the other way round where not acc_first: WHERE(CMPLT(v, acc), acc, v), MAX(v, acc)."""
  b = ProgramBuilder(f"{spelled}_chains")
  out, x = b.global_buf(dt, threads), b.global_buf(dt, threads * n)
  t = b.gidx(0, threads)
  acc = b.acc(b.const(dtypes.min(dt), dt))
  with b.loop(n) as r:
    v = b.load(x, b.alu(Ops.ADD, b.alu(Ops.MUL, t, b.const(n, I32)), r))
    p, q = (acc, v) if acc_first else (v, acc)
    b.assign(acc, b.alu(Ops.MAX, p, q) if spelled == "max" else b.alu(Ops.WHERE, b.alu(Ops.CMPLT, p, q), q, p))
  b.store(out, t, acc)
  return b.build()


@pytest.mark.parametrize("dt", [F32, dtypes.float64, I32], ids=lambda d: d.name)
@pytest.mark.parametrize("threads", [8, 512], ids=["narrow", "wide"])
@pytest.mark.parametrize("acc_first", [True, False], ids=["acc_first", "acc_second"])
@pytest.mark.parametrize("specials", [False, True], ids=["ordinary", "specials"])
def test_range_rule_select_chain_lanes_match_the_rule(dt, threads, acc_first, specials, monkeypatch):
  """A select chain (tinygrad's MAX reduction) run as lanes is CMPLT then WHERE per step, in order: where numpy's
  `maximum` is the same chain (no NaN, no zeros of opposite signs meeting) the fold may take it, elsewhere alu's own
  CMPLT and WHERE; either way the buffers and levels are the sequential rule's, bit for bit."""
  p = _select_chains(dt, threads, 32, acc_first)
  rng = np.random.default_rng(3)
  x = _specials(dt, threads * 32, rng) if specials else rng.permutation(threads * 32).astype(to_np(dt))
  inputs = [np.zeros(threads, to_np(dt)), x]
  monkeypatch.setattr(settings, "LOOPS_AS_LANES", True)
  assert Plan.of(p, ()).lane_loops
  lanes = emulation_outcome(p, inputs, (), strict=True)
  monkeypatch.setattr(settings, "LOOPS_AS_LANES", False)
  assert lanes == emulation_outcome(p, inputs, (), strict=True)


MAX_CHAIN_CASES = {  # case -> (whether its chains end at the maximum with every step exact: select chains, MAX chains)
  "one_zero_sign": (True, True), "positive": (True, False), "at_most_zero": (False, False), "nan": (False, False)}

@pytest.mark.parametrize("dt", [dtypes.float16, F32, dtypes.float64], ids=lambda d: d.name)
@pytest.mark.parametrize("acc_first", [True, False], ids=["acc_first", "acc_second"])
@pytest.mark.parametrize("chain", ["select", "max"])
@pytest.mark.parametrize("case", list(MAX_CHAIN_CASES))
def test_range_rule_float_max_chain_ends_at_its_maximum_where_every_step_is_exact(dt, acc_first, chain, case, monkeypatch):
  """A float select chain (WHERE(CMPLT(p, q), q, p)) and a chain of MAX keep the larger of two values at each step, so
  they end at the largest value. Where no operand is NaN and, for the select chain, that value is not zero (the select
  keeps whichever zero the order gives) or, for MAX, the operands' zeros have one sign (MAX of +0 and -0 is the allowed
  set), every step is exact and the result is the maximum's one bit pattern, which the fold takes at once
  (folds._max_chain); elsewhere the fold takes the chain's steps. Either way the buffers, levels and report are the
  sequential rule's, bit for bit, reference values of loose steps included (MAX's +0 of +0 and -0): here among zeros,
  infinities and subnormals (`case`: zeros of one sign and a positive value per thread; zeros of both signs and a
  positive value; no positive value; a NaN)."""
  threads, n = 24, 16
  tiny = float(np.finfo(to_np(dt)).smallest_subnormal)
  zero = 0.0 if case == "one_zero_sign" else -0.0
  pool = np.array([zero, 0.0, zero, 0.0, -1.5, -3.0, -np.inf, -tiny, -tiny], to_np(dt))
  x = np.random.default_rng(7).choice(pool, threads * n)
  t = np.arange(threads)
  if case in ("one_zero_sign", "positive"): x[t * n + t * 5 % n] = np.array([2.0, np.inf, tiny], to_np(dt))[t % 3]  # any step
  if case == "nan": x[[5, 40, 41]] = np.nan
  took: list[bool] = []
  max_chain = folds._max_chain
  def recorded(op, acc, terms):
    top = max_chain(op, acc, terms)
    took.append(top is not None)
    return top
  monkeypatch.setattr(folds, "_max_chain", recorded)
  p = _select_chains(dt, threads, n, acc_first, spelled=chain)
  inputs = [np.zeros(threads, to_np(dt)), x]
  monkeypatch.setattr(settings, "LOOPS_AS_LANES", True)
  assert Plan.of(p, ()).lane_loops
  lanes = emulation_outcome(p, inputs, (), strict=True)
  assert took == [MAX_CHAIN_CASES[case][chain == "max"]]
  monkeypatch.setattr(settings, "LOOPS_AS_LANES", False)
  assert lanes == emulation_outcome(p, inputs, (), strict=True)


@pytest.mark.parametrize("dt", [dtypes.uint8, dtypes.int8, dtypes.uint32, dtypes.int64], ids=lambda d: d.name)
@pytest.mark.parametrize("acc_first", [True, False], ids=["acc_first", "acc_second"])
def test_range_rule_int_select_chain_folds_as_max(dt, acc_first, monkeypatch):
  """On ints a select chain's step, WHERE(CMPLT(p, q), q, p), keeps the larger of p and q whichever comes first
  (CMPLT's order is the integers'), so the fold may take MAX's ufunc for it (folds.chain_ufunc): each thread's
  result is the largest of its values and the dtype's smallest (the chain's start), and every buffer is the
  sequential rule's, over the dtype's whole range (both extremes, unsigned values above the signed range)."""
  threads, n = 16, 32
  info = np.iinfo(to_np(dt))
  rng = np.random.default_rng(5)
  x = rng.integers(info.min, info.max, threads * n, dtype=to_np(dt), endpoint=True)
  x[[3, 40, 77]] = [info.min, info.max, info.max // 2 + 1]
  p = _select_chains(dt, threads, n, acc_first)
  assert folds.chain_ufunc(Ops.WHERE, dt) is np.maximum
  inputs = [np.zeros(threads, to_np(dt)), x]
  monkeypatch.setattr(settings, "LOOPS_AS_LANES", True)
  assert Plan.of(p, ()).lane_loops
  lanes = emulation_outcome(p, inputs, (), strict=True)
  assert np.array_equal(emulate(p, inputs).buffers[0], x.reshape(threads, n).max(axis=1))
  monkeypatch.setattr(settings, "LOOPS_AS_LANES", False)
  assert lanes == emulation_outcome(p, inputs, (), strict=True)


def test_range_rule_reduction_inside_an_if_changes_only_the_lanes_that_run():
  """tinygrad's grouped reduction: only lane 0 (IF lidx0 < 1) runs the loop over the shared values; ASSIGN changes a
  register only on the lanes that run, so thread t's accumulator, started at t, is 0 + x[0] + ... + x[15] on lane 0
  (in order; here exact) and stays t on every other lane."""
  b = ProgramBuilder("group_sum")
  out, x = b.global_buf(F32, 16), b.global_buf(F32, 16)
  t = b.lidx(0, 16)
  acc = b.acc(b.cast(t, F32))
  with b.when(b.alu(Ops.CMPLT, t, b.const(1, I32))), b.loop(16) as r:
    b.assign(acc, b.alu(Ops.ADD, acc, b.load(x, r)))
  b.store(out, t, acc)
  p = b.build()
  assert Plan.of(p, ()).lane_loops, "the loop should run as lanes"
  xs = np.arange(1, 17, dtype=np.float32)
  got = emulate(p, [np.zeros(16, np.float32), xs]).buffers[0]
  np.testing.assert_array_equal(got, np.array([xs.sum()] + list(range(1, 16)), np.float32))


# *** matmul-shaped scans: several accumulators per thread, vector loads through affine indices, MUL/ADD chains ***

def _matmul_tile(dt, threads: int, k: int, acc_first: bool = True, loose: str = "none", short: int = 0,
                 swapped: tuple[int, ...] = ()):
  """tinygrad's upcast matmul: thread t keeps a 2x2 tile of accumulators; each iteration loads a 2-wide row of a and a
  2-wide column pair of b through affine indices (vector loads, GEPs) and adds the four products, acc on the side
  `acc_first` says, to the accumulators (a chain of two steps each per iteration). loose: "operand" takes the square
  root of a's elements first (NaN, so NAN_PAYLOAD, on negative ones: the products' operands have levels), "acc" starts
  the first accumulator at NaN (the accumulator has levels). short: b's buffer has that many elements fewer than its
  loads reach. swapped: the accumulators (0 .. 3, row-major) whose chain adds the second product first (as tinygrad
  orders one row or column of a tile where both operands are vectors along the reduction)."""
  b = ProgramBuilder("matmul_tile")
  out, a, bm = b.global_buf(dt, 4 * threads), b.global_buf(dt, 2 * k * threads), b.global_buf(dt, 2 * k * threads - short)
  t = b.gidx(0, threads)
  accs = [b.acc(b.const(float("nan") if loose == "acc" and n == 0 else 0, dt)) for n in range(4)]
  with b.loop(k // 2) as r:
    base = b.alu(Ops.ADD, b.alu(Ops.MUL, t, b.const(2 * k, I32)), b.alu(Ops.MUL, r, b.const(4, I32)))
    rows = [b.load(a, b.alu(Ops.ADD, base, b.const(2 * j, I32)), count=2) for j in range(2)]
    cols = [b.load(bm, b.alu(Ops.ADD, base, b.const(2 * j, I32)), count=2) for j in range(2)]
    for n, acc in enumerate(accs):
      chain = acc
      for s in ((1, 0) if n in swapped else (0, 1)):
        x = b.gep(rows[s], n // 2)
        term = b.alu(Ops.MUL, b.alu(Ops.SQRT, x) if loose == "operand" else x, b.gep(cols[s], n % 2))
        chain = b.alu(Ops.ADD, chain, term) if acc_first else b.alu(Ops.ADD, term, chain)
      b.assign(acc, chain)
  for n, acc in enumerate(accs): b.store(out, b.alu(Ops.ADD, b.alu(Ops.MUL, t, b.const(4, I32)), b.const(n, I32)), acc)
  return b.build()


def _specials(dt, size: int, rng) -> np.ndarray:
  """Values whose chains round, overflow and meet NaN (of three payloads: which one an op keeps shows the order of its
  operands), inf and signed zeros (ints: values that wrap)."""
  if dtypes.is_int(dt): return rng.integers(-(2**31), 2**31, size).astype(np.int32)
  x = rng.standard_normal(size).astype(to_np(dt)) * to_np(dt).type(2.0**20)
  picks = rng.integers(0, size, 16)
  x[picks] = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 3e38, -3e38, 1e-40, np.nan, 1.0, 2.0**24, 1.0, -np.nan, -np.nan,
                       np.nan, np.nan], x.dtype)
  bits = x.view(f"u{x.itemsize}")
  bits[picks[-2:]] |= 5  # NaNs with a payload of their own
  return x


FLOAT_LOOSENESS = [(dt, loose) for dt in (F32, dtypes.float64) for loose in ("none", "operand", "acc")]

@pytest.mark.parametrize("dt, loose", [*FLOAT_LOOSENESS, (I32, "none")], ids=lambda x: getattr(x, "name", x))
@pytest.mark.parametrize("threads", [8, 512], ids=["narrow", "wide"])
@pytest.mark.parametrize("acc_first", [True, False], ids=["acc_first", "acc_second"])
def test_range_rule_lanes_match_the_rule_on_matmul_scans(dt, loose, threads, acc_first, monkeypatch):
  """RANGE runs iterations in order and each ADD / MUL is alu's rule: a matmul's scans (several accumulators per thread,
  vector loads, GEPs, the accumulator on either side) run as lanes give the sequential rule's buffers and certainty
  levels bit for bit (every NaN one value), on few threads and on many, through NaN, infinities, signed zeros,
  overflow and int wrap-around, whether the fold makes the products itself (exact operands; on many threads the four
  accumulators as one tile) or they have levels (loose operands or accumulator)."""
  p = _matmul_tile(dt, threads, 32, acc_first, loose)
  (loop,) = Plan.of(p, ()).lane_loops.values()
  assert all(step.product for scan in loop.scans for step in scan.steps), "the fold should make the products"
  assert loop.outer is not None and len(loop.outer.scans) == 4, "the four accumulators should fold as one tile"
  assert (loop.outer.memory is not None) == (loose != "operand"), "the tile's operands are elements of its loads"
  rng = np.random.default_rng(threads)
  inputs = [np.zeros(4 * threads, to_np(dt)), _specials(dt, 64 * threads, rng), _specials(dt, 64 * threads, rng)]
  monkeypatch.setattr(settings, "LOOPS_AS_LANES", True)
  lanes = emulation_outcome(p, inputs, (), strict=True)
  monkeypatch.setattr(settings, "LOOPS_AS_LANES", False)
  assert lanes == emulation_outcome(p, inputs, (), strict=True)



def _independent_chains(dt, threads: int, trips: int, acc_first: bool, plain: bool):
  """Per thread t, r < trips: acc_k += a[t, r, k] * b[t, r, k] for k < 4 (each chain its own operands: no tile),
  acc_4 += a[t, r, 4] and acc_5 += b[t, r, 5] (`plain`; else products like the others), acc_6 *= a[t, r, 6];
  out[t, k] = acc_k."""
  b = ProgramBuilder("chains")
  out, x, y = b.global_buf(dt, 7 * threads), b.global_buf(dt, 7 * trips * threads), b.global_buf(dt, 7 * trips * threads)
  t = b.special("gidx0", threads)
  accs = [b.acc(b.const(1 if k == 6 else 0, dt)) for k in range(7)]
  with b.loop(trips) as r:
    base = b.alu(Ops.MUL, b.alu(Ops.ADD, b.alu(Ops.MUL, t, b.const(trips, I32)), r), b.const(7, I32))
    at = [b.alu(Ops.ADD, base, b.const(k, I32)) for k in range(7)]
    terms = [b.alu(Ops.MUL, b.load(x, at[k]), b.load(y, at[k])) for k in range(4 if plain else 6)]
    terms += [b.load(x, at[4]), b.load(y, at[5]), b.load(x, at[6])] if plain else [b.load(x, at[6])]
    for k, (acc, term) in enumerate(zip(accs, terms)):
      op = Ops.MUL if k == 6 else Ops.ADD
      b.assign(acc, b.alu(op, acc, term) if acc_first else b.alu(op, term, acc))
  for k, acc in enumerate(accs): b.store(out, b.alu(Ops.ADD, b.alu(Ops.MUL, t, b.const(7, I32)), b.const(k, I32)), acc)
  return b.build()

@pytest.mark.parametrize("dt", [F32, dtypes.float64, I32], ids=lambda x: x.name)
@pytest.mark.parametrize("threads", [8, 512], ids=["narrow", "wide"])
@pytest.mark.parametrize("acc_first", [True, False], ids=["acc_first", "acc_second"])
@pytest.mark.parametrize("plain", [True, False], ids=["plain_terms", "products"])
def test_range_rule_independent_chains_folded_side_by_side_are_each_chains_rule(dt, threads, acc_first, plain,
                                                                                 monkeypatch):
  """RANGE runs iterations in order and each step is alu's rule, chain by chain: accumulators that make no tile but
  share an op, a dtype and a number of steps (tinygrad's upcast reductions) fold side by side as one (blocks.
  _fold_together: the six ADD chains, of products or some of plain terms; the MUL chain alone), and give the
  sequential rule's buffers and levels bit for bit, through NaN payloads, infinities, signed zeros, overflow and
  int wrap-around."""
  p = _independent_chains(dt, threads, 24, acc_first, plain)
  (loop,) = Plan.of(p, ()).lane_loops.values()
  assert loop.outer is None and len(loop.scans) == 7
  together: list[set[int]] = []
  spy = blocks._fold_together
  monkeypatch.setattr(blocks, "_fold_together", lambda *args: together.append(spy(*args)) or together[-1])
  rng = np.random.default_rng(threads)
  inputs = [np.zeros(7 * threads, to_np(dt)), _specials(dt, 7 * 24 * threads, rng), _specials(dt, 7 * 24 * threads, rng)]
  monkeypatch.setattr(settings, "LOOPS_AS_LANES", True)
  lanes = emulation_outcome(p, inputs, (), strict=True)
  assert together and together[0] == {0, 1, 2, 3, 4, 5}, "the six ADD chains should fold side by side"
  monkeypatch.setattr(settings, "LOOPS_AS_LANES", False)
  assert lanes == emulation_outcome(p, inputs, (), strict=True)

@pytest.mark.parametrize("swapped, parts", [((0, 1), 2), ((1, 3), 2), ((0, 3), None)], ids=["a_row", "a_column", "diagonal"])
@pytest.mark.parametrize("loose", ["none", "operand"])
@pytest.mark.parametrize("threads", [8, 512], ids=["narrow", "wide"])
def test_range_rule_tile_whose_chains_order_their_steps_apart_folds_as_the_rule(swapped, parts, loose, threads, monkeypatch):
  """RANGE and each chain in its own program order: where some accumulators of a tile add an iteration's products in
  another order (tinygrad's transformer matmuls: one row of the tile adds its second product first), the tile still
  folds at once, each rectangle of one order (a row, a column) with the steps in its order; orders that no cut into
  rectangles separates (a diagonal) fold one chain at a time. Either way the buffers and levels are the sequential
  rule's, bit for bit."""
  p = _matmul_tile(F32, threads, 32, loose=loose, swapped=swapped)
  (loop,) = Plan.of(p, ()).lane_loops.values()
  if parts is None: assert loop.outer is None
  else: assert loop.outer is not None and len(loop.outer.parts) == parts
  rng = np.random.default_rng(threads)
  inputs = [np.zeros(4 * threads, np.float32), _specials(F32, 64 * threads, rng), _specials(F32, 64 * threads, rng)]
  monkeypatch.setattr(settings, "LOOPS_AS_LANES", True)
  lanes = emulation_outcome(p, inputs, (), strict=True)
  monkeypatch.setattr(settings, "LOOPS_AS_LANES", False)
  assert lanes == emulation_outcome(p, inputs, (), strict=True)


@pytest.mark.parametrize("parts", [None, (loops.TilePart(0, 1, 0, 3, (1, 0)), loops.TilePart(1, 2, 0, 3, (0, 1)))],
                         ids=["one_order", "two_orders"])
def test_range_rule_fold_outer_is_each_accumulators_chain(parts):
  """fold_outer's rule, the chain of each accumulator in its own order: accumulator (r, c) adds mul(x[it, r], y[it, c])
  of each step, in the order its part gives, iteration by iteration, each MUL and ADD rounded to float32 (checked one
  scalar step at a time). Here y strides through memory (a transposed buffer), the layout fold_outer copies once."""
  rng = np.random.default_rng(5)
  n, rows, cols, lanes = 6, 2, 3, 300
  xs = [rng.standard_normal((n, rows, lanes)).astype(np.float32) for _ in range(2)]
  ys = [rng.standard_normal((lanes, cols, n)).astype(np.float32).transpose(2, 1, 0) for _ in range(2)]  # strided lanes
  accs = [rng.standard_normal(lanes).astype(np.float32) for _ in range(rows * cols)]
  steps = [folds.Product(np.multiply, x, y) for x, y in zip(xs, ys)]
  got = folds.fold_outer(np.add, accs, steps, parts).values
  for r in range(rows):
    for c in range(cols):
      order = (0, 1) if parts is None else parts[r].order
      for lane in (0, 7, lanes - 1):
        acc = accs[r * cols + c][lane]
        for it in range(n):
          for s in order: acc = np.float32(acc + np.float32(xs[s][it, r, lane] * ys[s][it, c, lane]))
        assert got[r * cols + c, lane].view(np.uint32) == acc.view(np.uint32)


@pytest.mark.parametrize("one_row", [False, True], ids=["acc_per_lane", "acc_one_row"])
@pytest.mark.parametrize("lanes", [7, folds.ROW_STEPS_FROM + 5], ids=["narrow", "wide"])
def test_range_rule_fold_ufunc_is_each_lanes_chain(lanes, one_row):
  """fold_ufunc's rule, each lane's chain in order: the accumulator, then iteration 0's terms in step order, then
  iteration 1's, ..., each ADD (and a Product's MUL) rounded to float32 (checked one scalar step at a time); an
  accumulator given as one row starts every lane's chain alike. Narrow lanes take `accumulate` along the chains,
  wide ones one call per step: both must be the rule."""
  rng = np.random.default_rng(11)
  n = 5
  acc = rng.standard_normal(1 if one_row else lanes).astype(np.float32)
  plain = rng.standard_normal((n, lanes)).astype(np.float32)
  x, y = (rng.standard_normal((n, lanes)).astype(np.float32) for _ in range(2))
  got = folds.fold_ufunc(np.add, acc, [plain, folds.Product(np.multiply, x, y)])
  assert got.values.shape == (lanes,) and got.cert is None
  for lane in (0, 3, lanes - 1):
    want = acc[0 if one_row else lane]
    for it in range(n):
      want = np.float32(want + plain[it, lane])
      want = np.float32(want + np.float32(x[it, lane] * y[it, lane]))
    assert got.values[lane].view(np.uint32) == want.view(np.uint32)


def test_range_rule_lanes_match_the_rule_on_tinygrads_matmul(monkeypatch):
  """The same rule on tinygrad 0.10.1's own 256x256 matmul kernel (bench/kernels/grid_matmul_256.json: 16 upcast
  accumulators per thread, folded as one 4x4 tile; float4 loads, a 4096-thread grid): lanes and the sequential rule
  agree bit for bit (every NaN one value)."""
  p = program_from_json((pathlib.Path(__file__).parent.parent / "bench" / "kernels" / "grid_matmul_256.json").read_text())
  (loop,) = Plan.of(p, ()).lane_loops.values()
  assert loop.outer is not None and len(loop.outer.scans) == 16 and loop.outer.memory is not None
  rng = np.random.default_rng(0)
  inputs = [np.zeros(dt.size, to_np(dt.base)) if k == 0 else _specials(dt.base, dt.size, rng)
            for k, dt in sorted(p.buffers.items())]
  monkeypatch.setattr(settings, "LOOPS_AS_LANES", True)
  lanes = emulation_outcome(p, inputs, (), strict=True)
  monkeypatch.setattr(settings, "LOOPS_AS_LANES", False)
  assert lanes == emulation_outcome(p, inputs, (), strict=True)


@pytest.mark.parametrize("products", [0, 3000, 1 << 20], ids=["stepwise", "in_chunks", "products_first"])
def test_range_rule_tile_folds_in_blocks_as_the_rule(products, monkeypatch):
  """A tile folded block by block (folds.TILE_BLOCK, here uneven blocks of a few hundred elements), its products made
  step by step, a few iterations ahead (the last chunk shorter) or all first (folds.TILE_PRODUCTS), gives the
  sequential rule's buffers and levels bit for bit."""
  p = _matmul_tile(F32, 512, 32)
  rng = np.random.default_rng(2)
  inputs = [np.zeros(4 * 512, np.float32), _specials(F32, 64 * 512, rng), _specials(F32, 64 * 512, rng)]
  monkeypatch.setattr(folds, "TILE_BLOCK", 300)
  monkeypatch.setattr(folds, "TILE_PRODUCTS", products)
  monkeypatch.setattr(settings, "LOOPS_AS_LANES", True)
  lanes = emulation_outcome(p, inputs, (), strict=True)
  monkeypatch.setattr(settings, "LOOPS_AS_LANES", False)
  assert lanes == emulation_outcome(p, inputs, (), strict=True)


def test_range_rule_tile_from_memory_in_chunks_as_the_rule(monkeypatch):
  """A tile that folds from memory runs in chunks of what its body still computes; once its accumulators have levels
  (a NaN product: NAN_PAYLOAD) it folds from its loads' values, in the smaller chunks those need. Either way the
  sequential rule's buffers and levels, bit for bit."""
  p = _matmul_tile(F32, 512, 32)
  plan = Plan.of(p, ())
  (i,) = plan.tile_lane_bytes
  rng = np.random.default_rng(3)
  inputs = [np.zeros(4 * 512, np.float32), _specials(F32, 64 * 512, rng), _specials(F32, 64 * 512, rng)]
  monkeypatch.setattr(settings, "LOOP_CHUNK_MEMORY", 4 * 512 * plan.tile_lane_bytes[i])
  sizes, run = [], blocks._run_as_lanes
  monkeypatch.setattr(blocks, "_run_as_lanes", lambda m, i, loop, start, n: (sizes.append(n), run(m, i, loop, start, n)))
  monkeypatch.setattr(settings, "LOOPS_AS_LANES", True)
  lanes = emulation_outcome(p, inputs, (), strict=True)
  assert sizes[0] == 4 and set(sizes[1:]) == {2}, sizes
  monkeypatch.setattr(settings, "LOOPS_AS_LANES", False)
  assert lanes == emulation_outcome(p, inputs, (), strict=True)


@pytest.mark.parametrize("strict", [True, False], ids=["strict", "permissive"])
def test_undefined_behavior_rule_out_of_bounds_tile_operand(strict, monkeypatch):
  """A tile whose fold may read its operands from memory (loops.MemoryOperands) still finds what its loads would: with
  a buffer one element short, the last thread's last iteration reads past its end (OUT_OF_BOUNDS), and lanes report
  what the sequential rule reports (the same first finding, or the same events, buffers and levels)."""
  p = _matmul_tile(F32, 512, 32, short=1)
  (loop,) = Plan.of(p, ()).lane_loops.values()
  assert loop.outer is not None and loop.outer.memory is not None
  rng = np.random.default_rng(1)
  inputs = [np.zeros(4 * 512, np.float32), _specials(F32, 64 * 512, rng), _specials(F32, 64 * 512 - 1, rng)]
  monkeypatch.setattr(settings, "LOOPS_AS_LANES", True)
  lanes = emulation_outcome(p, inputs, (), strict=strict)
  assert "outside [0, 32767) of buffer 2" in str(lanes)
  monkeypatch.setattr(settings, "LOOPS_AS_LANES", False)
  assert lanes == emulation_outcome(p, inputs, (), strict=strict)


def test_race_rule_write_after_read_inside_a_loop_run_as_lanes(monkeypatch):
  """Races (RACY_READ): for r < 4, thread i reads buf[4i + 4 + r] and writes buf[4i + r]: thread i + 1 overwrites what
  thread i read, with no barrier between, so threads 0..2 read undefined values (thread 3 reads buf[16..19], which
  nobody writes). Run as lanes or in order: the same report, masks and defined values."""
  b = ProgramBuilder("war_loop")
  out, buf = b.global_buf(I32, 16), b.global_buf(I32, 20)
  i = b.gidx(0, 4)
  base = b.alu(Ops.MUL, i, b.const(4, I32))
  with b.loop(4) as r:
    at = b.alu(Ops.ADD, base, r)
    x = b.load(buf, b.alu(Ops.ADD, at, b.const(4, I32)))
    b.store(buf, at, b.const(-1, I32))
    b.store(out, at, x)
  p = b.build()
  assert Plan.of(p, ()).lane_loops, "the loop should run as lanes"
  args = lambda: [np.zeros(16, np.int32), np.arange(20, dtype=np.int32)]
  seen = []
  for as_lanes in (True, False):
    monkeypatch.setattr(settings, "LOOPS_AS_LANES", as_lanes)
    res = emulate(p, args(), strict=False)
    assert res.undefined[0].tolist() == [True] * 12 + [False] * 4 and res.buffers[0][12:].tolist() == [16, 17, 18, 19]
    seen.append(emulation_outcome(p, args()))
  assert seen[0] == seen[1] and seen[0][0] == "UB" and "write after read" in seen[0][7]
