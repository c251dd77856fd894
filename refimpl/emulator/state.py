"""One run's state: the uops' values, the memories, the control (which lanes run the code now, and how surely) and the
undefined behaviour found, reported in the sequential order.

Control rule. Whether a lane executes a stretch of code can itself be uncertain: its IF gate, its gated LOAD/STORE's
gate or its RANGE's bounds are loose (another backend may decide the other way) or undefined. The executor keeps,
for the region it is running, a per-lane *control level*: IF and RANGE join the carried level of each lane's gate /
bounds into the enclosing region's, the block's end pops it. A lane is under loose (undefined) control where that
level is loose (UNDEFINED). Then, with "loose" meaning "joins the control level":
  - a STORE on such a lane makes the element it stores loose (undefined), and so does an ASSIGN the register it
    writes; a gated STORE's own gate counts the same way;
  - a lane that skips a block (or a gated STORE) only because of an uncertain gate might have run it: it runs the
    block as a *phantom* lane, which never writes data, registers or race records and never reports undefined
    behaviour, but whose STOREs mark the element they would have stored loose (undefined) (a phantom LOAD reads
    memory unchecked, for the indices it feeds; an undefined or out-of-bounds phantom index marks nothing);
  - every accumulator a block assigns becomes loose (undefined) on the lanes whose gate / bounds are, whether or
    not the lane runs it.
A lane whose RANGE bounds are undefined has no known counter: it skips the loop (accumulators spoiled as above), and
the elements it would store are not marked; nor are those of iterations past a loose bound that this run did not do.

Undefined behaviour. The undefined lanes of an op (only active lanes count) are: those alu's Outcome marks; a LOAD or
STORE whose index (for a vector, any of its elements) is outside [0, size); a LOAD of a DEFINE_LOCAL element never
stored in this launch; a race (memory.py: two threads touching one element, at least one writing, with no barrier
between; two writes of the same bits are none). A kind is immediate or deferred (refimpl/emulator/ub.py). An immediate
one (an access out of bounds, a write of other bits than another thread's unordered write) makes the program undefined
where the op runs. A deferred one (CAST_RANGE, SHIFT_COUNT, DIVISOR_ZERO, DIVISION_OVERFLOW, a LOAD of an
uninitialised local element or of an element another thread writes unordered, before or after it: UNINITIALISED,
RACY_READ) only makes the value undefined on that lane (UNDEFINED, carried by the certainty rule: a WHERE that picks
the other value drops it); the program is undefined where an undefined value is *used* on a lane that really runs:
stored by a STORE (not by a MOVE, which carries it), an index, a LOAD's or STORE's gate, an IF's condition, a RANGE's
bound (refimpl.emulator.ub.USES; a division's operands are no use). Strict mode (the default) raises
UndefinedBehavior(op, uop index, lane, operands, reason, count, kind) at the first op that has one: `lane` is the first
such thread as (gidx0, gidx1, gidx2, lidx0, lidx1, lidx2), `operands` are its operand values (memory ops: its index),
`count` how many lanes, `kind` that lane's refimpl.emulator.ub.UB (alu's Outcome.kind, OUT_OF_BOUNDS, UNINITIALISED,
RACE or RACY_READ); at a use, `use` says which and `origin` is the op that made the value undefined (its own
UndefinedBehavior: op, uop index, first lane, operands, reason), whose kind `kind` is. Permissive mode (strict=False)
records one event per (uop, check: alu, out of bounds, a race check, or a use of one deferred op's value) instead
(count summed over the lane executions) and carries the damage forward:
  - an element computed from an undefined element is undefined (WHERE: the condition or the chosen value);
  - an undefined index, an out-of-bounds access, an undefined gate: the access does nothing (a LOAD's value is
    undefined on that lane; a STORE writes nothing, but with an undefined gate the element it would store becomes
    undefined: control rule);
  - storing an undefined element makes that memory element undefined; a write/write race makes it undefined;
  - a LOAD of an element another thread writes unordered (before or after it) or of an unwritten local gets an
    undefined element;
  - lanes whose IF gate or RANGE bound is undefined skip the block, and every accumulator the block assigns becomes
    undefined on them; under an IF they run it as phantom lanes, so the elements they would store become undefined.
A use whose value no deferred op made undefined (it comes from undefined behaviour reported already) is not reported
again.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from refimpl.dtype import to_np
from refimpl.emulator.certainty import EXACT, UNDEFINED, join
from refimpl.emulator.indexing import Grid
from refimpl.emulator.memory import LateWrites, Memory
from refimpl.emulator.origins import Origin, Places
from refimpl.emulator.plan import Plan
from refimpl.emulator.ub import UB, USES
from refimpl.emulator.values import LAZY, Ref, Value, carried_levels, either, lanewise, per_lane, with_levels
from refimpl.errors import UndefinedBehavior
from refimpl.ir import UOp

Handler = Callable[["Machine", int, UOp], "int | None"]  # runs uop i; a block's returns the index after its block


class Control(NamedTuple):
  """The lanes that run the code now, and how surely (see "Control rule"). A block or a loop run as lanes runs under
  its own and puts the enclosing one back when it ends: the control is saved and restored as one value."""
  grid: Grid                    # the lanes: the launch or a chunk of its workgroups, with an axis per loop run as lanes
  handlers: Sequence[Handler]   # per uop, what runs it (a loop run as lanes skips the steps folds.fold applies)
  active: np.ndarray | None = None   # the lanes executing; None: every lane
  real: np.ndarray | None = None     # the active lanes that really run (not phantom); None: every lane
  phantom: np.ndarray | None = None  # (lanes,) the active lanes that only might run
  level: np.ndarray | None = None    # per lane: the region's control level; None: EXACT


def control_level(x: Value, active: np.ndarray | None) -> np.ndarray | None:
  """The per-lane control level a gate or bound x gives the active lanes: its carried level there (else EXACT)."""
  if x.cert is None: return None
  level = carried_levels(x)
  return level if active is None else np.where(active, level, EXACT)

def _repeated(x: Value, grid: Grid) -> Value:
  """A value from outside a loop run as lanes, on the loop's lanes: the same for every iteration (Grid.spread)."""
  def rep(a: np.ndarray | None) -> np.ndarray | None: return None if a is None else grid.spread(np.broadcast_to(a, x.v.shape))
  return Value(rep(x.v), rep(x.cert), x.settled)


