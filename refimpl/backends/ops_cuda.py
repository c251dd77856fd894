"""The CUDA device: CUDA C (cuda.py) compiled by NVRTC to a cubin and run through the CUDA driver API, both via ctypes.

Toolchain. NVRTC is the PyPI wheel nvidia-cuda-nvrtc-cu12 (pip install 'refimpl[cuda]', in the dev extra): its
libnvrtc.so.12 is found inside the installed package (importlib finds `nvidia.cuda_nvrtc`; no root, no system CUDA, no
LD_LIBRARY_PATH), and libnvrtc-builtins.so.12.x, which NVRTC opens itself, sits beside it (libnvrtc's RUNPATH is
$ORIGIN; it is also loaded first, so NVRTC's dlopen of its soname finds it loaded).
The compiler works without a GPU or a driver: NVRTCCompiler can be made on its own (the CI compile tests).

Flags (FLAGS), the ones that make the spec hold, whatever NVRTC's defaults:
  --fmad=false        no contraction of a*b+c into an FMA (NVRTC's default contracts; MULACC is rendered unfused)
  --ftz=false         float32 subnormals are kept, as inputs and results
  --prec-div=true     float32 division is IEEE round to nearest (the renderer also uses __fdiv_rn)
  --prec-sqrt=true    float32 square root is IEEE round to nearest (the renderer also uses __fsqrt_rn)
  -std=c++17          the dialect the renderer writes (hexadecimal float literals)
and the architecture, --gpu-architecture=sm_XX: a cubin (machine code) for one compute capability. An opened device
compiles for its own (sm_{major}{minor} from the driver); the compiler on its own compiles for DEFAULT_ARCH (sm_80,
overridden by env CUDA_ARCH=sm_XX). A cubin, not PTX (compute_XX): the driver loads it as it is, so no PTX JIT runs at
load with options refimpl does not control, and a cubin from NVRTC 12.x loads on any CUDA 12 driver (minor-version
compatibility) where PTX of a newer ISA than the driver's JIT knows is refused. The disk cache key names NVRTC's version,
the architecture and the flags; the cached object is the cubin.

Runtime. The driver API from libcuda.so.1: cuInit, cuDeviceGet, the device's primary context (cuDevicePrimaryCtxRetain,
made current per thread), cuModuleLoadData / cuModuleGetFunction, cuMemAlloc / cuMemFree, cuMemcpyHtoD / DtoH
(synchronous), cuLaunchKernel on the default stream and cuCtxSynchronize. prg(*bufs, global_size=, local_size=, vals=,
wait=) launches global_size blocks of local_size threads, the int vars passed as int32. Without libcuda.so.1, or when
cuInit fails (no GPU, driver too old), opening CUDA raises DeviceUnavailable with the reason. `CUDA:n` is device n.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import importlib.util
import os
import pathlib
import threading
import time
from typing import Any

from refimpl.backends.cstyle import kernel_symbol
from refimpl.backends.cuda import CUDARenderer
from refimpl.device import BufferSpec, Compiled, Compiler, DeviceUnavailable, LRUAllocator, compile_batch_cached
from refimpl.dtype import DType, ImageDType, PtrDType, dtypes
from refimpl.errors import CompileError
from refimpl.helpers import GlobalCounters, from_mv

FLAGS: tuple[str, ...] = ("--fmad=false", "--ftz=false", "--prec-div=true", "--prec-sqrt=true", "-std=c++17")
DEFAULT_ARCH = "sm_80"
NO_NVRTC = ("CUDA: NVRTC not found; install the nvidia-cuda-nvrtc-cu12 wheel (pip install 'refimpl[cuda]', "
            "included in refimpl[dev])")
NO_DRIVER = "CUDA: no NVIDIA driver: libcuda.so.1 not found"


# ***** NVRTC *****

def nvrtc_dir() -> pathlib.Path:
  """The lib directory of the installed nvidia-cuda-nvrtc-cu12 wheel (libnvrtc.so.12 and libnvrtc-builtins), or
  CompileError saying what to install."""
  try: spec = importlib.util.find_spec("nvidia.cuda_nvrtc")
  except ImportError: spec = None
  for d in (spec.submodule_search_locations or []) if spec is not None else []:
    lib = pathlib.Path(d) / "lib"
    if any(lib.glob("libnvrtc.so.*")):
      if not any(lib.glob("libnvrtc-builtins.so.*")):
        raise CompileError(f"{NO_NVRTC}: {lib} has libnvrtc but no libnvrtc-builtins.so (a broken install: reinstall it)")
      return lib
  raise CompileError(NO_NVRTC)


class NVRTC:
  """libnvrtc through ctypes: version() and compile(src, options) -> (cubin, log)."""
  def __init__(self) -> None:
    lib = nvrtc_dir()
    path = min(p for p in lib.glob("libnvrtc.so.*") if ".alt." not in p.name)
    builtins = min(p for p in lib.glob("libnvrtc-builtins.so.*") if ".alt." not in p.name)
    try:
      ctypes.CDLL(str(builtins))  # loaded first, so NVRTC's own dlopen of it by soname finds it whatever the search path
      self.lib = ctypes.CDLL(str(path))
    except OSError as e: raise CompileError(f"{NO_NVRTC} ({path} does not load: {e})") from None
    self.lib.nvrtcGetErrorString.restype = ctypes.c_char_p
    self.lib.nvrtcCreateProgram.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int,
                                            ctypes.c_void_p, ctypes.c_void_p]
    self.lib.nvrtcCompileProgram.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    for fn in ("nvrtcGetProgramLogSize", "nvrtcGetCUBINSize", "nvrtcGetPTXSize"):
      getattr(self.lib, fn).argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
    for fn in ("nvrtcGetProgramLog", "nvrtcGetCUBIN", "nvrtcGetPTX"):
      getattr(self.lib, fn).argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    self.lib.nvrtcDestroyProgram.argtypes = [ctypes.POINTER(ctypes.c_void_p)]

  def _check(self, status: int, what: str) -> None:
    if status != 0: raise CompileError(f"CUDA: {what} failed: {self.lib.nvrtcGetErrorString(status).decode()}")

  def version(self) -> str:
    major, minor = ctypes.c_int(), ctypes.c_int()
    self._check(self.lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
    return f"{major.value}.{minor.value}"

  def _read(self, prog: ctypes.c_void_p, size_fn: str, read_fn: str) -> bytes:
    n = ctypes.c_size_t()
    self._check(getattr(self.lib, size_fn)(prog, ctypes.byref(n)), size_fn)
    buf = ctypes.create_string_buffer(n.value)
    self._check(getattr(self.lib, read_fn)(prog, buf), read_fn)
    return buf.raw[:n.value]

  def compile(self, src: str, options: tuple[str, ...], output: str = "CUBIN") -> tuple[bytes | None, str]:
    """(the cubin, or with output="PTX" the PTX, or None when the source does not compile; NVRTC's log). A cubin needs
    an sm_XX architecture among the options, PTX a compute_XX one."""
    prog = ctypes.c_void_p()
    self._check(self.lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"refimpl.cu", 0, None, None),
                "nvrtcCreateProgram")
    try:
      opts = (ctypes.c_char_p * len(options))(*(o.encode() for o in options))
      status = self.lib.nvrtcCompileProgram(prog, len(options), opts)
      log = self._read(prog, "nvrtcGetProgramLogSize", "nvrtcGetProgramLog").rstrip(b"\0").decode(errors="replace")
      if status != 0: return None, log or self.lib.nvrtcGetErrorString(status).decode()
      return self._read(prog, f"nvrtcGet{output}Size", f"nvrtcGet{output}"), log
    finally: self.lib.nvrtcDestroyProgram(ctypes.byref(prog))

@functools.cache
def nvrtc() -> NVRTC:
  """The process's NVRTC (loaded once)."""
  return NVRTC()


def _numbered(src: str) -> str: return "\n".join(f"{n:4d} | {line}" for n, line in enumerate(src.splitlines(), 1))

def default_arch() -> str:
  """The architecture a compiler without a device targets: env CUDA_ARCH (sm_XX) or DEFAULT_ARCH."""
  arch = os.environ.get("CUDA_ARCH", DEFAULT_ARCH)
  if not (arch.startswith("sm_") and arch[3:].rstrip("af").isdigit()):
    raise CompileError(f"CUDA: CUDA_ARCH={arch!r} is not an sm_XX architecture (e.g. sm_80)")
  return arch


class NVRTCCompiler(Compiler):
  """CUDA C -> cubin for one architecture, with FLAGS; cached on disk under NVRTC's version, the architecture and the
  flags. Needs no GPU."""
  def __init__(self, arch: str | None = None):
    self.arch, self.nvrtc = arch or default_arch(), nvrtc()
    self.options = (f"--gpu-architecture={self.arch}", *FLAGS)
    key = hashlib.sha256("\n".join([self.nvrtc.version(), *self.options]).encode()).hexdigest()[:20]
    super().__init__(f"nvrtc-{key}")

  def compile(self, src: str) -> bytes:
    """The cubin; CompileError with NVRTC's log and the numbered source when the source does not compile."""
    cubin, log = self.nvrtc.compile(src, self.options)
    if cubin is None:
      raise CompileError(f"CUDA: NVRTC {self.nvrtc.version()} ({self.arch}) failed:\n{log}\n--- source ---\n{_numbered(src)}")
    return cubin

  def compile_batch(self, srcs: list[str]) -> list[bytes]:
    """One cubin per source, every uncached source compiled in one translation unit (distinct kernel names; the prelude
    is include-guarded): NVRTC's start-up cost is paid once."""
    return compile_batch_cached(self, srcs, lambda todo: self.compile("\n".join(todo)))


# ***** the driver API *****

CU_DEVICE_ATTRIBUTE = {"max_threads": 1, "block_x": 2, "block_y": 3, "block_z": 4, "grid_x": 5, "grid_y": 6, "grid_z": 7,
                       "shared_bytes": 8, "major": 75, "minor": 76}

class Driver:
  """libcuda.so.1 through ctypes; every call is checked, an error named by cuGetErrorName."""
  def __init__(self) -> None:
    try: self.lib = ctypes.CDLL("libcuda.so.1")
    except OSError: raise DeviceUnavailable(NO_DRIVER) from None
    status = self.lib.cuInit(0)
    if status != 0: raise DeviceUnavailable(f"CUDA: cuInit failed: {self.error_name(status)} (no usable NVIDIA GPU or driver)")

  def error_name(self, status: int) -> str:
    name = ctypes.c_char_p()
    self.lib.cuGetErrorName(status, ctypes.byref(name))
    return name.value.decode() if name.value else f"CUresult {status}"

  def __call__(self, fn: str, *args: Any) -> None:
    status = getattr(self.lib, fn)(*args)
    if status != 0: raise RuntimeError(f"CUDA: {fn} failed: {self.error_name(status)}")

  def attribute(self, dev: ctypes.c_int, name: str) -> int:
    v = ctypes.c_int()
    self("cuDeviceGetAttribute", ctypes.byref(v), CU_DEVICE_ATTRIBUTE[name], dev)
    return v.value


class CUDAAllocator(LRUAllocator):
  """Device memory from cuMemAlloc (a CUdeviceptr as int); copies are synchronous cuMemcpyHtoD / cuMemcpyDtoH, which
  wait for earlier work on the default stream."""
  def __init__(self, device: CUDADevice):
    super().__init__()
    self.device = device
  def _alloc(self, size: int, options: BufferSpec) -> Any:
    if options.external_ptr is not None: raise RuntimeError(f"{self.device.device}: external pointers are not supported")
    ptr = ctypes.c_uint64()
    self.device.call("cuMemAlloc_v2", ctypes.byref(ptr), ctypes.c_size_t(size))
    return ptr.value
  def _free(self, opaque: Any, options: BufferSpec) -> None: self.device.call("cuMemFree_v2", ctypes.c_uint64(opaque))
  def _copyin(self, dest: Any, src: memoryview) -> None:
    host = from_mv(memoryview(bytearray(src)) if src.readonly else src)
    self.device.call("cuMemcpyHtoD_v2", ctypes.c_uint64(dest), host, ctypes.c_size_t(len(src)))
  def _copyout(self, dest: memoryview, src: Any) -> None:
    self.device.call("cuMemcpyDtoH_v2", from_mv(dest), ctypes.c_uint64(src), ctypes.c_size_t(len(dest)))


class CUDAProgram:
  """The kernel of a cubin, loaded into the device's context; calling it launches one grid (module docstring)."""
  def __init__(self, device: CUDADevice, name: str, lib: bytes):
    self.device, self.name, self.module, self.fn = device, name, ctypes.c_void_p(), ctypes.c_void_p()
    self.image = ctypes.create_string_buffer(lib)
    device.call("cuModuleLoadData", ctypes.byref(self.module), self.image)
    try: device.call("cuModuleGetFunction", ctypes.byref(self.fn), self.module, kernel_symbol(name).encode())
    except RuntimeError as e:
      raise CompileError(f"{device.device}: the cubin has no kernel {kernel_symbol(name)!r}: {e}") from None

  def __call__(self, *bufs: Any, global_size: tuple[int, ...] = (1, 1, 1), local_size: tuple[int, ...] = (1, 1, 1),
               vals: tuple[int, ...] = (), wait: bool = False) -> float | None:
    grid = tuple(global_size) + (1,) * (3 - len(global_size))
    block = tuple(local_size) + (1,) * (3 - len(local_size))
    args = [ctypes.c_uint64(b) for b in bufs] + [ctypes.c_int32(v) for v in vals]
    params = (ctypes.c_void_p * max(len(args), 1))(*(ctypes.addressof(a) for a in args))  # args outlive the call
    start = time.perf_counter()
    self.device.call("cuLaunchKernel", self.fn, *(ctypes.c_uint(g) for g in grid), *(ctypes.c_uint(b) for b in block),
                     ctypes.c_uint(0), ctypes.c_void_p(0), params, ctypes.c_void_p(0))
    GlobalCounters.kernel_count += 1
    if not wait: return None
    self.device.synchronize()
    elapsed = time.perf_counter() - start
    GlobalCounters.time_sum_s += elapsed
    return elapsed

  def __del__(self) -> None:
    if getattr(self, "module", None) and self.module.value:
      try: self.device.call("cuModuleUnload", self.module)
      except Exception: pass  # the context may be gone at interpreter exit


class CUDADevice(Compiled):
  """CUDA through NVRTC and the driver API; see the module docstring."""
  subprocess_safe = True  # each process opens its own driver context (refimpl's workers are spawned)
  def __init__(self, device: str = "CUDA"):
    _, _, index = device.partition(":")
    self.driver, self.pid = Driver(), os.getpid()
    count = ctypes.c_int()
    self.driver("cuDeviceGetCount", ctypes.byref(count))
    ordinal = int(index) if index.isdigit() else 0
    if ordinal >= count.value: raise DeviceUnavailable(f"{device}: there are {count.value} CUDA devices")
    self.cu_device, self.context = ctypes.c_int(), ctypes.c_void_p()
    self.driver("cuDeviceGet", ctypes.byref(self.cu_device), ordinal)
    self.driver("cuDevicePrimaryCtxRetain", ctypes.byref(self.context), self.cu_device)
    self._current = threading.local()
    attr = functools.partial(self.driver.attribute, self.cu_device)
    self.arch = f"sm_{attr('major')}{attr('minor')}"
    name = ctypes.create_string_buffer(256)
    self.driver("cuDeviceGetName", name, 256, self.cu_device)
    self.name = name.value.decode()
    renderer = CUDARenderer(device, global_max=(attr("grid_x"), attr("grid_y"), attr("grid_z")),
                            local_max=(attr("block_x"), attr("block_y"), attr("block_z")), max_threads=attr("max_threads"),
                            shared_bytes=min(attr("shared_bytes"), CUDARenderer.shared_bytes))
    super().__init__(device, CUDAAllocator(self), renderer, NVRTCCompiler(self.arch), functools.partial(CUDAProgram, self))

  def call(self, fn: str, *args: Any) -> None:
    """A driver call with the device's context current in this thread (a context never crosses a fork)."""
    if os.getpid() != self.pid:
      raise RuntimeError(f"{self.device}: this CUDA context was made in process {self.pid} and cannot be used after a fork "
                         f"(in {os.getpid()}); open the device in the child process instead (spawn)")
    if not getattr(self._current, "set", False):
      self.driver("cuCtxSetCurrent", self.context)
      self._current.set = True
    self.driver(fn, *args)

  def synchronize(self) -> None: self.call("cuCtxSynchronize")

  def supports_dtype(self, dtype: DType) -> bool:
    """Every scalar dtype (the narrow floats through refimpl.lower.narrow); no pointers or images."""
    if isinstance(dtype, (PtrDType, ImageDType)) or dtype.count != 1 or dtype == dtypes.void: return False
    return dtype in self.renderer.supported_dtypes

  def describe(self) -> str:
    """One line: the GPU, its architecture, NVRTC's version and the flags."""
    return f"{self.name} ({self.arch}); NVRTC {self.compiler.nvrtc.version()}; {' '.join(self.compiler.options)}"
