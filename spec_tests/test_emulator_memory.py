"""Memory rules of the emulator's executor: bounds, uninitialised locals, races (with and without barriers), permissive
mode's masks and events, looseness carried through memory, and the index analysis that lets most accesses skip checks
(refimpl/emulator/machine.py, memory.py, indexing.py)."""
import contextlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from refimpl import UndefinedBehavior
from refimpl.dtype import dtypes
from refimpl.emulator import settings
from refimpl.emulator.certainty import Certainty
from refimpl.emulator.indexing import Grid, analyze
from refimpl.emulator.machine import emulate
from refimpl.emulator.ownership import lattice, pins, race_free
from refimpl.emulator.ub import UB
from refimpl.ir import Ops, ProgramBuilder

I32, F32 = dtypes.int32, dtypes.float32

def c32(b: ProgramBuilder, v: int) -> int: return b.const(v, I32)
def add(b, x, y): return b.alu(Ops.ADD, x, y)
def mul(b, x, y): return b.alu(Ops.MUL, x, y)
def zeros(n: int, dt=np.int32) -> np.ndarray: return np.zeros(n, dt)
def iota(n: int) -> np.ndarray: return np.arange(n, dtype=np.int32)
def lane(g0=0, g1=0, g2=0, l0=0, l1=0, l2=0) -> tuple[int, ...]: return (g0, g1, g2, l0, l1, l2)


def shifted_copy(n: int, shift: int, size: int, count: int = 1, store: bool = False):
  """out[i] = a[i + shift] (or out[i + shift] = a[i] with store=True), `count` elements per thread, buffers of `size`."""
  b = ProgramBuilder("shifted")
  out, a = b.global_buf(I32, size), b.global_buf(I32, size)
  i = mul(b, b.gidx(0, n), c32(b, count))
  j = add(b, i, c32(b, shift))
  if store: b.store(out, j, b.load(a, i, count=count))
  else: b.store(out, i, b.load(a, j, count=count))
  return b.build(), len(b) - (1 if store else 3)  # the uop that goes out of bounds (the STORE, or the LOAD)


# ***** bounds: an index outside [0, size) is undefined *****

def test_out_of_bounds_load_is_undefined_at_the_first_lane_past_the_end():
  p, at = shifted_copy(8, 1, 8)
  with pytest.raises(UndefinedBehavior) as e: emulate(p, [zeros(8), iota(8)])
  assert (e.value.op, e.value.uop_index, e.value.lane, e.value.operands, e.value.count) == (Ops.LOAD, at, lane(7), (8,), 1)

def test_negative_index_is_undefined():
  p, at = shifted_copy(8, -3, 8)
  with pytest.raises(UndefinedBehavior) as e: emulate(p, [zeros(8), iota(8)])
  assert (e.value.uop_index, e.value.lane, e.value.operands, e.value.count) == (at, lane(0), (-3,), 3)

def test_out_of_bounds_store_is_undefined():
  p, at = shifted_copy(8, 2, 8, store=True)
  with pytest.raises(UndefinedBehavior) as e: emulate(p, [zeros(8), iota(8)])
  assert (e.value.op, e.value.uop_index, e.value.lane, e.value.count) == (Ops.STORE, at, lane(6), 2)

def test_vector_access_straddling_the_end_is_undefined():
  # a 4-element load at 4i + 2 of a 16-element buffer: thread 3 reads elements 14..17, two of them past the end
  p, at = shifted_copy(4, 2, 16, count=4)
  with pytest.raises(UndefinedBehavior) as e: emulate(p, [zeros(16), iota(16)])
  assert (e.value.uop_index, e.value.lane, e.value.operands) == (at, lane(3), (14,))

def test_data_dependent_out_of_bounds_index_is_undefined():
  # out[i] = a[idx[i]] with idx[5] = 16 on a 16-element buffer
  b = ProgramBuilder("gather")
  out, a, idx = b.global_buf(I32, 16), b.global_buf(I32, 16), b.global_buf(I32, 16)
  i = b.gidx(0, 16)
  ld = b.load(a, b.load(idx, i))
  b.store(out, i, ld)
  ix = iota(16)
  ix[5] = 16
  with pytest.raises(UndefinedBehavior) as e: emulate(b.build(), [zeros(16), iota(16), ix])
  assert (e.value.uop_index, e.value.lane, e.value.operands) == (ld, lane(5), (16,))

def test_every_access_inside_the_buffer_is_defined():
  # the same program with in-range indices runs and copies: the bounds rule rejects exactly the outside
  p, _ = shifted_copy(7, 1, 8)
  res = emulate(p, [zeros(8), iota(8) * 10])
  np.testing.assert_array_equal(res.buffers[0], [10, 20, 30, 40, 50, 60, 70, 0])


# ***** locals: reading an element never written is undefined *****

def local_program(read_offset: int, barrier: bool, L: int = 8, write_all: bool = True):
  """tmp[l] = a[g*L + l] (on threads l < L-1 when not write_all); [barrier]; out[g*L + l] = tmp[(l + read_offset) % L]."""
  b = ProgramBuilder("locals")
  out, a = b.global_buf(I32, 2 * L), b.global_buf(I32, 2 * L)
  tmp = b.local_buf(I32, L)
  g, lid = b.gidx(0, 2), b.lidx(0, L)
  gi = add(b, mul(b, g, c32(b, L)), lid)
  b.store(tmp, lid, b.load(a, gi), gate=None if write_all else b.alu(Ops.CMPLT, lid, c32(b, L - 1)))
  if barrier: b.barrier()
  ld = b.load(tmp, b.alu(Ops.MOD, add(b, lid, c32(b, read_offset)), c32(b, L)))
  b.store(out, gi, ld)
  return b.build(), ld

def test_uninitialised_local_read_is_undefined():
  # threads l < 7 write tmp[l]; thread 7 reads tmp[7], which nobody wrote
  p, ld = local_program(0, barrier=True, write_all=False)
  with pytest.raises(UndefinedBehavior) as e: emulate(p, [zeros(16), iota(16)])
  # UNINITIALISED is deferred: the value read is undefined, and storing it is the use that is undefined
  o = e.value.origin
  assert (e.value.op, e.value.use) == (Ops.STORE, "stored")
  assert (o.op, o.uop_index, o.lane, o.operands) == (Ops.LOAD, ld, lane(0, l0=7), (7,))
  assert e.value.count == 2  # thread 7 of each workgroup: all threads of the launch run in lock step

def test_local_written_by_the_same_thread_reads_back():
  p, _ = local_program(0, barrier=False)
  res = emulate(p, [zeros(16), iota(16) * 3])
  np.testing.assert_array_equal(res.buffers[0], iota(16) * 3)


# ***** races: two threads, one element, at least one write, no barrier between *****

