"""THREEFRY as plain integer ops, for every backend: `decompose_threefry(program)`.

THREEFRY's rule is refimpl.emulator.alu.threefry (Threefry-2x32, 20 rounds, on uint64). This pass writes the same
computation as uint32 and uint64 ALU uops, so that C, OpenCL C and LLVM IR render one algorithm instead of each
carrying its own: the counter and the key are split into words by CAST to uint32 (it keeps the low 32 bits) and SHR
by 32, the rounds are uint32 ADD (wrapping), XOR, and rotations written SHL | SHR by constant counts in [1, 31], and the
two result words are joined by CAST to uint64, SHL by 32 and OR. Every uop it emits is defined for every input. The
rotation counts and the key-schedule constant are alu's (THREEFRY_ROTATIONS, THREEFRY_PARITY): declared once.
Size: 129 ALU uops and 17 CONSTs per THREEFRY (a vector THREEFRY gets VECTORIZEd constants).
"""
from __future__ import annotations

from refimpl.dtype import dtypes
from refimpl.emulator.alu import THREEFRY_PARITY, THREEFRY_ROTATIONS
from refimpl.ir.builder import ProgramBuilder
from refimpl.ir.ops import Ops
from refimpl.ir.program import Program, UOp
from refimpl.ir.rewrite import rewrite
from refimpl.ir.verify import verify
from refimpl.lower.emit import V, Values

U32, U64 = dtypes.uint32, dtypes.uint64


def _threefry(x: V, key: V) -> V:
  """threefry2x32(x, key) as alu.threefry states it, on words: x = (X1 << 32) | X0, key = (K1 << 32) | K0."""
  k0, k1 = key.cast(U32), (key >> 32).cast(U32)
  ks = (k0, k1, k0 ^ k1 ^ THREEFRY_PARITY)
  x0, x1 = x.cast(U32) + ks[0], (x >> 32).cast(U32) + ks[1]
  for i in range(5):
    for r in THREEFRY_ROTATIONS[i % 2]:
      x0 = x0 + x1
      x1 = ((x1 << r) | (x1 >> (32 - r))) ^ x0
    x0, x1 = x0 + ks[(i + 1) % 3], x1 + ks[(i + 2) % 3] + (i + 1)
  return (x1.cast(U64) << 32) | x0.cast(U64)


def _threefry_uop(b: ProgramBuilder, i: int, u: UOp, src: tuple[int, ...]) -> int:
  """The rewrite of one THREEFRY uop: _threefry on its new operands."""
  values = Values(b, u.dtype.count)
  return _threefry(values.of(src[0], U64), values.of(src[1], U64)).i


def decompose_threefry(program: Program) -> Program:
  """The program with every THREEFRY replaced by integer ALU ops (see the module docstring); other uops keep their
  order, and a program with no THREEFRY comes back unchanged."""
  verify(program)
  if not any(u.op is Ops.THREEFRY for u in program.uops): return program
  return verify(rewrite(program, {Ops.THREEFRY: _threefry_uop}))
