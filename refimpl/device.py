"""The device layer: the runtime contract every backend implements (tinygrad 0.10.1's device.py, name for name).

Sections, in the order a program meets them:
  registry     Device (which backends exist, opening them, the default)
  profiling    ProfileEvent and friends, cpu_profile, the Chrome trace written at exit with PROFILE=1
  memory       BufferSpec, Buffer, Allocator, LRUAllocator, MallocAllocator
  native code  CPUProgram (W^X loader for position-independent machine code)
  compilers    CompileError (defined in refimpl.errors), Compiler (with the disk cache)
  devices      Compiled, is_dtype_supported
"""
from __future__ import annotations

import atexit
import contextlib
import ctypes
import ctypes.util
import decimal
import hashlib
import importlib
import importlib.metadata
import json
import mmap
import multiprocessing
import os
import pathlib
import platform
import re
import runpy
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from refimpl.dtype import DType, ImageDType, PtrDType, dtypes
from refimpl.errors import CompileError as CompileError  # tinygrad's device contract names refimpl.device.CompileError
from refimpl.helpers import OSX, GlobalCounters, diskcache_get, diskcache_put, flat_mv, from_mv, getenv, mv_address, round_up
from refimpl.renderer import Renderer

# *** registry ***

class DeviceError(RuntimeError):
  """A device could not be found or opened; the message says which and why."""
class UnknownDevice(DeviceError):
  """The name is not a device refimpl knows."""
class DeviceUnavailable(DeviceError):
  """A known device that cannot be opened here (missing toolchain, not built yet, refused in this process)."""

# The order in which devices are tried for the default: native CPU compilers first, then OpenCL, WebGPU, the emulator.
ALL_DEVICES = ["CLANG", "LLVM", "GPU", "WEBGPU", "PYTHON"]

# Built-in devices: name -> "module:Class". A module that does not exist yet means the backend is not built yet.
BUILTIN_DEVICES: dict[str, str] = {
  "PYTHON": "refimpl.backends.ops_python:PythonDevice",
  "CLANG": "refimpl.backends.ops_clang:ClangDevice",
  "LLVM": "refimpl.backends.ops_llvm:LLVMDevice",
  "GPU": "refimpl.backends.ops_gpu:GPUDevice",
  "CUDA": "refimpl.backends.ops_cuda:CUDADevice",  # NVRTC + the driver API; not in ALL_DEVICES (needs an NVIDIA GPU)
  "WEBGPU": "refimpl.backends.ops_webgpu:WebGPUDevice",
}
# Opt-in devices: opened only when named (TINYGRAD:CLANG ...), never the default nor among the devices a run tries
# when none is named. Lazy like the table above: importing refimpl does not import tinygrad.
OPT_IN_DEVICES: dict[str, str] = {"TINYGRAD": "refimpl.tinygrad.line_device:TinygradDevice"}  # by tinygrad line
ENTRY_POINT_GROUP = "refimpl.backends"

def load_object(spec: str) -> Any:
  """Imports "package.module:Name" and returns Name, with a clear error for either half missing."""
  module_name, sep, attr = spec.partition(":")
  if not sep or not module_name or not attr: raise ValueError(f"expected 'module:Class', got {spec!r}")
  module = importlib.import_module(module_name)
  try: return getattr(module, attr)
  except AttributeError: raise ImportError(f"module {module_name!r} has no attribute {attr!r}") from None

REGISTRATIONS_ENV = "REFIMPL_BACKENDS"  # NAME=module:Class,...: what Device.register added in a parent process

def _inherited_registrations() -> dict[str, str]:
  """The registrations a parent process passed down in REFIMPL_BACKENDS (malformed items are ignored)."""
  out = {}
  for item in os.environ.get(REGISTRATIONS_ENV, "").split(","):
    name, sep, spec = item.strip().partition("=")
    if sep and name and ":" in spec: out[name.upper()] = spec
  return out