def test_unsynchronised_write_read_race_on_a_local_is_undefined():
  # thread l reads tmp[l+1], written by thread l+1 with no barrier between
  p, ld = local_program(1, barrier=False)
  with pytest.raises(UndefinedBehavior) as e: emulate(p, [zeros(16), iota(16)])
  o = e.value.origin  # RACY_READ is deferred: reported where the value read is stored
  assert (e.value.op, o.op, o.uop_index, o.lane, o.kind) == (Ops.STORE, Ops.LOAD, ld, lane(0, l0=0), UB.RACY_READ)
  assert "race" in o.reason

def test_barrier_between_write_and_read_makes_the_local_exchange_defined():
  p, _ = local_program(1, barrier=True)
  x = iota(16) * 5
  res = emulate(p, [zeros(16), x])
  np.testing.assert_array_equal(res.buffers[0], np.roll(x.reshape(2, 8), -1, axis=1).ravel())

def test_write_write_race_on_a_local_is_undefined():
  # every thread of a workgroup stores tmp[0]
  b = ProgramBuilder("ww_local")
  out = b.global_buf(I32, 2)
  tmp = b.local_buf(I32, 4)
  g, lid = b.gidx(0, 2), b.lidx(0, 4)
  b.store(tmp, c32(b, 0), lid)
  st = len(b) - 1
  b.barrier()
  b.store(out, g, b.load(tmp, c32(b, 0)), gate=b.alu(Ops.CMPLT, lid, c32(b, 1)))
  with pytest.raises(UndefinedBehavior) as e: emulate(b.build(), [zeros(2)])
  assert (e.value.op, e.value.uop_index) == (Ops.STORE, st)
  assert "write/write" in e.value.reason

def test_write_write_race_on_a_global_is_undefined():
  # out[i // 2] = i: threads 2k and 2k+1 write one element
  b = ProgramBuilder("ww_global")
  out = b.global_buf(I32, 4)
  i = b.gidx(0, 8)
  b.store(out, b.alu(Ops.IDIV, i, c32(b, 2)), i)
  with pytest.raises(UndefinedBehavior) as e: emulate(b.build(), [zeros(4)])
  assert (e.value.op, e.value.uop_index, e.value.lane) == (Ops.STORE, len(b) - 1, lane(0))
  assert "write/write" in e.value.reason and e.value.count == 8

def test_global_read_of_another_threads_write_is_undefined():
  # buf[i] = 1; then buf[(i+1) % n] is read: written by thread i+1 in the same launch (no barrier orders globals)
  n = 8
  b = ProgramBuilder("raw_global")
  buf, out = b.global_buf(I32, n), b.global_buf(I32, n)
  i = b.gidx(0, n)
  b.store(buf, i, c32(b, 1))
  ld = b.load(buf, b.alu(Ops.MOD, add(b, i, c32(b, 1)), c32(b, n)))
  b.store(out, i, ld)
  with pytest.raises(UndefinedBehavior) as e: emulate(b.build(), [zeros(n), zeros(n)])
  assert (e.value.origin.uop_index, e.value.origin.lane, e.value.use) == (ld, lane(0), "stored")
  assert "read after write" in e.value.origin.reason

def test_global_read_of_an_element_another_thread_writes_after_is_undefined():
  """Rule (race, RACY_READ): x = buf[(i+1) % n]; buf[i] = x: thread i overwrites what thread i-1 read, with no barrier
  between: the value read is undefined (though the read came first), and storing it is the use that is undefined."""
  n = 8
  b = ProgramBuilder("war_global")
  buf = b.global_buf(I32, n)
  i = b.gidx(0, n)
  ld = b.load(buf, b.alu(Ops.MOD, add(b, i, c32(b, 1)), c32(b, n)))
  b.store(buf, i, ld)
  with pytest.raises(UndefinedBehavior) as e: emulate(b.build(), [iota(n)])
  o = e.value.origin
  assert (e.value.op, e.value.uop_index, e.value.use, e.value.kind) == (Ops.STORE, len(b) - 1, "stored", UB.RACY_READ)
  assert (o.op, o.uop_index, o.lane, o.kind) == (Ops.LOAD, ld, lane(0), UB.RACY_READ)
  assert "write after read" in o.reason

def test_thread_reading_back_its_own_global_write_is_defined():
  # buf[i] = buf[i] * 2 + buf[i]: one thread per element, no sharing
  n = 8
  b = ProgramBuilder("own")
  buf = b.global_buf(I32, n)
  i = b.gidx(0, n)
  b.store(buf, i, mul(b, b.load(buf, i), c32(b, 2)))
  b.store(buf, i, add(b, b.load(buf, i), c32(b, 1)))
  res = emulate(b.build(), [iota(n)])
  np.testing.assert_array_equal(res.buffers[0], iota(n) * 2 + 1)


# ***** races: unordered writes of the same bits are no race; a read raced by a write reads an undefined value *****

def _two_writers(value0, value1, dt=I32, one_op: bool = True):
  """Threads 0 and 1 of one workgroup write element 0 of a local with no barrier between (value0 / value1: uops made by
  a builder function (b, lid) -> uop), in one STORE (one_op) or in two, thread 0's first; after a BARRIER thread 0
  copies it to out[0]. Returns (program, the index of the (last) STORE to the local)."""
  b = ProgramBuilder("two_writers")
  out, tmp = b.global_buf(dt, 1), b.local_buf(dt, 1)
  lid = b.lidx(0, 2)
  first = b.alu(Ops.CMPLT, lid, c32(b, 1))
  if one_op: b.store(tmp, c32(b, 0), b.alu(Ops.WHERE, first, value0(b, lid), value1(b, lid)))
  else:
    b.store(tmp, c32(b, 0), value0(b, lid), gate=first)
    b.store(tmp, c32(b, 0), value1(b, lid), gate=b.alu(Ops.CMPNE, first, b.const(True, dtypes.bool)))
  st = len(b) - 1
  b.barrier()
  b.store(out, c32(b, 0), b.load(tmp, c32(b, 0)), gate=first)
  return b.build(), st

@pytest.mark.parametrize("one_op", [True, False], ids=["two_lanes_of_one_store", "two_stores"])
def test_same_value_writes_are_not_a_race(one_op):
  """Rule (races): two unordered writes of the same bits to one element are no race; the element holds those bits."""
  p, _ = _two_writers(lambda b, lid: c32(b, 7), lambda b, lid: add(b, mul(b, lid, c32(b, 0)), c32(b, 7)), one_op=one_op)
  res = emulate(p, [zeros(1)], strict=False)
  assert res.buffers[0].tolist() == [7] and not res.events and not res.undefined[0].any()

@pytest.mark.parametrize("one_op", [True, False], ids=["two_lanes_of_one_store", "two_stores"])
def test_different_value_writes_are_still_a_race(one_op):
  """Rule (races, RACE): two unordered writes of different bits to one element are undefined where the second runs
  (lock step: at the one STORE), and the element is undefined."""
  p, st = _two_writers(lambda b, lid: c32(b, 7), lambda b, lid: c32(b, 8), one_op=one_op)
  with pytest.raises(UndefinedBehavior) as e: emulate(p, [zeros(1)])
  assert (e.value.op, e.value.uop_index, e.value.kind) == (Ops.STORE, st, UB.RACE) and "write/write" in e.value.reason
  res = emulate(p, [zeros(1)], strict=False)
  assert res.undefined[0].tolist() == [True] and [ev.kind for ev in res.events] == [UB.RACE]

