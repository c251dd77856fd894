"""The PYTHON device's executor: runs a verified Program with every thread of the launch as a numpy lane.

    emulate(program, buffers, vals=(), strict=True) -> Emulation(buffers, certainty, events, deferred)

SIMT. All threads of the launch (global_size workgroups x local_size threads) run in lock step, one numpy lane each;
lane numbers are C-order positions in (gidx2, gidx1, gidx0, lidx2, lidx1, lidx0), so a workgroup's threads are
consecutive. Each uop runs once for every lane at a time, in program order. An *active mask* says which lanes are
executing: an IF narrows it to the lanes whose gate is true (the block is skipped when none is); a RANGE whose bounds
are the same on every lane runs its body for each counter value with the mask unchanged, otherwise the counter runs
from the smallest start to the largest end and a lane is active in the iterations inside its own [start, end). A
gated LOAD/STORE accesses memory only on active lanes whose gate is true. Inactive lanes compute harmless garbage:
they never write, never raise and never record an event. DEFINE_LOCAL is one array per workgroup; BARRIER is a
workgroup barrier (every thread reaches it, the verifier makes sure) and orders its workgroup's accesses to locals
and globals.
DEFINE_ACC is a register per lane; ASSIGN writes it on active lanes, and the ASSIGN uop reads as the register.

Values. A value is an array with one row per lane, (lanes,) for a scalar dtype and (lanes, n) for T.vec(n); a value
that is the same on every lane may keep a single row (1,) and broadcasts. Beside it: a *certainty* level per element
(refimpl/emulator/certainty.py; an array of that shape, or None = all EXACT). ALU, CAST and BITCAST semantics are
refimpl.emulator.alu's; WHERE's value dtype and the compared dtype are what alu gets as `dtype`.

Certainty rule. An element's level is the join of the level the op that made it gives it (alu's Outcome.certainty:
NAN_PAYLOAD for a NaN, TOLERANCE / ALLOWED_SET for the rule's other loose results; ERROR_BOUND for a WMMA result, see
`_wmma`) and of the carried level (certainty.carry; BITCAST: carry_bits) of every operand element it was computed
from. WHERE's result (and a gated LOAD's choice between memory and its alternative) keeps the level of the value it
chooses, joined with the condition's carried level. A float CONST that is NaN is NAN_PAYLOAD (the IR carries no NaN
payload, so neither its JSON form nor a backend promises one). Memory keeps a level per element: a STORE writes the
value's levels, a LOAD reads them; a LOAD or STORE whose index is uncertain on a lane touched an uncertain element, so
that lane's loaded value / stored element joins the index's carried level. Everything else (other constants, thread
ids, loop counters, loads of exact memory, integer arithmetic on exact values) is EXACT. An element is *loose* when
its level is neither EXACT nor UNDEFINED. Comparing two runs: exact elements bit for bit; loose ones by their level's
rule (refimpl.testing, refimpl.fuzz.expect).

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

Write after read. A load's race with a write that comes after it in lock step is known only at the write, after the
value loaded may have been used: the run records such writes (memory.LateWrites) and emulate runs the launch again on
the buffers as given, its loads marking the reads those writes race, until a run finds none it did not know (at most
RERUNS runs). The result, its events and strict mode's report are that last run's.

WMMA rule: see `_wmma` (every WMMA result element is loose, within an error bound).

Speed. indexing.py analyses the int32 index arithmetic before the run: an affine index is a strided view of memory
(no gather), its bounds need no scan, the integer ops that only feed indices are never executed, and race tracking
runs only on buffers where two threads could meet (memory.py). That analysis and the verification are done once per
(program, vals) and reused by later runs (`Plan`). A loop whose bounds differ per thread costs one pass over all lanes
per counter value from the smallest start to the largest end. From a plan's STRAIGHT_FROM-th run on, each stretch of
ops between block boundaries runs as a list of steps (straight.py, INLINE), which do what the handlers do.

Loops as lanes. A RANGE with bounds that are one exact number on every lane, whose iterations loops.py proves cannot
observe each other (parallel), or observe each other only through accumulator chains (scan), runs all its iterations
at once: the grid gets one more axis, so each lane becomes one lane per iteration (lane-major, or iteration-major
for a scan of computed terms: loops.LaneLoop, Grid.extend; race tracking still records threads). A value from before
the loop is repeated for the loop's lanes; the body's values die with the loop. A scan's chains are not run in the
body: loops.fold applies them afterwards in the sequential order, and ASSIGN's rule writes the result; a MUL term used
by its chain only is made by the fold too, one iteration at a time, when its operands are exact (Step.product);
the accumulators of an outer-product tile (tinygrad's upcast matmul: loops.OuterProduct) fold together.
What the sequential rule would report is reported unchanged: every finding is keyed by its place in the sequential
order ((loop, counter) of each RANGE around it, the uop, the thread), a permissive run lists its events in that order
and describes each by its first lane in it, and strict mode raises, when the loop ends, the first finding, with the
count of its own iteration.

Memory bound. The values of a run's lanes take at most LANE_MEMORY bytes (estimated per lane from the program's uop
dtypes, twice for masks and temporaries). A launch that needs more runs in chunks of whole workgroups, each a run of
consecutive threads taking at most LANE_MEMORY / CHUNK_SHARE, one after another: thread ids, race tracking and event
lanes are the launch's, and strict mode raises, after the last chunk, the finding that comes first in the sequential
order (with the lanes of every chunk counted). A launch whose one workgroup does not fit in a chunk is refused up front
(LaunchTooLarge). A loop runs as lanes in chunks of iterations that fit, in order (sequentially when not even two do).
"""
from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import numpy as np

