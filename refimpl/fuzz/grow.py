"""The "random" generation mode's machinery: the Profile, the op x dtype pairs it draws from, `Draw` (a program's
random state and the value draws every mode shares), `Grower` (which grows a program step by step, defined by
construction) and the buffers' initial contents. refimpl/fuzz/generate.py describes the programs and puts the modes
together: it makes each program's Draw and hands it to the mode. The other modes build on this module too (shapes.py
on Grower, mutate.py on Draw), so it lives below all three (generate.py imports the modes, and they import this module,
not generate.py nor each other).
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import numpy as np

from refimpl.dtype import DType, dtypes, to_np, truncate
from refimpl.fuzz.bias import CHAINS, double_rounding_values, halfway_values, tiny_factors
from refimpl.fuzz.graph import Graph, Node
from refimpl.ir import INDEX_DTYPE, GroupOp, Ops, alu_allows
from refimpl.ir.verify import FP8
from refimpl.testing.values import edge_values, from_bits, random_values

ALL_DTYPES: tuple[DType, ...] = (dtypes.bool, *dtypes.sints, *dtypes.uints, *dtypes.floats)
ARITH_FLOATS = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)


@dataclass(frozen=True)
class Profile:
  """What the selected backends can run: the scalar dtypes every one supports, whether programs may use BARRIER (a
  campaign allows it everywhere: backends without workgroups run such programs lowered to loops), and the generation
  mode (MODES, or "mix")."""
  dtypes: tuple[DType, ...] = ALL_DTYPES
  barrier: bool = False
  max_steps: int = 24
  mode: str = "random"


def alu_pairs(dts: tuple[DType, ...]) -> list[tuple[Ops, DType]]:
  """Every (ALU op, operand dtype) the verifier accepts."""
  return [(op, dt) for op in sorted(GroupOp.ALU, key=lambda o: o.value) for dt in dts if alu_allows(op, dt)]

def conversion_pairs(dts: tuple[DType, ...]) -> list[tuple[Ops, DType, DType]]:
  """Every (CAST, source, target) with source != target and (BITCAST, source, target) of one size, neither bool."""
  casts = [(Ops.CAST, s, d) for s in dts for d in dts if s != d]
  bitcasts = [(Ops.BITCAST, s, d) for s in dts for d in dts
              if s != d and s.itemsize == d.itemsize and dtypes.bool not in (s, d)]
  return casts + bitcasts

def pair_key(op: Ops, dt: DType, dst: DType | None = None) -> str:
  """The coverage key of an op on a dtype ("ADD float32") or of a conversion ("CAST float32->int8")."""
  return f"{op.name} {dt.name if dst is None else f'{dt.name}->{dst.name}'}".replace("unsigned ", "u")

def all_keys(profile: Profile) -> tuple[list[str], list[str]]:
  """(ALU op x dtype keys, conversion keys) that a campaign with this profile can reach."""
  return ([pair_key(op, dt) for op, dt in alu_pairs(profile.dtypes)],
          [pair_key(op, s, d) for op, s, d in conversion_pairs(profile.dtypes)])

def coverage_keys(program) -> set[str]:
  """The op x dtype keys a program exercises (ALU ops by operand dtype, conversions by source and target)."""
  out = set()
  for u in program.uops:
    if u.op in GroupOp.ALU: out.add(pair_key(u.op, program.uops[u.src[-1]].dtype.scalar()))
    elif u.op in (Ops.CAST, Ops.BITCAST):
      s, d = program.uops[u.src[0]].dtype.scalar(), u.dtype.scalar()
      if s != d: out.add(pair_key(u.op, s, d))
  return out


SPECIALS = (math.nan, -math.nan, math.inf, -math.inf, 0.0, -0.0)
STREAMS = {"mode": "refimpl.fuzz/mode/{seed}/{index}", "random": "refimpl.fuzz/{seed}/{index}",
           "tinygrad": "refimpl.fuzz/tinygrad/{seed}/{index}", "corpus": "refimpl.fuzz/corpus/{seed}/{index}",
           "fix": "refimpl.fuzz/fix/{seed}/{index}"}


class Draw:
  """Every random choice of program `index` of campaign `seed`, and the value draws the modes share. generate.py makes
  one per program and hands it to the mode that makes it; a mode starts its own stream (STREAMS), which begins at a
  seed made of (stream, seed, index) alone, so the program is a function of (seed, index, profile)."""
  def __init__(self, seed: int, index: int):
    self.seed, self.index, self.rng = seed, index, random.Random()

  def start(self, stream: str) -> Draw:
    """The draws from here on: stream `stream` from its beginning."""
    self.rng.seed(STREAMS[stream].format(seed=self.seed, index=self.index))
    return self

  def inputs(self) -> np.random.Generator:
    """The generator of the input buffers' contents and the DEFINE_VAR values (_input)."""
    return np.random.default_rng([self.seed & 0xFFFFFFFF, self.index, 7])

  def chance(self, p: float) -> bool: return self.rng.random() < p

  def scalar_value(self, s: DType):
    """A Python value of scalar dtype s: an edge value, a small one, or random bits."""
    if s == dtypes.bool: return self.chance(0.5)
    if self.chance(0.08) and len(halfway_values(s)): return self.pick(halfway_values(s))
    r = self.rng.random()
    if dtypes.is_float(s) and r < 0.2: return float(np.array(self.rng.choice(SPECIALS), np.float32).astype(to_np(s)))
    if r < 0.6:
      v = edge_values(s)[self.rng.randrange(len(edge_values(s)))]
      return int(v) if dtypes.is_int(s) else float(v)
    if dtypes.is_int(s):
      lo, hi = max(int(dtypes.min(s)), -8), min(int(dtypes.max(s)), 8)
      return self.rng.randint(lo, hi)
    if r < 0.9: return float(truncate[s](self.rng.uniform(-8, 8)))
    return float(from_bits([self.rng.getrandbits(8 * s.itemsize)], s)[0])

  def pick(self, values: np.ndarray):
    """One element of a numpy array as a Python scalar (drawn with the generator's rng)."""
    v = values[self.rng.randrange(len(values))]
    return bool(v) if values.dtype == np.bool_ else int(v) if values.dtype.kind in "iu" else float(v)


