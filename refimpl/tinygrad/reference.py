"""tinygrad on the reference: a tinygrad device whose kernels run on refimpl's emulator, and a checking mode.

`install_reference_device()` adds the tinygrad device REFIMPL (tinygrad finds devices as modules
`tinygrad.runtime.ops_<name>`; this one is put in sys.modules). Its renderer is tinygrad's PYTHON renderer, so it gets the
kernels tinygrad's own emulator gets (the grid form), but instead of pickling them it translates each one with
`from_tinygrad` and runs it with `refimpl.emulator.machine.emulate` in strict mode, in place on the buffers: undefined
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
undefined behaviour, prints progress to stderr and a summary at exit (`python -m refimpl.tinygrad run` uses both).
"""
from __future__ import annotations

import dataclasses
import sys
import time
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from refimpl.allocation import reuse_freed_memory
from refimpl.dtype import to_np
from refimpl.emulator.certainty import is_one_value
from refimpl.emulator.machine import emulate
from refimpl.errors import UndefinedBehavior
from refimpl.ir import Program, program_from_json, program_to_json
from refimpl.testing.compare import same_value
from refimpl.tinygrad.capture import KernelRun, kernel_runs
from refimpl.tinygrad.cases import case_finding, save_case
from refimpl.tinygrad.importer import TranslationError, from_tinygrad
from refimpl.tinygrad.session import SESSION, KernelUndefinedBehavior, Session

DEVICE = "REFIMPL"


# ***** the REFIMPL device *****

def _arrays(program: Program, bufs: tuple) -> list[np.ndarray]:
  """The device's buffers (writable memoryviews) as numpy arrays of the kernel's buffer dtypes and declared sizes."""
  out = []
  for mv, k in zip(bufs, sorted(program.buffers)):
    ptr = program.buffers[k]
    out.append(np.frombuffer(mv, dtype=to_np(ptr.base))[:ptr.size])
  return out


AT_LAUNCH = "refimpl-at-launch:"  # the "binary" of a kernel translated at each launch: this prefix and its key
_LAUNCH_KERNELS: dict[str, tuple[str, list]] = {}  # key -> (kernel name, tinygrad uops), for this process's programs

def _needs_launch(uops: list) -> bool:
  """Whether the kernel's uops leave its launch open: a SPECIAL of symbolic size or a global pointer with no size."""
  from tinygrad.dtype import PtrDType
  symbolic = any(u.op.name == "SPECIAL" and not isinstance(u.arg[1], int) for u in uops)
  unsized = any(u.op.name == "DEFINE_GLOBAL" and isinstance(u.dtype, PtrDType) and u.dtype.size < 1 for u in uops)
  return symbolic or unsized


