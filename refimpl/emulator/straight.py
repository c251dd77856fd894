"""Straight-line stretches: the handler loop taken out of runs of ops that open and close no block.

A run executes a program by calling each op's handler in turn (machine.Machine.run). Between two block boundaries
(RANGE, IF and their ends) every op executes, in order, each time the stretch is entered, so such a stretch can be one
call that runs a list of *steps*, one per op: `compile_stretches` makes one per stretch of at least two ops, once per
plan; the handler table then holds it at the stretch's first op, and it returns the index after the stretch, as a
block's handler does.

A step is its op's *inline form* where its handler has one (machine.INLINE: a closure over what the plan knows of the
op, running the handler's path for exact operands and calling the handler itself otherwise), else a call of its
handler. A form reads an operand an earlier step of the stretch made (a plain Value: its handler is one of `values`)
straight from the env, and any other through Machine.value_of (lazy forms, values repeated into a loop's lanes,
registers, which an ASSIGN of the stretch may change). Nothing is compiled from text: making a plan's steps costs
about what one run of its ops does. The steps compute what the handler loop computes, op for op: they only remove the
interpretation around the handlers (spec_tests/test_emulator_straight.py holds every corpus program to the handler
loop).

A loop that runs as lanes skips the ops its folds compute (loops.LaneLoop.folded): `breaks` keeps them out of every
stretch, so such a loop's handler table still reaches them one by one.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from refimpl.ir import GroupOp, UOp

Step = Callable[[Any, list], None]  # (machine, its env) -> None: one op of a stretch
# (plan, uop index, uop, direct) -> the op's Step, or None where its handler must run it; direct(j): whether uop j's
# Value is read from the env itself (an earlier step of the stretch made it) rather than through Machine.value_of
Inline = Callable[[Any, int, UOp, Callable[[int], bool]], Step | None]


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


def _call(handler: Callable, i: int, u: UOp) -> Step:
  """The step that runs op i by its handler."""
  def step(m: Any, env: list) -> None: handler(m, i, u)
  return step


def compile_stretch(plan: Any, lo: int, hi: int, handlers: Sequence[Callable], inline: dict[Callable, Inline],
                    quiet: set[Callable], values: set[Callable], preset: set[int]) -> Callable:
  """The handler that runs ops lo..hi-1 of plan.uops as `handlers` would and returns hi. quiet: handlers that do
  nothing; values: handlers that always leave a plain Value in the env; preset: ops whose env entry a run sets when it
  starts, to what their handlers would set (they get no step)."""
  steps: list[Step] = []
  made: set[int] = set()  # ops of the stretch before the current one whose env entry is a plain Value
  for i in range(lo, hi):
    u, h = plan.uops[i], handlers[i]
    if i in preset and h in values: made.add(i)
    if h in quiet or i in preset: continue
    step = inline[h](plan, i, u, made.__contains__) if h in inline else None
    steps.append(_call(h, i, u) if step is None else step)
    if h in values: made.add(i)
  def stretch(m: Any, i: int, u: UOp) -> int:
    env = m.env
    for step in steps: step(m, env)
    return hi
  stretch.steps = steps
  return stretch


def compile_stretches(plan: Any, handlers: Sequence[Callable], breaks: set[int] | frozenset[int],
                      inline: dict[Callable, Inline], quiet: set[Callable], values: set[Callable],
                      preset: set[int] = frozenset()) -> list[Callable]:
  """`handlers` with each stretch's handler (compile_stretch) at the stretch's first op."""
  out = list(handlers)
  for lo, hi in stretches(plan.uops, breaks):
    out[lo] = compile_stretch(plan, lo, hi, handlers, inline, quiet, values, preset)
  return out