@dataclass
class _OutputBuffer:
  """An output buffer: each thread owns slots [tid*K, tid*K + K); K is set when generation ends."""
  node: Node
  kconst: Node
  slots: int = 0

@dataclass
class _Block:
  kind: str
  node: Node
  accs: list[tuple[Node, Ops, DType]] = field(default_factory=list)


class Grower:
  """Grows a program step by step, defined by construction (generate.py's docstring), with the draws of `draw`."""
  def __init__(self, draw: Draw, profile: Profile):
    self.draw, self.rng = draw, draw.rng
    self.profile, self.nodes, self.step = profile, [], 0
    self.dts = tuple(profile.dtypes)
    self.alu = alu_pairs(self.dts)
    self.conv = conversion_pairs(self.dts)
    self.scopes: list[dict] = [{}]
    self.leaves: list[list[Node]] = [[]]
    self.blocks: list[_Block] = []
    self.inputs: dict[DType, list[tuple[Node, int]]] = {}
    self.outs: dict[DType, _OutputBuffer] = {}
    self.local: tuple[Node, DType, int] | None = None
    self.fill: dict[int, tuple] = {}  # id(input buffer) -> what fills it (see _input), when not the default mix
    self.synced = False
    self.gsize, self.lsize = [1, 1, 1], [1, 1, 1]

  # ***** nodes and pools *****
  def emit(self, op: Ops, dt: DType = dtypes.void, src=(), arg=None) -> Node:
    n = Node(op, dt, src, arg, tag=self.step)
    for s in n.src:
      for lv in self.leaves:
        if s in lv: lv.remove(s)
    self.nodes.append(n)
    return n
  def top(self, n: Node) -> Node:
    self.nodes.insert(0, n)
    return n
  def pool(self, n: Node, leaf: bool = True) -> Node:
    self.scopes[-1].setdefault(n.dtype, []).append(n)
    if leaf: self.leaves[-1].append(n)
    return n
  def visible(self, key) -> list[Node]: return [x for s in self.scopes for x in s.get(key, ())]
  def icon(self, v: int) -> Node: return self.emit(Ops.CONST, INDEX_DTYPE, (), int(v))

  # ***** values *****
  def value(self, dt: DType, avoid: list[Node] | tuple = ()) -> Node:
    """A visible value of dt (often), else a fresh one; mostly not one of `avoid` (the op's other operands: x op x is
    a special case, not the rule)."""
    xs = [x for x in self.visible(dt) if x not in avoid or self.draw.chance(0.1)]
    if xs and self.draw.chance(0.7): return self.rng.choice(xs)
    return self.fresh(dt)

  def operands(self, dt: DType, n: int) -> list[Node]:
    out: list[Node] = []
    for _ in range(n): out.append(self.value(dt, out))
    return out

  def fresh(self, dt: DType) -> Node:
    s, n, r = dt.scalar(), dt.count, self.rng.random()
    if r < 0.5: return self.load_input(s, n)
    if r < 0.7:
      others = [x for d in self.dts if d != s for x in self.visible(d.vec(n) if n > 1 else d)]
      if others:
        x = self.rng.choice(others)
        src = x.dtype.scalar()
        op = Ops.BITCAST if src.itemsize == s.itemsize and dtypes.bool not in (s, src) and self.draw.chance(0.3) else Ops.CAST
        return self.pool(self.emit(op, dt, [x]))
    if s == dtypes.bool and self.draw.chance(0.7): return self.compare(n)
    if n > 1: return self.pool(self.emit(Ops.VECTORIZE, dt, [self.value(s) for _ in range(n)]))
    return self.const(s)

  def const(self, dt: DType) -> Node:
    s = dt.scalar()
    v = self.draw.scalar_value(s)
    c = self.emit(Ops.CONST, s, (), v)
    if dt.count == 1: return self.pool(c, leaf=False)
    lanes = [c if self.draw.chance(0.5) else self.emit(Ops.CONST, s, (), self.draw.scalar_value(s)) for _ in range(dt.count)]
    return self.pool(self.emit(Ops.VECTORIZE, dt, lanes), leaf=False)

  def compare(self, count: int = 1) -> Node:
    s = self.rng.choice([d for d in self.dts if d not in FP8])
    dt = s.vec(count) if count > 1 else s
    op = self.rng.choice((Ops.CMPLT, Ops.CMPNE))
    return self.pool(self.emit(op, dtypes.bool.vec(count) if count > 1 else dtypes.bool, self.operands(dt, 2)))

  # ***** memory *****
  def index(self, room: int) -> Node:
    """A non-negative int32 index expression in [0, room)."""
    if room <= 1: return self.icon(0)
    r, pool = self.rng.random(), self.visible("index")
    ints = [x for d in self.dts if dtypes.is_int(d) or d == dtypes.bool for x in self.visible(d)]
    if r < 0.25 or not (pool or ints): return self.icon(self.rng.randrange(room))
    if pool and (r < 0.8 or not ints):
      e = self.rng.choice(pool)
      if self.draw.chance(0.5): e = self.emit(Ops.MUL, INDEX_DTYPE, [e, self.icon(self.rng.randint(1, 3))])
      e = self.emit(Ops.ADD, INDEX_DTYPE, [e, self.icon(self.rng.randint(0, 3))])
    else:  # data dependent: the low 16 bits of an int value
      x = self.rng.choice(ints)
      if x.dtype != INDEX_DTYPE: x = self.emit(Ops.CAST, INDEX_DTYPE, [x])
      e = self.emit(Ops.AND, INDEX_DTYPE, [x, self.icon(0xFFFF)])
    return self.emit(Ops.MOD, INDEX_DTYPE, [e, self.icon(room)])

  def gate(self) -> Node | None: return self.value(dtypes.bool) if self.draw.chance(0.15) else None

  def load_input(self, s: DType, n: int = 1) -> Node:
    bufs = [b for b in self.inputs.get(s, []) if b[1] >= n]
    if not bufs or (len(self.inputs.get(s, [])) < 2 and self.draw.chance(0.1)):
      size = max(n, self.rng.choice((1, 2, 5, 8, 16, 33, 64)))
      bufs = [(self.emit(Ops.DEFINE_GLOBAL, s.ptr(size)), size)]
      self.inputs.setdefault(s, []).extend(bufs)
    buf, size = self.rng.choice(bufs)
    return self.pool(self.load(buf, self.index(size - n + 1), s.vec(n) if n > 1 else s))

  def load_filled(self, s: DType, fill: tuple, n: int = 1) -> Node:
    """An ungated load of n lanes from a new input buffer of s whose contents are `fill` (see _input)."""
    size = max(n, self.rng.choice((2, 5, 8, 16)))
    buf = self.emit(Ops.DEFINE_GLOBAL, s.ptr(size))
    self.inputs.setdefault(s, []).append((buf, size))
    self.fill[id(buf)] = fill
    ix = self.emit(Ops.INDEX, buf.dtype, [buf, self.index(size - n + 1)])
    return self.pool(self.emit(Ops.LOAD, s.vec(n) if n > 1 else s, [ix]))

  def load(self, buf: Node, idx: Node, dt: DType) -> Node:
    ix = self.emit(Ops.INDEX, buf.dtype, [buf, idx])
    g = self.gate()
    if g is None: return self.emit(Ops.LOAD, dt, [ix])
    return self.emit(Ops.LOAD, dt, [ix, self.value(dt), g])

  def own_slot(self, out: _OutputBuffer, c: int) -> Node:
    if self.threads == 1: return self.icon(c)
    return self.emit(Ops.ADD, INDEX_DTYPE, [self.emit(Ops.MUL, INDEX_DTYPE, [self.tid, out.kconst]), self.icon(c)])

  def out_buf(self, s: DType) -> _OutputBuffer:
    if s not in self.outs:
      self.outs[s] = _OutputBuffer(self.emit(Ops.DEFINE_GLOBAL, s.ptr(1)), self.top(Node(Ops.CONST, INDEX_DTYPE, (), 1)))
    return self.outs[s]

  def store(self, x: Node) -> None:
    out = self.out_buf(x.dtype.scalar())
    c, out.slots = out.slots, out.slots + x.dtype.count
    ix = self.emit(Ops.INDEX, out.node.dtype, [out.node, self.own_slot(out, c)])
    g = self.gate()
    self.emit(Ops.STORE, dtypes.void, [ix, x] + ([] if g is None else [g]))

  # ***** steps *****
  def step_alu(self) -> None:
    op, s = self.rng.choice(self.alu)
    n = self.rng.choice((1, 1, 1, 1, 2, 4))
    dt = s.vec(n) if n > 1 else s
    if op is Ops.WHERE: src = [self.value(dtypes.bool.vec(n) if n > 1 else dtypes.bool), *self.operands(dt, 2)]
    else: src = self.operands(dt, 1 if op in GroupOp.Unary else 2 if op in GroupOp.Binary else 3)
    rdt = (dtypes.bool.vec(n) if n > 1 else dtypes.bool) if op in GroupOp.Comparison else dt
    self.pool(self.emit(op, rdt, src))

  def step_convert(self) -> None:
    op, s, d = self.rng.choice(self.conv)
    n = self.rng.choice((1, 1, 1, 2, 4))
    x = self.value(s.vec(n) if n > 1 else s)
    self.pool(self.emit(op, d.vec(n) if n > 1 else d, [x]))

  def step_load(self) -> None:
    s = self.rng.choice(self.dts)
    if self.outs and self.draw.chance(0.3):  # read back an own slot of an output buffer
      s = self.rng.choice(sorted(self.outs, key=lambda d: d.name))
      out = self.outs[s]
      if out.slots:
        self.pool(self.load(out.node, self.own_slot(out, self.rng.randrange(out.slots)), s))
        return
    if self.local is not None and self.draw.chance(0.4): return self.step_local_load()
    self.load_input(s, self.rng.choice((1, 1, 2, 4)))

  def step_store(self) -> None:
    cands = self.leaves[-1] or [x for k, v in self.scopes[-1].items() if isinstance(k, DType) for x in v]
    if cands: self.store(self.rng.choice(cands))

  def step_mul_add(self) -> None:
    """A float MUL feeding an ADD or SUB (either operand order; contraction into an FMA shows here). A quarter of them
    multiply tiny_factors (a square, or two buffers) and store the subnormal product too (where flushing shows); a fifth
    take three kernel constants; the rest values, sometimes constants or a square."""
    floats = [d for d in ARITH_FLOATS if d in self.dts]
    if not floats: return
    s, form = self.rng.choice(floats), self.rng.random()
    n = self.rng.choice((1, 1, 1, 2, 4)) if form >= 0.45 else 1  # tiny factors and constants: scalars
    dt = s.vec(n) if n > 1 else s
    if form < 0.25:
      a = self.load_filled(s, ("tiny",), n)
      b = a if self.draw.chance(0.5) else self.load_filled(s, ("tiny",), n)
    elif form < 0.45: a, b = self.moderate(dt, const=True), self.moderate(dt, const=True)
    else:  # values of one magnitude (so the product's rounding shows in the sum), sometimes a square
      a = self.moderate(dt)
      b = a if self.draw.chance(0.25) else self.moderate(dt)
    c = self.moderate(dt, const=form < 0.45)
    m = self.emit(Ops.MUL, dt, [a, b])
    if form < 0.25: self.store(m)
    self.pool(self.emit(self.rng.choice((Ops.ADD, Ops.SUB)), dt, [m, c] if self.draw.chance(0.5) else [c, m]))

  def moderate(self, dt: DType, const: bool = False) -> Node:
    """A value of dt of moderate magnitude (normal, deviation 4): a kernel constant (with `const`, or sometimes), a
    load from a buffer of such values (the ("moderate",) fill), or sometimes any visible value."""
    s, r = dt.scalar(), self.rng.random()
    if const or r < 0.15:
      lanes = [self.emit(Ops.CONST, s, (), float(truncate[s](self.rng.gauss(0, 4)))) for _ in range(dt.count)]
      return self.pool(lanes[0] if dt.count == 1 else self.emit(Ops.VECTORIZE, dt, lanes), leaf=False)
    if r < 0.3: return self.value(dt)
    return self.load_filled(s, ("moderate",), dt.count)

  def step_chain(self) -> None:
    """A conversion chain: one of bias.CHAINS, directly and (often) through its wider format too, from a value at a
    double rounding (a kernel constant or an input); or a random chain of 2 to 4 CASTs."""
    chains = [c for c in CHAINS if all(d in self.dts for d in c)]
    if chains and self.draw.chance(0.6):
      src, dst, via = self.rng.choice(chains)
      if self.draw.chance(0.4):
        x = self.pool(self.emit(Ops.CONST, src, (), self.draw.pick(double_rounding_values(src, dst, via))), False)
      else: x = self.load_filled(src, ("round", dst, via))
      self.pool(self.emit(Ops.CAST, dst, [x]))
      if self.draw.chance(0.5): self.pool(self.emit(Ops.CAST, dst, [self.emit(Ops.CAST, via, [x])]))
      return
    x = self.value(self.rng.choice(self.dts))
    for _ in range(self.rng.randint(2, 4)):
      x = self.emit(Ops.CAST, self.rng.choice([d for d in self.dts if d != x.dtype.scalar()]), [x])
    self.pool(x)

  def step_vector(self) -> None:
    s = self.rng.choice(self.dts)
    n = self.rng.choice((2, 3, 4))
    v = self.value(s.vec(n))
    lanes = tuple(self.rng.randrange(n) for _ in range(self.rng.choice((1, 1, 2, 4))))
    self.pool(self.emit(Ops.GEP, s.vec(len(lanes)) if len(lanes) > 1 else s, [v], lanes))

  def step_wmma(self) -> None:
    floats = [d for d in ARITH_FLOATS if d in self.dts]
    if not floats: return
    N, M, K = (self.rng.choice((1, 2)) for _ in range(3))
    tin, tout = self.rng.choice(floats), self.rng.choice(floats)
    vec = lambda s, k: s.vec(k) if k > 1 else s
    a, b, c = self.value(vec(tin, M * K)), self.value(vec(tin, K * N)), self.value(vec(tout, M * N))
    self.pool(self.emit(Ops.WMMA, vec(tout, M * N), [a, b, c], (N, M, K)))

  def acc_op(self, s: DType) -> Ops:
    return self.rng.choice([op for op, d in self.alu if d == s and op not in GroupOp.Comparison])

  def open_block(self, kind: str) -> None:
    if len(self.blocks) >= 3: return
    accs = []
    for _ in range(self.rng.choice((0, 1, 1, 2)) if kind == "loop" else self.rng.choice((0, 0, 1))):
      s = self.rng.choice([d for d in self.dts if d not in FP8])
      accs.append((self.emit(Ops.DEFINE_ACC, s, [self.value(s)], len(self.nodes)), self.acc_op(s), s))
    if kind == "loop":
      vars_ = self.visible("var")
      end = self.rng.choice(vars_) if vars_ and self.draw.chance(0.3) else self.icon(self.rng.randint(1, 4))
      node = self.emit(Ops.RANGE, INDEX_DTYPE, [self.icon(self.rng.choice((0, 0, 1))), end], len(self.nodes))
    else: node = self.emit(Ops.IF, dtypes.void, [self.value(dtypes.bool)])
    self.blocks.append(_Block(kind, node, accs))
    self.scopes.append({})
    self.leaves.append([])
    if kind == "loop": self.scopes[-1]["index"] = [node]

  def close_block(self) -> None:
    if not self.blocks: return
    b = self.blocks.pop()
    for x in list(self.leaves[-1]): self.store(x)
    done = []
    for acc, op, s in b.accs:
      if op is Ops.WHERE: src = [self.value(dtypes.bool), acc, self.value(s, [acc])]
      elif op is Ops.MULACC: src = [*self.operands(s, 2), acc]
      else: src = [acc] + [self.value(s, [acc]) for _ in range(0 if op in GroupOp.Unary else 1)]
      done.append(self.emit(Ops.ASSIGN, s, [acc, self.emit(op, s, src)]))
    self.scopes.pop()
    self.leaves.pop()
    self.emit(Ops.ENDRANGE if b.kind == "loop" else Ops.ENDIF, dtypes.void, [b.node])
    for a in done: self.pool(a)

  def step_local_load(self) -> None:
    buf, s, k = self.local
    if self.synced: idx = self.index(buf.dtype.size)
    else: idx = self.local_slot(self.rng.randrange(k))
    self.pool(self.load(buf, idx, s))

  def local_slot(self, c: int) -> Node:
    _, _, k = self.local
    if self.lsize[0] == 1: return self.icon(c)
    return self.emit(Ops.ADD, INDEX_DTYPE, [self.emit(Ops.MUL, INDEX_DTYPE, [self.lidx, self.icon(k)]), self.icon(c)])

  def step_local_store(self) -> None:
    if self.local is None or self.synced: return
    buf, s, k = self.local
    ix = self.emit(Ops.INDEX, buf.dtype, [buf, self.local_slot(self.rng.randrange(k))])
    self.emit(Ops.STORE, dtypes.void, [ix, self.value(s)])

  # ***** the program *****
  def setup(self) -> None:
    rng = self.rng
    if self.draw.chance(0.75):
      self.gsize[0] = rng.choice((2, 3, 4, 8, 16))
      if self.draw.chance(0.3): self.gsize[1] = rng.choice((2, 3))
      if self.draw.chance(0.4): self.lsize[0] = rng.choice((2, 4))
    g0 = self.emit(Ops.SPECIAL, INDEX_DTYPE, (), ("gidx0", self.gsize[0])) if self.gsize[0] > 1 else None
    g1 = self.emit(Ops.SPECIAL, INDEX_DTYPE, (), ("gidx1", self.gsize[1])) if self.gsize[1] > 1 else None
    self.lidx = self.emit(Ops.SPECIAL, INDEX_DTYPE, (), ("lidx0", self.lsize[0])) if self.lsize[0] > 1 else None
    self.threads = self.gsize[0] * self.gsize[1] * self.lsize[0]
    tid = g0 if g0 is not None else self.icon(0)
    if g1 is not None:
      tid = self.emit(Ops.ADD, INDEX_DTYPE, [self.emit(Ops.MUL, INDEX_DTYPE, [g1, self.icon(self.gsize[0])]), tid])
    if self.lidx is not None:
      tid = self.emit(Ops.ADD, INDEX_DTYPE, [self.emit(Ops.MUL, INDEX_DTYPE, [tid, self.icon(self.lsize[0])]), self.lidx])
    self.tid = tid
    self.scopes[0]["index"] = [x for x in (g0, g1, self.lidx, tid) if x is not None and x.op is not Ops.CONST]
    if self.draw.chance(0.3):
      var = self.emit(Ops.DEFINE_VAR, INDEX_DTYPE, (), ("n", 0, rng.randint(1, 6)))
      self.scopes[0]["var"] = [var]
      self.scopes[0]["index"].append(var)
    if self.draw.chance(0.25):
      s = rng.choice(self.dts)
      k = rng.randint(1, 3)
      self.local = (self.emit(Ops.DEFINE_LOCAL, s.ptr(self.lsize[0] * k, local=True), (), "lbuf"), s, k)
      for c in range(k): self.emit(Ops.STORE, dtypes.void, [self.emit(Ops.INDEX, self.local[0].dtype, [self.local[0],
                                                           self.local_slot(c)]), self.value(s)])
      if self.profile.barrier and self.draw.chance(0.5):
        self.emit(Ops.BARRIER)
        self.synced = True

  def steps(self, table: list[tuple], lo: int, hi: int) -> None:
    """lo..hi random steps drawn from (step, weight) pairs."""
    fns, weights = zip(*table)
    for _ in range(self.rng.randint(lo, max(lo, hi))):
      self.step += 1
      self.rng.choices(fns, weights)[0]()

  def run(self) -> Graph:
    self.setup()
    self.steps([(self.step_alu, 40), (self.step_convert, 18), (self.step_mul_add, 8), (self.step_chain, 6),
                (self.step_load, 10), (self.step_store, 4), (self.step_vector, 5), (lambda: self.open_block("loop"), 5),
                (lambda: self.open_block("if"), 4), (self.close_block, 8), (self.step_local_store, 2),
                (self.step_wmma, 1)], min(8, self.profile.max_steps), self.profile.max_steps)
    return self.finish()

  def finish(self) -> Graph:
    """Closes open blocks, stores every leaf, sizes the output buffers: the program's graph."""
    self.step += 1
    while self.blocks: self.close_block()
    for x in list(self.leaves[0]): self.store(x)
    if not self.outs: self.store(self.value(self.rng.choice(self.dts)))
    for s, out in self.outs.items():
      out.kconst.arg = max(out.slots, 1)
      out.node.dtype = s.ptr(self.threads * out.kconst.arg)
    for n in self.nodes:
      if n.op is Ops.INDEX: n.dtype = n.src[0].dtype
    var = next((n for n in self.nodes if n.op is Ops.DEFINE_VAR), None)
    if var is not None and self.draw.chance(0.5):  # declarations keep their list order: the var goes after the buffers
      self.nodes.remove(var)
      self.nodes.append(var)
    return Graph(self.nodes, "fuzz", self.gsize, self.lsize)


