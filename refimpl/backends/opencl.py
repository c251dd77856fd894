"""OpenCL C: the C-family renderer (cstyle.py) with OpenCL's spellings, for the GPU device (ops_gpu.py).

Everything not listed here renders as cstyle.py's module docstring says (one variable per uop and lane, ints on the
unsigned wrap type, narrow floats lowered to their bits by refimpl.lower.narrow, the same prelude).
What OpenCL C spells or needs differently:

  kernel      `__kernel void k_name(__global T* restrict data0, ..., int var_n)` (kernel_symbol); DEFINE_LOCAL: a `__local` array
              declared at kernel scope (one per workgroup, as the emulator's locals are)
  grid        SPECIAL gidx{d} = (int)get_group_id(d), lidx{d} = (int)get_local_id(d): the launch is global_size[d]
              workgroups of local_size[d] work items (tinygrad's convention; the NDRange is global_size*local_size)
  BARRIER     barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE): a workgroup barrier that orders __local and
              __global memory, as the spec's BARRIER
  types       char uchar short ushort int uint long ulong float double; bool registers are `bool`, bool buffers `uchar`
              (OpenCL forbids bool kernel arguments): loads test != 0, stores write 0 / 1
  literals    int64 `L`, uint64 `UL`, uint32 `u`; float inf/NaN through as_float/as_double of their bits
  bits        BITCAST and the prelude's rf_fbits/rf_bitsf/rf_dbits/rf_bitsd are as_uint/as_float/as_ulong/as_double
  casts       int -> float32/float64 and float64 -> float32 are convert_<T>_rte (round to nearest even, spelled out);
              float -> int is convert_<T>_rtz (truncation); the rest is as in C
  contraction `#pragma OPENCL FP_CONTRACT OFF`: OpenCL C contracts a*b+c into an FMA by default; off, every rounding is
              where the program puts it (MULACC is unfused, WMMA sums in the emulator's order)
  vectors     scalarized, as in C (lane k of uop i is v{i}_{k}): one code path for every width, no OpenCL vector types.
              Vector loads and stores are consecutive scalar accesses, which OpenCL compilers vectorize themselves.
  float16     always refimpl.lower.narrow's bits (ushort storage and registers, float32 compute, one RNE rounding per
              op), with or without cl_khr_fp16: OpenCL does not require half FDIV/SQRT/RECIP to be correctly rounded,
              and vload_half / vstore_half convert through float, which may quiet a signalling NaN (x86's F16C
              conversion does) and so break bit-exact LOAD/STORE. bfloat16 and fp8 likewise.
  precision   FDIV, RECIP and SQRT on float32 are correctly rounded by the build option
              -cl-fp32-correctly-rounded-divide-sqrt when the device offers it (CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT);
              otherwise, with cl_khr_fp64, they are computed in double and rounded once to float (exact: 53 >= 2*24+2),
              and without either they are listed in `inexact_ops`. float64 / and sqrt are correctly rounded in OpenCL.
  EXP2 LOG2 SIN  native exp2/log2/sin for float32 and float64 (OpenCL full profile: 3 / 3 / 4 ulp, the spec's bounds;
              spec_tests/test_backend_gpu.py measures them; PoCL's are within 1 / 1 / 2 ulp of the rounded result);
              float16/bfloat16 are decomposed by refimpl.lower.transcendental (lower_narrow calls it), which keeps
              their special values exact
              (exp2(-25) in half is the tie 2^-25 rounded to +0; a native result rounded again promises no such thing),
              and so is every dtype when `native_transcendentals` is False.
  no fp64     without cl_khr_fp64 the prelude keeps only the language primitives that need no double, and float64, float16,
              bfloat16 and fp8 are not supported (their lowering converts ints and float64 through double); WMMA is
              refused.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from refimpl.backends.cstyle import CStyleRenderer
from refimpl.dtype import DType, PtrDType, dtypes
from refimpl.errors import CompileError
from refimpl.ir import Ops, Program, ProgramError
from refimpl.lower.narrow import NARROW

# build options: correctly rounded float32 division and sqrt when the device offers them; nothing that relaxes IEEE
# (no -cl-fast-relaxed-math, -cl-mad-enable, -cl-unsafe-math-optimizations, -cl-denorms-are-zero, -cl-finite-math-only)
CORRECT_DIV_SQRT_OPTION = "-cl-fp32-correctly-rounded-divide-sqrt"
RELAXING_OPTIONS = ("-cl-fast-relaxed-math", "-cl-mad-enable", "-cl-unsafe-math-optimizations", "-cl-denorms-are-zero",
                    "-cl-finite-math-only", "-cl-no-signed-zeros")

INT_TYPES: dict[DType, str] = {
  dtypes.int8: "char", dtypes.uint8: "uchar", dtypes.int16: "short", dtypes.uint16: "ushort", dtypes.int32: "int",
  dtypes.uint32: "uint", dtypes.int64: "long", dtypes.uint64: "ulong"}
ALL_SCALARS = frozenset({dtypes.bool, *INT_TYPES, dtypes.float32, dtypes.float64, *NARROW})
NEEDS_FP64 = frozenset({dtypes.float64, *NARROW})  # lower_narrow converts ints and float64 to them through double


@dataclass(frozen=True)
class OpenCLRenderer(CStyleRenderer):
  """OpenCL C for one device. Capabilities beyond Renderer's (set from the device by ops_gpu.GPUDevice):
    has_fp64                cl_khr_fp64: double exists (and with it float64 and the narrow formats)
    has_fp16                cl_khr_fp16 (recorded only: half is rendered through bits either way)
    correct_div_sqrt        the device honours -cl-fp32-correctly-rounded-divide-sqrt
    native_transcendentals  EXP2/LOG2/SIN on float32/float64 use OpenCL's exp2/log2/sin (else decomposed)
    inexact_ops             (Renderer's) float32 FDIV/RECIP/SQRT when the device has neither of the above
    max_workgroup_size      CL_DEVICE_MAX_WORK_GROUP_SIZE: the product of local_size must not exceed it
    local_memory_bytes      CL_DEVICE_LOCAL_MEM_SIZE: the DEFINE_LOCALs of one program must fit in it"""
  has_fp64: bool = True
  has_fp16: bool = False
  correct_div_sqrt: bool = True
  native_trunc: bool = True  # OpenCL C's trunc (`trunc` below): round toward zero, the sign kept
  native_transcendentals: bool = True
  max_workgroup_size: int | None = None
  local_memory_bytes: int | None = None

  kernel_prefix: ClassVar[str] = "__kernel void "
  buffer_prefix: ClassVar[str] = "__global "
  buffer_suffix: ClassVar[str] = " restrict"
  local_prefix: ClassVar[str] = "__local "
  barrier_statement: ClassVar[str | None] = "barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);"
  special_spelling: ClassVar[dict[str, str] | None] = {"gidx": "(int)get_group_id({d})", "lidx": "(int)get_local_id({d})"}
  types: ClassVar[dict[DType, str]] = {dtypes.bool: "bool", **INT_TYPES, dtypes.float32: "float", dtypes.float64: "double"}
  bool_storage: ClassVar[str] = "uchar"
  int_suffix: ClassVar[dict[DType, str]] = {dtypes.uint32: "u", dtypes.int64: "L", dtypes.uint64: "UL"}
  float_specials: ClassVar[dict[DType, tuple[str, str]]] = {
    dtypes.float32: ("as_float(0x7f800000u)", "as_float(0x7fc00000u)"),
    dtypes.float64: ("as_double(0x7ff0000000000000UL)", "as_double(0x7ff8000000000000UL)")}
  sqrt: ClassVar[dict[DType, str]] = {dtypes.float32: "sqrt", dtypes.float64: "sqrt"}
  trunc: ClassVar[dict[DType, str]] = {dtypes.float32: "trunc", dtypes.float64: "trunc"}  # OpenCL's: exact, sign kept
  # exp2 keeps a NaN itself: PoCL 3.0 folds exp2 of a NaN constant to 0 (fuzz/corpus/GPU-EXP2-float-*.json)
  transcendental: ClassVar[dict[Ops, str]] = {Ops.EXP2: "(isnan({0}) ? {0} : exp2({0}))", Ops.LOG2: "log2({0})",
                                              Ops.SIN: "sin({0})"}
  lang_prelude: ClassVar[str] = r"""typedef uint rf_u32;
typedef ulong rf_u64;
#define rf_fbits(x) as_uint(x)
#define rf_bitsf(x) as_float(x)
#define rf_dbits(x) as_ulong(x)
#define rf_bitsd(x) as_double(x)"""

  def prelude(self) -> str:
    """The pragmas, the language's primitives and cstyle's helpers (without fp64: only those that need no double)."""
    pragmas = ("#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" if self.has_fp64 else "") + "#pragma OPENCL FP_CONTRACT OFF\n"
    if self.has_fp64: return pragmas + super().prelude()
    lang = "\n".join(line for line in self.lang_prelude.splitlines() if "double" not in line)
    return f"{pragmas}#ifndef RF_PRELUDE\n#define RF_PRELUDE\n{lang}\n#endif\n"

  # ---- expressions ----
  def alu(self, op: Ops, dt: DType, src: list[str], src_dt: DType) -> str:
    if src_dt == dtypes.float32 and not self.correct_div_sqrt and self.has_fp64 and op in (Ops.FDIV, Ops.RECIP, Ops.SQRT):
      wide = {Ops.FDIV: "((double){0}/(double){1})", Ops.RECIP: "(1.0/(double){0})", Ops.SQRT: "sqrt((double){0})"}[op]
      return f"convert_float_rte({wide.format(*src)})"  # one rounding of a double that is itself a single rounding
    return super().alu(op, dt, src, src_dt)

  def cast(self, x: str, s: DType, d: DType) -> str:
    """As C, with the rounding of int -> float, float64 -> float32 (nearest even) and float -> int (toward zero) explicit."""
    if s != d and d in (dtypes.float32, dtypes.float64) and (dtypes.is_int(s) or (s, d) == (dtypes.float64, dtypes.float32)):
      return f"convert_{self.types[d]}_rte({x})"
    if dtypes.is_int(d) and s in (dtypes.float32, dtypes.float64): return f"convert_{self.types[d]}_rtz({x})"
    return super().cast(x, s, d)

  # ---- the program: what the device refuses beyond Renderer's fields (refimpl.lower.lower_for asks before rendering) ----
  def check_program(self, program: Program) -> None:
    """ProgramError (rule "capability") when a workgroup has more work items, or the program more local memory, than the
    device allows; CompileError for a WMMA without cl_khr_fp64 (its decomposition accumulates in double)."""
    threads = program.local_size[0] * program.local_size[1] * program.local_size[2]
    if self.max_workgroup_size is not None and threads > self.max_workgroup_size:
      raise ProgramError("capability", f"{self.device}: local_size {program.local_size} has {threads} work items, the "
                         f"device's maximum workgroup size is {self.max_workgroup_size}")
    used = sum(p.size * p.base.itemsize for p in program.locals.values() if isinstance(p, PtrDType))
    if self.local_memory_bytes is not None and used > self.local_memory_bytes:
      raise ProgramError("capability", f"{self.device}: the DEFINE_LOCALs take {used} bytes, the device has "
                         f"{self.local_memory_bytes} bytes of local memory")
    if not self.has_fp64 and any(u.op is Ops.WMMA for u in program.uops):
      raise CompileError(f"{self.device}: WMMA accumulates in double and the device has no cl_khr_fp64")

def supported_dtypes(has_fp64: bool) -> frozenset:
  """The scalar dtypes a device computes with and stores: every one with cl_khr_fp64; without it no float64 and none of
  the narrow formats (their lowering converts ints and float64 through double)."""
  return ALL_SCALARS if has_fp64 else ALL_SCALARS - NEEDS_FP64