def _import_path(cls: type) -> str | None:
  """"module:Class" that imports `cls` in another process, or None when no other process can import it by name."""
  module, qualname = getattr(cls, "__module__", None), getattr(cls, "__qualname__", "")
  if module in (None, "__main__") or not qualname.isidentifier(): return None  # nested: "<locals>" or "Outer.Inner"
  return f"{module}:{qualname}"

class _Device:
  """The device registry (a singleton, `Device`). `Device["CLANG"]` opens a backend once and caches it.

  Devices come from three places: the built-in table above, the `refimpl.backends` entry-point group of installed
  packages (name -> a Compiled subclass), and `Device.register(name, cls)` at run time.
  A device may be opened outside the main process (fuzzer workers, pytest-xdist) only when its class sets
  `subprocess_safe = True`; every built-in backend does, since refimpl's workers are spawned, never forked."""
  def __init__(self) -> None:
    self._specs: dict[str, str | type] = {**BUILTIN_DEVICES, **OPT_IN_DEVICES}
    with contextlib.suppress(Exception):
      for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP): self._specs.setdefault(ep.name.upper(), ep.value)
    for name, spec in _inherited_registrations().items(): self._specs[name] = spec
    self._opened: dict[str, Compiled] = {}
    self._opened_devices: set[str] = set()

  @property
  def _devices(self) -> list[str]: return sorted(k for k in self._specs if k not in OPT_IN_DEVICES)

  def register(self, name: str, spec: str | type) -> str:
    """Adds a device: `spec` is a Compiled subclass or "module:Class". Returns the canonical name.
    Every process started after this (subprocesses, spawned workers) knows the device too: the registration goes into
    the REFIMPL_BACKENDS environment variable, which the registry of a new process reads. A class that a new process
    cannot import by name (defined in __main__ or inside a function) stays known to this process only."""
    canonical = name.split(":")[0].upper()
    self._specs[canonical] = spec
    importable = spec if isinstance(spec, str) else _import_path(spec)
    if importable is not None:
      inherited = {**_inherited_registrations(), canonical: importable}
      os.environ[REGISTRATIONS_ENV] = ",".join(f"{k}={v}" for k, v in inherited.items())
    return canonical

  def canonicalize(self, device: str | None) -> str:
    """Upper-cases the part before ':' and drops a trailing ':0'; None means the default device."""
    if device is None: return self.DEFAULT
    kind, sep, rest = device.partition(":")
    return re.sub(r":0$", "", kind.upper() + sep + rest)

  def _unknown(self, name: str) -> UnknownDevice:
    return UnknownDevice(f"unknown device {name!r}; known devices: {', '.join(self._devices)}; opt-in: "
                         f"{', '.join(f'{k}:...' for k in OPT_IN_DEVICES)}")

  def __getitem__(self, name: str) -> Compiled:
    canonical = self.canonicalize(name)
    if canonical not in self._opened: self._opened[canonical] = self._open(canonical)
    return self._opened[canonical]

  def device_class(self, name: str) -> type[Compiled]:
    """The Compiled subclass behind a device name, imported but not opened."""
    kind = name.split(":")[0].upper()
    if kind not in self._specs: raise self._unknown(name)
    spec = self._specs[kind]
    if isinstance(spec, type): return spec
    module_name = spec.partition(":")[0]
    try: return load_object(spec)
    except ModuleNotFoundError as e:
      if e.name is not None and module_name.startswith(e.name) and module_name.startswith("refimpl."):
        raise DeviceUnavailable(f"{kind}: not built yet ({module_name} does not exist in this version of refimpl)") from None
      raise DeviceUnavailable(f"{kind}: cannot import {spec}: {e}") from e
    except ImportError as e: raise DeviceUnavailable(f"{kind}: cannot import {spec}: {e}") from e

  def _open(self, name: str) -> Compiled:
    cls = self.device_class(name)
    process = multiprocessing.current_process().name
    if process != "MainProcess" and not getattr(cls, "subprocess_safe", False):
      raise DeviceUnavailable(f"{name}: can only be opened in the main process, not in {process} "
                              f"(its class {cls.__name__} does not set subprocess_safe = True)")
    try: device = cls(name)
    except DeviceError: raise
    except Exception as e: raise DeviceUnavailable(f"{name}: failed to open: {type(e).__name__}: {e}") from e
    if getenv("DEBUG") >= 1: print(f"opened device {name} from pid {os.getpid()}")
    self._opened_devices.add(name)
    return device

  def open_error(self, name: str) -> str | None:
    """None when the device opens, else the reason it does not (one line)."""
    try: self[name]
    except DeviceError as e: return str(e)
    return None

  @property
  def default(self) -> Compiled: return self[self.DEFAULT]

  def get_available_devices(self) -> Iterator[str]:
    """Each device of ALL_DEVICES (then any other registered one) that opens, in order."""
    for name in ALL_DEVICES + [d for d in self._devices if d not in ALL_DEVICES]:
      if self.open_error(name) is None: yield self[name].device

  @property
  def DEFAULT(self) -> str:
    """The device chosen by env (`DEV=NAME`, or `NAME=1`), else the first of ALL_DEVICES that opens."""
    if "_default" not in self.__dict__: self._default = self._choose_default()
    return self._default
  @DEFAULT.setter
  def DEFAULT(self, name: str) -> None: self._default = self.canonicalize(name)

  def _choose_default(self) -> str:
    requested = [getenv("DEV", "").upper()] if getenv("DEV", "") else []
    requested += [d for d in self._devices if os.environ.get(d) == "1" and d not in requested]
    if len(requested) > 1: raise DeviceError(f"several devices requested in the environment: {', '.join(requested)}")
    if requested:
      name = requested[0]
      if name.split(":")[0] not in self._specs: raise self._unknown(name)
      if (reason := self.open_error(name)) is not None:
        raise DeviceUnavailable(f"{name} was requested in the environment but does not open: {reason}; "
                                f"known devices: {', '.join(self._devices)}")
      return self.canonicalize(name)
    for name in self.get_available_devices():
      os.environ[name.split(":")[0]] = "1"  # spawned children pick the same default
      return name
    reasons = "; ".join(f"{d}: {self.open_error(d)}" for d in ALL_DEVICES)
    raise DeviceError(f"no usable devices ({reasons})")

