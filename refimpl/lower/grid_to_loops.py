"""Grid -> loops: run a grid program (SPECIAL gidx/lidx, DEFINE_LOCAL, BARRIER) on a backend with no grid (CLANG, LLVM)
as one call, by "work-item loops split at barriers" (the method of CPU OpenCL implementations).

`lower_grid_to_loops(program)` returns a program with global_size = local_size = (1, 1, 1), no SPECIAL and no BARRIER:
  - the declarations (DEFINE_GLOBAL, DEFINE_VAR, DEFINE_LOCAL) stay first, in order, followed by the carry arrays
    (below), then `CONST 0` and one RANGE per gidx of size > 1, nested outermost first as gidx2, gidx1, gidx0 (the
    workgroup loops); a SPECIAL of size 1 becomes the CONST 0;
  - the rest of the program (the kernel body) is cut into *phases* at every BARRIER; each phase is its own thread
    loops (RANGEs over lidx2, lidx1, lidx0 of size > 1, dimension 0 innermost so that consecutive ids stay consecutive
    in memory) around its uops in their original order (so per-thread state such as DEFINE_ACC is re-initialised for
    each thread); the BARRIERs themselves disappear: every thread of a workgroup finishes phase k before any starts
    phase k + 1, which is the barrier's meaning;
  - a RANGE with a BARRIER inside (the verifier allows it only when its bounds do not depend on lidx) is a *workgroup
    loop*: it is emitted between the phases, outside any thread loop, and its body is cut into phases the same way
    (nested such RANGEs nest); its bounds are read as the first thread's values (see "uniform" below);
  - then the ENDRANGEs. A program with no BARRIER is one phase: the layout is decls, CONST 0, gidx loops, lidx loops,
    body, ENDRANGEs. With one thread per workgroup BARRIERs are no-ops and are dropped. A program with no SPECIAL and
    no BARRIER comes back unchanged.
Values that live across a cut (defined in one phase, used in another or in a workgroup loop's bounds):
  - carried per thread through a *carry array*: a DEFINE_LOCAL of count * threads elements per value (T.vec(count)),
    indexed by the linear local id (lidx2 * L1 + lidx1) * L0 + lidx0 times count. The defining phase stores the value
    right after computing it; a phase that uses it loads it once, at its start (inside its thread loops). The store is
    a MOVE (Ops.STORE): a value undefined on some lanes (a load of a never-written local that only a WHERE or dead code
    reads) stays undefined through the carry without the carry being a use, so a defined program stays defined;
  - accumulators (DEFINE_ACC) used outside their defining phase are carried the same way: the defining phase stores
    the register at its end, a phase that reads or ASSIGNs it starts with a fresh DEFINE_ACC initialised from the
    carry array and, when it ASSIGNs it, stores the register back at its end;
  - recomputed instead: CONST, INDEX (a pointer cannot be stored), and integer / bool expressions over CONST,
    DEFINE_VAR, SPECIAL and workgroup loop counters only (exact and cheap); SPECIALs are the loop variables of the
    phase (lidx) or of the workgroup loops (gidx), which every phase sees; declarations are global.
Uniform: a workgroup loop's bounds may be values computed per thread (a load, an accumulator); they are read from the
carry arrays at element 0, the first thread's copy. That is exact when the bounds are the same on every thread of the
workgroup, which the verifier's barrier rule guarantees: a RANGE around a BARRIER must not have bounds that depend on
lidx through data or through control (an accumulator ASSIGNed inside an IF or RANGE whose gate or bounds depend on lidx).
Why this is exact: threads of one launch share memory only through loads and stores, and within a phase a thread may
depend only on what it wrote itself (anything else races: another thread's unordered write of other bits is undefined,
a racing read's value is undefined, and two writes of the same bits leave those bits in any order); so running a
phase's threads one after another in any order, and the phases in program order, computes what the grid computes for
every defined program.
DEFINE_LOCAL (and each carry array) becomes one array reused by the workgroups in turn: a defined program never reads
local memory its workgroup did not write, so what a previous workgroup left there is never observed (the emulator,
which runs the grid form, is where uninitialised reads are detected).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from refimpl.dtype import DType, dtypes
from refimpl.ir.builder import ProgramBuilder
from refimpl.ir.ops import GroupOp, Ops
from refimpl.ir.program import INDEX_DTYPE, Program, UOp
from refimpl.ir.verify import verify

LOOP_ORDER = ("gidx2", "gidx1", "gidx0", "lidx2", "lidx1", "lidx0")  # outermost first
WORKGROUP = -1  # the context of a workgroup loop's bounds (outside every phase), as opposed to a phase number
# ops recomputed in the phase that uses them (on int / bool values whose srcs are all recomputable or fixed)
RECOMPUTED_OPS = GroupOp.ALU | {Ops.CAST, Ops.BITCAST, Ops.VECTORIZE, Ops.GEP}


class LoweringError(ValueError):
  """The program cannot be lowered (the message says why)."""


def lower_grid_to_loops(program: Program) -> Program:
  """The loop form of a grid program (see the module docstring)."""
  verify(program)
  if not any(u.op in (Ops.SPECIAL, Ops.BARRIER) for u in program.uops): return program
  return verify(_Lowering(program).run())


@dataclass
class _Phase:
  """The uops between two cuts, run by every thread of a workgroup before the next phase starts."""
  id: int
  uops: list[int] = field(default_factory=list)
  values: set[int] = field(default_factory=set)  # carried values it uses (loaded at its start)
  accs: set[int] = field(default_factory=set)    # accumulators of other phases it reads or assigns (reloaded at its start)

@dataclass
class _Loop:
  """A RANGE with a BARRIER inside: a workgroup loop around the phases (and workgroup loops) of its body."""
  range: int
  body: list = field(default_factory=list)


class _Lowering:
  def __init__(self, program: Program):
    self.p, self.uops = program, program.uops
    self.sizes = {u.arg[0]: u.arg[1] for u in self.uops if u.op is Ops.SPECIAL}
    self.threads = math.prod(program.local_size)
    self.b = ProgramBuilder.over(program)  # the new program: new RANGE and DEFINE_ACC ids follow the old ones
    self.b.global_size, self.b.local_size = [1, 1, 1], [1, 1, 1]
    self.fixed: dict[int, int] = {}   # declarations, gidx, size-1 lidx, workgroup loop counters: visible everywhere
    self.local: dict[int, int] = {}   # uops of phases, once emitted (seen only from their own phase)
    self.memo: list[dict] = [{}]      # recomputed uops, one dict per open block (dropped when the block closes)
    self.carry: dict[int, int] = {}   # carried uop -> its carry array (a new DEFINE_LOCAL)
    self.ctx = WORKGROUP              # where we emit: a phase number or WORKGROUP
    # the phase being emitted: its thread loops (lidx name -> RANGE), linear local id, lid * count, reloaded carries
    self.lidx, self.lid, self.offsets, self.reloaded = {}, -1, {}, {}
    self.zero = -1                    # the CONST 0 (run emits it)
    self.tree, self.phases, self.phase_of = self._cut()
    self.kind = self._kinds()
    self.carried: set[int] = set()  # values stored after their definition
    self.seen: set[tuple[int, int]] = set()
    self.shared: set[int] = set()   # accumulators stored at the end of the phases that define or assign them
    self._collect(self.tree)

  # ***** analysis *****

  def _cut(self) -> tuple[list, list[_Phase], dict[int, int]]:
    """The body as a tree of phases and workgroup loops; phase_of: uop -> its phase number."""
    workgroup_loops: set[int] = set()
    open_: list[int] = []
    for i, u in enumerate(self.uops):
      if u.op in GroupOp.BlockStart: open_.append(i)
      elif u.op in GroupOp.BlockEnd: open_.pop()
      elif u.op is Ops.BARRIER and self.threads > 1: workgroup_loops.update(open_)  # the verifier allows RANGEs only
    root: list = []
    stack, phases, phase_of = [root], [], {}
    cur: _Phase | None = None
    for i, u in enumerate(self.uops):
      if u.op in GroupOp.Declaration or u.op is Ops.SPECIAL or (u.op is Ops.BARRIER and self.threads == 1): continue
      if u.op is Ops.BARRIER: cur = None
      elif u.op is Ops.RANGE and i in workgroup_loops:
        cur = None
        stack[-1].append(loop := _Loop(i))
        stack.append(loop.body)
      elif u.op is Ops.ENDRANGE and u.src[0] in workgroup_loops:
        cur = None
        stack.pop()
      else:
        if cur is None:
          phases.append(cur := _Phase(len(phases)))
          stack[-1].append(cur)
        cur.uops.append(i)
        phase_of[i] = cur.id
    return root, phases, phase_of

  def _kinds(self) -> list[str]:
    """Per uop, how another phase sees it: fixed (one uop everyone sees), lidx (the phase's loop), acc (an accumulator,
    carried), recompute (CONST, INDEX, int/bool expressions of recomputable or fixed uops), or value (carried)."""
    kinds: list[str] = []
    for i, u in enumerate(self.uops):
      integral = u.op in RECOMPUTED_OPS and (dtypes.is_int(u.dtype) or u.dtype.scalar() == dtypes.bool)
      if u.op in GroupOp.Declaration or (u.op is Ops.SPECIAL and not (u.arg[0].startswith("lidx") and u.arg[1] > 1)) or \
         (u.op is Ops.RANGE and i not in self.phase_of): k = "fixed"
      elif u.op is Ops.SPECIAL: k = "lidx"
      elif u.op in (Ops.DEFINE_ACC, Ops.ASSIGN): k = "acc"
      elif u.op in (Ops.CONST, Ops.INDEX) or (integral and all(kinds[j] in ("fixed", "lidx", "recompute") for j in u.src)):
        k = "recompute"
      else: k = "value"
      kinds.append(k)
    return kinds

  def _acc(self, j: int) -> int: return self.uops[j].src[0] if self.uops[j].op is Ops.ASSIGN else j

  def _need(self, j: int, ctx: int) -> None:
    """Record what using uop j from phase `ctx` (or from a workgroup loop's bounds) needs carried."""
    if self.phase_of.get(j) == ctx or (j, ctx) in self.seen: return
    self.seen.add((j, ctx))
    k = self.kind[j]
    if k == "recompute":
      for s in self.uops[j].src: self._need(s, ctx)
    elif k == "acc" and self.phase_of[acc := self._acc(j)] != ctx:
      self.shared.add(acc)
      if ctx != WORKGROUP: self.phases[ctx].accs.add(acc)
    elif k == "value":
      self.carried.add(j)
      if ctx != WORKGROUP: self.phases[ctx].values.add(j)

  def _collect(self, items: list) -> None:
    for it in items:
      if isinstance(it, _Loop):
        for j in self.uops[it.range].src: self._need(j, WORKGROUP)
        self._collect(it.body)
      else:
        for i in it.uops:
          for j in self.uops[i].src: self._need(j, it.id)

  # ***** emission *****

  def copy(self, u: UOp, src: tuple[int, ...]) -> int: return self.b.uop(u.op, u.dtype, src, u.arg)
  def size(self, name: str) -> int: return self.b.const(self.sizes[name], INDEX_DTYPE)

  def load(self, j: int, at: int) -> int:
    """Load carried uop j (a value or an accumulator) from its carry array at element `at`."""
    return self.b.load(self.carry[j], at, count=self.uops[j].dtype.count)

  def store(self, j: int, value: int) -> None:
    """Store this thread's copy of carried uop j: a move (its undefined lanes are carried, not used)."""
    self.b.store(self.carry[j], self.offset(self.uops[j].dtype), value, move=True)

  def offset(self, dt: DType) -> int:
    """This thread's element in a carry array of dtype dt: linear local id * count (once per phase)."""
    if dt.count == 1: return self.lid
    if dt.count not in self.offsets:
      self.offsets[dt.count] = self.b.alu(Ops.MUL, self.lid, self.b.const(dt.count, INDEX_DTYPE))
    return self.offsets[dt.count]

  def get(self, j: int) -> int:
    """The new uop that stands for original uop j where we are (a phase, or a workgroup loop's bounds)."""
    if self.phase_of.get(j) == self.ctx: return self.local[j]
    if j in self.fixed: return self.fixed[j]
    k, u = self.kind[j], self.uops[j]
    if k == "lidx": return self.lidx[u.arg[0]]
    if self.ctx == WORKGROUP and k in ("acc", "value"): return self.load(self._acc(j), self.zero)  # the first thread's copy
    if k == "acc": return self.reloaded[self._acc(j)]
    if k == "value": return self.reloaded[j]
    for level in reversed(self.memo):
      if j in level: return level[j]
    self.memo[-1][j] = x = self.copy(u, tuple(self.get(s) for s in u.src))
    return x

  def items(self, items: list) -> None:
    for it in items:
      if isinstance(it, _Phase):  # a phase of recomputable uops only (say a loop bound's CONST) has nothing to run
        if any(self.kind[i] != "recompute" for i in it.uops): self.phase(it)
        continue
      self.ctx = WORKGROUP
      r = self.uops[it.range]
      self.fixed[it.range] = loop = self.copy(r, (self.get(r.src[0]), self.get(r.src[1])))
      self.memo.append({})
      self.items(it.body)
      self.memo.pop()
      self.b.uop(Ops.ENDRANGE, dtypes.void, (loop,))

  def phase(self, ph: _Phase) -> None:
    self.ctx, self.offsets, self.reloaded, self.lidx = ph.id, {}, {}, {}
    self.memo.append({})
    loops = []
    for name in LOOP_ORDER[3:]:
      if self.sizes.get(name, 1) > 1:
        self.lidx[name] = r = self.b.range(self.zero, self.size(name))
        loops.append((name, r))
    stores = [x for x in sorted(self.shared) if self.phase_of[x] == ph.id or x in ph.accs]
    if ph.values or stores or any(i in self.carried for i in ph.uops):
      self.lid = loops[0][1]
      for name, r in loops[1:]: self.lid = self.b.alu(Ops.ADD, self.b.alu(Ops.MUL, self.lid, self.size(name)), r)
    for j in sorted(ph.values): self.reloaded[j] = self.load(j, self.offset(self.uops[j].dtype))
    for x in sorted(ph.accs):
      init = self.load(x, self.offset(self.uops[x].dtype))
      self.reloaded[x] = self.b.acc(init)
    assigned = set()
    for i in ph.uops:
      u = self.uops[i]
      if u.op in GroupOp.BlockEnd: self.memo.pop()
      if u.op is Ops.ASSIGN: assigned.add(u.src[0])
      self.local[i] = self.copy(u, tuple(self.get(j) for j in u.src))
      if u.op in GroupOp.BlockStart: self.memo.append({})
      if i in self.carried: self.store(i, self.local[i])
    for x in stores:
      if self.phase_of[x] == ph.id: self.store(x, self.local[x])
      elif x in assigned: self.store(x, self.reloaded[x])
    for _, r in reversed(loops): self.b.end_range(r)
    self.memo.pop()
    self.ctx = WORKGROUP

  def run(self) -> Program:
    """Declarations, carry arrays, CONST 0, the workgroup loops around the tree of phases and workgroup loops."""
    for i, u in enumerate(self.uops):
      if u.op in GroupOp.Declaration: self.fixed[i] = self.copy(u, u.src)
    names = {u.arg for u in self.uops if u.op is Ops.DEFINE_LOCAL}
    for j in sorted(self.carried | self.shared):
      dt = self.uops[j].dtype
      name = f"carry{j}"
      while name in names: name += "_"
      self.carry[j] = self.b.local_buf(dt.scalar(), dt.count * self.threads, name)
    self.zero = zero = self.b.const(0, INDEX_DTYPE)
    loops = []
    for i, u in enumerate(self.uops):
      if u.op is Ops.SPECIAL and u.arg[1] == 1: self.fixed[i] = zero
    for name in LOOP_ORDER[:3]:
      if self.sizes.get(name, 1) > 1:
        i = next(k for k, u in enumerate(self.uops) if u.op is Ops.SPECIAL and u.arg[0] == name)
        self.fixed[i] = r = self.b.range(zero, self.size(name))
        loops.append(r)
    self.items(self.tree)
    for r in reversed(loops): self.b.end_range(r)
    return self.b.build(check=False)
