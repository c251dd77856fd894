"""The WEBGPU device: WGSL (wgsl.py) run through wgpu-py (wgpu-native) on the first WebGPU adapter; on a CPU-only Linux
machine that is Mesa's lavapipe (llvmpipe through Vulkan, Debian's mesa-vulkan-drivers). Without a Vulkan driver wgpu
falls back to llvmpipe through OpenGL, which runs the same shaders.

Opening. `wgpu.gpu.request_adapter_sync` (high-performance), then a device with the adapter's own limits for what a
program needs (storage buffers per stage, buffer size, workgroup size and memory). No wgpu, or no adapter, raises
DeviceUnavailable with what to install. XDG_RUNTIME_DIR is set to /tmp when unset (Mesa complains otherwise).

Compile. The "compiler" validates the WGSL (create_shader_module: naga parses and validates it) and raises CompileError
with the numbered source when it is rejected; the lib is the source. No disk cache: a WebGPU pipeline is not a portable
binary, and naga's validation is what compile costs here (the pipeline is built on first launch and kept).

Buffers. One GPUBuffer per refimpl buffer (STORAGE | COPY_SRC | COPY_DST), its size rounded up to 4 bytes (WGSL sees
32-bit words; packed dtypes share them, see wgsl.py). Copies in go through queue.write_buffer (padded to 4 bytes),
copies out through queue.read_buffer (which waits for the work submitted before it).

Launch. prg(*bufs, global_size=, local_size=, vals=, wait=): binding k is buffer k, binding len(bufs) the parameter
buffer (the DEFINE_VAR values as int32 words, the renderer's hidden zeros, the dispatch's workgroup offset); one
compute pass dispatches global_size workgroups (@workgroup_size in the shader is the program's local_size), as several
dispatches of at most max-compute-workgroups-per-dimension per dimension, each with its offset. The bind group layout is explicit,
so a buffer the shader does not use is still bound. With wait=True it waits for the queue and returns the wall time.
"""
from __future__ import annotations

import functools
import importlib
import os
import time
from collections import OrderedDict
from typing import Any

import numpy as np

from refimpl.backends import wgsl
from refimpl.backends.wgsl import ARENA_TAG, ARENAS, HIDDEN_ZEROS, INT64, SUPPORTED, WITH_F64, WGSLRenderer, kernel_symbol
from refimpl.device import BufferSpec, Compiled, Compiler, DeviceUnavailable, LRUAllocator
from refimpl.dtype import DType, ImageDType, PtrDType, dtypes
from refimpl.errors import CompileError
from refimpl.helpers import GlobalCounters

INSTALL = ("install wgpu (pip install 'refimpl[webgpu]') and a Vulkan driver (Debian/Ubuntu: apt-get install "
           "mesa-vulkan-drivers, Mesa's lavapipe on the CPU)")
KEEP_MODULES = 64  # validated shader modules kept per device for the runtime to take


def _wgpu() -> Any:
  """The wgpu module, or DeviceUnavailable saying what to install."""
  try: return importlib.import_module("wgpu")
  except ImportError as e: raise DeviceUnavailable(f"WEBGPU: wgpu does not import ({e}); {INSTALL}") from None


def _numbered(src: str) -> str: return "\n".join(f"{n:4d} | {line}" for n, line in enumerate(src.splitlines(), 1))


def open_adapter() -> tuple[Any, Any]:
  """(adapter, device) of the first WebGPU adapter, with the limits a program needs raised to the adapter's."""
  os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
  wgpu = _wgpu()
  try: adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
  except Exception as e: raise DeviceUnavailable(f"WEBGPU: no WebGPU adapter ({type(e).__name__}: {e}); {INSTALL}") from None
  if adapter is None: raise DeviceUnavailable(f"WEBGPU: no WebGPU adapter; {INSTALL}")
  wanted = ("max-storage-buffers-per-shader-stage", "max-storage-buffer-binding-size", "max-buffer-size",
            "max-compute-workgroup-storage-size", "max-compute-invocations-per-workgroup", "max-compute-workgroup-size-x",
            "max-compute-workgroup-size-y", "max-compute-workgroup-size-z", "max-compute-workgroups-per-dimension")
  limits = {k: adapter.limits[k] for k in wanted if k in adapter.limits}
  features = [f for f in ("shader-int64", "shader-f64") if f in adapter.features]
  try: device = adapter.request_device_sync(required_features=features, required_limits=limits)
  except Exception as e: raise DeviceUnavailable(f"WEBGPU: the adapter gives no device ({type(e).__name__}: {e})") from None
  return adapter, device


GLOBAL_MAX = (2**31 - 1,) * 3  # the index dtype is int32; wider than the adapter's dispatch limit runs as several

