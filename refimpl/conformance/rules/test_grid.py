"""The grid: workgroups and local ids in every dimension, DEFINE_LOCAL as one array per workgroup (a function-scope
array in the loop form), barriers, workgroup tree reductions, and tinygrad's MAX reductions staged through a local
array (SPEC.md "Execution"; the SIMT rule).

Part of the packaged conformance suite (refimpl.conformance.rules, every backend through the `backend` fixture;
the conventions: refimpl/conformance/rules/__init__.py).
"""
import math

import numpy as np
import pytest

from refimpl.conformance import PROGRAMS_DIR
from refimpl.conformance.rules.common import f16, f32, i32, rounded_once
from refimpl.dtype import to_np
from refimpl.emulator.machine import emulate
from refimpl.ir import Ops, ProgramBuilder, dtype_to_str, load_program
from refimpl.testing.oracle import add
from refimpl.testing.programs import assert_same, require, run, run_against_emulator
from refimpl.testing.values import random_values


@pytest.mark.parametrize("through_local", [False, True], ids=["global", "local"])
def test_grid_programs_and_locals_run_through_the_loop_lowering(backend, through_local):
  """A 2D grid of 2 x 6 workgroups of 4 threads (a device without a grid runs it as loops), optionally staging each value
  in a DEFINE_LOCAL slot of its thread: out[idx] = x[idx] + gidx1."""
  b = ProgramBuilder("grid2d")
  out, x = b.global_buf(f32, 6 * 8), b.global_buf(f32, 6 * 8)
  tmp = b.local_buf(f32, 4) if through_local else None
  g0, g1, l0 = b.gidx(0, 2), b.gidx(1, 6), b.lidx(0, 4)
  col = b.alu(Ops.ADD, b.alu(Ops.MUL, g0, b.const(4, i32)), l0)
  idx = b.alu(Ops.ADD, b.alu(Ops.MUL, g1, b.const(8, i32)), col)
  value = b.alu(Ops.ADD, b.load(x, idx), b.cast(g1, f32))
  if through_local:
    b.store(tmp, l0, value)
    value = b.load(tmp, l0)
  b.store(out, idx, value)
  xs = np.arange(48, dtype=np.float32)
  got = run_against_emulator(backend, b.build(), [np.zeros(48, np.float32), xs])[0][0]
  assert got.tolist() == (xs + np.repeat(np.arange(6), 8)).tolist()

def test_define_local_is_a_function_scope_array_in_the_loop_form(backend):
  b = ProgramBuilder("local_scratch")
  out, tmp = b.global_buf(i32, 8), b.local_buf(i32, 8)
  with b.loop(8) as r: b.store(tmp, r, b.alu(Ops.MUL, r, b.const(3, i32)))
  with b.loop(8) as r: b.store(out, r, b.load(tmp, b.alu(Ops.SUB, b.const(7, i32), r)))
  assert run(backend, b.build(), np.zeros(8, np.int32))[0].tolist() == [3 * (7 - k) for k in range(8)]

def test_gidx_is_the_workgroup_id_and_lidx_the_id_within_it_in_every_dimension(backend):
  """Launch = global_size workgroups of local_size work items (tinygrad's convention): thread (g, l) writes
  g0 + 10 g1 + 100 g2 + 1000 l0 + 10000 l1 at its own linear index."""
  G, L = (3, 2, 2), (4, 2, 1)
  b = ProgramBuilder("ids3d")
  total = math.prod(G) * math.prod(L)
  out = b.global_buf(i32, total)
  g = [b.gidx(d, G[d]) for d in range(3)]
  lid = [b.lidx(d, L[d]) for d in range(2)]
  code, idx = b.const(0, i32), b.const(0, i32)
  for k, (u, weight) in enumerate(zip([*g, *lid], (1, 10, 100, 1000, 10000))):
    code = b.alu(Ops.ADD, code, b.alu(Ops.MUL, u, b.const(weight, i32)))
    stride = math.prod([*G, *L][:k])
    idx = b.alu(Ops.ADD, idx, b.alu(Ops.MUL, u, b.const(stride, i32)))
  b.store(out, idx, code)
  p = b.build()
  assert p.global_size == G and p.local_size == L
  got = run_against_emulator(backend, p, [np.full(total, -1, np.int32)])[0][0]
  want = [g0 + 10 * g1 + 100 * g2 + 1000 * l0 + 10000 * l1
          for l1 in range(L[1]) for l0 in range(L[0]) for g2 in range(G[2]) for g1 in range(G[1]) for g0 in range(G[0])]
  assert got.tolist() == want

