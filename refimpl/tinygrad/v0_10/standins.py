"""tinygrad 0.10.1's devices whose hardware is not here, judged at the highest level this machine allows.

A kernel reaches one of three levels (LEVELS), highest first:
  ran       it ran on a stand-in runtime (named) and its results were held to the spec like any device's;
  compiled  its source compiled with the device's own toolchain or the closest one available (named); nothing ran;
  rendered  tinygrad's renderer produced its source; no compiler for it runs here.
What fails at a level (a render error, a compile error, a wrong value) is a finding at that level.

STANDINS is the one table: per tinygrad device, the level it is judged at here, tinygrad's renderer, and the stand-in
runtime or toolchain. `TINYGRAD:<NAME>` opens tinygrad's real device first (refimpl.tinygrad.v0_10.backend.open_tinygrad);
only where that fails (no /dev/kgsl-3d0, no /dev/nvidiactl, not macOS, ...) does it open the stand-in below, and a
stand-in that cannot be built here raises DeviceUnavailable with both reasons and what to install. Every piece is
tinygrad's own except what stands in for the missing hardware:
  - QCOM (ran): QCOMRenderer (tinygrad's OpenCLRenderer, device "QCOM") + tinygrad's GPU device's CLCompiler, CLProgram
    and allocator on PoCL, in place of the Adreno's kgsl runtime.
  - DSP (ran): tinygrad's own mock DSP (what DSPDevice opens without /dev/ion): its MockDSPRenderer (DSPRenderer's
    kernel, with a Linux `_start` that reads the buffers from stdin and writes them to stdout), compiled as its
    ClangCompiler(None, ["-static"] + Hexagon flags) compiles it, and run as its MockDSPProgram runs it (qemu-hexagon, in
    docker there); here zig's clang compiles (HEXAGON_FLAGS: tinygrad's) and Debian's qemu-user runs qemu-hexagon
    directly. Two changes, both to the stand-in's link, none to the kernel's code: the static link is against musl
    (zig's hexagon-linux-musl) in place of -nostdlib, since the kernels call what the DSP's runtime provides
    (DSPRenderer renders SIN / EXP2 / LOG2 as __builtin_sin / exp2f / log2f, and int32 division is __hexagon_divsi3);
    so the mock's `_start` is renamed and called from main (musl's crt1 has the `_start`). SIN, EXP2 and LOG2 results
    are then musl's libm, standing in for the DSP's. tinygrad's real form (DSPRenderer's FastRPC `entry`, linked
    -shared as DSPDevice links it) is compiled by spec_tests/test_tinygrad_standins.py. zig builds musl for Hexagon on
    its first link (~75 s on 2 cores) into its global cache, keyed by its executable and lib/ files as they lie on
    disk: a reinstalled ziglang (a fresh virtual environment, as .ci/run makes) built it again. So zig runs from a
    verified copy of the ziglang package under refimpl's cache root (stable_ziglang), which outlives the install.
  - NV, CUDA (compiled): NVRenderer / CUDARenderer for sm_80 + tinygrad's NVCompiler (cubin) / CUDACompiler (PTX),
    NVRTC from the nvidia-cuda-nvrtc-cu12 wheel (refimpl.tinygrad.v0_10.nvidia.load_bindings).
  - AMD (rendered): AMDRenderer. tinygrad compiles it with comgr for the GPU's gfx target; the only one tinygrad 0.10.1
    names is gfx1100 (compile_hip's default, RDNA3). Debian's comgr (libamd-comgr2 5.2.3, LLVM 15) refuses that ISA
    name (amd_comgr_action_info_set_isa_name: INVALID_ARGUMENT; gfx942 likewise), and for the older gfx90a it links
    without the device libraries (lld: undefined hidden symbol __ockl_get_group_id) although rocm-device-libs is
    installed; its LLVM also aborts any process that loaded another LLVM first (PoCL's, tinygrad's LLVM device:
    "Option ... registered more than once"). So nothing compiles AMD kernels here (measured 2026-12-06).
  - METAL (rendered): MetalRenderer; no Metal compiler runs on Linux.
A device below level ran opens with a runtime whose launch raises NotRunHere (a NotTranslatable: the suite reports the
case "not tested", the fuzzer sets it aside), so `Kernel(program, "TINYGRAD:NV")` renders and compiles and
`replay(class, "TINYGRAD:NV")` reproduces what fails to render or compile. `judge_builds` gives every op case's
outcome at a device's level (the report's rows for the devices below ran).
"""
from __future__ import annotations

