"""tinygrad on the reference: a tinygrad device whose kernels run on refimpl's emulator, and a checking mode.

`install_reference_device()` adds the tinygrad device REFIMPL (tinygrad finds devices as modules
`tinygrad.runtime.ops_<name>`; this one is put in sys.modules). Its renderer is tinygrad's PYTHON renderer, so it gets the
kernels tinygrad's own emulator gets (the grid form), but instead of pickling them it translates each one with
`from_tinygrad` (verified once, kept by the device class: `Kernels`) and runs that Program with
`refimpl.emulator.machine.emulate` in strict mode, in place on the buffers (refimpl.tinygrad.program): undefined
behaviour stops the script with `KernelUndefinedBehavior` (the tinygrad kernel name, the uop, the lane, the operands). A
kernel refimpl cannot translate stops it with `TranslationError` naming the kernel and the uop. A kernel whose uops
leave its launch open (a SPECIAL sized by DEFINE_VARs: symbolic shapes; a buffer pointer with no size: hand-built
kernels) is translated at each launch instead, with that launch's dims and buffer sizes (importer rules 11 and 12),
once per distinct launch.

`check_kernels(out)` is the checking mode: while it is active, every compiled kernel that tinygrad runs on its own
device also runs on the emulator (permissive mode) with the same inputs; elements the emulator calls exact must be the
same bits. Each disagreement, and each kernel with undefined behaviour, is saved as a reproducer in `out` (a case file
that `python -m refimpl.fuzz replay` reruns).

`Session` (refimpl.tinygrad.session, shared with the 0.14 device) counts kernels, distinct kernels, disagreements and
undefined behaviour, prints progress to stderr and a summary at exit (`python -m refimpl.tinygrad run` uses both). The
REFIMPL devices hold theirs (`device_session()`); each check has its own.
"""
from __future__ import annotations

import dataclasses
import os
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from refimpl.allocation import reuse_freed_memory
from refimpl.ir import Program
from refimpl.tinygrad.program import DEVICE, KernelProgram, check_run
from refimpl.tinygrad.session import KernelUndefinedBehavior, Session
from refimpl.tinygrad.v0_10.capture import KernelRun, kernel_runs
from refimpl.tinygrad.v0_10.importer import TranslationError, from_tinygrad

# ***** the REFIMPL device *****

def _needs_launch(uops: list) -> bool:
  """Whether the kernel's uops leave its launch open: a SPECIAL of symbolic size or a global pointer with no size."""
  from tinygrad.dtype import PtrDType
  symbolic = any(u.op.name == "SPECIAL" and not isinstance(u.arg[1], int) for u in uops)
  unsized = any(u.op.name == "DEFINE_GLOBAL" and isinstance(u.dtype, PtrDType) and u.dtype.size < 1 for u in uops)
  return symbolic or unsized


@dataclass(frozen=True)
class LaunchKernel:
  """A kernel whose uops leave its launch open (`_needs_launch`): translated at each distinct launch."""
  name: str
  uops: tuple


class Kernels:
  """The kernels the REFIMPL devices of this process rendered, each under the key that is its source and its binary.

  tinygrad 0.10.1 hands a kernel from renderer to runtime only as text and bytes (Renderer.render -> str,
  Compiler.compile -> bytes, runtime(name, lib)), and hands a binary made for one device to another device of the same
  kind (engine.realize.get_runner's method cache: REFIMPL's binary runs on REFIMPL:1). So the device class holds one
  table for all its devices: the renderer puts the translated, verified Program here (a LaunchKernel for a kernel
  translated at launch) and returns its key as the source; the runtime takes the Program back by that key. The
  Program is made and verified once and never serialized. Equal kernels get one key (BEAM search tells candidates
  apart by their binaries). A kernel stays for the process's life, as tinygrad's method cache keeps its runners. A key
  names its process: one made in another (BEAM search's PARALLEL workers) is refused."""
  def __init__(self):
    self._keys: dict[Program | LaunchKernel, str] = {}
    self._kernels: dict[bytes, Program | LaunchKernel] = {}

  def key(self, kernel: Program | LaunchKernel) -> str:
    """The source text naming `kernel` (the same for an equal kernel)."""
    if kernel not in self._keys:
      self._keys[kernel] = key = f"refimpl kernel {os.getpid()}.{len(self._keys)}: {kernel.name}"
      self._kernels[key.encode()] = kernel
    return self._keys[kernel]

  def __getitem__(self, lib: bytes) -> Program | LaunchKernel:
    try: return self._kernels[bytes(lib)]
    except KeyError: raise RuntimeError(f"{DEVICE}: {bytes(lib)[:80]!r} is not a kernel a {DEVICE} device rendered in this "
                                        f"process (a binary from another process: BEAM search with PARALLEL workers)") from None


