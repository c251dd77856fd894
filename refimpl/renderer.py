"""What a backend tells the rest of refimpl about itself: its renderer, its capabilities and what it needs lowered."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Renderer:
  """Turns a lowered Program into the source text a backend's Compiler takes, and describes the backend.

  Capabilities (read by refimpl.lower.check_capabilities, the test suite and the fuzzer):
    device        the device name the renderer is for
    has_local     the backend has workgroups: SPECIAL lidx, DEFINE_LOCAL and BARRIER
    has_shared    DEFINE_LOCAL memory exists (implies has_local)
    global_max    the largest global size per dimension, or None when the backend has no grid (loops instead)
    local_max     the largest local size per dimension, or None
    vector_widths the vector counts the backend renders natively (others are scalarized)
    flushes_subnormals  float results that would be subnormal come back as zero
    supported_dtypes    the scalar dtypes the backend computes with and stores, or None for all of them
    inexact_ops         the ops whose results may be off the spec's (the suite compares them loosely)

  What it renders natively (all of it here; refimpl's C, OpenCL C and LLVM IR renderers say otherwise);
  refimpl.lower.lower_for lowers the rest before `render`, in its one fixed order:
    grid_as_loops           (a property: global_max is None) SPECIALs become loops (lower_grid_to_loops)
    native_trunc            TRUNC (else decompose_trunc: other float and int64 ops)
    native_transcendentals  EXP2/LOG2/SIN (else decompose_transcendentals)
    native_threefry         THREEFRY (else decompose_threefry)
    native_narrow           float16/bfloat16/fp8 values and ops (else lower_narrow: bits, float32/float64 ops)
    native_wmma             WMMA (else decompose_wmma)
    native_poison           a float->int CAST out of range and a shift by a count outside [0, bits) give some value
                            in the backend's language, as the spec's deferred kinds say (LLVM IR's poison), rather than
                            undefined behaviour (C's; else guard_poison makes them defined for every input)
    native_division         an IDIV / MOD by 0 or of INT_MIN by -1 gives some value in the backend's language (WGSL's
                            e1 / 0 is e1), as the spec's deferred kinds say, rather than undefined behaviour or a trap
                            (C's, LLVM IR's sdiv / udiv, x86's idiv; else guard_division guards the divisor)
  """
  device: str = "NONE"
  has_local: bool = False
  has_shared: bool = False
  global_max: tuple[int, ...] | None = None
  local_max: tuple[int, ...] | None = None
  vector_widths: tuple[int, ...] = (1,)
  flushes_subnormals: bool = False
  supported_dtypes: frozenset | None = None
  inexact_ops: frozenset = frozenset()
  native_trunc: bool = True
  native_transcendentals: bool = True
  native_threefry: bool = True
  native_narrow: bool = True
  native_wmma: bool = True
  native_poison: bool = True
  native_division: bool = True

  @property
  def grid_as_loops(self) -> bool:
    """The backend has no grid: lower_for lowers SPECIALs (and BARRIERs) to loops."""
    return self.global_max is None

  def check_program(self, program) -> None:
    """Raise when the backend cannot run `program` for a reason the fields above do not say (refimpl.lower.lower_for
    calls it after check_capabilities). Nothing here."""

  def extra_rewrite(self, program):
    """The backend's own rewrite of a checked program, before the shared lowering passes (lower_for). None here: the
    fuzzer's planted bugs are written as such rewrites."""
    return program

  def render(self, name: str, program) -> str:
    """The source text of kernel `name` of a program that lower_for has lowered for this renderer."""
    raise NotImplementedError(f"{type(self).__name__} cannot render programs")
