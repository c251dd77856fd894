"""The device layer's contract: the registry, buffers and allocators, the W^X code loader, the compiler cache, profiling."""
from __future__ import annotations

import concurrent.futures
import ctypes
import gc
import importlib.metadata
import json
import mmap
import multiprocessing
import os
import pickle
import platform
import subprocess
import sys

import numpy as np
import pytest

from refimpl import device as device_module
from refimpl.device import (
  Buffer,
  BufferSpec,
  Compiled,
  Compiler,
  CPUProgram,
  DeviceUnavailable,
  MallocAllocator,
  UnknownDevice,
  _Device,
  _MallocAllocator,
  compile_batch_cached,
  is_dtype_supported,
)
from refimpl.dtype import DTYPES_DICT, dtypes, to_np
from refimpl.helpers import GlobalCounters, diskcache_get, env_override

# *** devices for these tests (module level, so spawned workers can import them) ***

class HostDevice(Compiled):
  """Host memory and CPUProgram: enough of a device to exercise the runtime layer without any compiler."""
  subprocess_safe = True
  def __init__(self, name: str): super().__init__(name, MallocAllocator, None, None, CPUProgram)

class MainOnlyDevice(HostDevice):
  subprocess_safe = False

class BrokenDevice(Compiled):
  def __init__(self, name: str): raise RuntimeError("toolchain missing: install frobnicate")

def registry(**devices: type) -> _Device:
  """A fresh registry holding only the given devices, so tests never touch the global one."""
  reg = _Device()
  reg._specs = {}
  for name, cls in devices.items(): reg.register(name, cls)
  return reg

@pytest.fixture(autouse=True)
def restore_environment():
  """Choosing a default device exports NAME=1 for spawned children; keep that from leaking between tests."""
  saved = dict(os.environ)
  yield
  os.environ.clear()
  os.environ.update(saved)

@pytest.fixture
def host() -> str:
  device_module.Device.register("HOSTTEST", HostDevice)
  return "HOSTTEST"

# *** registry ***

@pytest.mark.parametrize("name,canonical", [("clang", "CLANG"), ("gpu:0", "GPU"), ("gpu:1", "GPU:1"), ("Llvm:0:0", "LLVM:0"),
                                            ("disk:/tmp/a:0", "DISK:/tmp/a"), ("PYTHON", "PYTHON")])
def test_canonicalize_uppercases_the_kind_and_drops_a_trailing_colon_zero(name, canonical):
  assert registry().canonicalize(name) == canonical

def test_canonicalize_none_is_the_default_device():
  reg = registry(HOST=HostDevice)
  assert reg.canonicalize(None) == reg.DEFAULT == "HOST"

def test_unknown_device_error_lists_the_known_devices():
  reg = registry(HOST=HostDevice, BROKEN=BrokenDevice)
  with pytest.raises(UnknownDevice, match=r"unknown device 'NOPE'; known devices: BROKEN, HOST"): reg["nope"]

def test_env_requested_device_that_does_not_open_is_a_clear_error_listing_known_devices():
  reg = registry(HOST=HostDevice, BROKEN=BrokenDevice)
  with env_override(BROKEN="1"), pytest.raises(DeviceUnavailable) as info: reg.DEFAULT
  assert "BROKEN was requested in the environment" in str(info.value)
  assert "install frobnicate" in str(info.value) and "known devices: BROKEN, HOST" in str(info.value)

def test_env_requesting_an_unknown_device_lists_the_known_devices():
  reg = registry(HOST=HostDevice)
  with env_override(DEV="WHATEVER"), pytest.raises(UnknownDevice, match="known devices: HOST"): reg.DEFAULT

def test_env_requesting_two_devices_is_an_error():
  reg = registry(HOST=HostDevice, OTHER=HostDevice)
  with env_override(HOST="1", OTHER="1"), pytest.raises(RuntimeError, match="several devices requested"): reg.DEFAULT