Device = _Device()

# *** profiling ***

class ProfileEvent:
  """Base of everything recorded while PROFILE=1."""

@dataclass(frozen=True)
class ProfileDeviceEvent(ProfileEvent):
  device: str
  comp_tdiff: decimal.Decimal = decimal.Decimal(0)
  copy_tdiff: decimal.Decimal = decimal.Decimal(0)

@dataclass
class ProfileRangeEvent(ProfileEvent):
  """One timed span on a device; st and en are microseconds (en is None while it runs)."""
  device: str
  name: str
  st: decimal.Decimal
  en: decimal.Decimal | None = None
  is_copy: bool = False

@dataclass(frozen=True)
class ProfileGraphEntry:
  device: str
  name: str
  st_id: int
  en_id: int
  is_copy: bool

@dataclass(frozen=True)
class ProfileGraphEvent(ProfileEvent):
  ents: list[ProfileGraphEntry]
  deps: list[list[int]]
  sigs: list[decimal.Decimal]

@dataclass
class ProfileResult:
  st: int | None = None
  en: int | None = None

def _now_us() -> decimal.Decimal: return decimal.Decimal(time.perf_counter_ns()) / 1000

@contextlib.contextmanager
def cpu_profile(name: str, device: str = "CPU", is_copy: bool = False, display: bool = True) -> Iterator[ProfileRangeEvent]:
  """Times the `with` body as a ProfileRangeEvent, recorded in Compiled.profile_events when PROFILE=1 and display."""
  event = ProfileRangeEvent(device, name, _now_us(), is_copy=is_copy)
  try: yield event
  finally:
    event.en = _now_us()
    if getenv("PROFILE") and display: Compiled.profile_events.append(event)

