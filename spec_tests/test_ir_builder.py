"""The builder, the listing, UOp/Program value semantics, and the random program generator."""
import math
import random

import numpy as np
import pytest
from hypothesis import given

from refimpl.dtype import dtypes
from refimpl.ir import GroupOp, Ops, Program, ProgramBuilder, ProgramError, UOp, elementwise, verify
from refimpl.ir.strategies import RandomChooser, programs, random_program

f32, i32, bl = dtypes.float32, dtypes.int32, dtypes.bool

ADD_LISTING = """\
program E_add_4  global_size=(4, 1, 1)  local_size=(1, 1, 1)
   0 DEFINE_GLOBAL  float32.ptr(4)               []               0
   1 DEFINE_GLOBAL  float32.ptr(4)               []               1
   2 DEFINE_GLOBAL  float32.ptr(4)               []               2
   3 SPECIAL        int32                        []               ('gidx0', 4)
   4 INDEX          float32.ptr(4)               [1, 3]
   5 LOAD           float32                      [4]
   6 INDEX          float32.ptr(4)               [2, 3]
   7 LOAD           float32                      [6]
   8 ADD            float32                      [5, 7]
   9 INDEX          float32.ptr(4)               [0, 3]
  10 STORE          void                         [9, 8]"""

def test_elementwise_listing():
  p = elementwise(Ops.ADD, f32, n=4)
  assert str(p) == p.listing() == ADD_LISTING


def test_elementwise_signatures():
  p = elementwise(Ops.CMPLT, dtypes.int8, n=8)
  assert p.buffers == {0: bl.ptr(8), 1: dtypes.int8.ptr(8), 2: dtypes.int8.ptr(8)}
  p = elementwise(Ops.WHERE, dtypes.float16, n=8)
  assert [p.buffers[i].base for i in range(4)] == [dtypes.float16, bl, dtypes.float16, dtypes.float16]
  p = elementwise(Ops.CAST, f32, n=8, out_dtype=dtypes.uint8)
  assert (p.buffers[0].base, p.buffers[1].base) == (dtypes.uint8, f32)
  p = elementwise(Ops.SQRT, f32, n=32, local_size=8)
  assert (p.global_size, p.local_size, p.specials) == ((4, 1, 1), (8, 1, 1), {"gidx0": 4, "lidx0": 8})
  assert sum(u.op is Ops.STORE for u in p.uops) == 1 and sum(u.op is Ops.LOAD for u in p.uops) == 1
  with pytest.raises(ValueError, match="needs out_dtype"): elementwise(Ops.BITCAST, f32)
  with pytest.raises(ValueError, match="not a multiple"): elementwise(Ops.ADD, f32, n=10, local_size=4)


def test_reduction_with_loop_and_accumulator():
  b = ProgramBuilder("sum_rows")
  out, x = b.global_buf(f32, 4), b.global_buf(f32, 16)
  row = b.gidx(0, 4)
  acc = b.acc(b.const(0.0, f32))
  with b.loop(4) as k:
    v = b.load(x, b.alu(Ops.ADD, b.alu(Ops.MUL, row, b.const(4, i32)), k))
    total = b.assign(acc, b.alu(Ops.ADD, acc, v))
  b.store(out, row, total)
  p = b.build()
  ops = [u.op for u in p.uops]
  assert ops.index(Ops.DEFINE_ACC) < ops.index(Ops.RANGE) < ops.index(Ops.ASSIGN) < ops.index(Ops.ENDRANGE) < ops.index(Ops.STORE)
  assert p.uops[ops.index(Ops.RANGE)].arg == 0 and p.uops[ops.index(Ops.DEFINE_ACC)].arg == 0
  assert "\n  " in str(p)  # the loop body is indented


def test_if_var_vector_and_gated_memory():
  b = ProgramBuilder()
  out, x = b.global_buf(f32, 8), b.global_buf(f32, 8)
  n = b.var("n", 0, 8)
  with b.loop_uops(b.const(0, i32), n) as i:
    inb = b.alu(Ops.CMPLT, i, b.const(4, i32))
    with b.when(inb):
      v4 = b.load(x, b.const(4, i32), count=4)
      lo = b.gep(v4, 0, 1)
      b.store(out, b.const(0, i32), lo)
    b.store(out, i, b.load(x, i, gate=inb), gate=inb)
  p = b.build()
  assert p.vars == (("n", 0, 8),)
  assert b.dtype(v4) == f32.vec(4) and b.dtype(lo) == f32.vec(2)
  gated = next(u for u in p.uops if u.op is Ops.LOAD and len(u.src) == 3)
  assert p.uops[gated.src[1]] == UOp(Ops.CONST, f32, (), 0.0)  # the default alternative value is zero


