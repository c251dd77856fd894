"""Index analysis: what the emulator knows about int32 values before it runs a program, and the thread grid.

`analyze(program, vals)` gives every int32 scalar uop an `IntInfo`: a range [lo, hi] that holds on every lane (active
or not) and, where one exists, an affine form

    value = const + sum(coeff * s)      s: a thread id (gidx0-2, lidx0-2) or a loop counter (a RANGE uop)

that is exact on every lane. DEFINE_VARs are constants here (a run knows their values). A form is kept only while the
range proves that no int32 wrap-around can have happened, so evaluating it in Python ints gives what the ops compute.

Rules (table INT_INFO_RULES, op -> rule):
  CONST, DEFINE_VAR        the constant
  SPECIAL                  [0, size-1]; the id itself
  RANGE                    [min start, max end - 1]; its counter
  ADD SUB NEG, MUL / SHL   interval arithmetic; affine arithmetic (MUL and SHL only by a constant)
  MULACC                   a * b + c as MUL then ADD (tinygrad 0.14's index arithmetic)
  IDIV MOD SHR by a const  ranges; the identity form where the range shows the op changes nothing (x % 8, x in [0, 8))
  AND OR XOR MAX WHERE     ranges (bit ops on non-negative values); MAX keeps a side that always wins
  CAST from a narrow int   the source dtype's range
  anything else            the int32 range, no form (a LOAD, an accumulator, ...)
A result whose range leaves int32 may have wrapped: it gets the int32 range and no form.

What the emulator does with this (machine.py, memory.py):
  - a value with a form is never computed unless an op needs its lanes (INDEX does not);
  - at run time loop counters are numbers, so an INDEX with a form is `offset + sum(c_d * id_d)` over the six thread
    ids: one strided numpy view of the buffer covers every lane, and its bounds follow from the form without a scan;
  - an INDEX without a form but with a static range inside the buffer needs no bounds scan either;
  - ownership.py's `race_free` proves from these forms, per buffer, that two threads never race on one element; race
    tracking runs only on the other buffers.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from refimpl.dtype import dtypes
from refimpl.ir.ops import Ops
from refimpl.ir.program import INDEX_DTYPE, Program

I32_MIN, I32_MAX = -(2**31), 2**31 - 1
# the grid axes in lane order: a lane number is the C-order position in (gidx2, gidx1, gidx0, lidx2, lidx1, lidx0), so
# the threads of one workgroup are consecutive and lidx0 / gidx0 vary fastest
AXES = ("gidx2", "gidx1", "gidx0", "lidx2", "lidx1", "lidx0")
AXIS = {name: k for k, name in enumerate(AXES)}

Sym = str | int  # a thread axis name, or the uop index of a RANGE


@dataclass(frozen=True)
class Affine:
  """const + sum(coeff * sym) over `terms` (no zero coefficients)."""
  terms: dict[Sym, int] = field(default_factory=dict)
  const: int = 0

  def __add__(self, o: Affine) -> Affine:
    t = dict(self.terms)
    for s, c in o.terms.items(): t[s] = t.get(s, 0) + c
    return Affine({s: c for s, c in t.items() if c}, self.const + o.const)
  def scale(self, k: int) -> Affine: return Affine({s: c * k for s, c in self.terms.items()} if k else {}, self.const * k)


@dataclass(frozen=True)
class IntInfo:
  """What holds for an int32 value on every lane: lo <= value <= hi, and value == aff when aff is not None."""
  lo: int
  hi: int
  aff: Affine | None = None

  @property
  def const(self) -> int | None: return self.lo if self.lo == self.hi else None

FULL = IntInfo(I32_MIN, I32_MAX)

def _fit(lo: int, hi: int, aff: Affine | None = None) -> IntInfo:
  """The info of a result, or FULL when the range leaves int32 (the value may have wrapped, the form is void)."""
  return IntInfo(lo, hi, aff) if I32_MIN <= lo <= hi <= I32_MAX else FULL

def _tdiv(a: int, b: int) -> int: return abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)


# ***** rules: (uop, infos of its srcs) -> IntInfo *****

def _via(info: IntInfo, *deps: IntInfo) -> IntInfo:
  """`info`, keeping its form only when every operand it relied on has one: a form means the op may be skipped, so its
  inputs must be thread ids, counters and constants (a constant range alone can come from an undefined value)."""
  return info if all(d.aff is not None for d in deps) else IntInfo(info.lo, info.hi)

def _add(u, a, b): return _fit(a.lo + b.lo, a.hi + b.hi, a.aff + b.aff if a.aff and b.aff else None)
def _sub(u, a, b): return _fit(a.lo - b.hi, a.hi - b.lo, a.aff + b.aff.scale(-1) if a.aff and b.aff else None)
def _neg(u, a): return _fit(-a.hi, -a.lo, a.aff.scale(-1) if a.aff else None)

def _scaled(a: IntInfo, k: int) -> IntInfo:
  return _fit(min(a.lo * k, a.hi * k), max(a.lo * k, a.hi * k), a.aff.scale(k) if a.aff else None)

def _mul(u, a, b):
  if b.const is not None: return _via(_scaled(a, b.const), b)
  if a.const is not None: return _via(_scaled(b, a.const), a)
  corners = (a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi)
  return _fit(min(corners), max(corners))

def _mulacc(u, a, b, c): return _add(u, _mul(u, a, b), c)

def _shl(u, a, b): return _via(_scaled(a, 1 << b.const), b) if b.const is not None and 0 <= b.const < 32 else FULL
def _shr(u, a, b):
  if b.const is None or not 0 <= b.const < 32: return FULL
  return _via(IntInfo(a.lo >> b.const, a.hi >> b.const, a.aff if b.const == 0 else None), b)

def _idiv(u, a, b):
  d = b.const
  if not d or (d == -1 and a.lo == I32_MIN): return FULL  # zero or MIN / -1: undefined somewhere
  q = sorted((_tdiv(a.lo, d), _tdiv(a.hi, d)))  # truncating division by a constant is monotone
  return _via(_fit(q[0], q[1], a.aff if d == 1 else None), b)

def _mod(u, a, b):
  if not b.const: return FULL
  m = abs(b.const) - 1
  if -m <= a.lo and a.hi <= m and (a.lo >= 0 or a.hi <= 0): return _via(a, b)  # the dividend is already the remainder
  return IntInfo(max(a.lo, -m) if a.lo < 0 else 0, min(a.hi, m) if a.hi > 0 else 0)

def _max(u, a, b):
  if a.lo >= b.hi: return _via(a, b)
  if b.lo >= a.hi: return _via(b, a)
  return IntInfo(max(a.lo, b.lo), max(a.hi, b.hi))

def _and(u, a, b):
  if a.lo >= 0 or b.lo >= 0: return IntInfo(0, min(x.hi for x in (a, b) if x.lo >= 0))
  return FULL

def _or_xor(u, a, b):
  if a.lo < 0 or b.lo < 0: return FULL
  return IntInfo(0, (1 << max(a.hi, b.hi).bit_length()) - 1)

def _where(u, c, a, b): return IntInfo(min(a.lo, b.lo), max(a.hi, b.hi))

INT_INFO_RULES: dict[Ops, Callable[..., IntInfo]] = {
  Ops.ADD: _add, Ops.SUB: _sub, Ops.NEG: _neg, Ops.MUL: _mul, Ops.MULACC: _mulacc, Ops.SHL: _shl, Ops.SHR: _shr,
  Ops.IDIV: _idiv, Ops.MOD: _mod, Ops.MAX: _max, Ops.AND: _and, Ops.OR: _or_xor, Ops.XOR: _or_xor, Ops.WHERE: _where}


def analyze(program: Program, vals: tuple[int, ...] = ()) -> dict[int, IntInfo]:
  """IntInfo of every int32 scalar uop (see the module docstring). `vals` are the DEFINE_VAR values, in order."""
  uops, infos = program.uops, {}
  var_vals = iter(vals)
  def info(j: int) -> IntInfo: return infos.get(j, FULL)
  for i, u in enumerate(uops):
    if u.op is Ops.DEFINE_VAR: v = next(var_vals, None)
    if u.dtype != INDEX_DTYPE: continue
    if u.op is Ops.CONST: infos[i] = IntInfo(u.arg, u.arg, Affine({}, u.arg))
    elif u.op is Ops.DEFINE_VAR: infos[i] = IntInfo(u.arg[1], u.arg[2]) if v is None else IntInfo(v, v, Affine({}, v))
    elif u.op is Ops.SPECIAL: infos[i] = IntInfo(0, u.arg[1] - 1, Affine({u.arg[0]: 1}))
    elif u.op is Ops.RANGE:
      lo, hi = info(u.src[0]).lo, info(u.src[1]).hi - 1
      infos[i] = IntInfo(lo, max(lo, hi), Affine({i: 1}))
    elif u.op is Ops.CAST:
      src = uops[u.src[0]].dtype
      if src == dtypes.bool: infos[i] = IntInfo(0, 1)
      elif dtypes.is_int(src) and src.itemsize < 4 + (not dtypes.is_unsigned(src)):
        infos[i] = IntInfo(int(dtypes.min(src)), int(dtypes.max(src)))
    elif u.op in INT_INFO_RULES and all(uops[j].dtype == INDEX_DTYPE or (k == 0 and u.op is Ops.WHERE)
                                        for k, j in enumerate(u.src)):
      infos[i] = INT_INFO_RULES[u.op](u, *(info(j) for j in u.src))
  return infos


# ***** the thread grid *****

MEMO_SIZE = 4096  # the most entries a grid memoises per question (coefficients -> answer)
EVALUATED_BYTES = 1 << 22  # the most bytes of affine forms' lanes a grid memoises (Grid.evaluate)

class Grid:
  """The launch as six axes (AXES order), and, inside a loop that runs as lanes, one more axis per such loop (`extend`):
  axis ids 0-5 are the thread axes, 6, 7, ... the loops', outermost loop first; `sizes` has one size per id. A lane is
  a thread, or a (thread, iteration) pair; lane numbers are C-order positions in `shape`, the axes in lane order
  (`order`: the axis id of each position). A loop's axis goes either last in lane order (lane-major: a thread's
  iterations are consecutive lanes) or first (iteration-major: one iteration's lanes are consecutive), as the loop
  asks (loops.LaneLoop.iteration_major); the thread axes stay together, in launch order. A grid may be one chunk of the
  launch (`chunks`): a box of whole workgroups at `origin` (a position per thread axis) whose threads are the launch's
  threads base .. base + threads - 1; lanes, ids and shapes are the chunk's, thread numbers (`tids`, `thread`) the
  launch's. A grid may also be a box of another (`pinned`): the lanes whose thread ids on some workgroup-local axes
  (lidx) have one value each; those axes are one thread wide in it, `origin` holds the values, and its threads are not
  consecutive in the launch (`tids` maps them)."""
  def __init__(self, global_size: tuple[int, int, int], local_size: tuple[int, int, int]):
    g, lo = global_size, local_size
    self.sizes: tuple[int, ...] = (g[2], g[1], g[0], lo[2], lo[1], lo[0])
    self.shape, self.order = self.sizes, tuple(range(6))
    self.lanes, self.group = math.prod(self.shape), math.prod(lo)  # lanes, threads per workgroup
    self.threads = self.lanes  # the lanes of one iteration of the loops that run as lanes
    self.workgroups = self.threads // self.group
    self.inner = 1  # lanes per thread: the iterations of the loops that run as lanes
    self.after = 1  # the lanes of one step along the thread axes: the iterations of the loops placed after them
    self.parent: Grid | None = None  # the grid this one extends by its last loop axis, or is a box of (`pinned`)
    self.pins: dict[int, int] | None = None  # a box's pinned axes (id -> thread id), this grid's and its extensions'
    self.launch, self.origin, self.base = self.shape, (0,) * 6, 0  # the whole launch's axes; where this chunk starts
    self.first_group = 0  # the launch's number of this chunk's first workgroup
    self._ids: np.ndarray | None = None
    self._lane_strides: dict[tuple[int, ...], int | None] = {}
    self._reach: dict[tuple[int, ...], tuple[int, int]] = {}  # span's memo: coefficients -> (lowest, highest) offset
    self._extended: dict[tuple[int, bool], Grid] = {}
    self._evaluated: dict[tuple[tuple[int, ...], int], np.ndarray] = {}  # evaluate's memo
    self._evaluated_bytes = 0
    self._boxes: dict[tuple[tuple[int, int], ...], Grid] = {}
    self.within: tuple[slice, ...] | None = None  # a box's lanes among its parent's, as an index of the parent's shape

  def _like(self, sizes: tuple[int, ...], order: tuple[int, ...], group: int) -> Grid:
    out = Grid.__new__(Grid)
    out.sizes, out.order, out.shape = sizes, order, tuple(sizes[a] for a in order)
    out.lanes, out.group, out.threads, out.inner = math.prod(sizes), group, math.prod(sizes[:6]), math.prod(sizes[6:])
    out.after = math.prod(out.shape[order.index(5) + 1:])
    out.workgroups, out.parent, out.pins = out.threads // group, None, self.pins
    out.launch, out.origin, out.base, out.first_group, out._ids = self.launch, self.origin, self.base, self.first_group, None
    out._lane_strides, out._reach, out._extended, out._evaluated, out._evaluated_bytes = {}, {}, {}, {}, 0
    out._boxes, out.within = {}, None
    return out

  def extend(self, n: int, first: bool) -> Grid:
    """This grid with one more axis of n iterations: each lane becomes n lanes. first: the axis goes first in lane
    order (iteration-major: lane + k * self.lanes in iteration k), else last (lane-major: lane * n + k)."""
    if (n, first) in self._extended: return self._extended[(n, first)]  # made once: its memos serve every run
    new = len(self.sizes)
    out = self._like(self.sizes + (n,), (new, *self.order) if first else (*self.order, new), self.group)
    out.parent = self
    if len(self._extended) < 64: self._extended[(n, first)] = out
    return out

  def pinned(self, pins: dict[int, int]) -> Grid:
    """The box of this grid (the launch or a chunk of it, without loop axes) whose lanes have thread id pins[d] on each
    workgroup-local axis d (ids 3-5) of `pins` that is more than one thread wide here: the same workgroups, with those
    axes one thread wide (made once)."""
    key = tuple(sorted((d, v) for d, v in pins.items() if self.sizes[d] > 1))
    if key in self._boxes: return self._boxes[key]
    fixed = dict(key)
    sizes = tuple(1 if d in fixed else n for d, n in enumerate(self.sizes))
    out = self._like(sizes, self.order, math.prod(sizes[3:6]))
    out.parent, out.pins = self, {**(self.pins or {}), **fixed}
    out.origin = tuple(o + fixed.get(d, 0) for d, o in enumerate(self.origin))
    out.within = tuple(slice(fixed[d], fixed[d] + 1) if d in fixed else slice(None) for d in self.order)
    if len(self._boxes) < 64: self._boxes[key] = out
    return out

  def spread(self, a: np.ndarray) -> np.ndarray:
    """An array over the lanes of an ancestor grid (one this one extends or is a box of), (its lanes, *tail), on this
    grid's lanes: the same for every iteration of the axes added since, the box's part of it (a copy)."""
    if a.shape[0] == self.lanes: return a
    a = self.parent.spread(a)
    if len(self.sizes) == len(self.parent.sizes):  # a box: the pinned positions of the parent's axes
      return a.reshape(self.parent.shape + a.shape[1:])[self.within].reshape((self.lanes,) + a.shape[1:])
    n = self.sizes[-1]
    if self.order[0] == len(self.sizes) - 1: return np.broadcast_to(a, (n,) + a.shape).reshape((self.lanes,) + a.shape[1:])
    return np.repeat(a, n, axis=0)

  def chunks(self, most: int) -> list[Grid]:
    """The launch as boxes of whole workgroups of at most `most` lanes each, in workgroup order: a range along one
    workgroup axis with the axes outside it fixed and the axes inside it whole, so each box is a run of consecutive
    threads. Empty when one workgroup has more than `most` lanes."""
    if self.group > most: return []
    for d in range(3):  # the outermost workgroup axis whose inner workgroup axes, whole, fit
      if math.prod(self.shape[d + 1:]) <= most: break
    k = min(self.shape[d], most // math.prod(self.shape[d + 1:]))
    out = []
    for fixed in np.ndindex(*self.shape[:d]):
      for start in range(0, self.shape[d], k):
        n = min(k, self.shape[d] - start)
        box = self._like((1,) * d + (n,) + self.shape[d + 1:6], tuple(range(6)), self.group)
        box.origin = tuple(fixed) + (start,) + (0,) * (5 - d)
        box.base = int(np.ravel_multi_index(box.origin, self.launch))
        box.first_group = box.base // self.group
        out.append(box)
    return out

  @property
  def ids(self) -> np.ndarray:
    """Every lane number, int64 (cached)."""
    if self._ids is None: self._ids = np.arange(self.lanes, dtype=np.int64)
    return self._ids

  def tids(self, lanes: np.ndarray) -> np.ndarray:
    """The thread of each lane, as its lane number in the launch without loop axes (what race tracking records)."""
    if self.pins is None: return self._thread_lane(lanes) + self.base  # a run of consecutive threads
    at = np.unravel_index(self._thread_lane(lanes), self.sizes[:6])
    return np.ravel_multi_index(tuple(x + o for x, o in zip(at, self.origin)), self.launch)

  def workgroup(self, lanes: np.ndarray) -> np.ndarray:
    """The workgroup of each lane, numbered in this grid (0 .. workgroups - 1)."""
    return self._thread_lane(lanes) // self.group

  def _thread_lane(self, lanes: np.ndarray) -> np.ndarray:
    """The position of each lane's thread in this grid's threads (C order over the six thread axes)."""
    if self.inner == 1: return lanes
    return (lanes // self.after) % self.threads

  def coordinate(self, lane: int, axis: int) -> int:
    """The lane's position along the axis with id `axis`."""
    return int(np.unravel_index(int(lane), self.shape)[self.order.index(axis)])

  def lane_stride(self, coef: tuple[int, ...]) -> int | None:
    """How far apart an affine form (coefficients per axis id) is on consecutive lanes, where that is one number for
    every pair of them (each axis's coefficient is the next inner one's times its size), else None (memoised)."""
    if coef in self._lane_strides: return self._lane_strides[coef]
    stride, inner = 0, None  # inner: (coefficient, size) of the innermost axis of more than one position so far
    for c, n in reversed(list(zip(self.strides(coef), self.shape))):
      if n == 1: continue
      if inner is None: stride = c
      elif c != inner[0] * inner[1]:
        stride = None
        break
      inner = (c, n)
    if len(self._lane_strides) < MEMO_SIZE: self._lane_strides[coef] = stride
    return stride

  def span(self, coef: tuple[int, ...], off: int) -> tuple[int, int]:
    """min and max over every lane of off + sum(coef[d] * id_d): exact, from the corners of the box."""
    reach = self._reach.get(coef)
    if reach is None:
      reach = (sum(c * (n - 1) for c, n in zip(coef, self.sizes) if c < 0),
               sum(c * (n - 1) for c, n in zip(coef, self.sizes) if c > 0))
      if len(self._reach) < MEMO_SIZE: self._reach[coef] = reach
    return off + reach[0], off + reach[1]

  def strides(self, coef: tuple[int, ...]) -> tuple[int, ...]:
    """Coefficients per axis id as they apply to the positions of `shape` (lane order)."""
    return coef if len(self.order) == 6 else tuple(coef[a] for a in self.order)

  def evaluate(self, coef: tuple[int, ...], off: int) -> np.ndarray:
    """off + sum(coef[d] * id_d) on every lane: int64 of shape (lanes,), or (1,) when it is the same on every lane.
    Read-only: memoised while the grid's memo holds EVALUATED_BYTES (a plan's grids serve every run of it)."""
    key = (coef, off)
    if key in self._evaluated: return self._evaluated[key]
    x: np.ndarray | int = off
    k = len(self.shape)
    for d, (c, n) in enumerate(zip(self.strides(coef), self.shape)):
      if c and n > 1: x = x + (np.arange(n, dtype=np.int64) * c).reshape((1,) * d + (n,) + (1,) * (k - 1 - d))
    out = np.array([x], dtype=np.int64) if isinstance(x, int) else np.broadcast_to(x, self.shape).reshape(self.lanes)
    out.flags.writeable = False
    if self._evaluated_bytes + out.nbytes <= EVALUATED_BYTES:
      self._evaluated[key] = out
      self._evaluated_bytes += out.nbytes
    return out

  def thread(self, lane: int) -> tuple[int, ...]:
    """The thread of a lane: (gidx0, gidx1, gidx2, lidx0, lidx1, lidx2)."""
    g2, g1, g0, l2, l1, l0 = (int(x) for x in np.unravel_index(int(self.tids(np.int64(lane))), self.launch))
    return (g0, g1, g2, l0, l1, l2)

  def shifted(self, coef: tuple[int, ...], off: int) -> int:
    """The offset of an affine form (coefficients on this grid's axes) in this chunk's coordinates."""
    if not any(self.origin): return off  # the launch itself, or its first chunk
    return off + sum(c * o for c, o in zip(coef, self.origin))

  def place(self, form: tuple, counters: dict[int, int], axes: dict[int, tuple[int, int]]) -> tuple[tuple[int, ...], int]:
    """An affine form (coefficients on the launch's six axes, (RANGE, coefficient) pairs, offset) on this grid: (a
    coefficient per grid axis, offset in this chunk's coordinates). A loop run sequentially puts its counter now
    (`counters`: RANGE -> counter) times its coefficient in the offset; a loop run as lanes (`axes`: RANGE -> (its grid
    axis, its first counter)) puts its coefficient on its axis and its first counter times it in the offset."""
    coef, loops, off = form
    off = self.shifted(coef, off)
    extra = len(self.sizes) - 6  # the axes of loops run as lanes
    if not loops: return (coef + (0,) * extra if extra else coef), off
    on_axis = [0] * extra
    for r, c in loops:
      if r in axes:
        axis, start = axes[r]
        on_axis[axis - 6] += c
        off += c * start
      else: off += c * counters[r]
    return coef + tuple(on_axis), off

  def iteration(self, lanes: np.ndarray) -> np.ndarray:
    """The iteration of each lane in the loops run as lanes, flat in C order over their sizes, outermost loop first
    (the sequential order of iterations; 0 when there are none)."""
    if self.inner == 1: return np.zeros_like(lanes)
    coords = np.unravel_index(lanes, self.shape)
    return np.ravel_multi_index([coords[self.order.index(a)] for a in range(6, len(self.sizes))], self.sizes[6:])

  def separated(self, coef: tuple[int, ...], extent: int, axes: Sequence[int] = range(6),
                copies: Sequence[tuple[int, int]] = ()) -> bool:
    """True when off + sum(coef[d] * id_d for d in axes) + sum(step_j * k_j) + w, w in [0, extent), k_j in [0, m_j)
    for each (step_j, m_j) of `copies`, is one-to-one in (ids, k, w). Sufficient condition (mixed radix): sorted by
    |coefficient|, each term's coefficient exceeds the largest value all smaller terms reach together. An axis of more
    than one thread with coefficient 0 fails it."""
    terms = sorted([(abs(coef[d]), self.sizes[d]) for d in axes if self.sizes[d] > 1] + [(1, extent), *copies])
    reach = 0
    for c, n in terms:
      if c <= reach: return False
      reach += c * (n - 1)
    return True

def thread_form(aff: Affine) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...], int]:
  """An affine form split for run time: (coefficients of the six thread axes, (RANGE uop, coeff) pairs, constant)."""
  coef = [0] * 6
  loops = []
  for s, c in aff.terms.items():
    if isinstance(s, str): coef[AXIS[s]] += c
    else: loops.append((s, c))
  return tuple(coef), tuple(loops), aff.const
