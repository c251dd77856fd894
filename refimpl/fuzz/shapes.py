"""Generation mode "tinygrad": kernels shaped like the ones tinygrad 0.10.1 emits (corpus/tinygrad-0.10.1/), with random
bodies. `tinygrad_graph(draw, profile)` picks one template:

  elementwise   gidx0 (x lidx0) threads, each loading U = 2 or 4 consecutive elements as one vector (tinygrad's UPCAST:
                the index is tid << 2 or tid * U, sometimes plus a DEFINE_VAR offset), a random body on the vectors
                (ALU ops, float MUL feeding ADD/SUB, casts) and vector stores
  reduce        a RANGE (bound a constant or a DEFINE_VAR) with a DEFINE_ACC: acc += a[tid*K + r] * b[r] (or MAX, or an
                upcast reduce that sums U products per iteration: the MUL -> ADD chain tinygrad writes), then a
                post-op on the result
  local_reduce  (backends with workgroups) each thread reduces its chunk, stores it into a DEFINE_LOCAL, BARRIER, then
                the thread with lidx0 == 0 (tinygrad's `(bool)lidx0 != 1`) sums the local array and stores
  gated         a stencil: taps a[tid + k] behind gates 0 <= tid + k < N (tinygrad's `(x < 0) != 1` form), with the
                alternative 0, combined by weights (constants) through MUL and ADD

Everything the random generator guarantees holds here too (the templates are built with its machinery, `Grower`): indices
in bounds (or behind a false gate), outputs only in each thread's own slots, locals read after the barrier, and the UB
rewrites of generate.make_program afterwards. A program is a function of (seed, index, profile).
"""
from __future__ import annotations

from refimpl.dtype import DType, dtypes
from refimpl.fuzz.graph import Graph, Node
from refimpl.fuzz.grow import ARITH_FLOATS, Draw, Grower, Profile, _Block
from refimpl.ir import INDEX_DTYPE, GroupOp, Ops
from refimpl.ir.verify import FP8


