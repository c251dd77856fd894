"""Deferred undefined values made defined for C-like languages: `guard_poison(program)`.

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
