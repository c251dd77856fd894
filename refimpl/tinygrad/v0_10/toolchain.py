"""Make tinygrad 0.10.1's own CLANG, LLVM and GPU devices find the toolchains refimpl's backends use (pip's ziglang,
pyopencl with its bundled PoCL), changing only how each toolchain is found and accepted: tinygrad's flags, renderers,
ELF loader and runtimes stay its own, so what runs is tinygrad's real backends.

  prepare_tinygrad()  idempotent; call it before tinygrad opens a device. Returns, per device ("CLANG", "LLVM", "GPU"),
                      None when tinygrad's device works here, else one line saying why not and what to install.

What it changes, and the measured fact behind each change:

CLANG. tinygrad's ClangJITCompiler.compile runs `clang` from PATH (stdin to stdout) with `-march=native
  --target={machine}-none-unknown-elf -O2 -fPIC -ffreestanding -fno-math-errno -nostdlib` and loads the object with its
  jit_loader. The clang is found with refimpl.backends.ops_clang.find_clang(). A real clang on PATH ("system" style) is
  left alone: tinygrad runs it as it is. Only when the clang found takes zig's spelling (the ziglang package, or a
  `zig cc` wrapper named clang) is ClangJITCompiler.compile replaced, by one that runs that command with tinygrad's
  flags and three changes:
  - `--target={arch}-none-unknown-elf` becomes `-target {arch}-linux-none`: zig rejects tinygrad's triple.
  - `-g0`: zig emits debug info by default, whose relocations (R_X86_64_64 in .rela.debug_info) tinygrad's ELF loader
    rejects ("unknown relocation type 10").
  - `-fno-asynchronous-unwind-tables -fno-unwind-tables`: zig's objects carry .eh_frame (SHT_X86_64_UNWIND, not
    PROGBITS, so the loader places it at address 0) with a .rela.eh_frame entry; tinygrad's loader applies it anyway, at
    .text offset 0x20, silently overwriting 4 bytes of the kernel's code (measured on a 3-float kernel). Without unwind
    tables there is no .eh_frame.
  It compiles a temporary file to a temporary file (zig keeps a copy of every stdin in its cache), runs as an argument
  list (no shell) in its own process group, and kills that group past refimpl's CLANG time limit (it is
  refimpl.backends.ops_clang.run_clang). The result is still jit_loader(object), cached by tinygrad under its own key.
  The replacement is written against tinygrad 0.10.1's flags; another tinygrad version is refused with a reason rather
  than patched.

LLVM. tinygrad 0.10.1's LLVM device does not use llvmlite: tinygrad.runtime.support.llvm loads the LLVM C library with
  ctypes (ctypes.util.find_library 'LLVM', then 'LLVM-14' .. 'LLVM-19'). llvmlite's libllvmlite.so exports only its own
  LLVMPY_* functions, none of the LLVM-C API that tinygrad's autogen binds, so it cannot stand in. Nothing is changed:
  the device works where a libLLVM is installed (Debian/Ubuntu: libllvm14 .. libllvm19), and otherwise the reason says so.

GPU. tinygrad.runtime.autogen.opencl does `ctypes.CDLL(ctypes.util.find_library('OpenCL'))` at import. On a machine with
  only pip's OpenCL, find_library finds nothing, CDLL(None) is the process itself and tinygrad fails with "no attribute
  clGetPlatformIDs"; pyopencl's bundled ICD loader (pyopencl/.libs/libOpenCL-*.so) loaded directly segfaults in
  clGetPlatformIDs unless pyopencl is imported first (its import sets PYOPENCL_HOME, which that loader reads to find
  the PoCL shipped beside it, pyopencl/.libs/pocl.icd; pocl-binary-distribution itself is an empty package). So pyopencl
  is imported first, and tinygrad's opencl module is imported (or reloaded in place, when it had loaded another library)
  while find_library('OpenCL') answers the path of the libOpenCL that pyopencl loaded: one ICD loader in the process,
  seeing the same platforms as refimpl's GPU device (the bundled PoCL, and /etc/OpenCL/vendors). tinygrad's GPU takes
  the loader's first platform; prepare_tinygrad checks that its device builds a trivial kernel (the PoCL wheel's LLVM 14
  does not know Zen 4/5 CPUs) and reports why not.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import importlib
import importlib.metadata
import platform
import sys
from collections.abc import Callable
from typing import Any

from refimpl.tinygrad.shared_toolchain import ZIG_EXTRA_FLAGS, pyopencl_libopencl

TINYGRAD_VERSION = "0.10.1"
CLANG_PROBE = "void tg_probe(int* restrict o) { o[0] = 1; }"
CL_PROBE = "__kernel void tg_probe(__global int* o) { o[get_global_id(0)] = 1; }"
OPENCL_MODULE = "tinygrad.runtime.autogen.opencl"
LLVM_MISSING = ("LLVM: tinygrad's LLVM device loads the LLVM C library (libLLVM, found as 'LLVM' or 'LLVM-14'..'LLVM-19') "
                "with ctypes and none is found; install one (Debian/Ubuntu: apt-get install libllvm15); llvmlite cannot "
                "stand in (its libllvmlite.so exports no LLVM-C functions)")
GPU_MISSING = "GPU: pyopencl does not import; pip install pyopencl pocl-binary-distribution (refimpl[gpu])"

_RESULT: dict[str, str | None] | None = None
_ORIGINAL_COMPILE: Callable[..., bytes] | None = None


def prepare_tinygrad() -> dict[str, str | None]:
  """Installs what tinygrad's CLANG, LLVM and GPU devices need here (see the module docstring), once per process, and
  returns per device None when it works, else a one-line reason."""
  global _RESULT
  if _RESULT is None: _RESULT = {"CLANG": _prepare_clang(), "LLVM": _prepare_llvm(), "GPU": _prepare_gpu()}
  return dict(_RESULT)


def _line(text: str) -> str:
  """`text` on one line."""
  return " ".join(text.split())


# ---- CLANG

def _prepare_clang() -> str | None:
  """Finds a clang with refimpl's finder; patches tinygrad's compile only for zig's spelling; probes tinygrad's compile."""
  from refimpl.backends import ops_clang
  from refimpl.device import DeviceUnavailable
  tg = importlib.import_module("tinygrad.runtime.ops_clang")
  try: command, style = ops_clang.find_clang()
  except DeviceUnavailable as e:
    _restore_compile(tg)
    return _line(str(e))
  if style == "zig":
    version = importlib.metadata.version("tinygrad")
    if version != TINYGRAD_VERSION:
      _restore_compile(tg)
      return (f"CLANG: the clang found ({command[0]}) takes zig's flags, and refimpl's patch for that is written for "
              f"tinygrad {TINYGRAD_VERSION}, not {version}")
    _patch_compile(tg, command)
  else: _restore_compile(tg)
  return _probe_clang(tg, command)


def _patch_compile(tg: Any, command: list[str]) -> None:
  """Replaces ClangJITCompiler.compile by the zig-spelled one running `command` (the original is kept for restoring)."""
  global _ORIGINAL_COMPILE
  if _ORIGINAL_COMPILE is None: _ORIGINAL_COMPILE = tg.ClangJITCompiler.compile
  tg.ClangJITCompiler.compile = _zig_compile(list(command))


def _restore_compile(tg: Any) -> None:
  """Puts tinygrad's own ClangJITCompiler.compile back when it was replaced."""
  if _ORIGINAL_COMPILE is not None: tg.ClangJITCompiler.compile = _ORIGINAL_COMPILE


