"""Looseness and undefinedness that the emulator tracks beyond the values themselves (refimpl/emulator/machine.py):
a NaN CONST is loose, and the control rule: code whose execution depends on a loose (undefined) gate, bound or index
leaves the elements it stores, and the accumulators it assigns, loose (undefined), also on lanes that skipped it only
because of that gate. Every expected mask below is derived from those rules on small programs.

Loose values are made with y = WHERE(i < 4, NaN, x[i]): a loose NaN on threads 0..3, exact x[i] on the others, so
CMPNE(y, y) is a gate that is true and loose on 0..3, and CMPLT(y, 0) is false and loose there (NaN < 0 is false)."""
import numpy as np

from refimpl.dtype import dtypes
from refimpl.emulator.machine import emulate
from refimpl.ir import Ops, ProgramBuilder

I32, F32 = dtypes.int32, dtypes.float32
N, K = 8, 4  # threads; threads 0..K-1 see the loose NaN
k = np.arange(N)
SHAKY = k < K
NAN = float("nan")

def c32(b: ProgramBuilder, v: int) -> int: return b.const(v, I32)
def shaky_y(b: ProgramBuilder, x: int, i: int) -> int:
  """y = i < K ? NaN : x[i] (loose exactly on threads 0..K-1)."""
  return b.alu(Ops.WHERE, b.alu(Ops.CMPLT, i, c32(b, K)), b.const(NAN, F32), b.load(x, i))
def xs(*neg: int) -> np.ndarray:
  """x: 1.5 everywhere, -2.5 at the given threads."""
  out = np.full(N, 1.5, np.float32)
  out[list(neg)] = -2.5
  return out


# ***** NaN constants *****

def test_stored_nan_const_is_loose_and_finite_const_is_exact():
  # rule: a float CONST that is NaN is loose (the IR carries no payload); every other CONST is exact
  b = ProgramBuilder("nanconst")
  out, out2 = b.global_buf(F32, N), b.global_buf(F32, N)
  i = b.gidx(0, N)
  b.store(out, i, b.const(NAN, F32))
  b.store(out2, i, b.const(2.5, F32))
  res = emulate(b.build(), [np.zeros(N, np.float32)] * 2)
  assert np.isnan(res.buffers[0]).all() and res.loose[0].all()
  np.testing.assert_array_equal(res.buffers[1], 2.5)
  assert not res.loose[1].any()

def test_bitcast_of_a_nan_const_to_int_is_loose():
  # rule: BITCAST keeps its operand's looseness; the NaN CONST is loose, so its bits as an int32 are too
  b = ProgramBuilder("nanbits")
  out = b.global_buf(I32, N)
  b.store(out, b.gidx(0, N), b.bitcast(b.const(NAN, F32), I32))
  res = emulate(b.build(), [np.zeros(N, np.int32)])
  assert res.loose[0].all()
  assert ((res.buffers[0] & 0x7F800000) == 0x7F800000).all() and (res.buffers[0] & 0x7FFFFF).all()  # NaN bits


# ***** IF gates *****

def test_store_under_a_loose_true_if_gate_is_loose():
  # if y != y: out[i] = 1 -- runs on 0..K-1 with a loose gate: the stored elements are loose; others untouched, exact
  b = ProgramBuilder("loosetrue")
  out, x = b.global_buf(I32, N), b.global_buf(F32, N)
  i = b.gidx(0, N)
  y = shaky_y(b, x, i)
  with b.when(b.alu(Ops.CMPNE, y, y)):
    b.store(out, i, c32(b, 1))
  res = emulate(b.build(), [np.full(N, 7, np.int32), xs()])
  np.testing.assert_array_equal(res.buffers[0], np.where(SHAKY, 1, 7))
  np.testing.assert_array_equal(res.loose[0], SHAKY)

