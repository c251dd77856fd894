"""Race freedom, proven before a run: the buffers on which no two unordered threads ever touch one element.

Two threads race on an element when both touch it, one of them writes, and no BARRIER of their workgroup orders them
(memory.py's race rule). On a buffer `race_free` clears, that cannot happen, and the emulator keeps no record of who
touched what. The proof is a sufficient condition; a buffer it cannot clear is tracked while the program runs.

  phases   A local's accesses fall into phases, the stretches between two BARRIERs, when every BARRIER stands outside
           every block: each thread of a workgroup then passes the same barriers in program order, so accesses of
           different phases are ordered, and only the accesses of one phase can race. A global's accesses are one
           phase (a barrier never orders threads of different workgroups), and so are a local's when a BARRIER
           stands inside a loop.
  stores   A phase with no STORE has nothing to race.
  owner    Otherwise every access of the phase must have an affine index (refimpl/emulator/indexing.py) with the same
           coefficients on the thread axes that share the memory (all six for a global; lidx0-2 for a local, whose
           workgroups have their own blocks), and those coefficients must separate the threads (Grid.separated) with
           every other term of every access (loop counters, the other axes, the constant, the vector's width) inside
           one stride. Then an element determines the thread that touches it.
  copies   Accesses that are one access shifted by constants forming a lattice (`lattice`: tinygrad's upcast stores
           along one or more axes) take each of its steps as one more term instead of spanning the whole hull.
  pins     A thread axis that the gates around every access of the phase fix to one value (`pins`: tinygrad's
           `if (lidx0 == 0)` around a reduction's final store) has one thread on it: its coefficient does not matter.
"""
from __future__ import annotations

import math

import numpy as np

from refimpl.dtype import to_np
from refimpl.emulator.alu import run_alu, run_conversion
from refimpl.emulator.indexing import AXIS, FULL, Grid, IntInfo, thread_form
from refimpl.ir.ops import GroupOp, Ops
from refimpl.ir.program import Program

GATE_COMBINATIONS = 4096  # the most combinations of thread ids `pins` evaluates a gate on

Access = tuple[bool, int, int, int]  # (is a STORE, its INDEX's index uop, elements per access, the LOAD / STORE uop)


def accesses(program: Program) -> dict[int, list[Access]]:
  """buffer uop -> an Access for every LOAD and STORE of it, in program order."""
  uops, out = program.uops, {}
  for i, u in enumerate(uops):
    if u.op not in (Ops.LOAD, Ops.STORE): continue
    buf, idx = uops[u.src[0]].src
    count = u.dtype.count if u.op is Ops.LOAD else uops[u.src[1]].dtype.count
    out.setdefault(buf, []).append((u.op is Ops.STORE, idx, count, i))
  return out

def phases(program: Program) -> list[int] | None:
  """The phase of every uop: how many BARRIERs come before it; None when a BARRIER stands inside a block."""
  depth, passed, out = 0, 0, []
  for u in program.uops:
    if u.op in GroupOp.BlockStart: depth += 1
    elif u.op in GroupOp.BlockEnd: depth -= 1
    elif u.op is Ops.BARRIER:
      if depth: return None
      passed += 1
    out.append(passed)
  return out

def gates(program: Program) -> dict[int, list[int]]:
  """LOAD / STORE uop -> the gates it runs under: the conditions of the IFs around it, and its own gate."""
  uops, opened, out = program.uops, [], {}
  for i, u in enumerate(uops):
    if u.op in GroupOp.BlockStart: opened.append(u.src[0] if u.op is Ops.IF else None)
    elif u.op in GroupOp.BlockEnd: opened.pop()
    elif u.op in (Ops.LOAD, Ops.STORE):
      out[i] = [g for g in opened if g is not None] + ([u.src[2]] if len(u.src) == 3 else [])
  return out

def _gate_graph(program: Program, gate: int) -> list[int] | None:
  """The uops a gate is computed from, in program order, where those are constants, thread ids, ALU ops and CASTs on
  scalars only (else None: the gate depends on data, a loop or a variable)."""
  uops, seen, todo = program.uops, set(), [gate]
  while todo:
    j = todo.pop()
    if j in seen: continue
    u = uops[j]
    if u.dtype.count != 1 or u.op not in (Ops.CONST, Ops.SPECIAL, Ops.CAST, *GroupOp.ALU): return None
    seen.add(j)
    todo.extend(u.src)
  return sorted(seen)

def pins(program: Program, gate: int) -> dict[int, int]:
  """The thread axes a gate fixes: axis id -> the one value of that thread id on which the gate can be true. The gate
  is evaluated with the ALU's own rules on every combination of the thread ids it reads (GATE_COMBINATIONS at most);
  a gate that reads anything else, or that some combination makes undefined or loose, fixes nothing."""
  uops, graph = program.uops, _gate_graph(program, gate)
  if graph is None: return {}
  ids = [j for j in graph if uops[j].op is Ops.SPECIAL]
  sizes = tuple(uops[j].arg[1] for j in ids)
  if not ids or math.prod(sizes) > GATE_COMBINATIONS: return {}
  grid = np.indices(sizes, dtype=np.int32).reshape(len(ids), -1)
  values: dict[int, np.ndarray] = {}
  with np.errstate(all="ignore"):
    for j in graph:
      u = uops[j]
      if u.op is Ops.SPECIAL: values[j] = grid[ids.index(j)]
      elif u.op is Ops.CONST: values[j] = np.array([u.arg], dtype=to_np(u.dtype))
      else:
        xs = [values[s] for s in u.src]
        if u.op is Ops.CAST: out = run_conversion(Ops.CAST, xs[0], uops[u.src[0]].dtype, u.dtype)
        else: out = run_alu(u.op, uops[u.src[-1]].dtype, *xs)
        if (out.undefined is not None and out.undefined.any()) or (out.loose is not None and out.loose.any()): return {}
        values[j] = out.values
  true = np.broadcast_to(values[gate], (grid.shape[1],)).reshape(sizes)
  fixed = {}
  for k, j in enumerate(ids):
    held = np.flatnonzero(true.any(axis=tuple(a for a in range(len(ids)) if a != k)))
    if len(held) == 1: fixed[AXIS[uops[j].arg[0]]] = int(held[0])
  return fixed

