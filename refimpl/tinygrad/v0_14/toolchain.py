"""Make tinygrad 0.14's CPU device find a clang here: the one refimpl's CLANG backend uses (a `clang` on PATH, else the
clang of pip's ziglang package, refimpl[clang]), without root and without changing PATH.

  prepare_cpu()  idempotent; call it before tinygrad 0.14 compiles for its CPU device. Returns None when the device
                 works here, else one line saying why not and what to install.
  prepare_cl()   idempotent; makes tinygrad 0.14's CL device load the OpenCL ICD loader pyopencl ships (with its PoCL)
                 where it finds none of its own. None when the device opens, else why not and what to install.
  prepare_device(d)  (the name tinygrad 0.14 opens `d` by, None or why not): CPU's clang or CL's OpenCL prepared, a
                 porter's module:Class registered (refimpl.tinygrad.v0_14.porter).
  use_device(d)  makes tinygrad 0.14's device `d` (CPU, CL, ..., or a porter's module:Class) the default (DEV),
                 preparing CPU's clang or CL's OpenCL first; None, or why not.

CL: tinygrad 0.14 loads OpenCL with its own finder (tinygrad.runtime.support.c.DLL: $OPENCL_PATH, else libOpenCL in
LD_LIBRARY_PATH, /usr/lib64, /usr/lib, /usr/local/lib). On a machine with only pip's OpenCL there is none; pyopencl's
wheel bundles an ICD loader and PoCL, and its loader works once pyopencl is imported (which sets PYOPENCL_HOME, where
the loader finds the PoCL beside it: refimpl.tinygrad.v0_10.toolchain says how that was found). So prepare_cl imports
pyopencl and sets OPENCL_PATH (for this process and its children; not when the user set it) to the loader pyopencl
loaded (refimpl.tinygrad.shared_toolchain.pyopencl_libopencl), unless tinygrad's finder finds a libOpenCL of its own.

How tinygrad 0.14 calls clang (tinygrad/runtime/support/compiler_cpu.py, ClangCompiler.compile): it runs
`getenv("CC", "clang")` (tinygrad's getenv, cached per process) as
`CC -c -x c -O2 -fPIC -ffreestanding -fno-math-errno -nostdlib -fno-ident --target={arch}-none-unknown-elf -march=native
- -o -` (the source on stdin, the object on stdout), and loads the object with its own ELF loader (jit_loader). It
compiles in spawned worker processes (tinygrad.engine.worker, PARALLEL), which inherit the environment but not a patch
of a Python class, so the change is made through CC, for this process and its children only:

- A `clang` on PATH that builds tinygrad's objects (refimpl.backends.ops_clang.find_clang, "system" style), or a CC the
  user set: nothing is changed.
- Otherwise, with zig's clang (ziglang), CC becomes a small shell script in a temporary folder (removed at exit) that
  runs `python -m refimpl.tinygrad.v0_14.toolchain --zig ZIG -- ARGS` (`cc_main`): tinygrad's arguments with the changes
  refimpl.tinygrad.v0_10.toolchain measured for tinygrad 0.10.1 with zig (its docstring says why each): the target triple
  spelled for zig (`-target {arch}-linux-none`), `-g0` and no unwind tables (tinygrad's ELF loader mishandles zig's
  debug and .eh_frame relocations); the source goes through a temporary file (zig keeps a copy of every stdin in its
  cache), in its own process group with refimpl's compile time limit (refimpl.backends.ops_clang.run_clang).
"""
from __future__ import annotations

import atexit
import importlib
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

from refimpl.tinygrad.shared_toolchain import ZIG_EXTRA_FLAGS

CLANG_PROBE = "void tg_probe(int* restrict o) { o[0] = 1; }"
ROOT = Path(__file__).resolve().parents[3]  # the folder holding the refimpl package
_RESULT: list[str | None] = []


def prepare_cpu() -> str | None:
  """Makes tinygrad 0.14's CPU compiler find a clang (module docstring), once per process; None when it compiles and
  loads a trivial kernel, else why not."""
  if not _RESULT: _RESULT.append(_prepare())
  return _RESULT[0]


def _prepare() -> str | None:
  from refimpl.backends import ops_clang
  from refimpl.device import DeviceUnavailable
  if "CC" not in os.environ:
    try: command, style = ops_clang.find_clang()
    except DeviceUnavailable as e: return _line(f"CPU: {e}")
    if style == "zig": _use_zig(command)
  return _probe()


def _use_zig(command: list[str]) -> None:
  """Points tinygrad's CC (this process and its children) at a script running cc_main with zig's `command`."""
  folder = tempfile.mkdtemp(prefix="refimpl-cc-")
  atexit.register(shutil.rmtree, folder, True)
  script = Path(folder) / "clang"
  path = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
  script.write_text(f"#!/bin/sh\nPYTHONPATH={shlex.quote(path)} exec {shlex.quote(sys.executable)} -m "
                    f"refimpl.tinygrad.v0_14.toolchain --zig {shlex.quote(shlex.join(command))} -- \"$@\"\n")
  script.chmod(0o700)
  os.environ["CC"] = str(script)
  from tinygrad.helpers import getenv
  getenv.cache_clear()  # tinygrad's getenv caches CC