@pytest.mark.parametrize("one_op", [True, False], ids=["two_lanes_of_one_store", "two_stores"])
@pytest.mark.parametrize("bits", [(0x7FC00000, 0x7FC00001), (0x80000000, 0x00000000)], ids=["nan_payloads", "signed_zeros"])
def test_same_value_writes_compare_bits_not_values(bits, one_op):
  """Rule (races): writes agree when their bits do: two NaNs of different payloads, or -0.0 and +0.0, race (RACE); one
  NaN's bits twice do not."""
  word = lambda x: lambda b, lid: b.bitcast(c32(b, x - (1 << 32) if x >= 1 << 31 else x), F32)
  p, st = _two_writers(word(bits[0]), word(bits[1]), F32, one_op)
  with pytest.raises(UndefinedBehavior) as e: emulate(p, [zeros(1, np.float32)])
  assert (e.value.uop_index, e.value.kind) == (st, UB.RACE)
  p, _ = _two_writers(word(bits[0]), word(bits[0]), F32, one_op)
  res = emulate(p, [zeros(1, np.float32)])
  assert res.buffers[0].view(np.uint32).tolist() == [bits[0]] and not res.undefined[0].any()

@pytest.mark.parametrize("one_op", [True, False], ids=["two_lanes_of_one_store", "two_stores"])
def test_same_value_writes_join_their_levels(one_op):
  """Rule (races; certainty rule): the element two agreeing writes leave is at the join of their levels: a NaN CONST
  (NAN_PAYLOAD) and the same bits made exactly (BITCAST of an int) leave NAN_PAYLOAD, whichever thread writes last."""
  nan_bits = int(np.array(np.nan, np.float32).view(np.int32))
  exact = lambda b, lid: b.bitcast(c32(b, nan_bits), F32)
  nan = lambda b, lid: b.const(float("nan"), F32)
  for first, second in ((nan, exact), (exact, nan)):
    p, _ = _two_writers(first, second, F32, one_op)
    res = emulate(p, [zeros(1, np.float32)])
    assert res.certainty[0].tolist() == [Certainty.NAN_PAYLOAD] and not res.events

def test_same_value_write_after_a_race_leaves_the_element_undefined():
  """Rule (races): after two writes of different bits the element is undefined; a third unordered write of the bits it
  holds does not make it defined again (permissive mode: one RACE event)."""
  b = ProgramBuilder("third_writer")
  out = b.global_buf(I32, 1)
  i = b.gidx(0, 3)
  true = b.const(True, dtypes.bool)
  for k, v in enumerate((1, 2, 2)):  # thread k stores v
    b.store(out, c32(b, 0), c32(b, v), gate=b.alu(Ops.CMPNE, b.alu(Ops.CMPNE, i, c32(b, k)), true))
  res = emulate(b.build(), [zeros(1)], strict=False)
  assert res.undefined[0].tolist() == [True] and [ev.kind for ev in res.events] == [UB.RACE]

def test_same_value_writes_of_a_reduction_by_every_thread_of_a_dimension():
  """Rule (races): tinygrad's multireduce stores a reduction's result from every thread of a local dimension
  (*(temp0+lidx1) = acc0, acc0 a function of lidx1 only): the writers agree, so the program is defined."""
  b = ProgramBuilder("multireduce_store")
  out, tmp = b.global_buf(I32, 4), b.local_buf(I32, 2)
  l0, l1 = b.lidx(0, 2), b.lidx(1, 2)
  b.store(tmp, l1, mul(b, add(b, l1, c32(b, 1)), c32(b, 10)))
  b.barrier()
  b.store(out, add(b, mul(b, l1, c32(b, 2)), l0), b.load(tmp, l1))
  res = emulate(b.build(), [zeros(4)])
  assert res.buffers[0].tolist() == [10, 10, 20, 20] and not res.events


def _read_then_written(use_where: bool):
  """x = buf[(i+1) % n] then buf[i] = 2i: thread i overwrites what thread i-1 read before, with no barrier between.
  out[i] = x, or WHERE(i < 0, x, 7) (x discarded)."""
  n = 8
  b = ProgramBuilder("war")
  buf, out = b.global_buf(I32, n), b.global_buf(I32, n)
  i = b.gidx(0, n)
  ld = b.load(buf, b.alu(Ops.MOD, add(b, i, c32(b, 1)), c32(b, n)))
  b.store(buf, i, mul(b, i, c32(b, 2)))
  b.store(out, i, b.alu(Ops.WHERE, b.alu(Ops.CMPLT, i, c32(b, 0)), ld, c32(b, 7)) if use_where else ld)
  return b.build(), ld

def test_write_after_read_makes_the_read_undefined():
  """Rule (races, RACY_READ): a read that another thread's write races is undefined even though the read came first in
  the emulator's order; storing its value is the use that is undefined, with the LOAD as origin. The write itself is
  defined (permissive mode: buf holds its values, defined)."""
  p, ld = _read_then_written(use_where=False)
  with pytest.raises(UndefinedBehavior) as e: emulate(p, [iota(8), zeros(8)])
  o = e.value.origin
  assert (e.value.op, e.value.use, e.value.kind, e.value.count) == (Ops.STORE, "stored", UB.RACY_READ, 8)
  assert (o.op, o.uop_index, o.lane, o.kind) == (Ops.LOAD, ld, lane(0), UB.RACY_READ) and "write after read" in o.reason
  res = emulate(p, [iota(8), zeros(8)], strict=False)
  assert res.buffers[0].tolist() == (iota(8) * 2).tolist() and not res.undefined[0].any()
  assert res.undefined[1].all() and [ev.use for ev in res.events] == ["stored"]

def test_lockstep_check_reads_what_lock_step_order_gives():
  """emulate(lockstep=True), a portability check and not the spec: a read racing a later write reads the old value (as
  one warp's threads do), so the kernel the spec finds undefined computes out[i] = buf[(i+1) % n] in lock step, and
  the caller's inplace buffers are written once."""
  p, _ = _read_then_written(use_where=False)
  got = emulate(p, [iota(8), zeros(8)], lockstep=True)
  assert got.buffers[1].tolist() == [(i + 1) % 8 for i in range(8)] and not got.deferred
  bufs = [iota(8), zeros(8)]
  emulate(p, bufs, inplace=True, lockstep=True)
  assert bufs[0].tolist() == (iota(8) * 2).tolist() and bufs[1].tolist() == [(i + 1) % 8 for i in range(8)]