class _Shaped(Grower):
  """A Grower that builds one of the templates (the module docstring) instead of random steps."""
  def run(self) -> Graph:
    templates = [self.elementwise, self.reduce, self.reduce, self.gated] + ([self.local_reduce] if self.profile.barrier else [])
    self.rng.choice(templates)()
    return self.finish()

  # ***** helpers *****
  def launch(self, g: int, lsize: int = 1) -> None:
    """gidx0 workgroups of lidx0 threads; tid = gidx0 * lsize + lidx0."""
    self.gsize[0], self.lsize[0] = g, lsize
    g0 = self.emit(Ops.SPECIAL, INDEX_DTYPE, (), ("gidx0", g)) if g > 1 else self.icon(0)
    self.lidx = self.emit(Ops.SPECIAL, INDEX_DTYPE, (), ("lidx0", lsize)) if lsize > 1 else None
    self.threads = g * lsize
    self.tid = g0 if self.lidx is None else self.emit(Ops.ADD, INDEX_DTYPE, [self.scaled(g0, lsize), self.lidx])
    self.scopes[0]["index"] = [x for x in (g0, self.lidx, self.tid) if x is not None and x.op is not Ops.CONST]

  def scaled(self, x: Node, k: int) -> Node:
    """x * k, as tinygrad writes it: a shift for powers of two (often), else a MUL."""
    if k == 1: return x
    if k & (k - 1) == 0 and self.draw.chance(0.6): return self.emit(Ops.SHL, INDEX_DTYPE, [x, self.icon(k.bit_length() - 1)])
    return self.emit(Ops.MUL, INDEX_DTYPE, [x, self.icon(k)])

  def add(self, x: Node, y: Node) -> Node: return self.emit(Ops.ADD, INDEX_DTYPE, [x, y])

  def dtype(self, floats_only: bool = False) -> DType:
    floats = [d for d in ARITH_FLOATS if d in self.dts]
    others = [d for d in self.dts if d not in FP8 and d != dtypes.bool]
    pool = floats if floats and (floats_only or self.draw.chance(0.75)) else others
    return self.rng.choice(pool or list(self.dts))

  def buffer(self, s: DType, size: int) -> Node:
    buf = self.emit(Ops.DEFINE_GLOBAL, s.ptr(size))
    self.inputs.setdefault(s, []).append((buf, size))
    return buf

  def read(self, buf: Node, idx: Node, dt: DType, gate: Node | None = None, alt: Node | None = None) -> Node:
    ix = self.emit(Ops.INDEX, buf.dtype, [buf, idx])
    if gate is None: return self.emit(Ops.LOAD, dt, [ix])
    return self.emit(Ops.LOAD, dt, [ix, alt, gate])

  def alu_on(self, dt: DType) -> None:
    """One ALU op on operands of dt (vector or scalar)."""
    s, n = dt.scalar(), dt.count
    ops = [op for op, d in self.alu if d == s]
    op = self.rng.choice(ops)
    bdt = dtypes.bool.vec(n) if n > 1 else dtypes.bool
    if op is Ops.WHERE: src = [self.value(bdt), *self.operands(dt, 2)]
    else: src = self.operands(dt, 1 if op in GroupOp.Unary else 2 if op in GroupOp.Binary else 3)
    self.pool(self.emit(op, bdt if op in GroupOp.Comparison else dt, src))

  def body(self, dt: DType, lo: int, hi: int) -> None:
    self.steps([(lambda: self.alu_on(dt), 6), (self.step_mul_add, 3), (self.step_convert, 1), (self.step_chain, 1)], lo, hi)

  def loop(self, end: Node) -> Node:
    """Opens a RANGE(0, end) block (its scope holds the counter); close with close_block."""
    r = self.emit(Ops.RANGE, INDEX_DTYPE, [self.icon(0), end], len(self.nodes))
    self.blocks.append(_Block("loop", r))
    self.scopes.append({"index": [r]})
    self.leaves.append([])
    return r

  def accumulate(self, s: DType, op: Ops) -> Node:
    init = {Ops.MAX: dtypes.min(s), Ops.MUL: 1}.get(op, 0)
    return self.emit(Ops.DEFINE_ACC, s, [self.emit(Ops.CONST, s, (), float(init) if dtypes.is_float(s) else int(init))],
                     len(self.nodes))

  def assign(self, acc: Node, new: Node) -> Node:
    return self.emit(Ops.ASSIGN, acc.dtype, [acc, new])

  # ***** templates *****
  def elementwise(self) -> None:
    s, u = self.dtype(), self.rng.choice((2, 4, 4))
    self.launch(self.rng.choice((2, 4, 8, 16)), self.rng.choice((1, 1, 2, 4)))
    var = None
    if self.draw.chance(0.3):
      var = self.emit(Ops.DEFINE_VAR, INDEX_DTYPE, (), ("n", 0, self.rng.randint(1, 8)))
      self.scopes[0]["var"] = [var]
    for _ in range(self.rng.randint(1, 3)):
      base = self.scaled(self.tid, u)
      size = self.threads * u + (0 if var is None else var.arg[2])
      idx = base if var is None else self.add(base, var)
      gate = self.gate()
      alt = None if gate is None else self.value(s.vec(u))
      self.pool(self.read(self.buffer(s, size), idx, s.vec(u), gate, alt))
    self.body(s.vec(u), 2, 6)

  def reduce(self) -> None:
    s = self.dtype()
    self.launch(self.rng.choice((1, 2, 4, 8)), 1)
    k, u = self.rng.choice((2, 3, 4, 8, 16)), self.rng.choice((1, 1, 4))
    end: Node = self.icon(k)
    if self.draw.chance(0.35):
      end = self.emit(Ops.DEFINE_VAR, INDEX_DTYPE, (), ("n", 1, k))
      self.scopes[0]["var"] = [end]
    op = self.rng.choice((Ops.ADD, Ops.ADD, Ops.ADD, Ops.MAX)) if u == 1 else Ops.ADD
    a, b = self.buffer(s, self.threads * k * u), self.buffer(s, k * u)
    acc = self.accumulate(s, op)
    r = self.loop(end)
    vdt = s.vec(u) if u > 1 else s
    x = self.read(a, self.scaled(self.add(self.scaled(self.tid, k), r), u), vdt)
    y = self.read(b, self.scaled(r, u), vdt)
    if u == 1:
      v = self.emit(Ops.MUL, s, [x, y]) if self.draw.chance(0.7) else x
      new = self.emit(op, s, [acc, v] if self.draw.chance(0.5) else [v, acc])
    else:  # the upcast reduce: acc + x0*y0 + x1*y1 + ... in one chain
      new = acc
      for lane in range(u):
        p = self.emit(Ops.MUL, s, [self.emit(Ops.GEP, s, [x], (lane,)), self.emit(Ops.GEP, s, [y], (lane,))])
        new = self.emit(Ops.ADD, s, [new, p] if self.draw.chance(0.7) else [p, new])
    out = self.assign(acc, new)
    self.close_block()
    self.pool(out)
    self.body(s, 0, 3)

  def local_reduce(self) -> None:
    s = self.dtype()
    lsize, c = self.rng.choice((2, 4, 8)), self.rng.choice((1, 2, 4))
    self.launch(self.rng.choice((1, 2, 4)), lsize)
    a = self.buffer(s, self.threads * c)
    acc = self.accumulate(s, Ops.ADD)
    r = self.loop(self.icon(c))
    part = self.assign(acc, self.emit(Ops.ADD, s, [acc, self.read(a, self.add(self.scaled(self.tid, c), r), s)]))
    self.close_block()
    lbuf = self.emit(Ops.DEFINE_LOCAL, s.ptr(lsize, local=True), (), "temp0")
    self.emit(Ops.STORE, dtypes.void, [self.emit(Ops.INDEX, lbuf.dtype, [lbuf, self.lidx]), part])
    self.emit(Ops.BARRIER)
    first = self.emit(Ops.CMPNE, dtypes.bool, [self.emit(Ops.CAST, dtypes.bool, [self.lidx]),
                                               self.emit(Ops.CONST, dtypes.bool, (), True)])
    node = self.emit(Ops.IF, dtypes.void, [first])
    self.blocks.append(_Block("if", node))
    self.scopes.append({})
    self.leaves.append([])
    total = self.accumulate(s, Ops.ADD)
    j = self.loop(self.icon(lsize))
    out = self.assign(total, self.emit(Ops.ADD, s, [total, self.read(lbuf, j, s)]))
    self.close_block()
    self.pool(out)
    self.body(s, 0, 2)
    self.close_block()

  def gated(self) -> None:
    s = self.dtype(floats_only=self.draw.chance(0.7))
    self.launch(self.rng.choice((4, 8, 16)), self.rng.choice((1, 1, 2)))
    n = self.threads
    a = self.buffer(s, n)
    zero = self.emit(Ops.CONST, s, (), 0.0 if dtypes.is_float(s) else 0)
    true = self.emit(Ops.CONST, dtypes.bool, (), True)
    total = None
    for k in sorted(self.rng.sample((-2, -1, 0, 1, 2), self.rng.randint(2, 3))):
      x = self.add(self.tid, self.icon(k)) if k else self.tid
      nonneg = self.emit(Ops.CMPNE, dtypes.bool, [self.emit(Ops.CMPLT, dtypes.bool, [x, self.icon(0)]), true])
      valid = self.emit(Ops.AND, dtypes.bool, [nonneg, self.emit(Ops.CMPLT, dtypes.bool, [x, self.icon(n)])])
      tap = self.read(a, x, s, valid, zero)
      if self.draw.chance(0.6): tap = self.emit(Ops.MUL, s, [tap, self.const(s)])
      total = tap if total is None else self.emit(Ops.ADD, s, [total, tap])
    self.pool(total)
    self.body(s, 0, 3)


def tinygrad_graph(draw: Draw, profile: Profile) -> tuple[Graph, dict[int, tuple]]:
  """Program (draw.seed, draw.index) in mode "tinygrad" (see the module docstring): its graph and buffer fills."""
  shaped = _Shaped(draw.start("tinygrad"), profile)
  return shaped.run(), shaped.fill