class ReferenceProgram:
  """A translated kernel (the program's JSON is the "binary"); a call runs it on the emulator, strict, in place. A
  kernel translated at launch (AT_LAUNCH) is translated with each distinct launch's dims and buffer sizes."""
  def __init__(self, name: str, lib: bytes):
    text = lib.decode()
    self.name, self.at_launch = name, None
    if text.startswith(AT_LAUNCH): self.at_launch, self.program = _LAUNCH_KERNELS[text[len(AT_LAUNCH):]], None
    else: self.program = program_from_json(text)
    self.launches: dict[tuple, Program] = {}

  def launched(self, bufs: tuple, global_size: tuple, local_size: tuple) -> Program:
    """The program for this launch: the translation with its dims (and buffer sizes, for a kernel translated at launch),
    made once per distinct launch, so the emulator's plan of it (machine.Plan) is made once too."""
    if self.at_launch is None:
      if (global_size, local_size) not in self.launches:
        self.launches[(global_size, local_size)] = dataclasses.replace(self.program, global_size=global_size,
                                                                       local_size=local_size)
      return self.launches[(global_size, local_size)]
    name, uops = self.at_launch
    items = [u.dtype.base.itemsize for u in uops if u.op.name == "DEFINE_GLOBAL"]
    sizes = tuple(memoryview(b).nbytes // n for b, n in zip(bufs, items))
    key = (global_size, local_size, sizes)
    if key not in self.launches:
      try: self.launches[key] = from_tinygrad(uops, name=name, global_size=global_size, local_size=local_size,
                                              buffer_sizes=sizes)
      except TranslationError as e:
        SESSION.untranslatable[name] = str(e)
        raise TranslationError(e.index, e.op, f"{e.why} (tinygrad kernel {name})") from None
    return self.launches[key]

  def __call__(self, *bufs, global_size=(1, 1, 1), local_size=(1, 1, 1), vals=(), wait=False):
    start = time.perf_counter()
    p = self.launched(bufs, tuple(global_size), tuple(local_size))
    arrays = _arrays(p, bufs)
    before = [a.copy() for a in arrays] if SESSION.save_undefined is not None else None
    try: emulate(p, arrays, vals=tuple(vals), strict=True, inplace=True)
    except UndefinedBehavior as e:
      saved = ""
      if before is not None:
        path = save_case(SESSION.save_undefined, case_finding(p, before, tuple(vals), DEVICE, self.name, detail=str(e)))
        saved = f" (reproducer: python -m refimpl.fuzz replay {path})"
      SESSION.undefined.append(f"{self.name}: {e}{saved}")
      raise KernelUndefinedBehavior(self.name, e, saved) from None
    SESSION.ran(self.name)
    return time.perf_counter() - start if wait else None


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
    """tinygrad's PYTHON renderer's capabilities (so the kernels are the ones tinygrad's emulator gets); renders the
    translated refimpl program as its JSON form. Its device is REFIMPL: a ProgramSpec it makes (Kernel.to_program)
    names the device whose compiler and runtime take that JSON."""
    device = DEVICE
    def render(self, name: str, uops: list) -> str:
      if _needs_launch(uops):
        key = f"{len(_LAUNCH_KERNELS)}:{name}"
        _LAUNCH_KERNELS[key] = (name, list(uops))
        return AT_LAUNCH + key
      try: return program_to_json(from_tinygrad(uops, name=name))
      except TranslationError as e:
        SESSION.untranslatable[name] = str(e)
        raise TranslationError(e.index, e.op, f"{e.why} (tinygrad kernel {name})") from None

  class ReferenceCompiler(Compiler):
    def __init__(self): super().__init__(None)  # nothing to cache: "compiling" is encoding the JSON
    def compile(self, src: str) -> bytes: return src.encode()

  class RefimplDevice(Compiled):
    def __init__(self, device: str):
      reuse_freed_memory()  # a run allocates an array per value: keep freed blocks for the next (refimpl.allocation)
      super().__init__(device, PythonAllocator(), ReferenceRenderer(), ReferenceCompiler(), ReferenceProgram)

  return RefimplDevice


def install_reference_device(default: bool = False) -> str:
  """Makes `Device["REFIMPL"]` a tinygrad device (and the default one when `default`); returns its name. REFIMPL=1 in
  the environment also selects it, when tinygrad has not chosen its default device yet."""
  from tinygrad.device import Device
  name = f"tinygrad.runtime.ops_{DEVICE.lower()}"
  if name not in sys.modules:
    module = types.ModuleType(name, "refimpl's reference device for tinygrad (see refimpl.tinygrad.reference)")
    module.RefimplDevice = _device_class()
    sys.modules[name] = module
  if DEVICE not in Device._devices: Device._devices.append(DEVICE)
  _name_tensor_ops()
  if default: Device.DEFAULT = DEVICE
  return DEVICE


# ***** checking mode: tinygrad's own device against the emulator *****

def compare_run(program: Program, inputs: list[np.ndarray], outputs: list[np.ndarray], vals: tuple[int, ...]) -> str | None:
  """None when `outputs` (what a device computed from `inputs`) agree with the emulator on every element it pins to one
  value (certainty EXACT or NAN_PAYLOAD: the same bits, or a NaN for a NaN), else the first difference.
  UndefinedBehavior when the emulator finds the kernel undefined on these inputs."""
  res = emulate(program, inputs, vals=vals, strict=False)
  if res.events: raise res.events[0]
  for k, (want, got, levels) in enumerate(zip(res.buffers, outputs, res.certainty)):
    bad = np.flatnonzero(is_one_value(levels) & ~same_value(got, want))
    if len(bad): return (f"buffer {k} element {bad[0]}: emulator {want[bad[0]]!r}, device {got[bad[0]]!r} "
                         f"({len(bad)} elements differ)")
  return None


@contextmanager
def check_kernels(out: Path, device: str, session: Session = SESSION) -> Iterator[Session]:
  """While active, every compiled kernel tinygrad runs is also run on the emulator and compared (module docstring)."""
  def check(r: KernelRun) -> None:
    name = r.spec.function_name
    if r.translation is None:
      session.untranslatable[name] = str(r.error)
      return
    program = r.translation.program
    try: why = compare_run(program, r.before, r.after, r.vals)
    except UndefinedBehavior as e:
      path = save_case(out / "undefined", case_finding(program, r.before, r.vals, device, name, r.after, str(e)))
      session.undefined.append(f"{name}: {e} (saved {path})")
      why = None
    if why is not None:
      path = save_case(out / "disagreements", case_finding(program, r.before, r.vals, device, name, r.after, why))
      session.disagreements.append(f"{name}: {why} (saved {path})")
    session.ran(name)

  with kernel_runs(check): yield session
