"""Memory access: buffers and locals, INDEX, LOAD, STORE and BARRIER, where an access lands and what it finds there.

An access lands through its INDEX: an affine index (indexing.py) is a strided view of memory whose bounds are known
without a scan, any other an array of addresses checked lane by lane (`locate`). Race tracking (memory.py) watches
only the memories two threads could meet in; its findings and the reads a later write races (memory.LateWrites) are
reported as state.py's "Undefined behaviour" says. A *plain* access (Plan.plain_accesses: no gate, an affine index, a
buffer or local without race tracking) that is in bounds on every lane and meets nothing uncertain reads or writes a
view of memory directly (a local's, where every element it reads has been written: `_unwritten`); everything else
takes the general path, with its checks.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from refimpl.emulator.certainty import EXACT, LEVEL, UNDEFINED, join, where_undefined
from refimpl.emulator.indexing import FULL, Grid
from refimpl.emulator.memory import (
  Memory,
  Site,
  as_bits,
  elements,
  join_met_levels,
  lane_view,
  read,
  read_view,
  track_load,
  track_store,
  write,
)
from refimpl.emulator.plan import Kind, Plan
from refimpl.emulator.state import Handler, Machine
from refimpl.emulator.straight import Step, StepMaker
from refimpl.emulator.ub import UB
from refimpl.emulator.values import Ref, Value, carried_levels, chosen_levels, either, lanewise, on_lane, with_levels
from refimpl.ir import MOVE, UOp


def _define_global(m: Machine, i: int, u: UOp) -> None:
  """DEFINE_GLOBAL: buffer argument number `arg`, the caller's array (flat, the pointee's dtype, the declared size)."""

def _define_local(m: Machine, i: int, u: UOp) -> None:
  """DEFINE_LOCAL: one array per workgroup, new in each launch: an element no thread stored in this launch is
  uninitialised, and reading it is undefined (UNINITIALISED)."""

def _index(m: Machine, i: int, u: UOp) -> None:
  """INDEX: element `idx` of the buffer, per lane; the LOAD or STORE it feeds makes the access and its checks."""
  m.env[i] = Ref(m.env[u.src[0]], u.src[1])

def _barrier(m: Machine, i: int, u: UOp) -> None:
  """BARRIER: every thread of the workgroup reaches it (the verifier makes sure); it orders every access the
  workgroup's threads made before it, to locals and globals, against every access they make after it (CUDA's
  __syncthreads), for every workgroup whose threads are active. Threads of different workgroups get no order from it."""
  real, grid = m.control.real, m.control.grid
  groups = None if real is None else real.reshape(-1, grid.workgroups, grid.group, grid.after).any(axis=(0, 2, 3))
  for mem in (*m.locals, *(m.globals.values() if m.barrier_globals else ())): mem.barrier(groups, grid)
  passed = m.epochs[grid.first_group:grid.first_group + grid.workgroups]
  if groups is None: passed += 1
  else: passed[groups] += 1

def _load(m: Machine, i: int, u: UOp) -> None:
  """LOAD: `count` consecutive elements from the index, on each live lane (active, gate true); a gated LOAD yields its
  alternative where the gate is false (an undefined gate: an undefined element). Undefined (and the element read is
  undefined): an index outside [0, size) for any element (OUT_OF_BOUNDS), a local element never stored in this launch
  (UNINITIALISED), another thread's write of it with no barrier between (RACY_READ). The element read keeps memory's level,
  joined with the index's carried level; a gated LOAD's value also joins its gate's."""
  ref, count = m.env[u.src[0]], u.dtype.count
  plain = m.plan.plain_accesses[i]
  if plain is not None:
    v = _plain_read(m, ref.mem, plain, count)
    if v is not None:
      m.env[i] = Value(v)
      return
  gate = m.value_of(u.src[2]) if len(u.src) == 3 else None
  if gate is not None: m.use(i, "gate", m.undefined_here(gate), lambda lane: (_index_at(m, ref, lane),), u.src[2])
  site, bad = locate(m, i, u, ref, count, m.gated(gate))
  v, cert = _read(m, ref, site, bad)
  if m.control.phantom is not None: v = _phantom_read(m, ref, count, gate, v)
  loaded = with_levels(v, where_undefined(cert, _unsafe_reads(m, i, ref.mem, site, count)))
  m.env[i] = loaded if gate is None else _alternative(gate, loaded, m.value_of(u.src[1]))