def zig_args(command: list[str]) -> list[str]:
  """tinygrad 0.10.1's clang arguments, spelled for zig cc (see the module docstring), without the source and output."""
  from refimpl.backends.ops_clang import host_arch, target_flags
  machine = "x86_64" if sys.platform == "win32" else platform.machine()
  args = ["-march=native", *target_flags("zig", host_arch(), native=False), "-O2", "-fPIC", "-ffreestanding",
          "-fno-math-errno", "-nostdlib", *ZIG_EXTRA_FLAGS]
  arch_args = ["-ffixed-x18"] if machine == "arm64" else []
  return [*command, "-c", "-x", "c", *args, *arch_args]


def _zig_compile(command: list[str]) -> Callable[[Any, str], bytes]:
  """A ClangJITCompiler.compile running `command` (zig cc) with zig_args, then tinygrad's jit_loader."""
  def compile(self: Any, src: str) -> bytes:
    from tinygrad.runtime.support.elf import jit_loader
    return jit_loader(run_clang(zig_args(command), src))
  compile.__doc__ = f"tinygrad's ClangJITCompiler.compile through `{' '.join(command)}` (refimpl.tinygrad.v0_10.toolchain)"
  return compile


def run_clang(args: list[str], src: str) -> bytes:
  """The object `args` builds from `src` (refimpl's run_clang: temporary files, its own process group, a time limit),
  with tinygrad's CompileError on failure."""
  from tinygrad.device import CompileError

  from refimpl.backends import ops_clang
  from refimpl.device import CompileError as RefimplCompileError
  try: return ops_clang.run_clang(args, src)
  except RefimplCompileError as e: raise CompileError(str(e)) from None