def test_store_skipped_by_a_loose_false_if_gate_marks_the_element_loose_without_writing_it():
  # if y < 0: out[i] = 1 -- false and loose on 0..K-1 (another backend may take it): those elements keep their value
  # but are loose; threads 5 and 6 (x < 0, exact gate) store 1 exactly; the rest are untouched and exact
  b = ProgramBuilder("loosefalse")
  out, x = b.global_buf(I32, N), b.global_buf(F32, N)
  i = b.gidx(0, N)
  with b.when(b.alu(Ops.CMPLT, shaky_y(b, x, i), b.const(0.0, F32))):
    b.store(out, i, c32(b, 1))
  res = emulate(b.build(), [np.full(N, 7, np.int32), xs(5, 6)])
  np.testing.assert_array_equal(res.buffers[0], np.where(np.isin(k, [5, 6]), 1, 7))
  np.testing.assert_array_equal(res.loose[0], SHAKY)

def test_phantom_lanes_of_a_loose_false_gate_report_no_undefined_behaviour():
  # if y < 0: out[i] = 1 / (i - i) -- no thread really runs the block (x >= 0 everywhere), so strict mode has nothing
  # to raise; threads 0..K-1 might run it, so the element each would store (out[i]) is loose
  b = ProgramBuilder("phantomdiv")
  out, x = b.global_buf(I32, N), b.global_buf(F32, N)
  i = b.gidx(0, N)
  with b.when(b.alu(Ops.CMPLT, shaky_y(b, x, i), b.const(0.0, F32))):
    b.store(out, i, b.alu(Ops.IDIV, c32(b, 1), b.alu(Ops.SUB, i, i)))
  res = emulate(b.build(), [np.full(N, 7, np.int32), xs()])
  np.testing.assert_array_equal(res.buffers[0], 7)
  np.testing.assert_array_equal(res.loose[0], SHAKY)

def test_phantom_lane_stores_where_its_own_index_points():
  # if y < 0: out[N-1-i] = 1 -- thread t's phantom store lands on element N-1-t: elements N-1..N-K are loose
  b = ProgramBuilder("phantomidx")
  out, x = b.global_buf(I32, N), b.global_buf(F32, N)
  i = b.gidx(0, N)
  with b.when(b.alu(Ops.CMPLT, shaky_y(b, x, i), b.const(0.0, F32))):
    b.store(out, b.alu(Ops.SUB, c32(b, N - 1), i), c32(b, 1))
  res = emulate(b.build(), [np.full(N, 7, np.int32), xs()])
  np.testing.assert_array_equal(res.buffers[0], 7)
  np.testing.assert_array_equal(res.loose[0], SHAKY[::-1])

def test_accumulator_assigned_under_a_loose_gate_is_loose_whether_or_not_the_thread_ran_the_block():
  # acc = 10; if y < 0: acc = 1; out[i] = acc -- loose on 0..K-1 (gate loose, not taken); exact 1 on thread 6, exact
  # 10 on 4, 5, 7
  b = ProgramBuilder("looseacc")
  out, x = b.global_buf(I32, N), b.global_buf(F32, N)
  i = b.gidx(0, N)
  acc = b.acc(c32(b, 10))
  with b.when(b.alu(Ops.CMPLT, shaky_y(b, x, i), b.const(0.0, F32))):
    b.assign(acc, c32(b, 1))
  b.store(out, i, acc)
  res = emulate(b.build(), [np.zeros(N, np.int32), xs(6)])
  np.testing.assert_array_equal(res.buffers[0], np.where(k == 6, 1, 10))
  np.testing.assert_array_equal(res.loose[0], SHAKY)

def test_nested_block_under_a_loose_gate_inherits_its_looseness():
  # if y != y: { if i % 2 == 0 (i % 2 < 1): out[i] = 1 } -- the inner gate is exact, but the region's control is
  # loose on 0..K-1: the even ones there store 1, loosely; the odd ones there skip on an exact gate: not marked
  b = ProgramBuilder("nested")
  out, x = b.global_buf(I32, N), b.global_buf(F32, N)
  i = b.gidx(0, N)
  y = shaky_y(b, x, i)
  with b.when(b.alu(Ops.CMPNE, y, y)), b.when(b.alu(Ops.CMPLT, b.alu(Ops.MOD, i, c32(b, 2)), c32(b, 1))):
    b.store(out, i, c32(b, 1))
  res = emulate(b.build(), [np.full(N, 7, np.int32), xs()])
  even = SHAKY & (k % 2 == 0)
  np.testing.assert_array_equal(res.buffers[0], np.where(even, 1, 7))
  np.testing.assert_array_equal(res.loose[0], even)