class Machine:
  """The state of one run: values (env), memories, the control (which lanes run), loop counters and the events found.
  What is known before the run is its Plan's; what runs each uop, `handlers` (dispatch.handler_table)."""
  def __init__(self, plan: Plan, handlers: Sequence[Handler], buffers: Sequence[np.ndarray], strict: bool,
               inplace: bool = False, late: LateWrites | None = None):
    self.plan, self.handlers, self.strict, self.alias = plan, handlers, strict, plan.alias
    self.late = LateWrites() if late is None else late  # writes that earlier runs found racing an earlier read
    self.late_found: dict[str, list[np.ndarray]] = {}  # what this run finds of them (LateWrites rows, per memory)
    self.epochs = np.zeros(plan.grid.workgroups, np.int64)  # per workgroup of the launch: the barriers it has passed
    self.globals: dict[int, Memory] = {}
    for i, u in plan.global_defs:
      given = np.asarray(buffers[u.arg])
      flags = given.flags
      data = given if inplace and given.ndim == 1 and flags.c_contiguous and flags.writeable else given.flatten()
      self.globals[i] = Memory(plan.names[i], u.dtype.base, u.dtype.size, data, plan.grid, False, i not in plan.free,
                               i in plan.stored)
    self.events: dict[tuple[int, str], list] = {}  # (uop, kind) -> [order key, event, UB, other keywords]
    self.origins: dict[int, Origin] = {}  # uop -> where it made values undefined (a deferred kind, `defer`)
    self.barrier_globals = True  # a BARRIER orders globals too (emulate's barrier_scope)
    self.chunked = False  # the launch runs in chunks of workgroups: strict mode raises the first finding at the end
    self.start(plan.grid)

  def start(self, grid: Grid) -> None:
    """Ready to run the program on `grid` (the launch, or a chunk of its workgroups): no values yet, fresh locals."""
    plan = self.plan
    self.control = Control(grid, self.handlers)
    self.env: list[Any] = list(plan.initial_env)  # constants and lazy forms outside blocks already set
    self.stacked: dict[Any, np.ndarray] = {}  # a batch of a stretch (batches.Stack) -> its result, while exact
    for i, mem in self.globals.items(): self.env[i] = mem
    self.locals: list[Memory] = []
    for i, u in plan.local_defs:
      data = np.zeros(u.dtype.size * grid.workgroups, dtype=to_np(u.dtype.base))
      self.env[i] = Memory(plan.names[i], u.dtype.base, u.dtype.size, data, grid, True, i not in plan.free,
                           i in plan.stored)
      self.locals.append(self.env[i])
    for i, buf, idx in plan.initial_refs: self.env[i] = Ref(self.env[buf], idx)
    self.loops: dict[int, int] = {}        # RANGE uop -> its counter now (a loop that runs sequentially)
    self.axes: dict[int, tuple[int, int]] = {}  # RANGE uop -> (its grid axis, its first counter): a loop run as lanes
    self.regions: list[tuple[int, dict[int, Any]]] = []  # loops running as lanes: (RANGE uop, env entries to restore)

  def run(self, lo: int, hi: int) -> None:
    """Executes uops lo..hi-1 (block handlers return the index after their block)."""
    handlers, uops = self.control.handlers, self.plan.uops  # a block that changes them puts them back
    i = lo
    while i < hi:
      nxt = handlers[i](self, i, uops[i])
      i = i + 1 if nxt is None else nxt

  def run_chunks(self, grids: list[Grid]) -> None:
    """The program on each chunk of the launch's workgroups in turn (memories and race tracking kept across them)."""
    self.chunked = True
    for grid in grids:
      self.start(grid)
      self.run(0, len(self.plan.uops))
    if self.strict: self.raise_first()

  # ***** values *****

  def value_of(self, j: int) -> Value:
    """The value of uop j now (an ASSIGN reads as its register; an affine value is computed on first use; inside a
    loop run as lanes, a value from before it is repeated for the loop's lanes)."""
    j = self.alias[j]
    x = self.env[j]
    if x is LAZY:
      grid = self.control.grid
      self.keep(j, Value(grid.evaluate(*grid.place(self.plan.forms[j], self.loops, self.axes)).astype(np.int32)))
    elif self.regions and x.__class__ is Value and len(x.v) not in (1, self.control.grid.lanes):
      self.keep(j, _repeated(x, self.control.grid))
    else: return x
    return self.env[j]

  def keep(self, j: int, x: Value) -> None:
    """Sets uop j's value; one from before the innermost loop run as lanes is put back when that loop ends."""
    if self.regions and j < self.regions[-1][0]: self.regions[-1][1].setdefault(j, self.env[j])
    self.env[j] = x

  # ***** undefined behaviour *****

  def ub(self, i: int, kind: str, lanes: np.ndarray, describe: Callable[[int], tuple]) -> None:
    """Undefined behaviour of uop i on `lanes` (lane numbers, ascending), found by check `kind`: raise (strict) or
    record an event. describe(k) -> (UB kind, reason, operands[, UndefinedBehavior's other keywords]) of lanes[k];
    only the lane that comes first in the sequential order is described. Inside a loop run as lanes, strict mode
    records too, and raises the first event when the loop ends."""
    if len(lanes) == 0: return
    k = self.first_lane(lanes)
    key, entry = self.order_key(i, int(lanes[k])), self.events.get((i, kind))
    if self.strict:  # the lanes of the first execution of the uop that has it: those in the iteration of lanes[k]
      grid = self.control.grid
      it = grid.iteration(lanes)
      count = len(lanes) if grid.inner == 1 else int(np.count_nonzero(it == it[k]))
      if entry is not None and entry[0] <= key:
        if entry[0][:-1] == key[:-1]: entry[1][-1] += count  # the same execution, in a later chunk of workgroups
        return
    else:
      count = len(lanes) + (0 if entry is None else entry[1][-1])
      if entry is not None and entry[0] <= key:
        entry[1][-1] = count
        return
    ub, reason, operands, *more = describe(k)
    extra = more[0] if more else {}
    ev = [self.plan.uops[i].op, i, self.control.grid.thread(lanes[k]), operands, reason, count]
    if self.strict and not self.regions and not self.chunked: raise UndefinedBehavior(*ev, kind=ub, **extra)
    self.events[(i, kind)] = [key, ev, ub, extra]

  def raise_first(self) -> None:
    """Strict mode, after a part of the run that collected its findings: raise the first in the sequential order."""
    if not self.events: return
    _, ev, ub, extra = min(self.events.values(), key=lambda entry: entry[0])
    raise UndefinedBehavior(*ev, kind=ub, **extra)

  def first_lane(self, lanes: np.ndarray) -> int:
    """The position in `lanes` of the lane that the sequential order reaches first: the earliest iteration of the
    loops run as lanes, then the lowest thread."""
    g = self.control.grid
    if g.inner == 1: return 0
    return int(np.argmin(g.iteration(lanes) * self.plan.grid.threads + g.tids(lanes)))

  def order_key(self, i: int, lane: int) -> tuple[int, ...]:
    """Where uop i on `lane` comes in the sequential order: (loop, counter) for each RANGE around it, the uop, the
    thread. Keys compare like the order in which the sequential rule executes."""
    loops, counters = self.places(i, np.array([lane]))
    key = [x for r, c in zip(loops, counters[0].tolist()) for x in (r, c)]
    return (*key, i, int(self.control.grid.tids(np.int64(lane))))

  def ub_elements(self, i: int, kind: str, lanes: np.ndarray, e: np.ndarray, bad: np.ndarray,
                  describe: Callable[[int, int], tuple[UB, str, tuple]]) -> None:
    """ub() for per-element findings: bad (L, count) over lanes (L,) with addresses e; describe(row, col)."""
    rows = np.flatnonzero(bad.any(axis=1))
    if len(rows): self.ub(i, kind, lanes[rows], lambda k: describe(rows[k], int(np.argmax(bad[rows[k]]))))

  def defer(self, i: int, lanes: np.ndarray, describe: Callable[[int], tuple[UB, str, tuple]]) -> None:
    """Uop i gave an undefined value (a deferred kind, refimpl.emulator.ub) on `lanes`: nothing is reported until the
    value is used (`use`), which names this op as the value's origin: the lane that comes first in the sequential
    order is described (describe as in `ub`), and every thread it happened on is remembered."""
    if len(lanes) == 0: return
    grid = self.control.grid
    k = self.first_lane(lanes)
    key = self.order_key(i, int(lanes[k]))
    origin = self.origins.get(i)
    if origin is None: origin = self.origins[i] = Origin(key, None, np.zeros(self.plan.grid.lanes, dtype=bool))
    if self.axes: origin.record(grid.tids(lanes), self.places(i, lanes))  # loops run as lanes: when, per thread
    else: origin.threads[grid.tids(lanes)] = True
    if origin.event is None or key < origin.key:
      ub, reason, operands = describe(k)
      origin.key, origin.event = key, UndefinedBehavior(self.plan.uops[i].op, i, grid.thread(lanes[k]), operands, reason,
                                                        kind=ub)

  def undefined_here(self, x: Value | None) -> np.ndarray | None:
    """The lanes that really run (not phantom, active) where some element of x is UNDEFINED; None when none can be."""
    if x is None or x.cert is None: return None
    undef = per_lane(x.cert == UNDEFINED)
    real = self.control.real
    return undef if real is None else np.broadcast_to(undef, real.shape) & real

  def use(self, i: int, use: str, undefined: np.ndarray | None, operands: Callable[[int], tuple], value: int,
          where: Callable[[int], str] | None = None) -> None:
    """Uop i uses the value of uop `value` as `use` (a word of refimpl.emulator.ub.USES) where `undefined` (a mask of
    the lanes that really run and whose value is undefined) is set: undefined behaviour there, reported with the op
    that made the value undefined (`defer`): one finding per such op, on the lanes where its own value is undefined
    now (`undefined_now`), or, where none's is, on the lanes of the threads it happened on (a value computed from two
    of them has two), the earliest op first. operands(lane) -> what the report lists;
    where(lane) -> what the use touches there, for the reason (a STORE: the element and its memory). A lane
    whose value no deferred op made undefined (permissive mode: the damage of undefined behaviour reported already) is
    not reported again."""
    if undefined is None: return
    grid = self.control.grid
    lanes = np.flatnonzero(np.broadcast_to(per_lane(undefined), (grid.lanes,)))
    if len(lanes) == 0: return
    tids = grid.tids(lanes)
    what = USES[use].split(":")[0]
    found = [(o, self.origins[o]) for o in self.plan.deferred_sources(value) if o in self.origins]
    here = self.places(i, lanes) if any(origin.running for _, origin in found) else None
    hits = [lanes[origin.threads[tids] | (origin.before(o, tids, here, i) if origin.running else False)]
            for o, origin in found]
    now = [hit[self.undefined_now(o, i, hit)] for (o, _), hit in zip(found, hits)]
    named = np.zeros(grid.lanes, dtype=bool)
    for hit in now: named[hit] = True
    for (o, origin), hit, hit_now in zip(found, hits, now):
      hit = np.union1d(hit_now, hit[~named[hit]])  # the origins undefined there now, else every one on the thread
      if len(hit) == 0: continue
      def describe(k: int, hit=hit, origin=origin) -> tuple:
        at = "" if where is None else f" ({where(int(hit[k]))})"
        return origin.event.kind, f"{what} is undefined{at}", operands(int(hit[k])), {"use": use, "origin": origin.event}
      self.ub(i, f"use {use} of {o}", hit, describe)

  def places(self, i: int, lanes: np.ndarray) -> Places:
    """The places of uop i on `lanes` in the sequential order (origins.Places): each RANGE around it, its counter."""
    loops, grid = self.plan.enclosing[i], self.control.grid
    idx = np.unravel_index(lanes, grid.shape)
    cols = [self.axes[r][1] + idx[grid.order.index(self.axes[r][0])] if r in self.axes else
            np.full(len(lanes), self.loops.get(r, 0)) for r in loops]
    return Places(loops, np.stack(cols, axis=1) if cols else np.zeros((len(lanes), 0), dtype=np.int64))

  def settle_origins(self) -> None:
    """The last loop run as lanes ended: what its deferred ops recorded per iteration is all before what follows."""
    if self.axes: return
    for origin in self.origins.values():
      if origin.running: origin.settle()

  def undefined_now(self, o: int, i: int, lanes: np.ndarray) -> np.ndarray:
    """Per lane of `lanes`, whether deferred op o's value is undefined there now, as read at uop i: o's value of this
    iteration (Plan.current_at; else False). Of the ops that made a used value undefined on a thread, the use names
    those; that does not depend on whether loops run as lanes."""
    if not len(lanes) or not self.plan.current_at(o, i): return np.zeros(len(lanes), dtype=bool)
    x = self.value_of(o)
    if x.__class__ is not Value or x.cert is None: return np.zeros(len(lanes), dtype=bool)
    return np.broadcast_to(per_lane(x.cert == UNDEFINED), (self.control.grid.lanes,))[lanes]

  def spoil(self, block: int, ctl: np.ndarray | None) -> None:
    """Lanes whose control at `block` is uncertain (ctl: per lane, the control level the block's gate / bounds give):
    every accumulator the block assigns joins that level there, whether or not the lane runs the block."""
    if ctl is None: return
    ctl = np.broadcast_to(ctl, (self.control.grid.lanes,))
    if not ctl.any(): return
    for acc in self.plan.assigned.get(block, ()):
      x = self.env[acc]
      self.env[acc] = with_levels(x.v, join(x.cert, lanewise(ctl, x.v.ndim)))

  # ***** control *****

  def narrow(self, cond: np.ndarray, ctl: np.ndarray | None) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(the active lanes where cond holds and is defined, the active lanes whose cond is undefined: ctl, the control
    level cond gives, is UNDEFINED); (1,) when uniform."""
    active = self.control.active
    act = cond if active is None else active & cond
    if ctl is None: return act, None
    undef = ctl == UNDEFINED
    lost = undef if active is None else active & undef
    return act & ~undef, lost

  def block(self, i: int, active: np.ndarray | None, phantom: np.ndarray | None = None,
            ctl: np.ndarray | None = None) -> None:
    """Runs the body of block i with `active` as the mask; `phantom` of those lanes only might run it, and `ctl` is the
    control level the block's gate / bounds give each lane (both join the enclosing region's)."""
    outer = self.control
    real, phantom_lanes = active, outer.phantom
    if phantom is not None or outer.phantom is not None:
      lanes = outer.grid.lanes
      phantom_lanes = either(outer.phantom, None if phantom is None else np.broadcast_to(phantom, (lanes,)))
      real = np.broadcast_to(True if active is None else active, (lanes,)) & ~phantom_lanes
    level = outer.level if ctl is None else join(outer.level, ctl)
    self.control = Control(outer.grid, outer.handlers, active, real, phantom_lanes, level)
    try: self.run(i + 1, self.plan.block_end[i])
    finally: self.control = outer

  def gated(self, gate: Value | None) -> np.ndarray | None:
    """The lanes a LOAD/STORE accesses memory on: really running, gate true and defined. None = every lane."""
    real = self.control.real
    if gate is None: return real
    g = gate.v if gate.cert is None else gate.v & (gate.cert != UNDEFINED)
    if g.shape[0] == 1: return real if g[0] else np.zeros(self.control.grid.lanes, dtype=bool)
    return g if real is None else real & g

  def uncertain(self, gate: Value | None) -> np.ndarray | None:
    """The per-lane control level of a STORE or ASSIGN: the region's, joined with its gate's carried level (active
    lanes; EXACT elsewhere)."""
    level, active = self.control.level, self.control.active
    ctl = level if gate is None else join(level, carried_levels(gate))
    if ctl is None or active is None: return ctl
    return np.where(active, ctl, EXACT)