import base64
import functools
import hashlib
import importlib.metadata
import os
import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from refimpl import helpers
from refimpl.device import DeviceUnavailable
from refimpl.errors import NotTranslatable

LEVELS = ("ran", "compiled", "rendered")
NV_ARCH = "sm_80"
AMD_ARCH = "gfx1100"  # the one gfx target tinygrad 0.10.1 names (compile_hip's default: RDNA3)
# tinygrad 0.10.1's DSPDevice compiler_args + its ClangCompiler's flags (tinygrad/runtime/ops_dsp.py), the target as zig's
# clang spells it (zig rejects "--target=hexagon": MissingOperatingSystem), no -fuse-ld=lld (zig links with lld):
HEXAGON_FLAGS = ("-mcpu=hexagonv65", "-mhvx=v65", "-mhvx-length=128b", "-O2", "-Wall", "-Werror", "-x", "c", "-fPIC",
                 "-ffreestanding")
# the real DSP's link (DSPRenderer's source with its FastRPC entry: a shared object, symbols left to the DSP)
HEXAGON_DSP_FLAGS = ("-shared", "-target", "hexagon-linux-none", "-nostdlib", *HEXAGON_FLAGS)
# the mock's link for qemu-hexagon: static, with musl's libc, libm and compiler-rt in place of the DSP runtime's
HEXAGON_RUN_FLAGS = ("-static", "-target", "hexagon-linux-musl", *HEXAGON_FLAGS)

@dataclass(frozen=True)
class StandIn:
  """How a tinygrad device without its hardware is judged here (module docstring)."""
  level: str     # the highest level its kernels can reach here (LEVELS)
  renderer: str  # tinygrad's renderer, module:Class
  standin: str   # the stand-in runtime (ran) or the toolchain (compiled) used; for rendered, why nothing compiles
  hardware: str  # what would run it for real
  install: str   # what this machine needs for the stand-in


STANDINS = {
  "QCOM": StandIn("ran", "tinygrad.renderer.cstyle:QCOMRenderer",
                  "tinygrad's GPU (OpenCL) compiler, runtime and allocator on PoCL", "a Qualcomm Adreno GPU (/dev/kgsl-3d0)",
                  "pip install 'refimpl[gpu]' (pyopencl and PoCL) or apt-get install pocl-opencl-icd"),
  "DSP": StandIn("ran", "tinygrad.runtime.ops_dsp:MockDSPRenderer",
                 "Hexagon v65 code from zig's clang with tinygrad's DSP flags, linked with musl and run on qemu-hexagon "
                 "(Debian's qemu-user) as tinygrad's mock DSP runs it",
                 "a Qualcomm Hexagon DSP (/dev/ion, /dev/adsprpc-smd)",
                 "pip install 'refimpl[clang]' (ziglang) and apt-get install qemu-user (qemu-hexagon)"),
  "NV": StandIn("compiled", "tinygrad.renderer.cstyle:NVRenderer", f"tinygrad's NVCompiler (NVRTC, cubin for {NV_ARCH})",
                "an NVIDIA GPU and its kernel driver (/dev/nvidiactl)", "pip install 'refimpl[cuda]' (nvidia-cuda-nvrtc-cu12)"),
  "CUDA": StandIn("compiled", "tinygrad.renderer.cstyle:CUDARenderer", f"tinygrad's CUDACompiler (NVRTC, PTX for {NV_ARCH})",
                  "an NVIDIA GPU and its driver (libcuda.so)", "pip install 'refimpl[cuda]' (nvidia-cuda-nvrtc-cu12)"),
  "AMD": StandIn("rendered", "tinygrad.renderer.cstyle:AMDRenderer",
                 f"no comgr here compiles {AMD_ARCH}, the target tinygrad names (Debian's libamd-comgr2 5.2.3 refuses it)",
                 "an AMD GPU and the amdgpu kernel driver (/dev/kfd)", "nothing (tinygrad's renderer only)"),
  "METAL": StandIn("rendered", "tinygrad.renderer.cstyle:MetalRenderer", "no Metal compiler runs on Linux",
                   "macOS (Metal)", "nothing (tinygrad's renderer only)"),
}


class NotRunHere(NotTranslatable):
  """A kernel of a device judged below level ran here was launched: it rendered (and compiled) but nothing runs it."""


def describe(label: str) -> str:
  """One line: the level a device is judged at here and with what (the pages' and DeviceUnavailable's wording)."""
  s = STANDINS[label]
  return f"{s.level} ({s.standin}; standing in for {s.hardware})"


