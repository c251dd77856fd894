"""Loops, accumulators and IF blocks: accumulators fold in order, a RANGE's bounds are read once at the RANGE,
IF blocks and DEFINE_VAR loop bounds (the executor's control rule, SPEC.md "Execution").

Part of the packaged conformance suite (refimpl.conformance.rules, every backend through the `backend` fixture;
the conventions: refimpl/conformance/rules/__init__.py).
"""
import math

import numpy as np

from refimpl.conformance.rules.common import f16, f32, i32, i64
from refimpl.conformance.test_programs import accumulator_loop_bound  # shared with the program tests
from refimpl.ir import Ops, ProgramBuilder
from refimpl.testing.programs import assert_same, require, run_against_emulator


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
