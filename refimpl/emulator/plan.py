"""What a run knows before it starts: the analysis of a program for its vals, and the choice of what runs each uop.

Speed. indexing.py analyses the int32 index arithmetic before the run: an affine index is a strided view of memory
(no gather), its bounds need no scan, the integer ops that only feed indices are never executed, and race tracking
runs only on buffers where two threads could meet (memory.py). That analysis and the verification are done once per
(program, vals) and reused by later runs (`Plan`). A loop whose bounds differ per thread costs one pass over all lanes
per counter value from the smallest start to the largest end. From a plan's STRAIGHT_FROM-th run on, each stretch of
ops between block boundaries runs as a list of steps (straight.py), which do what the handlers do.

The choice is declared, not computed from code: each op has a `Kind` (OP_KINDS), the plan refines it per uop where it
knows more (an int value with an affine form is LAZY; an ALU op whose rule is one numpy ufunc is UFUNC_ALU, one by a
constant that leaves its rule defined everywhere CONSTANT_ALU), and dispatch.HANDLERS maps each kind to its handler.
An op that has an exact path (values.ExactPath: what it computes on exact operands) has it in `Plan.exact`, made here
once from alu's rules, and run by its handler and its straight-line step alike.
"""
from __future__ import annotations

import enum
import functools
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from refimpl.dtype import PtrDType, dtypes, to_np
from refimpl.emulator import alu
from refimpl.emulator.certainty import LEVEL, Certainty
from refimpl.emulator.indexing import Grid, analyze, thread_form
from refimpl.emulator.loops import LaneLoop, lane_loops
from refimpl.emulator.ownership import accesses, pins, race_free
from refimpl.emulator.values import LAZY, ExactPath, Value, scalar_float_value, stacked, ufunc_value
from refimpl.ir import MOVE, GroupOp, Ops, Program, UOp, verify


class Kind(enum.Enum):
  """What runs a uop: one handler per kind (dispatch.HANDLERS)."""
  DEFINE_GLOBAL = enum.auto()
  DEFINE_LOCAL = enum.auto()
  DEFINE_VAR = enum.auto()
  SPECIAL = enum.auto()
  LAZY = enum.auto()          # an int value with an affine form: computed when first read
  CONST = enum.auto()
  DEFINE_ACC = enum.auto()
  ASSIGN = enum.auto()
  RANGE = enum.auto()
  IF = enum.auto()
  END_BLOCK = enum.auto()
  INDEX = enum.auto()
  LOAD = enum.auto()
  STORE = enum.auto()
  BARRIER = enum.auto()
  VECTORIZE = enum.auto()
  GEP = enum.auto()
  CONVERT = enum.auto()       # CAST and BITCAST
  WMMA = enum.auto()
  ALU = enum.auto()
  UFUNC_ALU = enum.auto()     # an ALU op whose rule is one numpy ufunc (alu.ufunc_rule)
  CONSTANT_ALU = enum.auto()  # IDIV, MOD, SHL, SHR by a constant that leaves the rule defined everywhere
  WHERE = enum.auto()

OP_KINDS: dict[Ops, Kind] = {
  Ops.DEFINE_GLOBAL: Kind.DEFINE_GLOBAL, Ops.DEFINE_LOCAL: Kind.DEFINE_LOCAL, Ops.DEFINE_VAR: Kind.DEFINE_VAR,
  Ops.SPECIAL: Kind.SPECIAL, Ops.CONST: Kind.CONST, Ops.DEFINE_ACC: Kind.DEFINE_ACC, Ops.ASSIGN: Kind.ASSIGN,
  Ops.RANGE: Kind.RANGE, Ops.ENDRANGE: Kind.END_BLOCK, Ops.IF: Kind.IF, Ops.ENDIF: Kind.END_BLOCK,
  Ops.INDEX: Kind.INDEX, Ops.LOAD: Kind.LOAD, Ops.STORE: Kind.STORE, Ops.BARRIER: Kind.BARRIER,
  Ops.VECTORIZE: Kind.VECTORIZE, Ops.GEP: Kind.GEP, Ops.CAST: Kind.CONVERT, Ops.BITCAST: Kind.CONVERT, Ops.WMMA: Kind.WMMA,
  **{op: Kind.ALU for op in GroupOp.ALU}, Ops.WHERE: Kind.WHERE}
assert set(OP_KINDS) == set(Ops), "every op needs a kind"

QUIET = frozenset({Kind.DEFINE_GLOBAL, Kind.DEFINE_LOCAL, Kind.END_BLOCK})  # their handlers do nothing
# kinds whose handler always leaves a plain Value in the env (a later step of a stretch reads it from there directly)
VALUES = frozenset({Kind.CONST, Kind.UFUNC_ALU, Kind.ALU, Kind.CONSTANT_ALU, Kind.WHERE, Kind.CONVERT, Kind.VECTORIZE,
                    Kind.GEP, Kind.LOAD, Kind.WMMA})
