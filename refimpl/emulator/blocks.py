"""Blocks: RANGE and IF with their ends, and loops run as lanes with the folds of their accumulator chains.

A block runs its body under its own control (Machine.block; state.py's "Control rule"): IF on the lanes whose gate is
true, RANGE once per counter value, in order.

Loops as lanes. A RANGE with bounds that are one exact number on every lane, whose iterations loops.py proves cannot
observe each other (parallel), or observe each other only through accumulator chains (scan), runs all its iterations
at once: the grid gets one more axis, so each lane becomes one lane per iteration (lane-major, or iteration-major
for a scan of computed terms: loops.LaneLoop, Grid.extend; race tracking still records threads). A value from before
the loop is repeated for the loop's lanes; the body's values die with the loop. A scan's chains are not run in the
body: folds.fold applies them afterwards in the sequential order, and ASSIGN's rule writes the result; a MUL term used
by its chain only is made by the fold too, one iteration at a time, when its operands are exact (Step.product);
the accumulators of an outer-product tile (tinygrad's upcast matmul: loops.OuterProduct) fold together, reading their
operands from memory itself, and skipping the loads that would read them, where those loads are plain and in bounds in
memory the program never stores to (loops.MemoryOperands, `_memory_tile`; their own check decides). A loop whose
accumulators are carried by the chains of the inner loop its body ends with (loops._nested_loop) runs as lanes with
it, each on a lane-major axis (`_nested_body`), and its fold runs over both loops' iterations in their order.
What the sequential rule would report is reported unchanged: every finding is keyed by its place in the sequential
order ((loop, counter) of each RANGE around it, the uop, the thread), a permissive run lists its events in that order
and describes each by its first lane in it, and strict mode raises, when the loop ends, the first finding, with the
count of its own iteration.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from refimpl.emulator import settings
from refimpl.emulator.access import plain_site
from refimpl.emulator.certainty import EXACT, carry, join
from refimpl.emulator.compute import set_register
from refimpl.emulator.folds import ROW_STEPS_FROM, Product, chain_ufunc, fold, fold_outer, fold_ufunc, iterations
from refimpl.emulator.loops import LaneLoop, Scan, Step
from refimpl.emulator.memory import Memory
from refimpl.emulator.plan import Kind
from refimpl.emulator.state import Control, Handler, Machine, control_level
from refimpl.emulator.values import LAZY, Value, as_python, carried_levels, on_lane, ufunc_value, with_levels
from refimpl.ir import UOp

# below this many outer lanes, scans fold side by side (`_fold_together`): numpy's per-call cost outweighs copying their
# operands into one stack (seven chains of 24 steps: 0.55-0.8x the time at 128 to 768 lanes, 1.2-1.7x at 1024 to 16384)
SIDE_BY_SIDE_LANES = 1024

def _skip(m: Machine, i: int, u: UOp) -> None: pass
def _end_block(m: Machine, i: int, u: UOp) -> None:
  """ENDRANGE / ENDIF: the end of the block its source opened (RANGE and IF run their bodies)."""

def _range(m: Machine, i: int, u: UOp) -> int:
  """RANGE: the body runs once per counter value r = start, start + 1, ..., end - 1, in order. Where the bounds differ
  per lane, r runs from the smallest start to the largest end and a lane is active in the iterations in its own
  [start, end). A lane whose bounds are undefined skips the loop, and every accumulator the body assigns becomes
  undefined on it; a lane whose bounds are loose runs its own iterations, and what the body stores or assigns on it
  becomes loose (control rule). A loop that loops.py proves may run as lanes runs its iterations at once (in chunks
  that fit LANE_MEMORY), with the same results and findings as the sequential order."""
  end = m.plan.block_end[i]
  if i in m.plan.fixed_bounds: s, e = m.plan.fixed_bounds[i]
  else:
    s, e = m.value_of(u.src[0]), m.value_of(u.src[1])
    for bound, j in ((s, u.src[0]), (e, u.src[1])):
      m.use(i, "loop bound", m.undefined_here(bound), lambda lane: (on_lane(s.v, lane), on_lane(e.v, lane)), j)
  loop = m.plan.lane_loops.get(i)
  exact = all(x.v.shape[0] == 1 and x.cert is None for x in (s, e))
  if settings.LOOPS_AS_LANES and loop is not None and exact and m.control.phantom is None and int(e.v[0]) - int(s.v[0]) >= 2:
    lane = m.control.grid.lanes * m.plan.lane_bytes * (1 if loop.nested is None else _inner_trips(m, loop))
    per = settings.LANE_MEMORY // lane
    if per >= 2:
      per = max(2, min(per, settings.LOOP_CHUNK_MEMORY // lane))
      _run_in_chunks(m, i, loop, int(s.v[0]), int(e.v[0]), per)
      return end + 1
  ctl = join(control_level(s, m.control.active), control_level(e, m.control.active))
  m.spoil(i, ctl)
  def iteration(r: int, active: np.ndarray | None) -> None:
    m.loops[i], m.env[i] = r, LAZY
    m.block(i, active, ctl=ctl)
  if s.v.shape[0] == 1 and e.v.shape[0] == 1 and ctl is None:
    for r in range(int(s.v[0]), int(e.v[0])): iteration(r, m.control.active)
    return end + 1
  n = m.control.grid.lanes
  sv, ev = (np.broadcast_to(x.v, (n,)).astype(np.int64) for x in (s, e))
  live, _ = m.narrow(np.ones(n, dtype=bool), ctl)
  live = np.broadcast_to(live, (n,))
  if not live.any(): return end + 1
  for r in range(int(sv[live].min()), int(ev[live].max())):
    act = live & (sv <= r) & (r < ev)
    if act.any(): iteration(r, act)
  return end + 1

def _run_as_lanes(m: Machine, i: int, loop: LaneLoop, start: int, n: int) -> None:
  """Iterations start .. start+n-1 of RANGE i at once: a grid axis of n more lanes per lane, then the folds of the
  accumulators it carries. Strict mode raises, at the end, the first undefined behaviour in the sequential order."""
  if n == 1:
    m.loops[i], m.env[i] = start, LAZY
    m.block(i, m.control.active)
    return
  lanes = m.control.grid.lanes
  from_memory, terms = _lanes_body(m, i, loop, start, n)
  if loop.nested is not None: n *= _inner_trips(m, loop)  # the fold runs over both loops' iterations (loops._nested_loop)
  m.regions.append((i, {}))  # the folds' findings join the loop's
  try:
    tiled = set() if loop.outer is None else _fold_tile(m, loop, from_memory if from_memory is not None
                                                        else _tile_steps(m, loop, terms, n, lanes))
    tiled |= _fold_together(m, loop, [k for k in range(len(loop.scans)) if k not in tiled], terms, n, lanes)
    for k, (scan, ts) in enumerate(zip(loop.scans, terms)):
      if k not in tiled: _fold(m, i, scan, ts, start, n, lanes, loop.iteration_major)
  finally: m.regions.pop()
  if m.strict and not m.regions and not m.chunked: m.raise_first()

def _lanes_body(m: Machine, i: int, loop: LaneLoop, start: int, n: int) -> tuple[list[Product] | None, list]:
  """The body of RANGE i for iterations start .. start+n-1 at once, on a grid of n more lanes per lane: the tile's
  steps where it folds from memory (`_memory_tile`, else None) and each scan's terms (`_chain_term`; None for a scan
  the tile folds). A nested loop (LaneLoop.nested) runs its inner loop's body on its own axis too (`_nested_body`),
  whose terms are these."""
  outer = m.control
  end, lanes = m.plan.block_end[i], outer.grid.lanes
  grid = outer.grid.extend(n, loop.iteration_major)
  def rep(mask: np.ndarray | None) -> np.ndarray | None: return None if mask is None or mask.shape[0] == 1 else grid.spread(mask)
  handlers, nested = _skipping(m, outer.handlers, loop.folded), []
  if loop.nested is not None:
    handlers = list(handlers)
    handlers[loop.nested] = lambda m, j, u: _nested_body(m, j, m.plan.lane_loops[j], nested)
  m.control = Control(grid, handlers, active=rep(outer.active), real=rep(outer.real), level=rep(outer.level))
  m.axes[i] = (len(m.control.grid.sizes) - 1, start)
  m.env[i] = LAZY
  m.regions.append((i, {}))
  try:
    from_memory = None if loop.outer is None or loop.outer.memory is None else _memory_tile(m, loop, lanes)
    if from_memory is not None:
      m.control = m.control._replace(handlers=_skipping(m, outer.handlers, loop.folded | loop.outer.memory.ops))
    m.run(i + 1, end)
    skipped = set(loop.outer.scans) if from_memory is not None else set()
    terms = nested if loop.nested is not None else [None if k in skipped else [_chain_term(m, step) for step in scan.steps]
                                                     for k, scan in enumerate(loop.scans)]
  finally:
    _end_region(m, i, end)
    del m.axes[i]
    m.settle_origins()
    m.control = outer
  return from_memory, terms

def _end_region(m: Machine, i: int, end: int) -> None:
  """The end of block i's body run on lanes of its own (a loop run as lanes, an IF's box): its values die with it
  (loops.py; the scope rule), and the values from before it that it took on its lanes are put back."""
  _, restore = m.regions.pop()
  m.env[i + 1:end] = [None] * (end - i - 1)
  for j, x in restore.items(): m.env[j] = x

def _nested_body(m: Machine, j: int, inner: LaneLoop, terms: list) -> int:
  """RANGE j, the inner loop of a nested loop run as lanes: its body on one more lane-major axis of all its
  iterations, its scans' terms put in `terms` for the outer loop's fold (never folded here, nor from memory)."""
  s, e = (int(b.v[0]) for b in m.plan.fixed_bounds[j])
  _, made = _lanes_body(m, j, _lane_major(inner), s, e - s)
  terms.extend(made)
  return m.plan.block_end[j] + 1

def _lane_major(loop: LaneLoop) -> LaneLoop:
  """The loop as the inner loop of a nested one runs: lane-major, its scans folded one by one (no tile)."""
  return LaneLoop(loop.scans, loop.folded, False, None, None)

def _inner_trips(m: Machine, loop: LaneLoop) -> int:
  """The iterations of a nested loop's inner loop (constant bounds: loops._nested_loop); 1 for any other loop."""
  if loop.nested is None: return 1
  s, e = m.plan.fixed_bounds[loop.nested]
  return int(e.v[0]) - int(s.v[0])

