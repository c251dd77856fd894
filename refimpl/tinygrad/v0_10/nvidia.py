"""tinygrad 0.10.1's CUDA and PTX toolchains on refimpl programs, without a GPU: TINYGRAD:CUDA's CUDARenderer ->
CUDACompiler (CUDA C -> PTX through NVRTC) and TINYGRAD:PTX's PTXRenderer -> NVPTXCompiler (PTX -> cubin through
nvJitLink: tinygrad's PTXCompiler only fills in the PTX header, so the PTX is assembled here as tinygrad's NV device
does). Used by the compile tests (spec_tests/test_backend_cuda.py) and bench/gpu_check.py.

The libraries are the PyPI wheels of refimpl[cuda] (nvidia-cuda-nvrtc-cu12, nvidia-nvjitlink-cu12). tinygrad's bindings
(tinygrad.runtime.autogen.nvrtc) open them with ctypes.util.find_library('nvrtc') / ('nvJitLink'), which finds only
unversioned libraries on the linker's paths (none in a venv). `load_bindings` imports that module with find_library
answering the wheels' files (by path: no symlinks, no LD_LIBRARY_PATH, no root); the module keeps its handles.

A program goes to tinygrad as refimpl.tinygrad.v0_10.backend sends any (refimpl.tinygrad.v0_10.exporter.to_tinygrad
with tinygrad's final rewrites for the renderer); what tinygrad 0.10.1 has no form for (WMMA, fp8) raises the
exporter's ExportError.
"""
from __future__ import annotations

import ctypes.util
import importlib
import importlib.util
import pathlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from refimpl.ir import Program
from refimpl.lower import lower_for
from refimpl.renderer import Renderer

ARCH = "sm_80"        # the architecture the compile tests target (tinygrad's CUDA device would take the GPU's)
KINDS = ("CUDA", "PTX")
WHEEL_LIBS = {"nvrtc": ("nvidia.cuda_nvrtc", "libnvrtc.so.*"), "nvJitLink": ("nvidia.nvjitlink", "libnvJitLink.so.*")}
MISSING = "install the NVIDIA wheels: pip install 'refimpl[cuda]' (nvidia-cuda-nvrtc-cu12, nvidia-nvjitlink-cu12)"


def wheel_library(name: str) -> str | None:
  """The path of library `name` ("nvrtc", "nvJitLink") inside its installed wheel, or None."""
  package, pattern = WHEEL_LIBS[name]
  try: spec = importlib.util.find_spec(package)
  except ImportError: return None
  for d in (spec.submodule_search_locations or []) if spec is not None else []:
    libs = sorted(p for p in (pathlib.Path(d) / "lib").glob(pattern) if ".alt." not in p.name)
    if libs: return str(libs[0])
  return None

@contextmanager
def _find_library_in_wheels() -> Iterator[None]:
  """ctypes.util.find_library answers the wheels' libraries while the block runs (the rest as before)."""
  original = ctypes.util.find_library
  def find(name: str) -> str | None: return (wheel_library(name) if name in WHEEL_LIBS else None) or original(name)
  ctypes.util.find_library = find
  try: yield
  finally: ctypes.util.find_library = original

def load_bindings() -> Any:
  """tinygrad.runtime.autogen.nvrtc bound to the wheels' libnvrtc and libnvJitLink; RuntimeError saying what to install
  when either is missing. A copy imported earlier without them is imported again."""
  missing = [n for n in WHEEL_LIBS if wheel_library(n) is None]
  if missing: raise RuntimeError(f"no {', '.join(missing)} library: {MISSING}")
  name = "tinygrad.runtime.autogen.nvrtc"
  with _find_library_in_wheels():
    module = sys.modules.get(name)
    if module is not None and not hasattr(module, "nvJitLinkCreate"): module = importlib.reload(module)
    elif module is None: module = importlib.import_module(name)
  if not hasattr(module, "nvrtcCompileProgram") or not hasattr(module, "nvJitLinkCreate"):
    raise RuntimeError(f"tinygrad's NVRTC / nvJitLink bindings did not bind: {MISSING}")
  return module


