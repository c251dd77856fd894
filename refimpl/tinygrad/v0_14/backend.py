"""The TINYGRAD devices for tinygrad 0.14: a tinygrad 0.14 device under refimpl's suite and fuzzer.

`TINYGRAD:<NAME>` is tinygrad 0.14's own device NAME, as `tinygrad.device.Device[NAME]` opens it (CPU, CL, PYTHON, ...;
`TINYGRAD:CPU:LLVM` its CPU device with its LLVM renderer); `TINYGRAD:<module>:<Class>` a porter's own 0.14 device class
(registered by refimpl.tinygrad.v0_14.porter, as `run --check` does). refimpl.device opens this class for `TINYGRAD:`
when tinygrad 0.14 is installed, the 0.10.1 one (refimpl.tinygrad.v0_10.backend) when 0.10.1 is. Everything that turns a
kernel into results is the tinygrad device's own:

  Program --(v0_14.exporter: 0.14's kernel form as a KernelRecord)--> record
  record --(v0_14.uops: 0.14 UOps, 0.14's final rewrites for its renderer)--> uops
  uops --its renderer.render--> source --its renderer's compiler.compile_cached--> lib
  lib --its runtime(TinyELF(lib, name, target, signature))--> program;  buffers: its allocator

and what differs between devices is read from the device: a renderer without a grid of work-items (global_max None, or
a dimension of 0: 0.14's CPU runs threads by a core_id parameter, not a grid) gets programs in grid form and
`refimpl.lower.lower_for` lowers them to loops before export; has_local / has_shared / global_max / local_max are the
renderer's; the supported dtypes are the renderer's `supported_dtypes()` (fp8 aside: the exporter refuses it); vector
widths 1 (the suite's op programs stay scalar; vector programs, which the fuzzer and the corpus bring, export too:
v0_14/uops.py's split of the vector accesses 0.14 would not have made).

The two guarantees of the 0.10.1 devices (refimpl/tinygrad/v0_10/backend.py) hold: every launch first runs the program on
refimpl's emulator, strict, on the same buffers and raises UndefinedBehavior instead of launching when a lane is
undefined; a device opens only when the smallest kernel (int32 ADD) renders, compiles and runs on it.
"""
from __future__ import annotations

import hashlib
from typing import Any

from refimpl.device import Compiled, CompileError, Compiler, DeviceUnavailable
from refimpl.dtype import INVERSE_DTYPES_DICT, DType, ImageDType, PtrDType, dtypes
from refimpl.ir import Program
from refimpl.tinygrad.devices import NATIVE_GRID, TinygradAllocator, TinygradRenderer, check_it_runs, refuse_undefined
from refimpl.tinygrad.lines import UnsupportedTinygrad, require
from refimpl.tinygrad.names import kernel_name
from refimpl.tinygrad.v0_14.exporter import FP8

KIND = "TINYGRAD"


def open_tinygrad(device: str) -> tuple[str, Any]:
  """(tinygrad's device name, tinygrad 0.14's device) for "TINYGRAD:<rest>": CPU's clang and CL's OpenCL prepared
  first (v0_14.toolchain), a porter's module:Class registered (v0_14.porter). DeviceUnavailable saying why not."""
  from refimpl.tinygrad.v0_14.toolchain import prepare_device
  kind, _, rest = device.partition(":")
  if kind.upper() != KIND or not rest: raise DeviceUnavailable(f"{device}: name a tinygrad device, {KIND}:<NAME>")
  name, why = prepare_device(rest)
  if why is not None: raise DeviceUnavailable(f"{device}: {why}")
  from tinygrad.device import Device
  try: tg = Device[name]
  except Exception as e: raise DeviceUnavailable(" ".join(f"{device}: tinygrad 0.14's {name} does not open here: "
                                                           f"{type(e).__name__}: {e}".split())[:500]) from None
  if getattr(tg, "runtime_t", None) is None: raise DeviceUnavailable(f"{device}: {name} is not a compute device")
  return name, tg


class Tinygrad14Renderer(TinygradRenderer):
  """Exports a Program to tinygrad 0.14's UOps and renders them with the device's renderer (`tg`); remembers each
  source's kernel name, program and signature (for the check at launch and the runtime's TinyELF)."""

  def render(self, name: str, program: Program) -> str:
    from refimpl.tinygrad.v0_14.exporter import to_record
    from refimpl.tinygrad.v0_14.uops import elf_signature, uops_of
    uops = uops_of(to_record(program, kernel_name(name)), self.tg)
    src = self.tg.render(uops)
    self.sources[src] = (kernel_name(name), program, elf_signature(uops))
    return src

  @staticmethod
  def of(device: str, tgr: Any, sources: dict) -> Tinygrad14Renderer:
    """refimpl's description of tinygrad 0.14's renderer `tgr`, read from it (module docstring)."""
    loops = tgr.global_max is None or 0 in tuple(tgr.global_max)
    return Tinygrad14Renderer(
      device=device, has_local=loops or bool(tgr.has_local), has_shared=bool(tgr.has_shared),
      global_max=NATIVE_GRID if loops else tuple(tgr.global_max),
      local_max=NATIVE_GRID if loops else (tuple(tgr.local_max) if tgr.local_max else None),
      vector_widths=(1,), tg=tgr, loops=loops, sources=sources)