# ***** the stand-in device object: what refimpl.tinygrad.v0_10.backend reads of a tinygrad Compiled *****

@dataclass
class StandInDevice:
  """Looks like a tinygrad Compiled to refimpl.tinygrad.v0_10.backend: its device name (tinygrad's, for is_dtype_supported),
  renderer, compiler, runtime and allocator; `standin` says how it is judged."""
  device: str
  renderer: Any
  compiler: Any
  runtime: Any
  allocator: Any
  standin: StandIn
  sync: Any = None

  def synchronize(self) -> None:
    if self.sync is not None: self.sync()


def open_standin(label: str, why: str) -> StandInDevice:
  """The stand-in of tinygrad device `label`, whose real device did not open (`why`); DeviceUnavailable when the
  stand-in cannot be built here either."""
  s = STANDINS[label]
  try: return BUILDERS[label](s)
  except DeviceUnavailable: raise
  except Exception as e:
    error = " ".join(f"{type(e).__name__}: {e}".split())[:400]
    msg = f"TINYGRAD:{label}: {' '.join(why.split())[:300]}; its stand-in ({s.standin}) does not open here either: {error}"
    raise DeviceUnavailable(f"{msg}; needs {s.install}") from None


def _renderer(s: StandIn, *args: Any) -> Any:
  from refimpl.device import load_object
  return load_object(s.renderer)(*args)


def _not_run(label: str, s: StandIn) -> Any:
  """The runtime of a device below level ran: builds, and raises NotRunHere when launched."""
  class NotRun:
    def __init__(self, name: str, lib: bytes): self.name, self.lib = name, lib
    def __call__(self, *bufs: Any, global_size: Any = None, local_size: Any = None, vals: Any = (), wait: bool = False):
      raise NotRunHere(f"TINYGRAD:{label}: {self.name} {'compiled' if s.level == 'compiled' else 'rendered'}, not run: "
                       f"judged at level {describe(label)}")
  return NotRun


def _host_allocator(alignment: int = 16) -> Any:
  """tinygrad's MallocAllocator, its buffers aligned to `alignment` bytes."""
  from tinygrad.device import _MallocAllocator
  class Aligned(_MallocAllocator):
    def _alloc(self, size: int, options: Any) -> Any: return self._alloc_aligned(size, alignment)
  return Aligned()


def _build_qcom(s: StandIn) -> StandInDevice:
  from refimpl.tinygrad.v0_10.toolchain import prepare_tinygrad
  why = prepare_tinygrad()["GPU"]
  if why is not None: raise RuntimeError(why)
  from tinygrad.runtime.ops_gpu import CLDevice
  cl = CLDevice("GPU")
  return StandInDevice("QCOM", _renderer(s), cl.compiler, cl.runtime, cl.allocator, s, cl.synchronize)


def _build_nvidia(label: str, s: StandIn) -> StandInDevice:
  from refimpl.tinygrad.v0_10.nvidia import load_bindings
  load_bindings()
  from tinygrad.runtime.support.compiler_cuda import CUDACompiler, NVCompiler
  compiler = NVCompiler(NV_ARCH) if label == "NV" else CUDACompiler(NV_ARCH)
  return StandInDevice(label, _renderer(s, NV_ARCH), compiler, _not_run(label, s), _host_allocator(), s)


class RenderOnly:
  """The compiler of a device judged at level rendered: the source itself (nothing compiles it here)."""
  cachekey = None
  def compile(self, src: str) -> bytes: return src.encode()


def _build_rendered(label: str, s: StandIn) -> StandInDevice:
  return StandInDevice(label, _renderer(s), RenderOnly(), _not_run(label, s), _host_allocator(), s)


# ***** DSP: Hexagon code on qemu-hexagon *****

QEMU_TIMEOUT_S = 120
ZIG_TIMEOUT_S = 900  # the first Hexagon link builds musl into zig's cache: 2 min on 2 shared cores, once per machine
MOCK_ENTRY = "void _start(void) {"
HOSTED_ENTRY = "void rf_start(void);\nint main(void) { rf_start(); return 0; }\nvoid rf_start(void) {"


def record_digest(data: bytes) -> str:
  """The sha256 of `data` as a wheel's RECORD spells it: urlsafe base64 without padding."""
  return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def intact_copy(root: Path, files: dict[str, tuple[int, str]]) -> bool:
  """Whether folder `root` holds every file of `files` ({path under root: (size, record_digest)}) with that size and
  content."""
  for rel, (size, digest) in files.items():
    try: data = (root / rel).read_bytes()
    except OSError: return False
    if len(data) != size or record_digest(data) != digest: return False
  return True


