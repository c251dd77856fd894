"""Straight-line stretches: the handler loop taken out of runs of ops that open and close no block.

A run executes a program by calling each op's handler in turn (state.Machine.run). Between two block boundaries
(RANGE, IF and their ends) every op executes, in order, each time the stretch is entered, so such a stretch can be one
call that runs a list of *steps*, one per op: `compile_stretches` makes one per stretch of at least two ops, once per
plan; the handler table then holds it at the stretch's first op, and it returns the index after the stretch, as a
block's handler does.

A step of an op with an exact path (Plan.exact) runs that path where its operands are exact and calls the op's handler
otherwise (`exact_step`: the path compute.run_exact runs in the handler). A kind whose module declares a step maker
(access.STEPS, handed in by dispatch.py: INDEX, and a plain LOAD or STORE, which reads or writes the view of memory
its handler would and calls the handler where it finds none) runs that step; any other op's step calls its handler.
A step reads an operand an earlier step of the stretch made (a plain Value: its kind is one of plan.VALUES) straight
from the env, and any other through Machine.value_of (lazy forms, values repeated into a loop's lanes, registers,
which an ASSIGN of the stretch may change). Nothing is compiled from text: making a plan's steps costs about what one
run of its ops does, and placing its batches a few more where a stretch holds many copies of its ops. The steps compute
what the handler loop computes, op for op: they only remove the interpretation around the handlers
(spec_tests/test_emulator_straight.py holds every corpus program to the handler loop).

Where a stretch holds k copies of one op (tinygrad's unrolled tiles), a batch runs them as one numpy call over their
stacked lanes, where the first of them stands (batches.py: its step stands in for theirs; settings.BATCHES).

A loop that runs as lanes skips the ops its folds compute (loops.LaneLoop.folded), and the loads a tile's fold reads
from memory itself (loops.MemoryOperands): `breaks` keeps them out of every stretch, so such a loop's handler table
still reaches them one by one.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from refimpl.emulator.batches import StretchBatches
from refimpl.emulator.plan import QUIET, VALUES, Kind, Plan
from refimpl.emulator.state import Handler, Machine
from refimpl.ir import GroupOp, UOp

Step = Callable[[Machine, list], None]  # (machine, its env) -> None: one op of a stretch
# (plan, op index, uop, its handler, direct) -> the op's step, or None where the handler's step (`_call`) is the one;
# direct(j): operand j's Value is env[j] itself (an earlier step of the stretch made it), else it is read by value_of
StepMaker = Callable[[Plan, int, UOp, Handler, Callable[[int], bool]], "Step | None"]


def stretches(uops: Sequence[UOp], breaks: set[int] | frozenset[int]) -> list[tuple[int, int]]:
  """[lo, hi) of every maximal run of at least two consecutive ops of which none opens or closes a block or is in
  `breaks`."""
  out, lo = [], None
  for i, u in enumerate([*uops, None]):
    inside = u is not None and u.op not in GroupOp.BlockStart and u.op not in GroupOp.BlockEnd and i not in breaks
    if inside and lo is None: lo = i
    elif not inside and lo is not None:
      if i - lo >= 2: out.append((lo, i))
      lo = None
  return out


def _call(handler: Handler, i: int, u: UOp) -> Step:
  """The step that runs op i by its handler."""
  def step(m: Machine, env: list) -> None: handler(m, i, u)
  return step


def exact_step(plan: Plan, i: int, u: UOp, handler: Handler, direct: Callable[[int], bool]) -> Step:
  """The step of op i, which has an exact path (Plan.exact): the path where its operands are exact, else its handler.
  direct(j): operand j's Value is env[j] itself (an earlier step of the stretch made it), else it is read by value_of."""
  operands, rule, result = plan.exact[i]
  if len(operands) == 1:
    a = operands[0]
    da = direct(a)
    def unary(m: Machine, env: list) -> None:
      x = env[a] if da else m.value_of(a)
      if x.cert is None: env[i] = result(rule(x.v))
      else: handler(m, i, u)
    return unary
  if len(operands) == 2:
    a, b = operands
    da, db = direct(a), direct(b)
    def binary(m: Machine, env: list) -> None:
      x = env[a] if da else m.value_of(a)
      y = env[b] if db else m.value_of(b)
      if x.cert is None and y.cert is None: env[i] = result(rule(x.v, y.v))
      else: handler(m, i, u)
    return binary
  if len(operands) == 3:
    a, b, c = operands
    da, db, dc = direct(a), direct(b), direct(c)
    def ternary(m: Machine, env: list) -> None:
      x = env[a] if da else m.value_of(a)
      y = env[b] if db else m.value_of(b)
      z = env[c] if dc else m.value_of(c)
      if x.cert is None and y.cert is None and z.cert is None: env[i] = result(rule(x.v, y.v, z.v))
      else: handler(m, i, u)
    return ternary
  read = [(j, direct(j)) for j in operands]
  def nary(m: Machine, env: list) -> None:
    xs = [env[j] if dj else m.value_of(j) for j, dj in read]
    for x in xs:
      if x.cert is not None:
        handler(m, i, u)
        return
    env[i] = result(rule(*[x.v for x in xs]))
  return nary


