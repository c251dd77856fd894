"""Grid -> loops lowering: the result is valid and has the documented structure (hypothesis over random programs),
it computes what the grid computes (a small integer interpreter runs both); programs with BARRIERs are split into
phases and compute what the emulator computes on the grid form (hand-written reductions, a transpose, values and
accumulators across barriers, barriers inside uniform loops; random programs, on the emulator and on every backend);
a barrier loop with a bound that can differ between threads is refused; the capability check / lower_for follow the
backend's Renderer."""
import itertools
import random

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from refimpl.dtype import dtypes
from refimpl.emulator.machine import emulate
from refimpl.emulator.ub import UB
from refimpl.errors import UndefinedBehavior
from refimpl.ir import MOVE, GroupOp, Ops, Program, ProgramBuilder, ProgramError, elementwise, verify
from refimpl.ir.strategies import Chooser, HypothesisChooser, RandomChooser, programs
from refimpl.lower import check_capabilities, lower_for, lower_grid_to_loops
from refimpl.lower.grid_to_loops import LOOP_ORDER
from refimpl.renderer import Renderer
from refimpl.runner import Kernel
from refimpl.testing.compare import same_value
from refimpl.testing.programs import assert_same
from refimpl.testing.values import random_values

i32, f32, bl = dtypes.int32, dtypes.float32, dtypes.bool


@given(programs(barrier=False))
def test_lowering_keeps_programs_valid_and_structured(p):
  q = lower_grid_to_loops(p)
  verify(q)
  assert q.global_size == q.local_size == (1, 1, 1) and not q.specials
  if not p.specials:
    assert q is p
    return
  decls = [u for u in p.uops if u.op in GroupOp.Declaration]
  assert list(q.uops[:len(decls)]) == decls                         # declarations first, unchanged
  assert (q.uops[len(decls)].op, q.uops[len(decls)].arg) == (Ops.CONST, 0)
  loops = [(n, s) for n in LOOP_ORDER if (s := p.specials.get(n, 1)) > 1]
  head = q.uops[len(decls) + 1:len(decls) + 1 + 2 * len(loops)]     # (CONST size, RANGE) per loop, outermost first
  assert [(u.op, u.arg) for u in head[0::2]] == [(Ops.CONST, s) for _, s in loops]
  assert [u.op for u in head[1::2]] == [Ops.RANGE] * len(loops)
  tail = q.uops[len(q.uops) - len(loops):]
  assert [u.src[0] for u in tail] == [len(decls) + 2 + 2 * k for k in reversed(range(len(loops)))]  # ENDRANGEs, innermost first
  body = q.uops[len(decls) + 1 + 2 * len(loops):len(q.uops) - len(loops)]
  assert [(u.op, u.dtype, u.arg) for u in body] == [(u.op, u.dtype, u.arg) for u in p.uops
                                                    if u.op not in GroupOp.Declaration and u.op is not Ops.SPECIAL]


def test_elementwise_structure():
  q = lower_grid_to_loops(elementwise(Ops.ADD, f32, n=16))
  assert [u.op for u in q.uops] == [Ops.DEFINE_GLOBAL] * 3 + [Ops.CONST, Ops.CONST, Ops.RANGE] + \
    [Ops.INDEX, Ops.LOAD, Ops.INDEX, Ops.LOAD, Ops.ADD, Ops.INDEX, Ops.STORE, Ops.ENDRANGE]
  assert q.uops[5].src == (3, 4) and (q.uops[3].arg, q.uops[4].arg) == (0, 16)
  assert q.uops[6].src == (1, 5)  # the loads index with the loop variable


def test_size_one_specials_become_zero_and_order_is_workgroups_then_threads():
  b = ProgramBuilder()
  out = b.global_buf(i32, 64)
  ids = {n: b.special(n, s) for n, s in (("lidx0", 2), ("gidx0", 4), ("gidx1", 1), ("lidx1", 2), ("gidx2", 2))}
  gate = b.alu(Ops.CMPNE, ids["gidx1"], ids["lidx1"])
  b.store(out, b.const(0, i32), b.alu(Ops.ADD, ids["lidx0"], ids["gidx0"]), gate=gate)
  q = lower_grid_to_loops(b.build())
  ranges = [u for u in q.uops if u.op is Ops.RANGE]
  assert [q.uops[r.src[1]].arg for r in ranges] == [2, 4, 2, 2]        # gidx2, gidx0, lidx1, lidx0; gidx1 has size 1
  cmp = next(u for u in q.uops if u.op is Ops.CMPNE)
  assert q.uops[cmp.src[0]].op is Ops.CONST and q.uops[cmp.src[0]].arg == 0  # gidx1 -> CONST 0
  assert [r.arg for r in ranges] == [0, 1, 2, 3]


def test_range_ids_do_not_collide():
  b = ProgramBuilder()
  out = b.global_buf(i32, 8)
  g = b.gidx(0, 2)
  with b.loop(4) as k: b.store(out, b.alu(Ops.ADD, g, k), k)
  q = lower_grid_to_loops(b.build())
  assert sorted(u.arg for u in q.uops if u.op is Ops.RANGE) == [0, 1]


def test_invalid_input_is_reported_as_such():
  b = ProgramBuilder()
  b.gidx(0, 4)
  b.range(b.const(0, i32), b.const(1, i32))
  with pytest.raises(ProgramError, match="unclosed-block"): lower_grid_to_loops(b.build(check=False))


# ***** semantics: a tiny interpreter for integer programs runs the grid form and the loop form *****