def chrome_trace(events: list[ProfileEvent]) -> dict:
  """Chrome trace-event JSON (opened by Perfetto and chrome://tracing): one process per device, compute and copy threads."""
  devices = sorted({e.device for e in events if isinstance(e, (ProfileRangeEvent, ProfileDeviceEvent))})
  pids = {name: i for i, name in enumerate(devices)}
  trace: list[dict] = [{"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}} for name, pid in pids.items()]
  for e in events:
    if isinstance(e, ProfileRangeEvent) and e.en is not None:
      trace.append({"name": e.name, "ph": "X", "pid": pids[e.device], "tid": "copy" if e.is_copy else "compute",
                    "ts": float(e.st), "dur": float(e.en - e.st), "cat": "copy" if e.is_copy else "kernel"})
  return {"traceEvents": trace, "displayTimeUnit": "ms"}

def profile_path() -> pathlib.Path:
  """Where the trace goes: $PROFILE_PATH, else refimpl_profile.json in the temporary directory."""
  return pathlib.Path(os.environ.get("PROFILE_PATH", pathlib.Path(tempfile.gettempdir()) / "refimpl_profile.json"))

def _finalize_profile() -> None:
  if not getenv("PROFILE"): return
  for name in list(Device._opened_devices):
    device = Device._opened[name]
    device.synchronize()
    device._at_profile_finalize()
  path = profile_path()
  tmp = path.with_suffix(path.suffix + ".tmp")
  tmp.write_text(json.dumps(chrome_trace(Compiled.profile_events)))
  os.replace(tmp, path)
  print(f"refimpl: wrote a Chrome trace of {len(Compiled.profile_events)} events to {path} (open it in https://ui.perfetto.dev)")

atexit.register(_finalize_profile)

# *** memory ***

@dataclass(frozen=True, eq=True)
class BufferSpec:
  """How a buffer is allocated. `external_ptr` wraps memory someone else owns (never freed by refimpl)."""
  image: ImageDType | None = None
  uncached: bool = False
  cpu_access: bool = False
  host: bool = False
  nolru: bool = False
  external_ptr: int | None = None

class Buffer:
  """`size` elements of `dtype` on `device`, allocated lazily. A view (base=...) shares its base's memory at a byte offset."""
  def __init__(self, device: str, size: int, dtype: DType, opaque: Any = None, options: BufferSpec | None = None,
               initial_value: bytes | None = None, lb_refcount: int = 0, base: Buffer | None = None, offset: int = 0,
               preallocate: bool = False):
    if isinstance(dtype, ImageDType): options = BufferSpec(image=dtype)
    elif not isinstance(dtype, DType) or isinstance(dtype, PtrDType): raise TypeError(f"a Buffer holds values, not {dtype!r}")
    if dtype == dtypes.void: raise ValueError("a Buffer cannot hold void")
    if not isinstance(size, int) or size < 0: raise ValueError(f"Buffer size must be a non-negative int, got {size!r}")
    self.device, self.size, self.dtype, self.options, self.offset = device, size, dtype, options, offset
    self.allocated_views = 0
    if base is None:
      if offset != 0: raise ValueError(f"a base buffer cannot have an offset (got {offset})")
      self._base: Buffer | None = None
      self._lb_refcount = lb_refcount
      if opaque is not None: self.allocate(opaque)
      if initial_value is not None:
        self.allocate()
        self.copyin(memoryview(initial_value))
    else:
      if base._base is not None: raise ValueError("the base of a view must be a base buffer")
      if device != base.device: raise ValueError(f"a view must be on its base's device ({base.device}), not {device}")
      if offset < 0 or offset + self.nbytes > base.nbytes:
        raise ValueError(f"view of {self.nbytes} bytes at offset {offset} is outside its base of {base.nbytes} bytes")
      self._base = base
    if preallocate: self.allocate()

  @property
  def base(self) -> Buffer: return self._base if self._base is not None else self
  @property
  def lb_refcount(self) -> int: return self.base._lb_refcount
  def ref(self, count: int) -> None: self.base._lb_refcount += count
  @property
  def nbytes(self) -> int: return self.size * self.dtype.itemsize
  def is_allocated(self) -> bool: return hasattr(self, "_buf")
  def ensure_allocated(self) -> Buffer: return self if self.is_allocated() else self.allocate()
  def _owns_memory(self) -> bool: return self._base is None and (self.options is None or self.options.external_ptr is None)

  def allocate(self, opaque: Any = None, external_ptr: int | None = None) -> Buffer:
    if self.is_allocated(): raise RuntimeError(f"{self!r} is already allocated")
    self.allocator = Device[self.device].allocator
    if external_ptr is not None:
      self.options = replace(self.options, external_ptr=external_ptr) if self.options else BufferSpec(external_ptr=external_ptr)
    if self._base is not None:
      self._base.ensure_allocated()
      if not hasattr(self.allocator, "_offset"): raise RuntimeError(f"{self.device}'s allocator cannot make views (no _offset)")
      self._buf: Any = self.allocator._offset(self.base._buf, self.nbytes, self.offset)
      self._base.allocated_views += 1
    else:
      self._buf = opaque if opaque is not None else self.allocator.alloc(self.nbytes, self.options)
      if self._owns_memory(): GlobalCounters.mem_used += self.nbytes
    return self

  def deallocate(self) -> None:
    """Frees what this buffer owns (not a view's base memory, not an external pointer) and forgets the allocation."""
    if not self.is_allocated(): raise RuntimeError(f"{self!r} is not allocated")
    if self._owns_memory():
      GlobalCounters.mem_used -= self.nbytes
      self.allocator.free(self._buf, self.nbytes, self.options)
    elif self._base is not None: self._base.allocated_views -= 1
    del self._buf

  def __del__(self) -> None:
    if self.is_allocated() and self._owns_memory():
      GlobalCounters.mem_used -= self.nbytes
      self.allocator.free(self._buf, self.nbytes, self.options)

  def __reduce__(self):
    if self._base is not None:
      view_args = (self.device, self.size, self.dtype, None, None, None, 0, self.base, self.offset, self.is_allocated())
      return self.__class__, view_args
    contents = None
    if self.is_allocated():
      contents = bytearray(self.nbytes)
      self.copyout(memoryview(contents))
    return self.__class__, (self.device, self.size, self.dtype, None, self.options, contents, self.lb_refcount)

  def __repr__(self) -> str:
    extra = f" offset:{self.offset}" if self._base is not None else ""
    if self.options is not None: extra += f" {self.options}"
    return f"<buf real:{self.is_allocated()} device:{self.device} size:{self.size} dtype:{self.dtype!r}{extra}>"

  def as_buffer(self, allow_zero_copy: bool = False, force_zero_copy: bool = False) -> memoryview:
    """The contents as a memoryview: a copy, or the memory itself when zero copy is allowed and the allocator can."""
    self._check_allocated("as_buffer")
    zero_copy_possible = hasattr(self.allocator, "_as_buffer") and (self.options is None or self.options.image is None)
    if (force_zero_copy or allow_zero_copy) and zero_copy_possible:
      return self.allocator._as_buffer(self._buf)
    if force_zero_copy: raise RuntimeError(f"{self.device}'s allocator cannot give zero-copy access to {self!r}")
    return self.copyout(memoryview(bytearray(self.nbytes)))

  def _check_allocated(self, what: str) -> None:
    if not self.is_allocated(): raise RuntimeError(f"cannot {what} {self!r}: it is not allocated (call allocate() first)")

  def _check_size(self, mv: memoryview, what: str) -> memoryview:
    flat = flat_mv(mv)
    if len(flat) != self.nbytes:
      raise ValueError(f"{what} size mismatch: got {len(flat)} bytes, {self!r} holds "
                       f"{self.size} x {self.dtype.itemsize} = {self.nbytes}")
    return flat

  def copyin(self, mv: memoryview) -> Buffer:
    self._check_allocated("copy into")
    self.allocator._copyin(self._buf, self._check_size(mv, "copyin"))
    return self

  def copyout(self, mv: memoryview) -> memoryview:
    self._check_allocated("copy out of")
    self.allocator._copyout(self._check_size(mv, "copyout"), self._buf)
    return mv

  def view(self, size: int, dtype: DType, offset: int) -> Buffer:
    """A buffer of `size` x `dtype` sharing this one's memory from byte `offset` (bounds-checked against the base)."""
    if self._base is not None: return Buffer(self.device, size, dtype, base=self._base, offset=self.offset + offset)
    return Buffer(self.device, size, dtype, base=self, offset=offset)

class Allocator:
  """Allocates device memory. Runtimes implement _alloc/_free/_copyin/_copyout, optionally _as_buffer, _offset, _transfer."""
  def alloc(self, size: int, options: BufferSpec | None = None) -> Any:
    if not isinstance(size, int) or size <= 0: raise ValueError(f"allocation size must be a positive int, got {size!r}")
    return self._alloc(size, options if options is not None else BufferSpec())
  def free(self, opaque: Any, size: int, options: BufferSpec | None = None) -> None:
    self._free(opaque, options if options is not None else BufferSpec())
  def _alloc(self, size: int, options: BufferSpec) -> Any: raise NotImplementedError(f"{type(self).__name__} has no _alloc")
  def _free(self, opaque: Any, options: BufferSpec) -> None: pass  # Python objects free themselves
  def _copyin(self, dest: Any, src: memoryview) -> None: raise NotImplementedError(f"{type(self).__name__} has no _copyin")
  def _copyout(self, dest: memoryview, src: Any) -> None: raise NotImplementedError(f"{type(self).__name__} has no _copyout")

class LRUAllocator(Allocator):
  """Keeps freed allocations by (size, options) and hands them out again. Unless options.nolru or env LRU=0.
  When an allocation fails (RuntimeError or MemoryError), drops the cache and tries once more."""
  def __init__(self) -> None: self.cache: dict[tuple[int, BufferSpec | None], list[Any]] = defaultdict(list)
  def alloc(self, size: int, options: BufferSpec | None = None) -> Any:
    cached = self.cache[(size, options)]
    if cached: return cached.pop()
    try: return super().alloc(size, options)
    except (RuntimeError, MemoryError):
      self.free_cache()
      return super().alloc(size, options)
  def free_cache(self) -> None:
    for (size, options), opaques in self.cache.items():
      for opaque in opaques: super().free(opaque, size, options)
      opaques.clear()
  def free(self, opaque: Any, size: int, options: BufferSpec | None = None) -> None:
    if getenv("LRU", 1) and (options is None or not options.nolru): self.cache[(size, options)].append(opaque)
    else: super().free(opaque, size, options)

class _MallocAllocator(LRUAllocator):
  """Host memory from ctypes, 16-byte aligned; wraps external pointers; zero-copy views and offsets."""
  ALIGNMENT = 16
  def _alloc(self, size: int, options: BufferSpec) -> Any:
    if options.external_ptr is not None: return (ctypes.c_uint8 * size).from_address(options.external_ptr)
    raw = (ctypes.c_uint8 * (size + self.ALIGNMENT))()
    pad = round_up(ctypes.addressof(raw), self.ALIGNMENT) - ctypes.addressof(raw)
    return (ctypes.c_uint8 * size).from_buffer(raw, pad)  # keeps `raw` alive
  def _as_buffer(self, src: Any) -> memoryview: return flat_mv(memoryview(src))
  def _copyin(self, dest: Any, src: memoryview) -> None:
    ctypes.memmove(dest, bytes(src) if src.readonly else from_mv(src), len(src))
  def _copyout(self, dest: memoryview, src: Any) -> None: ctypes.memmove(from_mv(dest), src, len(dest))
  def _offset(self, buf: Any, size: int, offset: int) -> Any: return from_mv(self._as_buffer(buf)[offset:offset + size])

MallocAllocator = _MallocAllocator()

# *** native code ***

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype, _libc.mmap.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                                                          ctypes.c_int, ctypes.c_long]
_libc.mprotect.restype, _libc.mprotect.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.munmap.restype, _libc.munmap.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t]
_MAP_FAILED = ctypes.c_void_p(-1).value

