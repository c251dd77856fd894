"""Grid -> loops: run a grid program (SPECIAL gidx/lidx) on a backend with no grid (CLANG, LLVM) as one call.

`lower_grid_to_loops(program)` returns a program with global_size = local_size = (1, 1, 1) and no SPECIAL:
  - the declarations (DEFINE_GLOBAL, DEFINE_VAR, DEFINE_LOCAL) stay first, in order;
  - then `CONST 0` and one RANGE per SPECIAL of size > 1, nested outermost first as
    gidx2, gidx1, gidx0, lidx2, lidx1, lidx0 (workgroups outside, the threads of a workgroup inside, dimension 0
    innermost so that consecutive ids stay consecutive in memory); a SPECIAL of size 1 becomes the CONST 0;
  - then every other uop in its original order (so per-thread state such as DEFINE_ACC is re-initialised for
    each thread), srcs renumbered; then the ENDRANGEs.
Why this is exact: threads of one launch share memory only through loads and stores, and without a BARRIER a
thread may read only what it wrote itself (anything else is a race, undefined); so running the threads one after
another in any order computes what the grid computes for every defined program.
DEFINE_LOCAL becomes one array reused by the workgroups in turn: a defined program never reads local memory its
workgroup did not write, so what a previous workgroup left there is never observed (the emulator, which runs the
grid form, is where uninitialised reads are detected).
Programs with a BARRIER are refused (LoweringError): lowering them needs the loop over a workgroup's threads split
at each barrier, with the values live across it kept per thread; no backend here needs it yet.
"""
from __future__ import annotations

from refimpl.dtype import dtypes
from refimpl.ir.ops import GroupOp, Ops
from refimpl.ir.program import INDEX_DTYPE, Program, UOp
from refimpl.ir.verify import verify

LOOP_ORDER = ("gidx2", "gidx1", "gidx0", "lidx2", "lidx1", "lidx0")  # outermost first


class LoweringError(ValueError):
  """The program cannot be lowered (the message says why)."""


def lower_grid_to_loops(program: Program) -> Program:
  """The loop form of a grid program (see the module docstring); a program with no SPECIAL comes back unchanged."""
  verify(program)
  uops = program.uops
  specials = {u.arg[0]: i for i, u in enumerate(uops) if u.op is Ops.SPECIAL}
  if not specials: return program
  if (b := next((i for i, u in enumerate(uops) if u.op is Ops.BARRIER), None)) is not None:
    raise LoweringError(f"{program.name}: uop {b} is a BARRIER; grid -> loops lowering of programs with barriers "
                        "(splitting the thread loops at each barrier) is not implemented")
  new: list[UOp] = []
  remap: dict[int, int] = {}
  def emit(u: UOp) -> int:
    new.append(u)
    return len(new) - 1
  for i, u in enumerate(uops):
    if u.op in GroupOp.Declaration: remap[i] = emit(u)
  zero = emit(UOp(Ops.CONST, INDEX_DTYPE, (), 0))
  next_id = max((u.arg for u in uops if u.op is Ops.RANGE), default=-1) + 1
  loops = []
  for name in LOOP_ORDER:
    if (i := specials.get(name)) is None: continue
    if (size := uops[i].arg[1]) == 1: remap[i] = zero
    else:
      end = emit(UOp(Ops.CONST, INDEX_DTYPE, (), size))
      remap[i] = emit(UOp(Ops.RANGE, INDEX_DTYPE, (zero, end), next_id))
      loops.append(remap[i])
      next_id += 1
  for i, u in enumerate(uops):
    if u.op in GroupOp.Declaration or u.op is Ops.SPECIAL: continue
    remap[i] = emit(UOp(u.op, u.dtype, tuple(remap[j] for j in u.src), u.arg))
  for r in reversed(loops): emit(UOp(Ops.ENDRANGE, dtypes.void, (r,)))
  return verify(Program(program.name, tuple(new), (1, 1, 1), (1, 1, 1)))