def test_local_memory_is_one_array_per_workgroup(backend):
  # every workgroup fills tmp with its own id, then reads a neighbour's slot after the barrier: it sees its own group's values
  G, L = 6, 8
  b = ProgramBuilder("local_per_group")
  out, tmp = b.global_buf(i32, G * L), b.local_buf(i32, L)
  g, lid = b.gidx(0, G), b.lidx(0, L)
  b.store(tmp, lid, b.alu(Ops.ADD, b.alu(Ops.MUL, g, b.const(100, i32)), lid))
  b.barrier()
  other = b.alu(Ops.SUB, b.const(L - 1, i32), lid)
  b.store(out, b.alu(Ops.ADD, b.alu(Ops.MUL, g, b.const(L, i32)), lid), b.load(tmp, other))
  got = run_against_emulator(backend, b.build(), [np.zeros(G * L, np.int32)])[0][0]
  assert got.tolist() == [100 * gg + (L - 1 - ll) for gg in range(G) for ll in range(L)]

def test_a_barrier_orders_a_workgroups_global_memory(backend):
  """BARRIER orders the workgroup's globals too (SPEC.md "Execution", the race rule): thread l of workgroup g stores
  x[g*L + l] * 3 into buf, BARRIER, then reads buf at its mirror slot g*L + L-1-l, written by another thread of its
  workgroup; then every thread loads its own acc[g] and, after a second BARRIER, thread 0 writes acc[g] + 1 (tinygrad's
  GROUP update). A backend that fences only local memory may read stale values."""
  G, L = 6, 16
  b = ProgramBuilder("global_order")
  out, buf, x, acc = b.global_buf(i32, G * L), b.global_buf(i32, G * L), b.global_buf(i32, G * L), b.global_buf(i32, G)
  b.local_buf(i32, 1)  # a BARRIER needs a workgroup's memory to exist (verifier rule "barrier")
  g, lid = b.gidx(0, G), b.lidx(0, L)
  base = b.alu(Ops.MUL, g, b.const(L, i32))
  b.store(buf, b.alu(Ops.ADD, base, lid), b.alu(Ops.MUL, b.load(x, b.alu(Ops.ADD, base, lid)), b.const(3, i32)))
  b.barrier()
  mirror = b.alu(Ops.ADD, base, b.alu(Ops.SUB, b.const(L - 1, i32), lid))
  b.store(out, b.alu(Ops.ADD, base, lid), b.load(buf, mirror))
  mine = b.load(acc, g)
  b.barrier()
  b.store(acc, g, b.alu(Ops.ADD, mine, b.const(1, i32)), gate=b.alu(Ops.CMPLT, lid, b.const(1, i32)))
  xs = np.arange(G * L, dtype=np.int32) * 5 - 40
  outs, _ = run_against_emulator(backend, b.build(), [np.zeros(G * L, np.int32), np.zeros(G * L, np.int32), xs,
                                                      np.arange(G, dtype=np.int32) * 10])
  assert outs[0].tolist() == (xs * 3).reshape(G, L)[:, ::-1].ravel().tolist()
  assert outs[3].tolist() == [10 * k + 1 for k in range(G)]

def _tree_reduction(G: int, L: int, dt):
  """out[g] = sum of x[g*L : g*L+L], a workgroup tree: tmp[l] = x; barrier; for s = L/2 .. 1: tmp[l] += tmp[l+s] on the
  threads l < s (gated load and store), barrier; thread 0 stores tmp[0]."""
  b = ProgramBuilder(f"tree_sum_{dt.name.replace(' ', '_')}")
  out, x, tmp = b.global_buf(dt, G), b.global_buf(dt, G * L), b.local_buf(dt, L)
  g, lid = b.gidx(0, G), b.lidx(0, L)
  b.store(tmp, lid, b.load(x, b.alu(Ops.ADD, b.alu(Ops.MUL, g, b.const(L, i32)), lid)))
  b.barrier()
  s = L // 2
  while s >= 1:
    active = b.alu(Ops.CMPLT, lid, b.const(s, i32))
    mine, theirs = b.load(tmp, lid, gate=active), b.load(tmp, b.alu(Ops.ADD, lid, b.const(s, i32)), gate=active)
    b.store(tmp, lid, b.alu(Ops.ADD, mine, theirs), gate=active)
    b.barrier()
    s //= 2
  b.store(out, g, b.load(tmp, b.const(0, i32)), gate=b.alu(Ops.CMPLT, lid, b.const(1, i32)))
  return b.build()