def _flush_icache(address: int, size: int) -> None:
  """x86 keeps instruction caches coherent; aarch64 needs __clear_cache (from libgcc / compiler-rt)."""
  if platform.machine() in ("x86_64", "AMD64", "i386", "i686"): return
  for name in ("gcc_s", "compiler_rt", "System"):
    path = ctypes.util.find_library(name)
    if path and hasattr(lib := ctypes.CDLL(path), "__clear_cache"):
      lib.__clear_cache(ctypes.c_void_p(address), ctypes.c_void_p(address + size))
      return
  raise RuntimeError(f"cannot flush the instruction cache on {platform.machine()}: no __clear_cache found")

class CPUProgram:
  """Position-independent machine code, mapped W^X and called with buffer pointers then int32 values.

  The code is copied into fresh read-write pages, which are then made read+execute: no mapping is ever writable and
  executable at once. `lib` is a flat image whose entry point is at offset 0 (what the ELF loader produces)."""
  def __init__(self, name: str, lib: bytes):
    if not lib: raise ValueError(f"CPUProgram {name!r}: empty code")
    self.name, self.size = name, round_up(len(lib), mmap.PAGESIZE)
    address = _libc.mmap(None, self.size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    if address in (None, _MAP_FAILED): raise MemoryError(f"CPUProgram {name!r}: mmap failed: {os.strerror(ctypes.get_errno())}")
    self.address, self._munmap = address, _libc.munmap  # keep munmap: __del__ may run after module teardown
    ctypes.memmove(address, lib, len(lib))
    if _libc.mprotect(address, self.size, mmap.PROT_READ | mmap.PROT_EXEC) != 0:
      raise OSError(ctypes.get_errno(), f"CPUProgram {name!r}: mprotect(READ|EXEC) failed: {os.strerror(ctypes.get_errno())}")
    _flush_icache(address, self.size)
    self.fxn = ctypes.CFUNCTYPE(None)(address)

  def __call__(self, *bufs: Any, vals: tuple[int, ...] = (), wait: bool = False) -> float | None:
    """Runs the code with each buffer's address then each value as an int32. Returns seconds taken when wait=True."""
    args: list[Any] = [ctypes.c_void_p(_address_of(b)) for b in bufs]
    args += [ctypes.c_int64(v) if OSX and platform.machine() == "arm64" else ctypes.c_int32(v) for v in vals]
    with cpu_profile(self.name, "CPU"):
      start = time.perf_counter()
      self.fxn(*args)
      elapsed = time.perf_counter() - start
    GlobalCounters.kernel_count += 1
    GlobalCounters.time_sum_s += elapsed
    return elapsed if wait else None

  def __del__(self) -> None:
    if getattr(self, "address", None): self._munmap(self.address, self.size)

def _address_of(buf: Any) -> int:
  if isinstance(buf, int): return buf
  if isinstance(buf, memoryview): return mv_address(buf)
  return ctypes.addressof(buf)

# *** compilers ***

class Compiler:
  """Turns rendered source into a binary. `cachekey` names the compiler, its version and flags: compile_cached keys the disk
  cache by it and the source. No cachekey (or env DISABLE_COMPILER_CACHE=1 / CACHELEVEL=0) means no caching."""
  def __init__(self, cachekey: str | None = None):
    self.cachekey = None if getenv("DISABLE_COMPILER_CACHE") else cachekey
  def compile(self, src: str) -> bytes: return src.encode()
  def compile_cached(self, src: str) -> bytes:
    if self.cachekey is not None:
      cached = diskcache_get(self.cachekey, src)
      if cached is not None: return cached
    if getenv("ASSERT_COMPILE"): raise RuntimeError(f"compile requested with ASSERT_COMPILE set:\n{src}")
    lib = self.compile(src)
    if self.cachekey is not None: diskcache_put(self.cachekey, src, lib)
    return lib
  def disassemble(self, lib: bytes) -> str | None: return None

def compile_batch_cached(compiler: Compiler, srcs: list[str], build: Callable[[list[str]], bytes]) -> list[bytes]:
  """One lib per source for a compiler that builds many sources at once: build(uncached sources) makes one lib holding
  all their kernels, and each of those sources gets it. The disk cache holds that lib once (table <cachekey>.batch-lib,
  keyed by its sha256) and, per source, that sha256 (table <cachekey>.batch): a batch of N sources is not N copies of
  its lib (300 OpenCL kernels with their PoCL binary made a 12 MB lib). A source compiled alone (compile_cached) is
  found first. The sources of one batch read back get the same bytes object, so a runtime that keeps what it loaded per
  lib loads it once."""
  libs: dict[str, bytes] = {}
  table = None if compiler.cachekey is None else f"{compiler.cachekey}.batch"
  lib_table = None if table is None else f"{table}-lib"
  if table is not None:
    by_digest: dict[bytes, bytes | None] = {}
    for s in srcs:
      hit = diskcache_get(compiler.cachekey, s)
      digest = diskcache_get(table, s) if hit is None else None
      if digest is not None:
        if digest not in by_digest: by_digest[digest] = diskcache_get(lib_table, digest)
        hit = by_digest[digest]
      if hit is not None: libs[s] = hit
  todo = [s for s in dict.fromkeys(srcs) if s not in libs]
  if todo:
    lib = build(todo)
    if table is not None:
      digest = hashlib.sha256(lib).digest()
      diskcache_put(lib_table, digest, lib)  # the lib first: a source's entry never names a missing lib
      for s in todo: diskcache_put(table, s, digest)
    for s in todo: libs[s] = lib
  return [libs[s] for s in srcs]

# *** devices ***

class Compiled:
  """One opened backend: its allocator, renderer, compiler and runtime (runtime(name, lib) -> a callable program)."""
  profile_events: list[ProfileEvent] = [ProfileDeviceEvent("CPU")]
  subprocess_safe: bool = False
  def __init__(self, device: str, allocator: Allocator, renderer: Renderer | None, compiler: Compiler | None,
               runtime: Callable[..., Any] | None, graph: Any = None):
    self.device, self.allocator, self.runtime, self.graph = device, allocator, runtime, graph
    self.renderer = renderer if renderer is not None else Renderer(device)
    self.compiler = compiler if compiler is not None else Compiler()
  def synchronize(self) -> None:
    """Waits until everything launched on the device has finished (host backends are synchronous)."""
  def _at_profile_finalize(self) -> None:
    """Called once at exit with PROFILE=1, after synchronize, to flush device-side profile data."""
  def supports_dtype(self, dtype: DType) -> bool:
    """Whether buffers and ALU ops of this scalar dtype work here. The default: every scalar but void, no images."""
    return not isinstance(dtype, (PtrDType, ImageDType)) and dtype != dtypes.void

def is_dtype_supported(dtype: DType, device: str | None = None) -> bool:
  """Whether `device` (default: the default device) handles `dtype` (vectors by their scalar). False when it does not open."""
  if isinstance(dtype, ImageDType): return False
  name = Device.canonicalize(device)
  if Device.open_error(name) is not None: return False
  return Device[name].supports_dtype(dtype.scalar())

# *** python -m refimpl.device: the self-check, which lives above this module (refimpl.selfcheck imports it) ***

if __name__ == "__main__":  # run as a script, this file hands over to the self-check's own entry point, by name
  runpy.run_module("refimpl.selfcheck", run_name="__main__", alter_sys=True)