def race_free(program: Program, infos: dict[int, IntInfo], grid: Grid) -> set[int]:
  """The buffers (DEFINE_GLOBAL / DEFINE_LOCAL uop indices) on which no two unordered threads can touch one element
  (the module docstring's rules). A phase's pins are looked for only where the owner rule fails without them."""
  free, table = set(), accesses(program)
  phase = phases(program) if any(u.op is Ops.DEFINE_LOCAL for u in program.uops) else None  # locals only
  guards: dict[int, list[int]] | None = None  # gates(program), made when a phase needs its pins
  fixed: dict[int, dict[int, int]] = {}  # gate -> its pins (a gate often guards several accesses)
  def pinned(at: int) -> dict[int, int]:
    for g in guards[at]:
      if g not in fixed: fixed[g] = pins(program, g)
    return _joined([fixed[g] for g in guards[at]])
  for i, u in enumerate(program.uops):
    if u.op not in (Ops.DEFINE_GLOBAL, Ops.DEFINE_LOCAL): continue
    local = u.op is Ops.DEFINE_LOCAL
    split: dict[int, list[Access]] = {}
    for a in table.get(i, []): split.setdefault(phase[a[3]] if local and phase is not None else 0, []).append(a)
    shared = range(3, 6) if local else range(6)
    owned = True
    for group in split.values():
      if _owned(group, infos, grid, shared, {}): continue
      if guards is None: guards = gates(program)
      if not _owned(group, infos, grid, shared, {a[3]: pinned(a[3]) for a in group}):
        owned = False
        break
    if owned: free.add(i)
  return free

def _joined(fixes: list[dict[int, int]]) -> dict[int, int]:
  """The axes several gates fix together (one pin per axis; gates that fix one axis to two values are never all true,
  and pin it to the first, which is sound: such an access never runs)."""
  out: dict[int, int] = {}
  for f in fixes:
    for axis, value in f.items(): out.setdefault(axis, value)
  return out

def _owned(group: list[Access], infos: dict[int, IntInfo], grid: Grid, shared: range,
           pinned: dict[int, dict[int, int]]) -> bool:
  """Whether one phase's accesses to a buffer leave every element to one thread: no store, or the owner rule with
  the axes every access is pinned to on one value taken as one thread (module docstring; `pinned`: access uop -> its
  pins, none where it is missing)."""
  if not any(store for store, _, _, _ in group): return True
  forms = [infos.get(idx, FULL).aff for _, idx, _, _ in group]
  if any(f is None for f in forms): return False
  parts = [thread_form(f) for f in forms]
  first = pinned.get(group[0][3], {})
  one = {d: v for d, v in first.items() if all(pinned[a[3]].get(d) == v for a in group)}  # axes of one thread
  owners = [d for d in shared if d not in one]
  coef = tuple(c if d in owners else 0 for d, c in enumerate(parts[0][0]))
  if any(any(p[0][d] != coef[d] for d in owners) for p in parts): return False
  hulls = []  # per access: (its constant, its lowest and highest offset from it)
  for (tc, loops, const), (_, _, count, _) in zip(parts, group):
    const += sum(tc[d] * v for d, v in one.items())
    spans = [(min(0, c * (n - 1)), max(0, c * (n - 1))) for d, (c, n) in enumerate(zip(tc, grid.sizes))
             if d not in shared and d not in one]
    spans += [(min(c * infos[r].lo, c * infos[r].hi), max(c * infos[r].lo, c * infos[r].hi)) for r, c in loops]
    hulls.append((const, sum(s[0] for s in spans), sum(s[1] for s in spans) + count - 1))
  lo, hi = min(c + a for c, a, _ in hulls), max(c + b for c, _, b in hulls)
  return grid.separated(coef, hi - lo + 1, owners) or _copies_separated(grid, coef, owners, hulls)

def _copies_separated(grid: Grid, coef: tuple[int, ...], owners: list[int], hulls: list[tuple[int, int, int]]) -> bool:
  """The owner rule for accesses that are copies of one access shifted by constants that form a lattice (tinygrad's
  upcast stores: out[base + 0], out[base + 64], ..., out[base + 4096], ...: `lattice`): each of its steps is one more
  mixed-radix term, instead of the whole hull."""
  if len({(a, b) for _, a, b in hulls}) != 1: return False
  steps = lattice([c for c, _, _ in hulls])
  if not steps: return False
  _, a, b = hulls[0]
  return grid.separated(coef, b - a + 1, owners, steps)

def lattice(consts: list[int]) -> list[tuple[int, int]] | None:
  """(step, count) of arithmetic progressions whose sums, added to the least constant, are exactly the distinct
  `consts`: each progression's step is the least constant its predecessors do not reach. None where no such product
  of progressions (of two or more members each) gives them."""
  base = min(consts)
  rest = {c - base for c in consts}
  reached, steps = {0}, []
  while len(reached) < len(rest):
    step = min(rest - reached)
    n = 1
    while all(r + step * n in rest for r in reached): n += 1
    if n == 1: return None
    reached = {r + step * k for r in reached for k in range(n)}
    steps.append((step, n))
  return steps if reached == rest else None
