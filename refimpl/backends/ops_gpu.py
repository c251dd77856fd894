"""The GPU device: OpenCL C (opencl.py) built and run through pyopencl, on any OpenCL platform; PoCL on the CPU (the pip
package pocl-binary-distribution) is the default.

Device selection. env GPU_PLATFORM and GPU_DEVICE choose a platform and a device in it, each by index ("0") or by a
case-insensitive substring of its name or vendor ("nvidia", "pthread"). `Device["GPU:n"]` takes device n of the platform.
Without GPU_PLATFORM the PoCL platforms ("Portable Computing Language") are tried first, then the others, in the order the
ICD loader lists them; the first whose device builds a small kernel from source is taken. That probe matters: the PoCL of
pocl-binary-distribution 3.0 (LLVM 14) builds nothing on a CPU its LLVM does not know (Zen 4/5: "unknown target CPU
'generic'"), and a distribution's PoCL (Debian/Ubuntu: apt-get install pocl-opencl-icd) may sit beside it. No pyopencl, no
platform, no device, or no device that builds raises DeviceUnavailable saying why and what to install.

Processes. The OpenCL context and queue belong to the process that opened the device (the probe's context is kept), and
a process that does not have one makes it on first use. A context never crosses a fork: a forked child that inherits an
opened device gets a clear error (refimpl's workers are spawned and open their own device).

Build. `clBuildProgram` with build_options(device): `-cl-fp32-correctly-rounded-divide-sqrt` when the device offers it
(CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT in CL_DEVICE_SINGLE_FP_CONFIG; otherwise the renderer computes float32 / and sqrt in
double), and none of the options that relax IEEE (opencl.RELAXING_OPTIONS). What the compiler returns and the disk cache
keeps is the program binary (CL_PROGRAM_BINARIES) together with its source: a binary the driver refuses is rebuilt from
the source. The cache key names the platform and its version, the device, its OpenCL and driver versions and the options.
On PoCL the compiler returns the source alone and has no disk cache (CLCompiler says why: PoCL's own kernel cache keeps
its builds, and reading the binary would cost it a second compile of every kernel).
A failed build raises CompileError with the build log and the numbered source.

Launch. prg(*bufs, global_size=, local_size=, vals=, wait=) enqueues an NDRange of global_size[d]*local_size[d] work items
in workgroups of local_size (get_group_id = gidx, get_local_id = lidx); the int vars are passed as int32. With wait=True
it waits and returns the kernel's time in seconds from the OpenCL profiling counters.

Capabilities recorded in the renderer (see OpenCLRenderer): has_local/has_shared, local_max (CL_DEVICE_MAX_WORK_ITEM_SIZES),
max_workgroup_size, local_memory_bytes, flushes_subnormals (CL_FP_DENORM missing from the single or double FP config),
has_fp64/has_fp16, correct_div_sqrt, inexact_ops and supported_dtypes.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import os
import struct
import time
from collections import OrderedDict
from typing import Any

import numpy as np

from refimpl.backends.cstyle import kernel_symbol
from refimpl.backends.opencl import CORRECT_DIV_SQRT_OPTION, OpenCLRenderer, supported_dtypes
from refimpl.device import BufferSpec, Compiled, Compiler, DeviceUnavailable, LRUAllocator, compile_batch_cached
from refimpl.dtype import DType, ImageDType, PtrDType, dtypes
from refimpl.errors import CompileError
from refimpl.helpers import GlobalCounters
from refimpl.ir import Ops

NO_PLATFORM = ("GPU: no OpenCL platform found; install pocl-binary-distribution (pip install 'refimpl[gpu]') "
               "or a vendor OpenCL driver")
POCL = "portable computing language"
GLOBAL_MAX = (2**31 - 1,) * 3  # the index dtype is int32: no dimension can count more workgroups than that
LIB_MAGIC = b"RFCLLIB1"        # a compiled program: magic, source length (u32), source, binary (may be empty)
KEEP_BUILT = 4                 # built programs kept per device for the runtime to take (GPUDevice.keep_built)


def _cl() -> Any:
  """The pyopencl module, or DeviceUnavailable saying what to install."""
  try: return importlib.import_module("pyopencl")
  except ImportError as e: raise DeviceUnavailable(f"{NO_PLATFORM} (pyopencl does not import: {e})") from None


def _pick(items: list[Any], want: str, what: str) -> Any:
  """items[int(want)] or the first item whose name or vendor contains `want` (case-insensitive)."""
  if want.isdigit():
    if int(want) < len(items): return items[int(want)]
  else:
    for it in items:
      if want.lower() in f"{it.name} {it.vendor}".lower(): return it
  names = ", ".join(f"{k}: {it.name}" for k, it in enumerate(items))
  raise DeviceUnavailable(f"GPU: no OpenCL {what} matches {want!r} (there are {names})")


PROBE_SRC = "__kernel void rf_probe(__global int* restrict o) { o[get_global_id(0)] = (int)get_local_id(0); }"

def _devices(cl: Any, platform: Any) -> list[Any]:
  try: return platform.get_devices()
  except cl.Error: return []

def _probe(cl: Any, dev: Any) -> tuple[Any, str | None]:
  """(a context on dev, None) when dev builds a small kernel from source, else (None, why not)."""
  try:
    ctx = cl.Context([dev])
    cl.Program(ctx, PROBE_SRC).build(options=list(build_options(dev)))
    return ctx, None
  except cl.Error as e:
    text = str(e)
    if "unknown target CPU" in text:
      return None, ("its compiler does not know this CPU (\"unknown target CPU\"); install an OpenCL platform built for it, "
                    "e.g. Debian/Ubuntu's PoCL (apt-get install pocl-opencl-icd), or a vendor driver")
    return None, f"it cannot build a trivial kernel: {text.strip().splitlines()[-1] if text.strip() else type(e).__name__}"

def select_device(index: int | None = None) -> tuple[Any, Any, Any]:
  """(platform, device, context): by GPU_PLATFORM / GPU_DEVICE (index or name substring), else the first PoCL platform,
  then any other, whose device builds a small kernel; `index` (from "GPU:n") picks the device when GPU_DEVICE is not set.
  DeviceUnavailable lists why each candidate was refused."""
  cl = _cl()
  try: platforms = cl.get_platforms()
  except cl.Error as e: raise DeviceUnavailable(f"{NO_PLATFORM} ({e})") from None
  usable = [p for p in platforms if _devices(cl, p)]
  if not usable: raise DeviceUnavailable(NO_PLATFORM if not platforms else
                                         f"{NO_PLATFORM} (platforms without devices: {', '.join(p.name for p in platforms)})")
  if want := os.environ.get("GPU_PLATFORM", ""): candidates = [_pick(usable, want, "platform")]
  else: candidates = sorted(usable, key=lambda p: POCL not in p.name.lower())  # stable: PoCL first, then the rest in order
  want_dev = os.environ.get("GPU_DEVICE", "") or (str(index) if index is not None else "0")
  refused = []
  for platform in candidates:
    dev = _pick(_devices(cl, platform), want_dev, f"device of {platform.name}")
    ctx, why = _probe(cl, dev)
    if ctx is not None: return platform, dev, ctx
    refused.append(f"{platform.name} ({platform.version.strip()}) / {dev.name}: {why}")
  raise DeviceUnavailable("GPU: no usable OpenCL device: " + "; ".join(refused))


def build_options(dev: Any) -> tuple[str, ...]:
  """The clBuildProgram options: correctly rounded float32 division and sqrt where the device offers them; nothing else."""
  cl = _cl()
  return (CORRECT_DIV_SQRT_OPTION,) if dev.single_fp_config & cl.device_fp_config.CORRECTLY_ROUNDED_DIVIDE_SQRT else ()


def probe(device: str, dev: Any) -> OpenCLRenderer:
  """The renderer for this device, its capabilities read from the device."""
  cl = _cl()
  ext = dev.extensions.split()
  fp64, fp16 = "cl_khr_fp64" in ext, "cl_khr_fp16" in ext
  correct = bool(dev.single_fp_config & cl.device_fp_config.CORRECTLY_ROUNDED_DIVIDE_SQRT)
  denorm = cl.device_fp_config.DENORM
  flushes = not dev.single_fp_config & denorm or (fp64 and not dev.double_fp_config & denorm)
  inexact = frozenset() if correct or fp64 else frozenset({Ops.FDIV, Ops.RECIP, Ops.SQRT})
  dts = supported_dtypes(fp64)
  if dev.profile == "EMBEDDED_PROFILE" and "cles_khr_int64" not in ext: dts = dts - {dtypes.int64, dtypes.uint64}
  return OpenCLRenderer(device, has_local=True, has_shared=True, global_max=GLOBAL_MAX, local_max=tuple(dev.max_work_item_sizes),
                        flushes_subnormals=flushes, supported_dtypes=dts, has_fp64=fp64, has_fp16=fp16, correct_div_sqrt=correct,
                        inexact_ops=inexact, max_workgroup_size=dev.max_work_group_size, local_memory_bytes=dev.local_mem_size)


class _Context:
  """One process's OpenCL context and in-order profiling queue on the device."""
  def __init__(self, dev: Any, ctx: Any = None):
    cl = _cl()
    self.pid, self.ctx = os.getpid(), ctx if ctx is not None else cl.Context([dev])
    self.queue = cl.CommandQueue(self.ctx, dev, properties=cl.command_queue_properties.PROFILING_ENABLE)


