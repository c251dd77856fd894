"""The CLANG device: render C (cstyle.py), compile it with clang to an ELF object for the host, link it into a flat image
(elf.py) and run it with CPUProgram (W^X).

The compiler is the system `clang` when one is on PATH, else the clang inside the `ziglang` package (`zig cc`). It runs
as an argument list (never a shell) on a temporary source file, in its own process group, with FLAGS:
  -ffreestanding -nostdlib -fno-builtin     no libc/libm: every op is rendered inline, nothing is linked
  -O2 -ffp-contract=off -fno-fast-math      optimized, but IEEE: no a*b+c contraction (MULACC is rendered unfused),
                                            no reassociation, NaN/inf/signed zeros honoured
  -fno-math-errno                           so __builtin_sqrt is the instruction, not a libm call that sets errno
  -fPIC -fvisibility=hidden                 PC-relative code and data references (the image loads anywhere)
  -g0 -fno-asynchronous-unwind-tables -fno-unwind-tables -fno-stack-protector -fno-sanitize=all
                                            nothing the flat image cannot use (debug info, unwind tables, canaries)
plus the target: `{arch}-linux-none` for zig, `{arch}-unknown-linux-gnu` for a system clang (ELF, SysV calling
convention) and the host CPU (-march=native on x86-64, -mcpu=native on aarch64). Which spelling a clang on PATH takes is
probed (a `zig cc` wrapper named clang takes only zig's); when neither works, the ziglang package's clang is used. A
native compile that runs past NATIVE_TIMEOUT_S is redone for the generic CPU. The disk cache key names the clang
version text (without the install's path: identity_text), the flags, the target and the host CPU's model and features; a
cached object is the ELF object itself.

No grid: the runner lowers grid programs to loops (refimpl.lower.lower_grid_to_loops); no locals (a DEFINE_LOCAL of a
loop program is a function-scope array). EXP2/LOG2/SIN are decomposed by refimpl.lower.transcendental before rendering.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import pathlib
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import warnings

from refimpl.backends.cstyle import CStyleRenderer, kernel_symbol
from refimpl.backends.elf import ElfProgram
from refimpl.device import Compiled, Compiler, DeviceUnavailable, MallocAllocator, compile_batch_cached
from refimpl.dtype import DType, ImageDType, PtrDType, dtypes
from refimpl.errors import CompileError

FLAGS: tuple[str, ...] = ("-ffreestanding", "-nostdlib", "-fno-builtin", "-O2", "-ffp-contract=off", "-fno-fast-math",
                          "-fno-math-errno", "-fPIC", "-fvisibility=hidden", "-g0", "-fno-asynchronous-unwind-tables",
                          "-fno-unwind-tables", "-fno-stack-protector", "-fno-sanitize=all")
ARCHES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}
MISSING = "CLANG: no clang found; install clang or `pip install ziglang` (included in refimpl[clang])"
COMPILE_TIMEOUT_S = 120
NATIVE_TIMEOUT_S = 20  # then the compile is redone for the generic CPU (ClangCompiler.compile)


class _Timeout(CompileError):
  """clang ran past its time limit (and was killed)."""


def host_arch() -> str:
  arch = ARCHES.get(platform.machine().lower())
  if arch is None: raise DeviceUnavailable(f"CLANG: host architecture {platform.machine()!r} is not supported (x86_64, aarch64)")
  return arch


def _ziglang_command() -> list[str] | None:
  """`zig cc` from the ziglang package: its binary when it can be found, else `python -m ziglang cc`; None without it."""
  spec = importlib.util.find_spec("ziglang")
  if spec is None: return None
  for d in spec.submodule_search_locations or ():
    exe = os.path.join(d, "zig.exe" if sys.platform == "win32" else "zig")
    if os.access(exe, os.X_OK): return [exe, "cc"]
  return [sys.executable, "-m", "ziglang", "cc"]


PROBE_SRC = "void rf_probe(int* restrict o) { o[0] = 1; }"


def target_flags(style: str, arch: str, native: bool = True) -> list[str]:
  """The target (ELF for Linux, freestanding) in the spelling a clang takes and, when native, the host CPU. Style "zig":
  zig's `-target {arch}-linux-none` (zig rejects gnu triples: UnknownOperatingSystem); "system": `--target={arch}-unknown-
  linux-gnu`."""
  flags = ["-target", f"{arch}-linux-none"] if style == "zig" else [f"--target={arch}-unknown-linux-gnu"]
  if native: flags.append("-march=native" if arch == "x86_64" else "-mcpu=native")
  return flags


@functools.cache
def _probe(command: tuple[str, ...], style: str, arch: str) -> str | None:
  """None when `command` builds an ELF object for `arch` with FLAGS and the style's target flags, else why not (a line)."""
  with tempfile.TemporaryDirectory(prefix="refimpl-clang-probe-") as tmp:
    source, obj = os.path.join(tmp, "probe.c"), os.path.join(tmp, "probe.o")
    with open(source, "w") as f: f.write(PROBE_SRC)
    args = [*command, *FLAGS, *target_flags(style, arch, native=False), "-c", "-x", "c", source, "-o", obj]
    try: res = subprocess.run(args, capture_output=True, timeout=COMPILE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as e: return f"{type(e).__name__}: {e}"
    if res.returncode == 0 and os.path.exists(obj) and pathlib.Path(obj).read_bytes().startswith(b"\x7fELF"): return None
    lines = res.stderr.decode(errors="replace").strip().splitlines()
    return lines[0] if lines else f"exit status {res.returncode}, no object"


def find_clang(arch: str | None = None) -> tuple[list[str], str]:
  """(the command that runs clang, its target-flag style) for the first clang that builds refimpl's objects for `arch`:
  a `clang` on PATH, tried with both target spellings (a `zig cc` wrapper named clang takes only zig's), then the
  ziglang package's. DeviceUnavailable saying what each one answered, or what to install when there is none."""
  arch = arch or host_arch()
  system, zig = shutil.which("clang"), _ziglang_command()
  candidates = ([([system], "system"), ([system], "zig")] if system else []) + ([(zig, "zig")] if zig else [])
  if not candidates: raise DeviceUnavailable(MISSING)
  refused = []
  for command, style in candidates:
    why = _probe(tuple(command), style, arch)
    if why is None: return command, style
    refused.append(f"`{' '.join([*command[-2:], *target_flags(style, arch, native=False)])}`: {why}")
  raise DeviceUnavailable(f"CLANG: no clang here builds {arch} ELF objects ({'; '.join(refused)}); "
                          "install clang or `pip install ziglang` (included in refimpl[clang])")


@functools.cache
def _cpu_id() -> str:
  """The host CPU's model and feature flags (what -march=native compiles for), for the cache key."""
  try:
    with open("/proc/cpuinfo") as f: lines = f.read().splitlines()
  except OSError: return platform.processor() or platform.machine()
  keep = ("model name", "flags", "Features", "CPU implementer", "CPU part")
  return "\n".join(dict.fromkeys(ln for ln in lines if ln.split(":")[0].strip() in keep))


def identity_text(version: str) -> str:
  """clang's `--version` text without its InstalledDir line: where the binary lies is not what it compiles, so two
  installs of one clang (a fresh virtual environment, the CI's clone) share the disk cache."""
  return "\n".join(ln for ln in version.splitlines() if not ln.startswith("InstalledDir:"))


@functools.cache
def clang_identity(command: tuple[str, ...]) -> str:
  """identity_text of `command --version` ("" when it does not run): what a cache key says of a clang."""
  try: res = subprocess.run([*command, "--version"], capture_output=True, timeout=COMPILE_TIMEOUT_S, check=False)
  except (OSError, subprocess.TimeoutExpired): return ""
  return identity_text(res.stdout.decode(errors="replace").strip())


def run_clang(args: list[str], src: str, timeout: float | None = COMPILE_TIMEOUT_S) -> bytes:
  """The ELF object that clang `args` (a command and its flags, without source and output) builds from `src`. It runs on a
  temporary file in its own process group (a timeout kills it and every child it started, e.g. zig's clang);
  temporary files, not stdin: zig keeps a copy of every stdin in its cache. CompileError with clang's messages and the
  numbered source; _Timeout past `timeout` (None: no limit)."""
  with tempfile.TemporaryDirectory(prefix="refimpl-clang-") as tmp:
    source, obj = os.path.join(tmp, "kernel.c"), os.path.join(tmp, "kernel.o")
    with open(source, "w") as f: f.write(src)
    proc = subprocess.Popen([*args, source, "-o", obj], stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try: _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as e:
      os.killpg(proc.pid, signal.SIGKILL)
      proc.wait()
      raise _Timeout(f"CLANG: clang took more than {timeout} s") from e
    out = pathlib.Path(obj).read_bytes() if proc.returncode == 0 and os.path.exists(obj) else b""
  if proc.returncode != 0 or not out.startswith(b"\x7fELF"):
    numbered = "\n".join(f"{n:4d} | {line}" for n, line in enumerate(src.splitlines(), 1))
    raise CompileError(f"CLANG: clang failed (exit status {proc.returncode}):\n{err.decode(errors='replace').strip()}\n"
                       f"--- source ---\n{numbered}")
  return out


class ClangCompiler(Compiler):
  """C source -> ELF relocatable object (bytes), through the disk cache. `compile_batch` builds many kernels in one call.
  `arch` (default: the host's) other than the host's gives objects for that machine, for inspection (tests), not to run."""
  def __init__(self, command: list[str] | None = None, kind: str | None = None, arch: str | None = None, native: bool = True):
    self.arch = arch or host_arch()
    if command is None: command, kind = find_clang(self.arch)
    self.command, self.kind = list(command), kind or "system"
    native = native and self.arch == ARCHES.get(platform.machine().lower())  # -march=native only describes the host
    self.args = [*self.command, *FLAGS, *target_flags(self.kind, self.arch, native), "-c", "-x", "c"]  # + source -o object
    self.generic_args = [*self.command, *FLAGS, *target_flags(self.kind, self.arch, False), "-c", "-x", "c"] if native else None
    try: res = subprocess.run([*self.command, "--version"], capture_output=True, timeout=COMPILE_TIMEOUT_S, check=False)
    except OSError as e: raise DeviceUnavailable(f"CLANG: cannot run {self.command[0]!r} ({e}); install clang or ziglang") from e
    if res.returncode != 0:
      raise DeviceUnavailable(f"CLANG: `{' '.join(self.command)} --version` failed: {res.stderr.decode(errors='replace')[:500]}")
    self.version = res.stdout.decode(errors="replace").strip()
    key = "\n".join([identity_text(self.version), *self.args[len(self.command):], _cpu_id() if native else ""])
    super().__init__(f"clang-{self.arch}-{hashlib.sha256(key.encode()).hexdigest()[:20]}")

  def compile(self, src: str) -> bytes:
    """The ELF object of `src`. With -march=native, a compile still running after NATIVE_TIMEOUT_S is killed and redone
    for the generic CPU (the same semantics, less tuned code), with a warning: a host-specific optimizer hang must not
    hang the backend."""
    if self.generic_args is None: return self._run(self.args, src, COMPILE_TIMEOUT_S)
    try: return self._run(self.args, src, NATIVE_TIMEOUT_S)
    except _Timeout:
      warnings.warn(f"CLANG: clang with -march=native took more than {NATIVE_TIMEOUT_S} s; compiled for the generic CPU",
                    stacklevel=2)
      return self._run(self.generic_args, src, COMPILE_TIMEOUT_S)

  def _run(self, args: list[str], src: str, timeout: float | None) -> bytes: return run_clang(args, src, timeout)

  def compile_batch(self, srcs: list[str]) -> list[bytes]:
    """One object per source, compiling every uncached source in a single clang call (their kernels must have distinct
    names; the prelude is include-guarded). Each source's cache entry holds the shared object."""
    return compile_batch_cached(self, srcs, lambda todo: self.compile("\n".join(todo)))


class ClangRenderer(CStyleRenderer):
  """C for the CLANG device: no grid, no locals; EXP2/LOG2/SIN decomposed first (the C has no libm)."""


class ClangProgram(ElfProgram):
  """An ELF object from ClangCompiler, linked by elf.py (entry = the kernel's C symbol) and mapped by CPUProgram."""
  who = "CLANG"
  def __init__(self, name: str, lib: bytes): super().__init__(kernel_symbol(name), lib)


class ClangDevice(Compiled):
  subprocess_safe = True
  def __init__(self, device: str = "CLANG"):
    super().__init__(device, MallocAllocator, ClangRenderer(device), ClangCompiler(), ClangProgram)

  def supports_dtype(self, dtype: DType) -> bool:
    """Every scalar dtype: bool, the ints, float32/64 natively; float16, bfloat16 and both fp8 formats as their bits,
    every op on them written with float32/float64 and integer ops by refimpl.lower.narrow (one rounding per op)."""
    return not isinstance(dtype, (PtrDType, ImageDType)) and dtype.count == 1 and dtype != dtypes.void
