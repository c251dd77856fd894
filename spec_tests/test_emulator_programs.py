"""Whole programs on the emulator's executor (refimpl/emulator/machine.py): loops with accumulators, locals + barriers,
vectors, WMMA, DEFINE_VAR, and the index shapes the fast paths handle (strided, reversed, 2-D grids, gathers).
Each expected result is computed independently with plain numpy / Python on the inputs."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from refimpl.dtype import dtypes
from refimpl.emulator.machine import emulate
from refimpl.ir import Ops, ProgramBuilder, elementwise

I32, F32 = dtypes.int32, dtypes.float32
rng = np.random.default_rng(1234)

def c32(b: ProgramBuilder, v: int) -> int: return b.const(v, I32)
def add(b, x, y): return b.alu(Ops.ADD, x, y)
def mul(b, x, y): return b.alu(Ops.MUL, x, y)
def ints(n: int, lo: int = -100, hi: int = 100) -> np.ndarray: return rng.integers(lo, hi, n).astype(np.int32)
def zeros_i32(n: int) -> np.ndarray: return np.zeros(n, np.int32)


def test_elementwise_kernel_computes_out_equals_a_times_b_plus_one():
  # float32 MUL then ADD, each correctly rounded: numpy's float32 arithmetic rounds the same way
  n = 4096
  b = ProgramBuilder("axpb")
  out, x, y = (b.global_buf(F32, n) for _ in range(3))
  i = b.gidx(0, n)
  b.store(out, i, add(b, mul(b, b.load(x, i), b.load(y, i)), b.const(1.0, F32)))
  a1, a2 = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
  res = emulate(b.build(), [np.zeros(n, np.float32), a1, a2])
  np.testing.assert_array_equal(res.buffers[0], a1 * a2 + np.float32(1))

def test_workgroups_and_local_ids_address_gidx_times_local_size_plus_lidx():
  # elementwise() with local_size 8: thread (g, l) handles element g*8 + l
  p = elementwise(Ops.SUB, I32, n=64, local_size=8)
  a1, a2 = ints(64), ints(64)
  res = emulate(p, [np.zeros(64, np.int32), a1, a2])
  np.testing.assert_array_equal(res.buffers[0], a1 - a2)

def test_emulate_returns_copies_and_leaves_the_inputs_alone():
  p = elementwise(Ops.ADD, I32, n=16)
  out, a1, a2 = np.zeros(16, np.int32), ints(16), ints(16)
  res = emulate(p, [out, a1, a2])
  assert not out.any()
  assert all(not np.shares_memory(r, x) for r, x in zip(res.buffers, (out, a1, a2)))

def test_loop_accumulator_sums_each_row():
  # DEFINE_ACC + ASSIGN: acc = 0; for r in 0..K-1: acc = acc + a[i*K + r]; out[i] = acc (int32 sums are exact)
  n, K = 32, 7
  b = ProgramBuilder("rowsum")
  out, a = b.global_buf(I32, n), b.global_buf(I32, n * K)
  i = b.gidx(0, n)
  acc = b.acc(c32(b, 0))
  with b.loop(K) as r:
    b.assign(acc, add(b, acc, b.load(a, add(b, mul(b, i, c32(b, K)), r))))
  b.store(out, i, acc)
  x = ints(n * K)
  res = emulate(b.build(), [np.zeros(n, np.int32), x])
  np.testing.assert_array_equal(res.buffers[0], x.reshape(n, K).sum(axis=1))

def test_nested_loops_multiply_matrices():
  # one thread per row i: for j: acc = 0; for k: acc += A[i,k] * B[k,j]; C[i,j] = acc
  n, m, kk = 6, 5, 4
  b = ProgramBuilder("matmul")
  C, A, B = b.global_buf(I32, n * m), b.global_buf(I32, n * kk), b.global_buf(I32, kk * m)
  i = b.gidx(0, n)
  with b.loop(m) as j:
    acc = b.acc(c32(b, 0))
    with b.loop(kk) as k:
      av = b.load(A, add(b, mul(b, i, c32(b, kk)), k))
      bv = b.load(B, add(b, mul(b, k, c32(b, m)), j))
      b.assign(acc, add(b, acc, mul(b, av, bv)))
    b.store(C, add(b, mul(b, i, c32(b, m)), j), acc)
  a1, a2 = ints(n * kk), ints(kk * m)
  res = emulate(b.build(), [np.zeros(n * m, np.int32), a1, a2])
  np.testing.assert_array_equal(res.buffers[0], (a1.reshape(n, kk) @ a2.reshape(kk, m)).ravel())

def test_single_thread_program_runs_its_loop_in_order():
  # one thread: out[r] = out[r-1] + a[r] (a prefix sum that depends on the previous iteration's store)
  n = 20
  b = ProgramBuilder("prefix")
  out, a = b.global_buf(I32, n), b.global_buf(I32, n)
  b.store(out, c32(b, 0), b.load(a, c32(b, 0)))
  with b.loop(n, start=1) as r:
    b.store(out, r, add(b, b.load(out, add(b, r, c32(b, -1))), b.load(a, r)))
  x = ints(n)
  res = emulate(b.build(), [np.zeros(n, np.int32), x])
  np.testing.assert_array_equal(res.buffers[0], np.cumsum(x))

def test_define_var_sets_trip_count_and_offset():
  # DEFINE_VAR v: out[i] = sum(a[i + r] for r < v); v comes from `vals`
  n = 8
  b = ProgramBuilder("window")
  out, a = b.global_buf(I32, n), b.global_buf(I32, n + 16)
  v = b.var("v", 0, 16)
  i = b.gidx(0, n)
  acc = b.acc(c32(b, 0))
  with b.loop_uops(c32(b, 0), v) as r:
    b.assign(acc, add(b, acc, b.load(a, add(b, i, r))))
  b.store(out, i, acc)
  x = ints(n + 16)
  p = b.build()
  for vv in (0, 3, 16):
    res = emulate(p, [np.zeros(n, np.int32), x], vals=[vv])
    np.testing.assert_array_equal(res.buffers[0], [x[k:k + vv].sum() for k in range(n)])

def test_workgroup_tree_reduction_with_locals_and_barriers():
  # each workgroup of L threads: tmp[l] = a[g*L + l]; barrier; for s = L/2 .. 1: if l < s: tmp[l] += tmp[l+s]; barrier;
  # thread 0 stores tmp[0]: out[g] is the sum of the group's L elements
  G, L = 5, 16
  b = ProgramBuilder("tree_sum")
  out, a = b.global_buf(I32, G), b.global_buf(I32, G * L)
  tmp = b.local_buf(I32, L)
  g, lid = b.gidx(0, G), b.lidx(0, L)
  b.store(tmp, lid, b.load(a, add(b, mul(b, g, c32(b, L)), lid)))
  b.barrier()
  s = L // 2
  while s:
    with b.when(b.alu(Ops.CMPLT, lid, c32(b, s))):
      b.store(tmp, lid, add(b, b.load(tmp, lid), b.load(tmp, add(b, lid, c32(b, s)))))
    b.barrier()
    s //= 2
  with b.when(b.alu(Ops.CMPLT, lid, c32(b, 1))):
    b.store(out, g, b.load(tmp, c32(b, 0)))
  x = ints(G * L)
  res = emulate(b.build(), [np.zeros(G, np.int32), x])
  np.testing.assert_array_equal(res.buffers[0], x.reshape(G, L).sum(axis=1))

def test_vector_load_gep_vectorize_and_vector_store():
  # each thread loads a float4 at 4i, reverses it with GEP, rebuilds one lane with VECTORIZE and stores a float4
  n = 12
  b = ProgramBuilder("vec")
  out, a = b.global_buf(F32, 4 * n), b.global_buf(F32, 4 * n)
  i = b.gidx(0, n)
  base = mul(b, i, c32(b, 4))
  v = b.load(a, base, count=4)
  rev = b.gep(v, 3, 2, 1, 0)
  b.store(out, base, b.vectorize(b.gep(rev, 0), b.gep(rev, 1), b.gep(rev, 2), add(b, b.gep(rev, 3), b.const(10.0, F32))))
  x = rng.standard_normal(4 * n).astype(np.float32)
  res = emulate(b.build(), [np.zeros(4 * n, np.float32), x])
  want = x.reshape(n, 4)[:, ::-1].copy()
  want[:, 3] += np.float32(10)
  np.testing.assert_array_equal(res.buffers[0], want.ravel())

def test_vector_alu_applies_elementwise():
  # a vector ADD is the scalar ADD on each element; a scalar broadcast by VECTORIZE reaches every element
  n = 8
  b = ProgramBuilder("vadd")
  out, a = b.global_buf(I32, 2 * n), b.global_buf(I32, 2 * n)
  i = b.gidx(0, n)
  base = mul(b, i, c32(b, 2))
  b.store(out, base, add(b, b.load(a, base, count=2), b.vectorize(i, i)))
  x = ints(2 * n)
  res = emulate(b.build(), [np.zeros(2 * n, np.int32), x])
  np.testing.assert_array_equal(res.buffers[0], x + np.repeat(np.arange(n, dtype=np.int32), 2))

def test_wmma_computes_a_at_b_plus_c_per_thread():
  # WMMA (N, M, K) = (3, 2, 4): a is M x K, b is K x N (half, row-major), c and d are M x N (float32).
  # Small integers: every product and sum is exact, so d = a@b + c exactly (the rule rounds once at the end).
  N, M, K, T = 3, 2, 4, 5
  b = ProgramBuilder("wmma")
  D, A, B, Cb = b.global_buf(F32, T * M * N), b.global_buf(dtypes.half, T * M * K), b.global_buf(dtypes.half, T * K * N), \
    b.global_buf(F32, T * M * N)
  t = b.gidx(0, T)
  av = b.load(A, mul(b, t, c32(b, M * K)), count=M * K)
  bv = b.load(B, mul(b, t, c32(b, K * N)), count=K * N)
  cv = b.load(Cb, mul(b, t, c32(b, M * N)), count=M * N)
  b.store(D, mul(b, t, c32(b, M * N)), b.wmma(av, bv, cv, (N, M, K)))
  a1 = rng.integers(-8, 8, T * M * K).astype(np.float16)
  a2 = rng.integers(-8, 8, T * K * N).astype(np.float16)
  a3 = rng.integers(-50, 50, T * M * N).astype(np.float32)
  res = emulate(b.build(), [np.zeros(T * M * N, np.float32), a1, a2, a3])
  want = a1.astype(np.float64).reshape(T, M, K) @ a2.astype(np.float64).reshape(T, K, N) + a3.reshape(T, M, N)
  np.testing.assert_array_equal(res.buffers[0], want.astype(np.float32).ravel())
  assert res.loose[0].all()  # every WMMA result is loose (hardware sums in other orders / precisions)

def test_wmma_rounds_once_from_the_float64_sum():
  # 1 + 2^-24 + 2^-24 in float32: summing in float32 step by step gives 1 (each step ties to even); the rule sums in
  # float64 (exactly 1 + 2^-23) and rounds once, giving 1 + 2^-23
  b = ProgramBuilder("wmma1")
  D, A, B = b.global_buf(F32, 1), b.global_buf(F32, 2), b.global_buf(F32, 2)
  cv = b.const(1.0, F32)
  b.store(D, c32(b, 0), b.wmma(b.load(A, c32(b, 0), count=2), b.load(B, c32(b, 0), count=2), cv, (1, 1, 2)))
  tiny = np.float32(2.0 ** -24)
  res = emulate(b.build(), [np.zeros(1, np.float32), np.array([tiny, tiny], np.float32), np.ones(2, np.float32)])
  assert res.buffers[0][0] == np.float32(1 + 2.0 ** -23)

def test_cast_and_bitcast_inside_a_program():
  # out_f[i] = float(a[i]) (exact for small ints), out_u[i] = the bits of that float
  n = 16
  b = ProgramBuilder("conv")
  of, ou, a = b.global_buf(F32, n), b.global_buf(dtypes.uint32, n), b.global_buf(I32, n)
  i = b.gidx(0, n)
  f = b.cast(b.load(a, i), F32)
  b.store(of, i, f)
  b.store(ou, i, b.bitcast(f, dtypes.uint32))
  x = ints(n)
  res = emulate(b.build(), [np.zeros(n, np.float32), np.zeros(n, np.uint32), x])
  np.testing.assert_array_equal(res.buffers[0], x.astype(np.float32))
  np.testing.assert_array_equal(res.buffers[1], x.astype(np.float32).view(np.uint32))


# index shapes: strided views (every affine form, negative strides, several grid axes) and gathers must agree with numpy

def test_reversed_and_strided_indices():
  # out[n-1-i] = a[3i + 1]: a negative stride on the store, stride 3 on the load
  n = 10
  b = ProgramBuilder("strided")
  out, a = b.global_buf(I32, n), b.global_buf(I32, 3 * n + 1)
  i = b.gidx(0, n)
  b.store(out, b.alu(Ops.SUB, c32(b, n - 1), i), b.load(a, add(b, mul(b, i, c32(b, 3)), c32(b, 1))))
  x = ints(3 * n + 1)
  res = emulate(b.build(), [np.zeros(n, np.int32), x])
  np.testing.assert_array_equal(res.buffers[0], x[1::3][:n][::-1])

def test_three_dimensional_grid_transposes():
  # grid (4, 3, 2) x local (2, 1, 1): thread index t = ((g2*3 + g1)*4 + g0)*2 + l0 reads a[t] and writes a transposed
  # position out[((l0*4 + g0)*3 + g1)*2 + g2]
  b = ProgramBuilder("transpose")
  out, a = b.global_buf(I32, 48), b.global_buf(I32, 48)
  g0, g1, g2, l0 = b.gidx(0, 4), b.gidx(1, 3), b.gidx(2, 2), b.lidx(0, 2)
  t = add(b, mul(b, add(b, mul(b, add(b, mul(b, g2, c32(b, 3)), g1), c32(b, 4)), g0), c32(b, 2)), l0)
  o = add(b, mul(b, add(b, mul(b, add(b, mul(b, l0, c32(b, 4)), g0), c32(b, 3)), g1), c32(b, 2)), g2)
  b.store(out, o, b.load(a, t))
  x = ints(48)
  res = emulate(b.build(), [np.zeros(48, np.int32), x])
  np.testing.assert_array_equal(res.buffers[0], x.reshape(2, 3, 4, 2).transpose(3, 2, 1, 0).ravel())

def test_modular_and_data_dependent_indices_gather():
  # out[i] = a[(5i) % n] + a[perm[i]]: MOD and a loaded index are not affine, so these go through the gather path
  n = 16
  b = ProgramBuilder("gather")
  out, a, perm = b.global_buf(I32, n), b.global_buf(I32, n), b.global_buf(I32, n)
  i = b.gidx(0, n)
  j = b.alu(Ops.MOD, mul(b, i, c32(b, 5)), c32(b, n))
  b.store(out, i, add(b, b.load(a, j), b.load(a, b.load(perm, i))))
  x, pm = ints(n), rng.permutation(n).astype(np.int32)
  res = emulate(b.build(), [np.zeros(n, np.int32), x, pm])
  np.testing.assert_array_equal(res.buffers[0], x[(5 * np.arange(n)) % n] + x[pm])

def test_data_dependent_scatter_stores():
  # out[perm[i]] = a[i]: a scatter through a loaded (injective) index
  n = 16
  b = ProgramBuilder("scatter")
  out, a, perm = b.global_buf(I32, n), b.global_buf(I32, n), b.global_buf(I32, n)
  i = b.gidx(0, n)
  b.store(out, b.load(perm, i), b.load(a, i))
  x, pm = ints(n), rng.permutation(n).astype(np.int32)
  res = emulate(b.build(), [np.zeros(n, np.int32), x, pm])
  want = np.zeros(n, np.int32)
  want[pm] = x
  np.testing.assert_array_equal(res.buffers[0], want)

@pytest.mark.parametrize("dtype", [dtypes.bfloat16, dtypes.fp8e4m3, dtypes.float16, dtypes.uint8, dtypes.int64, dtypes.bool])
def test_copy_kernel_moves_every_dtype_bit_exactly(dtype):
  # LOAD then STORE changes no bits, whatever the dtype (storage only for fp8)
  from refimpl.dtype import to_np
  n = 32
  b = ProgramBuilder("copy")
  out, a = b.global_buf(dtype, n), b.global_buf(dtype, n)
  i = b.gidx(0, n)
  b.store(out, i, b.load(a, i))
  x = rng.integers(0, 256, n * to_np(dtype).itemsize, dtype=np.uint8).view(to_np(dtype)) if dtype != dtypes.bool \
    else rng.integers(0, 2, n).astype(bool)
  res = emulate(b.build(), [np.zeros(n, to_np(dtype)), x])
  assert res.buffers[0].tobytes() == x.tobytes()


# the strided-view fast path (affine index) must agree with the gather path (the same index, made opaque by a load)

@given(gs=st.tuples(st.integers(1, 4), st.integers(1, 3), st.integers(1, 2)),
       ls=st.tuples(st.integers(1, 3), st.integers(1, 2), st.integers(1, 2)),
       coef=st.lists(st.integers(-5, 5), min_size=6, max_size=6), count=st.integers(1, 3), opaque=st.booleans())
def test_affine_load_index_reads_what_the_formula_says(gs, ls, coef, count, opaque):
  # thread t (lane order) loads `count` elements at  off + sum(coef_d * id_d)  and stores them at t*count;
  # off is chosen so the smallest index is 0
  b = ProgramBuilder("affine")
  names = ("gidx0", "gidx1", "gidx2", "lidx0", "lidx1", "lidx2")
  sizes = (*gs, *ls)
  lo = sum(min(0, c * (s - 1)) for c, s in zip(coef, sizes))
  span = sum(abs(c) * (s - 1) for c, s in zip(coef, sizes)) + count
  T = int(np.prod(sizes))
  out, a, zero = b.global_buf(I32, T * count), b.global_buf(I32, span), b.global_buf(I32, 1)
  ids = [b.special(nm, s) for nm, s in zip(names, sizes)]
  idx, t = c32(b, -lo), c32(b, 0)
  for k, c in enumerate(coef): idx = add(b, idx, mul(b, ids[k], c32(b, c)))
  for k in (2, 1, 0, 5, 4, 3):  # lane order: gidx2, gidx1, gidx0, lidx2, lidx1, lidx0 (the last fastest)
    t = add(b, mul(b, t, c32(b, sizes[k])), ids[k])
  if opaque: idx = add(b, idx, b.load(zero, c32(b, 0)))
  b.store(out, mul(b, t, c32(b, count)), b.load(a, idx, count=count))
  x = np.arange(span, dtype=np.int32) * 7 + 1
  res = emulate(b.build(), [zeros_i32(T * count), x, zeros_i32(1)])
  grid = np.indices((gs[2], gs[1], gs[0], ls[2], ls[1], ls[0])).reshape(6, -1)  # rows: g2 g1 g0 l2 l1 l0
  order = (2, 1, 0, 5, 4, 3)
  start = -lo + sum(coef[k] * grid[order.index(k)] for k in range(6))
  want = x[start[:, None] + np.arange(count)]
  np.testing.assert_array_equal(res.buffers[0], want.ravel())