LAZY_KINDS = frozenset({Kind.LAZY, Kind.SPECIAL, Kind.DEFINE_VAR})  # their env entry is LAZY until read


def const_value(u: UOp) -> Value:
  """The value of a CONST uop, made once per program (Plan.constants), read-only."""
  v = np.array([u.arg], dtype=to_np(u.dtype))
  nan = dtypes.is_float(u.dtype) and np.isnan(float(u.arg))
  cert = np.full(1, Certainty.NAN_PAYLOAD, LEVEL) if nan else None
  for a in (v, cert):
    if a is not None: a.flags.writeable = False
  return Value(v, cert, settled=nan)

def _fixed_value(form: tuple | None) -> Value | None:
  """The value of an affine form (indexing.thread_form) that is one number, the same on every lane, else None."""
  if form is None or any(form[0]) or form[1]: return None
  v = np.array([form[2]], np.int64).astype(np.int32)  # as Machine.value_of evaluates it
  v.flags.writeable = False
  return Value(v)

def _vector(*elements: np.ndarray) -> np.ndarray:
  """VECTORIZE's exact rule: its scalar operands side by side."""
  return stacked(elements)

def _picker(arg: tuple[int, ...]) -> Any:
  """GEP's exact rule: the elements `arg` of a vector, a scalar for one."""
  sel = list(arg) if len(arg) > 1 else arg[0]
  def pick(v: np.ndarray) -> np.ndarray: return np.ascontiguousarray(v[:, sel])
  return pick


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
    self.stored = {buf for buf, acc in accesses(program).items() if any(store for store, _, _, _ in acc)}
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
    # IFs whose body may run on a box of the grid (Grid.pinned, blocks._if): the workgroup-local thread axes (lidx,
    # ids 3-5) their gate fixes (ownership.pins), where the body assigns no register from before it
    self.if_pins: dict[int, dict[int, int]] = {}
    for b in self.block_end:
      fixed = {d: v for d, v in pins(program, uops[b].src[0]).items() if d >= 3} if uops[b].op is Ops.IF else {}
      if fixed and not self.assigned[b]: self.if_pins[b] = fixed
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
    self.folded = set().union(*(loop.folded for loop in self.lane_loops.values()))  # ops only loops' folds compute
    # the LOADs and GEPs a tile's fold may read from memory itself (loops.MemoryOperands; the body then skips them)
    self.from_memory = set().union(*(loop.outer.memory.ops for loop in self.lane_loops.values()
                                     if loop.outer is not None and loop.outer.memory is not None))
    self.constants = {i: const_value(u) for i, u in enumerate(uops) if u.op is Ops.CONST}
    self.users: dict[int, list[int]] = {}  # uop -> the uops that read it, in order
    for j, u in enumerate(uops):
      for k in u.src: self.users.setdefault(k, []).append(j)
    self._choose_kinds()
    self._choose_exact_paths()
    self.tile_lane_bytes = {i: self._tile_lane_bytes(i, loop) for i, loop in self.lane_loops.items()
                            if loop.outer is not None and loop.outer.memory is not None}
    # RANGEs whose bounds are the same number on every lane whatever the run (affine forms of constants), as Values
    self.fixed_bounds = {}
    for i, u in enumerate(uops):
      bounds = tuple(_fixed_value(self.forms.get(j)) for j in u.src) if u.op is Ops.RANGE else (None,)
      if None not in bounds: self.fixed_bounds[i] = bounds
    self._preset_outside_blocks()
    self.plain_accesses = {i: self._plain_access(u) for i, u in enumerate(uops) if u.op in (Ops.LOAD, Ops.STORE)}
    # what runs each uop, made once by dispatch.handler_table: the handler of its kind, and that table with the
    # straight-line stretches as steps (from the run number settings.STRAIGHT_FROM on); how many runs have started
    self.handlers: list[Callable] | None = None
    self.straight: list[Callable] | None = None
    self.runs = 0
    # blocks._skipping's tables: (ops skipped) -> (the table they were made from, that table with them doing nothing)
    self.skipping: dict[frozenset[int], tuple[Sequence[Callable], list[Callable]]] = {}

  def _choose_kinds(self) -> None:
    """Plan.kinds: each uop's Kind, and the rules the refined kinds bind (ufuncs, constant_rules, conversions)."""
    uops, dt = self.uops, self.operand_dtype
    # an int value with an affine form is computed only when needed (RANGE runs its loop, the form is its counter)
    self.kinds = [Kind.LAZY if i in self.forms and u.op is not Ops.RANGE else OP_KINDS[u.op] for i, u in enumerate(uops)]
    # ALU ops whose rule is one numpy ufunc (alu.ufunc_rule): run by it directly while their operands are exact
    self.ufuncs = {i: alu.ufunc_rule(u.op, dt[i]) for i, u in enumerate(uops)
                   if self.kinds[i] is Kind.ALU and alu.ufunc_rule(u.op, dt[i]) is not None}
    for i in self.ufuncs: self.kinds[i] = Kind.UFUNC_ALU
    # IDIV, MOD, SHL, SHR by a constant with which the rule is defined everywhere (alu.constant_rule)
    self.constant_rules = {}
    for i, u in enumerate(uops):
      if self.kinds[i] is Kind.ALU and len(u.src) == 2 and u.src[1] in self.constants:
        rule = alu.constant_rule(u.op, dt[i], self.constants[u.src[1]].v[0])
        if rule is not None: self.constant_rules[i] = rule
    for i in self.constant_rules: self.kinds[i] = Kind.CONSTANT_ALU
    # CAST and BITCAST whose rule is one numpy function (alu.conversion_rule): run by it directly on exact operands
    self.conversions = {i: alu.conversion_rule(u.op, dt[i], u.dtype.scalar()) for i, u in enumerate(uops)
                        if u.op in (Ops.CAST, Ops.BITCAST)}

  def _choose_exact_paths(self) -> None:
    """Plan.exact: per op that has one, its exact path (values.ExactPath)."""
    uops = self.uops
    # float ufunc ops whose NaN levels no op reads: each use is a float ufunc op that no loop folds, which gives NaN
    # wherever an operand is NaN (alu.ufunc_rule) and so marks those lanes NAN_PAYLOAD itself (their result skips it)
    users = self.users
    def nan_propagating(j: int) -> bool: return j in self.ufuncs and dtypes.is_float(uops[j].dtype) and j not in self.folded
    self.levels_unread = {i for i in self.ufuncs if nan_propagating(i) and all(map(nan_propagating, users.get(i, [None])))}
    self.exact: dict[int, ExactPath] = {}
    for i, u in enumerate(uops):
      kind = self.kinds[i]
      if kind is Kind.UFUNC_ALU:
        # NAN_PAYLOAD on its NaNs where a float op's may be read (a scalar's lanes: one dimension), else none
        float_result = dtypes.is_float(u.dtype.scalar()) and i not in self.levels_unread
        result = (scalar_float_value if u.dtype.count == 1 else ufunc_value) if float_result else Value
        self.exact[i] = ExactPath(u.src, self.ufuncs[i], result)
      elif kind is Kind.CONSTANT_ALU: self.exact[i] = ExactPath(u.src[:1], self.constant_rules[i], Value)
      elif kind is Kind.CONVERT and self.conversions[i] is not None:
        self.exact[i] = ExactPath(u.src, self.conversions[i], Value if u.op is Ops.BITCAST else ufunc_value)
      elif kind is Kind.WHERE: self.exact[i] = ExactPath(u.src, alu.select, Value)
      elif kind is Kind.VECTORIZE: self.exact[i] = ExactPath(u.src, _vector, Value)
      elif kind is Kind.GEP: self.exact[i] = ExactPath(u.src, _picker(u.arg), Value)

  def _preset_outside_blocks(self) -> None:
    """The ops outside every block whose value is known before the run (a constant, a lazy form, an INDEX): set when
    a run starts (Machine.start), so the steps of a stretch skip them; their handlers would set the same."""
    uops, depth, outside = self.uops, 0, []
    for i, u in enumerate(uops):
      if u.op in GroupOp.BlockEnd: depth -= 1
      if depth == 0: outside.append(i)
      if u.op in GroupOp.BlockStart: depth += 1
    self.initial_env: list[Any] = [None] * len(uops)
    for i in outside:
      if self.kinds[i] is Kind.CONST: self.initial_env[i] = self.constants[i]
      elif self.kinds[i] in LAZY_KINDS: self.initial_env[i] = LAZY
    self.initial_refs = [(i, *uops[i].src) for i in outside if self.kinds[i] is Kind.INDEX]
    self.preset = {i for i, x in enumerate(self.initial_env) if x is not None} | {i for i, _, _ in self.initial_refs}

  def _tile_lane_bytes(self, i: int, loop: LaneLoop) -> int:
    """What one lane of loop i's body takes (as lane_bytes counts) when its tile folds from memory: the values of the
    body's ops but the folded ones and the loads and GEPs the fold reads itself (lazy forms too: an op may need one)."""
    skip = loop.folded | loop.outer.memory.ops
    body = [self.uops[j] for j in range(i + 1, self.block_end[i]) if j not in skip]
    return max(1, 2 * sum(u.dtype.itemsize for u in body if not isinstance(u.dtype, PtrDType)))

  def _plain_access(self, u: UOp) -> tuple | None:
    """The index form of a *plain* LOAD or STORE: one with no gate, through an affine index, into a buffer or local
    that needs no race tracking; None for any other."""
    buf, idx = self.uops[u.src[0]].src
    ungated = len(u.src) == (1 if u.op is Ops.LOAD else 2)
    plain = ungated and idx in self.forms and buf in self.free
    return self.forms[idx] if plain else None

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
