"""Where a published page comes from: the commit, the date, the command and the toolchains that made it.

`provenance(command)` gathers it once per run (each page's generator stores it in the page's JSON and shows it on the
page: report_html.provenance_html). Every subprocess runs as an argument list; a tool that is not installed or does
not answer is "not found" with the reason, never an error.
"""
from __future__ import annotations

import datetime
import importlib.metadata
import platform
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _git(*args: str) -> str:
  try: res = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=30, check=False)
  except (OSError, subprocess.TimeoutExpired): return ""
  return res.stdout.strip() if res.returncode == 0 else ""


def commit() -> str:
  """The refimpl commit the page was made from ("COMMIT+changes" when tracked files under refimpl/ differ from it)."""
  head = _git("rev-parse", "--short=12", "HEAD")
  if not head: return "unknown (not a git checkout)"
  return head + ("+changes" if _git("status", "--porcelain", "--untracked-files=no", "--", "refimpl") else "")


def _package(name: str) -> str:
  try: return importlib.metadata.version(name)
  except importlib.metadata.PackageNotFoundError: return "not installed"


def _clang() -> str:
  from refimpl.backends import ops_clang
  try:
    command = ops_clang.find_clang()[0]
    res = subprocess.run([*command, "--version"], capture_output=True, text=True, timeout=60, check=False)
    first = (res.stdout.strip().splitlines() or ["?"])[0]
    return f"{' '.join([Path(command[0]).name, *command[1:]])}: {first}"
  except Exception as e:  # no clang here: the page says so
    return f"not found ({type(e).__name__})"


def _opencl() -> str:
  try:
    import pyopencl as cl
    return "; ".join(f"{p.version.split('  ')[0]} ({', '.join(d.name for d in p.get_devices())})" for p in cl.get_platforms())
  except Exception as e:  # no OpenCL platform here
    return f"not found ({type(e).__name__})"


def _vulkan() -> str:
  try:
    import wgpu
    info = wgpu.gpu.request_adapter_sync(power_preference="high-performance").info
    return f"{info['device']}, {info['description']} ({info['backend_type']})"
  except Exception as e:  # no Vulkan driver here
    return f"not found ({type(e).__name__})"


def tools() -> dict[str, str]:
  """The toolchains behind the backends, name -> version, as found on this machine."""
  try:
    import llvmlite.binding as llvm
    llvm_version = ".".join(map(str, llvm.llvm_version_info))
  except Exception:  # llvmlite missing
    llvm_version = "not installed"
  return {"python": platform.python_version(), "numpy": _package("numpy"), "tinygrad": _package("tinygrad"),
          "clang (CLANG)": _clang(), "llvmlite (LLVM)": f"{_package('llvmlite')}, LLVM {llvm_version}",
          "pyopencl (GPU)": _package("pyopencl"), "OpenCL platforms (GPU)": _opencl(),
          "wgpu (WEBGPU)": _package("wgpu"), "Vulkan adapter (WEBGPU)": _vulkan(), "os": platform.platform()}


def provenance(command: str, with_tools: bool = True) -> dict:
  """{command, commit, date (UTC), tools} of a page made now by `command`."""
  now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
  return {"command": command, "commit": commit(), "date": now, "tools": tools() if with_tools else {}}