def test_env_name_equals_one_selects_that_device():
  reg = registry(HOST=HostDevice, OTHER=HostDevice)
  with env_override(OTHER="1"): assert reg.DEFAULT == "OTHER"

def test_default_is_the_first_device_that_opens():
  reg = registry(BROKEN=BrokenDevice, HOST=HostDevice)
  with env_override(HOST=None, BROKEN=None): assert reg.DEFAULT == "HOST"

def test_no_usable_devices_is_a_runtime_error():
  with pytest.raises(RuntimeError, match="no usable devices"): registry(BROKEN=BrokenDevice).DEFAULT

def test_opened_devices_are_cached_and_recorded():
  reg = registry(HOST=HostDevice)
  assert reg["host"] is reg["HOST:0"] and reg._opened_devices == {"HOST"}

def test_get_available_devices_skips_devices_that_do_not_open():
  assert list(registry(BROKEN=BrokenDevice, HOST=HostDevice).get_available_devices()) == ["HOST"]

def test_a_failing_backend_constructor_becomes_device_unavailable_with_its_reason():
  reg = registry(BROKEN=BrokenDevice)
  with pytest.raises(DeviceUnavailable, match="BROKEN: failed to open: RuntimeError: toolchain missing"): reg["BROKEN"]

def test_a_builtin_backend_that_is_not_built_yet_says_so():
  reg = registry()
  reg.register("FUTURE", "refimpl.backends.ops_future:FutureDevice")
  with pytest.raises(DeviceUnavailable, match=r"FUTURE: not built yet \(refimpl.backends.ops_future does not exist"):
    reg["FUTURE"]

def test_a_third_party_backend_is_registered_as_module_colon_class():
  reg = registry()
  reg.register("toy", f"{__name__}:HostDevice")
  assert isinstance(reg["TOY"], HostDevice)

def test_backends_are_discovered_through_the_entry_point_group(monkeypatch):
  entry = importlib.metadata.EntryPoint(name="toy", value=f"{__name__}:HostDevice", group=device_module.ENTRY_POINT_GROUP)
  def fake_entry_points(group=None): return [entry] if group == device_module.ENTRY_POINT_GROUP else []
  monkeypatch.setattr(importlib.metadata, "entry_points", fake_entry_points)
  reg = _Device()
  assert "TOY" in reg._devices and isinstance(reg["TOY"], HostDevice)

def _open_in_worker(cls_name: str) -> str:
  reg = registry(DEV1=globals()[cls_name])
  try: return type(reg["DEV1"]).__name__ + " opened in " + multiprocessing.current_process().name
  except DeviceUnavailable as e: return str(e)

def test_only_subprocess_safe_devices_open_outside_the_main_process():
  with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
    safe, unsafe = pool.submit(_open_in_worker, "HostDevice").result(), pool.submit(_open_in_worker, "MainOnlyDevice").result()
  assert safe.startswith("HostDevice opened in SpawnProcess")
  assert "DEV1: can only be opened in the main process" in unsafe and "subprocess_safe" in unsafe
  assert isinstance(registry(DEV1=MainOnlyDevice)["DEV1"], MainOnlyDevice)  # the main process may open it

def test_builtin_backends_are_listed_in_the_global_registry():
  assert {"PYTHON", "CLANG", "LLVM", "GPU"} <= set(device_module.Device._devices)

# *** buffers ***

SCALARS = sorted({d for d in DTYPES_DICT.values() if d != dtypes.void})

@pytest.mark.parametrize("dtype", SCALARS, ids=str)
def test_buffer_copyin_copyout_round_trips_random_bytes(host, dtype):
  data = np.random.default_rng(dtype.priority).integers(0, 256, size=37 * dtype.itemsize, dtype=np.uint8).tobytes()
  buf = Buffer(host, 37, dtype).allocate().copyin(memoryview(data))
  out = bytearray(buf.nbytes)
  buf.copyout(memoryview(out))
  assert bytes(out) == data and bytes(buf.as_buffer()) == data

