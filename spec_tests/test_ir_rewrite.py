"""refimpl.ir.rewrite: the uop-by-uop walk every lowering pass is written with, one test per rule of the walk."""
import numpy as np

from refimpl.dtype import dtypes
from refimpl.emulator.machine import emulate
from refimpl.ir import Ops, ProgramBuilder, UOp, elementwise, rewrite, verify
from refimpl.lower.emit import Values

f32, i32 = dtypes.float32, dtypes.int32


def sub_from_zero(b, i, u, src): return b.alu(Ops.SUB, b.const(0.0, u.dtype), src[0])

def drop(b, i, u, src): return None


def test_a_uop_without_a_handler_is_copied_with_its_srcs_remapped():
  """Rule: with no handler a uop comes back as it was, its srcs pointing at their new indices (here shifted by the
  CONST the NEG handler adds before the SUB)."""
  p = elementwise(Ops.NEG, f32, n=4)
  assert rewrite(p, {}) == p
  q = verify(rewrite(p, {Ops.NEG: sub_from_zero}))
  neg = next(i for i, u in enumerate(p.uops) if u.op is Ops.NEG)
  assert [u.op for u in q.uops[:neg]] == [u.op for u in p.uops[:neg]]
  assert [u.op for u in q.uops[neg:neg + 2]] == [Ops.CONST, Ops.SUB]
  store, index = q.uops[-1], q.uops[-2]
  assert store.op is Ops.STORE and store.src == (len(q.uops) - 2, neg + 1) and index.op is Ops.INDEX
  assert index.src == p.uops[-2].src  # declared before the NEG: the same indices
  x = np.array([1.5, -2.0, 0.0, 3.0], np.float32)
  want = emulate(p, [np.zeros(4, np.float32), x]).buffers[0]
  got = emulate(q, [np.zeros(4, np.float32), x]).buffers[0]
  assert (got == want).all()

def test_a_handler_replaces_one_uop_by_several():
  """Rule: a handler emits any number of uops through the builder and returns the one that stands for the old uop;
  later readers read that one."""
  def times_two_plus_one(b, i, u, src):
    x = Values(b, 1).of(src[0], i32)
    return (x * 2 + 1).i
  p = elementwise(Ops.NEG, i32, n=4)
  q = verify(rewrite(p, {Ops.NEG: times_two_plus_one}))
  assert len(q.uops) == len(p.uops) + 3  # CONST 2, MUL, CONST 1, ADD for the NEG
  assert q.uops[q.uops[-1].src[1]].op is Ops.ADD
  got = emulate(q, [np.zeros(4, np.int32), np.arange(4, dtype=np.int32)]).buffers[0]
  assert got.tolist() == [1, 3, 5, 7]

def test_a_handler_deletes_a_void_uop():
  """Rule: a handler that emits nothing and returns None removes a void uop (nothing reads it)."""
  b = ProgramBuilder("with_barrier")
  out, tmp = b.global_buf(f32, 4), b.local_buf(f32, 4)
  i = b.lidx(0, 4)
  b.store(tmp, i, b.const(1.0, f32))
  b.barrier()
  b.store(out, i, b.load(tmp, i))
  p = b.build()
  q = verify(rewrite(p, {Ops.BARRIER: drop}))
  barrier = next(k for k, u in enumerate(p.uops) if u.op is Ops.BARRIER)
  assert q.uops == p.uops[:barrier] + tuple(UOp(u.op, u.dtype, tuple(j - (j > barrier) for j in u.src), u.arg)
                                          for u in p.uops[barrier + 1:])

def test_the_name_and_launch_sizes_are_kept():
  """Rule: the rewritten program has the old one's name, global_size and local_size, whatever the handlers emit."""
  p = elementwise(Ops.NEG, f32, n=32, local_size=8, name="neg_grid")
  q = rewrite(p, {Ops.NEG: sub_from_zero})
  assert (q.name, q.global_size, q.local_size) == ("neg_grid", (4, 1, 1), (8, 1, 1))
  verify(q)

def test_new_ids_follow_the_old_ones():
  """Rule: the builder a handler gets is opened over the old program, so a loop or accumulator it adds takes a fresh id
  even where the old program's own loops come later in the list."""
  b = ProgramBuilder("two_loops")
  out = b.global_buf(f32, 1)
  with b.loop(2):
    pass
  with b.loop(2):
    b.store(out, b.const(0, i32), b.const(1.0, f32))
  p = b.build()
  def loop_before(b, i, u, src):
    with b.loop(3): pass
    return b.uop(u.op, u.dtype, src, u.arg)
  q = verify(rewrite(p, {Ops.STORE: loop_before}))
  assert sorted(u.arg for u in q.uops if u.op is Ops.RANGE) == [0, 1, 2]
  store = next(k for k, u in enumerate(q.uops) if u.op is Ops.STORE)
  assert q.uops[store - 1].op is Ops.ENDRANGE and q.uops[q.uops[store - 1].src[0]].arg == 2