def renderer_for(name: str, limits: Any, features: Any) -> WGSLRenderer:
  """The renderer, its workgroup capabilities from the device's limits, int64 from its features."""
  int64, f64 = "shader-int64" in features, "shader-f64" in features
  dts = SUPPORTED | (INT64 if int64 else frozenset()) | (WITH_F64 if f64 and int64 else frozenset())
  return WGSLRenderer(name, has_int64=int64, has_f64=f64 and int64, has_local=True, has_shared=True, global_max=GLOBAL_MAX,
                      local_max=tuple(limits[f"max-compute-workgroup-size-{a}"] for a in "xyz"),
                      supported_dtypes=dts, max_invocations=limits["max-compute-invocations-per-workgroup"],
                      workgroup_bytes=limits["max-compute-workgroup-storage-size"],
                      max_buffers=limits["max-storage-buffers-per-shader-stage"])


class WebGPUAllocator(LRUAllocator):
  """GPUBuffers of a size rounded up to 4 bytes; the opaque is (buffer, size in bytes)."""
  def __init__(self, device: WebGPUDevice):
    super().__init__()
    self.device = device
  def _alloc(self, size: int, options: BufferSpec) -> Any:
    if options.external_ptr is not None: raise RuntimeError(f"{self.device.device}: external pointers are not supported")
    wgpu = _wgpu()
    usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
    return self.device.gpu.create_buffer(size=max(4, (size + 3) // 4 * 4), usage=usage), size
  def _free(self, opaque: Any, options: BufferSpec) -> None: opaque[0].destroy()
  def _copyin(self, dest: Any, src: memoryview) -> None:
    data = bytes(src)
    if len(data) % 4: data += bytes(4 - len(data) % 4)
    if data: self.device.gpu.queue.write_buffer(dest[0], 0, data)
  def _copyout(self, dest: memoryview, src: Any) -> None:
    n = len(dest.cast("B"))
    if n == 0: return
    data = self.device.gpu.queue.read_buffer(src[0], 0, (n + 3) // 4 * 4)
    dest.cast("B")[:] = memoryview(data)[:n]


class WGSLCompiler(Compiler):
  """Validates WGSL (naga, through create_shader_module); the lib is the source. No disk cache (module docstring)."""
  def __init__(self, device: WebGPUDevice):
    super().__init__(None)
    self.device = device
  def compile(self, src: str) -> bytes:
    lib = src.encode()
    self.device.shader_module(lib)
    return lib


class WebGPUProgram:
  """Entry point kernel_symbol(name) of a WGSL module; calling it dispatches one compute pass (module docstring)."""
  def __init__(self, device: WebGPUDevice, name: str, lib: bytes):
    self.device, self.name, self.lib = device, name, lib
    self.module = device.shader_module(lib)
    self.pipelines: dict[int, tuple[Any, Any]] = {}  # buffer count -> (bind group layout, pipeline)
    tags = [line[len(ARENA_TAG):] for line in lib.decode().splitlines() if line.startswith(ARENA_TAG)]
    self.arena: str | None = tags[0] if tags else None  # arena mode: each buffer's arena kind (wgsl.ARENAS)

  def pipeline(self, nbufs: int) -> tuple[Any, Any]:
    """(bind group layout, compute pipeline) for nbufs buffers and the parameter buffer, made on first use."""
    if nbufs not in self.pipelines:
      wgpu, gpu = _wgpu(), self.device.gpu
      entries = [{"binding": k, "visibility": wgpu.ShaderStage.COMPUTE,
                  "buffer": {"type": wgpu.BufferBindingType.storage if k < nbufs else wgpu.BufferBindingType.read_only_storage}}
                 for k in range(nbufs + 1)]
      layout = gpu.create_bind_group_layout(entries=entries)
      try:
        pipe = gpu.create_compute_pipeline(layout=gpu.create_pipeline_layout(bind_group_layouts=[layout]),
                                           compute={"module": self.module, "entry_point": kernel_symbol(self.name)})
      except Exception as e:
        raise CompileError(f"{self.device.device}: pipeline for {kernel_symbol(self.name)!r} failed: {e}\n--- source ---\n"
                           f"{_numbered(self.lib.decode())}") from None
      self.pipelines[nbufs] = (layout, pipe)
    return self.pipelines[nbufs]

  def arenas(self, bufs: tuple[Any, ...]) -> tuple[list[Any], list[int], list[tuple[Any, Any, int]]]:
    """Arena mode: (the arenas the kernel uses, in wgsl.ARENAS order; each buffer's base in its arena, in the arena's
    elements; (buffer, arena, byte offset) of each copy in before the dispatch and out after it)."""
    assert self.arena is not None and len(self.arena) == len(bufs), "the buffers do not match the kernel's arena tag"
    wgpu, gpu = _wgpu(), self.device.gpu
    used, bases, places = dict.fromkeys(ARENAS, 0), [], []
    for kind, b in zip(self.arena, bufs):
      unit = ARENAS[kind][2]
      bases.append(used[kind])
      places.append((b[0], kind, used[kind] * unit))
      used[kind] += (b[0].size + unit - 1) // unit
    usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
    arena = {kind: gpu.create_buffer(size=max(8, n * ARENAS[kind][2]), usage=usage)
             for kind, n in used.items() if kind in self.arena}
    return list(arena.values()), bases, [(b, arena[kind], at) for b, kind, at in places]

  def __call__(self, *bufs: Any, global_size: tuple[int, ...] = (1, 1, 1), local_size: tuple[int, ...] = (1, 1, 1),
               vals: tuple[int, ...] = (), wait: bool = False) -> float | None:
    wgpu, gpu = _wgpu(), self.device.gpu
    grid = tuple(global_size) + (1,) * (3 - len(global_size))
    start = time.perf_counter()
    enc = gpu.create_command_encoder()
    if self.arena is None: bound, bases, copies = [b[0] for b in bufs], [], []
    else: bound, bases, copies = self.arenas(bufs)
    for src, dst, at in copies: enc.copy_buffer_to_buffer(src, 0, dst, at, src.size)
    layout, pipe = self.pipeline(len(bound))
    cpass = enc.begin_compute_pass()
    cpass.set_pipeline(pipe)
    for offset, count in self.device.dispatches(grid):
      words = np.array([v & 0xFFFFFFFF for v in vals] + [0] * HIDDEN_ZEROS + list(offset) + bases, np.uint32)
      params = gpu.create_buffer_with_data(data=words.tobytes(), usage=wgpu.BufferUsage.STORAGE)
      entries = [{"binding": k, "resource": {"buffer": b}} for k, b in enumerate(bound)]
      entries.append({"binding": len(bound), "resource": {"buffer": params}})
      cpass.set_bind_group(0, gpu.create_bind_group(layout=layout, entries=entries))
      cpass.dispatch_workgroups(*count)
    cpass.end()
    for src, dst, at in copies: enc.copy_buffer_to_buffer(dst, at, src, 0, src.size)
    gpu.queue.submit([enc.finish()])
    GlobalCounters.kernel_count += 1
    if not wait: return None
    self.device.synchronize()
    elapsed = time.perf_counter() - start
    GlobalCounters.time_sum_s += elapsed
    return elapsed


class WebGPUDevice(Compiled):
  """WGSL through wgpu-py; see the module docstring."""
  subprocess_safe = True
  def __init__(self, device: str = "WEBGPU"):
    self.adapter, self.gpu = open_adapter()
    self._modules: OrderedDict[bytes, Any] = OrderedDict()
    wgpu = _wgpu()
    self._fence = self.gpu.create_buffer(size=4, usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC)
    renderer = renderer_for(device, self.gpu.limits, self.gpu.features)
    self.unsupported_reasons: dict[DType, str] = {dt: why for dt, why in wgsl.UNSUPPORTED_REASONS.items()
                                                  if dt not in (renderer.supported_dtypes or ())}
    # the suite marks these xfail with their reason (the report still shows FAIL): SIN without int64
    self.known_failures: dict[str, str] = {} if renderer.has_int64 else dict(wgsl.KNOWN_FAILURES)
    super().__init__(device, WebGPUAllocator(self), renderer, WGSLCompiler(self), functools.partial(WebGPUProgram, self))

  def shader_module(self, lib: bytes) -> Any:
    """The validated shader module of a lib (the last KEEP_MODULES are kept); CompileError with the numbered source when
    naga rejects it."""
    if lib in self._modules:
      self._modules.move_to_end(lib)
      return self._modules[lib]
    src = lib.decode()
    try: module = self.gpu.create_shader_module(code=src)
    except Exception as e:
      raise CompileError(f"{self.device}: WGSL rejected: {e}\n--- source ---\n{_numbered(src)}") from None
    self._modules[lib] = module
    while len(self._modules) > KEEP_MODULES: self._modules.popitem(last=False)
    return module

  def dispatches(self, grid: tuple[int, ...]) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """(workgroup offset, workgroup count) of each dispatch that together cover `grid`, none wider per dimension than
    the adapter's max-compute-workgroups-per-dimension."""
    per_dim = self.gpu.limits["max-compute-workgroups-per-dimension"]
    spans = [[(o, min(per_dim, g - o)) for o in range(0, g, per_dim)] for g in grid]
    return [((x[0], y[0], z[0]), (x[1], y[1], z[1])) for z in spans[2] for y in spans[1] for x in spans[0]]

  def synchronize(self) -> None:
    """Waits for the queue: a read of a 4-byte buffer returns after the work submitted before it (wgpu 0.32's
    on_submitted_work_done_sync does not work)."""
    self.gpu.queue.read_buffer(self._fence, 0, 4)

  def supports_dtype(self, dtype: DType) -> bool:
    """tinygrad's WEBGPU rule: bool, int8, uint8, int16, uint16, int32, uint32, float32; plus int64 and uint64 where the
    adapter offers shader-int64 (unsupported_reasons says why each other dtype is refused). Scalars only."""
    if isinstance(dtype, (PtrDType, ImageDType)) or dtype.count != 1 or dtype == dtypes.void: return False
    return dtype in (self.renderer.supported_dtypes or SUPPORTED)

  def describe(self) -> str:
    info = self.adapter.info
    return (f"{info.get('device', '?')} ({info.get('description', '')}) via {info.get('backend_type', '?')}; "
            f"wgpu {_wgpu().__version__}; dtypes {', '.join(sorted(d.name for d in self.renderer.supported_dtypes or ()))}")