def _probe_clang(tg: Any, command: list[str]) -> str | None:
  """None when tinygrad's (possibly patched) compile builds and loads a trivial kernel, else why not."""
  try: tg.ClangJITCompiler().compile(CLANG_PROBE)
  except Exception as e:  # any failure is the reason
    return _line(f"CLANG: tinygrad's compile through {command[0]} fails: {type(e).__name__}: {e}")[:500]
  return None


# ---- LLVM

def _prepare_llvm() -> str | None:
  """None when tinygrad's LLVM device finds a libLLVM and makes its target machine, else why not (nothing is patched)."""
  try:
    llvm = importlib.import_module("tinygrad.runtime.ops_llvm")
    host = {"arm64": "AArch64", "aarch64": "AArch64", "x86_64": "X86", "AMD64": "X86"}[platform.machine()]
    llvm.LLVMCompiler(host, False)
  except RuntimeError as e:
    return LLVM_MISSING if "No LLVM library" in str(e) else _line(f"LLVM: {e}")
  except (OSError, AttributeError, KeyError) as e:
    return _line(f"LLVM: tinygrad's LLVM device does not start: {type(e).__name__}: {e}")
  return None


# ---- GPU

def _prepare_gpu() -> str | None:
  """Imports pyopencl, points tinygrad's opencl module at pyopencl's libOpenCL, and probes the platform tinygrad takes."""
  try: cl = importlib.import_module("pyopencl")
  except ImportError as e: return _line(f"{GPU_MISSING} ({e})")
  lib = pyopencl_libopencl(cl)
  if lib is None: return "GPU: pyopencl imports but its libOpenCL is not found; reinstall pyopencl (pip install pyopencl)"
  _load_tinygrad_opencl(lib)
  return _probe_gpu(cl)


def _load_tinygrad_opencl(lib: str) -> None:
  """Imports tinygrad's opencl autogen module (reloads it in place when it opened another library) while
  ctypes.util.find_library('OpenCL') answers `lib`."""
  module = sys.modules.get(OPENCL_MODULE)
  if module is not None and getattr(module._libraries.get("libOpenCL.so.1"), "_name", None) == lib: return
  real = ctypes.util.find_library
  ctypes.util.find_library = lambda name: lib if name == "OpenCL" else real(name)
  try:
    if module is None: importlib.import_module(OPENCL_MODULE)
    else: importlib.reload(module)
  finally: ctypes.util.find_library = real


def _probe_gpu(cl: Any) -> str | None:
  """None when the device tinygrad's GPU opens (the first platform's first GPU, else default device) builds a trivial
  kernel, else why not."""
  try: platforms = cl.get_platforms()
  except cl.Error as e: return _line(f"GPU: no OpenCL platform ({e}); pip install pocl-binary-distribution or a vendor driver")
  if not platforms: return "GPU: no OpenCL platform; pip install pocl-binary-distribution or a vendor driver"
  first = platforms[0]
  dev = _first_device(cl, first)
  if dev is None: return _line(f"GPU: tinygrad takes the first OpenCL platform, {first.name}, and it has no device")
  try: cl.Program(cl.Context([dev]), CL_PROBE).build()
  except cl.Error as e:
    why = "its compiler does not know this CPU; install a PoCL built for it (apt-get install pocl-opencl-icd)" \
      if "unknown target CPU" in str(e) else _line(str(e))[:300]
    return _line(f"GPU: tinygrad takes the first OpenCL platform, {first.name} ({first.version}) / {dev.name}: {why}")
  return None


def _first_device(cl: Any, plat: Any) -> Any:
  """The device tinygrad's CLDevice takes on `plat`: its first GPU, else its first default device; None without one."""
  for kind in (cl.device_type.GPU, cl.device_type.DEFAULT):
    try: devices = plat.get_devices(kind)
    except cl.Error: devices = []
    if devices: return devices[0]
  return None


def toolchain_identity() -> str:
  """Which toolchain prepare_tinygrad found (the clang's style and version text, not where it is installed), for the
  key of refimpl's compile cache."""
  from refimpl.backends import ops_clang
  from refimpl.device import DeviceUnavailable
  try: command, style = ops_clang.find_clang()
  except DeviceUnavailable: return ""
  return f"{style} {ops_clang.clang_identity(tuple(command))}"
