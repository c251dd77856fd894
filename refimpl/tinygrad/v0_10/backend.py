"""The TINYGRAD devices: any tinygrad 0.10.1 device under refimpl's suite and fuzzer.

`TINYGRAD:<NAME>` is tinygrad's own device NAME, the one `tinygrad.device.Device[NAME]` opens (its module
`tinygrad.runtime.ops_<name>`, its class `<Name>Device` found as tinygrad finds it): CLANG, LLVM, GPU, PYTHON, WEBGPU, CUDA,
NV, AMD, METAL, ... (`in_tree_devices()`). `TINYGRAD:<module>:<Class>` is a porter's own tinygrad device, a subclass of
tinygrad's `Compiled` importable as `module:Class` (e.g. `TINYGRAD:my_pkg.ops_mydev:MyDevice`): refimpl imports it by
that name in every process (spawned fuzzer workers, pytest-xdist workers), so its package only has to be importable
(installed, or on PYTHONPATH). A device whose runtime is missing here (no wgpu, no libcuda, not macOS) raises
DeviceUnavailable with tinygrad's error and what to install, except tinygrad's QCOM, DSP, NV, CUDA, AMD and METAL, which
then open as their stand-ins (refimpl.tinygrad.v0_10.standins: ran on a stand-in runtime, compiled, or rendered; `level`).

Everything that turns a kernel into results is the tinygrad device's own:

  Program --(refimpl.tinygrad.v0_10.exporter: tinygrad UOps, tinygrad's final rewrites for its renderer)--> uops
  uops --its renderer.render--> source --its compiler.compile--> lib --its runtime(name, lib)--> program
  buffers: its allocator

and everything that differs between tinygrad devices is read from the device, never from a table keyed by its name:
  - grid or loops: a tinygrad renderer with no global grid (global_max None: tinygrad's CLANG and LLVM) gets programs in
    grid form (any grid, so the emulator check at launch is fast) and `refimpl.lower.lower_for` lowers them to loops
    before export (the refimpl renderer's `grid_as_loops`), as refimpl's own CLANG;
  - has_local / has_shared / global_max / local_max: the tinygrad renderer's (has_local is true on a loop device: its
    workgroups are loops too); vector widths: 1 to 16 when the renderer declares vector types (supports_float4), else 1;
  - how a program is launched: with global_size / local_size when its runtime's program takes them (tinygrad's GPU,
    WEBGPU, CUDA), else with the buffers and vals only (tinygrad's CPUProgram);
  - its compiler: refimpl's disk cache holds a compiled binary only when tinygrad's compiler declares a cachekey (tinygrad's
    own rule for caching it on disk), keyed by that cachekey, the compiler's class and the toolchain found; tinygrad's
    PYTHON and WEBGPU compilers declare none (PYTHON's binary is a pickle: nothing of it is ever read back from disk).
Only how the toolchains of the in-tree CLANG, LLVM and GPU are found here is per device (refimpl.tinygrad.v0_10.toolchain,
`prepare_tinygrad`), and the install hint of a device that does not open (INSTALL).

The devices are opt-in: never the default device; the suite and the fuzzer run them only when named
(`--backend TINYGRAD:CLANG`). Two guarantees:
  - Inputs the spec leaves undefined are never sent to tinygrad's code: every launch first runs the program on refimpl's
    emulator (strict) on the same buffers and raises `UndefinedBehavior` instead of launching when any lane is
    undefined (tinygrad's CLANG and LLVM kernels trap with SIGFPE on a stored 7 // 0). A 7 // 0 that a WHERE discards
    is defined (DIVISOR_ZERO is deferred) and is launched: a trap there is tinygrad's renderer failing the spec (its
    C does not guard the divisor; refimpl.tinygrad.report.reliance lists such kernels), which the fuzzer's worker processes
    report as a crash.
  - A dtype is supported when it exists in tinygrad 0.10.1 (no fp8) and tinygrad declares it supported on the device
    (`tinygrad_declares`: tinygrad's own `is_dtype_supported`, which refuses bfloat16 on CLANG, LLVM and GPU, half on
    LLVM, and all but 8 dtypes on WEBGPU). "Unsupported" comes only from that declaration: a declared dtype whose
    kernels do not render, compile or run (WEBGPU's int8 shaders) is a failure of the device, as is one that computes
    garbage. `unsupported_reasons` says why each refused dtype is refused.
  - A device opens only when the smallest kernel (int32 ADD) renders, compiles and runs on it: a compiler that cannot
    run here (no clang on PATH) makes the device unavailable with the cause, never "every dtype unsupported".
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import inspect
import pkgutil
from dataclasses import dataclass
from typing import Any

from refimpl.device import Compiled, CompileError, Compiler, DeviceUnavailable, load_object
from refimpl.dtype import DType, ImageDType, PtrDType, dtypes
from refimpl.ir import Program
from refimpl.tinygrad.devices import NATIVE_GRID, TinygradAllocator, TinygradRenderer, check_it_runs, refuse_undefined
from refimpl.tinygrad.lines import UnsupportedTinygrad, require
from refimpl.tinygrad.names import kernel_name

KIND = "TINYGRAD"
VECTOR_WIDTHS = (1, 2, 3, 4, 8, 16)
# What to install when tinygrad's in-tree device does not open here (the message only: nothing else reads a name).
INSTALL = {
  "CLANG": "pip install 'refimpl[clang]' (pip's zig) or put a clang on PATH",
  "LLVM": "apt-get install libllvm15 (tinygrad loads the LLVM C library with ctypes)",
  "GPU": "pip install 'refimpl[gpu]' (pyopencl and PoCL) or install an OpenCL driver",
  "WEBGPU": "pip install 'refimpl[webgpu]' (wgpu) and a Vulkan driver (apt-get install mesa-vulkan-drivers)",
  "CUDA": "an NVIDIA GPU and its driver (libcuda.so); tinygrad compiles with NVRTC (pip install nvidia-cuda-nvrtc-cu12)",
  "NV": "an NVIDIA GPU and its kernel driver (/dev/nvidiactl)",
  "AMD": "an AMD GPU and the amdgpu kernel driver (/dev/kfd) with ROCm's comgr",
  "HIP": "an AMD GPU and ROCm (libamdhip64)",
  "METAL": "macOS (Metal)",
  "QCOM": "a Qualcomm Adreno GPU (/dev/kgsl-3d0)",
  "DSP": "a Qualcomm Hexagon DSP (/dev/adsprpc-smd)",
  "CLOUD": "a running tinygrad cloud server (CLOUDDEV=host:port)",
}


def in_tree_devices() -> list[str]:
  """The devices tinygrad ships (its tinygrad/runtime/ops_<name>.py modules), without importing any of them."""
  import tinygrad.runtime
  return sorted(m.name.removeprefix("ops_").upper() for m in pkgutil.iter_modules(tinygrad.runtime.__path__)
                if m.name.startswith("ops_"))


@dataclass(frozen=True)
class Target:
  """What follows "TINYGRAD:" in a device name: tinygrad's device NAME, or a porter's `module:Class`."""
  label: str              # CLANG, or my_pkg.ops_mydev:MyDevice
  spec: str | None = None  # module:Class of an out-of-tree device, None for tinygrad's own

  @property
  def device(self) -> str: return f"{KIND}:{self.label}"

  @staticmethod
  def parse(device: str) -> Target:
    """"TINYGRAD:webgpu" -> WEBGPU; "TINYGRAD:my_pkg.ops_mydev:MyDevice" -> that class (the part after the first colon
    holds a colon); DeviceUnavailable for anything else, naming the choices."""
    kind, _, rest = device.partition(":")
    if kind.upper() != KIND or not rest:
      raise DeviceUnavailable(f"{device}: name a tinygrad device, {KIND}:<NAME> or {KIND}:<module>:<Class>")
    if ":" in rest: return Target(rest, rest)
    return Target(rest.upper())

  def tinygrad_class(self) -> type:
    """The tinygrad Compiled subclass: imported by module:Class, or found in tinygrad.runtime.ops_<name> as tinygrad's
    Device finds it (the member named <name>device, any case)."""
    if self.spec is not None:
      try: return load_object(self.spec)
      except (ImportError, ValueError) as e:
        raise DeviceUnavailable(f"{self.device}: cannot import {self.spec}: {type(e).__name__}: {e}") from None
    names = in_tree_devices()
    if self.label not in names:
      raise DeviceUnavailable(f"{self.device}: tinygrad {importlib.metadata.version('tinygrad')} has no device "
                              f"{self.label}; its devices: {', '.join(names)}; or a tinygrad device class of your own: "
                              f"{KIND}:<module>:<Class>")
    try: module = importlib.import_module(f"tinygrad.runtime.ops_{self.label.lower()}")
    except Exception as e: raise self.unavailable(f"tinygrad.runtime.ops_{self.label.lower()} does not import", e) from None
    found = [c for n, c in inspect.getmembers(module) if n.lower() == self.label.lower() + "device" and inspect.isclass(c)]
    if not found: raise DeviceUnavailable(f"{self.device}: tinygrad.runtime.ops_{self.label.lower()} has no class "
                                          f"{self.label.capitalize()}Device")
    return found[0]

  def tinygrad_name(self, cls: type) -> str:
    """The device string tinygrad's class is built with: NAME, or the class name without its Device suffix."""
    return self.label if self.spec is None else cls.__name__.removesuffix("Device").upper()

  def unavailable(self, what: str, e: BaseException) -> DeviceUnavailable:
    """DeviceUnavailable: what failed, tinygrad's error and what to install."""
    hint = INSTALL.get(self.label, "see the device's own documentation") if self.spec is None else "its package's"
    msg = f"{self.device}: {what} here: {type(e).__name__}: {e}"[:400]
    return DeviceUnavailable(" ".join(f"{msg}; needs {hint}".split()) if self.spec is None else " ".join(msg.split()))


