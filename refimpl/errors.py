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
  the kind (refimpl.emulator.ub.UB, e.g. UB.DIVISOR_ZERO; every event of the emulator has one, None: not given).
  The use of an undefined value (a deferred kind, refimpl.emulator.ub) is reported where it is used: `use` says how
  (a word of refimpl.emulator.ub.USES: "stored", "index", ...), `origin` is the op that made the value undefined (an
  UndefinedBehavior of its own: its op, uop, lane, operands, reason), and `kind` is the origin's kind."""
  def __init__(self, op: Any, uop_index: int | None, lane: int | tuple[int, ...] | None, operands: tuple[Any, ...], reason: str,
               count: int = 1, kind: UB | None = None, use: str | None = None, origin: UndefinedBehavior | None = None):
    self.op, self.uop_index, self.lane, self.operands, self.reason, self.count = op, uop_index, lane, operands, reason, count
    self.kind, self.use, self.origin = kind, use, origin
    more = f" (and {count - 1} more lane{'s' if count > 2 else ''})" if count > 1 else ""
    text = f"undefined behavior at {self.where()}, lane {lane}: {reason}; operands {operands}{more}"
    if origin is not None: text += f"; the value is undefined since {origin.where()}, lane {origin.lane}: {origin.reason}; " \
                                   f"operands {origin.operands}"
    super().__init__(text)

  def where(self) -> str:
    """"uop 12 (STORE)", or the op's name for a single-op evaluation."""
    op_name = getattr(self.op, "name", str(self.op))
    return f"uop {self.uop_index} ({op_name})" if self.uop_index is not None else op_name


class NotTranslatable(Exception):
  """refimpl's own limit, not the backend's failure: a program refimpl cannot translate into the backend's form (the
  tinygrad exporter's ExportError: a uop tinygrad has no form for, an accumulator whose loop bounds come after it).
  The suite reports what raises it as "not tested (refimpl cannot export: ...)", counted apart from passes and
  failures; the fuzzer sets such programs aside."""


class CompileError(Exception):
  """The backend's compiler rejected the source; the message carries its diagnostics."""