class Tinygrad14Compiler(Compiler):
  """The device renderer's compiler (tinygrad's own disk cache, compile_cached); remembers which program and signature
  each (kernel name, binary) is, for the launch (as refimpl.tinygrad.v0_10.backend.TinygradCompiler does)."""
  def __init__(self, tgr: Any, device: str, sources: dict):
    self.tgr, self.device, self.sources, self.programs = tgr, device, sources, {}
    super().__init__(None)

  def compile(self, src: str) -> bytes:
    try: lib = self.tgr.compiler.compile_cached(src)
    except Exception as e:  # tinygrad's CompileError, a failing clang
      raise CompileError(f"{self.device}: tinygrad 0.14's compiler failed: {type(e).__name__}: {e}\n--- source ---\n{src}") from e
    if src in self.sources:
      name, program, signature = self.sources[src]
      self.programs[(name, hashlib.sha256(lib).digest())] = (program, signature)
    return lib


class CheckedProgram:
  """tinygrad 0.14's program, launched only after refimpl's emulator (strict) found every lane of this launch defined."""
  def __init__(self, device: TinygradDevice, name: str, lib: bytes):
    from tinygrad.device import TinyELF
    self.device, self.name = device, name
    found = device.compiler.programs.get((kernel_name(name), hashlib.sha256(lib).digest()))
    if found is None:
      raise RuntimeError(f"{device.device}: {name}: unknown binary (not compiled by this device), so its inputs cannot "
                         "be checked for undefined behaviour")
    self.program, signature = found
    self.prg = device.tg.runtime(TinyELF(lib, kernel_name(name), device.tgr.target, signature))

  def __call__(self, *bufs: Any, global_size=(1, 1, 1), local_size=(1, 1, 1), vals=(), wait=False):
    refuse_undefined(self.program, self.device.allocator, bufs, vals)
    if self.device.renderer.loops: global_size, local_size = (1, 1, 1), (1, 1, 1)  # the grid is loops (CPU: 1 thread)
    return self.prg(*bufs, global_size=tuple(global_size), local_size=tuple(local_size), vals=tuple(vals), wait=wait)


class TinygradDevice(Compiled):
  """TINYGRAD:<NAME> under tinygrad 0.14: its renderer, compiler, runtime and allocator (module docstring)."""
  device_name = KIND
  subprocess_safe = True

  def __init__(self, device: str = "TINYGRAD:CPU"):
    try: require("0.14.0", f"the {KIND} devices of refimpl.tinygrad.v0_14")
    except UnsupportedTinygrad as e: raise DeviceUnavailable(f"{device}: {e}") from None
    self.tinygrad_device, self.tg = open_tinygrad(device)
    self.tgr = self.tg.renderer
    self.backend, self.level, self.standin = device.partition(":")[2], "ran", None
    sources: dict = {}
    self.unsupported_reasons: dict[DType, str] = {}
    super().__init__(device, TinygradAllocator(self.tg.allocator), Tinygrad14Renderer.of(device, self.tgr, sources),
                     Tinygrad14Compiler(self.tgr, device, sources), lambda name, lib: CheckedProgram(self, name, lib))
    check_it_runs(self)

  def synchronize(self) -> None: self.tg.synchronize()

  def supports_dtype(self, dtype: DType) -> bool:
    """The renderer's declaration (`supported_dtypes()`), fp8 aside (the exporter refuses it: tinygrad 0.14 saturates
    it where refimpl's rule overflows)."""
    if isinstance(dtype, (PtrDType, ImageDType)) or dtype.count != 1 or dtype == dtypes.void: return False
    why = self._undeclared(dtype)
    if why is not None: self.unsupported_reasons[dtype] = why
    return why is None

  def _undeclared(self, dtype: DType) -> str | None:
    from tinygrad.dtype import dtypes as tdt
    if dtype in FP8: return f"{dtype.name}: tinygrad 0.14 saturates fp8 on overflow, refimpl's rule gives inf/NaN"
    tg = getattr(tdt, INVERSE_DTYPES_DICT.get(dtype.name, ""), None)
    if tg is None: return f"{dtype.name}: no tinygrad 0.14 dtype of that name"
    if tg in self.tgr.supported_dtypes(): return None
    return f"{dtype.name}: tinygrad 0.14's {type(self.tgr).__name__} declares it unsupported (supported_dtypes)"