class CLAllocator(LRUAllocator):
  """Device memory as cl.Buffer; copies are blocking enqueue_copy calls on the device's queue. No views (_offset): OpenCL
  sub-buffers need aligned offsets."""
  def __init__(self, device: GPUDevice):
    super().__init__()
    self.device = device
  def _alloc(self, size: int, options: BufferSpec) -> Any:
    cl = _cl()
    if options.external_ptr is not None: raise RuntimeError(f"{self.device.device}: external pointers are not supported")
    return cl.Buffer(self.device.context.ctx, cl.mem_flags.READ_WRITE, size)
  def _free(self, opaque: Any, options: BufferSpec) -> None: opaque.release()
  def _copyin(self, dest: Any, src: memoryview) -> None:
    _cl().enqueue_copy(self.device.context.queue, dest, np.frombuffer(src, np.uint8), is_blocking=True)
  def _copyout(self, dest: memoryview, src: Any) -> None:  # the queue is in order: the copy waits for earlier launches
    _cl().enqueue_copy(self.device.context.queue, np.frombuffer(dest, np.uint8), src, is_blocking=True)


def _numbered(src: str) -> str: return "\n".join(f"{n:4d} | {line}" for n, line in enumerate(src.splitlines(), 1))

def pack_lib(src: str, binary: bytes) -> bytes:
  s = src.encode()
  return LIB_MAGIC + struct.pack("<I", len(s)) + s + binary