def _link_or_copy(src: str, dst: str) -> None:
  """dst as a hard link to src (the same file: no bytes copied, and it outlives src's removal), else a copy of it."""
  try: os.link(src, dst)
  except OSError: shutil.copy2(src, dst)


def stable_copy(source: Path, files: dict[str, tuple[int, str]], target: Path) -> Path | None:
  """`target`, made a copy of folder `source` (whose files are `files`, as intact_copy reads them) unless it already is
  one: a copy that is missing a file or whose content differs is removed and made again. Its files are hard links to
  the source's where the file system allows (a reinstall replaces the source's files, leaving the links' ones), else
  copies. It is made beside `target` and renamed into place, so another process sees a whole copy or none (where two
  make one at once, the first rename wins). None when no intact copy can be made (the source differs from `files`, or
  the disk refuses)."""
  if target.is_dir() and intact_copy(target, files): return target
  shutil.rmtree(target, ignore_errors=True)
  try:
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{target.name}-", dir=target.parent) as tmp:
      copy = Path(tmp) / "copy"
      shutil.copytree(source, copy, copy_function=_link_or_copy)
      if not intact_copy(copy, files): return None
      try:
        os.rename(copy, target)
        return target
      except OSError: pass  # another process renamed its copy into place first
  except OSError: return None
  return target if intact_copy(target, files) else None


@functools.cache
def stable_ziglang() -> Path | None:
  """A copy of the installed ziglang package's folder (its zig and lib/) under refimpl's cache root
  (ziglang/<version>-<digest of the files its RECORD lists>; hard links, else ~420 MB of copies), checked against that
  RECORD's sha256 of every file on its first use in a process (~3 s) and made again when damaged (stable_copy). zig
  keys its cache of the musl it builds by its own executable and lib/ files as they lie on disk, so a reinstall of the
  same ziglang (a fresh virtual environment, as .ci/run makes) built musl again (~75 s on 2 cores); zig run from this
  copy finds its build. None without a ziglang wheel's RECORD."""
  try: dist = importlib.metadata.distribution("ziglang")
  except importlib.metadata.PackageNotFoundError: return None
  files = {"/".join(f.parts[1:]): (f.size, f.hash.value) for f in dist.files or ()
           if f.parts[0] == "ziglang" and f.hash is not None and f.hash.mode == "sha256" and f.size is not None}
  if "zig" not in files: return None
  key = hashlib.sha256("\n".join(f"{rel} {size} {digest}" for rel, (size, digest) in sorted(files.items())).encode())
  target = helpers.cache_dir() / "ziglang" / f"{dist.version}-{key.hexdigest()[:20]}"
  return stable_copy(Path(str(dist.locate_file("ziglang"))), files, target)


def hexagon(zig: list[str], src: str, flags: tuple[str, ...]) -> tuple[bytes | None, str]:
  """(the Hexagon ELF, "") or (None, zig's diagnostics) of C source `src` built by zig's clang with `flags`. The
  installed ziglang's `zig cc` (ops_clang._ziglang_command()) runs from its stable copy (stable_ziglang) where there
  is one."""
  from refimpl.backends import ops_clang
  copy = stable_ziglang() if zig == ops_clang._ziglang_command() else None
  if copy is not None: zig = [str(copy / "zig"), "cc"]
  with tempfile.TemporaryDirectory() as d:
    c, out = Path(d) / "k.c", Path(d) / "k.out"
    c.write_text(src)
    done = subprocess.run([*zig, *flags, str(c), "-o", str(out)], capture_output=True, text=True, timeout=ZIG_TIMEOUT_S)
    return (out.read_bytes(), "") if done.returncode == 0 else (None, done.stderr[-3000:])


class DSPCompiler:
  """tinygrad's mock DSP compile by zig's clang, linked with musl for qemu-hexagon (module docstring). Its cachekey
  (refimpl's disk cache) names the flags, the entry change and zig's version."""
  def __init__(self, zig: list[str]):
    import hashlib
    self.zig = zig
    version = subprocess.run([*zig[:-1], "version"], capture_output=True, text=True, timeout=60).stdout.strip()
    what = " ".join([*HEXAGON_RUN_FLAGS, HOSTED_ENTRY, version])
    self.cachekey = f"compile_dsp_qemu_{hashlib.sha256(what.encode()).hexdigest()[:16]}"

  def compile(self, src: str) -> bytes:
    from refimpl.errors import CompileError
    if src.count(MOCK_ENTRY) != 1: raise CompileError(f"not MockDSPRenderer's source (no `{MOCK_ENTRY}`):\n{src}")
    elf, log = hexagon(self.zig, src.replace(MOCK_ENTRY, HOSTED_ENTRY), HEXAGON_RUN_FLAGS)
    if elf is None: raise CompileError(f"clang --target=hexagon failed:\n{log}")
    return elf