def _run_in_chunks(m: Machine, i: int, loop: LaneLoop, s: int, e: int, per: int) -> None:
  """Iterations s .. e-1 of loop i as lanes, `per` at a time, or more (`_memory_chunk`) while its tile folds from
  memory: of what that needs, only the accumulators' levels can change from one chunk to the next (the loads' memory
  is never stored to, and they are in bounds on the whole range), so a chunk after which they have levels is followed
  by chunks of `per`."""
  big, start = _memory_chunk(m, i, loop, s, e, per), s
  while start < e:
    n = min(big if big == per or _tile_accumulators(m, loop, m.control.grid.lanes) is not None else per, e - start)
    _run_as_lanes(m, i, loop, start, n)
    start += n

def _memory_chunk(m: Machine, i: int, loop: LaneLoop, s: int, e: int, per: int) -> int:
  """The iterations per chunk of loop i over [s, e): where its tile folds from memory on the whole range
  (`_memory_sites` on its grid, so on every chunk's), as many as LOOP_CHUNK_MEMORY holds of what the body still
  computes then (Plan.tile_lane_bytes; the fold's own arrays do not grow with the chunk); else `per`."""
  if loop.outer is None or loop.outer.memory is None: return per
  outer, lanes = m.control, m.control.grid.lanes
  m.control = outer._replace(grid=outer.grid.extend(e - s, loop.iteration_major))
  m.axes[i] = (len(m.control.grid.sizes) - 1, s)
  try: ready = _memory_sites(m, loop, lanes) is not None
  finally:
    del m.axes[i]
    m.control = outer
  return max(per, settings.LOOP_CHUNK_MEMORY // (lanes * m.plan.tile_lane_bytes[i])) if ready else per

def _skipping(m: Machine, handlers: Sequence[Handler], skip: frozenset[int]) -> Sequence[Handler]:
  """The handler table with the ops in `skip` (the ones a loop run as lanes leaves to its folds) doing nothing; made
  once per table and `skip` (Plan.skipping keeps the last one made for each `skip`)."""
  if not skip: return handlers
  made = m.plan.skipping.get(skip)
  if made is None or made[0] is not handlers:
    made = m.plan.skipping[skip] = (handlers, [_skip if j in skip else h for j, h in enumerate(handlers)])
  return made[1]

def _chain_term(m: Machine, step: Step) -> Value | Product:
  """A chain step's term at the end of its loop's body: its value; for a product the fold makes itself (Step.product),
  its exact operands as a Product, or, when an operand has levels, its value made now by its own handler."""
  if step.product is None: return m.value_of(step.term)
  x, y = (m.value_of(j) for j in step.product)
  if x.cert is None and y.cert is None: return Product(m.plan.ufuncs[step.term], x.v, y.v)
  m.handlers[step.term](m, step.term, m.plan.uops[step.term])  # a folded op: never inside a stretch
  return m.value_of(step.term)

def _fold(m: Machine, i: int, scan: Scan, terms: list[Value | Product], start: int, n: int, lanes: int,
          iteration_major: bool) -> None:
  """The register of a scan's accumulator after n iterations: folds.fold over the terms of every iteration, in order,
  on the outer lanes that really run (`_running`); levels as the certainty rule says for a chain of ALU ops, then
  ASSIGN's rule on the active lanes."""
  if not scan.steps: return
  keep = _running(m, lanes)
  if keep is not None and keep.size == 0: return  # no lane runs: ASSIGN keeps every register
  acc = m.env[scan.acc]
  tail = acc.v.shape[1:]
  def rows(a: np.ndarray) -> np.ndarray:
    """A value as (iteration, running lane, *vector)."""
    r = iterations(a, n, lanes, iteration_major)
    return r if keep is None else r[:, keep]
  def chain(arrs: list[np.ndarray | None], fill: Any = EXACT) -> np.ndarray | None:
    """Each step's per-lane arrays as one (running lane, iteration * step, *vector) array, None when all are None."""
    if all(a is None for a in arrs): return None
    full = [rows(np.broadcast_to(fill, (1,) + tail) if a is None else a) for a in arrs]
    return np.stack(full, axis=2).swapaxes(0, 1).reshape((-1, n * len(arrs)) + tail)
  def every_step(levels: np.ndarray | None) -> np.ndarray | None: return None if levels is None else levels.max(axis=1)
  def spread(values: np.ndarray, cert: np.ndarray | None) -> Value:
    """A fold's result on the running lanes as a register of every lane (the others keep theirs: ASSIGN's rule)."""
    if keep is None: return with_levels(values, cert)
    full = np.array(np.broadcast_to(acc.v, (lanes,) + tail))
    full[keep] = values
    if cert is None: return Value(full)
    levels = np.full(full.shape, EXACT, cert.dtype)
    levels[keep] = cert
    return with_levels(full, levels)
  start_acc = acc.v[keep] if keep is not None and acc.v.shape[0] == lanes else acc.v  # every lane's, or one row for all
  dt = m.plan.uops[scan.steps[0].node].dtype.scalar()
  fn = chain_ufunc(scan.op, dt)
  if fn is not None and acc.cert is None and all(isinstance(t, Product) or t.cert is None for t in terms):  # exact operands
    views = [Product(t.fn, rows(t.a), rows(t.b)) if isinstance(t, Product) else rows(t.v) for t in terms]
    done = fold_ufunc(fn, start_acc, views)
    set_register(m, scan.acc, spread(done.values, done.cert))
    return
  terms = [ufunc_value(t.fn(t.a, t.b)) if isinstance(t, Product) else t for t in terms]
  lane_terms = chain([t.v for t in terms])
  start_acc = np.broadcast_to(start_acc, lane_terms.shape[:1] + tail)
  out = fold(scan.op, dt, start_acc, lane_terms, [step.acc_first for step in scan.steps])
  if out.undefined_step is not None:
    s, lane, ub, reason, operands = out.undefined_step
    lane = lane if keep is None else int(keep[lane])
    m.loops[i] = start + s // len(scan.steps)
    node, found = scan.steps[s % len(scan.steps)].node, (ub, reason, tuple(map(as_python, operands)))
    if ub.deferred: m.defer(node, np.array([lane]), lambda k: found)
    else: m.ub(node, "alu", np.array([lane]), lambda k: found)
  folded = spread(out.values, join(carry(every_step(chain([t.cert for t in terms]))), out.cert))
  set_register(m, scan.acc, with_levels(folded.v, join(carried_levels(acc), folded.cert)))

def _fold_together(m: Machine, loop: LaneLoop, ks: list[int], terms: list, n: int, lanes: int) -> set[int]:
  """The scans among `ks` that fold side by side, as one fold_ufunc over their lanes stacked (K x L lanes: each lane
  keeps its own chain, in its own order), where at least two have one chain ufunc (folds.chain_ufunc), one dtype and
  one number of steps, exact scalar accumulators and exact terms, every lane runs, and the lanes are fewer than
  SIDE_BY_SIDE_LANES (tinygrad's upcast reductions whose accumulators make no tile: four 4x4 tiles in one loop, one
  product each); which they are. One numpy call per step and iteration instead of one per accumulator."""
  if len(ks) < 2 or lanes >= SIDE_BY_SIDE_LANES or _running(m, lanes) is not None: return set()
  groups: dict[tuple, list[int]] = {}
  for k in ks:
    scan, acc = loop.scans[k], m.env[loop.scans[k].acc]
    if not scan.steps or acc.cert is not None or acc.v.ndim != 1: continue
    if not all(isinstance(t, Product) or t.cert is None for t in terms[k]): continue
    dt = m.plan.uops[scan.steps[0].node].dtype.scalar()
    if chain_ufunc(scan.op, dt) is not None: groups.setdefault((scan.op, dt, len(scan.steps)), []).append(k)
  done: set[int] = set()
  def rows(a: np.ndarray) -> np.ndarray: return iterations(a, n, lanes, loop.iteration_major)
  for (op, dt, steps), group in groups.items():
    if len(group) < 2: continue
    accs = np.concatenate([np.broadcast_to(m.env[loop.scans[k].acc].v, (lanes,)) for k in group])
    out = fold_ufunc(chain_ufunc(op, dt), accs, [_stacked([terms[k][s] for k in group], rows) for s in range(steps)])
    for j, k in enumerate(group):
      part = slice(j * lanes, (j + 1) * lanes)
      set_register(m, loop.scans[k].acc, with_levels(out.values[part], None if out.cert is None else out.cert[part]))
    done.update(group)
  return done

def _stacked(ts: list[Value | Product], rows: Any) -> np.ndarray | Product:
  """One step's terms of several scans (each (n, L) as `rows` gives it) as one (n, K x L) operand: a Product of the
  stacked operands where every term is a product of one ufunc, else the stacked values."""
  if all(isinstance(t, Product) and t.fn is ts[0].fn for t in ts):
    a, b = (_side_by_side([rows(getattr(t, x)) for t in ts]) for x in "ab")
    return Product(ts[0].fn, a.reshape(a.shape[0], -1), b.reshape(b.shape[0], -1))
  vs = _side_by_side([rows(t.fn(t.a, t.b)) if isinstance(t, Product) else rows(t.v) for t in ts])
  return vs.reshape(vs.shape[0], -1)

def _running(m: Machine, lanes: int) -> np.ndarray | None:
  """The outer lanes that really run (Control.real) as their indices where some do not, None where all do: a fold
  runs on those alone, as ASSIGN's rule keeps the others' registers and they cannot meet undefined behaviour."""
  real = m.control.real
  if real is None or real.shape[0] != lanes or real.all(): return None
  return np.flatnonzero(real)

def _tile_accumulators(m: Machine, loop: LaneLoop, lanes: int) -> list[Value] | None:
  """The registers of loop.outer's tile when it folds at once (folds.fold_outer): every one an exact scalar, and the
  lanes wide; else None (each scan folds on its own, `_fold`)."""
  if loop.outer is None or lanes < ROW_STEPS_FROM: return None
  accs = [m.env[loop.scans[k].acc] for k in loop.outer.scans]
  return None if any(a.cert is not None or a.v.ndim != 1 for a in accs) else accs

def _tile_steps(m: Machine, loop: LaneLoop, terms: list[list[Value | Product] | None], n: int,
                lanes: int) -> list[Product] | None:
  """The steps of loop.outer's tile for fold_outer, from the terms the body made, when it folds at once
  (`_tile_accumulators`) and every term is a Product; else None."""
  tile = loop.outer
  if _tile_accumulators(m, loop, lanes) is None: return None
  ts = [terms[k] for k in tile.scans]
  if not all(isinstance(t, Product) for row in ts for t in row): return None
  rows, cols = len(tile.steps[0].rows), len(tile.steps[0].cols)
  def operand(p: Product, first: bool) -> np.ndarray: return iterations(p.a if first else p.b, n, lanes, loop.iteration_major)
  steps = []
  def term(k: int, s: int) -> Product: return ts[k][tile.position(k, s)]  # tile step s in the chain at position k
  for s, step in enumerate(tile.steps):
    x = _side_by_side([operand(term(r * cols, s), step.row_first[r * cols]) for r in range(rows)])
    y = _side_by_side([operand(term(c, s), not step.row_first[c]) for c in range(cols)])
    steps.append(Product(term(0, s).fn, x, y))
  return steps

def _memory_sites(m: Machine, loop: LaneLoop, lanes: int) -> dict[int, tuple[Memory, tuple[tuple[int, ...], int]]] | None:
  """Where each LOAD of loop.outer's tile (loops.MemoryOperands) reads, as access.plain_site gives it, when the tile
  folds at once (`_tile_accumulators`) and every one of them is plain and in bounds in a memory the program never
  stores to: what those loads would read, and they would find nothing. None elsewhere. Called with the loop's grid."""
  tile = loop.outer
  if tile is None or tile.memory is None or _tile_accumulators(m, loop, lanes) is None: return None
  sites = {}
  for load in tile.memory.loads:
    site = plain_site(m, load)
    if site is None or site[0].mutable: return None
    sites[load] = site
  return sites

def _memory_tile(m: Machine, loop: LaneLoop, lanes: int) -> list[Product] | None:
  """The steps of loop.outer's tile for fold_outer read from memory itself where `_memory_sites` finds its loads (the
  body then skips them): each side of a step (n, k, *G) over the grid's axes, the loop's first; None elsewhere."""
  sites = _memory_sites(m, loop, lanes)
  if sites is None: return None
  grid = m.control.grid
  axis = grid.order.index(len(grid.sizes) - 1)
  perm = (axis, *(d for d in range(len(grid.shape)) if d != axis))
  shape = tuple(grid.shape[d] for d in perm)
  def view(flat: np.ndarray, coef: tuple[int, ...], off: int) -> np.ndarray:
    steps = grid.strides(coef)
    return np.ndarray(shape, flat.dtype, flat, off * flat.itemsize, tuple(steps[d] * flat.itemsize for d in perm))
  def side(elements: tuple[tuple[int, int], ...]) -> np.ndarray:
    """Element k of each (LOAD, k) on every lane: one view where they are one memory's, one stride apart."""
    at = [(sites[load][0].data, sites[load][1][0], sites[load][1][1] + k) for load, k in elements]
    flat, coef, off = at[0]
    gap = at[1][2] - off if len(at) > 1 else 0
    if all(f is flat and c == coef and o == off + j * gap for j, (f, c, o) in enumerate(at)):
      first = view(flat, coef, off)
      return np.ndarray((shape[0], len(at)) + shape[1:], flat.dtype, flat, off * flat.itemsize,
                        (first.strides[0], gap * flat.itemsize) + first.strides[1:])
    return np.stack([view(*place) for place in at], axis=1)
  tile = loop.outer
  chain = loop.scans[tile.scans[0]].steps
  muls = [m.plan.ufuncs[chain[tile.position(0, s)].term] for s in range(len(tile.steps))]  # one rule across the tile
  return [Product(mul, side(rows), side(cols)) for mul, (rows, cols) in zip(muls, tile.memory.sources)]

def _fold_tile(m: Machine, loop: LaneLoop, steps: list[Product] | None) -> set[int]:
  """The folds of loop.outer's tile at once (folds.fold_outer) over `steps` (`_tile_steps`, `_memory_tile`; None:
  they fold one by one); the same registers `_fold` would give each. Returns the scans it folded."""
  if steps is None: return set()
  tile = loop.outer
  scans = [loop.scans[k] for k in tile.scans]
  lanes = m.control.grid.lanes
  fn = chain_ufunc(scans[0].op, m.plan.uops[scans[0].steps[0].node].dtype.scalar())
  done = fold_outer(fn, [np.broadcast_to(m.env[scan.acc].v, (lanes,)) for scan in scans], steps, tile.parts)
  for k, scan in enumerate(scans):
    set_register(m, scan.acc, with_levels(done.values[k], None if done.cert is None else done.cert[k]))
  return set(tile.scans)

def _side_by_side(arrays: list[np.ndarray]) -> np.ndarray:
  """(n, *G) arrays as one (n, k, *G) array: a view where they are one array's equally spaced rows (the GEPs of a
  vector LOAD, which lays each element out across the lanes; the rows of a tile in memory), else a copy."""
  first = arrays[0]
  at = [a.__array_interface__["data"][0] for a in arrays]
  step = at[1] - at[0] if len(at) > 1 else 0
  if first.base is not None and all(a.base is first.base and a.strides == first.strides and a.shape == first.shape
                                    and at[k] == at[0] + k * step for k, a in enumerate(arrays)):
    return np.lib.stride_tricks.as_strided(first, (first.shape[0], len(arrays)) + first.shape[1:],
                                           (first.strides[0], step) + first.strides[1:], writeable=False)
  return np.stack(arrays, axis=1)

def _if(m: Machine, i: int, u: UOp) -> int:
  """IF: the body runs on the active lanes whose gate is true (not at all when there are none). A lane whose gate is
  loose or undefined and false runs it as a phantom lane: it writes nothing, but the elements it would store become
  loose (undefined), and so does every accumulator the block assigns (control rule)."""
  g = m.value_of(u.src[0])
  m.use(i, "condition", m.undefined_here(g), lambda lane: (on_lane(g.v, lane),), u.src[0])
  ctl = control_level(g, m.control.active)
  act, lost = m.narrow(g.v, ctl)
  if ctl is not None and ctl.any():
    m.spoil(i, ctl)
    phantom = lost | ((ctl != EXACT) & ~g.v)  # lanes that skip the block but might not
    run = np.broadcast_to(act | phantom, (m.control.grid.lanes,))
    if run.any(): m.block(i, run, phantom, ctl)
    return m.plan.block_end[i] + 1
  if act.shape[0] == 1:
    if act[0]: m.block(i, m.control.active)
  elif act.any() and not _in_box(m, i, act): m.block(i, act)
  return m.plan.block_end[i] + 1

def _in_box(m: Machine, i: int, act: np.ndarray) -> bool:
  """Runs the body of IF i on the box of the grid whose lidx ids its gate fixes (Plan.if_pins, Grid.pinned) instead of
  on every lane, where every lane runs the code around it and it runs no loop as lanes; whether it did. `act`, where
  the gate is true, lies inside the box (the gate is exact and true nowhere else: ownership.pins), so the body's lanes
  outside it would all be inactive: what it computes, stores and finds is the same. Values from before it are taken on
  the box's lanes (value_of, as a loop run as lanes repeats them); the block's own die with it (the scope rule)."""
  fixed, outer = m.plan.if_pins.get(i), m.control
  if fixed is None or not settings.IF_BOXES or outer.grid.inner != 1: return False
  if outer.active is not None or outer.level is not None or outer.phantom is not None: return False
  box = outer.grid.pinned(fixed)
  if box.lanes == outer.grid.lanes: return False
  inside = box.spread(act)
  mask = None if inside.all() else inside
  end = m.plan.block_end[i]
  m.control = Control(box, outer.handlers, active=mask, real=mask)
  m.regions.append((i, {}))
  try: m.run(i + 1, end)
  finally:
    _end_region(m, i, end)
    m.control = outer
  if m.strict and not m.regions and not m.chunked: m.raise_first()
  return True


HANDLERS: dict[Kind, Handler] = {Kind.RANGE: _range, Kind.IF: _if, Kind.END_BLOCK: _end_block}