def test_write_after_read_whose_value_is_discarded_is_defined():
  """Rule (races, RACY_READ is deferred): the racy read's value is undefined, but a WHERE that picks the other value
  drops it: the program is defined (the LOAD is still listed among the deferred origins)."""
  p, ld = _read_then_written(use_where=True)
  res = emulate(p, [iota(8), zeros(8)])
  assert res.buffers[1].tolist() == [7] * 8 and res.buffers[0].tolist() == (iota(8) * 2).tolist()
  assert [(d.uop_index, d.kind) for d in res.deferred] == [(ld, UB.RACY_READ)]

def test_write_after_read_and_read_after_write_give_the_same_verdict():
  """Rule (races): unordered accesses have no order, so a read before and a read after another thread's racing write
  are both RACY_READ (deferred), never RACE."""
  for read_first in (True, False):
    b = ProgramBuilder("either_order")
    tmp, out = b.global_buf(I32, 2), b.global_buf(I32, 2)
    lid = b.lidx(0, 2)
    other = b.alu(Ops.XOR, lid, c32(b, 1))
    if read_first: ld = b.load(tmp, other, gate=b.alu(Ops.CMPLT, lid, c32(b, 1)), alt=c32(b, 0))
    b.store(tmp, lid, lid)
    if not read_first: ld = b.load(tmp, other, gate=b.alu(Ops.CMPLT, lid, c32(b, 1)), alt=c32(b, 0))
    b.store(out, lid, ld)
    with pytest.raises(UndefinedBehavior) as e: emulate(b.build(), [zeros(2), zeros(2)])
    assert (e.value.kind, e.value.origin.uop_index, e.value.origin.lane) == (UB.RACY_READ, ld, lane(l0=0)), read_first

def test_write_after_read_in_place_reruns_on_the_callers_inputs():
  """Rule (races): emulate(inplace=True) on a program whose reads a later write races runs again on the buffers as
  given: the values are those of one run (buf[i] = buf[i+1] + 1 on the original buf), the racy ones undefined."""
  n = 8
  b = ProgramBuilder("war_inplace")
  buf = b.global_buf(I32, n)
  i = b.gidx(0, n)
  b.store(buf, i, add(b, b.load(buf, b.alu(Ops.MOD, add(b, i, c32(b, 1)), c32(b, n))), c32(b, 1)))
  x = iota(n)
  res = emulate(b.build(), [x], strict=False, inplace=True)
  assert res.buffers[0] is x and x.tolist() == (np.roll(iota(n), -1) + 1).tolist() and res.undefined[0].all()

def test_write_after_read_reruns_are_bounded(monkeypatch):
  """The emulator runs a launch again while runs find new writes that race an earlier read; past RERUNS it stops with an
  internal error rather than loop."""
  monkeypatch.setattr(settings, "RERUNS", 1)
  p, _ = _read_then_written(use_where=False)
  with pytest.raises(RuntimeError, match="RERUNS"): emulate(p, [iota(8), zeros(8)])


# ***** the index analysis: proofs that skip tracking must be sound *****

def test_injective_affine_stores_are_proven_race_free_and_overlapping_ones_are_not():
  # out[2i + r] for r < 2 is one-to-one in (i, r); out2[i + r] for r < 2 is not (thread i and i+1 meet)
  b = ProgramBuilder("proof")
  out, out2, a = b.global_buf(I32, 16), b.global_buf(I32, 16), b.global_buf(I32, 16)
  i = b.gidx(0, 8)
  with b.loop(2) as r:
    b.store(out, add(b, mul(b, i, c32(b, 2)), r), b.load(a, i))
    b.store(out2, add(b, i, r), b.load(a, i))
  p = b.build()
  free = race_free(p, analyze(p), Grid(p.global_size, p.local_size))
  assert {out, a} <= free and out2 not in free
  with pytest.raises(UndefinedBehavior, match="write/write"): emulate(p, [zeros(16), zeros(16), iota(16)])

def test_index_analysis_keeps_no_form_where_int32_could_wrap():
  # i * 2^30 wraps in int32 for i >= 2: the analysis must give up the form, and the emulator then computes the wrapped
  # index (negative: out of bounds) instead of trusting an unwrapped one
  b = ProgramBuilder("wrap")
  out = b.global_buf(I32, 4)
  i = b.gidx(0, 4)
  big = mul(b, i, c32(b, 2**30))
  idx = b.alu(Ops.AND, big, c32(b, 3))  # the low bits: 0 for every lane, wrapped or not
  b.store(out, idx, i, gate=b.alu(Ops.CMPLT, i, c32(b, 1)))
  p = b.build()
  assert analyze(p)[big].aff is None
  np.testing.assert_array_equal(emulate(p, [zeros(4) + 7]).buffers[0], [0, 7, 7, 7])


def test_index_analysis_gives_mulacc_the_form_of_a_mul_then_an_add():
  # tinygrad 0.14 writes index arithmetic as MULACC: out[4 l + k] for k < 4 through MULACC(l, 4, k) has the form
  # 4 lidx0 + k (so the four stores are one lattice of copies: race free), and MULACC(l, 2^30, 0) may wrap: no form
  b = ProgramBuilder("mulacc")
  out = b.global_buf(I32, 64)
  lid = b.lidx(0, 16)
  idx = [b.alu(Ops.MULACC, lid, c32(b, 4), c32(b, k)) for k in range(4)]
  big = b.alu(Ops.MULACC, lid, c32(b, 2**30), c32(b, 0))
  for k, i in enumerate(idx): b.store(out, i, add(b, lid, c32(b, 100 * k)))
  p = b.build()
  infos = analyze(p)
  assert [(infos[i].aff.terms, infos[i].aff.const) for i in idx] == [({"lidx0": 4}, k) for k in range(4)]
  assert infos[big].aff is None
  assert out in race_free(p, infos, Grid(p.global_size, p.local_size))
  want = (np.arange(16)[:, None] + 100 * np.arange(4)).ravel()
  np.testing.assert_array_equal(emulate(p, [zeros(64)]).buffers[0], want)


# ***** permissive mode: masks and events instead of a raise *****

def test_permissive_out_of_bounds_store_does_nothing_and_is_an_event():
  p, at = shifted_copy(8, 2, 8, store=True)
  res = emulate(p, [zeros(8) - 1, iota(8) + 100], strict=False)
  np.testing.assert_array_equal(res.buffers[0], [-1, -1, 100, 101, 102, 103, 104, 105])
  assert len(res.events) == 1 and (res.events[0].uop_index, res.events[0].count) == (at, 2)
  assert not res.undefined[0].any()

def test_permissive_out_of_bounds_load_makes_the_stored_value_undefined():
  p, at = shifted_copy(8, 1, 8)
  res = emulate(p, [zeros(8), iota(8)], strict=False)
  assert res.undefined[0].tolist() == [False] * 7 + [True]
  np.testing.assert_array_equal(res.buffers[0][:7], iota(8)[1:])
  assert [e.uop_index for e in res.events] == [at]

