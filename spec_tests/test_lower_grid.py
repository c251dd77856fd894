"""Grid -> loops lowering: the result is valid and has the documented structure (hypothesis over random programs),
it computes what the grid computes (a small integer interpreter runs both), barriers are refused, and the
capability check / lower_for follow the backend's Renderer."""
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from refimpl.dtype import dtypes
from refimpl.ir import GroupOp, Ops, ProgramBuilder, ProgramError, elementwise, verify
from refimpl.ir.strategies import programs
from refimpl.lower import LoweringError, check_capabilities, lower_for, lower_grid_to_loops
from refimpl.lower.grid_to_loops import LOOP_ORDER
from refimpl.renderer import Renderer

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


def test_barrier_is_refused():
  b = ProgramBuilder("with_barrier")
  out, tmp = b.global_buf(f32, 4), b.local_buf(f32, 4)
  lid = b.lidx(0, 4)
  b.store(tmp, lid, b.const(1.0, f32))
  b.barrier()
  b.store(out, lid, b.load(tmp, b.alu(Ops.MOD, b.alu(Ops.ADD, lid, b.const(1, i32)), b.const(4, i32))))
  with pytest.raises(LoweringError, match=r"with_barrier: uop 6 is a BARRIER; .* not implemented"): lower_grid_to_loops(b.build())


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
