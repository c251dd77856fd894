"""The LLVM device: render LLVM IR (llvmir.py), parse + verify + optimize it with llvmlite, emit an ELF object for the
host, link it into a flat image (elf.py) and run it with CPUProgram (W^X).

Compilation (LLVMCompiler.compile), all in process through llvmlite's bindings:
  parse + verify   llvm.parse_assembly and ModuleRef.verify; either one's RuntimeError becomes a CompileError carrying
                   LLVM's message and the offending line of the IR (parse errors name it; for verifier errors the line
                   quoted in the message is looked up in the source), so a malformed module never reaches the optimizer.
  optimize         the new pass manager's default pipeline at the chosen level (PassBuilder, with the target machine's
                   cost model; loop and SLP vectorization on at O2 and above, as clang does). O0 runs the O0 pipeline
                   (the always-inliner only).
  emit             TargetMachine.emit_object for the host: the process triple, the host CPU and its features, PIC
                   relocations, the small code model, the same codegen optimization level.
  no fast math     the renderer writes no fast-math flags and the target machine keeps LLVM's default FP options
                   (no unsafe math, FP contraction only where `contract` flags ask for it -- there are none).
The optimization level: LLVMDevice(opt=N), else the device name's suffix ("LLVM:O0" .. "LLVM:O3", so Device["LLVM:O0"] is
the unoptimized twin of Device["LLVM"]), else env LLVM_OPT, else 2.
The disk cache key names llvmlite's and LLVM's versions, the optimization level, the triple and the CPU with its features.

No grid: the runner lowers grid programs to loops (refimpl.lower.lower_grid_to_loops); no locals beyond function-scope
arrays (like CLANG). EXP2/LOG2/SIN are decomposed by refimpl.lower.transcendental before rendering.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
from typing import Any

from refimpl.backends.elf import ElfProgram
from refimpl.backends.llvmir import LLVMRenderer
from refimpl.device import Compiled, Compiler, DeviceUnavailable, MallocAllocator, compile_batch_cached
from refimpl.dtype import DType, ImageDType, PtrDType, dtypes
from refimpl.errors import CompileError

MISSING = "LLVM: llvmlite is not installed; pip install llvmlite (included in refimpl[llvm])"
DEFAULT_OPT = 2


def _llvm() -> Any:
  """llvmlite.binding with the native target initialised; DeviceUnavailable (what to install) without llvmlite."""
  try:
    import llvmlite.binding as llvm
  except ImportError as e: raise DeviceUnavailable(MISSING) from e
  _initialize(llvm)
  return llvm

@functools.cache
def _initialize(llvm: Any) -> None:
  llvm.initialize_native_target()
  llvm.initialize_native_asmprinter()


def opt_level(device: str = "LLVM", opt: int | None = None) -> int:
  """The optimization level: `opt`, else the device name's ":O<n>" suffix, else env LLVM_OPT, else 2 (see the module
  docstring). ValueError for anything but 0, 1, 2, 3."""
  if opt is None:
    m = re.fullmatch(r"[^:]*:[oO]([0-9]+)", device)
    text = m.group(1) if m else os.environ.get("LLVM_OPT", str(DEFAULT_OPT))
    where = f"device name {device!r}" if m else "env LLVM_OPT"
    try: opt = int(text)
    except ValueError: raise ValueError(f"LLVM: optimization level must be 0, 1, 2 or 3; {where} gives {text!r}") from None
  if opt not in (0, 1, 2, 3): raise ValueError(f"LLVM: optimization level must be 0, 1, 2 or 3, got {opt!r}")
  return opt


def _offending_line(msg: str, src: str) -> int | None:
  """The 1-based line of `src` an LLVM message points at: "<string>:LINE:COL:" for parse errors, else the first line of
  the message that appears verbatim in the source (the verifier prints the instructions at fault)."""
  m = re.search(r"<string>:(\d+):\d+:", msg)
  if m: return int(m.group(1))
  lines = [ln.strip() for ln in src.splitlines()]
  for cand in (ln.strip() for ln in msg.splitlines()):
    if len(cand) > 3 and cand in lines: return lines.index(cand) + 1
  return None


class LLVMCompiler(Compiler):
  """LLVM IR text -> ELF relocatable object (bytes) for the host, through the disk cache. See the module docstring."""
  def __init__(self, opt: int = DEFAULT_OPT):
    llvm = _llvm()
    import llvmlite
    self.llvm, self.opt = llvm, opt_level(opt=opt)
    self.triple = llvm.get_process_triple()
    self.cpu, self.features = llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()
    target = llvm.Target.from_triple(self.triple)
    self.tm = target.create_target_machine(cpu=self.cpu, features=self.features, opt=self.opt, reloc="pic", codemodel="small")
    self.version = f"llvmlite {llvmlite.__version__}, LLVM {'.'.join(map(str, llvm.llvm_version_info))}"
    key = "\n".join([self.version, f"O{self.opt}", "pic", "small", self.triple, self.cpu, self.features])
    super().__init__(f"llvm-O{self.opt}-{hashlib.sha256(key.encode()).hexdigest()[:20]}")

  @property
  def rounds_natively(self) -> bool:
    """The target has a round-toward-zero instruction, so llvm.trunc is no libm call: aarch64 (frintz), x86-64 with
    SSE4.1 (roundss/roundsd)."""
    return self.triple.startswith(("aarch64", "arm64")) or "+sse4.1" in self.features.split(",")

  def _error(self, what: str, e: Exception, src: str) -> CompileError:
    msg = str(e).strip()
    line = _offending_line(msg, src)
    at = ""
    if line is not None:
      lines = src.splitlines()
      context = range(max(1, line - 2), min(len(lines), line + 2) + 1)
      at = f"\n--- at line {line} ---\n" + "\n".join(f"{'>' if n == line else ' '}{n:4d} | {lines[n - 1]}" for n in context)
    return CompileError(f"LLVM: {what} failed: {msg}{at}")

  def parse(self, src: str) -> Any:
    """The parsed and verified llvmlite ModuleRef of `src` (CompileError when LLVM rejects it)."""
    try: mod = self.llvm.parse_assembly(src)
    except RuntimeError as e: raise self._error("parsing the IR", e, src) from None
    try: mod.verify()
    except RuntimeError as e: raise self._error("verifying the IR", e, src) from None
    return mod

  def optimize(self, mod: Any) -> Any:
    """`mod` for the host (triple, data layout), run through the pipeline of the optimization level (in place)."""
    llvm = self.llvm
    mod.triple, mod.data_layout = self.triple, str(self.tm.target_data)
    pto = llvm.create_pipeline_tuning_options(speed_level=self.opt)
    pto.loop_vectorization = pto.slp_vectorization = self.opt >= 2
    pb = llvm.create_pass_builder(self.tm, pto)
    pb.getModulePassManager().run(mod, pb)
    return mod

  def module(self, src: str) -> Any:
    """The parsed, verified and optimized llvmlite ModuleRef of `src` (CompileError when LLVM rejects it)."""
    return self.optimize(self.parse(src))

  def compile(self, src: str) -> bytes: return self.tm.emit_object(self.module(src))

  def compile_batch(self, srcs: list[str]) -> list[bytes]:
    """One object per source, every uncached source in one module: each parsed and verified alone (an error names its
    own line), then linked into the first (the kernels have distinct names; each source's internal helpers are renamed
    apart by the linker, so every kernel keeps its own), optimized and emitted once. Optimizing a module of N kernels
    is optimizing each: the pipeline works function by function and no kernel calls another. Each source's cache entry
    holds the shared object."""
    return compile_batch_cached(self, srcs, self._linked_object)
  def _linked_object(self, srcs: list[str]) -> bytes:
    """The sources parsed and verified one by one, linked into one module, optimized and emitted once."""
    mods = [self.parse(s) for s in srcs]
    for m in mods[1:]:
      try: mods[0].link_in(m)
      except RuntimeError as e: raise CompileError(f"LLVM: linking the batch failed: {e}") from None
    return self.tm.emit_object(self.optimize(mods[0]))
  def optimized_ir(self, src: str) -> str: return str(self.module(src))
  def assembly(self, src: str) -> str: return self.tm.emit_assembly(self.module(src))


class LLVMProgram(ElfProgram):
  """An ELF object from LLVMCompiler, linked by elf.py (entry = the kernel's name) and mapped by CPUProgram."""
  who = "LLVM"


class LLVMDevice(Compiled):
  subprocess_safe = True
  def __init__(self, device: str = "LLVM", opt: int | None = None):
    self.opt = opt_level(device, opt)
    compiler = LLVMCompiler(self.opt)
    renderer = LLVMRenderer(device, native_trunc=compiler.rounds_natively)
    super().__init__(device, MallocAllocator, renderer, compiler, LLVMProgram)

  def supports_dtype(self, dtype: DType) -> bool:
    """Every scalar dtype: bool (i1, stored as i8), the ints, float32/64 natively; float16, bfloat16 and both fp8 formats
    as their bits, every op on them written with float32/float64 and integer ops by refimpl.lower.narrow (one rounding
    per op)."""
    return not isinstance(dtype, (PtrDType, ImageDType)) and dtype.count == 1 and dtype != dtypes.void
