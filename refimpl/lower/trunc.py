"""TRUNC with other ops, for a target that renders no TRUNC: `decompose_trunc(program)`.

TRUNC's rule is refimpl.emulator.alu.trunc (round toward zero, the sign kept, defined everywhere). This pass writes it
with ops every backend renders, once for all of them (tinygrad 0.10.1 has no TRUNC: its exporter gets this; so do
refimpl's C and LLVM IR, whose truncf / llvm.trunc are a libm call on an x86-64 without SSE4.1, which a freestanding
kernel cannot make). On a value x of a float dtype with M stored mantissa bits:

  where |x| < 2^M (only there can x have a fraction; |x| is MAX(x, NEG x), false for NaN):
      w = CAST(CAST(x, int64), dtype)       exact: CAST to int truncates toward zero, and |x| < 2^M <= 2^52 fits
      w where w != 0, else x * 0            a zero result takes x's sign (-0.5 -> -0.0, a subnormal -> its signed zero)
  elsewhere x                               an integer already, an infinity, or a NaN (itself, quiet or not)

The int64 CAST of a lane that the WHERE discards may be out of range: a deferred undefined value, discarded, which the
spec allows (refimpl.lower.guard_poison makes it defined in C). Size: 10 uops and 3 CONSTs per TRUNC. Vector TRUNCs
get the same ops on vectors (VECTORIZEd constants).
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
  whole = x.cast(dtypes.int64).cast(x.dt)
  signed = whole.ne(0.0).where(whole, x * 0.0)
  return x.max(-x).lt(2.0 ** dtypes.finfo(x.dt)[1]).where(signed, x)


def _trunc_uop(b: ProgramBuilder, i: int, u: UOp, src: tuple[int, ...]) -> int:
  """The rewrite of one TRUNC uop: `truncated` of its new operand."""
  return truncated(Values(b, u.dtype.count).of(src[0], u.dtype.scalar())).i


def decompose_trunc(program: Program) -> Program:
  """The program with every TRUNC replaced by the ops of the module docstring; other uops keep their order, and a
  program with no TRUNC comes back unchanged."""
  verify(program)
  if not any(u.op is Ops.TRUNC for u in program.uops): return program
  return verify(rewrite(program, {Ops.TRUNC: _trunc_uop}))