def unpack_lib(lib: bytes) -> tuple[str, bytes]:
  """(source, binary) of a compiled program; a plain source (bytes of text) has no binary."""
  if not lib.startswith(LIB_MAGIC): return lib.decode(), b""
  (n,) = struct.unpack_from("<I", lib, len(LIB_MAGIC))
  start = len(LIB_MAGIC) + 4
  return lib[start:start + n].decode(), lib[start + n:]


class CLCompiler(Compiler):
  """OpenCL C -> (source, program binary), cached on disk under a key naming the platform, device, versions and options.
  keep_binary (default: on every platform but PoCL) says whether it reads the binary and caches it. PoCL keeps every
  build in its own kernel cache (POCL_CACHE_DIR, keyed by the source, options and device), which serves a build from
  source as fast as refimpl's entry would; and answering CL_PROGRAM_BINARIES makes it compile every kernel of the program
  once more, into a work-group function its launches do not use: each kernel's first launch compiles one specialized to
  the launch even in a program built from that binary (replaying the 652 corpus kernels on PoCL 3.1 with both caches
  empty took 231 s of CPU with the binaries read, 97 s without; built from refimpl's cached binaries, its launches still
  spent ~60 s compiling). So on PoCL the lib is the source alone (no binary) and refimpl's disk cache holds nothing
  (cachekey None)."""
  def __init__(self, device: GPUDevice, keep_binary: bool | None = None):
    self.device, p, d = device, device.cl_platform, device.cl_device
    self.keep_binary = POCL not in p.name.lower() if keep_binary is None else keep_binary
    key = "\n".join([p.name, p.version, d.name, d.version, d.driver_version, *device.options])
    super().__init__(f"opencl-{hashlib.sha256(key.encode()).hexdigest()[:20]}" if self.keep_binary else None)

  def build(self, src: str, binary: bytes = b"") -> Any:
    """The built cl.Program, from the binary when one is given, else from the source (pyopencl's own cache bypassed: this
    compiler caches). CompileError with the build log and the numbered source on failure."""
    cl, ctx, dev = _cl(), self.device.context.ctx, self.device.cl_device
    prg = None
    try:
      prg = cl.Program(ctx, [dev], [binary]) if binary else cl.Program(ctx, src)
      return prg.build(options=list(self.device.options), cache_dir=False)
    except cl.Error as e:
      log = ""
      with contextlib.suppress(Exception): log = prg.get_build_info(dev, cl.program_build_info.LOG).strip()
      raise CompileError(f"{self.device.device}: OpenCL build failed on {dev.name} ({self.device.cl_platform.name}):\n"
                         f"{log or str(e).strip()}\n--- source ---\n{_numbered(src)}") from None

  def compile(self, src: str) -> bytes:
    """The packed (source, binary). The binary is read only for the disk cache (cachekey set): PoCL compiles every kernel
    of the program to answer CL_PROGRAM_BINARIES, which costs more than the build. The built program is kept
    (GPUDevice.keep_built), so loading this lib right after takes it instead of building it again."""
    prg = self.build(src)
    binary = b""
    if self.cachekey is not None:
      binaries = prg.binaries
      binary = bytes(binaries[0]) if binaries and binaries[0] else b""
    lib = pack_lib(src, binary)
    self.device.keep_built(lib, prg)
    return lib

  def compile_batch(self, srcs: list[str]) -> list[bytes]:
    """One lib per source, building every uncached source in one cl.Program (their kernels must have distinct names;
    the prelude is include-guarded). Each source's lib (and cache entry) is the shared program's."""
    return compile_batch_cached(self, srcs, lambda todo: self.compile("\n".join(todo)))