def test_buffer_copyin_accepts_typed_numpy_memory(host):
  values = np.arange(8, dtype=to_np(dtypes.float32))
  buf = Buffer(host, 8, dtypes.float32).allocate().copyin(memoryview(values))
  assert np.array_equal(np.frombuffer(buf.as_buffer(), dtype=np.float32), values)

def test_buffer_copy_of_the_wrong_size_names_both_sizes(host):
  buf = Buffer(host, 4, dtypes.int32).allocate()
  with pytest.raises(ValueError, match=r"copyin size mismatch: got 12 bytes, .* holds 4 x 4 = 16"):
    buf.copyin(memoryview(bytes(12)))
  with pytest.raises(ValueError, match="copyout size mismatch: got 20 bytes"): buf.copyout(memoryview(bytearray(20)))

def test_unallocated_buffer_copies_are_clear_errors(host):
  buf = Buffer(host, 4, dtypes.int32)
  with pytest.raises(RuntimeError, match="not allocated"): buf.copyin(memoryview(bytes(16)))
  with pytest.raises(RuntimeError, match="not allocated"): buf.copyout(memoryview(bytearray(16)))
  with pytest.raises(RuntimeError, match="not allocated"): buf.deallocate()

def test_buffer_allocates_lazily_and_once(host):
  buf = Buffer(host, 4, dtypes.int32)
  assert not buf.is_allocated() and buf.ensure_allocated().is_allocated()
  with pytest.raises(RuntimeError, match="already allocated"): buf.allocate()

def test_buffer_rejects_pointer_void_and_negative_sizes(host):
  with pytest.raises(TypeError): Buffer(host, 4, dtypes.float32.ptr())
  with pytest.raises(ValueError, match="void"): Buffer(host, 4, dtypes.void)
  with pytest.raises(ValueError, match="non-negative"): Buffer(host, -1, dtypes.float32)

def test_view_shares_memory_with_its_base(host):
  base = Buffer(host, 8, dtypes.int32, initial_value=np.arange(8, dtype=np.int32).tobytes())
  view = base.view(2, dtypes.int32, offset=8).ensure_allocated()
  assert np.frombuffer(view.as_buffer(), dtype=np.int32).tolist() == [2, 3]
  view.copyin(memoryview(np.array([-1, -2], dtype=np.int32).tobytes()))
  assert np.frombuffer(base.as_buffer(), dtype=np.int32).tolist() == [0, 1, -1, -2, 4, 5, 6, 7]
  nested = view.view(1, dtypes.int32, offset=4).ensure_allocated()  # a view of a view is a view of the base
  assert nested.base is base and nested.offset == 12 and np.frombuffer(nested.as_buffer(), dtype=np.int32).tolist() == [-2]

def test_view_outside_its_base_is_refused(host):
  base = Buffer(host, 8, dtypes.int32)
  with pytest.raises(ValueError, match="outside its base of 32 bytes"): base.view(3, dtypes.int32, offset=24)
  with pytest.raises(ValueError, match="outside its base"): base.view(1, dtypes.int32, offset=-4)
  assert base.view(2, dtypes.int32, offset=24).nbytes == 8  # exactly reaching the end is fine

def test_memory_accounting_counts_owned_buffers_only(host):
  before = GlobalCounters.mem_used
  base = Buffer(host, 100, dtypes.float32).allocate()
  assert GlobalCounters.mem_used == before + 400
  view = base.view(10, dtypes.float32, 0).allocate()
  assert GlobalCounters.mem_used == before + 400
  view.deallocate()
  base.deallocate()
  assert GlobalCounters.mem_used == before

def test_garbage_collected_buffers_release_their_memory(host):
  before = GlobalCounters.mem_used
  Buffer(host, 64, dtypes.uint8).allocate()
  gc.collect()
  assert GlobalCounters.mem_used == before