def test_permissive_write_write_race_marks_the_element_undefined():
  b = ProgramBuilder("ww")
  out = b.global_buf(I32, 4)
  i = b.gidx(0, 4)
  b.store(out, b.alu(Ops.MAX, b.alu(Ops.SUB, i, c32(b, 2)), c32(b, 0)), i)  # threads 0, 1, 2 write element 0
  res = emulate(b.build(), [zeros(4) - 1], strict=False)
  assert res.undefined[0].tolist() == [True, False, False, False]
  assert res.buffers[0][1] == 3 and len(res.events) == 1 and "write/write" in res.events[0].reason

def test_permissive_uninitialised_local_read_is_undefined_where_read():
  p, _ = local_program(0, barrier=True, write_all=False)
  res = emulate(p, [zeros(16), iota(16)], strict=False)
  assert np.flatnonzero(res.undefined[0]).tolist() == [7, 15]
  assert res.events[0].count == 2


# ***** looseness through memory *****

def test_exp2_result_stored_is_loose_and_integer_add_result_is_exact():
  n = 8
  b = ProgramBuilder("loose")
  of, oi, a, x = b.global_buf(F32, n), b.global_buf(I32, n), b.global_buf(F32, n), b.global_buf(I32, n)
  i = b.gidx(0, n)
  b.store(of, i, b.alu(Ops.EXP2, b.load(a, i)))
  b.store(oi, i, add(b, b.load(x, i), c32(b, 1)))
  res = emulate(b.build(), [zeros(n, np.float32), zeros(n), np.linspace(0.1, 3, n).astype(np.float32), iota(n)])
  assert res.loose[0].all() and not res.loose[1].any()
  np.testing.assert_array_equal(res.buffers[1], iota(n) + 1)

def test_looseness_travels_through_memory_and_arithmetic_and_is_cleared_by_an_exact_store():
  # tmp[i] = exp2(a[i]); out[i] = tmp[i] + 1 (loose: computed from a loose element); then tmp[i] = 3 (exact again)
  n = 4
  b = ProgramBuilder("carry")
  out, tmp, a = b.global_buf(F32, n), b.global_buf(F32, n), b.global_buf(F32, n)
  i = b.gidx(0, n)
  b.store(tmp, i, b.alu(Ops.EXP2, b.load(a, i)))
  b.store(out, i, add(b, b.load(tmp, i), b.const(1.0, F32)), gate=b.alu(Ops.CMPLT, i, c32(b, 2)))
  b.store(tmp, i, b.const(3.0, F32))
  res = emulate(b.build(), [zeros(n, np.float32), zeros(n, np.float32), np.ones(n, np.float32) / 2])
  assert res.loose[0].tolist() == [True, True, False, False] and not res.loose[1].any()


def test_a_load_is_a_snapshot_not_affected_by_later_stores():
  # x = buf[i]; buf[i] = 5; out[i] = x  -> out holds the old values (a load may not alias memory that changes later)
  n = 8
  b = ProgramBuilder("snapshot")
  buf, out = b.global_buf(I32, n), b.global_buf(I32, n)
  i = b.gidx(0, n)
  x = b.load(buf, i)
  b.store(buf, i, c32(b, 5))
  b.store(out, i, x)
  res = emulate(b.build(), [iota(n), zeros(n)])
  np.testing.assert_array_equal(res.buffers[1], iota(n))
  np.testing.assert_array_equal(res.buffers[0], np.full(n, 5))

def _group_update(barrier: bool):
  """Every thread l of workgroup g loads b[g] and stores it in tmp[l], then (after a BARRIER) thread 0 stores
  b[g] + 1 into b[g]: tinygrad's GROUP reduction of a training step's bias update (a write after every thread's read)."""
  b = ProgramBuilder("group_update")
  buf = b.global_buf(I32, 2)
  tmp = b.local_buf(I32, 4)
  g, lid = b.gidx(0, 2), b.lidx(0, 4)
  v = b.load(buf, g)
  b.store(tmp, lid, v)
  if barrier: b.barrier()
  b.store(buf, g, add(b, v, c32(b, 1)), gate=b.alu(Ops.CMPLT, lid, c32(b, 1)))
  return b.build(), len(b) - 1

def test_barrier_orders_a_workgroups_global_accesses():
  """Rule (BARRIER): it orders every access of its workgroup's threads before it against every one after it, globals
  included: every thread reads b[g], BARRIER, thread 0 writes b[g] is defined."""
  p, _ = _group_update(barrier=True)
  res = emulate(p, [np.array([10, 20], np.int32)])
  assert res.buffers[0].tolist() == [11, 21] and not res.events

def test_the_same_global_update_without_a_barrier_is_a_race():
  """Rule (race, RACY_READ): without the BARRIER, thread 0's write of b[g] races the other threads' reads of it, which
  come first: their values are undefined, and storing them into tmp is undefined."""
  p, _ = _group_update(barrier=False)
  with pytest.raises(UndefinedBehavior) as e: emulate(p, [np.array([10, 20], np.int32)])
  o = e.value.origin
  assert (e.value.op, e.value.use, o.op, o.lane, o.kind) == (Ops.STORE, "stored", Ops.LOAD, lane(0, l0=1), UB.RACY_READ)
  assert "write after read" in o.reason

def test_barrier_scope_local_is_the_old_rule_that_orders_locals_only():
  """emulate(barrier_scope="local"), a portability check and not the spec: a BARRIER orders locals only (OpenCL's
  barrier(CLK_LOCAL_MEM_FENCE) read literally), so the GROUP update that the spec defines is a write-after-read race
  there (the other threads' reads of b[g] are undefined); the spec's default scope is "workgroup"."""
  p, _ = _group_update(barrier=True)
  assert emulate(p, [np.array([10, 20], np.int32)], barrier_scope="workgroup").buffers[0].tolist() == [11, 21]
  with pytest.raises(UndefinedBehavior) as e: emulate(p, [np.array([10, 20], np.int32)], barrier_scope="local")
  assert (e.value.kind, e.value.origin.op) == (UB.RACY_READ, Ops.LOAD) and "write after read" in e.value.origin.reason
  with pytest.raises(ValueError, match="barrier_scope"): emulate(p, [np.zeros(2, np.int32)], barrier_scope="global")

def test_a_global_exchange_across_a_barrier_is_defined():
  """Rule (BARRIER): thread l stores buf[4g + l], BARRIER, then loads buf[4g + 3 - l]: each thread reads what another
  thread of its workgroup wrote before the barrier."""
  b = ProgramBuilder("global_exchange")
  out, buf, x = b.global_buf(I32, 8), b.global_buf(I32, 8), b.global_buf(I32, 8)
  b.local_buf(I32, 1)  # a BARRIER needs a workgroup's memory to exist (verifier rule "barrier")
  g, lid = b.gidx(0, 2), b.lidx(0, 4)
  base = mul(b, g, c32(b, 4))
  b.store(buf, add(b, base, lid), b.load(x, add(b, base, lid)))
  b.barrier()
  b.store(out, add(b, base, lid), b.load(buf, add(b, base, b.alu(Ops.SUB, c32(b, 3), lid))))
  res = emulate(b.build(), [zeros(8), zeros(8), iota(8) * 7])
  assert res.buffers[0].tolist() == (iota(8) * 7).reshape(2, 4)[:, ::-1].ravel().tolist() and not res.events