class CLProgram:
  """A kernel of a built program; calling it launches one NDRange (see the module docstring)."""
  def __init__(self, device: GPUDevice, name: str, lib: bytes):
    self.device, self.name = device, name
    self.program = device.built(lib)
    if self.program is None:
      self.program = self._build(device, lib)
      device.keep_built(lib, self.program)  # the other kernels of a batch's lib (read from the disk cache) take it
    cl = _cl()
    try: self.kernel = cl.Kernel(self.program, kernel_symbol(name))
    except cl.Error as e:
      raise CompileError(f"{device.device}: the program has no kernel {kernel_symbol(name)!r} (for {name!r}): {e}") from None

  @staticmethod
  def _build(device: GPUDevice, lib: bytes) -> Any:
    """The program of a lib that was not just compiled here: from its binary, else (none, or one this driver no longer
    takes) from its source."""
    src, binary = unpack_lib(lib)
    if not binary: return device.compiler.build(src)
    try: return device.compiler.build(src, binary)
    except CompileError: return device.compiler.build(src)

  def __call__(self, *bufs: Any, global_size: tuple[int, ...] = (1, 1, 1), local_size: tuple[int, ...] = (1, 1, 1),
               vals: tuple[int, ...] = (), wait: bool = False) -> float | None:
    cl, queue = _cl(), self.device.context.queue
    local = tuple(local_size) + (1,) * (3 - len(local_size))
    total = tuple(g * ll for g, ll in zip(tuple(global_size) + (1,) * (3 - len(global_size)), local))
    for k, b in enumerate(bufs): self.kernel.set_arg(k, b)
    for k, v in enumerate(vals, len(bufs)): self.kernel.set_arg(k, np.int32(v))
    start = time.perf_counter()
    event = cl.enqueue_nd_range_kernel(queue, self.kernel, total, local)
    GlobalCounters.kernel_count += 1
    if not wait: return None
    event.wait()
    try: elapsed = (event.profile.end - event.profile.start) * 1e-9
    except cl.Error: elapsed = time.perf_counter() - start
    GlobalCounters.time_sum_s += elapsed
    return elapsed


