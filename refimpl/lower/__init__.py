"""Passes shared by backends, and the check of a program against a backend's capabilities (`Renderer`).

  grid_to_loops.py  lower_grid_to_loops: SPECIAL gidx/lidx -> RANGE loops, for backends with no grid
  trunc.py          decompose_trunc: TRUNC -> float and int64 ALU ops, for targets with no TRUNC (C, tinygrad 0.10.1,
                    LLVM IR on an x86-64 without SSE4.1)
  transcendental.py decompose_transcendentals: EXP2/LOG2/SIN -> ALU ops, for backends with no libm (CLANG, LLVM)
  threefry.py       decompose_threefry: THREEFRY -> integer ALU ops, for refimpl's renderers (one algorithm, not one each)
  narrow.py         lower_narrow: float16/bfloat16/fp8 values -> their bits, ops on them -> float32/float64 and integer
                    ops with one rounding, for refimpl's renderers (they only load and store the bits)
  wmma.py           decompose_wmma: WMMA -> GEP, CAST to float64, MUL/ADD in float64 in the rule's order, one CAST to
                    the result dtype and VECTORIZE, for refimpl's renderers (after lower_narrow: float32/float64 WMMAs only)
  poison.py         guard_poison: float->int CASTs and shift counts defined for every input (the spec's deferred kinds
                    give only an undefined value there; C makes them undefined behaviour), for C, OpenCL C;
                    guard_division: IDIV / MOD divisors 1 where they are 0 or -1 under INT_MIN (they trap on x86, and C
                    and LLVM IR leave them undefined), for C, OpenCL C, CUDA C and LLVM IR
  emit.py           Values and V: straight-line IR written as Python expressions on a ProgramBuilder (the passes use them)

`lower_for(program, target)` is the one step between a Program and `renderer.render` (the runner, the fuzzer's
batches and the render hash all call it). The target is a renderer, or a device (refimpl.device.Compiled: anything
with a name, a renderer and `supports_dtype`), whose own dtype declaration is then checked too. In this fixed order,
each pass only when the renderer does not render its ops natively (refimpl.renderer.Renderer's fields):
  1. verify the program (once);
  2. lower_grid_to_loops                (renderer.grid_as_loops)
  3. check_capabilities, then renderer.check_program (the backend's own refusals: OpenCL's workgroup, local memory and
     fp64 limits), then, for a device, check_device_dtypes (the dtypes the device declares it does not support);
  4. renderer.extra_rewrite             (the backend's own rewrite; the fuzzer's planted bugs)
  5. PASSES: decompose_trunc            (not native_trunc; first: its ops on float16/bfloat16 are lowered by lower_narrow)
             decompose_transcendentals  (not native_transcendentals)
             decompose_threefry         (not native_threefry)
             lower_narrow               (not native_narrow; decomposes float16/bfloat16 transcendentals itself)
             decompose_wmma             (not native_wmma; after lower_narrow: float32/float64 WMMAs only)
             guard_poison               (not native_poison; late: it sees every CAST and shift the others made)
             guard_division             (not native_division; last: it sees every IDIV and MOD the others made)
A new pass is one row of PASSES and one field of Renderer.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from refimpl.dtype import DType, PtrDType
from refimpl.ir.ops import Ops
from refimpl.ir.program import Program
from refimpl.ir.verify import ProgramError, verify
from refimpl.lower.grid_to_loops import LoweringError, lower_grid_to_loops
from refimpl.lower.narrow import lower_narrow
from refimpl.lower.poison import guard_division, guard_poison
from refimpl.lower.threefry import decompose_threefry
from refimpl.lower.transcendental import decompose_transcendentals
from refimpl.lower.trunc import decompose_trunc
from refimpl.lower.wmma import decompose_wmma
from refimpl.renderer import Renderer

__all__ = ["PASSES", "LoweringError", "Target", "check_capabilities", "check_device_dtypes", "decompose_threefry",
           "decompose_transcendentals", "decompose_trunc", "decompose_wmma", "guard_division", "guard_poison", "lower_for",
           "lower_grid_to_loops", "lower_narrow", "passes_for"]

# the shared lowering passes, in the order lower_for runs them: (whether `renderer` needs it, the pass)
PASSES: tuple[tuple[Callable[[Renderer], bool], Callable[[Program], Program]], ...] = (
  (lambda r: not r.native_trunc, decompose_trunc),
  (lambda r: not r.native_transcendentals, decompose_transcendentals),
  (lambda r: not r.native_threefry, decompose_threefry),
  (lambda r: not r.native_narrow, lower_narrow),
  (lambda r: not r.native_wmma, decompose_wmma),
  (lambda r: not r.native_poison, guard_poison),
  (lambda r: not r.native_division, guard_division),
)


def check_capabilities(program: Program, renderer: Renderer) -> None:
  """Raise ProgramError (rule "capability") when the program needs what the backend lacks:
    - a dtype outside renderer.supported_dtypes (None: all), as a value or as a buffer element;
    - a SPECIAL on a backend with no grid (global_max is None: lower it first);
    - launch dims above global_max / local_max (missing trailing entries of those tuples mean 1);
    - lidx or BARRIER without has_local; DEFINE_LOCAL on a grid backend without has_shared (a loop backend renders it
      as a function-scope array).
  Vector widths are not checked: a renderer scalarizes the widths it does not render natively."""
  def fail(i: int | None, detail: str):
    raise ProgramError("capability", f"{renderer.device}: {detail}", i, None if i is None else program.uops[i].op)
  grid = not renderer.grid_as_loops
  for i, u in enumerate(program.uops):
    dt = u.dtype.base if isinstance(u.dtype, PtrDType) else u.dtype
    if renderer.supported_dtypes is not None and u.op not in (Ops.STORE, Ops.IF, Ops.ENDIF, Ops.ENDRANGE, Ops.BARRIER) \
       and dt.scalar() not in renderer.supported_dtypes:
      fail(i, f"dtype {dt.scalar()!r} is not supported")
    if u.op is Ops.SPECIAL and not grid: fail(i, "the backend has no grid: lower SPECIALs to loops first (lower_grid_to_loops)")
    if u.op is Ops.SPECIAL and u.arg[0].startswith("l") and not renderer.has_local: fail(i, "the backend has no local ids")
    if u.op is Ops.BARRIER and not renderer.has_local: fail(i, "the backend has no workgroups to synchronize")
    if u.op is Ops.DEFINE_LOCAL and grid and not renderer.has_shared: fail(i, "the backend has no local (shared) memory")
  if grid:
    limits = (("global_size", program.global_size, renderer.global_max), ("local_size", program.local_size, renderer.local_max))
    for what, dims, mx in limits:
      lim = tuple(mx or ()) + (1,) * (3 - len(mx or ()))
      if any(d > m for d, m in zip(dims, lim)): fail(None, f"{what} {dims} exceeds the backend's maximum {lim}")


class Target(Protocol):
  """A device as lower_for sees it (refimpl.device.Compiled, without importing the device layer): its name, its
  renderer and its own declaration of the scalar dtypes it supports."""
  device: str
  renderer: Renderer
  def supports_dtype(self, dtype: DType) -> bool: ...


def check_device_dtypes(program: Program, device: Target) -> None:
  """Raise ProgramError (rule "capability") when a value or buffer element of the program (STOREs aside) has a scalar
  dtype the device declares it does not support (its supports_dtype: a GPU without cl_khr_fp64, tinygrad's
  is_dtype_supported for a TINYGRAD device)."""
  for u in program.uops:
    dt = getattr(u.dtype, "base", u.dtype).scalar()
    if u.op is not Ops.STORE and dt.itemsize and not device.supports_dtype(dt):
      raise ProgramError("capability", f"{device.device} does not support {dt!r}", None, None)


def passes_for(renderer: Renderer) -> list[Callable[[Program], Program]]:
  """The passes of PASSES that `renderer` needs, in order."""
  return [lower for needed, lower in PASSES if needed(renderer)]


def lower_for(program: Program, target: Renderer | Target) -> Program:
  """The program as the target's renderer renders it: verified, its grid lowered to loops when the backend has none,
  checked against the backend's capabilities (and, for a device, its dtypes), then rewritten by the passes it needs
  (the module docstring gives the order)."""
  verify(program)
  renderer = target if isinstance(target, Renderer) else target.renderer
  given = program
  if renderer.grid_as_loops: program = lower_grid_to_loops(program)
  check_capabilities(program, renderer)
  renderer.check_program(program)
  if not isinstance(target, Renderer): check_device_dtypes(given, target)
  program = renderer.extra_rewrite(program)
  for lower in passes_for(renderer): program = lower(program)
  return program
