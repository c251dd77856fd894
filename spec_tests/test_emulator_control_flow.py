"""Control flow in the emulator's executor: IF blocks, gated LOAD/STORE, loops whose bounds differ per thread, accumulators
under masks, ALU undefined behaviour on active vs inactive lanes, and how permissive mode carries undefined values
through selects, gates and blocks (refimpl/emulator/machine.py). Expected values come from plain Python on the inputs."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from refimpl import UndefinedBehavior
from refimpl.dtype import dtypes
from refimpl.emulator import blocks, settings
from refimpl.emulator.indexing import Grid
from refimpl.emulator.machine import emulate
from refimpl.emulator.plan import Plan
from refimpl.ir import Ops, ProgramBuilder
from refimpl.testing.programs import emulation_outcome

I32, F32 = dtypes.int32, dtypes.float32
rng = np.random.default_rng(99)

def c32(b: ProgramBuilder, v: int) -> int: return b.const(v, I32)
def add(b, x, y): return b.alu(Ops.ADD, x, y)
def lt(b, x, y): return b.alu(Ops.CMPLT, x, y)
def zeros(n: int, dt=np.int32) -> np.ndarray: return np.zeros(n, dt)
def ints(n: int, lo: int = -50, hi: int = 50) -> np.ndarray: return rng.integers(lo, hi, n).astype(np.int32)
def lane(g0=0, g1=0, g2=0, l0=0, l1=0, l2=0) -> tuple[int, ...]: return (g0, g1, g2, l0, l1, l2)


def test_if_block_runs_only_on_threads_whose_gate_is_true():
  # if a[i] < 0: out[i] = -a[i]  (other elements keep their old value)
  n = 32
  b = ProgramBuilder("absneg")
  out, a = b.global_buf(I32, n), b.global_buf(I32, n)
  i = b.gidx(0, n)
  x = b.load(a, i)
  with b.when(lt(b, x, c32(b, 0))):
    b.store(out, i, b.alu(Ops.NEG, x))
  xs = ints(n)
  res = emulate(b.build(), [np.full(n, 777, np.int32), xs])
  np.testing.assert_array_equal(res.buffers[0], np.where(xs < 0, -xs, 777))

def test_nested_if_blocks_and_a_uniform_gate():
  # if i < 20: { if i % 2 == 0 (as i % 2 < 1): out[i] = 1 ; if true: out2[i] = 2 }; if false: out2[i] = 3
  n = 32
  b = ProgramBuilder("nested")
  out, out2 = b.global_buf(I32, n), b.global_buf(I32, n)
  i = b.gidx(0, n)
  with b.when(lt(b, i, c32(b, 20))):
    with b.when(lt(b, b.alu(Ops.MOD, i, c32(b, 2)), c32(b, 1))):
      b.store(out, i, c32(b, 1))
    with b.when(b.const(True, dtypes.bool)):
      b.store(out2, i, c32(b, 2))
  with b.when(b.const(False, dtypes.bool)):
    b.store(out2, i, c32(b, 3))
  res = emulate(b.build(), [zeros(n), zeros(n)])
  k = np.arange(n)
  np.testing.assert_array_equal(res.buffers[0], ((k < 20) & (k % 2 == 0)).astype(np.int32))
  np.testing.assert_array_equal(res.buffers[1], np.where(k < 20, 2, 0))

def test_gated_load_yields_the_alternative_where_the_gate_is_false():
  # out[i] = i > 0 ? a[i-1] : -7   (a[-1] is never accessed: a false gate does no access)
  n = 16
  b = ProgramBuilder("shift")
  out, a = b.global_buf(I32, n), b.global_buf(I32, n)
  i = b.gidx(0, n)
  b.store(out, i, b.load(a, add(b, i, c32(b, -1)), gate=lt(b, c32(b, 0), i), alt=c32(b, -7)))
  xs = ints(n)
  res = emulate(b.build(), [zeros(n), xs])
  np.testing.assert_array_equal(res.buffers[0], np.concatenate([[-7], xs[:-1]]))

def test_gated_store_writes_only_where_the_gate_is_true():
  n = 16
  b = ProgramBuilder("gstore")
  out, a = b.global_buf(I32, n), b.global_buf(I32, n)
  i = b.gidx(0, n)
  x = b.load(a, i)
  b.store(out, i, add(b, x, x), gate=lt(b, c32(b, 0), x))
  xs = ints(n)
  res = emulate(b.build(), [np.full(n, 5, np.int32), xs])
  np.testing.assert_array_equal(res.buffers[0], np.where(xs > 0, 2 * xs, 5))

def test_loop_bounds_that_differ_per_thread_run_each_thread_its_own_trip_count():
  # out[i] = sum(a[r] for r in range(i, i + i % 4)): start and end both depend on the thread
  n = 16
  b = ProgramBuilder("perthread")
  out, a = b.global_buf(I32, n), b.global_buf(I32, n + 4)
  i = b.gidx(0, n)
  acc = b.acc(c32(b, 0))
  with b.loop_uops(i, add(b, i, b.alu(Ops.MOD, i, c32(b, 4)))) as r:
    b.assign(acc, add(b, acc, b.load(a, r)))
  b.store(out, i, acc)
  xs = ints(n + 4)
  res = emulate(b.build(), [zeros(n), xs])
  np.testing.assert_array_equal(res.buffers[0], [xs[k:k + k % 4].sum() for k in range(n)])

def test_accumulator_assigned_inside_an_if_keeps_its_value_on_other_threads():
  # acc = 0; for r < 8: if a[i*8 + r] > 0: acc = acc + a[i*8 + r]  -> the sum of the positive elements of each row
  n, K = 8, 8
  b = ProgramBuilder("possum")
  out, a = b.global_buf(I32, n), b.global_buf(I32, n * K)
  i = b.gidx(0, n)
  acc = b.acc(c32(b, 0))
  with b.loop(K) as r:
    x = b.load(a, add(b, b.alu(Ops.MUL, i, c32(b, K)), r))
    with b.when(lt(b, c32(b, 0), x)):
      b.assign(acc, add(b, acc, x))
  b.store(out, i, acc)
  xs = ints(n * K)
  res = emulate(b.build(), [zeros(n), xs])
  np.testing.assert_array_equal(res.buffers[0], np.where(xs > 0, xs, 0).reshape(n, K).sum(axis=1))

def test_loop_that_runs_zero_times_leaves_the_accumulator_at_its_initial_value():
  b = ProgramBuilder("empty")
  out = b.global_buf(I32, 1)
  acc = b.acc(c32(b, 41))
  with b.loop_uops(c32(b, 5), c32(b, 2)):
    b.assign(acc, c32(b, 0))
  b.store(out, c32(b, 0), acc)
  assert emulate(b.build(), [zeros(1)]).buffers[0][0] == 41


# ***** ALU undefined behaviour: active lanes only *****

def divide_program(n: int, guarded: bool):
  """out[i] = a[i] / b[i] (IDIV), optionally inside `if b[i] != 0`."""
  b = ProgramBuilder("div")
  out, a, d = b.global_buf(I32, n), b.global_buf(I32, n), b.global_buf(I32, n)
  i = b.gidx(0, n)
  x, y = b.load(a, i), b.load(d, i)
  if guarded:
    with b.when(b.alu(Ops.CMPNE, y, c32(b, 0))):
      q = b.alu(Ops.IDIV, x, y)
      b.store(out, i, q)
  else:
    q = b.alu(Ops.IDIV, x, y)
    b.store(out, i, q)
  return b.build(), q

def test_alu_undefined_behaviour_names_the_uop_the_first_lane_and_its_operands():
  # division by zero at threads 5 and 9 (DIVISOR_ZERO, deferred): strict mode raises at the STORE of the quotient, its
  # origin the IDIV with thread 5 and its operands
  p, q = divide_program(12, guarded=False)
  d = np.arange(1, 13, dtype=np.int32)
  d[[5, 9]] = 0
  with pytest.raises(UndefinedBehavior) as e: emulate(p, [zeros(12), np.arange(12, dtype=np.int32) * 3, d])
  o = e.value.origin
  assert (o.op, o.uop_index, o.lane, o.operands, e.value.op, e.value.count) == (Ops.IDIV, q, lane(5), (15, 0), Ops.STORE, 2)

def test_division_by_zero_on_an_inactive_lane_is_not_undefined():
  p, _ = divide_program(12, guarded=True)
  a, d = np.arange(12, dtype=np.int32) * 3, np.arange(12, dtype=np.int32) % 3
  res = emulate(p, [zeros(12) - 1, a, d])
  np.testing.assert_array_equal(res.buffers[0], np.where(d != 0, a // np.where(d == 0, 1, d), -1))

def test_alu_undefined_behaviour_in_a_workgroup_names_the_thread():
  # grid 3 x local 4: thread (g, l) computes 1 << (g*4 + l + 24); the count reaches 32 at g = 2, l = 0
  b = ProgramBuilder("shl")
  out = b.global_buf(I32, 12)
  g, lid = b.gidx(0, 3), b.lidx(0, 4)
  t = add(b, b.alu(Ops.MUL, g, c32(b, 4)), lid)
  sh = b.alu(Ops.SHL, c32(b, 1), add(b, t, c32(b, 24)))
  b.store(out, t, sh)
  with pytest.raises(UndefinedBehavior) as e: emulate(b.build(), [zeros(12)])
  o = e.value.origin  # SHIFT_COUNT is deferred: the STORE of the shifted value is where it is used
  assert (o.uop_index, o.lane, o.operands, e.value.op, e.value.count) == (sh, lane(2, l0=0), (1, 32), Ops.STORE, 4)


# ***** permissive mode: undefined values flow forward *****

def test_permissive_alu_undefined_lane_is_stored_as_an_undefined_element():
  p, q = divide_program(6, guarded=False)
  a, d = np.arange(6, dtype=np.int32) + 10, np.array([1, 2, 0, 3, 0, 5], np.int32)
  res = emulate(p, [zeros(6), a, d], strict=False)
  assert res.undefined[0].tolist() == [False, False, True, False, True, False]
  np.testing.assert_array_equal(res.buffers[0][d != 0], (a // np.where(d == 0, 1, d))[d != 0])
  assert len(res.events) == 1
  ev, o = res.events[0], res.events[0].origin  # DIVISOR_ZERO is deferred: the event is the STORE, the IDIV its origin
  assert (ev.op, ev.use, ev.count, o.op, o.uop_index, o.lane, o.operands) == (Ops.STORE, "stored", 2, Ops.IDIV, q, lane(2),
                                                                                (12, 0))

def test_permissive_where_is_undefined_only_where_it_picks_the_undefined_value():
  # out[i] = d[i] != 0 ? a[i] / d[i] : -1  -> every element defined, although the division had undefined lanes
  n = 6
  b = ProgramBuilder("safe")
  out, a, d = b.global_buf(I32, n), b.global_buf(I32, n), b.global_buf(I32, n)
  i = b.gidx(0, n)
  x, y = b.load(a, i), b.load(d, i)
  b.store(out, i, b.alu(Ops.WHERE, b.alu(Ops.CMPNE, y, c32(b, 0)), b.alu(Ops.IDIV, x, y), c32(b, -1)))
  dv = np.array([1, 0, 2, 0, 3, 4], np.int32)
  res = emulate(b.build(), [zeros(n), np.full(n, 12, np.int32), dv], strict=False)
  assert not res.undefined[0].any()
  np.testing.assert_array_equal(res.buffers[0], [12, -1, 6, -1, 4, 3])
  assert not res.events  # DIVISOR_ZERO is deferred: the WHERE drops the undefined quotient, nothing is used
  assert [(o.op, o.lane) for o in res.deferred] == [(Ops.IDIV, lane(1))]  # the division is an origin: its first lane

def test_permissive_undefined_values_propagate_through_arithmetic_and_casts():
  # q = a / d; out[i] = float(q + 1) * 2: undefined exactly where the division was
  n = 4
  b = ProgramBuilder("prop")
  out, a, d = b.global_buf(F32, n), b.global_buf(I32, n), b.global_buf(I32, n)
  i = b.gidx(0, n)
  q = b.alu(Ops.IDIV, b.load(a, i), b.load(d, i))
  b.store(out, i, b.alu(Ops.MUL, b.cast(add(b, q, c32(b, 1)), F32), b.const(2.0, F32)))
  res = emulate(b.build(), [zeros(n, np.float32), np.full(n, 6, np.int32), np.array([0, 1, 2, 0], np.int32)], strict=False)
  assert res.undefined[0].tolist() == [True, False, False, True]
  np.testing.assert_array_equal(res.buffers[0][1:3], [14.0, 8.0])

def test_permissive_undefined_if_gate_spoils_accumulators_assigned_in_the_block():
  # c = (a[i] / d[i]) < 5 is undefined where d[i] == 0; acc assigned inside `if c` is then undefined on that thread,
  # and the store inside the block does not happen there
  n = 4
  b = ProgramBuilder("spoil")
  out, out2, a, d = b.global_buf(I32, n), b.global_buf(I32, n), b.global_buf(I32, n), b.global_buf(I32, n)
  i = b.gidx(0, n)
  acc = b.acc(c32(b, 100))
  with b.when(lt(b, b.alu(Ops.IDIV, b.load(a, i), b.load(d, i)), c32(b, 5))):
    b.assign(acc, c32(b, 1))
    b.store(out2, i, c32(b, 9))
  b.store(out, i, acc)
  res = emulate(b.build(), [zeros(n), zeros(n), np.array([4, 40, 4, 4], np.int32), np.array([1, 1, 0, 2], np.int32)],
                strict=False)
  assert res.undefined[0].tolist() == [False, False, True, False]
  np.testing.assert_array_equal(res.buffers[0][[0, 1, 3]], [1, 100, 1])
  np.testing.assert_array_equal(res.buffers[1], [9, 0, 0, 9])

def test_permissive_undefined_gate_of_a_load_makes_its_value_undefined():
  n = 4
  b = ProgramBuilder("gate")
  out, a, d = b.global_buf(I32, n), b.global_buf(I32, n), b.global_buf(I32, n)
  i = b.gidx(0, n)
  gate = lt(b, b.alu(Ops.IDIV, c32(b, 8), b.load(d, i)), c32(b, 5))
  b.store(out, i, b.load(a, i, gate=gate, alt=c32(b, -1)))
  res = emulate(b.build(), [zeros(n), np.arange(n, dtype=np.int32) + 1, np.array([0, 1, 2, 4], np.int32)], strict=False)
  assert res.undefined[0].tolist() == [True, False, False, False]
  np.testing.assert_array_equal(res.buffers[0][1:], [-1, 3, 4])  # 8/1 = 8 is not < 5; 8/2 = 4 and 8/4 = 2 are

def test_permissive_undefined_value_stays_undefined_through_index_arithmetic():
  # z = (a / d) & 0 is 0 on every defined lane, undefined where d == 0; out[i] = i * z + 7 is computed from z, so it is
  # undefined there too (the index analysis may fold int arithmetic only when its inputs are ids, counters, constants)
  n = 4
  b = ProgramBuilder("fold")
  out, a, d = b.global_buf(I32, n), b.global_buf(I32, n), b.global_buf(I32, n)
  i = b.gidx(0, n)
  z = b.alu(Ops.AND, b.alu(Ops.IDIV, b.load(a, i), b.load(d, i)), c32(b, 0))
  b.store(out, i, add(b, b.alu(Ops.MUL, i, z), c32(b, 7)))
  res = emulate(b.build(), [zeros(n), np.full(n, 9, np.int32), np.array([1, 0, 3, 0], np.int32)], strict=False)
  assert res.undefined[0].tolist() == [False, True, False, True]
  np.testing.assert_array_equal(res.buffers[0][[0, 2]], [7, 7])


# ***** an IF whose gate fixes lidx runs on a box of the lanes (blocks._in_box): nothing may show *****

def test_grid_box_threads_are_the_launch_threads_with_the_pinned_ids():
  # lane numbers are C-order positions in (gidx2, gidx1, gidx0, lidx2, lidx1, lidx0): the box pinning lidx0 = 2 of a
  # launch of 3 x 2 workgroups of 4 x 3 threads holds, in order, the threads whose lidx0 is 2, and spreads a launch
  # array onto exactly them
  grid = Grid((3, 2, 1), (4, 3, 1))
  box = grid.pinned({5: 2})
  ids = np.indices(grid.shape).reshape(6, -1)
  want = np.flatnonzero(ids[5] == 2)
  assert (box.lanes, box.workgroups, box.group) == (len(want), grid.workgroups, 3)
  np.testing.assert_array_equal(box.tids(box.ids), want)
  np.testing.assert_array_equal(box.spread(np.arange(grid.lanes) * 10), want * 10)
  assert [box.thread(k)[3] for k in range(box.lanes)] == [2] * box.lanes
  inner = box.pinned({4: 1})  # a box of a box: lidx1 = 1 too
  np.testing.assert_array_equal(inner.tids(inner.ids), np.flatnonzero((ids[5] == 2) & (ids[4] == 1)))


BOX_GATES = ("lidx0 == p", "lidx0 == p and lidx1 == 0", "lidx0 < 1", "lidx0 == p and gidx0 < 2")
BOX_BODIES = ("store", "race", "divide", "loop", "uninitialised", "out of bounds")

def boxed_if(groups: int, l0: int, l1: int, p: int, gate: str, body: str):
  """tmp[lid] = a[tid] (all but the last lid with body "uninitialised"); BARRIER; if <gate>: <body>, on `groups`
  workgroups of l0 x l1 threads (lid = lidx1 * l0 + lidx0, tid = gidx0 * l0 * l1 + lid)."""
  b = ProgramBuilder("boxed")
  n = l0 * l1
  out, a = b.global_buf(I32, groups * n + 2), b.global_buf(I32, groups * n)
  tmp = b.local_buf(I32, n)
  g, x, y = b.gidx(0, groups), b.lidx(0, l0), b.lidx(1, l1)
  lid = add(b, b.alu(Ops.MUL, y, c32(b, l0)), x)
  tid = add(b, b.alu(Ops.MUL, g, c32(b, n)), lid)
  b.store(tmp, lid, b.load(a, tid), gate=lt(b, lid, c32(b, n - 1)) if body == "uninitialised" else None)
  b.barrier()
  def eq(v, k): return b.alu(Ops.CMPNE, b.alu(Ops.CMPNE, v, c32(b, k)), b.const(True, dtypes.bool))
  cond = {"lidx0 == p": lambda: eq(x, p), "lidx0 == p and lidx1 == 0": lambda: b.alu(Ops.AND, eq(x, p), eq(y, 0)),
          "lidx0 < 1": lambda: lt(b, x, c32(b, 1)),
          "lidx0 == p and gidx0 < 2": lambda: b.alu(Ops.AND, eq(x, p), lt(b, g, c32(b, 2)))}
  with b.when(cond[gate]()):
    if body == "store": b.store(out, tid, b.alu(Ops.MUL, b.load(tmp, lid), c32(b, 3)))
    if body == "race": b.store(out, c32(b, 0), add(b, g, y))  # several workgroups (or lidx1 values): a race
    if body == "divide": b.store(out, tid, b.alu(Ops.IDIV, c32(b, 100), b.load(tmp, lid)))  # a zero divisor: undefined
    if body == "loop":
      acc = b.acc(c32(b, 0))
      with b.loop(n) as r: b.assign(acc, add(b, acc, b.load(tmp, r)))
      b.store(out, g, acc)  # every lidx1 of a workgroup stores the same sum: not a race
    if body in ("uninitialised", "out of bounds"):
      b.store(out, add(b, tid, c32(b, 3 if body == "out of bounds" else 0)), b.load(tmp, lid))
  return b.build()

@given(groups=st.integers(1, 3), l0=st.integers(2, 5), l1=st.integers(1, 3), p=st.integers(0, 4),
       gate=st.sampled_from(BOX_GATES), body=st.sampled_from(BOX_BODIES),
       data=st.lists(st.integers(-2, 3), min_size=45, max_size=45), chunked=st.booleans())
def test_if_rule_a_box_of_the_lanes_its_gate_fixes_shows_nothing(groups, l0, l1, p, gate, body, data, chunked):
  # IF: the body runs on the active lanes whose gate is true. Running it on the box of the lanes whose lidx ids the gate
  # fixes must give what running it on every lane gives (settings.IF_BOXES False: the rule's own path): the buffers and
  # their levels, every permissive event, and strict mode's report (op, uop, thread, operands, count, origin); also
  # when the launch runs one workgroup at a time (chunked: the boxes are boxes of chunks)
  p = p % l0
  prog = boxed_if(groups, l0, l1, p, gate, body)
  plan = Plan.of(prog, ())
  memory = settings.LANE_MEMORY
  if chunked: settings.LANE_MEMORY = settings.CHUNK_SHARE * plan.grid.group * plan.lane_bytes
  inputs = [np.full(groups * l0 * l1 + 2, -1, np.int32), np.array(data[:groups * l0 * l1], np.int32)]
  boxed: list[bool] = []
  spy = blocks._in_box
  def in_box(*args):
    boxed.append(spy(*args))
    return boxed[-1]
  blocks._in_box = in_box
  try:
    with_box = [emulation_outcome(prog, [x.copy() for x in inputs], strict=s) for s in (True, False)]
    settings.IF_BOXES = False
    without = [emulation_outcome(prog, [x.copy() for x in inputs], strict=s) for s in (True, False)]
  finally:
    blocks._in_box, settings.IF_BOXES, settings.LANE_MEMORY = spy, True, memory
  assert with_box == without
  assert any(boxed), "the IF should have run on a box"