def _dsp_runtime() -> Any:
  """tinygrad's MockDSPProgram without its docker: qemu-hexagon runs the ELF, the buffers (then the vals) on stdin,
  the buffers back on stdout, both files (tinygrad's pipes cut a buffer over 64 KiB: its mock reads each with one
  read())."""
  class QemuHexagonProgram:
    def __init__(self, name: str, lib: bytes): self.name, self.lib = name, lib
    def __call__(self, *bufs: Any, vals: Any = (), wait: bool = False):
      with tempfile.TemporaryDirectory() as d:
        exe, given, got = Path(d) / "kernel.out", Path(d) / "in", Path(d) / "out"
        exe.write_bytes(self.lib)
        exe.chmod(0o755)
        # files, not pipes: the mock reads each buffer with one read(), which a pipe cuts at 64 KiB
        given.write_bytes(b"".join([bytes(x) for x in bufs] + [struct.pack("I", v & 0xFFFFFFFF) for v in vals]))
        with given.open("rb") as stdin, got.open("wb") as stdout:
          done = subprocess.run(["qemu-hexagon", str(exe)], stdin=stdin, stdout=stdout, stderr=subprocess.PIPE,
                                timeout=QEMU_TIMEOUT_S)
        out = got.read_bytes()
      if done.returncode != 0 or len(out) != sum(len(x) for x in bufs):
        raise RuntimeError(f"qemu-hexagon: {self.name} exited {done.returncode} with {len(out)} bytes out: "
                           f"{done.stderr[-500:].decode(errors='replace')}")
      offset = 0
      for x in bufs:
        x[:] = out[offset:offset + len(x)]
        offset += len(x)
  return QemuHexagonProgram


def _build_dsp(s: StandIn) -> StandInDevice:
  from tinygrad.device import MallocAllocator

  from refimpl.backends import ops_clang
  zig = ops_clang._ziglang_command()
  if zig is None: raise RuntimeError("no ziglang here: the Hexagon objects are built with zig's clang")
  if shutil.which("qemu-hexagon") is None: raise RuntimeError("no qemu-hexagon on PATH")
  return StandInDevice("DSP", _renderer(s), DSPCompiler(zig), _dsp_runtime(), MallocAllocator, s)


BUILDERS = {"QCOM": _build_qcom, "DSP": _build_dsp, "NV": lambda s: _build_nvidia("NV", s),
            "CUDA": lambda s: _build_nvidia("CUDA", s), "AMD": lambda s: _build_rendered("AMD", s),
            "METAL": lambda s: _build_rendered("METAL", s)}


# ***** every op case at a device's level (the report's rows for the devices judged below ran) *****

def judge_case(device: str, case: Any) -> tuple[str, str]:
  """(status, detail) of one op case (refimpl.testing.differential.OpCase) on a device judged below ran: its kernel
  (the suite's, OpHarness) built up to the device's level. "pass": it reached that level; "fail": it did not render or
  compile (the message as the suite writes it, so the report tells the kind); "unsupported": the device declares a
  dtype unsupported; "untested": refimpl cannot export it (tinygrad 0.10.1 has no form for it)."""
  from refimpl.device import Device
  from refimpl.testing.differential import OpHarness, supported
  if not supported(device, case): return "unsupported", f"{device} does not support the dtypes of {case.id}"
  try: OpHarness(device, case)
  except NotTranslatable as e: return "untested", f"refimpl cannot export: {e}"
  except Exception as e: return "fail", f"{device}: {case.id} does not run: {type(e).__name__}: {e}"
  return "pass", f"{device}: {case.id} {Device[device].level} (judged at {describe(device.partition(':')[2])})"


def judge_builds(device: str, cases: list | None = None) -> dict[str, tuple[str, str]]:
  """{case id: (status, detail)} of every op case of the suite (alu, cast and bitcast cases) on `device` (judge_case)."""
  from refimpl.testing.differential import alu_cases, bitcast_cases, cast_cases
  cases = alu_cases() + cast_cases() + bitcast_cases() if cases is None else cases
  return {c.id: judge_case(device, c) for c in cases}