class SpyAllocator(_MallocAllocator):
  """Counts real allocations and frees, and can be told to fail the next allocations."""
  def __init__(self) -> None:
    super().__init__()
    self.allocs, self.frees, self.failures_left = 0, 0, 0
  def _alloc(self, size, options):
    if self.failures_left:
      self.failures_left -= 1
      raise MemoryError("out of device memory")
    self.allocs += 1
    return super()._alloc(size, options)
  def _free(self, opaque, options): self.frees += 1

def test_lru_allocator_reuses_a_freed_allocation_of_the_same_size_and_options():
  alloc = SpyAllocator()
  first = alloc.alloc(64)
  alloc.free(first, 64)
  assert alloc.alloc(64) is first and alloc.allocs == 1 and alloc.frees == 0
  assert alloc.alloc(32) is not first and alloc.allocs == 2

def test_lru_allocator_frees_immediately_with_nolru():
  alloc = SpyAllocator()
  spec = BufferSpec(nolru=True)
  alloc.free(alloc.alloc(64, spec), 64, spec)
  assert alloc.frees == 1 and not alloc.cache[(64, spec)]

def test_lru_allocator_frees_immediately_with_env_lru_0():
  alloc = SpyAllocator()
  with env_override(LRU="0"): alloc.free(alloc.alloc(64), 64)
  assert alloc.frees == 1 and not alloc.cache[(64, None)]

def test_lru_allocator_drops_its_cache_and_retries_once_when_allocation_fails():
  alloc = SpyAllocator()
  alloc.free(alloc.alloc(16), 16)
  alloc.failures_left = 1
  assert alloc.alloc(64) is not None and alloc.frees == 1 and not alloc.cache[(16, None)]
  alloc.failures_left = 2
  with pytest.raises(MemoryError): alloc.alloc(128)  # only one retry

def test_free_cache_releases_every_cached_allocation():
  alloc = SpyAllocator()
  held = [(alloc.alloc(size), size) for size in (8, 8, 16)]
  for opaque, size in held: alloc.free(opaque, size)
  assert alloc.frees == 0
  alloc.free_cache()
  assert alloc.frees == 3 and all(not v for v in alloc.cache.values())

def test_allocation_size_must_be_positive():
  with pytest.raises(ValueError, match="positive"): SpyAllocator().alloc(0)

def test_malloc_allocations_are_16_byte_aligned():
  assert all(ctypes.addressof(_MallocAllocator()._alloc(n, BufferSpec())) % 16 == 0 for n in (1, 3, 17, 4096))

class SpyHostDevice(HostDevice):
  def __init__(self, name: str):
    Compiled.__init__(self, name, SpyAllocator(), None, None, CPUProgram)

def test_external_pointers_are_wrapped_and_never_freed():
  reg = registry(SPY=SpyHostDevice)
  backing = (ctypes.c_int32 * 4)(1, 2, 3, 4)
  old, device_module.Device = device_module.Device, reg
  try:
    buf = Buffer("SPY", 4, dtypes.int32).allocate(external_ptr=ctypes.addressof(backing))
    assert np.frombuffer(buf.as_buffer(), dtype=np.int32).tolist() == [1, 2, 3, 4]
    buf.copyin(memoryview(np.array([9, 9, 9, 9], dtype=np.int32).tobytes()))
    assert list(backing) == [9, 9, 9, 9]
    before = GlobalCounters.mem_used
    buf.deallocate()
    assert reg["SPY"].allocator.frees == 0 and GlobalCounters.mem_used == before and list(backing) == [9, 9, 9, 9]
  finally: device_module.Device = old

def test_zero_copy_buffer_is_the_memory_itself(host):
  buf = Buffer(host, 4, dtypes.uint8, initial_value=b"\x01\x02\x03\x04")
  buf.as_buffer(force_zero_copy=True)[0] = 7
  assert bytes(buf.as_buffer()) == b"\x07\x02\x03\x04"

