"""WMMA as plain float64 ops, for every renderer: `decompose_wmma(program)`.

WMMA's rule is the emulator's (refimpl.emulator.compute._wmma): per thread, d[m][n] = c[m][n] + sum_k a[m][k] * b[k][n],
every product and sum in float64 in the order c, k = 0, 1, ..., K-1, then one rounding to the result dtype. This pass
writes that computation as uops, so that C, OpenCL C and LLVM IR render one expansion instead of each carrying its own:
each element of a (M x K, row-major), b (K x N) and c (M x N) is taken by GEP (a one-element operand is the scalar
itself) and CAST to float64 once (exact: every float input is a float64 value), then acc = c[m][n] and, for k in order,
acc = ADD(acc, MUL(a[m][k], b[k][n])) in float64, and one CAST of acc to the result dtype (none for float64). The M*N
results are VECTORIZEd; an M*N == 1 result is the scalar itself.

Narrow dtypes: the renderers run the pass after refimpl.lower.narrow (lower_narrow), whose WMMA has float32 inputs (the
narrow ones decoded, exactly) and, for a narrow result, a float64 accumulator and result that it encodes once: the
vectors are decoded and encoded as vectors, and what reaches this pass is float32 / float64 only. Run on a program with
narrow values, the pass leaves CASTs between them and float64 that lower_narrow lowers to the same bits (decode then an
exact CAST; encode, one rounding from float64), but with one decode per element (about 20 times the uops).
Size: M*K + K*N + M*N GEPs and as many CASTs (none for float64 lanes), 2*M*N*K ALU uops, M*N CASTs (none for a float64
result) and one VECTORIZE per WMMA.
"""
from __future__ import annotations

from refimpl.dtype import DType, dtypes
from refimpl.ir.builder import ProgramBuilder
from refimpl.ir.ops import Ops
from refimpl.ir.program import Program, UOp
from refimpl.ir.rewrite import rewrite

F64 = dtypes.float64


def _wide(b: ProgramBuilder, j: int, dt: DType, lanes: int) -> list[int]:
  """Every lane of new uop j (lanes of scalar dt) as a float64 value: GEP (none for one lane), then CAST (none for
  float64)."""
  out = []
  for k in range(lanes):
    x = j if lanes == 1 else b.uop(Ops.GEP, dt, (j,), (k,))
    out.append(x if dt == F64 else b.uop(Ops.CAST, F64, (x,)))
  return out

def _wmma(b: ProgramBuilder, i: int, u: UOp, src: tuple[int, ...]) -> int:
  """The rewrite of one WMMA uop, expanded as the module docstring says; its result."""
  N, M, K = u.arg
  tin, tout = b.dtype(src[0]).scalar(), u.dtype.scalar()
  wide_a, wide_b, wide_c = _wide(b, src[0], tin, M * K), _wide(b, src[1], tin, K * N), _wide(b, src[2], tout, M * N)
  res = []
  for m in range(M):
    for n in range(N):
      acc = wide_c[m * N + n]
      for k in range(K): acc = b.uop(Ops.ADD, F64, (acc, b.uop(Ops.MUL, F64, (wide_a[m * K + k], wide_b[k * N + n]))))
      res.append(acc if tout == F64 else b.uop(Ops.CAST, tout, (acc,)))
  return res[0] if M * N == 1 else b.uop(Ops.VECTORIZE, u.dtype, tuple(res))


def decompose_wmma(program: Program) -> Program:
  """The program with every WMMA replaced by GEP, CAST, float64 MUL/ADD and VECTORIZE uops (see the module docstring);
  other uops keep their order, and a program with no WMMA comes back unchanged. The program must be a verified one or
  lower_narrow's result (which renderers pass here, and which is not verified: verifying its thousands of uops costs more
  than rendering them); neither is the result, for the same reason: spec_tests/test_lower_wmma.py verifies it."""
  if not any(u.op is Ops.WMMA for u in program.uops): return program
  return rewrite(program, {Ops.WMMA: _wmma})