def test_a_barrier_does_not_order_threads_of_different_workgroups():
  """Rule (RACE): thread 0 of workgroup 0 writes buf[0], every workgroup passes a BARRIER, thread 0 of workgroup 1 reads
  buf[0]: a race (a barrier orders only its own workgroup), named after the workgroup whose write it was."""
  b = ProgramBuilder("cross_group")
  out, buf = b.global_buf(I32, 2), b.global_buf(I32, 1)
  b.local_buf(I32, 1)
  g, lid = b.gidx(0, 2), b.lidx(0, 2)
  first = b.alu(Ops.CMPLT, add(b, g, lid), c32(b, 1))
  b.store(buf, c32(b, 0), c32(b, 5), gate=first)
  b.barrier()
  ld = b.load(buf, c32(b, 0))
  b.store(out, g, ld, gate=b.alu(Ops.CMPLT, lid, c32(b, 1)))
  with pytest.raises(UndefinedBehavior) as e: emulate(b.build(), [zeros(2), zeros(1)])
  o = e.value.origin
  assert (o.uop_index, o.lane) == (ld, lane(1, l0=0)) and "of workgroup 0" in o.reason, o.reason

def test_barrier_reached_by_some_workgroups_orders_only_those():
  # loop `for r < g` holds a barrier: workgroup 1 passes it once, workgroup 0 never. Thread 0 writes tmp[0] before the
  # loop and thread 1 reads it after: ordered in workgroup 1, a race in workgroup 0
  b = ProgramBuilder("partial_barrier")
  out = b.global_buf(I32, 4)
  tmp = b.local_buf(I32, 2)
  g, lid = b.gidx(0, 2), b.lidx(0, 2)
  b.store(tmp, c32(b, 0), add(b, g, c32(b, 10)), gate=b.alu(Ops.CMPLT, lid, c32(b, 1)))
  with b.loop_uops(c32(b, 0), g):
    b.barrier()
  ld = b.load(tmp, c32(b, 0))
  b.store(out, add(b, mul(b, g, c32(b, 2)), lid), ld)
  p = b.build()
  with pytest.raises(UndefinedBehavior) as e: emulate(p, [zeros(4)])
  assert (e.value.origin.uop_index, e.value.origin.lane, e.value.count) == (ld, lane(0, l0=1), 1)
  res = emulate(p, [zeros(4)], strict=False)
  assert res.undefined[0].tolist() == [False, True, False, False]
  np.testing.assert_array_equal(res.buffers[0][[0, 2, 3]], [10, 11, 11])

def test_vector_accesses_to_locals_through_data_dependent_indices():
  # tmp[2*perm[l] .. +1] = (a[2l], a[2l+1]) as a 2-vector at a loaded index; barrier; out[2l..] = tmp[2l..]
  L = 4
  b = ProgramBuilder("local_vec")
  out, a, perm = b.global_buf(I32, 2 * L), b.global_buf(I32, 2 * L), b.global_buf(I32, L)
  tmp = b.local_buf(I32, 2 * L)
  lid = b.lidx(0, L)
  two_l = mul(b, lid, c32(b, 2))
  b.store(tmp, mul(b, b.load(perm, lid), c32(b, 2)), b.load(a, two_l, count=2))
  b.barrier()
  b.store(out, two_l, b.load(tmp, two_l, count=2))
  x, pm = iota(2 * L) * 3, np.array([2, 0, 3, 1], np.int32)
  res = emulate(b.build(), [zeros(2 * L), x, pm])
  want = np.zeros((L, 2), np.int32)
  want[pm] = x.reshape(L, 2)
  np.testing.assert_array_equal(res.buffers[0], want.ravel())

def test_int_vars_outside_their_declared_range_are_rejected():
  b = ProgramBuilder("var")
  out = b.global_buf(I32, 1)
  b.store(out, c32(b, 0), b.var("v", 0, 3))
  with pytest.raises(ValueError, match="outside its declared range"): emulate(b.build(), [zeros(1)], vals=[4])


@given(gs=st.tuples(st.integers(1, 4), st.integers(1, 2)), ls=st.integers(1, 4),
       coef=st.lists(st.integers(-6, 6), min_size=3, max_size=3), rc=st.integers(-4, 4), trips=st.integers(1, 3))
def test_race_freedom_proof_is_sound_and_tracking_finds_every_write_write_race(gs, ls, coef, rc, trips):
  # every thread stores its id at  off + c0*gidx0 + c1*gidx1 + c2*lidx0 + rc*r  for r < trips. Brute force over the
  # (thread, r) pairs says whether two threads share an element: a proof of freedom must never hold when they do, and
  # strict mode must raise exactly when they do (otherwise the last iteration's writes are what remains)
  sizes = (gs[0], gs[1], ls)
  ids = np.indices((gs[1], gs[0], ls)).reshape(3, -1)  # lane order: gidx1, gidx0, lidx0
  tid = np.arange(ids.shape[1])
  base = coef[0] * ids[1] + coef[1] * ids[0] + coef[2] * ids[2]
  addr = base[:, None] + rc * np.arange(trips)
  off = -addr.min()
  addr = addr + off
  size = int(addr.max()) + 1
  owners = {}
  for t, row in zip(tid, addr):
    for x in row: owners.setdefault(int(x), set()).add(int(t))
  shared = any(len(o) > 1 for o in owners.values())
  b = ProgramBuilder("races")
  out = b.global_buf(I32, size)
  g0, g1, l0 = b.gidx(0, sizes[0]), b.gidx(1, sizes[1]), b.lidx(0, sizes[2])
  t = add(b, mul(b, add(b, mul(b, g1, c32(b, sizes[0])), g0), c32(b, sizes[2])), l0)
  idx = add(b, add(b, add(b, mul(b, g0, c32(b, coef[0])), mul(b, g1, c32(b, coef[1]))), mul(b, l0, c32(b, coef[2]))), c32(b, off))
  with b.loop(trips) as r:
    b.store(out, add(b, idx, mul(b, r, c32(b, rc))), t)
  p = b.build()
  if out in race_free(p, analyze(p), Grid(p.global_size, p.local_size)): assert not shared
  if shared:
    with pytest.raises(UndefinedBehavior, match="write/write"): emulate(p, [zeros(size) - 1])
  else:
    want = np.full(size, -1, np.int32)
    want[addr.ravel()] = np.repeat(tid, trips)
    np.testing.assert_array_equal(emulate(p, [zeros(size) - 1]).buffers[0], want)


