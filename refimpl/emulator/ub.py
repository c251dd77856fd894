"""The kinds of undefined behaviour: every way a program can leave the spec, each named once with its domain.

The ALU rules declare the kinds they can report (refimpl/emulator/alu.py, `@undefined(...)`), the executor reports
the memory kinds (machine.py, memory.py); `Outcome.kind` and the emulator's events (`UndefinedBehavior.kind`) carry
the kind of the first undefined lane, next to a reason that names the operands. SPEC.md lists the kinds (refimpl/spec.py
reads them), and the fuzzer dispatches on them: its UB rewrites (refimpl/fuzz/generate.py) and which cases it does not
run natively (refimpl/fuzz/case.py).
"""
from __future__ import annotations

from enum import Enum

from refimpl.dtype import DType, dtypes


class UB(Enum):
  """One kind of undefined behaviour. `description`: its domain, one line. `family`: what kind of operation hits it.
  `contained`: the damage stays in the lane's value (a native run gives some value there, and the emulator marks
  undefined everything that value reaches); otherwise a native run may trap, fault, or spoil what the emulator cannot
  mark. `on`: the dtypes family (a `dtypes` attribute) of the operands it occurs on (CAST: of the source); None: any
  dtype its op takes."""
  DIVISOR_ZERO = ("divisor 0", "integer division", False, None)
  DIVISION_OVERFLOW = ("signed INT_MIN / -1 or INT_MIN % -1 (the quotient overflows)", "integer division", False, "sints")
  SHIFT_COUNT = ("shift count outside [0, bits)", "shift", True, None)
  CAST_RANGE = ("float -> int of NaN, +-inf, or a value whose truncation is outside the target's range", "conversion", True,
                "floats")
  OUT_OF_BOUNDS = ("a LOAD or STORE index (for a vector access, any of its elements) outside [0, size)", "memory access",
                   False, None)
  RACE = ("two threads of a launch touch one element, at least one writing, with no BARRIER of their workgroup between "
          "(a BARRIER orders its workgroup's locals and globals; threads of different workgroups are never ordered)",
          "memory access", False, None)
  UNINITIALISED = ("a LOAD of a DEFINE_LOCAL element never stored in this launch", "memory access", False, None)

  def __init__(self, description: str, family: str, contained: bool, on: str | None):
    self.description, self.family, self.contained, self.on = description, family, contained, on

  def __repr__(self) -> str: return f"UB.{self.name}"

  def occurs_on(self, dt: DType) -> bool:
    """Whether an op that can report this kind can report it on operand dtype dt (CAST: source dtype)."""
    return self.on is None or dt.scalar() in getattr(dtypes, self.on)