def _probe() -> str | None:
  """None when tinygrad 0.14's ClangCompiler builds, and its ELF loader loads, a trivial kernel; else why not."""
  try:
    from tinygrad.runtime.support.compiler_cpu import ClangCompiler
    from tinygrad.runtime.support.elf import jit_loader

    from refimpl.backends.ops_clang import host_arch
    jit_loader(ClangCompiler([host_arch(), "native"]).compile(CLANG_PROBE))
  except Exception as e:  # any failure is the reason
    why = f"{type(e).__name__}: {e}"
    if isinstance(e, FileNotFoundError): why += "; install clang, or `pip install ziglang` (refimpl[clang])"
    return _line(f"CPU: tinygrad 0.14's clang compile (CC={os.environ.get('CC', 'clang')}) fails: {why}")[:500]
  return None


def prepare_cl() -> str | None:
  """Makes tinygrad 0.14's CL device find an OpenCL loader (module docstring); None, or why not and what to install."""
  if "OPENCL_PATH" not in os.environ and "tinygrad.runtime.autogen.opencl" not in sys.modules:
    from tinygrad.runtime.support.c import DLL
    if DLL.findlib("opencl", ["OpenCL"]) is None:
      try: pyopencl = importlib.import_module("pyopencl")
      except ImportError as e:
        return _line(f"CL: no libOpenCL found and pyopencl does not import ({e}); pip install pyopencl "
                     "pocl-binary-distribution (refimpl[gpu]), or install an OpenCL driver")
      from refimpl.tinygrad.shared_toolchain import pyopencl_libopencl
      lib = pyopencl_libopencl(pyopencl)
      if lib is None: return "CL: pyopencl imports but its libOpenCL is not found; reinstall pyopencl"
      os.environ["OPENCL_PATH"] = lib
      from tinygrad.helpers import getenv
      getenv.cache_clear()  # tinygrad's getenv caches OPENCL_PATH
  return None


def prepare_device(device: str) -> tuple[str, str | None]:
  """(the name tinygrad 0.14 opens `device` by, None or why it cannot run here): a porter's `module:Class` registered
  first (refimpl.tinygrad.v0_14.porter) with tinygrad's clang prepared as for CPU, which a C device may compile with;
  tinygrad's CPU with prepare_cpu, its CL with prepare_cl, any other device as it is."""
  from refimpl.tinygrad.v0_14 import porter
  if porter.names_a_class(device):
    try: return porter.register(device), prepare_cpu()
    except porter.PorterDeviceError as e: return device, str(e)
  name = device.upper()
  prepare = {"CPU": prepare_cpu, "CL": prepare_cl}.get(name.split(":")[0])
  return name, prepare() if prepare is not None else None


def use_device(device: str) -> str | None:
  """Makes tinygrad 0.14's `device` (prepare_device) the default one (DEV, also for its compile workers); None when the
  device opens, else one line saying why not."""
  device, why = prepare_device(device)
  if why is not None: return why
  from tinygrad.device import Device
  from tinygrad.helpers import DEV
  try: Device[device]
  except Exception as e: return _line(f"{device}: {type(e).__name__}: {e}")[:500]
  DEV.value = device
  os.environ["DEV"] = device  # tinygrad's spawned compile workers read it
  return None


def _line(text: str) -> str:
  return " ".join(text.split())


def zig_args(args: list[str]) -> list[str]:
  """tinygrad 0.14's clang arguments (without `- -o -`) spelled for zig cc: `--target={arch}-none-unknown-elf` becomes
  `-target {arch}-linux-none`, and ZIG_EXTRA_FLAGS are added (module docstring)."""
  out: list[str] = []
  for a in args:
    if a.startswith("--target="): out += ["-target", f"{a.removeprefix('--target=').split('-')[0]}-linux-none"]
    else: out.append(a)
  return [*out, *ZIG_EXTRA_FLAGS]


def cc_main(argv: list[str]) -> int:
  """`--zig "ZIG cc" -- ARGS`: tinygrad's clang call (ARGS end with `- -o -`: stdin to stdout) through zig cc."""
  from refimpl.backends.ops_clang import run_clang
  from refimpl.device import CompileError
  if len(argv) < 3 or argv[0] != "--zig" or argv[2] != "--": raise SystemExit("usage: --zig 'ZIG cc' -- CLANG-ARGS")
  args = argv[3:]
  if args[-3:] != ["-", "-o", "-"]:
    print(f"refimpl.tinygrad.v0_14.toolchain: expected tinygrad's `- -o -` (stdin to stdout), got {args[-3:]}", file=sys.stderr)
    return 2
  try: obj = run_clang([*shlex.split(argv[1]), *zig_args(args[:-3])], sys.stdin.read())
  except CompileError as e:
    print(e, file=sys.stderr)
    return 1
  sys.stdout.buffer.write(obj)
  return 0


if __name__ == "__main__":
  sys.exit(cc_main(sys.argv[1:]))