def test_buffer_pickle_carries_its_contents(host):
  buf = Buffer(host, 3, dtypes.int16, initial_value=np.array([1, -2, 3], dtype=np.int16).tobytes())
  copy = pickle.loads(pickle.dumps(buf))
  assert copy is not buf and copy.dtype is dtypes.int16 and np.frombuffer(copy.as_buffer(), np.int16).tolist() == [1, -2, 3]

def test_buffer_repr_names_device_size_and_dtype(host):
  assert repr(Buffer(host, 3, dtypes.float32)) == "<buf real:False device:HOSTTEST size:3 dtype:dtypes.float>"

# *** native code ***

# int f(int *out, int value) { *out = value + value; }: machine code written by hand, so the loader is tested without a compiler.
DOUBLE_AND_STORE = {
  "x86_64": bytes([0x8d, 0x04, 0x36,   # lea eax, [rsi+rsi]
                   0x89, 0x07,         # mov [rdi], eax
                   0xc3]),             # ret
  "aarch64": b"".join(w.to_bytes(4, "little") for w in (0x0b010021,    # add w1, w1, w1
                                                        0xb9000001,    # str w1, [x0]
                                                        0xd65f03c0)),  # ret
}
HOST_ARCH = {"AMD64": "x86_64", "arm64": "aarch64"}.get(platform.machine(), platform.machine())

@pytest.mark.skipif(HOST_ARCH not in DOUBLE_AND_STORE, reason=f"no hand-written machine code for {HOST_ARCH}")
def test_cpu_program_runs_host_machine_code_with_pointer_and_int_arguments(host):
  program = CPUProgram("double_and_store", DOUBLE_AND_STORE[HOST_ARCH])
  out = Buffer(host, 1, dtypes.int32).allocate()
  elapsed = program(out._buf, vals=(21,), wait=True)
  assert np.frombuffer(out.as_buffer(), dtype=np.int32).tolist() == [42] and elapsed is not None and elapsed >= 0
  program(out._buf, vals=(-(2**30),))
  assert np.frombuffer(out.as_buffer(), dtype=np.int32).tolist() == [-(2**31)]

@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs Linux /proc")
@pytest.mark.skipif(HOST_ARCH not in DOUBLE_AND_STORE, reason=f"no hand-written machine code for {HOST_ARCH}")
def test_cpu_program_code_pages_are_read_execute_only():
  programs = [CPUProgram(f"p{i}", DOUBLE_AND_STORE[HOST_ARCH]) for i in range(4)]
  ranges = [(p.address, p.address + p.size) for p in programs]
  with open("/proc/self/maps") as f: maps = [(*(int(a, 16) for a in line.split()[0].split("-")), line.split()[1]) for line in f]
  overlapping = [perms for start, end, perms in maps if any(start < hi and lo < end for lo, hi in ranges)]
  assert len(overlapping) >= 1 and all(perms.startswith("r-x") for perms in overlapping)

class ProtectionRecorder:
  """Stands in for libc: forwards mmap/mprotect/munmap and records every protection requested."""
  def __init__(self, libc):
    self.libc, self.protections = libc, []
  def mmap(self, addr, size, prot, flags, fd, offset):
    self.protections.append(("mmap", prot))
    return self.libc.mmap(addr, size, prot, flags, fd, offset)
  def mprotect(self, addr, size, prot):
    self.protections.append(("mprotect", prot))
    return self.libc.mprotect(addr, size, prot)
  def munmap(self, addr, size): return self.libc.munmap(addr, size)