ALU = {Ops.ADD: lambda a, b: a + b, Ops.MUL: lambda a, b: a * b, Ops.MOD: lambda a, b: a % b, Ops.CMPLT: lambda a, b: a < b,
       Ops.CMPNE: lambda a, b: a != b, Ops.WHERE: lambda c, a, b: a if c else b, Ops.MAX: max, Ops.SUB: lambda a, b: a - b}

def run(p, bufs: dict[int, list], tid: dict[str, int]) -> None:
  """Run the program once as the thread `tid` (SPECIAL name -> id); integer ALU only, enough for these tests."""
  vals: dict[int, object] = {}
  local_mem: dict[int, list] = {}
  def get(j: int):  # DEFINE_ACC and ASSIGN both read as the accumulator's register
    return vals[p.uops[j].src[0] if p.uops[j].op is Ops.ASSIGN else j]
  def block(i: int, stop: int) -> None:
    while i < stop:
      u = p.uops[i]
      s = [get(j) for j in u.src]
      if u.op is Ops.DEFINE_GLOBAL: vals[i] = bufs[u.arg]
      elif u.op is Ops.DEFINE_LOCAL: vals[i] = local_mem.setdefault(i, [0] * u.dtype.size)
      elif u.op in (Ops.CONST,): vals[i] = u.arg
      elif u.op is Ops.SPECIAL: vals[i] = tid[u.arg[0]]
      elif u.op in (Ops.INDEX,): vals[i] = (s[0], s[1])
      elif u.op is Ops.LOAD: vals[i] = s[0][0][s[0][1]] if len(s) == 1 or s[2] else s[1]
      elif u.op is Ops.STORE:
        if len(s) == 2 or s[2]: s[0][0][s[0][1]] = s[1]
      elif u.op is Ops.DEFINE_ACC: vals[i] = s[0]
      elif u.op is Ops.ASSIGN: vals[u.src[0]] = s[1]
      elif u.op in (Ops.RANGE, Ops.IF):
        end = next(k for k in range(i + 1, len(p.uops)) if p.uops[k].op in GroupOp.BlockEnd and p.uops[k].src == (i,))
        if u.op is Ops.IF:
          if s[0]: block(i + 1, end)
        else:
          for r in range(s[0], s[1]):
            vals[i] = r
            block(i + 1, end)
        i = end
      elif u.op in ALU: vals[i] = ALU[u.op](*s)
      i += 1
  block(0, len(p.uops))

def run_grid(p, bufs) -> dict[int, list]:
  names = [f"{k}idx{d}" for k in "gl" for d in range(3)]
  sizes = list(p.global_size) + list(p.local_size)
  for ids in itertools.product(*(range(n) for n in sizes)): run(p, bufs, dict(zip(names, ids)))
  return bufs

@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3), st.integers(1, 2), st.integers(0, 3), st.integers(0, 7))
def test_lowered_program_computes_what_the_grid_computes(g0, g1, l0, l1, trips, shift):
  b = ProgramBuilder()
  n = g0 * g1 * l0 * l1
  out, x = b.global_buf(i32, n), b.global_buf(i32, n)
  acc = b.acc(b.const(0, i32))  # declared before the SPECIALs: each thread must still get a fresh accumulator
  gid0, gid1, lid0, lid1 = b.gidx(0, g0), b.gidx(1, g1), b.lidx(0, l0), b.lidx(1, l1)
  c = lambda v: b.const(v, i32)
  mad = lambda a, n, x: b.alu(Ops.ADD, b.alu(Ops.MUL, a, c(n)), x)  # a*n + x
  tid = mad(mad(mad(gid1, g0, gid0), l1, lid1), l0, lid0)
  with b.loop(trips) as k:
    src = b.alu(Ops.MOD, b.alu(Ops.ADD, tid, b.alu(Ops.ADD, k, c(shift))), c(n))
    total = b.assign(acc, b.alu(Ops.ADD, acc, b.load(x, src, gate=b.alu(Ops.CMPNE, k, c(1)), alt=c(1000))))
  with b.when(b.alu(Ops.CMPLT, lid0, c(2))): b.store(out, tid, b.alu(Ops.MAX, total, c(5)))
  p = b.build()
  inputs = [7 * i + 3 for i in range(n)]
  want = run_grid(p, {0: [-1] * n, 1: list(inputs)})
  got = run_grid(lower_grid_to_loops(p), {0: [-1] * n, 1: list(inputs)})
  assert got == want
  assert want[0][0] != -1


# ***** capabilities *****

CLANG = Renderer(device="CLANG")
GPU = Renderer(device="GPU", has_local=True, has_shared=True, global_max=(2**31 - 1,) * 3, local_max=(256, 256, 64),
               vector_widths=(2, 4))

def test_lower_for_follows_the_renderer():
  p = elementwise(Ops.ADD, f32, n=16, local_size=4)
  assert lower_for(p, GPU) is p
  q = lower_for(p, CLANG)
  assert not q.specials and sum(u.op is Ops.RANGE for u in q.uops) == 2


@pytest.mark.parametrize("renderer,program,msg", [
  (CLANG, elementwise(Ops.ADD, f32, n=4), "uop 3 SPECIAL: [capability] CLANG: the backend has no grid"),
  (Renderer(device="X", supported_dtypes=frozenset({f32, i32, bl})), elementwise(Ops.ADD, dtypes.float64, n=4),
   "uop 0 DEFINE_GLOBAL: [capability] X: dtype dtypes.double is not supported"),
  (Renderer(device="G", global_max=(8, 8, 8)), elementwise(Ops.ADD, f32, n=16),
   "program: [capability] G: global_size (16, 1, 1) exceeds"),
  (Renderer(device="G", global_max=(8, 8, 8), has_local=True, local_max=(2,)), elementwise(Ops.ADD, f32, n=16, local_size=4),
   "local_size (4, 1, 1) exceeds the backend's maximum (2, 1, 1)"),
  (Renderer(device="G", global_max=(64,) * 3), elementwise(Ops.ADD, f32, n=16, local_size=4), "G: the backend has no local ids"),
])
def test_check_capabilities(renderer, program, msg):
  with pytest.raises(ProgramError) as e: check_capabilities(program, renderer)
  assert msg in str(e.value)


