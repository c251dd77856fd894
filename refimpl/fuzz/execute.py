"""Running cases on a backend, many kernels per compiler call.

`build(device, programs, cache)` turns programs into runnable kernels the way refimpl.runner.Kernel does (lower_for,
render, compile, load), except that every program of the batch that the backend
accepts is compiled in one call when its compiler has `compile_batch` (the CLANG compiler renders N kernels with distinct
names into one C file and links each entry from the one object). A failing batch is retried one kernel at a time, so
each compiler error lands on the program that caused it. Each stage's failure is a kind of finding:
  unsupported     the backend declares it cannot run the program (a dtype, BARRIER, local memory, launch dims, a grid
                  lowering refused): skipped
  render-error    a lowering pass or the renderer raised on a program the backend accepts
  compile-error   the compiler rejected (or crashed on) the rendered source
  load-error      the runtime could not load the compiled binary
  runtime-error   the launch raised
Signals and hangs are caught one level up (isolate.py): they take the worker process with them.

Campaign and reduction batches skip the disk cache (`cache=False`): every fuzz program and every reduction candidate is
new, so caching them would only fill the disk (each entry of a batch holds the whole batch's object), and on a GPU
whose binary is kept, reading it may cost the driver a second compile of every kernel (PoCL's does: there the GPU
compiler caches nothing, ops_gpu.CLCompiler). Replays compile the same sources again and use the cache.
"""
from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from refimpl.device import Compiled, Device, DeviceError, load_object
from refimpl.ir import Program, ProgramError
from refimpl.lower import LoweringError, lower_for
from refimpl.runner import Kernel, Loaded

UNSUPPORTED, RENDER, COMPILE, LOAD, RUNTIME = "unsupported", "render-error", "compile-error", "load-error", "runtime-error"


@dataclass(frozen=True)
class BackendRef:
  """A backend by name, with the "module:Class" that registers it in a fresh process (None for a built-in or an
  entry-point backend)."""
  name: str
  spec: str | None = None

  @staticmethod
  def parse(text: str) -> BackendRef:
    """"CLANG" or "package.module:Class", named as the spec suite names it: the class's `device_name`, else its name
    without a "Device" suffix, upper-cased."""
    kind, _, rest = text.partition(":")
    if rest and not rest.isdigit() and kind.upper() not in Device._specs:  # TINYGRAD:CLANG is a device name
      cls = load_object(text)
      return BackendRef(getattr(cls, "device_name", None) or cls.__name__.removesuffix("Device").upper(), text)
    return BackendRef(Device.canonicalize(text))

  def open(self) -> Compiled:
    if self.spec is not None: Device.register(self.name, self.spec)
    return Device[self.name]


@dataclass
class Built:
  kernel: Kernel | None = None
  failure: str | None = None  # one of the kinds above
  detail: str = ""
  compile_s: float = 0.0      # this program's share of the batch compile, plus its load
  render_s: float = 0.0       # lowering (lower_for: checks and passes) and rendering


def refused(e: Exception) -> bool:
  """Whether an error of lower_for is the backend declaring it cannot run the program (a capability the program needs,
  or a grid it cannot lower to loops) rather than a failure of a lowering pass."""
  return isinstance(e, LoweringError) or (isinstance(e, ProgramError) and e.rule == "capability")


def _err(e: BaseException) -> str: return f"{type(e).__name__}: {e}"


def build(device: Compiled, programs: Sequence[Program], cache: bool = True,
          phase: Callable[[int | None, str], None] = lambda i, what: None) -> list[Built]:
  """One Built per program (see the module docstring). Programs are renamed k0, k1, ... (distinct kernel names).
  `phase(i, what)` is called before each compile (i = None for the whole batch) so a supervisor can attribute a crash."""
  out = [Built() for _ in programs]
  sources: dict[int, tuple[Program, Program, str]] = {}
  for i, p in enumerate(programs):
    t0 = time.perf_counter()
    p = dataclasses.replace(p, name=f"k{i}")
    try:
      runnable = lower_for(p, device)
      sources[i] = (p, runnable, device.renderer.render(p.name, runnable))
    except Exception as e:
      if refused(e):
        out[i] = Built(failure=UNSUPPORTED, detail=str(e))
        continue
      out[i] = Built(failure=RENDER, detail=_err(e))
    out[i].render_s = time.perf_counter() - t0
  compiler = device.compiler
  if not cache:
    compiler = copy.copy(compiler)
    compiler.cachekey = None
  libs: dict[int, bytes] = {}
  t0 = time.perf_counter()
  if len(sources) > 1 and hasattr(compiler, "compile_batch"):
    phase(None, "compile")
    try: libs = dict(zip(sources, compiler.compile_batch([s for _, _, s in sources.values()])))
    except Exception: libs = {}
  for i, (_, _, src) in sources.items():
    if i in libs: continue
    phase(i, "compile")
    try: libs[i] = compiler.compile_cached(src)
    except Exception as e: out[i].failure, out[i].detail = COMPILE, _err(e)
  share = (time.perf_counter() - t0) / max(len(sources), 1)
  for i in sources:
    out[i].compile_s = share
    if i not in libs: continue
    p, runnable, src = sources[i]
    t1 = time.perf_counter()
    try: kernel = Kernel(p, loaded=Loaded(device, runnable, src, libs[i], device.runtime(p.name, libs[i])))
    except Exception as e: out[i].failure, out[i].detail = LOAD, _err(e)
    else: out[i].kernel = kernel
    out[i].compile_s += time.perf_counter() - t1
  return out


def run(kernel: Kernel, inputs: list[np.ndarray], vals: Sequence[int]) -> list[np.ndarray]:
  """Runs a built kernel on copies of the inputs; returns every buffer after the run."""
  return kernel(*inputs, vals=tuple(vals))


def open_backends(refs: Sequence[BackendRef]) -> tuple[dict[str, Compiled], dict[str, str]]:
  """({name: device} of those that open, {name: why not} of the others)."""
  ok, bad = {}, {}
  for r in refs:
    try: ok[r.name] = r.open()
    except (DeviceError, ImportError, ValueError) as e: bad[r.name] = str(e)
  return ok, bad