def random_graph(draw: Draw, profile: Profile) -> tuple[Graph, dict[int, tuple]]:
  """Program (draw.seed, draw.index) in mode "random": its graph and the fills of its input buffers (see _input)."""
  grower = Grower(draw.start("random"), profile)
  return grower.run(), grower.fill


def _input(dt: DType, n: int, rng: np.random.Generator, fill: tuple | None = None) -> np.ndarray:
  """Initial contents of a buffer: refimpl.testing.values.random_values (a third edge values, a third random bits, a
  third small values); in a quarter of all buffers half the elements are then halfway values (at and next to the
  rounding ties of the dtype's conversions, bias.halfway_values), and in two thirds of the float buffers a quarter of
  the elements NaN, +-inf or +-0, where NaN and infinity handling bugs live. A buffer made for one purpose has a
  `fill`: ("tiny",) bias.tiny_factors, ("moderate",) normal values of deviation 4, ("round", dst, via) mostly
  bias.double_rounding_values of that chain, ("given", array) that array (a corpus kernel's own inputs)."""
  if fill is not None and fill[0] == "given": return np.array(fill[1], to_np(dt))
  if fill is not None and fill[0] == "tiny": return tiny_factors(dt, n, rng)
  if fill is not None and fill[0] == "moderate": return (rng.standard_normal(n) * 4).astype(to_np(dt))
  if fill is not None:
    pool = np.concatenate([double_rounding_values(dt, *fill[1:]), halfway_values(dt, fill[1])[:8]])
    return pool[rng.integers(0, len(pool), n)]
  a = random_values(dt, n, rng).astype(to_np(dt))
  halfway = halfway_values(dt)
  if len(halfway) and rng.random() < 1 / 4:
    pick = rng.random(n) < 1 / 2
    a[pick] = halfway[rng.integers(0, len(halfway), int(pick.sum()))]
  if dtypes.is_float(dt) and rng.random() < 2 / 3:
    special = np.array(SPECIALS, np.float32).astype(to_np(dt))
    pick = rng.random(n) < 1 / 4
    a[pick] = special[rng.integers(0, len(SPECIALS), int(pick.sum()))]
  return a