def open_tinygrad(target: Target) -> Any:
  """The tinygrad device, built as tinygrad.device.Device builds it, minus its main-process-only assert (refimpl's fuzzer
  opens devices in spawned workers). The in-tree CLANG, LLVM and GPU toolchains are prepared first
  (refimpl.tinygrad.v0_10.toolchain); a device without a renderer, compiler and runtime (DISK, NPY) is not one to test."""
  from tinygrad.device import Compiled as TinygradCompiled

  from refimpl.tinygrad.v0_10.toolchain import prepare_tinygrad
  why = prepare_tinygrad().get(target.label)
  if target.spec is None and why is not None: raise DeviceUnavailable(f"{target.device}: {why}")
  cls = target.tinygrad_class()
  if not (inspect.isclass(cls) and issubclass(cls, TinygradCompiled)):
    raise DeviceUnavailable(f"{target.device}: {cls!r} is not a subclass of tinygrad.device.Compiled")
  try: tg = cls(target.tinygrad_name(cls))
  except Exception as e: raise target.unavailable(f"tinygrad's {cls.__name__} does not open", e) from None
  return _compute_device(target, cls, tg)


def open_device(target: Target) -> Any:
  """tinygrad's device (open_tinygrad), or, where it does not open and refimpl.tinygrad.v0_10.standins has a stand-in for it
  (QCOM, DSP, NV, CUDA, AMD, METAL), that stand-in, judged at the level its table says."""
  from refimpl.tinygrad.v0_10.standins import STANDINS, open_standin
  try: tg = open_tinygrad(target)
  except DeviceUnavailable as e:
    if target.spec is not None or target.label not in STANDINS: raise
    return open_standin(target.label, str(e).removeprefix(f"{target.device}: "))
  if target.spec is None and target.label in STANDINS and type(tg.renderer).__name__.startswith("Mock"):
    return open_standin(target.label, f"tinygrad's {type(tg).__name__} fell back to its mock (no device files here)")
  return tg


