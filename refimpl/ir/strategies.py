"""Random *valid* programs, built with ProgramBuilder: for property tests (hypothesis) and for fuzzers (random.Random).

`random_program(chooser)` makes every decision through a `Chooser`, so the same generator serves hypothesis
(`programs()`, which shrinks well because each decision is a separate draw) and plain seeded randomness
(`RandomChooser(random.Random(seed))`). Programs pass `verify`; values are not checked for undefined behaviour,
though every buffer index is kept inside its buffer (non-negative index expressions taken MOD the size).
They use: several buffers of every dtype, DEFINE_VAR, a grid (gidx0/gidx1/lidx0), DEFINE_LOCAL, CONST edge values
(NaN, ±inf, -0.0, big ints), every ALU op on the dtypes it allows, CAST, BITCAST, VECTORIZE, GEP, gated and vector
LOAD/STORE, loops with accumulators, IF blocks and (optionally) BARRIERs.
"""
from __future__ import annotations

import math
import random
from typing import Any, Protocol

from refimpl.dtype import DType, dtypes
from refimpl.ir.builder import ProgramBuilder
from refimpl.ir.dtype_text import NAME_TO_DTYPE
from refimpl.ir.ops import GroupOp, Ops
from refimpl.ir.program import INDEX_DTYPE, Program
from refimpl.ir.verify import FP8, alu_allows

SCALARS: tuple[DType, ...] = tuple(dt for n, dt in NAME_TO_DTYPE.items() if n != "void")
EDGE_FLOATS = (0.0, -0.0, 1.0, -1.0, 0.5, math.inf, -math.inf, math.nan, 1e-40, 3.4e38, 65504.0, 1e300, 5e-324)


class Chooser(Protocol):
  def int(self, lo: int, hi: int) -> int: ...      # inclusive bounds
  def pick(self, seq: Any) -> Any: ...
  def float(self) -> float: ...


class RandomChooser:
  """A Chooser over random.Random."""
  def __init__(self, rng: random.Random): self.rng = rng
  def int(self, lo: int, hi: int) -> int: return self.rng.randint(lo, hi)
  def pick(self, seq): return self.rng.choice(list(seq))
  def float(self) -> float:
    r = self.rng.random()
    return self.rng.choice(EDGE_FLOATS) if r < 0.3 else self.rng.uniform(-100, 100) if r < 0.8 else \
      math.ldexp(self.rng.uniform(-1, 1), self.rng.randint(-1074, 1023))


class HypothesisChooser:
  """A Chooser over a hypothesis `draw`."""
  def __init__(self, draw):
    from hypothesis import strategies as st
    self.draw, self.st = draw, st
  def int(self, lo: int, hi: int) -> int: return self.draw(self.st.integers(lo, hi))
  def pick(self, seq): return self.draw(self.st.sampled_from(list(seq)))
  def float(self) -> float:
    return self.draw(self.st.sampled_from(EDGE_FLOATS) | self.st.floats(allow_nan=True, allow_infinity=True))


