"""Deferred undefined values made defined for languages that trap or leave them undefined: `guard_poison(program)`,
`guard_division(program)`.

The spec's deferred kinds of undefined behaviour (refimpl/emulator/ub.py) give an undefined *value* in a lane and make
the program undefined only where that value is used: a float->int CAST out of the target's range (CAST_RANGE) and a
shift by a count outside [0, bits) (SHIFT_COUNT). LLVM IR has the same rule (fptosi and shl give poison), but in C and
its dialects the conversion and the shift are themselves undefined behaviour, even on a lane whose value a WHERE then
discards (tinygrad's range reductions compute on every lane that way). This pass rewrites both so that every input is
defined, without changing any lane the spec defines:

  CAST float->int   CAST(WHERE(in_range(x), x, 0), int), in_range(x) = lo - 1 < x && x < hi + 1 evaluated exactly in
                    x's dtype (`_in_range`): true exactly where truncation lands in [lo, hi], false for NaN and inf
  SHL, SHR          the count AND (bits - 1): equal to the count wherever it is in [0, bits) (bits is a power of two)

A renderer whose language gives such ops a value (LLVM IR's poison) says so with `native_poison` and skips the pass.

IDIV and MOD by 0 and signed INT_MIN / -1 (DIVISOR_ZERO, DIVISION_OVERFLOW) are deferred kinds too, but C, OpenCL C and
LLVM IR (sdiv / udiv: immediate undefined behaviour, not poison) leave them undefined and x86's idiv traps (SIGFPE), on
a lane a WHERE discards as on any other (tinygrad's `(t > 0).where(1 // t, t)`). `guard_division` rewrites the divisor
for every renderer that does not declare `native_division` (a language that gives them a value: WGSL):

  IDIV, MOD         the divisor WHERE(b != 0 && (a != MIN || b != -1), b, 1) (unsigned: WHERE(b != 0, b, 1)): equal
                    to b wherever the spec defines the division; a divisor that is a constant with no such lane (no
                    element 0, nor -1 when signed) is left as it is
"""
from __future__ import annotations

import numpy as np

from refimpl.dtype import DType, dtypes, to_np
from refimpl.ir.builder import ProgramBuilder
from refimpl.ir.ops import Ops
from refimpl.ir.program import Program, UOp
from refimpl.ir.rewrite import rewrite
from refimpl.ir.verify import verify
from refimpl.lower.emit import V, Values


def _exact(n: int, dt: DType) -> bool:
  """Whether the integer n is a value of float dtype dt (float64 holds every value of the narrower float dtypes)."""
  with np.errstate(over="ignore"): return int(float(n)) == n and float(np.float64(n).astype(to_np(dt))) == float(n)

def _in_range(x: V, dst: DType) -> V:
  """Whether truncating x lands in [min(dst), max(dst)]: x > min - 1 and x < max + 1 (false for NaN). max + 1 is a
  power of two; where it is beyond x's dtype, x < inf. min - 1 where it is a value of x's dtype; else min itself is
  (a power of two, or 0) and x >= min, written !(x < min); where min is beyond x's dtype too, x > -inf."""
  lo, hi = dtypes.min(dst), dtypes.max(dst) + 1
  below = x.c(float(hi) if _exact(hi, x.dt) else float("inf"))
  ok_hi = x.lt(below)
  if _exact(lo - 1, x.dt): return x.c(float(lo - 1)).lt(x) & ok_hi
  if _exact(lo, x.dt): return x.lt(float(lo)).ne(True) & ok_hi
  return x.c(float("-inf")).lt(x) & ok_hi

def _guard_cast(b: ProgramBuilder, i: int, u: UOp, src: tuple[int, ...]) -> int:
  """CAST float->int as CAST(WHERE(in_range(x), x, 0), int); every other CAST as it is."""
  s, d = b.uops[src[0]].dtype.scalar(), u.dtype.scalar()
  if not (dtypes.is_float(s) and dtypes.is_int(d)): return b.uop(u.op, u.dtype, src, u.arg)
  values = Values(b, u.dtype.count)
  x = values.of(src[0], s)
  return _in_range(x, d).where(x, 0.0).cast(d).i

def _guard_shift(b: ProgramBuilder, i: int, u: UOp, src: tuple[int, ...]) -> int:
  """SHL / SHR with the count AND (bits - 1)."""
  dt = u.dtype.scalar()
  count = Values(b, u.dtype.count).of(src[1], dt) & (8 * dt.itemsize - 1)
  return b.uop(u.op, u.dtype, (src[0], count.i), u.arg)


def guard_poison(program: Program) -> Program:
  """The program with every float->int CAST and every shift defined for every input (see the module docstring); a
  program with neither comes back unchanged."""
  verify(program)
  uops = program.uops
  if not any(u.op in (Ops.SHL, Ops.SHR) or (u.op is Ops.CAST and dtypes.is_float(uops[u.src[0]].dtype.scalar())
                                            and dtypes.is_int(u.dtype.scalar())) for u in uops): return program
  return verify(rewrite(program, {Ops.CAST: _guard_cast, Ops.SHL: _guard_shift, Ops.SHR: _guard_shift}))


def _constant_elements(b: ProgramBuilder, j: int) -> list | None:
  """The elements of uop j when it is a CONST or a VECTORIZE of CONSTs; None otherwise."""
  u = b.uops[j]
  if u.op is Ops.CONST: return [u.arg]
  if u.op is Ops.VECTORIZE and all(b.uops[s].op is Ops.CONST for s in u.src): return [b.uops[s].arg for s in u.src]
  return None

def _can_overflow(b: ProgramBuilder, dt: DType, src: tuple[int, ...]) -> bool:
  """Whether IDIV / MOD on dtype dt of operands src can be INT_MIN / -1: signed, and neither operand a constant that
  rules it out (a dividend with no element INT_MIN, a divisor with no element -1)."""
  if dt not in dtypes.sints: return False
  a, d = _constant_elements(b, src[0]), _constant_elements(b, src[1])
  return not (a is not None and dtypes.min(dt) not in a) and not (d is not None and -1 not in d)

def _guard_divisor(b: ProgramBuilder, i: int, u: UOp, src: tuple[int, ...]) -> int:
  """IDIV / MOD with the divisor WHERE(b != 0 && (a != MIN || b != -1), b, 1) (unsigned: WHERE(b != 0, b, 1)); each
  test only where the operands can fail it (a constant divisor with no element 0 needs none)."""
  dt = u.dtype.scalar()
  overflow, divisor = _can_overflow(b, dt, src), _constant_elements(b, src[1])
  if not overflow and divisor is not None and 0 not in divisor: return b.uop(u.op, u.dtype, src, u.arg)
  values = Values(b, u.dtype.count)
  a, d = values.of(src[0], dt), values.of(src[1], dt)
  ok = d.ne(0) & (a.ne(dtypes.min(dt)) | d.ne(-1)) if overflow else d.ne(0)
  return b.uop(u.op, u.dtype, (src[0], ok.where(d, 1).i), u.arg)


def guard_division(program: Program) -> Program:
  """The program with every IDIV and MOD defined for every input: a divisor that could be 0 (or -1 under a signed
  INT_MIN) is 1 there (see the module docstring); a program without IDIV or MOD comes back unchanged."""
  verify(program)
  if not any(u.op in (Ops.IDIV, Ops.MOD) for u in program.uops): return program
  return verify(rewrite(program, {Ops.IDIV: _guard_divisor, Ops.MOD: _guard_divisor}))