def test_const_coerces_and_rounds():
  b = ProgramBuilder()
  assert b.uops[b.const(0.1, f32)].arg == float(np.float32(0.1))
  assert b.uops[b.const(300, dtypes.int8)].arg == 44
  assert b.uops[b.const(-1, dtypes.uint32)].arg == 2**32 - 1
  assert b.uops[b.const(1, bl)].arg is True
  assert b.uops[b.const(1, f32)].arg == 1.0 and isinstance(b.uops[-1].arg, float)
  assert b.uops[b.const(1e300, dtypes.float16)].arg == math.inf
  v = b.const((1, 2), i32.vec(2))
  assert b.uops[v].op is Ops.VECTORIZE and [b.uops[s].arg for s in b.uops[v].src] == [1, 2]


def test_builder_errors():
  b = ProgramBuilder()
  r = b.range(b.const(0, i32), b.const(2, i32))
  i = b.if_(b.const(True, bl))
  with pytest.raises(ValueError, match="not the innermost open block"): b.end_range(r)
  b.end_if(i)
  with pytest.raises(ProgramError, match=r"\[unclosed-block\] RANGE 2 is never closed"): b.build()
  assert b.build(check=False).uops[-1].op is Ops.ENDIF
  with pytest.raises(ValueError, match="not an ALU op"): b.alu(Ops.LOAD, r)


def test_a_builder_opened_over_a_program_continues_its_ids():
  """Rule: ProgramBuilder.over(program) has the program's name and launch dims and numbers new buffers, loops,
  accumulators and temp<n> locals past the program's own (with the program's uops, it goes on writing the program)."""
  b = ProgramBuilder("k")
  out = b.global_buf(f32, 1)
  b.local_buf(f32, 4)
  b.local_buf(f32, 4, "temp5")
  b.lidx(0, 4)
  acc = b.acc(b.const(0.0, f32))
  with b.loop(2): b.assign(acc, b.alu(Ops.ADD, acc, b.const(1.0, f32)))
  b.store(out, b.const(0, i32), acc)
  p = b.build()
  more = ProgramBuilder.over(p, p.uops)
  assert (more.name, more.global_size, more.local_size, len(more)) == ("k", [1, 1, 1], [4, 1, 1], len(p.uops))
  assert more.uops[more.global_buf(f32, 1)].arg == 1 and more.uops[more.local_buf(f32, 1)].arg == "temp6"
  assert more.uops[more.acc(more.const(0.0, f32))].arg == 1
  with more.loop(2) as r: assert more.uops[r].arg == 1
  fresh = ProgramBuilder.over(p)
  assert len(fresh) == 0 and fresh.uops[fresh.global_buf(f32, 1)].arg == 1


def test_uop_equality_tells_floats_apart():
  c = lambda v, dt=f32: UOp(Ops.CONST, dt, (), v)
  assert c(0.0) != c(-0.0) and c(math.nan) == c(float("nan")) and hash(c(math.nan)) == hash(c(float("nan")))
  assert len({UOp(Ops.CONST, i32, (), 1), UOp(Ops.CONST, i32, (), 1.0), UOp(Ops.CONST, i32, (), True)}) == 3
  assert c(1.5) == c(1.5) and hash(c(1.5)) == hash(c(1.5))
  with pytest.raises(AttributeError): c(1.0).arg = 2.0  # frozen
  p = Program("k", [c(1.0)], [1, 1, 1])
  assert p == Program("k", (c(1.0),), (1, 1, 1)) and hash(p) == hash(Program("k", (c(1.0),)))
  assert len(p) == 1 and p[0] == c(1.0)


def test_random_programs_are_valid_with_every_feature():
  seen = set()
  for seed in range(150):
    p = verify(random_program(RandomChooser(random.Random(seed)), steps=20, barrier=True))
    seen |= {u.op for u in p.uops}
  assert seen == set(Ops) - {Ops.WMMA}, set(Ops) - seen  # WMMA has no random generator (yet)


@given(programs(barrier=True))
def test_random_programs_verify(p):
  verify(p)
  assert all(u.op not in GroupOp.Void or u.dtype == dtypes.void for u in p.uops)
