"""What runs each uop: the handler of each Kind (plan.py chooses the kind per uop), as one declared table, and the
handler table of a run.

A handler is (machine, uop index, uop) -> None, or for a block the index to continue at. Each concern's module declares
the handlers of its kinds (compute.HANDLERS, access.HANDLERS, blocks.HANDLERS); OP_HANDLERS is the handler of each op
before the plan refines its kind (what SPEC.md prints as the op's rule).
"""
from __future__ import annotations

from refimpl.emulator import access, blocks, compute, settings
from refimpl.emulator.plan import OP_KINDS, Kind, Plan
from refimpl.emulator.state import Handler
from refimpl.emulator.straight import StepMaker, compile_stretches
from refimpl.ir import Ops

HANDLERS: dict[Kind, Handler] = {**compute.HANDLERS, **access.HANDLERS, **blocks.HANDLERS}
assert set(HANDLERS) == set(Kind), "every kind needs a handler"
STEPS: dict[Kind, StepMaker] = dict(access.STEPS)  # kinds whose path has a step of its own (straight.compile_stretch)
OP_HANDLERS: dict[Ops, Handler] = {op: HANDLERS[kind] for op, kind in OP_KINDS.items()}


def handler_table(plan: Plan) -> list[Handler]:
  """What runs each uop, for a new run of `plan`: the handler of its kind, and from the plan's run number
  settings.STRAIGHT_FROM on, with its straight-line stretches as steps (straight.py: made once per plan, so programs
  run a few times never pay for it)."""
  plan.runs += 1
  if plan.handlers is None: plan.handlers = [HANDLERS[kind] for kind in plan.kinds]
  if settings.STRAIGHT_FROM is None or plan.runs < settings.STRAIGHT_FROM: return plan.handlers
  if plan.straight is None: plan.straight = compile_stretches(plan, plan.handlers, STEPS)
  return plan.straight