def test_upcast_stores_shifted_by_constants_are_proven_race_free():
  # tinygrad's upcast store: thread t writes a 4-vector at 4t + 64k, one STORE per k < 4 (16 threads): an element is
  # one (t, k, w), so no tracking is needed; with 8t the copies of neighbouring threads overlap and the proof must fail
  for scale, free_expected in ((4, True), (8, False)):
    b = ProgramBuilder("upcast")
    out, a = b.global_buf(I32, 8 * 16 + 4 * 64), b.global_buf(I32, 4)
    t = b.gidx(0, 16)
    v = b.load(a, c32(b, 0), count=4)
    for k in range(4): b.store(out, add(b, mul(b, t, c32(b, scale)), c32(b, 64 * k)), v)
    p = b.build()
    assert (out in race_free(p, analyze(p), Grid(p.global_size, p.local_size))) == free_expected


def shifted_stores_check(gs: int, ls: int, coef: list[int], shifts: list[int], width: int) -> None:
  """Every thread stores its id as a `width`-vector at  off + c0*gidx0 + c1*lidx0 + shift, one STORE per shift.
  Brute force over (thread, shift, element) says whether two threads share an element: a proof of freedom must never
  hold when they do, and strict mode must raise exactly when they do."""
  ids = np.indices((gs, ls)).reshape(2, -1)
  tid = np.arange(ids.shape[1])
  addr = (coef[0] * ids[0] + coef[1] * ids[1])[:, None, None] + np.array(shifts)[:, None] + np.arange(width)
  off = -addr.min()
  addr = (addr + off).reshape(len(tid), -1)
  size = int(addr.max()) + 1
  owners: dict[int, set[int]] = {}
  for t, row in zip(tid, addr):
    for x in row: owners.setdefault(int(x), set()).add(int(t))
  shared = any(len(o) > 1 for o in owners.values())
  b = ProgramBuilder("copies")
  out = b.global_buf(I32, size)
  g0, l0 = b.gidx(0, gs), b.lidx(0, ls)
  t = add(b, mul(b, g0, c32(b, ls)), l0)
  value = b.vectorize(*[t] * width) if width > 1 else t
  idx = add(b, add(b, mul(b, g0, c32(b, coef[0])), mul(b, l0, c32(b, coef[1]))), c32(b, off))
  for shift in shifts: b.store(out, add(b, idx, c32(b, shift)), value)
  p = b.build()
  if out in race_free(p, analyze(p), Grid(p.global_size, p.local_size)): assert not shared
  if shared:
    with pytest.raises(UndefinedBehavior, match="write/write"): emulate(p, [zeros(size) - 1])

@given(gs=st.integers(1, 6), ls=st.integers(1, 4), coef=st.lists(st.integers(-8, 8), min_size=2, max_size=2),
       step=st.integers(-9, 9), copies=st.integers(2, 4), width=st.integers(1, 2))
def test_race_freedom_proof_is_sound_on_stores_shifted_by_constants(gs, ls, coef, step, copies, width):
  # one STORE per k < copies at a shift of step * k (shifted_stores_check says what must hold)
  shifted_stores_check(gs, ls, coef, [step * k for k in range(copies)], width)


def test_upcast_stores_shifted_by_a_lattice_of_constants_are_proven_race_free():
  # tinygrad's transformer matmul stores a 4-vector at 2048 g + 256 l0 + 4 l1 + 64 i + 4096 j for i, j < 4 (one STORE
  # per (i, j)): the constants are a lattice of steps 64 and 4096, and with the thread terms they are one mixed radix,
  # so an element is one (thread, i, j, w). With a step of 32 instead of 64, copy i + 1 of lidx1 = l meets copy i of
  # lidx1 = l + 8 (4 (l + 8) = 4 l + 32), and the proof must fail
  assert lattice([64 * i + 4096 * j for i in range(4) for j in range(4)]) == [(64, 4), (4096, 4)]
  assert lattice([0, 1, 5]) is None
  for step, free_expected in ((64, True), (32, False)):
    b = ProgramBuilder("lattice")
    out, a = b.global_buf(F32, 4 * 4096), b.global_buf(F32, 4)
    g, l0, l1 = b.gidx(0, 2), b.lidx(0, 8), b.lidx(1, 16)
    base = add(b, add(b, mul(b, g, c32(b, 2048)), mul(b, l0, c32(b, 256))), mul(b, l1, c32(b, 4)))
    v = b.load(a, c32(b, 0), count=4)
    for i in range(4):
      for j in range(4): b.store(out, add(b, base, c32(b, step * i + 4096 * j)), v)
    p = b.build()
    assert (out in race_free(p, analyze(p), Grid(p.global_size, p.local_size))) == free_expected

@given(gs=st.integers(1, 4), ls=st.integers(1, 4), coef=st.lists(st.integers(-8, 8), min_size=2, max_size=2),
       steps=st.lists(st.tuples(st.integers(1, 30), st.integers(2, 3)), min_size=2, max_size=2), width=st.integers(1, 2))
def test_race_freedom_proof_is_sound_on_stores_shifted_by_a_lattice_of_constants(gs, ls, coef, steps, width):
  # one STORE per (k1, k2) at a shift of s1 * k1 + s2 * k2 (shifted_stores_check says what must hold)
  (s1, n1), (s2, n2) = steps
  shifted_stores_check(gs, ls, coef, [s1 * k1 + s2 * k2 for k1 in range(n1) for k2 in range(n2)], width)

# ***** race freedom by phases and pins (refimpl/emulator/ownership.py) *****

def grouped_sum(L: int, barrier: bool, finishers: int):
  """tinygrad's grouped reduction: tmp[l] = a[g*L + l]; [BARRIER]; on threads l < finishers: out[g] = tmp[0] + ... +
  tmp[L-1], in order."""
  b = ProgramBuilder("grouped")
  out, a = b.global_buf(F32, 2), b.global_buf(F32, 2 * L)
  tmp = b.local_buf(F32, L)
  g, lid = b.gidx(0, 2), b.lidx(0, L)
  b.store(tmp, lid, b.load(a, add(b, mul(b, g, c32(b, L)), lid)))
  if barrier: b.barrier()
  with b.when(b.alu(Ops.CMPLT, lid, c32(b, finishers))):
    acc = b.acc(b.const(0.0, F32))
    with b.loop(L) as r: b.assign(acc, b.alu(Ops.ADD, acc, b.load(tmp, r)))
    b.store(out, g, acc)
  return b.build(), out, tmp

