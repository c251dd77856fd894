"""Memory bound (refimpl/emulator/machine.py): a launch whose lanes do not fit in LANE_MEMORY runs in chunks of whole
workgroups, one after another, and that must never show: outputs, masks, races between threads of different chunks and
the strict-mode report are those of the launch run in one piece. A launch whose single workgroup does not fit in a chunk
is refused up front. Each test names the rule its expected value comes from."""
from __future__ import annotations

import numpy as np
import pytest

from refimpl.dtype import dtypes
from refimpl.emulator import settings
from refimpl.emulator.indexing import Grid
from refimpl.emulator.machine import LaunchTooLarge, emulate
from refimpl.emulator.plan import Plan
from refimpl.fuzz.generate import Profile, generate
from refimpl.ir import Ops, ProgramBuilder
from refimpl.testing.programs import emulation_outcome

I32 = dtypes.int32


def _chunks_of(monkeypatch, program, groups: int) -> None:
  """Shrinks LANE_MEMORY so that `program` runs in chunks of `groups` workgroups (and must be chunked)."""
  plan = Plan.of(program, ())
  bound = settings.CHUNK_SHARE * groups * plan.grid.group * plan.lane_bytes
  assert plan.grid.lanes * plan.lane_bytes > bound, "the launch must not fit in one piece"
  monkeypatch.setattr(settings, "LANE_MEMORY", bound)




@pytest.mark.parametrize("most", [1, 2, 6, 7, 24, 60, 1000])
def test_chunks_are_runs_of_whole_workgroups_covering_the_launch(most):
  """Grid.chunks: every thread of the launch in exactly one chunk, in thread order; a chunk is whole workgroups, at most
  `most` lanes, and its threads are consecutive (base .. base + lanes - 1)."""
  grid = Grid((3, 5, 2), (2, 1, 1))  # 30 workgroups of 2 threads
  chunks = grid.chunks(most)
  if most < grid.group:
    assert chunks == []
    return
  assert sum(c.lanes for c in chunks) == grid.lanes
  assert [c.base for c in chunks] == list(np.cumsum([0] + [c.lanes for c in chunks[:-1]]))
  for c in chunks:
    assert c.lanes <= most and c.lanes % grid.group == 0
    first, last = c.thread(0), c.thread(c.lanes - 1)
    assert first == grid.thread(c.base) and last == grid.thread(c.base + c.lanes - 1)


def _gid_program():
  """out[g * 4 + l] = (gidx1 * 8 + gidx0) * 100 + lidx0, through a local exchanged after a barrier: the 2-D grid and the
  locals of every chunk must see the launch's ids."""
  b = ProgramBuilder("gids")
  out = b.global_buf(I32, 8 * 4 * 4)
  tmp = b.local_buf(I32, 4)
  g0, g1, lid = b.gidx(0, 8), b.gidx(1, 4), b.lidx(0, 4)
  g = b.alu(Ops.ADD, b.alu(Ops.MUL, g1, b.const(8, I32)), g0)
  b.store(tmp, lid, b.alu(Ops.ADD, b.alu(Ops.MUL, g, b.const(100, I32)), lid))
  b.barrier()
  back = b.alu(Ops.MOD, b.alu(Ops.ADD, lid, b.const(1, I32)), b.const(4, I32))
  b.store(out, b.alu(Ops.ADD, b.alu(Ops.MUL, g, b.const(4, I32)), lid), b.load(tmp, back))
  return b.build()


@pytest.mark.parametrize("groups", [1, 3, 5])
def test_chunked_launch_sees_the_launch_thread_ids(groups, monkeypatch):
  """SPECIAL: gidx/lidx are the thread's position in the launch, whichever chunk runs it; BARRIER orders a workgroup's
  local writes before its reads. So out[g*4 + l] = g*100 + (l+1) % 4 for the workgroup g = gidx1*8 + gidx0."""
  p = _gid_program()
  _chunks_of(monkeypatch, p, groups)
  got = emulate(p, [np.zeros(128, np.int32)]).buffers[0].reshape(32, 4)
  g, lid = np.arange(32)[:, None], np.arange(4)[None, :]
  np.testing.assert_array_equal(got, g * 100 + (lid + 1) % 4)


