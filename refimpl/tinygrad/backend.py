"""The TINYGRAD devices: tinygrad 0.10.1's own backends under refimpl's suite and fuzzer.

`TINYGRAD:CLANG`, `TINYGRAD:LLVM`, `TINYGRAD:GPU` and `TINYGRAD:PYTHON` are one refimpl device kind, TINYGRAD, whose
part after the colon names the tinygrad device. Everything that turns a kernel into results is tinygrad's:

  Program --(refimpl.tinygrad.exporter: tinygrad UOps, tinygrad's final rewrites for its renderer)--> uops
  uops --tinygrad renderer.render--> source --tinygrad compiler.compile--> lib --tinygrad runtime--> program
  buffers: tinygrad's allocator of that device (its MallocAllocator, its OpenCL allocator, its PYTHON memoryviews)

so CLANG is tinygrad's ClangRenderer, its clang flags (no -ffp-contract) and its ELF loader `jit_loader` with its
`CPUProgram`; LLVM is its LLVMRenderer, its LLVM-C compiler and its loader; GPU is its OpenCLRenderer, `CLCompiler` and
`CLProgram`; PYTHON is its PythonRenderer and its uop emulator. The toolchains are found as
`refimpl.tinygrad.toolchain.prepare_tinygrad` finds them (pip's zig, pyopencl's libOpenCL).

The devices are opt-in: they are never the default device and the suite and the fuzzer run them only when named
(`--backend TINYGRAD:CLANG`). Two guarantees:
  - Inputs the spec leaves undefined are never sent to tinygrad's code: every launch first runs the program on refimpl's
    emulator (strict) on the same buffers and raises `UndefinedBehavior` instead of launching when any lane is
    undefined (tinygrad's CLANG and LLVM kernels trap with SIGFPE on 7 // 0).
  - A dtype is supported when it exists in tinygrad 0.10.1 (no fp8) and a probe kernel of it renders, compiles and runs
    on the tinygrad device (fp16 on a PoCL without cl_khr_fp16 does not compile: unsupported). A dtype that compiles
    and computes garbage is a failure, not unsupported. `unsupported_reasons` says why each refused dtype is refused;
    `tinygrad_declares(dtype)` is tinygrad's own `is_dtype_supported`, shown beside it in the conformance report.

CLANG and LLVM have no grid in tinygrad; programs reach this device in grid form (so the emulator check is fast) and are
lowered to loops by `refimpl.lower.lower_for` before export (the renderer's `grid_as_loops`), as refimpl's own CLANG's
are; every other op goes to tinygrad as it is (the renderer declares it renders each natively). tinygrad's PYTHON
device keeps its compiled form in-process only (tinygrad's renderer pickles the uop list; the disk cache is off for it,
so nothing of it is ever read back from disk).
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from refimpl import spec
from refimpl.device import Allocator, Compiled, CompileError, Compiler, DeviceUnavailable
from refimpl.dtype import DType, ImageDType, PtrDType, dtypes, to_np
from refimpl.ir import Ops, Program, elementwise
from refimpl.lower import lower_for
from refimpl.renderer import Renderer

BACKENDS = ("CLANG", "LLVM", "GPU", "PYTHON")
NATIVE_GRID = (2**31 - 1, 2**31 - 1, 2**31 - 1)  # CLANG / LLVM: any grid, lowered to loops here
KIND = "TINYGRAD"


def kernel_name(name: str) -> str:
  """A C / OpenCL / LLVM identifier for a refimpl program name."""
  s = re.sub(r"[^A-Za-z0-9_]", "_", name)
  return s if s and not s[0].isdigit() else f"k_{s}"


def backend_of(device: str) -> str:
  """"TINYGRAD:CLANG" -> "CLANG"; DeviceUnavailable naming the choices otherwise."""
  kind, _, rest = device.partition(":")
  rest = rest.upper()
  if kind.upper() != KIND or rest not in BACKENDS:
    raise DeviceUnavailable(f"{device}: name a tinygrad backend: {', '.join(f'{KIND}:{b}' for b in BACKENDS)}")
  return rest


@dataclass(frozen=True)
class TinygradRenderer(Renderer):
  """Exports a Program to tinygrad UOps and renders them with tinygrad's renderer (`tg`). Remembers each source's
  program (for the undefined-behaviour check at launch)."""
  tg: Any = field(default=None, compare=False, repr=False)
  loops: bool = False  # lower the grid to loops first (tinygrad's CLANG and LLVM have no grid)
  sources: dict = field(default_factory=dict, compare=False, repr=False)

  @property
  def grid_as_loops(self) -> bool: return self.loops

  def render(self, name: str, program: Program) -> str:
    from refimpl.tinygrad.exporter import to_tinygrad
    src = self.tg.render(kernel_name(name), to_tinygrad(program, self.tg))
    self.sources[src] = program
    return src


class TinygradCompiler(Compiler):
  """tinygrad's compiler of the device, through refimpl's disk cache (None for PYTHON: nothing of it goes to disk).
  Remembers which program each binary is (for the check at launch)."""
  def __init__(self, tg: Any, backend: str, sources: dict, identity: str):
    self.tg, self.backend, self.sources, self.programs = tg, backend, sources, {}
    key = f"{backend} {importlib.metadata.version('tinygrad')} {getattr(tg, 'cachekey', '')} {identity}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:20]
    super().__init__(None if backend == "PYTHON" else f"tinygrad-{backend.lower()}-{digest}")

  def compile(self, src: str) -> bytes:
    try: return self.tg.compile(src)
    except Exception as e:  # tinygrad's CompileError, subprocess errors, LLVM's RuntimeError
      raise CompileError(f"TINYGRAD:{self.backend}: tinygrad's compiler failed: {type(e).__name__}: {e}\n"
                         f"--- source ---\n{src}") from e

  def compile_cached(self, src: str) -> bytes:
    lib = super().compile_cached(src)
    if src in self.sources: self.programs[hashlib.sha256(lib).digest()] = self.sources[src]
    return lib


class TinygradAllocator(Allocator):
  """refimpl's allocator interface over the tinygrad device's own allocator (opaques are tinygrad's)."""
  def __init__(self, tg: Any): self.tg = tg
  def alloc(self, size: int, options: Any = None) -> Any:
    if not isinstance(size, int) or size <= 0: raise ValueError(f"allocation size must be a positive int, got {size!r}")
    return self.tg.alloc(size)
  def free(self, opaque: Any, size: int, options: Any = None) -> None: self.tg.free(opaque, size)
  def _copyin(self, dest: Any, src: memoryview) -> None:
    self.tg._copyin(dest, memoryview(bytearray(src)) if src.readonly else src)
  def _copyout(self, dest: memoryview, src: Any) -> None: self.tg._copyout(dest, src)


class CheckedProgram:
  """tinygrad's program, launched only after refimpl's emulator (strict) found every lane of this launch defined."""
  def __init__(self, device: TinygradDevice, name: str, lib: bytes):
    self.device, self.name = device, name
    self.program: Program | None = device.compiler.programs.get(hashlib.sha256(lib).digest())
    self.prg = device.tg_runtime(kernel_name(name), lib)

  def __call__(self, *bufs: Any, global_size=(1, 1, 1), local_size=(1, 1, 1), vals=(), wait=False):
    from refimpl.emulator.machine import emulate
    if self.program is None:
      raise RuntimeError(f"TINYGRAD:{self.device.backend}: {self.name}: unknown binary (not compiled by this device), "
                         "so its inputs cannot be checked for undefined behaviour")
    p = self.program
    arrays = []
    for b, k in zip(bufs, sorted(p.buffers)):
      ptr = p.buffers[k]
      raw = bytearray(ptr.size * ptr.base.itemsize)
      self.device.allocator._copyout(memoryview(raw), b)
      arrays.append(np.frombuffer(raw, dtype=to_np(ptr.base)).copy())
    emulate(p, arrays, vals=tuple(vals), strict=True)  # raises UndefinedBehavior: nothing is launched
    if self.device.backend in ("CLANG", "LLVM"): return self.prg(*bufs, vals=tuple(vals), wait=wait)
    return self.prg(*bufs, global_size=tuple(global_size), local_size=tuple(local_size), vals=tuple(vals), wait=wait)


TINYGRAD_CLASSES = {"CLANG": "ClangDevice", "LLVM": "LLVMDevice", "GPU": "CLDevice", "PYTHON": "PythonDevice"}


def _open_tinygrad(backend: str) -> Any:
  """tinygrad's device `backend`, built as tinygrad.device.Device[backend] builds it, minus its main-process-only assert
  (refimpl's fuzzer opens devices in spawned workers)."""
  import importlib
  module = importlib.import_module(f"tinygrad.runtime.ops_{backend.lower()}")
  return getattr(module, TINYGRAD_CLASSES[backend])(backend)


class TinygradDevice(Compiled):
  """TINYGRAD:<backend>: tinygrad 0.10.1's own renderer, compiler, runtime and allocator (module docstring)."""
  device_name = KIND
  subprocess_safe = True

  def __init__(self, device: str = "TINYGRAD:CLANG"):
    self.backend = backend_of(device)
    try: importlib.metadata.version("tinygrad")
    except importlib.metadata.PackageNotFoundError:
      raise DeviceUnavailable(f"{device}: tinygrad is not installed; pip install 'refimpl[tinygrad]'") from None
    identity = ""
    if self.backend != "PYTHON":
      from refimpl.tinygrad.toolchain import prepare_tinygrad
      why = prepare_tinygrad().get(self.backend)
      if why is not None: raise DeviceUnavailable(f"{KIND}:{self.backend}: {why}")
      if self.backend == "CLANG":
        from refimpl.backends.ops_clang import find_clang
        identity = " ".join(find_clang()[0])
    self.tg = _open_tinygrad(self.backend)
    if self.backend == "GPU": identity = f"{self.tg.device_name} {self.tg.driver_version}"
    tgr = self.tg.renderer
    grid = self.backend in ("GPU", "PYTHON")
    sources: dict = {}
    renderer = TinygradRenderer(
      device=f"{KIND}:{self.backend}", has_local=True if not grid else bool(tgr.has_local),
      has_shared=self.backend == "CLANG" if not grid else bool(tgr.has_shared),  # tinygrad's LLVM renders no DEFINE_LOCAL
      global_max=tuple(tgr.global_max) if grid and tgr.global_max else NATIVE_GRID,
      local_max=tuple(tgr.local_max) if grid and tgr.local_max else (NATIVE_GRID if not grid else None),
      tg=tgr, loops=not grid, sources=sources)
    self.tg_runtime = self.tg.runtime
    self.unsupported_reasons: dict[DType, str] = {}
    self._supported: dict[DType, bool] = {}
    super().__init__(f"{KIND}:{self.backend}", TinygradAllocator(self.tg.allocator), renderer,
                     TinygradCompiler(self.tg.compiler, self.backend, sources, identity),
                     lambda name, lib: CheckedProgram(self, name, lib))

  def synchronize(self) -> None: self.tg.synchronize()

  def tinygrad_declares(self, dtype: DType) -> bool:
    """tinygrad's own answer: tinygrad.device.is_dtype_supported(dtype, backend)."""
    from tinygrad.device import is_dtype_supported

    from refimpl.tinygrad.exporter import tinygrad_dtype
    try: return bool(is_dtype_supported(tinygrad_dtype(dtype), self.backend))
    except ValueError: return False

  def supports_dtype(self, dtype: DType) -> bool:
    """The dtype exists in tinygrad 0.10.1 and a probe kernel of it renders, compiles and runs here (module docstring)."""
    if isinstance(dtype, (PtrDType, ImageDType)) or dtype.count != 1 or dtype == dtypes.void: return False
    if dtype not in self._supported:
      why = self._probe(dtype)
      self._supported[dtype] = why is None
      if why is not None: self.unsupported_reasons[dtype] = why
    return self._supported[dtype]

  def _probe(self, dtype: DType) -> str | None:
    from refimpl.tinygrad.exporter import tinygrad_dtype
    try: tinygrad_dtype(dtype)
    except ValueError as e: return str(e)
    op = Ops.ADD if spec.accepts(Ops.ADD, dtype) else Ops.CAST
    program = elementwise(op, dtype, n=4, out_dtype=dtype if op is Ops.CAST else None)
    program = Program(f"probe_{spec.short_name(dtype)}", program.uops, program.global_size, program.local_size)
    try:
      src = self.renderer.render(program.name, lower_for(program, self.renderer))
      prg = self.runtime(program.name, self.compiler.compile_cached(src))
      bufs = [self.allocator.alloc(4 * dtype.itemsize) for _ in program.buffers]
      for b in bufs: self.allocator._copyin(b, memoryview(np.zeros(4, to_np(dtype)).tobytes()))
      prg(*bufs, global_size=program.global_size, local_size=program.local_size, wait=True)
      self.synchronize()
    except Exception as e:  # any failure to render, compile or run the probe is the reason
      return " ".join(f"{dtype.name}: tinygrad's {self.backend} cannot run a kernel of it: {type(e).__name__}: {e}".split())[:400]
    return None