def compile_stretch(plan: Plan, lo: int, hi: int, handlers: Sequence[Handler],
                    makers: Mapping[Kind, StepMaker] | None = None) -> Handler:
  """The handler that runs ops lo..hi-1 of plan.uops as `handlers` would and returns hi. An op whose env entry a run
  sets when it starts (Plan.preset), to what its handler would set, gets no step; nor does one whose kind does nothing
  (plan.QUIET). An op with an exact path gets `exact_step`; one whose kind has a maker in `makers` (a module's STEPS:
  its handler's path as a step, e.g. access.STEPS) gets what that makes; any other, or where the maker makes none, its
  handler's step; the ops of a batch (batches.StretchBatches) get one step, the batch's, where the first of them stands."""
  steps: list[Step] = []
  made: set[int] = set()  # ops of the stretch before the current one whose env entry is a plain Value
  batches = StretchBatches(plan, lo, hi)
  batched: set[int] = set()  # ops a batch's step computes, where its first op stands
  for i in range(lo, hi):
    u, kind = plan.uops[i], plan.kinds[i]
    if i in plan.preset and kind in VALUES: made.add(i)
    if kind in QUIET or i in plan.preset: continue
    if i in batches.first:
      ops = batches.first[i]
      own = [exact_step(plan, j, plan.uops[j], handlers[j], made.__contains__) for j in ops]
      steps.append(batches.step(ops, own, made.__contains__))
      batched.update(ops)
    if i not in batched:
      maker = exact_step if i in plan.exact else (makers or {}).get(kind)
      step = None if maker is None else maker(plan, i, u, handlers[i], made.__contains__)
      steps.append(_call(handlers[i], i, u) if step is None else step)
    if kind in VALUES: made.add(i)
  batches.finish()
  def stretch(m: Machine, i: int, u: UOp) -> int:
    env = m.env
    for step in steps: step(m, env)
    return hi
  stretch.steps = steps
  return stretch


def compile_stretches(plan: Plan, handlers: Sequence[Handler],
                      makers: Mapping[Kind, StepMaker] | None = None) -> list[Handler]:
  """`handlers` (one per uop) with each stretch's handler (compile_stretch, with `makers`) at the stretch's first op;
  the ops loops' folds compute (Plan.folded) and those a fold may read from memory itself (Plan.from_memory) break
  stretches."""
  out = list(handlers)
  for lo, hi in stretches(plan.uops, plan.folded | plan.from_memory):
    out[lo] = compile_stretch(plan, lo, hi, handlers, makers)
  return out
