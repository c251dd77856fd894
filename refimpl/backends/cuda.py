"""CUDA C: the C-family renderer (cstyle.py) with CUDA's spellings, for the CUDA device (ops_cuda.py, NVRTC).

Everything not listed here renders as cstyle.py's module docstring says (one variable per uop and lane, ints on the
unsigned wrap type, NaN-propagating MAX as one select, MULACC unfused, the same include-guarded prelude).
What CUDA C (C++ compiled by NVRTC) spells or needs differently:

  kernel      `extern "C" __global__ void k_name(T* __restrict__ data0, ..., int var_n)` (kernel_symbol): extern "C" so
              that the driver finds the kernel by its plain name (no C++ mangling); DEFINE_LOCAL: a `__shared__` array
              at kernel scope (one per block, as the emulator's locals are one per workgroup)
  grid        SPECIAL gidx{d} = (int)blockIdx.{x,y,z}, lidx{d} = (int)threadIdx.{x,y,z}: the launch is global_size[d]
              blocks of local_size[d] threads (tinygrad's convention)
  BARRIER     __syncthreads(): a block-wide execution barrier that orders the block's shared AND global memory
              accesses before it against those after it (CUDA's memory model), which is the spec's BARRIER rule
  types       signed char, unsigned char, short, unsigned short, int, unsigned int, long long, unsigned long long,
              float, double; bool registers are `bool`, bool buffers `unsigned char` (loads test != 0, stores write
              0 / 1: a C++ bool object holding another byte is undefined)
  bits        BITCAST and the prelude's rf_fbits/rf_bitsf/rf_dbits/rf_bitsd are CUDA's __float_as_uint,
              __uint_as_float, __double_as_longlong, __longlong_as_double: bit moves, no pointer punning (no aliasing
              UB); float inf/NaN literals are __uint_as_float / __longlong_as_double of their bits
  casts       int -> float32/float64 and float64 -> float32 are the _rn intrinsics (__int2float_rn, __ll2double_rn,
              __double2float_rn, ...): round to nearest even spelled out (C++ leaves the direction to the
              implementation); float -> int is C++'s conversion (truncation); the rest is as in C
  precision   FDIV, RECIP and SQRT are the correctly rounded intrinsics __fdiv_rn / __frcp_rn / __fsqrt_rn and
              __ddiv_rn / __drcp_rn / __dsqrt_rn, which hold whatever the flags; ops_cuda.py also compiles with
              --prec-div=true --prec-sqrt=true --ftz=false (subnormals kept) and --fmad=false (no a*b+c contraction:
              NVRTC's default contracts it into an FMA)
  vectors     scalarized, as in C (lane k of uop i is v{i}_{k}); no float4 / int2 types
  float16     refimpl.lower.narrow's bits (native_narrow False): unsigned short registers and storage, float32 compute,
              one RNE rounding per op; bfloat16 and fp8 likewise. cuda_fp16.h / cuda_bf16.h are not used: whether
              their __half / __nv_bfloat16 arithmetic and conversions are one RNE rounding per op on every architecture
              is not established here, and the narrow lowering is the path every backend already shares.
  EXP2 LOG2 SIN  decomposed by refimpl.lower.transcendental (native_transcendentals False), as in C: one algorithm,
              the emulator's, on every GPU. NVIDIA's exp2f/log2f/sinf and their double versions are not used; their
              accuracy is NVIDIA's documentation, not something refimpl has measured on its GPUs.
  WMMA, THREEFRY  rewritten by refimpl.lower (decompose_wmma, decompose_threefry) before rendering, as in C.
  TRUNC       truncf / trunc (native_trunc): the CUDA math functions, a single round-toward-zero instruction (cvt.rzi)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from refimpl.backends.cstyle import CStyleRenderer
from refimpl.dtype import DType, PtrDType, dtypes
from refimpl.ir import Ops, Program, ProgramError
from refimpl.lower.narrow import NARROW

INT_TYPES: dict[DType, str] = {
  dtypes.int8: "signed char", dtypes.uint8: "unsigned char", dtypes.int16: "short", dtypes.uint16: "unsigned short",
  dtypes.int32: "int", dtypes.uint32: "unsigned int", dtypes.int64: "long long", dtypes.uint64: "unsigned long long"}
ALL_SCALARS = frozenset({dtypes.bool, *INT_TYPES, dtypes.float32, dtypes.float64, *NARROW})

# CUDA's limits for every compute capability CUDA 12 supports (5.0 and up): grid and block dimensions, threads per
# block, statically declared __shared__ memory per block
GLOBAL_MAX = (2**31 - 1, 65535, 65535)
LOCAL_MAX = (1024, 1024, 64)
MAX_THREADS_PER_BLOCK = 1024
STATIC_SHARED_BYTES = 48 * 1024

# the correctly rounded conversion intrinsics: int -> float (by source), float64 -> float32
_TO_FLOAT: dict[DType, str] = {dtypes.int32: "int", dtypes.uint32: "uint", dtypes.int64: "ll", dtypes.uint64: "ull"}
_WIDE_INT: dict[DType, DType] = {dtypes.int8: dtypes.int32, dtypes.int16: dtypes.int32, dtypes.uint8: dtypes.int32,
                                 dtypes.uint16: dtypes.int32}  # exactly representable in int: converted through it
_CR_OPS: dict[Ops, dict[DType, str]] = {  # the correctly rounded intrinsics, by source dtype
  Ops.FDIV: {dtypes.float32: "__fdiv_rn({0},{1})", dtypes.float64: "__ddiv_rn({0},{1})"},
  Ops.RECIP: {dtypes.float32: "__frcp_rn({0})", dtypes.float64: "__drcp_rn({0})"},
  Ops.SQRT: {dtypes.float32: "__fsqrt_rn({0})", dtypes.float64: "__dsqrt_rn({0})"}}


@dataclass(frozen=True)
class CUDARenderer(CStyleRenderer):
  """CUDA C for NVRTC; see the module docstring. Capabilities are CUDA's for every compute capability >= 5.0; ops_cuda
  narrows them to the opened device's where one exists (max_threads, shared_bytes)."""
  device: str = "CUDA"
  has_local: bool = True
  has_shared: bool = True
  global_max: tuple[int, ...] | None = GLOBAL_MAX
  local_max: tuple[int, ...] | None = LOCAL_MAX
  supported_dtypes: frozenset | None = ALL_SCALARS
  native_trunc: bool = True  # truncf / trunc (`trunc` below)
  max_threads: int = MAX_THREADS_PER_BLOCK
  shared_bytes: int = STATIC_SHARED_BYTES

  kernel_prefix: ClassVar[str] = 'extern "C" __global__ void '
  buffer_prefix: ClassVar[str] = ""
  buffer_suffix: ClassVar[str] = " __restrict__"
  local_prefix: ClassVar[str] = "__shared__ "
  barrier_statement: ClassVar[str | None] = "__syncthreads();"
  special_spelling: ClassVar[dict[str, str] | None] = {"gidx": "(int)blockIdx.{xyz}", "lidx": "(int)threadIdx.{xyz}"}
  types: ClassVar[dict[DType, str]] = {dtypes.bool: "bool", **INT_TYPES, dtypes.float32: "float", dtypes.float64: "double"}
  bool_storage: ClassVar[str] = "unsigned char"
  int_suffix: ClassVar[dict[DType, str]] = {dtypes.uint32: "u", dtypes.int64: "ll", dtypes.uint64: "ull"}
  float_specials: ClassVar[dict[DType, tuple[str, str]]] = {
    dtypes.float32: ("__uint_as_float(0x7f800000u)", "__uint_as_float(0x7fc00000u)"),
    dtypes.float64: ("__longlong_as_double(0x7ff0000000000000ll)", "__longlong_as_double(0x7ff8000000000000ll)")}
  sqrt: ClassVar[dict[DType, str]] = {dtypes.float32: "__fsqrt_rn", dtypes.float64: "__dsqrt_rn"}
  trunc: ClassVar[dict[DType, str]] = {dtypes.float32: "truncf", dtypes.float64: "trunc"}  # CUDA's (one instruction)
  lang_prelude: ClassVar[str] = r"""typedef unsigned int rf_u32;
typedef unsigned long long rf_u64;
#define rf_fbits(x) __float_as_uint(x)
#define rf_bitsf(x) __uint_as_float(x)
#define rf_dbits(x) ((rf_u64)__double_as_longlong(x))
#define rf_bitsd(x) __longlong_as_double((long long)(x))"""

  # ---- expressions ----
  def alu(self, op: Ops, dt: DType, src: list[str], src_dt: DType) -> str:
    """As C, with float division, reciprocal and square root the correctly rounded intrinsics (_CR_OPS)."""
    if op in _CR_OPS and src_dt in _CR_OPS[op]: return _CR_OPS[op][src_dt].format(*src)
    return super().alu(op, dt, src, src_dt)

  def cast(self, x: str, s: DType, d: DType) -> str:
    """As C, with int -> float32/float64 and float64 -> float32 the round-to-nearest-even intrinsics."""
    if s != d and d in (dtypes.float32, dtypes.float64) and dtypes.is_int(s):
      wide = _WIDE_INT.get(s, s)
      arg = f"(int){x}" if wide != s else x
      return f"__{_TO_FLOAT[wide]}2{'float' if d == dtypes.float32 else 'double'}_rn({arg})"
    if (s, d) == (dtypes.float64, dtypes.float32): return f"__double2float_rn({x})"
    return super().cast(x, s, d)

  # ---- the program: what CUDA refuses beyond Renderer's fields (refimpl.lower.lower_for asks before rendering) ----
  def check_program(self, program: Program) -> None:
    """ProgramError (rule "capability") when a block has more threads, or the program more __shared__ memory, than CUDA
    allows."""
    threads = program.local_size[0] * program.local_size[1] * program.local_size[2]
    if threads > self.max_threads:
      raise ProgramError("capability", f"{self.device}: local_size {program.local_size} has {threads} threads, a CUDA "
                         f"block has at most {self.max_threads}")
    used = sum(p.size * p.base.itemsize for p in program.locals.values() if isinstance(p, PtrDType))
    if used > self.shared_bytes:
      raise ProgramError("capability", f"{self.device}: the DEFINE_LOCALs take {used} bytes, a CUDA block has "
                         f"{self.shared_bytes} bytes of static __shared__ memory")
