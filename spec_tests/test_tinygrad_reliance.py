"""refimpl.tinygrad.report.reliance: the three report classes of what tinygrad 0.10.1's kernels rely on (SPEC.md, Decisions:
"BARRIER", "deferred undefined values", "races"). Rules: a kernel is in the barrier class exactly when the spec defines
it and it races once a barrier orders locals only; in the cast class exactly when the spec defines it and a
float->int CAST, a shift or an integer division in it made an undefined value that a WHERE discarded; in the lock-step
class exactly when the spec leaves it undefined through a racing read and lock-step order defines it."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tinygrad")

from refimpl.dtype import dtypes
from refimpl.fuzz.case import Case
from refimpl.ir import Ops, ProgramBuilder
from refimpl.tinygrad.report.reliance import (
  barrier_reliance,
  discarded_casts,
  edge_cases,
  linearizer_cases,
  lockstep_reliance,
  training_step_cases,
)
from refimpl.tinygrad.v0_10.reference import install_reference_device

REF = install_reference_device()
I32, F32 = dtypes.int32, dtypes.float32


def _group_update(barrier: bool, use: bool):
  """Every thread loads b[g] (and, with `use`, stores it into a local), BARRIER, thread 0 stores b[g] + 1."""
  b = ProgramBuilder("group_update")
  buf, tmp = b.global_buf(I32, 2), b.local_buf(I32, 4)
  g, lid = b.gidx(0, 2), b.lidx(0, 4)
  v = b.load(buf, g)
  b.store(tmp, lid, v if use else lid)
  if barrier: b.barrier()
  b.store(buf, g, b.alu(Ops.ADD, v, b.const(1, I32)), gate=b.alu(Ops.CMPLT, lid, b.const(1, I32)))
  return Case(b.build(), [np.array([10, 20], np.int32)])


def test_barrier_reliance_holds_the_defined_programs_whose_reads_race_when_barriers_order_locals_only():
  """Races: a read that another thread's write races with no barrier between is undefined (RACY_READ), whichever comes
  first, and undefined behaviour only where it is used. With barriers ordering locals only, thread 0's store of b[g]
  races the other threads' loads of it: the program is in the class when they store what they loaded, not when they
  discard it, and never when the spec itself leaves it undefined (no BARRIER)."""
  got = barrier_reliance([("used", _group_update(True, True)), ("discarded", _group_update(True, False)),
                          ("unordered", _group_update(False, True))])
  assert [(r.kernel, r.op) for r in got] == [("used", "LOAD")] and "write after read race" in got[0].reason


def test_barrier_reliance_leaves_out_the_training_steps_group_updates():
  """A classifier's training step: its bias update r_10_16_2 (every thread loads b[gidx], BARRIER, thread 0 alone
  stores b[gidx] inside an IF) races when barriers order locals only, but only thread 0's load is used, and thread 0's
  own write does not race it: the other threads' loads are undefined and discarded, so the kernel is defined either
  way."""
  found = {r.kernel: r for r in barrier_reliance(training_step_cases(REF))}
  assert not any(k.endswith(("r_10_16_2", "r_128_16_2")) for k in found), sorted(found)


def _where_discarded_cast(discard: bool):
  """out = WHERE(x < 2^31, int32(x), 7): the cast's value on x = 3e9 is undefined and WHERE discards it; without the
  WHERE it is stored (undefined behaviour: not in the class, which only holds programs the spec defines)."""
  b = ProgramBuilder("cast")
  out, x = b.global_buf(I32, 2), b.global_buf(F32, 2)
  g = b.gidx(0, 2)
  xv = b.load(x, g)
  v = b.cast(xv, I32)
  b.store(out, g, b.alu(Ops.WHERE, b.alu(Ops.CMPLT, xv, b.const(2.0 ** 31, F32)), v, b.const(7, I32)) if discard else v)
  return Case(b.build(), [np.zeros(2, np.int32), np.array([1.5, 3e9], np.float32)])

def test_discarded_casts_holds_exactly_the_defined_programs_with_a_discarded_undefined_cast():
  got = discarded_casts([("discarded", _where_discarded_cast(True)), ("stored", _where_discarded_cast(False))])
  assert [(r.kernel, r.op, r.lane[0]) for r in got] == [("discarded", "CAST", 1)]
  assert got[0].reason.startswith("float->int cast of 3000000000.0 outside")


def test_discarded_casts_finds_tinygrads_range_reductions_in_its_c_kernels():
  """tinygrad's CLANG kernels for half sin(-0.0) and float32 exp(1488522240.0) cast out of range on the lane their
  WHERE discards: C undefined behaviour in the C it renders."""
  from refimpl.tinygrad.v0_10.toolchain import prepare_tinygrad
  why = prepare_tinygrad()["CLANG"]
  if why is not None: pytest.skip(f"tinygrad's CLANG does not run here: {why}")
  found = {r.kernel.rsplit(" ", 1)[0] for r in discarded_casts(edge_cases("CLANG"))}
  assert {"half sin(-0.0)", "float exp(1488522240.0)"} <= found, found


def test_discarded_casts_holds_test_div_ints_discarded_division_by_zero():
  """tinygrad's test_div_int kernel, `(t > 0).where(1 // t, t)` on t = [-1, 0, 1, 2], divides 1 by 0 on the lane its
  WHERE discards: defined by the spec (DIVISOR_ZERO is deferred), C undefined behaviour in the C tinygrad renders (x86's
  idiv traps): in the class, the IDIV on thread 0 of its lanes (the kernel's one thread) named with its reason."""
  got = [r for r in discarded_casts(edge_cases(REF)) if r.kernel.startswith("div_int ")]
  assert [(r.op, r.reason) for r in got] == [("IDIV", "division by zero")], got


def _read_then_overwritten(use: bool):
  """Four threads of one workgroup: x = tmp[(l + 1) % 4] after every thread filled tmp[l] and a BARRIER, then each
  thread writes tmp[l] = 9 with no BARRIER between (thread l overwrites what thread l - 1 read). out[l] = x (used) or
  WHERE(l < 0, x, 7) (discarded)."""
  b = ProgramBuilder("read_then_overwritten")
  out, tmp = b.global_buf(I32, 4), b.local_buf(I32, 4)
  lid = b.lidx(0, 4)
  b.store(tmp, lid, lid)
  b.barrier()
  x = b.load(tmp, b.alu(Ops.MOD, b.alu(Ops.ADD, lid, b.const(1, I32)), b.const(4, I32)))
  b.store(tmp, lid, b.const(9, I32))
  b.store(out, lid, x if use else b.alu(Ops.WHERE, b.alu(Ops.CMPLT, lid, b.const(0, I32)), x, b.const(7, I32)))
  return Case(b.build(), [np.zeros(4, np.int32)])

def test_lockstep_reliance_holds_the_undefined_programs_whose_racing_reads_come_first_in_lock_step():
  """Races: a read that another thread's later write races is undefined (RACY_READ); the class holds the programs the
  spec leaves undefined that way and that lock-step order defines (the value is used), not those the spec defines (the
  value is discarded)."""
  got = lockstep_reliance([("used", _read_then_overwritten(True)), ("discarded", _read_then_overwritten(False))])
  assert [(r.kernel, r.op) for r in got] == [("used", "LOAD")] and "write after read race" in got[0].reason


def test_lockstep_reliance_holds_test_linearizers_mid_dim_multireduce():
  """tinygrad's test_mid_dim_multireduce kernel with locals and grouping (r_9_5_3_2_2_16_16) reads temp0 where other
  threads of its workgroup store next, with no BARRIER: undefined by the spec (its stop on REFIMPL) and in the class."""
  found = [r.kernel for r in lockstep_reliance(linearizer_cases())]
  assert [k.split(" ")[0] for k in found] == ["mid_dim_multireduce"] and "r_9_5_3_2_2_16_16" in found[0]