def _compute_device(target: Target, cls: type, tg: Any) -> Any:
  """`tg`, when it has a renderer and a runtime (DeviceUnavailable for DISK, NPY)."""
  from tinygrad.renderer import Renderer as TinygradRenderer
  if tg.runtime is None or type(tg.renderer).render is TinygradRenderer.render:
    raise DeviceUnavailable(f"{target.device}: {cls.__name__} is not a compute device (it has no renderer or runtime)")
  return tg


class Tinygrad10Renderer(TinygradRenderer):
  """Exports a Program to tinygrad 0.10.1's UOps (refimpl.tinygrad.v0_10.exporter) and renders them with the device's
  renderer (`tg`)."""

  def render(self, name: str, program: Program) -> str:
    from refimpl.tinygrad.v0_10.exporter import to_tinygrad
    src = self.tg.render(kernel_name(name), to_tinygrad(program, self.tg))
    self.sources[src] = (kernel_name(name), program)
    return src

  @staticmethod
  def of(device: str, tgr: Any, sources: dict) -> Tinygrad10Renderer:
    """refimpl's description of tinygrad's renderer `tgr`, read from it (module docstring)."""
    loops = tgr.global_max is None
    return Tinygrad10Renderer(
      device=device, has_local=loops or bool(tgr.has_local), has_shared=bool(tgr.has_shared),
      global_max=NATIVE_GRID if loops else tuple(tgr.global_max),
      local_max=NATIVE_GRID if loops else (tuple(tgr.local_max) if tgr.local_max else None),
      vector_widths=VECTOR_WIDTHS if tgr.supports_float4 else (1,), tg=tgr, loops=loops, sources=sources)