def test_locals_need_shared_memory_on_a_grid_backend_but_not_on_a_loop_backend():
  b = ProgramBuilder()
  out, tmp = b.global_buf(f32, 4), b.local_buf(f32, 4)
  g = b.gidx(0, 4)
  b.store(tmp, g, b.const(2.0, f32))
  b.store(out, g, b.load(tmp, g))
  p = b.build()
  with pytest.raises(ProgramError, match=r"no local \(shared\) memory"):
    check_capabilities(p, Renderer(device="G", global_max=(8,) * 3))
  assert lower_for(p, CLANG).locals == p.locals


# ***** barriers: phases split at every BARRIER, values and accumulators carried across them *****
# The oracle is the emulator running the grid form (lanes in lock step, one local array per workgroup, barriers as
# race-tracking epochs); the loop form must compute the same buffers bit for bit, on the emulator (it is just a program
# with RANGEs) and on every backend. Where a rule gives the result directly (a sum, a transpose), it is checked too.

c32 = lambda b, v: b.const(v, i32)
mad = lambda b, a, n, x: b.alu(Ops.ADD, b.alu(Ops.MUL, a, c32(b, n)), x)  # a*n + x

def tree_sum(G: int = 3, L: int = 16) -> Program:
  """out[g] = sum of x[g*L : g*L+L] (int32, wrapping) by a workgroup tree with log2(L) + 1 barriers, unrolled:
  tmp[l] = x; barrier; for s = L/2 .. 1: tmp[l] += tmp[l+s] on the threads l < s, barrier; thread 0 stores tmp[0]."""
  b = ProgramBuilder("tree_sum")
  out, x, tmp = b.global_buf(i32, G), b.global_buf(i32, G * L), b.local_buf(i32, L)
  g, lid = b.gidx(0, G), b.lidx(0, L)
  b.store(tmp, lid, b.load(x, mad(b, g, L, lid)))
  b.barrier()
  s = L // 2
  while s >= 1:
    active = b.alu(Ops.CMPLT, lid, c32(b, s))
    total = b.alu(Ops.ADD, b.load(tmp, lid, gate=active), b.load(tmp, b.alu(Ops.ADD, lid, c32(b, s)), gate=active))
    b.store(tmp, lid, total, gate=active)
    b.barrier()
    s //= 2
  b.store(out, g, b.load(tmp, c32(b, 0)), gate=b.alu(Ops.CMPLT, lid, c32(b, 1)))
  return b.build()

