"""TRUNC with other ops, for a target that renders no TRUNC: `decompose_trunc(program)`.

TRUNC's rule is refimpl.emulator.alu.trunc (round toward zero, the sign kept, defined everywhere). This pass writes it
with ops every backend renders, once for all of them (tinygrad 0.10.1 has no TRUNC: its exporter gets this; so do
refimpl's C, and its LLVM IR on a target with no rounding instruction: there truncf / llvm.trunc are a libm call, on
an x86-64 without SSE4.1, which a freestanding kernel cannot make). On a value x of a float dtype with M stored
mantissa bits:

  small = |x| < 2^M                         only there can x have a fraction (|x| is MAX(x, NEG x); false for NaN)
  w = CAST(CAST(small ? x : 0, int64), dtype)  exact: CAST to int truncates toward zero, |x| < 2^M <= 2^52 fits
  small ? (w != 0 ? w : x * 0) : x          a zero result takes x's sign (-0.5 -> -0.0, a subnormal -> its signed zero);
                                            elsewhere x is an integer already, an infinity or a NaN (itself)

Every uop it emits is defined for every input: the int64 CAST only ever sees a value in range (0 where x is large,
infinite or NaN), so no lane is undefined even where a WHERE would discard it (tinygrad 0.10.1's PYTHON emulator
raises on a CAST of inf to an int). Size: 10 ALU uops and 2 CONSTs per TRUNC (vector TRUNCs get the same ops on
vectors, VECTORIZEd constants).
"""
from __future__ import annotations

from refimpl.dtype import dtypes
from refimpl.ir.builder import ProgramBuilder
from refimpl.ir.ops import Ops
from refimpl.ir.program import Program, UOp
from refimpl.ir.rewrite import rewrite
from refimpl.ir.verify import verify
from refimpl.lower.emit import V, Values


def truncated(x: V) -> V:
  """TRUNC x as the module docstring writes it, on a float value x."""
  small = x.max(-x).lt(2.0 ** dtypes.finfo(x.dt)[1])
  whole = small.where(x, 0.0).cast(dtypes.int64).cast(x.dt)
  return small.where(whole.ne(0.0).where(whole, x * 0.0), x)


def _trunc_uop(b: ProgramBuilder, i: int, u: UOp, src: tuple[int, ...]) -> int:
  """The rewrite of one TRUNC uop: `truncated` of its new operand."""
  return truncated(Values(b, u.dtype.count).of(src[0], u.dtype.scalar())).i


def decompose_trunc(program: Program) -> Program:
  """The program with every TRUNC replaced by the ops of the module docstring; other uops keep their order, and a
  program with no TRUNC comes back unchanged."""
  verify(program)
  if not any(u.op is Ops.TRUNC for u in program.uops): return program
  return verify(rewrite(program, {Ops.TRUNC: _trunc_uop}))