class GPUDevice(Compiled):
  """OpenCL through pyopencl; see the module docstring."""
  subprocess_safe = True
  def __init__(self, device: str = "GPU"):
    _, _, index = device.partition(":")
    self.cl_platform, self.cl_device, ctx = select_device(int(index) if index.isdigit() else None)
    self.options = build_options(self.cl_device)
    self._context: _Context | None = _Context(self.cl_device, ctx)  # the probe's context, in the opening process
    self._built: OrderedDict[bytes, Any] = OrderedDict()
    renderer = probe(device, self.cl_device)
    super().__init__(device, CLAllocator(self), renderer, CLCompiler(self), functools.partial(CLProgram, self))

  def keep_built(self, lib: bytes, program: Any) -> None:
    """Remembers the cl.Program a lib was just built into (the last KEEP_BUILT of them), for CLProgram to take."""
    self._built[lib] = program
    self._built.move_to_end(lib)
    while len(self._built) > KEEP_BUILT: self._built.popitem(last=False)

  def built(self, lib: bytes) -> Any:
    """The cl.Program `lib` was built into in this process, if it is still kept (else None)."""
    return self._built.get(lib) if self._context is not None and self._context.pid == os.getpid() else None

  @property
  def context(self) -> _Context:
    """This process's context and queue, made on first use. A context made by another process (before a fork) is refused."""
    if self._context is None: self._context = _Context(self.cl_device)
    elif self._context.pid != os.getpid():
      raise RuntimeError(f"{self.device}: this OpenCL context was made in process {self._context.pid} and cannot be used "
                         f"after a fork (in {os.getpid()}); open the device in the child process instead (spawn)")
    return self._context

  def synchronize(self) -> None:
    if self._context is not None and self._context.pid == os.getpid(): self._context.queue.finish()

  def supports_dtype(self, dtype: DType) -> bool:
    """bool, every int and float32 on every device; float64 with cl_khr_fp64; float16, bfloat16 and fp8 (stored as bits,
    computed in double, rounded once per op) also with cl_khr_fp64. Scalars only, no pointers or images."""
    if isinstance(dtype, (PtrDType, ImageDType)) or dtype.count != 1 or dtype == dtypes.void: return False
    dts = self.renderer.supported_dtypes
    return dts is None or dtype in dts

  def describe(self) -> str:
    """One line: platform, device, versions, build options and the capabilities that bear on exactness."""
    r = self.renderer
    assert isinstance(r, OpenCLRenderer)
    return (f"{self.cl_platform.name} {self.cl_platform.version} / {self.cl_device.name} (driver {self.cl_device.driver_version})"
            f"; options {' '.join(self.options) or '(none)'}; fp64 {r.has_fp64}, fp16 {r.has_fp16}, correctly rounded "
            f"div/sqrt {r.correct_div_sqrt}, flushes subnormals {r.flushes_subnormals}, "
            f"inexact {sorted(o.name for o in r.inexact_ops)}, local memory {r.local_memory_bytes} bytes, "
            f"max workgroup {r.max_workgroup_size}")