def test_race_between_threads_of_different_chunks_is_found(monkeypatch):
  """Races: two threads writing one element with no barrier between is undefined, whichever chunks they are in. Every
  thread stores out[0]: the finding is at the first thread, and its count is every thread of the launch's execution."""
  b = ProgramBuilder("ww")
  out = b.global_buf(I32, 1)
  b.store(out, b.const(0, I32), b.gidx(0, 64))
  p = b.build()
  whole = emulation_outcome(p, [np.zeros(1, np.int32)])
  _chunks_of(monkeypatch, p, 4)
  assert emulation_outcome(p, [np.zeros(1, np.int32)]) == whole
  assert whole[0] == "UB" and "write/write" in whole[5] and whole[6] == 64


def test_strict_mode_reports_the_first_finding_in_launch_order_across_chunks(monkeypatch):
  """Strict mode reports the first undefined operation in the sequential order, which runs each uop on every thread
  before the next uop: the gate a division by zero made undefined in the last workgroup (a STORE at uop k; the IDIV is
  its origin) comes before the store of a shift by 40 in the first (uop > k)."""
  b = ProgramBuilder("first")
  out = b.global_buf(I32, 64)
  g = b.gidx(0, 64)
  divisor = b.alu(Ops.SUB, b.const(63, I32), g)  # 0 on thread 63 only
  q = b.alu(Ops.IDIV, b.const(7, I32), divisor)
  b.store(out, g, b.const(1, I32), gate=b.alu(Ops.CMPLT, q, b.const(100, I32)))
  count = b.alu(Ops.ADD, b.alu(Ops.MUL, g, b.const(0, I32)), b.const(40, I32))
  shifted = b.alu(Ops.SHL, g, b.alu(Ops.WHERE, b.alu(Ops.CMPLT, g, b.const(1, I32)), count, b.const(1, I32)))
  b.store(out, g, shifted)
  p = b.build()
  whole = emulation_outcome(p, [np.zeros(64, np.int32)])
  assert whole[0] == "UB" and whole[1] is Ops.STORE and whole[3][0] == 63 and "division by zero" in whole[7]
  _chunks_of(monkeypatch, p, 4)
  assert emulation_outcome(p, [np.zeros(64, np.int32)]) == whole


@pytest.mark.parametrize("seed", [3])
def test_chunked_launch_matches_one_piece_on_generated_programs(seed, monkeypatch):
  """Fuzzer programs with several workgroups (locals, barriers, loops, undefined behaviour left in): chunks of one
  workgroup give the outputs, masks, events and strict-mode report of the launch run in one piece."""
  checked = 0
  for index in range(60):
    g, arrays, vals = generate(seed, index, Profile(barrier=True))
    p = g.program(check=False)
    plan = Plan.of(p, tuple(vals))
    if plan.grid.workgroups < 2: continue
    inputs = [arrays[id(buf)] for buf in g.globals()]
    for strict in (True, False):
      monkeypatch.setattr(settings, "LANE_MEMORY", 1 << 30)
      whole = emulation_outcome(p, inputs, vals, strict)
      monkeypatch.setattr(settings, "LANE_MEMORY", settings.CHUNK_SHARE * plan.grid.group * plan.lane_bytes)
      assert emulation_outcome(p, inputs, vals, strict) == whole, f"seed {seed} program {index} strict={strict}"
    checked += 1
  assert checked >= 10


def test_a_workgroup_larger_than_a_chunk_is_refused(monkeypatch):
  """Memory bound: the lanes of one workgroup run together (BARRIER), so a launch whose workgroup alone does not fit in
  a chunk is refused before anything runs, with the bound named."""
  p = _gid_program()
  plan = Plan.of(p, ())
  monkeypatch.setattr(settings, "LANE_MEMORY", settings.CHUNK_SHARE * (plan.grid.group - 1) * plan.lane_bytes)
  with pytest.raises(LaunchTooLarge, match=r"one workgroup of 4 threads.*LANE_MEMORY"):
    emulate(p, [np.zeros(128, np.int32)])