class _Gen:
  def __init__(self, ch: Chooser, grid: bool, locals: bool, barrier: bool, scalars: tuple[DType, ...] = SCALARS):
    self.ch, self.b, self.barrier_ok, self.scalars = ch, ProgramBuilder("rand"), barrier, scalars
    self.scopes: list[dict[Any, list[int]]] = [{}]
    self.blocks: list[tuple[str, int, list[tuple[int, Ops]]]] = []  # (kind, uop, [(acc, op)])
    self.bufs: list[tuple[int, DType, int]] = []
    self.locals: list[tuple[int, DType, int]] = []
    self.grid, self.use_locals = grid, locals

  # pools of visible values, scoped like the program
  def add(self, key, x: int) -> int:
    self.scopes[-1].setdefault(key, []).append(x)
    return x
  def visible(self, key) -> list[int]: return [x for s in self.scopes for x in s.get(key, ())]
  def value(self, dt: DType) -> int:
    """A visible value of dtype dt, or a new CONST of it."""
    if (xs := self.visible(dt)) and self.ch.int(0, 3): return self.ch.pick(xs)
    return self.const(dt)
  def const(self, dt: DType) -> int:
    s = dt.scalar()
    if s == dtypes.bool: v = [bool(self.ch.int(0, 1)) for _ in range(dt.count)]
    elif dtypes.is_int(s):
      lo, hi = dtypes.min(s), dtypes.max(s)
      v = [self.ch.pick((0, 1, -1 if lo else 2, lo, hi, self.ch.int(lo, hi))) for _ in range(dt.count)]
    else: v = [self.ch.float() for _ in range(dt.count)]
    return self.add(dt, self.b.const(tuple(v) if dt.count > 1 else v[0], dt))
  def index(self, size: int, count: int = 1) -> int:
    """A non-negative int32 index expression kept inside [0, size - count]."""
    if not (xs := self.visible("index")) or not self.ch.int(0, 2): return self.b.const(self.ch.int(0, size - count), INDEX_DTYPE)
    x = self.b.alu(Ops.ADD, self.ch.pick(xs), self.b.const(self.ch.int(0, 3), INDEX_DTYPE))
    return self.b.alu(Ops.MOD, x, self.b.const(size - count + 1, INDEX_DTYPE))
  def dtypes_present(self) -> list[DType]: return sorted({k for s in self.scopes for k in s if isinstance(k, DType)}, key=str)

  # steps
  def step_const(self): self.const(self.ch.pick(self.scalars))
  def step_alu(self):
    op = self.ch.pick(sorted(GroupOp.ALU, key=lambda o: o.value))
    choices = [dt for dt in self.dtypes_present() + list(self.scalars) if alu_allows(op, dt)]
    if not choices: return
    dt = self.ch.pick(choices)
    if op is Ops.WHERE: src = (self.value(dtypes.bool.vec(dt.count)), self.value(dt), self.value(dt))
    else: src = tuple(self.value(dt) for _ in range(3 if op in GroupOp.Ternary else 2 if op in GroupOp.Binary else 1))
    x = self.b.alu(op, *src)
    self.add(self.b.dtype(x), x)
  def step_load(self):
    buf, dt, size = self.ch.pick(self.bufs + self.locals)
    count = self.ch.pick((1, 1, 2, 4)) if size >= 4 and dt not in FP8 else 1
    gate = self.value(dtypes.bool) if self.ch.int(0, 3) == 0 else None
    alt = None if gate is None else self.value(dt.vec(count))
    self.add(dt.vec(count), self.b.load(buf, self.index(size, count), gate=gate, alt=alt, count=count))
  def step_store(self):
    buf, dt, size = self.ch.pick(self.bufs + self.locals)
    count = self.ch.pick((1, 1, 2)) if size >= 2 else 1
    gate = self.value(dtypes.bool) if self.ch.int(0, 3) == 0 else None
    self.b.store(buf, self.index(size, count), self.value(dt.vec(count)), gate=gate)
  def step_cast(self):
    if not (present := self.dtypes_present()): return
    src_dt = self.ch.pick(present)
    x = self.ch.pick(self.visible(src_dt))
    if self.ch.int(0, 1):
      to = self.ch.pick(self.scalars).vec(src_dt.count)
      self.add(to, self.b.cast(x, to))
    elif (same := [d for d in self.scalars
                   if d.itemsize == src_dt.scalar().itemsize and dtypes.bool not in (d, src_dt.scalar())]):
      to = self.ch.pick(same).vec(src_dt.count)
      self.add(to, self.b.bitcast(x, to))
  def step_vec(self):
    dt = self.ch.pick(self.scalars)
    v = self.b.vectorize(*(self.value(dt) for _ in range(self.ch.pick((2, 3, 4)))))
    self.add(self.b.dtype(v), v)
    n = self.b.dtype(v).count
    g = self.b.gep(v, *(self.ch.int(0, n - 1) for _ in range(self.ch.pick((1, 1, 2)))))
    self.add(self.b.dtype(g), g)
  def step_loop(self):
    accs = []
    for _ in range(self.ch.int(0, 2)):
      dt = self.ch.pick([d for d in self.scalars if d not in FP8])
      op = self.ch.pick([o for o in (Ops.ADD, Ops.MAX, Ops.MUL) if alu_allows(o, dt)])
      accs.append((self.add(dt, self.b.acc(self.value(dt))), op))
    vars_ = self.visible("var")
    end = self.ch.pick(vars_) if vars_ and self.ch.int(0, 2) == 0 else self.b.const(self.ch.int(0, 4), INDEX_DTYPE)
    r = self.b.range(self.b.const(0, INDEX_DTYPE), end)
    self.blocks.append(("loop", r, accs))
    self.scopes.append({})
    self.add("index", r)
    self.add(INDEX_DTYPE, r)
  def step_if(self):
    i = self.b.if_(self.value(dtypes.bool))
    self.blocks.append(("if", i, []))
    self.scopes.append({})
  def step_close(self):
    if not self.blocks: return
    kind, u, accs = self.blocks.pop()
    done = []
    for acc, op in accs:
      dt = self.b.dtype(acc)
      done.append((dt, self.b.assign(acc, self.b.alu(op, acc, self.value(dt)))))
    self.scopes.pop()
    if kind == "loop": self.b.end_range(u)
    else: self.b.end_if(u)
    for dt, a in done: self.add(dt, a)
  def step_barrier(self):
    if self.barrier_ok and self.locals and not self.blocks: self.b.barrier()

  def run(self, steps: int) -> Program:
    ch, b = self.ch, self.b
    for _ in range(ch.int(1, 4)):
      dt = ch.pick(self.scalars)
      self.bufs.append((b.global_buf(dt, size := ch.int(1, 32)), dt, size))
    if ch.int(0, 2) == 0:
      v = b.var("n", 0, ch.int(0, 8))
      self.add("var", v)
      self.add("index", v)
    if self.grid and ch.int(0, 2):
      self.add("index", b.gidx(0, ch.int(1, 8)))
      if ch.int(0, 2) == 0: self.add("index", b.gidx(1, ch.int(1, 4)))
      if self.use_locals and ch.int(0, 2) == 0: self.add("index", b.lidx(0, ch.int(1, 4)))
    if self.use_locals and ch.int(0, 2) == 0:
      dt = ch.pick(self.scalars)
      self.locals.append((b.local_buf(dt, size := ch.int(1, 16)), dt, size))
    for x in self.visible("index"): self.add(INDEX_DTYPE, x)
    table = [self.step_const, self.step_alu, self.step_alu, self.step_alu, self.step_load, self.step_load, self.step_store,
             self.step_cast, self.step_vec, self.step_loop, self.step_if, self.step_close, self.step_close, self.step_barrier]
    for _ in range(steps): ch.pick(table)()
    while self.blocks: self.step_close()
    self.step_store()
    return b.build()


def random_program(ch: Chooser, steps: int = 12, grid: bool = True, locals: bool = True, barrier: bool = False,
                   scalars: tuple[DType, ...] = SCALARS) -> Program:
  """A random valid program of about `steps` generator steps (see the module docstring), its buffers, constants, casts
  and vectors of the dtypes in `scalars` (a device's supported dtypes; int32 indices and bool conditions are always
  made)."""
  return _Gen(ch, grid, locals, barrier, scalars).run(steps)


def programs(max_steps: int = 12, grid: bool = True, locals: bool = True, barrier: bool = False):
  """A hypothesis strategy of random valid programs."""
  from hypothesis import strategies as st
  @st.composite
  def _programs(draw):
    ch = HypothesisChooser(draw)
    return random_program(ch, steps=ch.int(0, max_steps), grid=grid, locals=locals, barrier=barrier)
  return _programs()