class TinygradCompiler(Compiler):
  """The tinygrad device's compiler, through refimpl's disk cache when tinygrad's compiler declares a cachekey (module
  docstring). Remembers which program each (kernel name, binary) is, for the check at launch: by name and binary, as
  two programs can compile to one binary (tinygrad's CLANG binary is bare machine code, with no name or buffer size in
  it), and the kernel launched under a name is the one last built under it."""
  def __init__(self, tg: Any, device: str, sources: dict, identity: str):
    self.tg, self.device, self.sources, self.programs = tg, device, sources, {}
    key = None
    if getattr(tg, "cachekey", None) is not None:
      what = f"{importlib.metadata.version('tinygrad')} {type(tg).__module__}.{type(tg).__qualname__} {tg.cachekey} {identity}"
      key = f"tinygrad-{kernel_name(device.partition(':')[2]).lower()[:40]}-{hashlib.sha256(what.encode()).hexdigest()[:20]}"
    super().__init__(key)

  def compile(self, src: str) -> bytes:
    try: return self.tg.compile(src)
    except Exception as e:  # tinygrad's CompileError, subprocess errors, LLVM's RuntimeError
      why = str(e).replace("\x00", "")  # NVRTC's log ends in NUL bytes
      raise CompileError(f"{self.device}: tinygrad's compiler failed: {type(e).__name__}: {why}\n--- source ---\n{src}") from e

  def compile_cached(self, src: str) -> bytes:
    lib = super().compile_cached(src)
    if src in self.sources:
      name, program = self.sources[src]
      self.programs[(name, hashlib.sha256(lib).digest())] = program
    return lib


def takes_grid(prg: Any) -> bool:
  """Whether a tinygrad program is launched with global_size / local_size (a grid runtime) or without (CPUProgram)."""
  try: params = inspect.signature(prg).parameters
  except (TypeError, ValueError): return True
  return "global_size" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