# ***** gated STOREs *****

def test_gated_store_with_a_loose_gate_is_loose_taken_or_not():
  # out[i] = 5 if y < 0 (gated STORE): loose on 0..K-1 (gate false there, but loose); thread 5 stores exactly
  b = ProgramBuilder("gatedloose")
  out, x = b.global_buf(I32, N), b.global_buf(F32, N)
  i = b.gidx(0, N)
  b.store(out, i, c32(b, 5), gate=b.alu(Ops.CMPLT, shaky_y(b, x, i), b.const(0.0, F32)))
  res = emulate(b.build(), [np.full(N, 7, np.int32), xs(5)])
  np.testing.assert_array_equal(res.buffers[0], np.where(k == 5, 5, 7))
  np.testing.assert_array_equal(res.loose[0], SHAKY)

def test_permissive_gated_store_with_an_undefined_gate_makes_the_element_undefined():
  # gate = 8 / d[i] < 5 is undefined where d == 0 (thread 0): the store does nothing there, but the element it would
  # store is undefined; threads 2, 3 (8/2, 8/4 < 5) store 5; thread 1 (8/1) does not
  b = ProgramBuilder("gatedundef")
  out, d = b.global_buf(I32, 4), b.global_buf(I32, 4)
  i = b.gidx(0, 4)
  gate = b.alu(Ops.CMPLT, b.alu(Ops.IDIV, c32(b, 8), b.load(d, i)), c32(b, 5))
  b.store(out, i, c32(b, 5), gate=gate)
  res = emulate(b.build(), [np.full(4, 7, np.int32), np.array([0, 1, 2, 4], np.int32)], strict=False)
  assert res.undefined[0].tolist() == [True, False, False, False]
  np.testing.assert_array_equal(res.buffers[0], [7, 7, 5, 5])

def test_permissive_store_under_an_undefined_if_gate_makes_the_element_it_would_store_undefined():
  # if 8 / d[i] < 5: out[N-1-i] = 5 -- thread 0's gate is undefined: it skips the block, but element 3 (where it
  # would store) becomes undefined; threads 2, 3 store 5 at elements 1, 0
  b = ProgramBuilder("ifundef")
  out, d = b.global_buf(I32, 4), b.global_buf(I32, 4)
  i = b.gidx(0, 4)
  with b.when(b.alu(Ops.CMPLT, b.alu(Ops.IDIV, c32(b, 8), b.load(d, i)), c32(b, 5))):
    b.store(out, b.alu(Ops.SUB, c32(b, 3), i), c32(b, 5))
  res = emulate(b.build(), [np.full(4, 7, np.int32), np.array([0, 1, 2, 4], np.int32)], strict=False)
  assert res.undefined[0].tolist() == [False, False, False, True]
  np.testing.assert_array_equal(res.buffers[0], [5, 5, 7, 7])


# ***** RANGE bounds *****