@pytest.mark.skipif(HOST_ARCH not in DOUBLE_AND_STORE, reason=f"no hand-written machine code for {HOST_ARCH}")
def test_cpu_program_never_asks_for_writable_and_executable_memory(monkeypatch, host):
  recorder = ProtectionRecorder(device_module._libc)
  monkeypatch.setattr(device_module, "_libc", recorder)
  program = CPUProgram("double_and_store", DOUBLE_AND_STORE[HOST_ARCH])
  out = Buffer(host, 1, dtypes.int32).allocate()
  program(out._buf, vals=(4,))
  assert np.frombuffer(out.as_buffer(), dtype=np.int32).tolist() == [8]
  assert [call for call, _ in recorder.protections] == ["mmap", "mprotect"]
  assert recorder.protections[0][1] == mmap.PROT_READ | mmap.PROT_WRITE
  assert recorder.protections[1][1] == mmap.PROT_READ | mmap.PROT_EXEC
  assert not any(prot & mmap.PROT_WRITE and prot & mmap.PROT_EXEC for _, prot in recorder.protections)

def test_cpu_program_refuses_empty_code():
  with pytest.raises(ValueError, match="empty code"): CPUProgram("nothing", b"")

# *** compilers ***

class CountingCompiler(Compiler):
  def __init__(self) -> None:
    super().__init__("counting-compiler v1 -O2")
    self.compiles = 0
  def compile(self, src: str) -> bytes:
    self.compiles += 1
    return ("compiled:" + src).encode()

@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
  monkeypatch.setenv("REFIMPL_CACHE_DIR", str(tmp_path))
  monkeypatch.delenv("CACHELEVEL", raising=False)
  monkeypatch.delenv("DISABLE_COMPILER_CACHE", raising=False)
  return tmp_path

def _only_entry(cache_dir):
  (entry,) = [p for p in cache_dir.rglob("*") if p.is_file()]
  return entry

def test_compile_cached_compiles_each_source_once(cache_dir):
  compiler = CountingCompiler()
  assert compiler.compile_cached("int x;") == compiler.compile_cached("int x;") == b"compiled:int x;"
  assert compiler.compiles == 1
  assert CountingCompiler().compile_cached("int x;") == b"compiled:int x;"  # a new process would hit the same entry

@pytest.mark.parametrize("damage", ["truncate", "flip_payload_byte", "garbage", "empty"])
def test_compiler_cache_rebuilds_a_damaged_entry_instead_of_using_it(cache_dir, damage):
  compiler = CountingCompiler()
  compiler.compile_cached("int y;")
  entry = _only_entry(cache_dir)
  data = entry.read_bytes()
  damaged = {"truncate": data[:-3], "flip_payload_byte": data[:-1] + bytes([data[-1] ^ 1]), "garbage": b"\x00" * 80,
             "empty": b""}[damage]
  entry.write_bytes(damaged)
  assert compiler.compile_cached("int y;") == b"compiled:int y;" and compiler.compiles == 2
  assert diskcache_get(compiler.cachekey, "int y;") == b"compiled:int y;"  # rebuilt entry is whole again

def test_compiler_cache_is_keyed_by_the_compiler_identity(cache_dir):
  first, second = CountingCompiler(), CountingCompiler()
  second.cachekey = "counting-compiler v2 -O2"
  first.compile_cached("int z;")
  second.compile_cached("int z;")
  assert first.compiles == second.compiles == 1

def test_compiler_without_cachekey_or_with_cachelevel_0_always_compiles(cache_dir):
  compiler = CountingCompiler()
  compiler.cachekey = None
  compiler.compile_cached("a")
  compiler.compile_cached("a")
  uncached = CountingCompiler()
  with env_override(CACHELEVEL="0"):
    uncached.compile_cached("b")
    uncached.compile_cached("b")
  assert compiler.compiles == 2 and uncached.compiles == 2 and not list(cache_dir.rglob("*"))

def _batch(compiler: CountingCompiler, srcs: list[str]) -> list[bytes]:
  """compile_batch_cached with CountingCompiler's compile of the sources joined (one lib for the batch)."""
  return compile_batch_cached(compiler, srcs, lambda todo: compiler.compile("\n".join(todo)))

