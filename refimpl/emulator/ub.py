"""The kinds of undefined behaviour: every way a program can leave the spec, each named once with its domain.

The ALU rules declare the kinds they can report (refimpl/emulator/alu.py, `@undefined(...)`), the executor reports
the memory kinds (machine.py, memory.py); `Outcome.kind` and the emulator's events (`UndefinedBehavior.kind`) carry
the kind of the first undefined lane, next to a reason that names the operands.

Immediate or deferred (`deferred`). An immediate kind makes the program undefined where the op runs: an access out of
bounds (it faults) and two threads' unequal writes of one element. A deferred kind only makes the op's value undefined
in that lane (LLVM's poison: what an out-of-range fptosi, an over-wide shift or a racy load gives; an integer division
by zero or INT_MIN / -1 too, whose trap on x86 the backends guard away, refimpl.lower.guard_division): the value
carries the UNDEFINED certainty level through moves and arithmetic, a WHERE that picks the other operand drops it, and
the program is undefined where such a value is *used* (`USES`). Strict mode raises there, naming the use and the op
that made the value (`UndefinedBehavior.origin`).

SPEC.md lists the kinds (refimpl/spec.py reads them), and the fuzzer dispatches on them: its UB rewrites
(refimpl/fuzz/generate.py) and which cases it does not run natively (refimpl/fuzz/case.py).
"""
from __future__ import annotations

from enum import Enum

from refimpl.dtype import DType, dtypes


class UB(Enum):
  """One kind of undefined behaviour. `description`: its domain, one line. `family`: what kind of operation hits it.
  `deferred`: the op gives an undefined value in the lane, and the program is undefined only where that value
  is used (the module docstring); otherwise the op itself is undefined.
  `on`: the dtypes family (a `dtypes` attribute) of the operands it occurs on (CAST: of the source); None: any
  dtype its op takes."""
  DIVISOR_ZERO = ("divisor 0: the result is undefined", "integer division", True, None)
  DIVISION_OVERFLOW = ("signed INT_MIN / -1 or INT_MIN % -1 (the quotient overflows): the result is undefined",
                       "integer division", True, "sints")
  SHIFT_COUNT = ("shift count outside [0, bits): the result is undefined", "shift", True, None)
  CAST_RANGE = ("float -> int of NaN, +-inf, or a value whose truncation is outside the target's range: the result is "
                "undefined", "conversion", True, "floats")
  OUT_OF_BOUNDS = ("a LOAD or STORE index (for a vector access, any of its elements) outside [0, size)", "memory access",
                   False, None)
  RACE = ("two threads of a launch write different bits to one element with no BARRIER of their workgroup between (a "
          "BARRIER orders its workgroup's locals and globals; threads of different workgroups are never ordered; "
          "writes of the same bits are no race)", "memory access", False, None)
  RACY_READ = ("a LOAD of an element another thread writes, before or after it, with no BARRIER of their workgroup "
               "between: the value read is undefined (the write is defined)", "memory access", True, None)
  UNINITIALISED = ("a LOAD of a DEFINE_LOCAL element never stored in this launch: the value read is undefined",
                   "memory access", True, None)

  def __init__(self, description: str, family: str, deferred: bool, on: str | None):
    self.description, self.family, self.deferred, self.on = description, family, deferred, on

  def __repr__(self) -> str: return f"UB.{self.name}"

  def occurs_on(self, dt: DType) -> bool:
    """Whether an op that can report this kind can report it on operand dtype dt (CAST: source dtype)."""
    return self.on is None or dt.scalar() in getattr(dtypes, self.on)


# The uses of a value that make the program undefined when the value is undefined (a deferred kind reached it), by the
# word an UndefinedBehavior's `use` holds. Everything else an undefined value meets (arithmetic, casts, compares, WHERE,
# moves into registers and vectors) gives an undefined value, and WHERE's other choice drops it. An IDIV's or MOD's
# operands are no use: a division of undefined operands gives an undefined value, as a division by zero does.
USES = {
  "stored": "a STORE's value: memory would hold it",
  "index": "a LOAD's or STORE's index: the access could land anywhere",
  "gate": "a LOAD's or STORE's gate: whether memory is accessed",
  "condition": "an IF's condition: which code runs",
  "loop bound": "a RANGE's start or end: which iterations run",
}