def test_a_finding_in_a_local_names_the_launch_workgroup(monkeypatch):
  """Locals: reading an element of a local no thread of the workgroup wrote is undefined. Workgroup 5 of 8 skips its
  writes, so the finding names workgroup 5, however the launch is chunked (locals are per workgroup, fresh per chunk)."""
  b = ProgramBuilder("uninit")
  out = b.global_buf(I32, 32)
  tmp = b.local_buf(I32, 4)
  g, lid = b.gidx(0, 8), b.lidx(0, 4)
  b.store(tmp, lid, lid, gate=b.alu(Ops.CMPNE, g, b.const(5, I32)))
  b.barrier()
  b.store(out, b.alu(Ops.ADD, b.alu(Ops.MUL, g, b.const(4, I32)), lid), b.load(tmp, lid))
  p = b.build()
  whole = emulation_outcome(p, [np.zeros(32, np.int32)])
  assert whole[0] == "UB" and "(workgroup 5)" in whole[7]  # the value stored is undefined since that LOAD
  _chunks_of(monkeypatch, p, 1)
  assert emulation_outcome(p, [np.zeros(32, np.int32)]) == whole


@pytest.mark.parametrize("second_barrier", [False, True])
def test_write_after_read_across_chunks_and_barriers_is_found(second_barrier, monkeypatch):
  """Races (RACY_READ): a read that another thread's write races is undefined whichever comes first, chunks or not.
  Globals: thread g reads buf[(g+4) % 64] and buf[g] is written after (a thread of a later chunk writes what an earlier
  one read). Locals: tmp[l] = l, BARRIER, x = tmp[(l+1) % 4], then tmp[l] = x + 1 (defined only with a BARRIER before
  it). The outcome, permissive masks and defined values are those of the launch in one piece."""
  b = ProgramBuilder("war_chunks")
  out, buf = b.global_buf(I32, 128), b.global_buf(I32, 64)
  tmp = b.local_buf(I32, 4)
  g0, g1, lid = b.gidx(0, 8), b.gidx(1, 2), b.lidx(0, 4)
  g = b.alu(Ops.ADD, b.alu(Ops.MUL, b.alu(Ops.ADD, b.alu(Ops.MUL, g1, b.const(8, I32)), g0), b.const(4, I32)), lid)
  x = b.load(buf, b.alu(Ops.MOD, b.alu(Ops.ADD, g, b.const(4, I32)), b.const(64, I32)))
  b.store(buf, g, b.const(5, I32))
  b.store(out, g, x)
  b.store(tmp, lid, lid)
  b.barrier()
  y = b.load(tmp, b.alu(Ops.AND, b.alu(Ops.ADD, lid, b.const(1, I32)), b.const(3, I32)))
  if second_barrier: b.barrier()
  b.store(tmp, lid, b.alu(Ops.ADD, y, b.const(1, I32)))
  b.barrier()
  b.store(out, b.alu(Ops.ADD, g, b.const(64, I32)), b.load(tmp, lid))
  p = b.build()
  args = lambda: [np.zeros(128, np.int32), np.arange(64, dtype=np.int32)]
  whole, loose = emulation_outcome(p, args()), emulate(p, args(), strict=False)
  assert whole[0] == "UB" and "write after read" in whole[7]
  assert loose.undefined[0][:64].all() and loose.undefined[0][64:].tolist() == [not second_barrier] * 64
  _chunks_of(monkeypatch, p, 2)
  assert emulation_outcome(p, args()) == whole
  chunked = emulate(p, args(), strict=False)
  assert [c.tolist() for c in chunked.undefined] == [c.tolist() for c in loose.undefined]
  for x, y, undefined in zip(chunked.buffers, loose.buffers, loose.undefined):  # undefined elements may differ
    np.testing.assert_array_equal(x[~undefined], y[~undefined])