def test_a_batch_lib_is_cached_once_and_read_back_as_one_object(cache_dir):
  """Rule (compile_batch_cached): a batch's lib is one cache entry, however many sources it holds (plus a small entry
  per source naming it); read back, its sources get the same bytes object; a source compiled alone is found first."""
  compiler = CountingCompiler()
  srcs = [f"int k{i};" for i in range(20)]
  libs = _batch(compiler, srcs)
  assert compiler.compiles == 1 and set(libs) == {b"compiled:" + "\n".join(srcs).encode()}
  entries = [p.read_bytes() for p in cache_dir.rglob("*") if p.is_file()]
  assert len(entries) == 21 and sum(libs[0] in e for e in entries) == 1
  again = _batch(CountingCompiler(), srcs)
  assert again == libs and len({id(lib) for lib in again}) == 1
  compiler.compile_cached("int k3;")
  assert _batch(CountingCompiler(), ["int k3;", "int k4;"]) == [b"compiled:int k3;", libs[0]]

def test_a_batch_whose_lib_entry_is_damaged_is_rebuilt(cache_dir):
  """Rule (compile_batch_cached, the disk cache's): a batch's lib entry that does not read back whole is a miss, so
  the batch is compiled again and every source gets the new lib."""
  compiler = CountingCompiler()
  libs = _batch(compiler, ["int a;", "int b;"])
  (entry,) = [p for p in cache_dir.rglob("*") if p.is_file() and libs[0] in p.read_bytes()]
  entry.write_bytes(b"garbage")
  assert _batch(compiler, ["int a;", "int b;"]) == libs and compiler.compiles == 2

# *** dtype support ***

def test_is_dtype_supported_is_false_for_devices_that_do_not_open():
  reg = registry(BROKEN=BrokenDevice)
  old, device_module.Device = device_module.Device, reg
  try: assert is_dtype_supported(dtypes.float32, "BROKEN") is False
  finally: device_module.Device = old

def test_is_dtype_supported_asks_the_device_about_the_scalar_type(host):
  assert all(is_dtype_supported(d, host) for d in SCALARS)
  assert is_dtype_supported(dtypes.float32.vec(4), host) and not is_dtype_supported(dtypes.imagef((2, 2)), host)

# *** profiling ***

PROFILED_RUN = f"""
import sys; sys.path.insert(0, {os.path.dirname(__file__)!r})
from test_device import DOUBLE_AND_STORE, HOST_ARCH
from refimpl.device import CPUProgram, cpu_profile
import ctypes
out = (ctypes.c_int32 * 1)()
CPUProgram("double_and_store", DOUBLE_AND_STORE[HOST_ARCH])(out, vals=(5,))
with cpu_profile("copy in", "HOST", is_copy=True): pass
"""

@pytest.mark.skipif(HOST_ARCH not in DOUBLE_AND_STORE, reason=f"no hand-written machine code for {HOST_ARCH}")
def test_profile_1_writes_a_chrome_trace_at_exit(tmp_path):
  trace_path = tmp_path / "trace.json"
  env = {**os.environ, "PROFILE": "1", "PROFILE_PATH": str(trace_path)}
  result = subprocess.run([sys.executable, "-c", PROFILED_RUN], env=env, capture_output=True, text=True, timeout=60)
  assert result.returncode == 0, result.stderr
  assert str(trace_path) in result.stdout
  events = json.loads(trace_path.read_text())["traceEvents"]
  spans = {(e["name"], e["tid"]) for e in events if e["ph"] == "X"}
  assert spans == {("double_and_store", "compute"), ("copy in", "copy")}
  assert all(e["dur"] >= 0 and e["ts"] > 0 for e in events if e["ph"] == "X")
  assert {e["args"]["name"] for e in events if e["ph"] == "M"} == {"CPU", "HOST"}
