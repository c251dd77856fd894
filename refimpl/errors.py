"""Errors that describe what a kernel did (UndefinedBehavior) or why a backend would not take it (CompileError), as
opposed to what is wrong with refimpl or a toolchain. A leaf module: renderers raise CompileError without importing
the device layer (refimpl.device exports the name too, as tinygrad's device contract has it)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
  from refimpl.emulator.ub import UB


class UndefinedBehavior(Exception):
  """A program violated a precondition of the spec (docs/semantics.md, "Undefined behaviour").

  Raised by the emulator in strict mode, and by `refimpl.testing.eval_op` before native code would run on such inputs.
  Carries where and why: the op, the uop index in the program (None for a single-op evaluation), the first offending
  lane (thread / element index), that lane's operands, the rule's reason (e.g. "division by zero"), how many lanes, and
  the kind (refimpl.emulator.ub.UB, e.g. UB.DIVISOR_ZERO; every event of the emulator has one, None: not given)."""
  def __init__(self, op: Any, uop_index: int | None, lane: int | tuple[int, ...] | None, operands: tuple[Any, ...], reason: str,
               count: int = 1, kind: UB | None = None):
    self.op, self.uop_index, self.lane, self.operands, self.reason, self.count = op, uop_index, lane, operands, reason, count
    self.kind = kind
    op_name = getattr(op, "name", str(op))
    where = f"uop {uop_index} ({op_name})" if uop_index is not None else op_name
    more = f" (and {count - 1} more lane{'s' if count > 2 else ''})" if count > 1 else ""
    super().__init__(f"undefined behavior at {where}, lane {lane}: {reason}; operands {operands}{more}")


class CompileError(Exception):
  """The backend's compiler rejected the source; the message carries its diagnostics."""