def tree_sum_loop(G: int = 3, L: int = 16) -> Program:
  """tree_sum with its steps as a uniform loop (a BARRIER inside a RANGE): for k < log2(L): s = (L/2) >> k;
  tmp[l] += tmp[l+s] on the threads l < s; barrier. The threads of the 2D workgroup are l = l1*L0 + l0 (L0 = 4)."""
  b = ProgramBuilder("tree_sum_loop")
  out, x, tmp = b.global_buf(i32, G), b.global_buf(i32, G * L), b.local_buf(i32, L)
  g, l0, l1 = b.gidx(0, G), b.lidx(0, 4), b.lidx(1, L // 4)
  lid = mad(b, l1, 4, l0)
  b.store(tmp, lid, b.load(x, mad(b, g, L, lid)))
  b.barrier()
  with b.loop(L.bit_length() - 1) as k:
    s = b.alu(Ops.SHR, c32(b, L // 2), k)
    active = b.alu(Ops.CMPLT, lid, s)
    total = b.alu(Ops.ADD, b.load(tmp, lid, gate=active), b.load(tmp, b.alu(Ops.ADD, lid, s), gate=active))
    b.store(tmp, lid, total, gate=active)
    b.barrier()
  b.store(out, g, b.load(tmp, c32(b, 0)), gate=b.alu(Ops.CMPLT, lid, c32(b, 1)))
  return b.build()

def staged_transpose(T: int = 4, G0: int = 3, G1: int = 2) -> Program:
  """out = x^T for x a (G1*T) x (G0*T) float32 matrix: workgroup (g1, g0) stages its T x T tile through local memory,
  thread (l1, l0) reading x[g1*T + l1][g0*T + l0] into tmp[l1][l0] and, after the barrier, writing tmp[l0][l1] to
  out[g0*T + l1][g1*T + l0]."""
  b = ProgramBuilder("staged_transpose")
  W, H = G0 * T, G1 * T
  out, x, tmp = b.global_buf(f32, W * H), b.global_buf(f32, W * H), b.local_buf(f32, T * T)
  g0, g1, l0, l1 = b.gidx(0, G0), b.gidx(1, G1), b.lidx(0, T), b.lidx(1, T)
  b.store(tmp, mad(b, l1, T, l0), b.load(x, mad(b, mad(b, g1, T, l1), W, mad(b, g0, T, l0))))
  b.barrier()
  b.store(out, mad(b, mad(b, g0, T, l1), H, mad(b, g1, T, l0)), b.load(tmp, mad(b, l0, T, l1)))
  return b.build()

def values_across_barriers(G: int = 3, L0: int = 4, L1: int = 2) -> Program:
  """Per-thread values of every kind carried over one and two barriers: a loaded int32 v, a float32 f = v * 0.5, a
  loaded float32.vec(4) q, a bool c = v < 0, an int32.vec(2) (v, 3v), and w = tmp[(l+1) % L] read after barrier 1.
  out0 = w + v, out1 = c ? w : 3v, outf = f + tmpf[L-1-l], outq = q * 2, outx = x[(v & INT32_MAX) % n] (the index
  is a carried value)."""
  b = ProgramBuilder("values_across_barriers")
  L = L0 * L1
  n = G * L
  out0, out1, outf, outq = b.global_buf(i32, n), b.global_buf(i32, n), b.global_buf(f32, n), b.global_buf(f32, 4 * n)
  outx = b.global_buf(i32, n)
  x, xq, tmp, tmpf = b.global_buf(i32, n), b.global_buf(f32, 4 * n), b.local_buf(i32, L), b.local_buf(f32, L)
  g, l0, l1 = b.gidx(0, G), b.lidx(0, L0), b.lidx(1, L1)
  lid = mad(b, l1, L0, l0)
  tid = mad(b, g, L, lid)
  v = b.load(x, tid)
  f = b.alu(Ops.MUL, b.cast(v, f32), b.const(0.5, f32))
  q = b.load(xq, b.alu(Ops.MUL, tid, c32(b, 4)), count=4)
  c = b.alu(Ops.CMPLT, v, c32(b, 0))
  pair = b.vectorize(v, b.alu(Ops.MUL, v, c32(b, 3)))
  mine = b.alu(Ops.MOD, b.alu(Ops.AND, v, c32(b, 0x7FFFFFFF)), c32(b, n))  # an index computed from loaded data
  b.store(tmp, lid, v)
  b.barrier()
  w = b.load(tmp, b.alu(Ops.MOD, b.alu(Ops.ADD, lid, c32(b, 1)), c32(b, L)))
  b.store(out0, tid, b.alu(Ops.ADD, w, v))
  b.store(tmpf, lid, f)
  b.barrier()
  b.store(out1, tid, b.alu(Ops.WHERE, c, w, b.gep(pair, 1)))
  b.store(outf, tid, b.alu(Ops.ADD, f, b.load(tmpf, b.alu(Ops.SUB, c32(b, L - 1), lid))))
  b.store(outq, b.alu(Ops.MUL, tid, c32(b, 4)), b.alu(Ops.MUL, q, b.const(2.0, f32.vec(4))))
  b.store(outx, tid, b.load(x, mine))
  return b.build()

def accumulators_across_barriers(G: int = 2, L: int = 6) -> Program:
  """Accumulators live across barriers: acc (int32, declared before the SPECIALs) = x[t] + 0 + 1 + 2 in phase 0 (an
  inner loop); phase 1: acc = acc*3 + tmp[(l+1) % L] (tmp holds phase 0's acc), then +100 on the threads l < 2 (an IF),
  and vacc (float32.vec(2), init (1, -2)) += (float(acc), 0.5); phase 2 stores both."""
  b = ProgramBuilder("accumulators_across_barriers")
  n = G * L
  out, outv, x, tmp = b.global_buf(i32, n), b.global_buf(f32, 2 * n), b.global_buf(i32, n), b.local_buf(i32, L)
  acc = b.acc(c32(b, 0))
  g, lid = b.gidx(0, G), b.lidx(0, L)
  tid = mad(b, g, L, lid)
  vacc = b.acc(b.const((1.0, -2.0), f32.vec(2)))
  b.assign(acc, b.alu(Ops.ADD, acc, b.load(x, tid)))
  with b.loop(3) as k: b.assign(acc, b.alu(Ops.ADD, acc, k))
  b.store(tmp, lid, acc)
  b.barrier()
  b.assign(acc, mad(b, acc, 3, b.load(tmp, b.alu(Ops.MOD, b.alu(Ops.ADD, lid, c32(b, 1)), c32(b, L)))))
  with b.when(b.alu(Ops.CMPLT, lid, c32(b, 2))): b.assign(acc, b.alu(Ops.ADD, acc, c32(b, 100)))
  b.assign(vacc, b.alu(Ops.ADD, vacc, b.vectorize(b.cast(acc, f32), b.const(0.5, f32))))
  b.barrier()
  b.store(out, tid, acc)
  b.store(outv, b.alu(Ops.MUL, tid, c32(b, 2)), vacc)
  return b.build()

def barrier_loops(G: int = 3, L: int = 4) -> Program:
  """BARRIERs inside uniform loops, nested, with bounds of every kind: tmp = x's slice; for k < n (a DEFINE_VAR):
  { v = tmp[(l+1) % L]; barrier; tmp[l] = v + k; acc += v; cnt += 1; barrier; for j < m (m = x[g] & 3, loaded before
  the loops: a carried value read from the first thread): { w = tmp[L-1-l]; barrier; tmp[l] = w ^ j; barrier };
  for i < cnt (a uniform accumulator): { tmp[l] += 1 (own element, no barrier needed) } barrier }; out = tmp[l] + acc."""
  b = ProgramBuilder("barrier_loops")
  out, x, tmp, nvar = b.global_buf(i32, G * L), b.global_buf(i32, G * L), b.local_buf(i32, L), b.var("n", 0, 4)
  g, lid = b.gidx(0, G), b.lidx(0, L)
  tid = mad(b, g, L, lid)
  acc, cnt = b.acc(c32(b, 0)), b.acc(c32(b, 0))
  m = b.alu(Ops.AND, b.load(x, g), c32(b, 3))
  b.store(tmp, lid, b.load(x, tid))
  b.barrier()
  with b.loop_uops(c32(b, 0), nvar) as k:
    v = b.load(tmp, b.alu(Ops.MOD, b.alu(Ops.ADD, lid, c32(b, 1)), c32(b, L)))
    b.barrier()
    b.store(tmp, lid, b.alu(Ops.ADD, v, k))
    b.assign(acc, b.alu(Ops.ADD, acc, v))
    b.assign(cnt, b.alu(Ops.ADD, cnt, c32(b, 1)))
    b.barrier()
    with b.loop_uops(c32(b, 0), m) as j:
      w = b.load(tmp, b.alu(Ops.SUB, c32(b, L - 1), lid))
      b.barrier()
      b.store(tmp, lid, b.alu(Ops.XOR, w, j))
      b.barrier()
    with b.loop_uops(c32(b, 0), cnt): b.store(tmp, lid, b.alu(Ops.ADD, b.load(tmp, lid), c32(b, 1)))
    b.barrier()
  b.store(out, tid, b.alu(Ops.ADD, b.load(tmp, lid), acc))
  return b.build()

BARRIER_PROGRAMS = {f.__name__: f for f in (tree_sum, tree_sum_loop, staged_transpose, values_across_barriers,
                                            accumulators_across_barriers, barrier_loops)}
BARRIER_VALS = {"barrier_loops": (3,)}

def barrier_inputs(p: Program, seed: int = 0) -> list[np.ndarray]:
  """Random inputs (edge-biased), with the float buffers kept small (products and sums stay exact-rule ops, no NaN)."""
  rng = np.random.default_rng(seed)
  return [random_values(ptr.base, ptr.size, rng) if ptr.base == i32 else (rng.standard_normal(ptr.size) * 8).astype(np.float32)
          for _, ptr in sorted(p.buffers.items())]

def assert_same_buffers(got: list[np.ndarray], want: list[np.ndarray], what: str) -> None:
  for k, (x, y) in enumerate(zip(got, want)): assert_same(x, y, f"{what}: buffer {k}")

def test_a_barrier_splits_the_thread_loops_into_phases():
  """One nest of thread loops per phase, inside the workgroup loops; no BARRIER or SPECIAL is left; a value used after
  the barrier is stored to its carry array (one element per thread) in phase 0 and loaded at the start of phase 1."""
  b = ProgramBuilder("two_phases")
  out, tmp = b.global_buf(f32, 8), b.local_buf(f32, 4)
  g, lid = b.gidx(0, 2), b.lidx(0, 4)
  v = b.alu(Ops.MUL, b.cast(lid, f32), b.const(2.0, f32))  # a float value: carried, not recomputed
  b.store(tmp, lid, v)
  b.barrier()
  b.store(out, mad(b, g, 4, lid), b.alu(Ops.ADD, v, b.load(tmp, b.alu(Ops.SUB, c32(b, 3), lid))))
  q = lower_grid_to_loops(b.build())
  assert [u.op for u in q.uops] == [
    Ops.DEFINE_GLOBAL, Ops.DEFINE_LOCAL, Ops.DEFINE_LOCAL, Ops.CONST, Ops.CONST, Ops.RANGE,  # decls, carry, 0, gidx0 loop
    Ops.CONST, Ops.RANGE, Ops.CAST, Ops.CONST, Ops.MUL, Ops.INDEX, Ops.STORE,                # phase 0: v; carry[l] = v
    Ops.INDEX, Ops.STORE, Ops.ENDRANGE,                                                      #   tmp[l] = v
    Ops.CONST, Ops.RANGE, Ops.INDEX, Ops.LOAD,                                               # phase 1: v = carry[l]
    Ops.CONST, Ops.MUL, Ops.ADD, Ops.CONST, Ops.SUB, Ops.INDEX, Ops.LOAD, Ops.ADD, Ops.INDEX, Ops.STORE, Ops.ENDRANGE,
    Ops.ENDRANGE]
  assert (q.uops[2].arg, q.uops[2].dtype) == ("carry6", f32.ptr(4, local=True))            # one float per thread
  assert q.uops[7].src == (3, 6) and q.uops[17].src == (3, 16) and q.uops[6].arg == q.uops[16].arg == 4  # lidx0 loops
  assert q.uops[11].src == (2, 7) and q.uops[12].src == (11, 10)                            # carry[lidx0] = v
  assert q.uops[18].src == (2, 17) and q.uops[27].src == (19, 26)                           # v + tmp[3 - l], v reloaded

def test_one_thread_per_workgroup_drops_barriers():
  b = ProgramBuilder("lone_thread")
  out, tmp = b.global_buf(i32, 4), b.local_buf(i32, 1)
  g = b.gidx(0, 4)
  b.store(tmp, c32(b, 0), g)
  b.barrier()
  b.store(out, g, b.load(tmp, c32(b, 0)))
  p = b.build()
  q = lower_grid_to_loops(p)
  assert [u.op for u in q.uops].count(Ops.RANGE) == 1 and not any(u.op is Ops.BARRIER for u in q.uops)
  assert emulate(q, [np.zeros(4, np.int32)]).buffers[0].tolist() == [0, 1, 2, 3]

@pytest.mark.parametrize("name", sorted(BARRIER_PROGRAMS))
def test_barrier_programs_lower_to_what_the_grid_computes_on_the_emulator(name):
  p = BARRIER_PROGRAMS[name]()
  q = lower_grid_to_loops(p)
  assert not q.specials and not any(u.op is Ops.BARRIER for u in q.uops)
  bufs, vals = barrier_inputs(p), BARRIER_VALS.get(name, ())
  want = emulate(p, bufs, vals).buffers  # strict: both forms are defined (the loop form never reads a carry unwritten)
  assert_same_buffers(emulate(q, bufs, vals).buffers, want, name)

def wrap32(x): return ((np.asarray(x, np.int64) + 2**31) % 2**32 - 2**31).astype(np.int32)

def test_barrier_programs_compute_their_rules():
  """The emulator's grid result for the hand-written programs is what each one's docstring says (so the comparisons
  above compare something meaningful)."""
  for name in ("tree_sum", "tree_sum_loop"):
    p = BARRIER_PROGRAMS[name]()
    bufs = barrier_inputs(p)
    assert emulate(p, bufs).buffers[0].tolist() == wrap32(bufs[1].astype(np.int64).reshape(3, 16).sum(axis=1)).tolist()
  p = staged_transpose()
  bufs = barrier_inputs(p)
  assert emulate(p, bufs).buffers[0].tolist() == bufs[1].reshape(8, 12).T.ravel().tolist()
  p = accumulators_across_barriers()
  bufs = barrier_inputs(p)
  x = bufs[2].astype(np.int64).reshape(2, 6)
  acc = wrap32(x + 3)
  acc = wrap32(acc.astype(np.int64) * 3 + np.roll(acc, -1, axis=1) + np.where(np.arange(6) < 2, 100, 0))
  got = emulate(p, bufs).buffers
  assert got[0].tolist() == acc.ravel().tolist()
  assert got[1].tolist() == np.stack([1 + acc.astype(np.float32), np.full_like(acc, -1.5, np.float32)], -1).ravel().tolist()
  p = barrier_loops()
  bufs = barrier_inputs(p)
  x = bufs[1].astype(np.int64).reshape(3, 4)
  tmp, acc = x.copy(), np.zeros_like(x)
  for k in range(3):
    v = np.roll(tmp, -1, axis=1)
    tmp, acc = wrap32(v + k).astype(np.int64), wrap32(acc + v).astype(np.int64)
    for j in range(4):
      tmp = np.where((x.ravel()[:3, None] & 3) > j, tmp[:, ::-1] ^ j, tmp)  # m = x[g] & 3 trips
    tmp = wrap32(tmp + k + 1).astype(np.int64)
  assert emulate(p, bufs, (3,)).buffers[0].tolist() == wrap32(tmp + acc).ravel().tolist()

@pytest.mark.parametrize("name", sorted(BARRIER_PROGRAMS))
def test_barrier_programs_in_loop_form_match_the_grid_emulator_on_every_backend(backend, name):
  """The loop form runs on the backend (CLANG and LLVM run it anyway; the PYTHON and GPU devices run it as a one-thread
  program here) and gives the emulator's grid result bit for bit."""
  p = BARRIER_PROGRAMS[name]()
  bufs, vals = barrier_inputs(p, 1), BARRIER_VALS.get(name, ())
  assert_same_buffers(Kernel(lower_grid_to_loops(p), backend)(*bufs, vals=vals), emulate(p, bufs, vals).buffers,
                      f"{backend} {name}")

def test_a_barrier_loop_whose_bound_differs_between_threads_through_control_is_rejected_by_the_verifier():
  """Rule "barrier": an accumulator ASSIGNed under an IF on lidx can differ between threads (control dependence), so a
  RANGE bounded by it around a BARRIER would not be reached by every thread: the verifier rejects it (and so the lowering,
  which reads such bounds from thread 0, never sees one)."""
  b = ProgramBuilder("divergent_bound")
  out, tmp = b.global_buf(i32, 4), b.local_buf(i32, 4)
  lid = b.lidx(0, 4)
  acc = b.acc(c32(b, 1))
  with b.when(b.alu(Ops.CMPLT, lid, c32(b, 1))): b.assign(acc, c32(b, 2))
  with b.loop_uops(c32(b, 0), acc):
    b.store(tmp, lid, lid)
    b.barrier()
  b.store(out, lid, b.load(tmp, lid))
  r = next(i for i, u in enumerate(b.uops) if u.op is Ops.RANGE)
  with pytest.raises(ProgramError, match=rf"\[barrier\] BARRIER inside RANGE {r} whose bounds depend on lidx \(through data "
                                         r"or control\)"):
    b.build()


# ***** carries are moves (Ops.STORE arg MOVE) *****

def carried_undefined_value_program() -> Program:
  """Issue 42's example, found by the random test below: two threads LOAD a local element no thread wrote (an undefined
  value, UB.UNINITIALISED) before a BARRIER, and only a dead ADD after it reads the value; the one STORE stores a
  constant under a false gate. Defined: the undefined value is never used."""
  b = ProgramBuilder("carried_undefined")
  out = b.global_buf(bl, 1)
  for _ in range(3): b.global_buf(bl, 1)
  b.var("n", 0, 0)
  b.gidx(0, 1)
  b.lidx(0, 2)
  tmp = b.local_buf(bl, 4, "temp0")
  acc = b.acc(b.const(0, dtypes.int8))
  with b.loop(4): b.assign(acc, b.alu(Ops.ADD, acc, b.const(0, dtypes.int8)))
  x = b.load(tmp, c32(b, 0))
  b.barrier()
  b.alu(Ops.ADD, x, b.const(False, bl))
  b.store(out, c32(b, 0), b.const(False, bl), gate=b.const(False, bl))
  return b.build()

def test_a_carry_moves_an_undefined_value_without_using_it():
  """Ops.STORE's MOVE: the lowering carries a value across a BARRIER with MOVE STOREs, which store its undefined lanes
  as undefined instead of using them, so the loop form of a defined program is defined (strict run, no finding) and
  the carried value is still undefined where the grid form's is."""
  p = carried_undefined_value_program()
  bufs = [np.zeros(1, dtype=bool) for _ in range(4)]
  assert [d.kind for d in emulate(p, bufs, (0,)).deferred] == [UB.UNINITIALISED]
  q = lower_grid_to_loops(p)
  assert [u.arg for u in q.uops if u.op is Ops.STORE] == [MOVE, None]
  got = emulate(q, bufs, (0,))
  assert [d.kind for d in got.deferred] == [UB.UNINITIALISED] and not got.buffers[0][0]

def test_a_use_of_a_carried_undefined_value_names_the_op_that_made_it():
  """Deferred undefined values, through a MOVE: a value the lowering carries is used where the grid form uses it (a
  STORE to a global after the BARRIER) and the finding names the LOAD that made it undefined, in both forms."""
  b = ProgramBuilder("carried_use")
  out, tmp = b.global_buf(i32, 2), b.local_buf(i32, 2)
  lid = b.lidx(0, 2)
  x = b.load(tmp, lid)
  b.barrier()
  b.store(out, lid, x)
  p = b.build()
  for prog in (p, lower_grid_to_loops(p)):
    with pytest.raises(UndefinedBehavior) as e: emulate(prog, [np.zeros(2, np.int32)])
    assert e.value.use == "stored" and e.value.kind is UB.UNINITIALISED and e.value.origin.op is Ops.LOAD
    assert prog.uops[e.value.uop_index].op is Ops.STORE and prog.uops[e.value.uop_index].arg is None


# ***** random programs with barriers *****

def assert_lowering_matches_on_the_emulator(p: Program, bufs: list[np.ndarray], vals: tuple[int, ...]) -> bool:
  """When the grid form is defined (permissive emulation finds no undefined behaviour), the loop form verifies, is
  defined too (it never reads a carry array before writing it) and gives the same buffers; False when p is undefined."""
  want = emulate(p, bufs, vals, strict=False)
  if want.events: return False
  q = verify(lower_grid_to_loops(p))
  got = emulate(q, bufs, vals, strict=False)
  assert not got.events, f"the loop form of a defined program has undefined behaviour: {got.events[0]}\n{p}\n{q}"
  for k, (x, y, loose) in enumerate(zip(got.buffers, want.buffers, want.loose)):
    bad = np.flatnonzero(~loose & ~same_value(x, y))
    assert len(bad) == 0, f"buffer {k} element {bad[0]}: grid {y[bad[0]]!r}, loops {x[bad[0]]!r}\n{p}\n{q}"
  return True

def inputs_for(p: Program, rng: np.random.Generator) -> tuple[list[np.ndarray], tuple[int, ...]]:
  bufs = [random_values(ptr.base, ptr.size, rng) for _, ptr in sorted(p.buffers.items())]
  return bufs, tuple(int(rng.integers(lo, hi + 1)) for _, lo, hi in p.vars)

@example(p=carried_undefined_value_program(), seed=0)
@given(programs(max_steps=16, barrier=True), st.integers(0, 2**32 - 1))
def test_random_programs_with_barriers_lower_to_what_the_grid_computes(p, seed):
  """refimpl.ir.strategies' programs with BARRIERs (at top level, between any ops): few are defined with more than one
  thread per workgroup (their locals race), so the race-free generator below does the heavy lifting."""
  assert_lowering_matches_on_the_emulator(p, *inputs_for(p, np.random.default_rng(seed)))

SLOTS = 4  # output slots per thread

class PhasedGen:
  """Random programs built to be defined, for the lowering: a 2D workgroup (l = l1*L0 + l0), a local int32 tmp that
  a phase either fills through a bijection of l or reads anywhere (never both, and reads only once it is filled and a
  barrier passed), int32 / int32.vec(2) / bool / float32 values and int32 / int32.vec(2) accumulators defined in one
  phase and used or ASSIGNed in later ones (also inside an IF on l or an inner loop), workgroup loops (a BARRIER inside
  a RANGE, nested) whose bounds are uniform: a CONST, the DEFINE_VAR, a loop counter, a value loaded at gidx, or an
  accumulator ASSIGNed the same on every thread. A loop body that touched tmp after its last barrier ends with one (so
  iterations do not race). Each thread writes its own SLOTS output elements."""
  def __init__(self, ch: Chooser):
    self.ch = ch
    b = self.b = ProgramBuilder("phased")
    G, L0, L1 = ch.int(1, 3), ch.int(1, 4), ch.int(1, 3)
    self.L, self.n = L0 * L1, G * L0 * L1
    self.out, self.x, self.tmp, nvar = b.global_buf(i32, self.n * SLOTS), b.global_buf(i32, self.n), \
      b.local_buf(i32, self.L), b.var("n", 0, 3)
    self.uacc = b.acc(c32(b, 1))  # a uniform accumulator, declared before the SPECIALs
    g, l0, l1 = b.gidx(0, G), b.lidx(0, L0), b.lidx(1, L1)
    self.lid = mad(b, l1, L0, l0)
    self.tid = mad(b, g, self.L, self.lid)
    self.scopes = [{"int": [self.lid, self.tid, b.load(self.x, self.tid)], "vec": [], "bool": [], "float": [], "acc": [],
                    "uniform": [nvar, g, b.load(self.x, g)]}]
    self.filled = self.wrote = self.read = False  # tmp: filled before the last barrier; written / read since it
    self.loops: list[tuple[int, bool, bool, bool]] = []  # open workgroup loops: (RANGE, filled, wrote, read) at entry

  def pool(self, kind: str) -> list[int]: return [x for s in self.scopes for x in s[kind]]
  def pick(self, kind: str) -> int: return self.ch.pick(self.pool(kind))
  def add(self, kind: str, x: int) -> int:
    self.scopes[-1][kind].append(x)
    return x
  def index(self, v: int, size: int) -> int:  # (v & INT32_MAX) % size: in bounds whatever v is
    return self.b.alu(Ops.MOD, self.b.alu(Ops.AND, v, c32(self.b, 0x7FFFFFFF)), c32(self.b, size))

  def step(self) -> None:
    b, ch = self.b, self.ch
    k = ch.int(0, 15)
    if k == 0: self.add("int", b.alu(ch.pick((Ops.ADD, Ops.SUB, Ops.MUL, Ops.XOR, Ops.MAX)), self.pick("int"), self.pick("int")))
    elif k == 1: self.add("int", b.load(self.x, self.index(self.pick("int"), self.n)))
    elif k == 2: self.add("bool", b.alu(Ops.CMPLT, self.pick("int"), self.pick("int")))
    elif k == 3 and self.pool("bool"): self.add("int", b.alu(Ops.WHERE, self.pick("bool"), self.pick("int"), self.pick("int")))
    elif k == 4: self.add("vec", b.vectorize(self.pick("int"), self.pick("int")))
    elif k == 5 and self.pool("vec"):
      v = self.pick("vec")
      self.add("vec", b.alu(Ops.MUL, v, self.pick("vec")))
      self.add("int", b.gep(v, ch.int(0, 1)))
    elif k == 6:
      f = self.add("float", b.alu(Ops.MUL, b.cast(self.pick("int"), f32), b.const(ch.pick((0.5, -3.0)), f32)))
      self.add("int", b.bitcast(b.alu(Ops.ADD, f, self.pick("float")), i32))
    elif k == 7 and not self.wrote and not self.read:  # fill tmp through the bijection l -> (l + c) % L
      b.store(self.tmp, self.index(b.alu(Ops.ADD, self.lid, c32(b, ch.int(0, 5))), self.L), self.pick("int"))
      self.wrote = True
    elif k == 8 and self.filled and not self.wrote:
      self.add("int", b.load(self.tmp, self.index(self.pick("int"), self.L)))
      self.read = True
    elif k == 9:
      self.add("acc", b.acc(self.pick("vec") if self.pool("vec") and ch.int(0, 1) else self.pick("int")))
    elif k == 10 and self.pool("acc"): self.accumulate()
    elif k == 11: b.assign(self.uacc, b.alu(Ops.AND, b.alu(Ops.ADD, self.uacc, c32(b, 1)), c32(b, 3)))  # same on every thread
    elif k == 12: b.store(self.out, mad(b, self.tid, SLOTS, c32(b, ch.int(0, SLOTS - 1))), self.pick("int"))
    elif k == 13: self.barrier()
    elif k == 14 and len(self.loops) < 2: self.open_loop()
    elif k == 15 and self.loops: self.close_loop()

  def accumulate(self) -> None:
    b, acc = self.b, self.pick("acc")
    dt = b.dtype(acc)
    val = lambda x: x if dt.count == 1 else b.vectorize(x, self.pick("int"))
    where = self.ch.int(0, 2)
    if where == 0: b.assign(acc, b.alu(Ops.ADD, acc, val(self.pick("int"))))
    elif where == 1:
      with b.when(b.alu(Ops.CMPLT, self.lid, c32(b, self.ch.int(0, self.L)))):
        b.assign(acc, b.alu(Ops.XOR, acc, val(self.pick("int"))))
    else:
      with b.loop_uops(c32(b, 0), b.alu(Ops.AND, self.pick("int"), c32(b, 3))) as r: b.assign(acc, b.alu(Ops.ADD, acc, val(r)))

  def barrier(self) -> None:
    self.b.barrier()
    self.filled, self.wrote, self.read = self.filled or self.wrote, False, False

  def open_loop(self) -> None:
    b = self.b
    bound = b.alu(Ops.AND, self.uacc if self.ch.int(0, 2) == 0 else self.pick("uniform"), c32(b, 3))
    self.loops.append((b.range(c32(b, 0), bound), self.filled, self.wrote, self.read))
    self.scopes.append({k: [] for k in self.scopes[0]})
    self.add("uniform", self.loops[-1][0])
    self.add("int", self.loops[-1][0])
    self.barrier()  # a workgroup loop: it holds a barrier

  def close_loop(self) -> None:
    if self.wrote or self.read: self.barrier()
    r, *flags = self.loops.pop()
    self.scopes.pop()
    self.b.end_range(r)
    self.filled, self.wrote, self.read = flags  # the loop may run zero times

  def build(self, steps: int) -> Program:
    for _ in range(steps): self.step()
    while self.loops: self.close_loop()
    b = self.b
    for k, x in enumerate(self.pool("acc")[:SLOTS]):
      b.store(self.out, mad(b, self.tid, SLOTS, c32(b, k)), x if b.dtype(x).count == 1 else b.gep(x, 1))
    return b.build()

@given(st.data())
def test_random_race_free_barrier_programs_lower_to_what_the_grid_computes(data):
  ch = HypothesisChooser(data.draw)
  p = PhasedGen(ch).build(ch.int(1, 40))
  assert assert_lowering_matches_on_the_emulator(p, *inputs_for(p, np.random.default_rng(ch.int(0, 2**32 - 1))))

def test_random_race_free_barrier_programs_on_every_backend(backend):
  """Twelve PhasedGen programs in loop form on the backend against the emulator's grid form (exact compare)."""
  for seed in range(12):
    rng = random.Random(seed)
    p = PhasedGen(RandomChooser(rng)).build(30)
    bufs, vals = inputs_for(p, np.random.default_rng(seed))
    assert_same_buffers(Kernel(lower_grid_to_loops(p), backend)(*bufs, vals=vals), emulate(p, bufs, vals).buffers,
                        f"{backend} seed {seed}")