@pytest.mark.parametrize("dt", [f32, i32, f16], ids=dtype_to_str)
def test_workgroup_tree_reduction_with_define_local_and_barriers_matches_the_emulator(backend, dt):
  require(backend, dt)
  G, L = 16, 64
  p = _tree_reduction(G, L, dt)
  rng = np.random.default_rng(21)
  xs = random_values(dt, G * L, rng) if dt == i32 else (rng.standard_normal(G * L) * 8).astype(to_np(dt))
  got = run(backend, p, np.zeros(G, to_np(dt)), xs)[0]
  assert_same(got, emulate(p, [np.zeros(G, to_np(dt)), xs]).buffers[0], "tree sum vs emulator")
  tree = xs.reshape(G, L).copy()
  while tree.shape[1] > 1:  # the same pairing, in the dtype: ints wrap, float adds round once (the exact oracle)
    h = tree.shape[1] // 2
    if dt == i32: tree = (tree[:, :h].astype(np.int64) + tree[:, h:]).astype(np.int32)
    else: tree = rounded_once(dt, add, tree[:, :h], tree[:, h:]).reshape(G, h)
  assert_same(got, tree[:, 0], "tree sum vs the rules")

def test_grid_with_vector_loads_gated_stores_and_a_var(backend):
  """2D grid, float4 loads from global, a gated vector store into __local, a barrier, and a DEFINE_VAR limit."""
  G0, G1, L = 4, 3, 8
  n = G0 * G1 * L * 4
  b = ProgramBuilder("grid_vec")
  out, x, tmp, lim = b.global_buf(f32, n), b.global_buf(f32, n), b.local_buf(f32, L * 4), b.var("lim", 0, 1 << 20)
  g0, g1, lid = b.gidx(0, G0), b.gidx(1, G1), b.lidx(0, L)
  group = b.alu(Ops.ADD, b.alu(Ops.MUL, g1, b.const(G0, i32)), g0)
  base = b.alu(Ops.MUL, b.alu(Ops.ADD, b.alu(Ops.MUL, group, b.const(L, i32)), lid), b.const(4, i32))
  v = b.load(x, base, count=4)
  b.store(tmp, b.alu(Ops.MUL, lid, b.const(4, i32)), b.alu(Ops.MUL, v, b.const(2.0, f32.vec(4))))
  b.barrier()
  back = b.load(tmp, b.alu(Ops.MUL, b.alu(Ops.SUB, b.const(L - 1, i32), lid), b.const(4, i32)), count=4)
  b.store(out, base, back, gate=b.alu(Ops.CMPLT, base, lim))
  xs = np.arange(n, dtype=np.float32) * 0.25
  got = run_against_emulator(backend, b.build(), [np.full(n, -1, np.float32), xs], vals=(n - 37,))[0][0]
  want = (xs.reshape(G0 * G1, L, 4)[:, ::-1, :] * 2).ravel()
  assert got[: n - 40].tolist() == want[: n - 40].tolist() and (got[n - 36:] == -1).all()

@pytest.mark.parametrize("path", sorted(PROGRAMS_DIR.glob("clang-hang-*.json")),
                         ids=lambda p: p.stem)
def test_tinygrad_max_reductions_over_a_local_array_match_the_emulator(backend, path):
  """Two max reductions tinygrad 0.10.1 generates (a softmax max and an argmax's max, staged through a local array);
  inputs with NaN, infinities and signed zeros. MAX propagates NaN; everything the emulator marks exact is bit-exact."""
  p = load_program(path)
  n_in, n_out = (u.dtype.size for u in reversed([u for u in p.uops if u.op is Ops.DEFINE_GLOBAL]))
  xs = random_values(f32, n_in, np.random.default_rng(5))
  xs[::17] = np.nan
  xs[5::23] = -0.0
  run_against_emulator(backend, p, [np.zeros(n_out, np.float32), xs])