def _read(m: Machine, ref: Ref, site: Site, bad: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
  """(values, levels) of the elements at `site`: memory's levels, joined with the index's carried level, UNDEFINED
  where the index was out of bounds or undefined (`bad`)."""
  mem, grid = ref.mem, m.control.grid
  v = read(mem.data, site, grid, snapshot=mem.mutable)
  cert = None if mem.cert is None else read(mem.cert, site, grid, snapshot=True)
  shaky = None if ref.idx in m.plan.forms else carried_levels(m.value_of(ref.idx))  # an uncertain index: so is what is read
  if shaky is not None: cert = join(cert, lanewise(shaky, v.ndim))
  return v, where_undefined(cert, None if bad is None else lanewise(bad, v.ndim))

def _phantom_read(m: Machine, ref: Ref, count: int, gate: Value | None, v: np.ndarray) -> np.ndarray:
  """The values with the phantom lanes' reads filled in: lanes that only might run read memory too (unchecked), for
  the indices of what they might store."""
  phantom, active = m.control.phantom, m.control.active
  ph = phantom if active is None else phantom & active
  ok, e = addresses(m, ref, count, ph if gate is None else ph & gate.v)
  if not len(ok): return v
  v = np.array(np.broadcast_to(v, (m.control.grid.lanes,) + v.shape[1:]))
  v[ok] = ref.mem.data[e] if count > 1 else ref.mem.data[e[:, 0]]
  return v

def _unsafe_reads(m: Machine, i: int, mem: Memory, site: Site, count: int) -> np.ndarray | None:
  """The elements LOAD i reads that are undefined by when they were written: a local element never written in this
  launch (UNINITIALISED), another thread's write with no barrier between, before the load or after it (a write a
  previous run found: Machine.late) (RACY_READ); each is deferred."""
  if not (mem.local or mem.tracked) or (site.live is not None and not site.live.any()): return None
  grid = m.control.grid
  if not mem.tracked and not _unwritten(mem, site, grid): return None  # a local whose elements read were all written
  lanes, e = elements(site, grid)
  found = np.zeros((len(lanes), count), dtype=bool)
  def defer(bad: np.ndarray, describe: Callable[[int, int], tuple[UB, str, tuple]]) -> None:
    rows = np.flatnonzero(bad.any(axis=1))
    if len(rows): m.defer(i, lanes[rows], lambda k: describe(rows[k], int(np.argmax(bad[rows[k]]))))
  if mem.local:
    unset = ~mem.written[e]
    defer(unset, lambda r, c: (UB.UNINITIALISED, f"read of {element_name(m, mem, int(e[r, c]))}, which was never written",
                               (int(e[r, c] % mem.size),)))
    found |= unset
  if mem.tracked:
    tids = grid.tids(lanes)
    for kind, (hit, other) in track_load(mem, tids, e).items():
      defer(hit, lambda r, c, kind=kind, other=other: (UB.RACY_READ,
        f"{kind} race: thread {thread_name(m, int(other[r, c]))} wrote {element_name(m, mem, int(e[r, c]))} and thread "
        f"{grid.thread(lanes[r])} reads it with no barrier between", (int(e[r, c] % mem.size),)))
      found |= hit
    if mem.name in m.late.rows:
      late, writer = m.late.racy(mem.name, launch_elements(m, mem, e), tids, tids // m.plan.grid.group,
                                  barrier_counts(m, mem, tids))
      defer(late, lambda r, c: (UB.RACY_READ, f"write after read race: thread {grid.thread(lanes[r])} reads "
        f"{element_name(m, mem, int(e[r, c]))} and thread {thread_name(m, int(writer[r, c]))} writes it after with no "
        f"barrier between", (int(e[r, c] % mem.size),)))
      found |= late
  if not found.any(): return None
  full = np.zeros((grid.lanes, count), dtype=bool)
  full[lanes] = found
  return full if count > 1 else full[:, 0]

def _unwritten(mem: Memory, site: Site, grid: Grid) -> bool:
  """Whether a read of local `mem` at `site` finds an element never stored in this launch on one of its live lanes."""
  written = read(mem.written, site, grid, snapshot=False)
  if site.live is not None: written = written | ~lanewise(np.broadcast_to(site.live, (grid.lanes,)), written.ndim)
  return not written.all()

def _index_at(m: Machine, ref: Ref, lane: int) -> int:
  """The index of an access on `lane` (for a report)."""
  form = m.plan.forms.get(ref.idx)
  if form is None: return int(on_lane(m.value_of(ref.idx).v, lane))
  grid = m.control.grid
  return int(np.broadcast_to(grid.evaluate(*grid.place(form, m.loops, m.axes)), (grid.lanes,))[lane])

def _alternative(gate: Value, loaded: Value, alt: Value) -> Value:
  """A gated LOAD's value: what it loaded where the gate is true, its alternative where false. Its levels are those of
  the value chosen, joined with the gate's carried level (an uncertain gate: the other value might be chosen)."""
  cond = lanewise(gate.v, loaded.v.ndim)
  ctl = None if gate.cert is None else lanewise(carried_levels(gate), loaded.v.ndim)
  return with_levels(np.where(cond, loaded.v, alt.v), join(ctl, chosen_levels(cond, loaded.cert, alt.cert)))

def _store(m: Machine, i: int, u: UOp) -> None:
  """STORE: writes the value's elements (with their levels) at the index on each live lane (active, gate true); an
  undefined element stored is a use (undefined behaviour), except by a MOVE, which stores it as undefined.
  Undefined: an index outside [0, size) for any element (OUT_OF_BOUNDS; nothing is written), another thread's access
  to the element with no barrier between (a write of other bits: RACE, and the element is undefined). Through an uncertain
  index, or under uncertain control, the element written joins their carried level, and so does the element a lane
  would have written had that control gone the other way."""
  ref, value = m.env[u.src[0]], m.value_of(u.src[1])
  count = m.plan.uops[u.src[1]].dtype.count
  if len(u.src) == 2 and value.cert is None and m.control.level is None and ref.idx in m.plan.forms:
    # nothing uncertain: what follows changes nothing; a plain access writes through a view where it can
    plain = m.plan.plain_accesses[i]
    if plain is None or not _plain_write(m, ref.mem, plain, count, value.v):
      _write(m, i, ref, value, m.control.real, count)
    return
  gate = m.value_of(u.src[2]) if len(u.src) == 3 else None
  if gate is not None: m.use(i, "gate", m.undefined_here(gate), lambda lane: (_index_at(m, ref, lane),), u.src[2])
  live = m.gated(gate)
  stored = None if u.arg == MOVE else m.undefined_here(value)  # a MOVE carries undefined lanes: not a use
  if stored is not None and live is not None: stored = stored & live
  m.use(i, "stored", stored, lambda lane: (_index_at(m, ref, lane),), u.src[1],
        lambda lane: element_name(m, ref.mem, _index_at(m, ref, lane)))
  ctl = m.uncertain(gate)
  shaky = ctl if ref.idx in m.plan.forms else join(ctl, carried_levels(m.value_of(ref.idx)))  # + an uncertain index
  if shaky is not None: value = with_levels(value.v, join(value.cert, lanewise(shaky, value.v.ndim)))
  _write(m, i, ref, value, live, count)
  if ctl is None or not ctl.any(): return
  # lanes whose control is uncertain and did not store might have: the element they would store to joins the control
  # level (unless their gate is exactly false; an undefined or out-of-bounds index marks nothing)
  ctl = np.broadcast_to(ctl, (m.control.grid.lanes,))
  maybe = (ctl != EXACT) & (True if live is None else ~live)
  if gate is not None: maybe = maybe & (gate.v if gate.cert is None else gate.v | (gate.cert != EXACT))
  ok, e = addresses(m, ref, count, maybe)
  if len(ok): np.maximum.at(ref.mem.levels(), e, np.broadcast_to(ctl[ok][:, None], e.shape))

def _write(m: Machine, i: int, ref: Ref, value: Value, live: np.ndarray | None, count: int) -> None:
  """The STORE of `value` (count elements per lane) through ref on the live lanes, with its checks and tracking."""
  mem, grid = ref.mem, m.control.grid
  if live is not None and not live.any(): return
  site, _ = locate(m, i, m.plan.uops[i], ref, count, live)
  if site.live is not None and not site.live.any(): return
  races = before = None
  if mem.tracked:
    lanes, e = elements(site, grid)
    tids = grid.tids(lanes)
    races = track_store(mem, tids, e, as_bits(_per_element(value.v, lanes, e.shape, grid).astype(mem.data.dtype)))
    late_write(m, mem, tids, e, races.late)
    m.ub_elements(i, "write/write", lanes, e, races.bad, lambda r, c: (UB.RACE,
      f"write/write race: threads {grid.thread(lanes[r])} and {thread_name(m, int(races.other[r, c]))} write different "
      f"bits to {element_name(m, mem, int(e[r, c]))} with no barrier between", (int(e[r, c] % mem.size),)))
    if mem.cert is not None and races.earlier.any(): before = mem.cert[e]
  write(mem.data, site, grid, value.v)
  if value.cert is not None or mem.cert is not None:
    write(mem.levels(), site, grid, np.zeros((1,) + site.tail(), dtype=LEVEL) if value.cert is None else value.cert)
    if races is not None:
      new = np.zeros(e.shape, LEVEL) if value.cert is None else _per_element(value.cert, lanes, e.shape, grid)
      join_met_levels(mem, e, races, new, before)
  if mem.local: write(mem.written, site, grid, np.ones((1,) + site.tail(), dtype=bool))
  if races is not None and races.bad.any(): mem.levels()[e[races.bad]] = UNDEFINED

def _per_element(x: np.ndarray, lanes: np.ndarray, shape: tuple[int, ...], grid: Grid) -> np.ndarray:
  """A value's (or its levels') elements on `lanes`, shaped like their addresses (L, count)."""
  return np.broadcast_to(x, (grid.lanes,) + x.shape[1:])[lanes].reshape(shape)

def _in_bounds(m: Machine, mem: Memory, form: tuple, count: int) -> tuple[tuple[int, ...], int] | None:
  """Where an access through affine `form` lands (Grid.place; a local's flat address, its workgroup's block
  included) when it is in bounds on every lane and nothing about it is uncertain (no phantom lanes, no levels in
  memory); None elsewhere."""
  control = m.control
  if mem.cert is not None or control.phantom is not None: return None
  grid = control.grid
  coef, off = grid.place(form, m.loops, m.axes)
  lo, hi = grid.span(coef, off)
  if lo < 0 or hi > mem.size - count: return None
  if mem.local: coef = tuple(a + b for a, b in zip(coef, mem.base_coef + (0,) * (len(coef) - 6)))
  return coef, off

def _plain_read(m: Machine, mem: Memory, form: tuple, count: int) -> np.ndarray | None:
  """What a plain LOAD (Plan.plain_accesses) reads, as a view of memory, where `_in_bounds` finds it and, in a
  local, every element it reads on a lane that really runs has been written; None (the general path) elsewhere."""
  view = _in_bounds(m, mem, form, count)
  if view is None: return None
  grid = m.control.grid
  if mem.local and _unwritten(mem, Site(mem, count, m.control.real, view=view), grid): return None
  return read_view(mem.data, view, count, grid, mem.mutable)

def plain_site(m: Machine, i: int) -> tuple[Memory, tuple[tuple[int, ...], int]] | None:
  """Where LOAD i reads on the current grid, as (memory, view), when it is plain (Plan.plain_accesses), from a global
  buffer, and `_in_bounds` finds it: it then reads that view and finds nothing; None elsewhere. Its INDEX need not have
  run."""
  form = m.plan.plain_accesses[i]
  if form is None: return None
  u = m.plan.uops[i]
  mem = m.env[m.plan.uops[u.src[0]].src[0]]
  if mem.local: return None  # its reads check that the elements were written
  view = _in_bounds(m, mem, form, u.dtype.count)
  return None if view is None else (mem, view)

def _plain_write(m: Machine, mem: Memory, form: tuple, count: int, values: np.ndarray) -> bool:
  """Stores the exact `values` of a plain STORE (Plan.plain_accesses) through a view of memory where `_in_bounds`
  finds it, every lane really runs, control is exact and the lanes' elements are one stride apart (memory.lane_view);
  False (nothing done: the general path, `_write`) elsewhere."""
  if m.control.real is not None or m.control.level is not None: return False
  view = _in_bounds(m, mem, form, count)
  if view is None or (m.control.grid.lanes > 1 and not any(view[0])): return False  # many lanes, one element
  lanes = lane_view(mem.data, view, count, m.control.grid)
  if lanes is None: return False
  lanes[...] = values
  if mem.local: lane_view(mem.written, view, count, m.control.grid)[...] = True
  return True


def addresses(m: Machine, ref: Ref, count: int, lanes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """Where the access of ref lands on `lanes` ((lanes,) bool), without checks or reports: (the lanes whose index is
  defined and in bounds, their flat addresses (L, count))."""
  mem, grid = ref.mem, m.control.grid
  form = m.plan.forms.get(ref.idx)
  if form is not None:
    idx, ok = grid.evaluate(*grid.place(form, m.loops, m.axes)), lanes
  else:
    x = m.value_of(ref.idx)
    idx, ok = x.v, lanes if x.cert is None else lanes & (x.cert != UNDEFINED)
  idx = np.broadcast_to(idx, (grid.lanes,)).astype(np.int64)
  ok = np.flatnonzero(ok & (idx >= 0) & (idx <= mem.size - count))
  addr = idx[ok] + (grid.workgroup(grid.ids[ok]) * mem.size if mem.local else 0)
  return ok, addr[:, None] + np.arange(count)

def locate(m: Machine, i: int, u: UOp, ref: Ref, count: int, live: np.ndarray | None) -> tuple[Site, np.ndarray | None]:
  """Where the access of uop i lands on the `live` lanes, and the lanes whose access is undefined (an undefined
  index or out of bounds: reported here, and dropped from the site's live lanes)."""
  mem, grid = ref.mem, m.control.grid
  limit = mem.size - count  # the largest index a `count`-element access may start at
  form = m.plan.forms.get(ref.idx)
  bad = None
  if form is not None:
    coef, off = grid.place(form, m.loops, m.axes)
    lo, hi = grid.span(coef, off)
    if lo >= 0 and hi <= limit:
      if mem.local: coef = tuple(a + b for a, b in zip(coef, mem.base_coef + (0,) * (len(coef) - 6)))
      return Site(mem, count, live, view=(coef, off)), None
    idx, checked = grid.evaluate(coef, off), False
  else:
    x = m.value_of(ref.idx)
    idx, info = x.v, m.plan.infos.get(ref.idx, FULL)
    checked = info.lo >= 0 and info.hi <= limit
    if x.cert is not None:
      undef = x.cert == UNDEFINED
      bad = undef if live is None else undef & live
      m.use(i, "index", bad, lambda lane, idx=idx: (on_lane(idx, lane),), ref.idx)
      live = np.broadcast_to(~undef if live is None else live & ~undef, (grid.lanes,))
  if not checked:
    oob = (idx < 0) | (idx > limit)
    oob = np.broadcast_to(oob if live is None else oob & live, (grid.lanes,))
    lanes = np.flatnonzero(oob)
    if len(lanes):
      def describe(k: int) -> tuple[UB, str, tuple]:
        at = int(on_lane(idx, lanes[k]))
        what = f"index {at}" if count == 1 else f"a {count}-element access at {at} (elements {at}..{at + count - 1})"
        return UB.OUT_OF_BOUNDS, f"{what} is outside [0, {mem.size}) of {mem.name}", (at,)
      m.ub(i, "out of bounds", lanes, describe)
      bad, live = either(bad, oob), ~oob if live is None else live & ~oob
  addr = idx.astype(np.int64)
  if mem.local: addr = addr + grid.workgroup(grid.ids) * mem.size
  if live is not None: addr = np.where(live, addr, 0)
  return Site(mem, count, live, addr=addr), bad

def element_name(m: Machine, mem: Memory, e: int) -> str:
  if not mem.local: return f"element {e} of {mem.name}"
  return f"element {e % mem.size} of {mem.name} (workgroup {e // mem.size + m.control.grid.first_group})"

def launch_elements(m: Machine, mem: Memory, e: np.ndarray) -> np.ndarray:
  """Flat addresses e of mem as numbers in the launch (a local's blocks are the current chunk's workgroups')."""
  return e + m.control.grid.first_group * mem.size if mem.local else e

def barrier_counts(m: Machine, mem: Memory, tids: np.ndarray) -> np.ndarray:
  """Per thread (launch numbers), the barriers its workgroup has passed that order `mem` (none orders a global when
  barriers order locals only)."""
  if not (mem.local or m.barrier_globals): return np.zeros(len(tids), np.int64)
  return m.epochs[tids // m.plan.grid.group]

def late_write(m: Machine, mem: Memory, tids: np.ndarray, e: np.ndarray, late: np.ndarray) -> None:
  """Threads `tids` wrote elements e of mem where `late` is set, which another thread read before with no barrier
  between: that read's value is undefined, which only a run that knows it can mark (emulate runs the launch again:
  `_launch`); recorded as LateWrites rows."""
  rows, cols = np.nonzero(late)
  if not len(rows): return
  t = tids[rows]
  found = np.stack([launch_elements(m, mem, e[rows, cols]), t, t // m.plan.grid.group,
                    barrier_counts(m, mem, t)], axis=1)
  m.late_found.setdefault(mem.name, []).append(found)

def thread_name(m: Machine, tid: int) -> str:
  """A thread that race tracking recorded (its lane number in the launch)."""
  if tid >= 0: return str(m.plan.grid.thread(tid))
  return "several threads" if tid > -3 else f"of workgroup {-3 - tid} (before that workgroup's barrier)"


# ***** steps: INDEX and a plain access as steps of a straight-line stretch (straight.py), their handlers' paths *****

def _index_step(plan: Plan, i: int, u: UOp, handler: Handler, direct: Callable[[int], bool]) -> Step:
  """INDEX's step: the Ref its handler makes."""
  buf, idx = u.src
  def index(m: Machine, env: list) -> None: env[i] = Ref(env[buf], idx)
  return index

def _load_step(plan: Plan, i: int, u: UOp, handler: Handler, direct: Callable[[int], bool]) -> Step | None:
  """A plain LOAD's step (Plan.plain_accesses): the handler's view of memory (`_plain_read`) where it is found, else
  the handler; None (the handler's step) for any other LOAD."""
  form = plan.plain_accesses[i]
  if form is None: return None
  buf, count = plan.uops[u.src[0]].src[0], u.dtype.count  # the DEFINE_GLOBAL / LOCAL: its env entry is the Memory
  def plain_load(m: Machine, env: list) -> None:
    v = _plain_read(m, env[buf], form, count)
    if v is None: handler(m, i, u)
    else: env[i] = Value(v)
  return plain_load

def _store_step(plan: Plan, i: int, u: UOp, handler: Handler, direct: Callable[[int], bool]) -> Step | None:
  """A plain STORE's step (Plan.plain_accesses): the handler's write through a view of memory (`_plain_write`) where
  the value is exact and the view is found, else the handler; None (the handler's step) for any other STORE."""
  form = plan.plain_accesses[i]
  if form is None: return None
  buf, a = plan.uops[u.src[0]].src[0], u.src[1]
  count, da = plan.uops[a].dtype.count, direct(a)
  def plain_store(m: Machine, env: list) -> None:
    x = env[a] if da else m.value_of(a)
    if x.cert is not None or not _plain_write(m, env[buf], form, count, x.v): handler(m, i, u)
  return plain_store


HANDLERS: dict[Kind, Handler] = {
  Kind.DEFINE_GLOBAL: _define_global, Kind.DEFINE_LOCAL: _define_local, Kind.INDEX: _index, Kind.LOAD: _load,
  Kind.STORE: _store, Kind.BARRIER: _barrier}
STEPS: dict[Kind, StepMaker] = {Kind.INDEX: _index_step, Kind.LOAD: _load_step, Kind.STORE: _store_step}