class CheckedProgram:
  """tinygrad's program, launched only after refimpl's emulator (strict) found every lane of this launch defined."""
  def __init__(self, device: TinygradDevice, name: str, lib: bytes):
    self.device, self.name = device, name
    self.program: Program | None = device.compiler.programs.get((kernel_name(name), hashlib.sha256(lib).digest()))
    self.prg = device.tg.runtime(kernel_name(name), lib)
    self.grid = takes_grid(self.prg)

  def __call__(self, *bufs: Any, global_size=(1, 1, 1), local_size=(1, 1, 1), vals=(), wait=False):
    if self.program is None:
      raise RuntimeError(f"{self.device.device}: {self.name}: unknown binary (not compiled by this device), "
                         "so its inputs cannot be checked for undefined behaviour")
    refuse_undefined(self.program, self.device.allocator, bufs, vals)
    if not self.grid: return self.prg(*bufs, vals=tuple(vals), wait=wait)
    return self.prg(*bufs, global_size=tuple(global_size), local_size=tuple(local_size), vals=tuple(vals), wait=wait)


class TinygradDevice(Compiled):
  """TINYGRAD:<NAME> or TINYGRAD:<module>:<Class>: a tinygrad 0.10.1 device's renderer, compiler, runtime and allocator
  (module docstring)."""
  device_name = KIND
  subprocess_safe = True

  def __init__(self, device: str = "TINYGRAD:CLANG"):
    self.target = Target.parse(device)
    try: require("0.10.1", f"the {KIND} devices")  # refimpl.tinygrad.lines: no tinygrad, or another line
    except UnsupportedTinygrad as e: raise DeviceUnavailable(f"{device}: {e}") from None
    self.tg = open_device(self.target)
    self.standin = getattr(self.tg, "standin", None)  # refimpl.tinygrad.v0_10.standins.StandIn, None on the real device
    self.level = "ran" if self.standin is None else self.standin.level
    self.backend = self.target.label
    self.tinygrad_device = self.tg.device
    from refimpl.tinygrad.v0_10.toolchain import toolchain_identity
    sources: dict = {}
    renderer = Tinygrad10Renderer.of(self.target.device, self.tg.renderer, sources)
    self.unsupported_reasons: dict[DType, str] = {}
    self._supported: dict[DType, bool] = {}
    super().__init__(self.target.device, TinygradAllocator(self.tg.allocator), renderer,
                     TinygradCompiler(self.tg.compiler, self.target.device, sources, toolchain_identity()),
                     lambda name, lib: CheckedProgram(self, name, lib))
    check_it_runs(self, launch=self.level == "ran")

  def synchronize(self) -> None: self.tg.synchronize()

  def tinygrad_declares(self, dtype: DType) -> bool:
    """tinygrad's own answer: tinygrad.device.is_dtype_supported(dtype, its device name)."""
    from tinygrad.device import is_dtype_supported

    from refimpl.tinygrad.v0_10.exporter import tinygrad_dtype
    try: return bool(is_dtype_supported(tinygrad_dtype(dtype), self.tinygrad_device))
    except ValueError: return False

  def supports_dtype(self, dtype: DType) -> bool:
    """The device's own declaration: the dtype exists in tinygrad 0.10.1 and tinygrad declares it supported here
    (tinygrad_declares). A declared dtype whose kernels do not render, compile or run is the device failing, not
    unsupported (module docstring)."""
    if isinstance(dtype, (PtrDType, ImageDType)) or dtype.count != 1 or dtype == dtypes.void: return False
    if dtype not in self._supported:
      why = self._undeclared(dtype)
      self._supported[dtype] = why is None
      if why is not None: self.unsupported_reasons[dtype] = why
    return self._supported[dtype]

  def _undeclared(self, dtype: DType) -> str | None:
    """Why the device does not declare `dtype` (None when it does)."""
    from refimpl.tinygrad.v0_10.exporter import tinygrad_dtype
    try: tinygrad_dtype(dtype)
    except ValueError as e: return f"{dtype.name}: {e}"
    if self.tinygrad_declares(dtype): return None
    return (f"{dtype.name}: tinygrad {importlib.metadata.version('tinygrad')} declares it unsupported on "
            f"{self.tinygrad_device} (tinygrad.device.is_dtype_supported)")