from refimpl.dtype import PtrDType, dtypes, to_np
from refimpl.emulator import alu
from refimpl.emulator.certainty import (
  EXACT,
  LEVEL,
  UNDEFINED,
  Certainty,
  carry,
  carry_bits,
  is_loose,
  is_undefined,
  join,
  of_loose,
  where_undefined,
)
from refimpl.emulator.indexing import FULL, Grid, accesses, analyze, race_free, thread_form
from refimpl.emulator.loops import (
  ROW_STEPS_FROM,
  LaneLoop,
  Product,
  Scan,
  Step,
  fold,
  fold_outer,
  fold_ufunc,
  iterations,
  lane_loops,
)
from refimpl.emulator.memory import (
  LateWrites,
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
from refimpl.emulator.origins import Origin, Places
from refimpl.emulator.straight import compile_stretches
from refimpl.emulator.ub import UB, USES
from refimpl.errors import UndefinedBehavior
from refimpl.ir import MOVE, GroupOp, Ops, Program, UOp, verify
from refimpl.ir.arguments import check_arguments

__all__ = ["LANE_MEMORY", "Emulation", "LaunchTooLarge", "emulate"]


@dataclass
class Emulation:
  """The result of a run: every buffer after it (copies, flat), per buffer the certainty level of every element
  (refimpl/emulator/certainty.py; read-only where all are EXACT; only permissive mode leaves UNDEFINED ones), the
  undefined behaviour found (permissive mode), and every op of a deferred kind that made a value undefined, first lane
  of each (whether or not the value was used: in a defined program a WHERE discarded it). `undefined` and `loose` are
  the levels as bool masks."""
  buffers: list[np.ndarray]
  certainty: list[np.ndarray]
  events: list[UndefinedBehavior]
  deferred: list[UndefinedBehavior] = field(default_factory=list)

  @property
  def undefined(self) -> list[np.ndarray]:
    """Per buffer, the elements whose value is undefined."""
    return [_no_element(c.size) if _all_exact(c) else is_undefined(c) for c in self.certainty]

  @property
  def loose(self) -> list[np.ndarray]:
    """Per buffer, the loose elements: neither EXACT nor UNDEFINED."""
    return [_no_element(c.size) if _all_exact(c) else is_loose(c) for c in self.certainty]


BARRIER_SCOPES = ("workgroup", "local")

def emulate(program: Program, buffers: Sequence[np.ndarray], vals: Sequence[int] = (), strict: bool = True,
            inplace: bool = False, barrier_scope: str = "workgroup", lockstep: bool = False) -> Emulation:
  """Runs `program` on copies of `buffers` (one numpy array per DEFINE_GLOBAL, in number order, dtype to_np(base),
  size the declared size) with `vals` (one int per DEFINE_VAR). strict: raise UndefinedBehavior at the first
  undefined operation; otherwise record it and return masks (see the module docstring). inplace: run on the arrays
  themselves (flat contiguous ones; the PYTHON device's buffers) instead of copies; the result's buffers are them.
  barrier_scope: "workgroup" is the spec (a BARRIER orders its workgroup's locals and globals); "local" is a
  portability check, not the spec: a BARRIER orders locals only (OpenCL's barrier(CLK_LOCAL_MEM_FENCE) read
  literally, which is how tinygrad's OpenCL, Metal and WGSL renderers fence), so a kernel that needs global order
  across a barrier is undefined there. lockstep: a portability check, not the spec either: a read racing a write that
  comes after it in the emulator's lock-step order reads the old value (as the threads of one warp do), so only what
  such a kernel computes in lock step is checked (one run, no write-after-read re-run: `_launch`)."""
  if barrier_scope not in BARRIER_SCOPES: raise ValueError(f"barrier_scope is one of {BARRIER_SCOPES}, not {barrier_scope!r}")
  vals = tuple(int(v) for v in vals)
  plan = Plan.of(program, vals)
  check_arguments(program, plan.signature, buffers, vals)
  chunks = None
  if plan.grid.lanes * plan.lane_bytes > LANE_MEMORY:
    chunks = plan.grid.chunks(max(1, LANE_MEMORY // CHUNK_SHARE // plan.lane_bytes))
    if not chunks:
      need = plan.grid.group * plan.lane_bytes
      raise LaunchTooLarge(f"{program.name}: one workgroup of {plan.grid.group} threads needs about {need / 2**30:.2f} GiB "
                           f"for its values (about {plan.lane_bytes} bytes per thread), more than the emulator's share for "
                           f"a chunk of workgroups, {LANE_MEMORY / CHUNK_SHARE / 2**30:g} GiB "
                           f"(refimpl.emulator.machine.LANE_MEMORY / CHUNK_SHARE); use smaller workgroups")
  return _launch(plan, buffers, strict, inplace, barrier_scope == "workgroup", chunks, lockstep)

RERUNS = 8  # the most runs one launch may take to find the reads its writes race after the fact (`_launch`)

def _launch(plan: Plan, buffers: Sequence[np.ndarray], strict: bool, inplace: bool, barrier_globals: bool,
            chunks: list[Grid] | None, lockstep: bool = False) -> Emulation:
  """Runs the launch, and again while a run finds new writes that race a read made before them by another thread
  (write after read: the read's value is undefined, memory.py's race rule): each run's loads know every such write
  found so far (LateWrites), and runs on the buffers as the caller gave them (inplace: put back). lockstep: one run,
  whose reads see what lock-step order gives them (emulate's portability check)."""
  late = LateWrites()
  saved = _saved_outputs(plan, buffers) if inplace and not lockstep else None
  for _ in range(RERUNS):
    m = Machine(plan, buffers, strict, inplace, late)
    m.barrier_globals = barrier_globals
    try:
      with np.errstate(all="ignore"):  # the rules say what inf, NaN and overflow give
        if chunks is None: m.run(0, len(plan.uops))
        else: m.run_chunks(chunks)
    except UndefinedBehavior:
      if lockstep or not late.learn(m.late_found): raise
    else:
      if lockstep or not late.learn(m.late_found): return m.result()
    for k, x in (saved or {}).items(): np.copyto(buffers[k], x)
  raise RuntimeError(f"internal error: {plan.program.name}: {RERUNS} runs still found new write-after-read races "
                     f"(refimpl.emulator.machine.RERUNS)")

def _saved_outputs(plan: Plan, buffers: Sequence[np.ndarray]) -> dict[int, np.ndarray] | None:
  """Copies of the writable buffers the program stores to, where a run may have to be redone (it has memory that race
  tracking watches); None where none can."""
  if all(i in plan.free for i, _ in (*plan.global_defs, *plan.local_defs)): return None
  return {u.arg: np.array(buffers[u.arg]) for i, u in plan.global_defs
          if i in plan.stored and isinstance(buffers[u.arg], np.ndarray) and buffers[u.arg].flags.writeable}


class LaunchTooLarge(ValueError):
  """A launch whose single workgroup's lane state would not fit in a chunk: refused before anything runs."""


# ***** values *****

class Value(NamedTuple):
  """One uop's value on every lane, and its certainty levels (see the module docstring): they have the values' shape
  or broadcast to it; None = all EXACT. settled: the levels hold no TOLERANCE, ERROR_BOUND or ALLOWED_SET, so they
  carry as themselves (False: not known; carry them)."""
  v: np.ndarray
  cert: np.ndarray | None = None
  settled: bool = False

class Ref(NamedTuple):
  """An INDEX: the memory and the uop that holds the index (located when a LOAD/STORE knows its width and gate)."""
  mem: Memory
  idx: int

LAZY = object()  # the env entry of an affine value that has not been needed yet

def _or(*masks: np.ndarray | None) -> np.ndarray | None:
  if len(masks) == 2 and masks[0] is None: return masks[1]
  out = None
  for x in masks:
    if x is not None: out = x if out is None else out | x
  return out

def _lanewise(mask: np.ndarray, ndim: int) -> np.ndarray:
  """A per-lane mask shaped to broadcast against an array of `ndim` dims (a vector value's lanes are rows)."""
  return mask.reshape(mask.shape + (1,) * (ndim - mask.ndim))

def _per_lane(mask: np.ndarray) -> np.ndarray: return mask if mask.ndim == 1 else mask.any(axis=-1)

def _sel(cond: np.ndarray, a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
  """The levels of a select: a's where cond, else b's."""
  if a is None and b is None: return None
  return np.where(cond, EXACT if a is None else a, EXACT if b is None else b)

def _with_levels(v: np.ndarray, cert: np.ndarray | None = None, settled: bool = False) -> Value:
  """A Value whose levels have the values' shape: per-lane levels widen a uniform value to every lane."""
  if cert is None: return Value(v)
  if cert.shape == v.shape: return Value(v, cert, settled)
  if cert.shape[0] > v.shape[0]: v = np.broadcast_to(v, (cert.shape[0],) + v.shape[1:])
  return Value(v, np.broadcast_to(_lanewise(cert, v.ndim), (cert.shape[0],) + v.shape[1:]), settled)

def _carried_levels(x: Value) -> np.ndarray | None:
  """x's levels carried through a computation (certainty.carry)."""
  return x.cert if x.settled or x.cert is None else carry(x.cert)

def _inherited_levels(xs: Sequence[Value]) -> np.ndarray | None:
  """The join of the operands' carried levels: what an op computed from them is at least."""
  out = None
  for x in xs:
    if x.cert is not None: out = join(out, _carried_levels(x))
  return out

def _all_settled(xs: Sequence[Value]) -> bool:
  """Whether every one of xs carries its levels as they are (Value.settled, or all EXACT)."""
  return all(x.settled or x.cert is None for x in xs)

def _control_level(x: Value, active: np.ndarray | None) -> np.ndarray | None:
  """The per-lane control level a gate or bound x gives the active lanes: its carried level there (else EXACT)."""
  if x.cert is None: return None
  level = _carried_levels(x)
  return level if active is None else np.where(active, level, EXACT)

@functools.lru_cache(maxsize=64)
def _no_element(n: int) -> np.ndarray:
  """An all-false mask of n elements, read-only and shared (a view of one value: no memory, whatever n is)."""
  return np.broadcast_to(np.False_, (n,))

@functools.lru_cache(maxsize=64)
def _exact_levels(n: int) -> np.ndarray:
  """n EXACT levels, read-only and shared (as _no_element)."""
  return np.broadcast_to(EXACT, (n,))

def _all_exact(levels: np.ndarray) -> bool:
  """Whether `levels` are the shared all-EXACT ones a run returns for a buffer nothing uncertain reached."""
  return levels is _exact_levels(levels.size)

def _repeat(x: Value, grid: Grid) -> Value:
  """A value from outside a loop run as lanes, on the loop's lanes: the same for every iteration (Grid.spread)."""
  def rep(a: np.ndarray | None) -> np.ndarray | None: return None if a is None else grid.spread(np.broadcast_to(a, x.v.shape))
  return Value(rep(x.v), rep(x.cert), x.settled)

def _py(x: Any) -> Any:
  """A numpy element (or vector row) as a plain Python value."""
  if isinstance(x, np.ndarray): return tuple(_py(y) for y in x)
  kind = np.dtype(type(x)).kind if isinstance(x, np.generic) else ""
  return bool(x) if kind == "b" else int(x) if kind in "iu" else float(x)

def _at(arr: np.ndarray, lane: int) -> Any: return _py(arr[lane if arr.shape[0] > 1 else 0])


# ***** the machine *****

# bytes: the most the values of one run's lanes may take. A launch that needs more runs in chunks of workgroups; a loop
# runs as lanes in chunks of iterations that fit (sequentially when not even two do).
LANE_MEMORY = 1 << 30
# bytes: what a loop run as lanes takes per chunk of iterations, for speed (LANE_MEMORY still bounds it). Every value of
# a chunk is a new array: past a few tens of MB each one is fresh memory the OS must fault in, below it the body's
# per-uop cost is paid once per chunk too often (bench/bench_real_kernels.py: tinygrad's 256^3 matmul, half the time)
LOOP_CHUNK_MEMORY = 1 << 27
CHUNK_SHARE = 4  # a launch over LANE_MEMORY runs in chunks of workgroups of LANE_MEMORY / CHUNK_SHARE (room for loops)
LOOPS_AS_LANES = True  # False: every RANGE runs its iterations one after another (the rule itself, for comparisons)
# from this run of a plan on, its straight-line stretches run as steps (straight.py): making them costs about one run,
# and each later run is about a fifth faster; None: never
STRAIGHT_FROM: int | None = 4

def _fixed_value(form: tuple | None) -> Value | None:
  """The value of an affine form (indexing.thread_form) that is one number, the same on every lane, else None."""
  if form is None or any(form[0]) or form[1]: return None
  v = np.array([form[2]], np.int64).astype(np.int32)  # as Machine.value_of evaluates it
  v.flags.writeable = False
  return Value(v)

class Plan:
  """Everything a run knows before it starts. It depends only on (program, vals), and programs are immutable, so it
  is made once per pair (`Plan.of`, which also verifies the program) and shared by every run of them."""
  _cache: dict[int, tuple[weakref.ref, dict[tuple[int, ...], Plan]]] = {}

  def __init__(self, program: Program, vals: tuple[int, ...]):
    uops = program.uops
    self.program, self.uops, self.grid = program, uops, Grid(program.global_size, program.local_size)
    self.signature = list(program.signature)
    self.infos = analyze(program, vals)
    self.forms = {i: thread_form(info.aff) for i, info in self.infos.items() if info.aff is not None}
    self.free = race_free(program, self.infos, self.grid)
    self.stored = {buf for buf, acc in accesses(program).items() if any(store for store, _, _ in acc)}
    self.alias = [u.src[0] if u.op is Ops.ASSIGN else i for i, u in enumerate(uops)]
    self.global_defs = [(i, u) for i, u in enumerate(uops) if u.op is Ops.DEFINE_GLOBAL]
    self.names = {i: f"buffer {u.arg}" if u.op is Ops.DEFINE_GLOBAL else f"local {u.arg}" for i, u in enumerate(uops)
                  if u.op in (Ops.DEFINE_GLOBAL, Ops.DEFINE_LOCAL)}
    self.local_defs = [(i, u) for i, u in enumerate(uops) if u.op is Ops.DEFINE_LOCAL]
    self.block_end: dict[int, int] = {}
    opened = []
    for i, u in enumerate(uops):
      if u.op in GroupOp.BlockStart: opened.append(i)
      elif u.op in GroupOp.BlockEnd: self.block_end[opened.pop()] = i
    # accumulators defined before a block and assigned inside it (spoiled when a lane's control is undefined)
    self.assigned = {b: {uops[j].src[0] for j in range(b, e) if uops[j].op is Ops.ASSIGN and uops[j].src[0] < b}
                     for b, e in self.block_end.items()}
    self.lane_loops = lane_loops(program, self.infos)
    self._sources: dict[int, tuple[int, ...]] = {}  # deferred_sources, as they are asked for
    self.operand_dtype = [uops[u.src[-1]].dtype.scalar() if u.src else None for u in uops]  # the dtype alu's rule gets
    self.enclosing: list[tuple[int, ...]] = []  # per uop: the RANGEs around it, outermost first
    ranges: list[int] = []
    for i, u in enumerate(uops):
      if u.op is Ops.ENDRANGE: ranges.pop()
      self.enclosing.append(tuple(ranges))
      if u.op is Ops.RANGE: ranges.append(i)
    # what one lane's values take, at most (value bytes of every uop, twice for masks and temporaries)
    self.lane_bytes = max(1, 2 * sum(u.dtype.itemsize for u in uops if not isinstance(u.dtype, PtrDType)))
    # an int value with an affine form is computed only when needed (RANGE runs its loop, the form is its counter)
    self.handlers = [_lazy if i in self.forms and u.op is not Ops.RANGE else HANDLERS[u.op] for i, u in enumerate(uops)]
    self.constants = {i: const_value(u) for i, u in enumerate(uops) if u.op is Ops.CONST}
    # ALU ops whose rule is one numpy ufunc (alu.ufunc_rule): run by it directly while their operands are exact
    self.ufuncs = {i: alu.ufunc_rule(u.op, self.operand_dtype[i]) for i, u in enumerate(uops)
                   if self.handlers[i] is _alu and alu.ufunc_rule(u.op, self.operand_dtype[i]) is not None}
    for i in self.ufuncs: self.handlers[i] = _ufunc_alu
    # float ufunc ops whose NaN levels no op reads: each use is a float ufunc op that no loop folds, which gives NaN
    # wherever an operand is NaN (alu.ufunc_rule) and so marks those lanes NAN_PAYLOAD itself (_ufunc_alu skips them)
    users: dict[int, list[int]] = {}
    for j, u in enumerate(uops):
      for k in u.src: users.setdefault(k, []).append(j)
    self.folded = set().union(*(loop.folded for loop in self.lane_loops.values()))  # ops only loops' folds compute
    def nan_propagating(j: int) -> bool: return j in self.ufuncs and dtypes.is_float(uops[j].dtype) and j not in self.folded
    self.levels_unread = {i for i in self.ufuncs if nan_propagating(i) and all(map(nan_propagating, users.get(i, [None])))}
    # per ufunc op, what makes the Value of its result on exact operands: NAN_PAYLOAD on its NaNs where a float op's may
    # be read (a scalar's lanes: one dimension), else none
    self.ufunc_values = {i: Value if i in self.levels_unread or not dtypes.is_float(uops[i].dtype.scalar())
                         else _scalar_float_value if uops[i].dtype.count == 1 else _ufunc_value for i in self.ufuncs}
    # IDIV, MOD, SHL, SHR by a constant with which the rule is defined everywhere (alu.constant_rule)
    self.constant_rules = {}
    for i, u in enumerate(uops):
      if self.handlers[i] is _alu and len(u.src) == 2 and u.src[1] in self.constants:
        rule = alu.constant_rule(u.op, self.operand_dtype[i], self.constants[u.src[1]].v[0])
        if rule is not None: self.constant_rules[i] = rule
    for i in self.constant_rules: self.handlers[i] = _constant_alu
    # CAST and BITCAST whose rule is one numpy function (alu.conversion_rule): run by it directly on exact operands
    self.conversions = {i: alu.conversion_rule(u.op, self.operand_dtype[i], u.dtype.scalar()) for i, u in enumerate(uops)
                        if u.op in (Ops.CAST, Ops.BITCAST)}
    # RANGEs whose bounds are the same number on every lane whatever the run (affine forms of constants), as Values
    self.fixed_bounds = {}
    for i, u in enumerate(uops):
      bounds = tuple(_fixed_value(self.forms.get(j)) for j in u.src) if u.op is Ops.RANGE else (None,)
      if None not in bounds: self.fixed_bounds[i] = bounds
    # ops outside every block whose value is known before the run (a constant, a lazy form, an INDEX): set when a run
    # starts (Machine.start), so the steps of a stretch skip them; their handlers would set the same
    depth, outside = 0, []
    for i, u in enumerate(uops):
      if u.op in GroupOp.BlockEnd: depth -= 1
      if depth == 0: outside.append(i)
      if u.op in GroupOp.BlockStart: depth += 1
    self.initial_env: list[Any] = [None] * len(uops)
    for i in outside:
      if self.handlers[i] is _const: self.initial_env[i] = self.constants[i]
      elif self.handlers[i] in (_lazy, _special, _define_var): self.initial_env[i] = LAZY
    self.initial_refs = [(i, *uops[i].src) for i in outside if self.handlers[i] is _index]
    self.preset = {i for i, x in enumerate(self.initial_env) if x is not None} | {i for i, _, _ in self.initial_refs}
    self.runs, self._straight = 0, None

  def handler_table(self) -> list[Callable]:
    """What runs each uop, for a new run: the handlers, and from the plan's run number STRAIGHT_FROM on, with its
    straight-line stretches as steps (straight.py: made once per plan, so programs run a few times never pay for it)."""
    self.runs += 1
    if STRAIGHT_FROM is None or self.runs < STRAIGHT_FROM: return self.handlers
    if self._straight is None:
      self._straight = compile_stretches(self, self.handlers, self.folded, INLINE, QUIET, VALUES, self.preset)
    return self._straight

  @functools.cached_property
  def _assigns(self) -> dict[int, list[int]]:
    """DEFINE_ACC uop -> the ASSIGNs that write its register."""
    out: dict[int, list[int]] = {}
    for j, u in enumerate(self.uops):
      if u.op is Ops.ASSIGN: out.setdefault(u.src[0], []).append(j)
    return out

  def current_at(self, j: int, i: int) -> bool:
    """Whether uop j's value, read at uop i, is this iteration's: every loop around j is around i too."""
    return self.enclosing[i][:len(self.enclosing[j])] == self.enclosing[j]

  @functools.cached_property
  def _moves(self) -> dict[int, list[int]]:
    """LOAD uop -> the values that MOVE STOREs put into the buffer it reads (a carry: Ops.STORE)."""
    moved: dict[int, list[int]] = {}
    for u in self.uops:
      if u.op is Ops.STORE and u.arg == MOVE: moved.setdefault(self.uops[u.src[0]].src[0], []).append(u.src[1])
    return {j: moved[self.uops[u.src[0]].src[0]] for j, u in enumerate(self.uops)
            if u.op is Ops.LOAD and self.uops[u.src[0]].src[0] in moved}

  def deferred_sources(self, j: int) -> tuple[int, ...]:
    """The uops uop j's value may be computed from (j itself, its operands', through a register every ASSIGN to it,
    through a carry every value moved into it), ascending: where an undefined value it holds can have come from
    (Machine.use)."""
    if j in self._sources: return self._sources[j]
    seen, todo = {j}, [j]
    while todo:
      k = todo.pop()
      for s in (*self.uops[k].src, *self._assigns.get(k, ()), *self._moves.get(k, ())):
        if s not in seen:
          seen.add(s)
          todo.append(s)
    self._sources[j] = tuple(sorted(seen))
    return self._sources[j]

  @staticmethod
  def of(program: Program, vals: tuple[int, ...]) -> Plan:
    key = id(program)
    entry = Plan._cache.get(key)
    if entry is None or entry[0]() is not program:
      verify(program)
      entry = Plan._cache[key] = (weakref.ref(program, lambda _: Plan._cache.pop(key, None)), {})
    plans = entry[1]
    if vals not in plans:
      if len(plans) >= 16: plans.pop(next(iter(plans)))
      plans[vals] = Plan(program, vals)
    return plans[vals]


class Control(NamedTuple):
  """The lanes that run the code now, and how surely (see "Control rule"). A block or a loop run as lanes runs under
  its own and puts the enclosing one back when it ends: the control is saved and restored as one value."""
  grid: Grid                    # the lanes: the launch or a chunk of its workgroups, with an axis per loop run as lanes
  handlers: list[Callable]      # per uop, what runs it (a loop run as lanes skips the steps loops.fold applies)
  active: np.ndarray | None = None   # the lanes executing; None: every lane
  real: np.ndarray | None = None     # the active lanes that really run (not phantom); None: every lane
  phantom: np.ndarray | None = None  # (lanes,) the active lanes that only might run
  level: np.ndarray | None = None    # per lane: the region's control level; None: EXACT


class Machine:
  """The state of one run: values (env), memories, the control (which lanes run), loop counters and the events found.
  What is known before the run is its Plan's."""
  def __init__(self, plan: Plan, buffers: Sequence[np.ndarray], strict: bool, inplace: bool = False,
               late: LateWrites | None = None):
    self.plan, self.strict, self.alias = plan, strict, plan.alias
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
    self.handlers = plan.handler_table()
    self.start(plan.grid)

  def start(self, grid: Grid) -> None:
    """Ready to run the program on `grid` (the launch, or a chunk of its workgroups): no values yet, fresh locals."""
    plan = self.plan
    self.control = Control(grid, self.handlers)
    self.env: list[Any] = list(plan.initial_env)  # constants and lazy forms outside blocks already set
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

  def value_of(self, j: int) -> Value:
    """The value of uop j now (an ASSIGN reads as its register; an affine value is computed on first use; inside a
    loop run as lanes, a value from before it is repeated for the loop's lanes)."""
    j = self.alias[j]
    x = self.env[j]
    if x is LAZY: self.keep(j, Value(self.control.grid.evaluate(*self.place(self.plan.forms[j])).astype(np.int32)))
    elif self.regions and x.__class__ is Value and len(x.v) not in (1, self.control.grid.lanes):
      self.keep(j, _repeat(x, self.control.grid))
    else: return x
    return self.env[j]

  def keep(self, j: int, x: Value) -> None:
    """Sets uop j's value; one from before the innermost loop run as lanes is put back when that loop ends."""
    if self.regions and j < self.regions[-1][0]: self.regions[-1][1].setdefault(j, self.env[j])
    self.env[j] = x

  def place(self, form: tuple) -> tuple[tuple[int, ...], int]:
    """An affine form on the current grid: (a coefficient per grid axis, offset), loop counters filled in."""
    coef, loops, off = form
    grid = self.control.grid
    off = grid.shifted(coef, off)
    extra = len(grid.sizes) - 6  # the axes of loops run as lanes
    if not loops: return (coef + (0,) * extra if extra else coef), off
    on_axis = [0] * extra
    for r, c in loops:
      if r in self.axes:
        axis, start = self.axes[r]
        on_axis[axis - 6] += c
        off += c * start
      else: off += c * self.loops[r]
    return coef + tuple(on_axis), off

  def result(self) -> Emulation:
    evs = [UndefinedBehavior(*e, kind=kind, **extra)
           for _, e, kind, extra in sorted(self.events.values(), key=lambda entry: entry[0])] if self.events else []
    mems = self.globals.values()
    deferred = [o.event for o in sorted(self.origins.values(), key=lambda o: o.key)] if self.origins else []
    return Emulation([g.data for g in mems], [_exact_levels(g.data.size) if g.cert is None else g.cert for g in mems], evs,
                     deferred)

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

  def run_chunks(self, grids: list[Grid]) -> None:
    """The program on each chunk of the launch's workgroups in turn (memories and race tracking kept across them)."""
    self.chunked = True
    for grid in grids:
      self.start(grid)
      self.run(0, len(self.plan.uops))
    if self.strict: self.raise_first()

  def first_lane(self, lanes: np.ndarray) -> int:
    """The position in `lanes` of the lane that the sequential order reaches first: the earliest iteration of the
    loops run as lanes, then the lowest thread."""
    g = self.control.grid
    if g.inner == 1: return 0
    return int(np.argmin(g.iteration(lanes) * g.threads + g.tids(lanes)))

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
    undef = _per_lane(x.cert == UNDEFINED)
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
    lanes = np.flatnonzero(np.broadcast_to(_per_lane(undefined), (grid.lanes,)))
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
    return np.broadcast_to(_per_lane(x.cert == UNDEFINED), (self.control.grid.lanes,))[lanes]

  def spoil(self, block: int, ctl: np.ndarray | None) -> None:
    """Lanes whose control at `block` is uncertain (ctl: per lane, the control level the block's gate / bounds give):
    every accumulator the block assigns joins that level there, whether or not the lane runs the block."""
    if ctl is None: return
    ctl = np.broadcast_to(ctl, (self.control.grid.lanes,))
    if not ctl.any(): return
    for acc in self.plan.assigned.get(block, ()):
      x = self.env[acc]
      self.env[acc] = _with_levels(x.v, join(x.cert, _lanewise(ctl, x.v.ndim)))

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
      phantom_lanes = _or(outer.phantom, None if phantom is None else np.broadcast_to(phantom, (lanes,)))
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

  def addresses(self, ref: Ref, count: int, lanes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where the access of ref lands on `lanes` ((lanes,) bool), without checks or reports: (the lanes whose index is
    defined and in bounds, their flat addresses (L, count))."""
    mem, grid = ref.mem, self.control.grid
    form = self.plan.forms.get(ref.idx)
    if form is not None:
      idx, ok = grid.evaluate(*self.place(form)), lanes
    else:
      x = self.value_of(ref.idx)
      idx, ok = x.v, lanes if x.cert is None else lanes & (x.cert != UNDEFINED)
    idx = np.broadcast_to(idx, (grid.lanes,)).astype(np.int64)
    ok = np.flatnonzero(ok & (idx >= 0) & (idx <= mem.size - count))
    addr = idx[ok] + (grid.workgroup(grid.ids[ok]) * mem.size if mem.local else 0)
    return ok, addr[:, None] + np.arange(count)

  def uncertain(self, gate: Value | None) -> np.ndarray | None:
    """The per-lane control level of a STORE or ASSIGN: the region's, joined with its gate's carried level (active
    lanes; EXACT elsewhere)."""
    level, active = self.control.level, self.control.active
    ctl = level if gate is None else join(level, _carried_levels(gate))
    if ctl is None or active is None: return ctl
    return np.where(active, ctl, EXACT)

  # ***** memory *****

  def locate(self, i: int, u: UOp, ref: Ref, count: int, live: np.ndarray | None) -> tuple[Site, np.ndarray | None]:
    """Where the access of uop i lands on the `live` lanes, and the lanes whose access is undefined (an undefined
    index or out of bounds: reported here, and dropped from the site's live lanes)."""
    mem, grid = ref.mem, self.control.grid
    limit = mem.size - count  # the largest index a `count`-element access may start at
    form = self.plan.forms.get(ref.idx)
    bad = None
    if form is not None:
      coef, off = self.place(form)
      lo, hi = grid.span(coef, off)
      if lo >= 0 and hi <= limit:
        if mem.local: coef = tuple(a + b for a, b in zip(coef, mem.base_coef + (0,) * (len(coef) - 6)))
        return Site(mem, count, live, view=(coef, off)), None
      idx, checked = grid.evaluate(coef, off), False
    else:
      x = self.value_of(ref.idx)
      idx, info = x.v, self.plan.infos.get(ref.idx, FULL)
      checked = info.lo >= 0 and info.hi <= limit
      if x.cert is not None:
        undef = x.cert == UNDEFINED
        bad = undef if live is None else undef & live
        self.use(i, "index", bad, lambda lane, idx=idx: (_at(idx, lane),), ref.idx)
        live = np.broadcast_to(~undef if live is None else live & ~undef, (grid.lanes,))
    if not checked:
      oob = (idx < 0) | (idx > limit)
      oob = np.broadcast_to(oob if live is None else oob & live, (grid.lanes,))
      lanes = np.flatnonzero(oob)
      if len(lanes):
        def describe(k: int) -> tuple[UB, str, tuple]:
          at = int(_at(idx, lanes[k]))
          what = f"index {at}" if count == 1 else f"a {count}-element access at {at} (elements {at}..{at + count - 1})"
          return UB.OUT_OF_BOUNDS, f"{what} is outside [0, {mem.size}) of {mem.name}", (at,)
        self.ub(i, "out of bounds", lanes, describe)
        bad, live = _or(bad, oob), ~oob if live is None else live & ~oob
    addr = idx.astype(np.int64)
    if mem.local: addr = addr + grid.workgroup(grid.ids) * mem.size
    if live is not None: addr = np.where(live, addr, 0)
    return Site(mem, count, live, addr=addr), bad

  def element_name(self, mem: Memory, e: int) -> str:
    if not mem.local: return f"element {e} of {mem.name}"
    return f"element {e % mem.size} of {mem.name} (workgroup {e // mem.size + self.control.grid.first_group})"

  def launch_elements(self, mem: Memory, e: np.ndarray) -> np.ndarray:
    """Flat addresses e of mem as numbers in the launch (a local's blocks are the current chunk's workgroups')."""
    return e + self.control.grid.first_group * mem.size if mem.local else e

  def barrier_counts(self, mem: Memory, tids: np.ndarray) -> np.ndarray:
    """Per thread (launch numbers), the barriers its workgroup has passed that order `mem` (none orders a global when
    barriers order locals only)."""
    if not (mem.local or self.barrier_globals): return np.zeros(len(tids), np.int64)
    return self.epochs[tids // self.plan.grid.group]

  def late_write(self, mem: Memory, tids: np.ndarray, e: np.ndarray, late: np.ndarray) -> None:
    """Threads `tids` wrote elements e of mem where `late` is set, which another thread read before with no barrier
    between: that read's value is undefined, which only a run that knows it can mark (emulate runs the launch again:
    `_launch`); recorded as LateWrites rows."""
    rows, cols = np.nonzero(late)
    if not len(rows): return
    t = tids[rows]
    found = np.stack([self.launch_elements(mem, e[rows, cols]), t, t // self.plan.grid.group,
                      self.barrier_counts(mem, t)], axis=1)
    self.late_found.setdefault(mem.name, []).append(found)

  def thread_name(self, tid: int) -> str:
    """A thread that race tracking recorded (its lane number in the launch)."""
    if tid >= 0: return str(self.plan.grid.thread(tid))
    return "several threads" if tid > -3 else f"of workgroup {-3 - tid} (before that workgroup's barrier)"


# ***** handlers: (machine, uop index, uop) -> None, or the index to continue at (blocks) *****

def _skip(m: Machine, i: int, u: UOp) -> None: pass
def _lazy(m: Machine, i: int, u: UOp) -> None: m.env[i] = LAZY  # computed when first read (indexing.py's forms)

def _define_global(m: Machine, i: int, u: UOp) -> None:
  """DEFINE_GLOBAL: buffer argument number `arg`, the caller's array (flat, the pointee's dtype, the declared size)."""

def _define_local(m: Machine, i: int, u: UOp) -> None:
  """DEFINE_LOCAL: one array per workgroup, new in each launch: an element no thread stored in this launch is
  uninitialised, and reading it is undefined (UNINITIALISED)."""

def _end_block(m: Machine, i: int, u: UOp) -> None:
  """ENDRANGE / ENDIF: the end of the block its source opened (RANGE and IF run their bodies)."""

def _define_var(m: Machine, i: int, u: UOp) -> None:
  """DEFINE_VAR: the launch's value of the var (checked against its bounds before the run), on every lane."""
  m.env[i] = LAZY

def _special(m: Machine, i: int, u: UOp) -> None:
  """SPECIAL: the lane's thread id: gidx<d> its workgroup's position and lidx<d> its position in the workgroup along
  dimension d, exact."""
  m.env[i] = LAZY

def const_value(u: UOp) -> Value:
  """The value `_const` gives a CONST uop, made once per program (Plan.constants), read-only."""
  v = np.array([u.arg], dtype=to_np(u.dtype))
  nan = dtypes.is_float(u.dtype) and np.isnan(float(u.arg))
  cert = np.full(1, Certainty.NAN_PAYLOAD, LEVEL) if nan else None
  for a in (v, cert):
    if a is not None: a.flags.writeable = False
  return Value(v, cert, settled=nan)

def _const(m: Machine, i: int, u: UOp) -> None:
  """CONST: the value on every lane, EXACT, except a float NaN, whose payload the IR does not carry (NAN_PAYLOAD)."""
  m.env[i] = m.plan.constants[i]
def _index(m: Machine, i: int, u: UOp) -> None:
  """INDEX: element `idx` of the buffer, per lane; the LOAD or STORE it feeds makes the access and its checks."""
  m.env[i] = Ref(m.env[u.src[0]], u.src[1])

def _define_acc(m: Machine, i: int, u: UOp) -> None:
  """DEFINE_ACC: a register per lane, holding the initial value (with its levels)."""
  m.env[i] = m.value_of(u.src[0])

def _assign(m: Machine, i: int, u: UOp) -> None:
  """ASSIGN: the register takes the value (with its levels) on active lanes and keeps its own elsewhere; the ASSIGN
  reads as the register. Under uncertain control the register joins the control level on those lanes."""
  _set_register(m, u.src[0], m.value_of(u.src[1]))

def _set_register(m: Machine, acc: int, new: Value) -> None:
  real = m.control.real
  if real is None and m.control.level is None:
    m.env[acc] = new
    return
  old, act = m.env[acc], np.ones(1, bool) if real is None else real
  v = np.where(_lanewise(act, new.v.ndim), new.v, old.v)
  ctl = m.uncertain(None)
  cert = _sel(_lanewise(act, v.ndim), new.cert, old.cert)
  m.env[acc] = _with_levels(v, join(cert, None if ctl is None else _lanewise(ctl, v.ndim)))

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
      m.use(i, "loop bound", m.undefined_here(bound), lambda lane: (_at(s.v, lane), _at(e.v, lane)), j)
  loop = m.plan.lane_loops.get(i)
  exact = all(x.v.shape[0] == 1 and x.cert is None for x in (s, e))
  if LOOPS_AS_LANES and loop is not None and exact and m.control.phantom is None and int(e.v[0]) - int(s.v[0]) >= 2:
    per = LANE_MEMORY // (m.control.grid.lanes * m.plan.lane_bytes)
    if per >= 2:
      per = max(2, min(per, LOOP_CHUNK_MEMORY // (m.control.grid.lanes * m.plan.lane_bytes)))
      for start in range(int(s.v[0]), int(e.v[0]), per): _run_as_lanes(m, i, loop, start, min(per, int(e.v[0]) - start))
      return end + 1
  ctl = join(_control_level(s, m.control.active), _control_level(e, m.control.active))
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
  outer = m.control
  end, lanes = m.plan.block_end[i], outer.grid.lanes
  grid = outer.grid.extend(n, loop.iteration_major)
  def rep(mask: np.ndarray | None) -> np.ndarray | None: return None if mask is None or mask.shape[0] == 1 else grid.spread(mask)
  handlers = [_skip if j in loop.folded else h for j, h in enumerate(outer.handlers)] if loop.folded else outer.handlers
  m.control = Control(grid, handlers, active=rep(outer.active), real=rep(outer.real), level=rep(outer.level))
  m.axes[i] = (len(m.control.grid.sizes) - 1, start)
  m.env[i] = LAZY
  m.regions.append((i, {}))
  try:
    m.run(i + 1, end)
    terms = [[_chain_term(m, step) for step in scan.steps] for scan in loop.scans]
  finally:
    _, restore = m.regions.pop()
    m.env[i + 1:end] = [None] * (end - i - 1)  # dead after the loop (loops.py)
    for j, x in restore.items(): m.env[j] = x
    del m.axes[i]
    m.settle_origins()
    m.control = outer
  m.regions.append((i, {}))  # the folds' findings join the loop's
  try:
    tiled = _fold_tile(m, loop, terms, n, lanes)
    for k, (scan, ts) in enumerate(zip(loop.scans, terms)):
      if k not in tiled: _fold(m, i, scan, ts, start, n, lanes, loop.iteration_major)
  finally: m.regions.pop()
  if m.strict and not m.regions and not m.chunked: m.raise_first()

def _chain_term(m: Machine, step: Step) -> Value | Product:
  """A chain step's term at the end of its loop's body: its value; for a product the fold makes itself (Step.product),
  its exact operands as a Product, or, when an operand has levels, its value made now by its own handler."""
  if step.product is None: return m.value_of(step.term)
  x, y = (m.value_of(j) for j in step.product)
  if x.cert is None and y.cert is None: return Product(m.plan.ufuncs[step.term], x.v, y.v)
  m.plan.handlers[step.term](m, step.term, m.plan.uops[step.term])
  return m.value_of(step.term)

def _fold(m: Machine, i: int, scan: Scan, terms: list[Value | Product], start: int, n: int, lanes: int,
          iteration_major: bool) -> None:
  """The register of a scan's accumulator after n iterations: loops.fold over the terms of every iteration, in order;
  levels as the certainty rule says for a chain of ALU ops, then ASSIGN's rule on the active lanes."""
  if not scan.steps: return
  acc = m.env[scan.acc]
  tail = acc.v.shape[1:]
  def chain(arrs: list[np.ndarray | None], fill: Any = EXACT) -> np.ndarray | None:
    """Each step's per-lane arrays as one (outer lane, iteration * step, *vector) array, None when all are None."""
    if all(a is None for a in arrs): return None
    full = [iterations(np.broadcast_to(fill, (1,) + tail) if a is None else a, n, lanes, iteration_major) for a in arrs]
    return np.stack(full, axis=2).swapaxes(0, 1).reshape((lanes, n * len(arrs)) + tail)
  def every_step(levels: np.ndarray | None) -> np.ndarray | None: return None if levels is None else levels.max(axis=1)
  dt = m.plan.uops[scan.steps[0].node].dtype.scalar()
  fn = alu.ufunc_rule(scan.op, dt)
  def rows(a: np.ndarray) -> np.ndarray: return iterations(a, n, lanes, iteration_major)
  if fn is not None and acc.cert is None and all(isinstance(t, Product) or t.cert is None for t in terms):  # exact operands
    views = [Product(t.fn, rows(t.a), rows(t.b)) if isinstance(t, Product) else rows(t.v) for t in terms]
    done = fold_ufunc(fn, np.broadcast_to(acc.v, (lanes,) + tail), views)
    _set_register(m, scan.acc, _with_levels(done.values, done.cert))
    return
  terms = [_ufunc_value(t.fn(t.a, t.b)) if isinstance(t, Product) else t for t in terms]
  out = fold(scan.op, dt, np.broadcast_to(acc.v, (lanes,) + tail), chain([t.v for t in terms]),
             [step.acc_first for step in scan.steps])
  if out.undefined_step is not None:
    s, lane, ub, reason, operands = out.undefined_step
    m.loops[i] = start + s // len(scan.steps)
    describe = lambda k: (ub, reason, tuple(map(_py, operands)))
    if ub.deferred: m.defer(scan.steps[s % len(scan.steps)].node, np.array([lane]), describe)
    else: m.ub(scan.steps[s % len(scan.steps)].node, "alu", np.array([lane]), describe)
  cert = join(_carried_levels(acc), carry(every_step(chain([t.cert for t in terms]))), out.cert)
  _set_register(m, scan.acc, _with_levels(out.values, cert))

def _fold_tile(m: Machine, loop: LaneLoop, terms: list[list[Value | Product]], n: int, lanes: int) -> set[int]:
  """The folds of loop.outer's tile at once (loops.fold_outer) when their accumulators are exact scalars, every term
  is a Product and the lanes are wide; the same registers `_fold` would give each. Returns the scans it folded."""
  tile = loop.outer
  if tile is None or lanes < ROW_STEPS_FROM: return set()
  scans, ts = [loop.scans[k] for k in tile.scans], [terms[k] for k in tile.scans]
  accs = [m.env[scan.acc] for scan in scans]
  if any(a.cert is not None or a.v.ndim != 1 for a in accs) or not all(isinstance(t, Product) for row in ts for t in row):
    return set()
  rows, cols = len(tile.steps[0].rows), len(tile.steps[0].cols)
  def operand(p: Product, first: bool) -> np.ndarray: return iterations(p.a if first else p.b, n, lanes, loop.iteration_major)
  steps = []
  for s, step in enumerate(tile.steps):
    x = _side_by_side([operand(ts[r * cols][s], step.row_first[r * cols]) for r in range(rows)])
    y = _side_by_side([operand(ts[c][s], not step.row_first[c]) for c in range(cols)])
    steps.append(Product(ts[0][s].fn, x, y))
  fn = alu.ufunc_rule(scans[0].op, m.plan.uops[scans[0].steps[0].node].dtype.scalar())
  done = fold_outer(fn, [np.broadcast_to(a.v, (lanes,)) for a in accs], steps)
  for k, scan in enumerate(scans):
    _set_register(m, scan.acc, _with_levels(done.values[k], None if done.cert is None else done.cert[k]))
  return set(tile.scans)

def _side_by_side(arrays: list[np.ndarray]) -> np.ndarray:
  """(n, L) arrays as one (n, k, L) array: a view where they are one array's equally spaced rows (the GEPs of a vector
  LOAD, which lays each element out across the lanes), else a copy."""
  first = arrays[0]
  at = [a.__array_interface__["data"][0] for a in arrays]
  step = at[1] - at[0] if len(at) > 1 else 0
  if first.base is not None and all(a.base is first.base and a.strides == first.strides and a.shape == first.shape
                                    and at[k] == at[0] + k * step for k, a in enumerate(arrays)):
    return np.lib.stride_tricks.as_strided(first, (first.shape[0], len(arrays), first.shape[1]),
                                           (first.strides[0], step, first.strides[1]), writeable=False)
  return np.stack(arrays, axis=1)

def _if(m: Machine, i: int, u: UOp) -> int:
  """IF: the body runs on the active lanes whose gate is true (not at all when there are none). A lane whose gate is
  loose or undefined and false runs it as a phantom lane: it writes nothing, but the elements it would store become
  loose (undefined), and so does every accumulator the block assigns (control rule)."""
  g = m.value_of(u.src[0])
  m.use(i, "condition", m.undefined_here(g), lambda lane: (_at(g.v, lane),), u.src[0])
  ctl = _control_level(g, m.control.active)
  act, lost = m.narrow(g.v, ctl)
  if ctl is not None and ctl.any():
    m.spoil(i, ctl)
    phantom = lost | ((ctl != EXACT) & ~g.v)  # lanes that skip the block but might not
    run = np.broadcast_to(act | phantom, (m.control.grid.lanes,))
    if run.any(): m.block(i, run, phantom, ctl)
    return m.plan.block_end[i] + 1
  if act.shape[0] == 1:
    if act[0]: m.block(i, m.control.active)
  elif act.any(): m.block(i, act)
  return m.plan.block_end[i] + 1

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
  gate = m.value_of(u.src[2]) if len(u.src) == 3 else None
  if gate is not None: m.use(i, "gate", m.undefined_here(gate), lambda lane: (_index_at(m, ref, lane),), u.src[2])
  site, bad = m.locate(i, u, ref, count, m.gated(gate))
  v, cert = _read(m, ref, site, bad)
  if m.control.phantom is not None: v = _phantom_read(m, ref, count, gate, v)
  loaded = _with_levels(v, where_undefined(cert, _unsafe_reads(m, i, ref.mem, site, count)))
  m.env[i] = loaded if gate is None else _alternative(gate, loaded, m.value_of(u.src[1]))

def _read(m: Machine, ref: Ref, site: Site, bad: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
  """(values, levels) of the elements at `site`: memory's levels, joined with the index's carried level, UNDEFINED
  where the index was out of bounds or undefined (`bad`)."""
  mem, grid = ref.mem, m.control.grid
  v = read(mem.data, site, grid, snapshot=mem.mutable)
  cert = None if mem.cert is None else read(mem.cert, site, grid, snapshot=True)
  shaky = None if ref.idx in m.plan.forms else _carried_levels(m.value_of(ref.idx))  # an uncertain index: so is what is read
  if shaky is not None: cert = join(cert, _lanewise(shaky, v.ndim))
  return v, where_undefined(cert, None if bad is None else _lanewise(bad, v.ndim))

def _phantom_read(m: Machine, ref: Ref, count: int, gate: Value | None, v: np.ndarray) -> np.ndarray:
  """The values with the phantom lanes' reads filled in: lanes that only might run read memory too (unchecked), for
  the indices of what they might store."""
  phantom, active = m.control.phantom, m.control.active
  ph = phantom if active is None else phantom & active
  ok, e = m.addresses(ref, count, ph if gate is None else ph & gate.v)
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
  lanes, e = elements(site, grid)
  found = np.zeros((len(lanes), count), dtype=bool)
  def defer(bad: np.ndarray, describe: Callable[[int, int], tuple[UB, str, tuple]]) -> None:
    rows = np.flatnonzero(bad.any(axis=1))
    if len(rows): m.defer(i, lanes[rows], lambda k: describe(rows[k], int(np.argmax(bad[rows[k]]))))
  if mem.local:
    unset = ~mem.written[e]
    defer(unset, lambda r, c: (UB.UNINITIALISED, f"read of {m.element_name(mem, int(e[r, c]))}, which was never written",
                               (int(e[r, c] % mem.size),)))
    found |= unset
  if mem.tracked:
    tids = grid.tids(lanes)
    for kind, (hit, other) in track_load(mem, tids, e).items():
      defer(hit, lambda r, c, kind=kind, other=other: (UB.RACY_READ,
        f"{kind} race: thread {m.thread_name(int(other[r, c]))} wrote {m.element_name(mem, int(e[r, c]))} and thread "
        f"{grid.thread(lanes[r])} reads it with no barrier between", (int(e[r, c] % mem.size),)))
      found |= hit
    if mem.name in m.late.rows:
      late, writer = m.late.racy(mem.name, m.launch_elements(mem, e), tids, tids // grid.group, m.barrier_counts(mem, tids))
      defer(late, lambda r, c: (UB.RACY_READ, f"write after read race: thread {grid.thread(lanes[r])} reads "
        f"{m.element_name(mem, int(e[r, c]))} and thread {m.thread_name(int(writer[r, c]))} writes it after with no "
        f"barrier between", (int(e[r, c] % mem.size),)))
      found |= late
  if not found.any(): return None
  full = np.zeros((grid.lanes, count), dtype=bool)
  full[lanes] = found
  return full if count > 1 else full[:, 0]

def _index_at(m: Machine, ref: Ref, lane: int) -> int:
  """The index of an access on `lane` (for a report)."""
  form = m.plan.forms.get(ref.idx)
  if form is None: return int(_at(m.value_of(ref.idx).v, lane))
  return int(np.broadcast_to(m.control.grid.evaluate(*m.place(form)), (m.control.grid.lanes,))[lane])

def _alternative(gate: Value, loaded: Value, alt: Value) -> Value:
  """A gated LOAD's value: what it loaded where the gate is true, its alternative where false. Its levels are those of
  the value chosen, joined with the gate's carried level (an uncertain gate: the other value might be chosen)."""
  cond = _lanewise(gate.v, loaded.v.ndim)
  ctl = None if gate.cert is None else _lanewise(_carried_levels(gate), loaded.v.ndim)
  return _with_levels(np.where(cond, loaded.v, alt.v), join(ctl, _sel(cond, loaded.cert, alt.cert)))

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
    return _write(m, i, ref, value, m.control.real, count)  # nothing uncertain: what follows changes nothing
  gate = m.value_of(u.src[2]) if len(u.src) == 3 else None
  if gate is not None: m.use(i, "gate", m.undefined_here(gate), lambda lane: (_index_at(m, ref, lane),), u.src[2])
  live = m.gated(gate)
  stored = None if u.arg == MOVE else m.undefined_here(value)  # a MOVE carries undefined lanes: not a use
  if stored is not None and live is not None: stored = stored & live
  m.use(i, "stored", stored, lambda lane: (_index_at(m, ref, lane),), u.src[1],
        lambda lane: m.element_name(ref.mem, _index_at(m, ref, lane)))
  ctl = m.uncertain(gate)
  shaky = ctl if ref.idx in m.plan.forms else join(ctl, _carried_levels(m.value_of(ref.idx)))  # + an uncertain index
  if shaky is not None: value = _with_levels(value.v, join(value.cert, _lanewise(shaky, value.v.ndim)))
  _write(m, i, ref, value, live, count)
  if ctl is None or not ctl.any(): return
  # lanes whose control is uncertain and did not store might have: the element they would store to joins the control
  # level (unless their gate is exactly false; an undefined or out-of-bounds index marks nothing)
  ctl = np.broadcast_to(ctl, (m.control.grid.lanes,))
  maybe = (ctl != EXACT) & (True if live is None else ~live)
  if gate is not None: maybe = maybe & (gate.v if gate.cert is None else gate.v | (gate.cert != EXACT))
  ok, e = m.addresses(ref, count, maybe)
  if len(ok): np.maximum.at(ref.mem.levels(), e, np.broadcast_to(ctl[ok][:, None], e.shape))

def _write(m: Machine, i: int, ref: Ref, value: Value, live: np.ndarray | None, count: int) -> None:
  """The STORE of `value` (count elements per lane) through ref on the live lanes, with its checks and tracking."""
  mem, grid = ref.mem, m.control.grid
  if live is not None and not live.any(): return
  site, _ = m.locate(i, m.plan.uops[i], ref, count, live)
  if site.live is not None and not site.live.any(): return
  races = before = None
  if mem.tracked or mem.local: lanes, e = elements(site, grid)
  if mem.tracked:
    tids = grid.tids(lanes)
    races = track_store(mem, tids, e, as_bits(_per_element(value.v, lanes, e.shape, grid).astype(mem.data.dtype)))
    m.late_write(mem, tids, e, races.late)
    m.ub_elements(i, "write/write", lanes, e, races.bad, lambda r, c: (UB.RACE,
      f"write/write race: threads {grid.thread(lanes[r])} and {m.thread_name(int(races.other[r, c]))} write different "
      f"bits to {m.element_name(mem, int(e[r, c]))} with no barrier between", (int(e[r, c] % mem.size),)))
    if mem.cert is not None and races.earlier.any(): before = mem.cert[e]
  write(mem.data, site, grid, value.v)
  if value.cert is not None or mem.cert is not None:
    write(mem.levels(), site, grid, np.zeros((1,) + site.tail(), dtype=LEVEL) if value.cert is None else value.cert)
    if races is not None:
      new = np.zeros(e.shape, LEVEL) if value.cert is None else _per_element(value.cert, lanes, e.shape, grid)
      join_met_levels(mem, e, races, new, before)
  if mem.local: mem.written[e] = True
  if races is not None and races.bad.any(): mem.levels()[e[races.bad]] = UNDEFINED

def _per_element(x: np.ndarray, lanes: np.ndarray, shape: tuple[int, ...], grid: Grid) -> np.ndarray:
  """A value's (or its levels') elements on `lanes`, shaped like their addresses (L, count)."""
  return np.broadcast_to(x, (grid.lanes,) + x.shape[1:])[lanes].reshape(shape)

def _settle(m: Machine, i: int, xs: list[Value], out: Any, carried: np.ndarray | None, settled: bool = True) -> None:
  """Stores an alu Outcome as uop i's value, with its levels joined with the operands' `carried` ones (`settled`: they
  hold no middle level, as carried levels never do), after reporting the active lanes it leaves undefined (UNDEFINED
  only there: inactive lanes compute harmless garbage)."""
  if out.undefined is None and out.loose is None and carried is None:  # every element EXACT
    m.env[i] = Value(out.values)
    return
  own = of_loose(out.values, out.loose, out.looseness)
  if out.undefined is not None:
    real = m.control.real
    bad = out.undefined if real is None else out.undefined & _lanewise(real, out.undefined.ndim)
    lanes = np.flatnonzero(np.broadcast_to(_per_lane(bad), (m.control.grid.lanes,)))
    describe = lambda k: (*_why(m, i, xs, int(lanes[k]), out), tuple(_at(x.v, lanes[k]) for x in xs))
    if out.kind.deferred: m.defer(i, lanes, describe)
    else: m.ub(i, "alu", lanes, describe)
    own = where_undefined(own, bad)
  own_settled = out.loose is None or out.looseness is Certainty.NAN_PAYLOAD
  m.env[i] = _with_levels(out.values, join(own, carried), settled and own_settled)

def _why(m: Machine, i: int, xs: list[Value], lane: int, out: Any) -> tuple[UB, str]:
  """(kind, reason) of uop i's undefined behaviour on `lane`: its rule run again on that lane's operands (an Outcome's
  kind and reason are its first undefined element's, which need not be the lane reported)."""
  u, ops = m.plan.uops[i], [x.v[lane:lane + 1] if x.v.shape[0] > 1 else x.v for x in xs]
  src = m.plan.uops[u.src[-1]].dtype.scalar()
  if u.op is Ops.CAST: again = alu.exec_cast(ops[0], src, u.dtype.scalar())
  elif u.op is Ops.BITCAST: again = alu.exec_bitcast(ops[0], src, u.dtype.scalar())
  elif u.op in GroupOp.ALU: again = alu.exec_alu(u.op, src, *ops)
  else: again = out
  return again.kind, again.reason

def _alu(m: Machine, i: int, u: UOp) -> None:
  """ALU ops: alu's rule for the op on the operands' scalar dtype, element by element; an element's level is the join
  of the rule's and the carried levels of the operand elements it is computed from."""
  xs = [m.value_of(j) for j in u.src]
  out = alu.run_alu(u.op, m.plan.operand_dtype[i], *[x.v for x in xs])
  _settle(m, i, xs, out, _inherited_levels(xs))

def _ufunc_alu(m: Machine, i: int, u: UOp) -> None:
  """An ALU op whose rule is one numpy ufunc (alu.ufunc_rule), on exact operands: that ufunc, and NAN_PAYLOAD on the
  NaNs it returns, as `_alu` would give them (not looked for where no op reads them: Plan.levels_unread); operands with
  levels go through `_alu`."""
  wrap = m.plan.ufunc_values[i]
  if len(u.src) == 1:
    x = m.value_of(u.src[0])
    if x.cert is not None: return _alu(m, i, u)
    m.env[i] = wrap(m.plan.ufuncs[i](x.v))
    return
  x, y = m.value_of(u.src[0]), m.value_of(u.src[1])
  if x.cert is not None or y.cert is not None: return _alu(m, i, u)
  m.env[i] = wrap(m.plan.ufuncs[i](x.v, y.v))

def _ufunc_value(v: np.ndarray) -> Value:
  """The value of a ufunc rule on exact operands: exact, except NAN_PAYLOAD on the NaNs it returns."""
  if v.dtype.kind != "f" or v.size == 0: return Value(v)
  return _scalar_float_value(v) if v.ndim == 1 else _float_value(v, np.maximum.reduce(v, axis=None))

def _scalar_float_value(v: np.ndarray) -> Value:
  """_ufunc_value of a float array of one dimension (a scalar dtype's lanes). Its sum of squares is NaN exactly when an
  element is (IEEE: NaN propagates, and sums of non-negative terms never meet inf - inf): dot is the cheapest numpy
  call that computes it."""
  return _float_value(v, v.dot(v))

def _float_value(v: np.ndarray, total: Any) -> Value:
  """v exact, except NAN_PAYLOAD on its NaNs, where `total` (a reduction of v that propagates NaN) says it has any."""
  return Value(v) if total == total else Value(v, np.isnan(v).view(LEVEL), True)

def _constant_alu(m: Machine, i: int, u: UOp) -> None:
  """IDIV, MOD, SHL or SHR by a constant with which its rule is defined on every lane (alu.constant_rule): that rule of
  the exact first operand; an operand with levels goes through `_alu`."""
  x = m.value_of(u.src[0])
  if x.cert is not None: return _alu(m, i, u)
  m.env[i] = Value(m.plan.constant_rules[i](x.v))

def _where(m: Machine, i: int, u: UOp) -> None:
  """WHERE: alu's rule; an element's level is the chosen value's, joined with the condition's carried level."""
  c, a, b = m.value_of(u.src[0]), m.value_of(u.src[1]), m.value_of(u.src[2])
  out = alu.run_alu(u.op, m.plan.operand_dtype[i], c.v, a.v, b.v)
  if c.cert is None and a.cert is None and b.cert is None:
    m.env[i] = Value(out.values)
    return
  chosen = _sel(c.v, a.cert, b.cert)  # moved, not carried
  _settle(m, i, [c, a, b], out, join(_carried_levels(c), chosen), _all_settled([a, b]))

def _convert(m: Machine, i: int, u: UOp) -> None:
  """CAST / BITCAST: alu's rule from the source's scalar dtype to the result's, element by element; levels as ALU
  ops', except that BITCAST, which shows a NaN's payload, carries a NAN_PAYLOAD operand as UNKNOWN (carry_bits)."""
  x = m.value_of(u.src[0])
  rule = m.plan.conversions.get(i)
  if rule is not None and x.cert is None:  # alu.conversion_rule on an exact operand
    m.env[i] = Value(rule(x.v)) if u.op is Ops.BITCAST else _ufunc_value(rule(x.v))
    return
  carried = carry_bits(x.cert) if u.op is Ops.BITCAST else _carried_levels(x)
  _settle(m, i, [x], alu.run_conversion(u.op, x.v, m.plan.operand_dtype[i], u.dtype.scalar()), carried)

def _vectorize(m: Machine, i: int, u: UOp) -> None:
  """VECTORIZE: the vector of its scalar operands, element k the k-th operand (with its level)."""
  xs = [m.value_of(j) for j in u.src]
  values = _stacked([x.v for x in xs])
  if all(x.cert is None for x in xs): m.env[i] = Value(values)
  else: m.env[i] = Value(values, _stacked([EXACT if x.cert is None else x.cert for x in xs], LEVEL, len(values)),
                         _all_settled(xs))

def _stacked(arrays: Sequence[Any], dtype: Any = None, lanes: int = 0) -> np.ndarray:
  """Per-lane arrays (or one element for every lane) as one (lanes, len(arrays)) array: element k of a row is array k's
  (lanes: at least this many rows)."""
  n = max([lanes] + [a.shape[0] for a in arrays if isinstance(a, np.ndarray)])
  out = np.empty((n, len(arrays)), arrays[0].dtype if dtype is None else dtype)
  for k, a in enumerate(arrays): out[:, k] = a
  return out

def _gep(m: Machine, i: int, u: UOp) -> None:
  """GEP: the elements `arg` of a vector (with their levels): a scalar for one, else a vector in that order."""
  x, sel = m.value_of(u.src[0]), list(u.arg) if len(u.arg) > 1 else u.arg[0]
  def pick(a: np.ndarray | None) -> np.ndarray | None: return None if a is None else np.ascontiguousarray(a[:, sel])
  m.env[i] = Value(pick(x.v), pick(x.cert), x.settled)

def _wmma(m: Machine, i: int, u: UOp) -> None:
  """WMMA: per thread, d[m][n] = c[m][n] + sum_k a[m][k] * b[k][n], every product and sum in float64 in the order c,
  k = 0, 1, ..., K-1, then one rounding to the result dtype (alu's CAST); undefined where an element of a's row, b's
  column or c is. Products of inputs up to float32 are exact in float64, so for float16 / bfloat16 inputs and small K
  the result is the exactly rounded one. Hardware accumulates in other orders and precisions, so every element is
  ERROR_BOUND (a NaN: NAN_PAYLOAD; every order gives NaN there), joined with the carried levels of a's row, b's
  column and c, within an error bound: any order of the K additions, each rounded (to nearest or toward zero) in a
  precision at least the result dtype's, products exact or rounded likewise, gives
  |d - exact| <= gamma(K + 1) * S + (2K + 1) * tau, where S = |c| + sum_k |a_k * b_k|, gamma(n) = n eps / (1 - n eps),
  eps is the result dtype's machine epsilon and tau its smallest subnormal (`wmma_error_bound`; unbounded when
  (K + 1) eps >= 1)."""
  N, M, K = u.arg
  a, b, c = (m.value_of(j) for j in u.src)
  A, B = a.v.astype(np.float64).reshape(-1, M, K), b.v.astype(np.float64).reshape(-1, K, N)
  acc = c.v.astype(np.float64).reshape(-1, M, N)
  with np.errstate(all="ignore"):  # inf * 0 and inf - inf are NaN, as the rule says
    for k in range(K): acc = acc + A[:, :, k:k + 1] * B[:, k:k + 1, :]
  shape = (-1, M * N) if u.dtype.count > 1 else (-1,)  # an M*N == 1 result is a scalar: one value per lane
  out = alu.exec_cast(acc.reshape(shape), dtypes.float64, u.dtype.scalar())
  carried = None
  if a.cert is not None or b.cert is not None or c.cert is not None:
    rows = np.zeros((1, M, 1), LEVEL) if a.cert is None else _carried_levels(a).reshape(-1, M, K).max(axis=2)[:, :, None]
    cols = np.zeros((1, 1, N), LEVEL) if b.cert is None else _carried_levels(b).reshape(-1, K, N).max(axis=1)[:, None, :]
    cu = np.zeros((1, M, N), LEVEL) if c.cert is None else _carried_levels(c).reshape(-1, M, N)
    carried = join(rows, cols, cu).reshape(shape)
  bounded = replace(out, loose=np.ones(out.values.shape, dtype=bool), looseness=Certainty.ERROR_BOUND)
  _settle(m, i, [a, b, c], bounded, carried)

def wmma_error_bound(dt, k: int, magnitude: np.ndarray) -> np.ndarray:
  """The WMMA rule's error bound (see `_wmma`) for result dtype dt, reduction length k and S = `magnitude`."""
  e, m = dtypes.finfo(dt)
  eps, tau = 2.0 ** -m, 2.0 ** (2 - 2 ** (e - 1) - m)
  n = k + 1
  gamma = n * eps / (1 - n * eps) if n * eps < 1 else np.inf  # the bound of n rounded steps
  return gamma * np.asarray(magnitude, np.float64) + (2 * k + 1) * tau

# ***** inline forms: a handler's path where nothing is uncertain, as a step of a straight-line stretch (straight.py) *****
# form(plan, i, u, direct) -> step(m, env): does what uop i's handler does where the operands are exact (and the access
# plain), and calls the handler elsewhere; direct(j): uop j's Value is env[j] itself, else it is read by value_of.

def _const_step(plan: Plan, i: int, u: UOp, direct: Callable[[int], bool]) -> Callable:
  value = plan.constants[i]
  def step(m: Machine, env: list) -> None: env[i] = value
  return step

def _lazy_step(plan: Plan, i: int, u: UOp, direct: Callable[[int], bool]) -> Callable:
  def step(m: Machine, env: list) -> None: env[i] = LAZY
  return step

def _index_step(plan: Plan, i: int, u: UOp, direct: Callable[[int], bool]) -> Callable:
  buf, idx = u.src
  def step(m: Machine, env: list) -> None: env[i] = Ref(env[buf], idx)
  return step

def _unary_step(i: int, u: UOp, direct: Callable[[int], bool], rule: Callable, wrap: Callable, handler: Callable,
                keep_settled: bool = False) -> Callable:
  """The step of an op whose value on an exact operand x is wrap(rule(x.v)) (keep_settled: with x's `settled`)."""
  a = u.src[0]
  da = direct(a)
  def step(m: Machine, env: list) -> None:
    x = env[a] if da else m.value_of(a)
    if x.cert is not None: handler(m, i, u)
    elif keep_settled: env[i] = wrap(rule(x.v), None, x.settled)
    else: env[i] = wrap(rule(x.v))
  return step

def _ufunc_alu_step(plan: Plan, i: int, u: UOp, direct: Callable[[int], bool]) -> Callable:
  fn, wrap = plan.ufuncs[i], plan.ufunc_values[i]
  if len(u.src) == 1: return _unary_step(i, u, direct, fn, wrap, _ufunc_alu)
  a, b = u.src
  da, db = direct(a), direct(b)
  def step(m: Machine, env: list) -> None:
    x = env[a] if da else m.value_of(a)
    y = env[b] if db else m.value_of(b)
    if x.cert is None and y.cert is None: env[i] = wrap(fn(x.v, y.v))
    else: _ufunc_alu(m, i, u)
  return step

def _constant_alu_step(plan: Plan, i: int, u: UOp, direct: Callable[[int], bool]) -> Callable:
  return _unary_step(i, u, direct, plan.constant_rules[i], Value, _constant_alu)

def _convert_step(plan: Plan, i: int, u: UOp, direct: Callable[[int], bool]) -> Callable | None:
  rule = plan.conversions.get(i)
  if rule is None: return None
  return _unary_step(i, u, direct, rule, Value if u.op is Ops.BITCAST else _ufunc_value, _convert)

def _gep_step(plan: Plan, i: int, u: UOp, direct: Callable[[int], bool]) -> Callable:
  sel = list(u.arg) if len(u.arg) > 1 else u.arg[0]
  def pick(v: np.ndarray) -> np.ndarray: return np.ascontiguousarray(v[:, sel])
  return _unary_step(i, u, direct, pick, Value, _gep, keep_settled=True)

def _where_step(plan: Plan, i: int, u: UOp, direct: Callable[[int], bool]) -> Callable:
  (c, a, b), select = u.src, alu.select
  dc, da, db = direct(c), direct(a), direct(b)
  def step(m: Machine, env: list) -> None:
    x = env[c] if dc else m.value_of(c)
    y = env[a] if da else m.value_of(a)
    z = env[b] if db else m.value_of(b)
    if x.cert is None and y.cert is None and z.cert is None: env[i] = Value(select(x.v, y.v, z.v))
    else: _where(m, i, u)
  return step

def _vectorize_step(plan: Plan, i: int, u: UOp, direct: Callable[[int], bool]) -> Callable:
  srcs = [(j, direct(j)) for j in u.src]
  def step(m: Machine, env: list) -> None:
    xs = [env[j] if dj else m.value_of(j) for j, dj in srcs]
    if all(x.cert is None for x in xs): env[i] = Value(_stacked([x.v for x in xs]))
    else: _vectorize(m, i, u)
  return step

def _plain_access(plan: Plan, u: UOp) -> tuple[int, tuple] | None:
  """(buffer uop, index form) of a LOAD or STORE with no gate through an affine index into a global buffer that needs
  no race tracking; None for any other."""
  buf, idx = plan.uops[u.src[0]].src
  ungated = len(u.src) == (1 if u.op is Ops.LOAD else 2)
  plain = ungated and idx in plan.forms and plan.uops[buf].op is Ops.DEFINE_GLOBAL and buf in plan.free
  return (buf, plan.forms[idx]) if plain else None

def _load_step(plan: Plan, i: int, u: UOp, direct: Callable[[int], bool]) -> Callable | None:
  plain = _plain_access(plan, u)
  if plain is None: return None
  (buf, form), count = plain, u.dtype.count
  def step(m: Machine, env: list) -> None:
    v = _loaded(m, env[buf], form, count)
    if v is None: _load(m, i, u)
    else: env[i] = Value(v)
  return step

def _store_step(plan: Plan, i: int, u: UOp, direct: Callable[[int], bool]) -> Callable | None:
  plain = _plain_access(plan, u)
  if plain is None: return None
  (buf, form), a, count = plain, u.src[1], plan.uops[u.src[1]].dtype.count
  da = direct(a)
  def step(m: Machine, env: list) -> None:
    x = env[a] if da else m.value_of(a)
    if x.cert is not None or not _stored(m, env[buf], form, count, x.v): _store(m, i, u)
  return step

def _in_bounds(m: Machine, mem: Memory, form: tuple, count: int) -> tuple[tuple[int, ...], int] | None:
  """Where an access through affine `form` lands (Machine.place) when it is in bounds on every lane and nothing about
  it is uncertain (no phantom lanes, no levels in memory); None where its handler must run."""
  if mem.cert is not None or m.control.phantom is not None: return None
  coef, off = m.place(form)
  lo, hi = m.control.grid.span(coef, off)
  return None if lo < 0 or hi > mem.size - count else (coef, off)

def _loaded(m: Machine, mem: Memory, form: tuple, count: int) -> np.ndarray | None:
  """What `_load` reads through a plain access (`_plain_access`) where `_in_bounds` finds it; None elsewhere."""
  view = _in_bounds(m, mem, form, count)
  return None if view is None else read_view(mem.data, view, count, m.control.grid, mem.mutable)

def _stored(m: Machine, mem: Memory, form: tuple, count: int, values: np.ndarray) -> bool:
  """Stores `values` as `_store` would through a plain access (`_plain_access`) where `_in_bounds` finds it, every
  lane really runs, control is exact and the lanes' elements are one stride apart (memory.lane_view); False (nothing
  done) elsewhere."""
  if m.control.real is not None or m.control.level is not None: return False
  view = _in_bounds(m, mem, form, count)
  if view is None or (m.control.grid.lanes > 1 and not any(view[0])): return False  # many lanes, one element: handler
  lanes = lane_view(mem.data, view, count, m.control.grid)
  if lanes is None: return False
  lanes[...] = values
  return True

INLINE = {_const: _const_step, _lazy: _lazy_step, _special: _lazy_step, _define_var: _lazy_step, _index: _index_step,
          _ufunc_alu: _ufunc_alu_step, _constant_alu: _constant_alu_step, _convert: _convert_step, _gep: _gep_step,
          _where: _where_step, _vectorize: _vectorize_step, _load: _load_step, _store: _store_step}
QUIET = {_define_global, _define_local, _end_block, _skip}  # handlers that do nothing
# handlers that always leave a plain Value in the env (a later step of the stretch reads it from there directly)
VALUES = {_const, _ufunc_alu, _alu, _constant_alu, _where, _convert, _vectorize, _gep, _load, _wmma}

HANDLERS: dict[Ops, Callable[[Machine, int, UOp], int | None]] = {
  Ops.DEFINE_GLOBAL: _define_global, Ops.DEFINE_LOCAL: _define_local, Ops.DEFINE_VAR: _define_var, Ops.SPECIAL: _special,
  Ops.CONST: _const, Ops.DEFINE_ACC: _define_acc, Ops.ASSIGN: _assign, Ops.RANGE: _range, Ops.ENDRANGE: _end_block,
  Ops.IF: _if, Ops.ENDIF: _end_block,
  Ops.INDEX: _index, Ops.LOAD: _load, Ops.STORE: _store, Ops.BARRIER: _barrier,
  Ops.VECTORIZE: _vectorize, Ops.GEP: _gep, Ops.CAST: _convert, Ops.BITCAST: _convert, Ops.WMMA: _wmma,
  **{op: _alu for op in GroupOp.ALU}, Ops.WHERE: _where}
assert set(HANDLERS) == set(Ops), "every op needs a handler"