def test_loop_with_a_loose_bound_makes_its_stores_and_accumulators_loose():
  # end = y != y ? 3 : 2 is loose on 0..K-1; for r in [0, end): acc += 1; out[i] = r. After: out2[i] = acc.
  # Threads 0..K-1: 3 iterations, loose results; others: 2 iterations, exact
  b = ProgramBuilder("looserange")
  out, out2, x = b.global_buf(I32, N), b.global_buf(I32, N), b.global_buf(F32, N)
  i = b.gidx(0, N)
  y = shaky_y(b, x, i)
  end = b.alu(Ops.WHERE, b.alu(Ops.CMPNE, y, y), c32(b, 3), c32(b, 2))
  acc = b.acc(c32(b, 0))
  with b.loop_uops(c32(b, 0), end) as r:
    b.assign(acc, b.alu(Ops.ADD, acc, c32(b, 1)))
    b.store(out, i, r)
  b.store(out2, i, acc)
  res = emulate(b.build(), [np.zeros(N, np.int32), np.zeros(N, np.int32), xs()])
  np.testing.assert_array_equal(res.buffers[0], np.where(SHAKY, 2, 1))
  np.testing.assert_array_equal(res.buffers[1], np.where(SHAKY, 3, 2))
  np.testing.assert_array_equal(res.loose[0], SHAKY)
  np.testing.assert_array_equal(res.loose[1], SHAKY)


# ***** loose indices *****

def test_store_and_load_through_a_loose_index_are_loose():
  # j = y != y ? i : i is i, but loose on 0..K-1: out[j] = 3 leaves elements 0..K-1 loose; out2[i] = a[j] reads a
  # loose value there
  b = ProgramBuilder("looseidx")
  out, out2, a, x = b.global_buf(I32, N), b.global_buf(I32, N), b.global_buf(I32, N), b.global_buf(F32, N)
  i = b.gidx(0, N)
  y = shaky_y(b, x, i)
  j = b.alu(Ops.WHERE, b.alu(Ops.CMPNE, y, y), i, b.alu(Ops.ADD, i, c32(b, 0)))
  b.store(out, j, c32(b, 3))
  b.store(out2, i, b.load(a, j))
  res = emulate(b.build(), [np.zeros(N, np.int32), np.zeros(N, np.int32), k.astype(np.int32) * 10, xs()])
  np.testing.assert_array_equal(res.buffers[0], 3)
  np.testing.assert_array_equal(res.buffers[1], k * 10)
  np.testing.assert_array_equal(res.loose[0], SHAKY)
  np.testing.assert_array_equal(res.loose[1], SHAKY)

def test_phantom_lane_reads_memory_for_the_index_it_would_store_through():
  # if y < 0: out[p[q[i]]] = 1 -- a gathered index: phantom threads 0..K-1 load p[q[i]] as they would, so the loose
  # elements are p[q[t]] for t < K (q reverses, p adds 1 mod N)
  b = ProgramBuilder("phantomgather")
  out, p, q, x = b.global_buf(I32, N), b.global_buf(I32, N), b.global_buf(I32, N), b.global_buf(F32, N)
  i = b.gidx(0, N)
  with b.when(b.alu(Ops.CMPLT, shaky_y(b, x, i), b.const(0.0, F32))):
    b.store(out, b.load(p, b.load(q, i)), c32(b, 1))
  pv, qv = ((k + 1) % N).astype(np.int32), (N - 1 - k).astype(np.int32)
  res = emulate(b.build(), [np.full(N, 7, np.int32), pv, qv, xs()])
  np.testing.assert_array_equal(res.buffers[0], 7)
  np.testing.assert_array_equal(res.loose[0], np.isin(k, pv[qv[:K]]))

def test_phantom_vector_store_marks_every_element_it_would_store():
  # if y < 0: out[2i .. 2i+1] = (1, 1) -- phantom threads 0..K-1 would store elements 0..2K-1: all loose
  b = ProgramBuilder("phantomvec")
  out, x = b.global_buf(I32, 2 * N), b.global_buf(F32, N)
  i = b.gidx(0, N)
  with b.when(b.alu(Ops.CMPLT, shaky_y(b, x, i), b.const(0.0, F32))):
    b.store(out, b.alu(Ops.MUL, i, c32(b, 2)), b.vectorize(c32(b, 1), c32(b, 1)))
  res = emulate(b.build(), [np.full(2 * N, 7, np.int32), xs()])
  np.testing.assert_array_equal(res.buffers[0], 7)
  np.testing.assert_array_equal(res.loose[0], np.arange(2 * N) < 2 * K)