def toolchain(kind: str, arch: str = ARCH) -> tuple[Any, Any]:
  """(tinygrad's renderer, tinygrad's compiler) of TINYGRAD:<kind> for `arch`: CUDA is CUDARenderer + CUDACompiler
  (to PTX), PTX is PTXRenderer + NVPTXCompiler (to a cubin)."""
  load_bindings()
  from tinygrad.renderer.cstyle import CUDARenderer
  from tinygrad.renderer.ptx import PTXRenderer
  from tinygrad.runtime.support.compiler_cuda import CUDACompiler, NVPTXCompiler
  if kind == "CUDA": return CUDARenderer(arch), CUDACompiler(arch)
  if kind == "PTX": return PTXRenderer(arch), NVPTXCompiler(arch)
  raise ValueError(f"TINYGRAD:{kind}: the NVIDIA kinds are {', '.join(KINDS)}")


def capabilities(kind: str, tg_renderer: Any) -> Renderer:
  """What TINYGRAD:<kind> takes, for refimpl.lower.lower_for: a grid and shared memory within tinygrad's CUDA limits;
  every op native (tinygrad's own late rewrites decompose what its renderer lacks, in the exporter)."""
  return Renderer(f"TINYGRAD:{kind}", has_local=True, has_shared=True, global_max=tuple(tg_renderer.global_max),
                  local_max=tuple(tg_renderer.local_max))


def render(program: Program, kind: str, tg_renderer: Any, name: str) -> str:
  """The source tinygrad renders for `program` as kernel `name` (ExportError for what tinygrad has no form for,
  ProgramError for what is beyond its limits)."""
  from refimpl.tinygrad.names import kernel_name
  from refimpl.tinygrad.v0_10.exporter import to_tinygrad
  lowered = lower_for(program, capabilities(kind, tg_renderer))
  return tg_renderer.render(kernel_name(name), to_tinygrad(lowered, tg_renderer))


def one_translation_unit(sources: list[str]) -> str:
  """tinygrad CUDA C sources as one source, so that NVRTC starts once for many kernels: the preprocessor lines
  (#include, #define) of all of them first, each once, then each source's code in a namespace of its own (its helper
  structs and functions stay apart; extern "C" kernels keep their plain names, which must differ)."""
  head: dict[str, None] = {}
  bodies = []
  for k, src in enumerate(sources):
    lines = src.splitlines()
    head.update(dict.fromkeys(ln for ln in lines if ln.lstrip().startswith("#")))
    bodies.append(f"namespace rf_k{k} {{\n" + "\n".join(ln for ln in lines if not ln.lstrip().startswith("#")) + "\n}")
  return "\n".join([*head, *bodies]) + "\n"


PTX_HEADER = (".version", ".target", ".address_size")

def one_ptx_module(sources: list[str]) -> str:
  """tinygrad PTX sources as one module (one nvJitLink run for many kernels): the first one's header (.version,
  .target, .address_size), then every source's entries (their names must differ; tinygrad declares nothing at module
  scope)."""
  lines = [ln for ln in sources[0].splitlines() if ln.startswith(PTX_HEADER)]
  for src in sources: lines += [ln for ln in src.splitlines() if not ln.startswith(PTX_HEADER)]
  return "\n".join(lines) + "\n"


def failures(compile_many: Any, compile_one: Any, sources: list[str], batch: int = 200) -> dict[int, str]:
  """{index: error text} of the sources that do not compile by themselves (compile_one(source)): compile_many(list of
  sources) compiles them together; a batch that fails is halved until each failing source stands alone, which is then
  compiled as it is (few fail, so the compiler still starts few times)."""
  out: dict[int, str] = {}
  def run(lo: int, hi: int) -> None:
    try: compile_many(sources[lo:hi]) if hi - lo > 1 else compile_one(sources[lo])
    except Exception as e:
      if hi - lo == 1: out[lo] = f"{type(e).__name__}: {e}"
      else:
        mid = (lo + hi) // 2
        run(lo, mid)
        run(mid, hi)
  for start in range(0, len(sources), batch): run(start, min(start + batch, len(sources)))
  return out