def test_race_freedom_phases_and_pins_clear_a_grouped_reduction():
  # phases: the local is written before the BARRIER and only read after it; pins: only lidx0 == 0 stores out[g], so
  # one thread owns each element. Both are cleared, and the sum is the in-order one. Without the barrier the local's
  # accesses share a phase (thread 0 reads what threads 1.. wrote: a race, which tracking finds); with two finishing
  # threads out[g] has two writers (of the same bits: defined, but tracked)
  a = (np.arange(16, dtype=np.float32) * 0.1 + 0.05).astype(np.float32)
  want = [np.float32(0)] * 2
  for g in range(2):
    for x in a[8 * g:8 * g + 8]: want[g] = np.float32(want[g] + x)
  for barrier, finishers, cleared in ((True, 1, {"out", "tmp"}), (False, 1, {"out"}), (True, 2, {"tmp"})):
    p, out, tmp = grouped_sum(8, barrier, finishers)
    free = race_free(p, analyze(p), Grid(p.global_size, p.local_size))
    assert {name for name, buf in (("out", out), ("tmp", tmp)) if buf in free} == cleared
    if barrier: np.testing.assert_array_equal(emulate(p, [zeros(2, np.float32), a]).buffers[0], want)
    else:
      with pytest.raises(UndefinedBehavior, match="race"): emulate(p, [zeros(2, np.float32), a])

def test_race_freedom_pins_are_the_thread_ids_a_gate_is_true_on_one_value_of():
  # pins evaluates a gate with the ALU's rules on every combination of the ids it reads (axis ids: gidx0 2, lidx0 5)
  b = ProgramBuilder("gates")
  buf = b.global_buf(I32, 1)
  g, lid = b.gidx(0, 4), b.lidx(0, 8)
  true = b.const(True, dtypes.bool)
  cases = {
    b.alu(Ops.CMPNE, b.cast(lid, dtypes.bool), true): {5: 0},  # tinygrad's `!(bool)lidx0`
    b.alu(Ops.CMPLT, lid, c32(b, 1)): {5: 0},
    b.alu(Ops.CMPLT, lid, c32(b, 2)): {},  # true on two values
    b.alu(Ops.AND, b.alu(Ops.CMPNE, b.alu(Ops.CMPNE, lid, c32(b, 3)), true),
          b.alu(Ops.CMPLT, c32(b, 2), g)): {5: 3, 2: 3},
    b.alu(Ops.CMPLT, b.load(buf, c32(b, 0)), lid): {},  # reads memory
    b.alu(Ops.CMPLT, b.alu(Ops.IDIV, c32(b, 8), lid), c32(b, 1)): {},  # undefined on lidx0 == 0
    b.alu(Ops.CMPLT, lid, c32(b, 0)): {},  # never true: fixes nothing
  }
  p = b.build()
  assert {gate: pins(p, gate) for gate in cases} == cases


GATES = st.sampled_from([None, ("eq", 0), ("eq", 2), ("lt", 1), ("lt", 3)])

def _gate(b: ProgramBuilder, lid: int, gate) -> int | None:
  if gate is None: return None
  op, k = gate
  if op == "lt": return b.alu(Ops.CMPLT, lid, c32(b, k))
  return b.alu(Ops.CMPNE, b.alu(Ops.CMPNE, lid, c32(b, k)), b.const(True, dtypes.bool))

def _holds(gate, lid: int) -> bool: return gate is None or (lid == gate[1] if gate[0] == "eq" else lid < gate[1])

@given(threads=st.integers(1, 5), store=st.tuples(st.integers(-2, 2), st.integers(0, 3)),
       load=st.tuples(st.integers(-2, 2), st.integers(0, 3)), gates=st.tuples(GATES, GATES), barrier=st.booleans())
def test_race_freedom_proof_with_phases_and_pins_is_sound(threads, store, load, gates, barrier):
  # in each of 2 workgroups, thread l stores l + 1 at tmp[a*l + s] under an IF of its gate, then (after a BARRIER or
  # not) loads tmp[c*l + t] under a gated LOAD (else 0) and writes it to out[thread]. Brute force over the threads
  # says whether two of them race (the same element, one writing, no barrier between) and whether a read finds an
  # element nobody wrote: a proof of freedom must never hold when they race, strict mode must raise exactly when the
  # program is undefined, and otherwise out holds the value each thread read
  L, (a, s), (c, t) = threads, store, load
  sh_s, sh_t = max(0, -a * (L - 1)), max(0, -c * (L - 1))
  stored = {lid: a * lid + s + sh_s for lid in range(L) if _holds(gates[0], lid)}
  loaded = {lid: c * lid + t + sh_t for lid in range(L) if _holds(gates[1], lid)}
  size = max([*stored.values(), *loaded.values(), 0]) + 1
  writers: dict[int, set[int]] = {}
  for lid, x in stored.items(): writers.setdefault(x, set()).add(lid)
  race = any(len(w) > 1 for w in writers.values())
  race |= not barrier and any(writers.get(x, {lid}) != {lid} for lid, x in loaded.items())
  unset = any(x not in writers for x in loaded.values())
  b = ProgramBuilder("phases")
  out = b.global_buf(I32, 2 * L)
  tmp = b.local_buf(I32, size)
  g, lid = b.gidx(0, 2), b.lidx(0, L)
  with b.when(_gate(b, lid, gates[0])) if gates[0] else contextlib.nullcontext():
    b.store(tmp, add(b, mul(b, lid, c32(b, a)), c32(b, s + sh_s)), add(b, lid, c32(b, 1)))
  if barrier: b.barrier()
  v = b.load(tmp, add(b, mul(b, lid, c32(b, c)), c32(b, t + sh_t)), gate=_gate(b, lid, gates[1]))
  b.store(out, add(b, mul(b, g, c32(b, L)), lid), v)
  p = b.build()
  if tmp in race_free(p, analyze(p), Grid(p.global_size, p.local_size)): assert not race
  if race or unset:
    with pytest.raises(UndefinedBehavior): emulate(p, [zeros(2 * L)])
  else:
    want = [min(writers[loaded[lid]]) + 1 if lid in loaded else 0 for lid in range(L)] * 2
    np.testing.assert_array_equal(emulate(p, [zeros(2 * L)]).buffers[0], want)


@given(st.lists(st.integers(0, 63), min_size=0, max_size=40), st.integers(1, 4))
def test_an_element_touched_twice_by_one_op_is_found_in_any_position(addresses, count):
  """Rule (memory.Memory.touched_twice, the start of the same-op write and read checks): an op touches an element twice
  exactly when two of its (lane, vector element) addresses are equal, wherever they stand in the op's (L, count) array;
  the verdict does not depend on what the scratch slots held before."""
  from refimpl.emulator.memory import Memory
  mem = Memory("data0", dtypes.int32, 64, np.zeros(64, np.int32), Grid((1, 1, 1), (1, 1, 1)), False, True, True)
  lanes = len(addresses) // count
  e = np.array(addresses[:lanes * count], dtype=np.int64).reshape(lanes, count)
  want = len(set(e.ravel().tolist())) < e.size
  assert mem.touched_twice(e) == want
  mem.touched_twice(np.arange(64)[::-1].reshape(64, 1))  # the scratch slots as an earlier op leaves them
  assert mem.touched_twice(e) == want