class ReferenceProgram(KernelProgram):
  """A kernel as its translated Program (or LaunchKernel); a call runs it on the emulator, strict, in place, and counts
  in the device's session (refimpl.tinygrad.program)."""
  def __init__(self, name: str, kernel: Program | LaunchKernel, session: Session):
    super().__init__(name, session)
    self.kernel = kernel
    self.launches: dict[tuple, Program] = {}

  def launched(self, bufs: tuple, global_size: tuple | None, local_size: tuple | None) -> Program:
    """The program for this launch: the translation with its dims (and buffer sizes, for a kernel translated at launch),
    made once per distinct launch, so the emulator's plan of it (machine.Plan) is made once too."""
    dims = (tuple(global_size or (1, 1, 1)), tuple(local_size or (1, 1, 1)))
    if isinstance(self.kernel, Program):
      if dims not in self.launches:
        p = self.kernel
        same = (p.global_size, p.local_size) == dims
        self.launches[dims] = p if same else dataclasses.replace(p, global_size=dims[0], local_size=dims[1])
      return self.launches[dims]
    name, uops = self.kernel.name, self.kernel.uops
    items = [u.dtype.base.itemsize for u in uops if u.op.name == "DEFINE_GLOBAL"]
    sizes = tuple(memoryview(b).nbytes // n for b, n in zip(bufs, items))
    key = (*dims, sizes)
    if key not in self.launches:
      try: self.launches[key] = from_tinygrad(list(uops), name=name, global_size=dims[0], local_size=dims[1],
                                              buffer_sizes=sizes)
      except TranslationError as e: raise self.session.untranslatable_kernel(name, e) from None
    return self.launches[key]


def _name_tensor_ops() -> None:
  """Makes undefined behaviour in a kernel run name the tinygrad Tensor ops the kernel computes, from the ExecItem's
  metadata (tinygrad records it by default): tinygrad's ExecItem.run is wrapped once."""
  from tinygrad.engine.realize import ExecItem
  if getattr(ExecItem.run, "names_tensor_ops", False): return
  original = ExecItem.run

  def run(self, *args, **kwargs):
    try: return original(self, *args, **kwargs)
    except KernelUndefinedBehavior as e:
      if self.metadata and not e.tensor_ops: e.name_tensor_ops(tuple(str(m) for m in self.metadata))
      raise

  run.names_tensor_ops = True  # type: ignore[attr-defined]
  ExecItem.run = run


def _device_class() -> type:
  """The tinygrad Compiled subclass of the REFIMPL device (built on first use: tinygrad is imported only then)."""
  from tinygrad.device import Compiled, Compiler
  from tinygrad.runtime.ops_python import PythonAllocator, PythonRenderer

  class ReferenceRenderer(PythonRenderer):
    """tinygrad's PYTHON renderer's capabilities (so the kernels are the ones tinygrad's emulator gets); renders a kernel
    as the key of its translation in the device class's Kernels. Its device is REFIMPL: a ProgramSpec it makes
    (Kernel.to_program) names the device whose runtime takes that key."""
    device = DEVICE
    def render(self, name: str, uops: list) -> str:
      if _needs_launch(uops): return RefimplDevice.kernels.key(LaunchKernel(name, tuple(uops)))
      try: return RefimplDevice.kernels.key(from_tinygrad(uops, name=name))
      except TranslationError as e: raise RefimplDevice.session.untranslatable_kernel(name, e) from None

  class ReferenceCompiler(Compiler):
    def __init__(self): super().__init__(None)  # nothing to cache: the "binary" is the kernel's key, encoded
    def compile(self, src: str) -> bytes: return src.encode()

  class RefimplDevice(Compiled):
    """Every REFIMPL device (REFIMPL, REFIMPL:1, ...) shares the class's kernels (Kernels) and its session."""
    kernels = Kernels()
    session = Session()

    def __init__(self, device: str):
      reuse_freed_memory()  # a run allocates an array per value: keep freed blocks for the next (refimpl.allocation)
      super().__init__(device, PythonAllocator(), ReferenceRenderer(), ReferenceCompiler(), self.program)

    def program(self, name: str, lib: bytes) -> ReferenceProgram:
      """The runtime: the kernel the renderer keyed `lib`, as a program of this device's session."""
      return ReferenceProgram(name, self.kernels[lib], self.session)

  return RefimplDevice


def install_reference_device(default: bool = False) -> str:
  """Makes `Device["REFIMPL"]` a tinygrad device (and the default one when `default`); returns its name. REFIMPL=1 in
  the environment also selects it, when tinygrad has not chosen its default device yet."""
  from tinygrad.device import Device
  name = f"tinygrad.runtime.ops_{DEVICE.lower()}"
  if name not in sys.modules:
    module = types.ModuleType(name, "refimpl's reference device for tinygrad (see refimpl.tinygrad.v0_10.reference)")
    module.RefimplDevice = _device_class()
    sys.modules[name] = module
  if DEVICE not in Device._devices: Device._devices.append(DEVICE)
  _name_tensor_ops()
  if default: Device.DEFAULT = DEVICE
  return DEVICE


def device_session() -> Session:
  """The session of the REFIMPL devices (every REFIMPL:n shares it), installing the device first: what their kernels
  ran, the undefined behaviour they met, where a reproducer of it goes (`save_undefined`)."""
  install_reference_device()
  return sys.modules[f"tinygrad.runtime.ops_{DEVICE.lower()}"].RefimplDevice.session


# ***** checking mode: tinygrad's own device against the emulator *****

@contextmanager
def check_kernels(out: Path, device: str, session: Session | None = None) -> Iterator[Session]:
  """While active, every compiled kernel tinygrad runs is also run on the emulator and compared (module docstring);
  `session` (a new one when None) counts them."""
  session = Session() if session is None else session
  def check(r: KernelRun) -> None:
    name = r.spec.function_name
    if r.translation is None: session.untranslatable[name] = str(r.error)
    else: check_run(session, out, device, name, r.translation.program, r.before, r.after, r.vals)

  with kernel_runs(check): yield session
