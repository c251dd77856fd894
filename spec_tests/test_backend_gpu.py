"""The GPU backend (refimpl/backends/opencl.py + ops_gpu.py): what is specific to it. Choosing an OpenCL platform and
device (PoCL on the CPU by default) and saying what is missing, capabilities read from the device, build options that
relax nothing, the build log, the program cache, contexts and forks, OpenCL's uchar storage of bool, the double-precision
fallback for division and square root, native vs decomposed transcendentals, workgroup and local memory limits, and
devices without cl_khr_fp64. The spec's rules themselves, the grid, __local memory and barriers included, are checked on
every backend in refimpl/conformance/rules/ (test_grid.py among them).

The device-selection and no-platform tests run without an OpenCL device (pyopencl is faked); every other test needs the
GPU device to open.
"""
import dataclasses
import os
import sys
import types

import numpy as np
import pytest

from refimpl.device import CompileError, Device, DeviceUnavailable
from refimpl.dtype import dtypes
from refimpl.emulator.machine import emulate
from refimpl.ir import INDEX_DTYPE, Ops, ProgramBuilder, ProgramError, dtype_to_str, elementwise
from refimpl.lower import lower_for
from refimpl.testing.programs import a, assert_same, ew, require
from refimpl.testing.values import random_values

try:
  import pyopencl as cl
except ImportError: cl = None

from refimpl.backends import opencl, ops_gpu

OPEN_ERROR = Device.open_error("GPU")

i32, f32, f64, f16, bf16, bl = dtypes.int32, dtypes.float32, dtypes.float64, dtypes.float16, dtypes.bfloat16, dtypes.bool
FLOATS = (f16, bf16, f32, f64)

def without_device(fn):
  """Marks a test that runs whether or not the GPU device opens here."""
  fn.without_device = True
  return fn

@pytest.fixture(autouse=True)
def _needs_the_gpu(request):
  if OPEN_ERROR is not None and not getattr(request.function, "without_device", False):
    pytest.skip(f"GPU does not open here: {OPEN_ERROR}")

def gpu():
  dev = Device["GPU"]
  assert isinstance(dev, ops_gpu.GPUDevice)
  return dev


# ***** opening the device: platforms, selection, what is missing *****

def _fake_cl(monkeypatch, platforms):
  """pyopencl with get_platforms() -> platforms (a list, or an exception to raise)."""
  fake = types.SimpleNamespace(Error=Exception)
  def get_platforms():
    if isinstance(platforms, Exception): raise platforms
    return platforms
  fake.get_platforms = get_platforms
  monkeypatch.setattr(ops_gpu, "_cl", lambda: fake)
  return fake

def _platform(name, devices, vendor="v", version="OpenCL 3.0"):
  return types.SimpleNamespace(name=name, vendor=vendor, version=version, get_devices=lambda: devices)

def _device(name, vendor="v"): return types.SimpleNamespace(name=name, vendor=vendor)

@without_device
@pytest.mark.parametrize("platforms", [[], RuntimeError("clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR")],
                         ids=["empty", "raises"])
def test_no_opencl_platform_is_reported_with_what_to_install(monkeypatch, platforms):
  _fake_cl(monkeypatch, platforms)
  with pytest.raises(DeviceUnavailable, match=r"^GPU: no OpenCL platform found; install pocl-binary-distribution \(pip install "
                                             r"'refimpl\[gpu\]'\) or a vendor OpenCL driver"):
    ops_gpu.GPUDevice("GPU")

@without_device
def test_platforms_without_devices_count_as_no_platform(monkeypatch):
  _fake_cl(monkeypatch, [_platform("Empty Platform", [])])
  with pytest.raises(DeviceUnavailable, match=r"no OpenCL platform found.*platforms without devices: Empty Platform"):
    ops_gpu.select_device()

@without_device
def test_missing_pyopencl_is_reported_with_what_to_install(monkeypatch):
  monkeypatch.setitem(sys.modules, "pyopencl", None)  # import fails
  with pytest.raises(DeviceUnavailable, match=r"GPU: no OpenCL platform found; install pocl-binary-distribution.*"
                                             r"pyopencl does not import"):
    ops_gpu.GPUDevice("GPU")

@without_device
def test_default_is_pocl_first_and_a_platform_that_cannot_build_is_passed_over(monkeypatch):
  pocl = "Portable Computing Language"
  other, pocl_a, pocl_b = (_platform(n, [_device(f"{n} dev")]) for n in ("Vendor CL", pocl, pocl))
  _fake_cl(monkeypatch, [other, pocl_a, pocl_b])
  tried = []
  def probe(cl_, dev):
    tried.append(dev)
    return (None, "it cannot build a trivial kernel: x") if dev is pocl_a.get_devices()[0] else ("ctx", None)
  monkeypatch.setattr(ops_gpu, "_probe", probe)
  monkeypatch.delenv("GPU_PLATFORM", raising=False)
  monkeypatch.delenv("GPU_DEVICE", raising=False)
  assert ops_gpu.select_device()[:2] == (pocl_b, pocl_b.get_devices()[0])
  assert tried == [pocl_a.get_devices()[0], pocl_b.get_devices()[0]]  # PoCL platforms first, in order; the first that builds
  monkeypatch.setattr(ops_gpu, "_probe", lambda cl_, dev: (None, "it cannot build a trivial kernel: boom"))
  with pytest.raises(DeviceUnavailable, match=r"GPU: no usable OpenCL device: Portable Computing Language .*boom; .*Vendor CL"):
    ops_gpu.select_device()

@without_device
def test_env_chooses_platform_and_device_by_index_or_name(monkeypatch):
  devs = [_device("cpu-thing"), _device("gpu-thing", vendor="Acme")]
  p0, p1 = _platform("Portable Computing Language", [_device("pthread")]), _platform("Acme OpenCL", devs, vendor="Acme Inc")
  _fake_cl(monkeypatch, [p0, p1])
  monkeypatch.setattr(ops_gpu, "_probe", lambda cl_, dev: ("ctx", None))
  monkeypatch.setenv("GPU_PLATFORM", "acme")
  monkeypatch.setenv("GPU_DEVICE", "GPU-THING")
  assert ops_gpu.select_device()[:2] == (p1, devs[1])  # case-insensitive substrings of name or vendor
  monkeypatch.setenv("GPU_PLATFORM", "1")
  monkeypatch.setenv("GPU_DEVICE", "0")
  assert ops_gpu.select_device()[:2] == (p1, devs[0])  # indices
  monkeypatch.delenv("GPU_DEVICE")
  assert ops_gpu.select_device(index=1)[:2] == (p1, devs[1])  # "GPU:1"
  monkeypatch.setenv("GPU_PLATFORM", "nvidia")
  with pytest.raises(DeviceUnavailable, match=r"no OpenCL platform matches 'nvidia' \(there are 0: Portable Computing Language, "
                                             r"1: Acme OpenCL\)"):
    ops_gpu.select_device()

@without_device
def test_capabilities_follow_the_devices_fp_config_and_extensions(monkeypatch):
  """probe(): flushes_subnormals when CL_FP_DENORM is missing; float32 FDIV/RECIP/SQRT are inexact only with neither
  CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT nor fp64 (the double fallback); no fp64 -> no float64 and no narrow formats."""
  if cl is None: pytest.skip("pyopencl is not installed")
  cfg = cl.device_fp_config
  def dev(single, double, ext): return types.SimpleNamespace(
    extensions=ext, single_fp_config=single, double_fp_config=double, profile="FULL_PROFILE", max_work_item_sizes=[64, 8, 4],
    max_work_group_size=256, local_mem_size=32768)
  full = cfg.DENORM | cfg.INF_NAN | cfg.ROUND_TO_NEAREST | cfg.FMA
  r = ops_gpu.probe("GPU", dev(full | cfg.CORRECTLY_ROUNDED_DIVIDE_SQRT, full, "cl_khr_fp64 cl_khr_fp16"))
  assert (r.has_fp64, r.has_fp16, r.correct_div_sqrt, r.flushes_subnormals) == (True, True, True, False) and not r.inexact_ops
  assert r.local_max == (64, 8, 4) and r.max_workgroup_size == 256 and r.local_memory_bytes == 32768 and r.has_local
  assert r.supported_dtypes == opencl.ALL_SCALARS
  r = ops_gpu.probe("GPU", dev(full & ~cfg.DENORM, full, "cl_khr_fp64"))
  assert r.flushes_subnormals and not r.correct_div_sqrt and r.inexact_ops == frozenset()  # div/sqrt through double
  r = ops_gpu.probe("GPU", dev(full, 0, ""))
  assert r.inexact_ops == {Ops.FDIV, Ops.RECIP, Ops.SQRT} and not r.has_fp64 and not r.flushes_subnormals
  assert f64 not in r.supported_dtypes and f16 not in r.supported_dtypes and dtypes.fp8e4m3 not in r.supported_dtypes
  assert {bl, i32, dtypes.uint64, f32} <= r.supported_dtypes
  assert ops_gpu.build_options(dev(full, 0, "")) == ()
  assert ops_gpu.build_options(dev(full | cfg.CORRECTLY_ROUNDED_DIVIDE_SQRT, 0, "")) == (opencl.CORRECT_DIV_SQRT_OPTION,)


# ***** the device, its build and cache *****

def test_device_declares_its_capabilities_from_the_device():
  dev, r = gpu(), gpu().renderer
  d = dev.cl_device
  assert ops_gpu.GPUDevice.subprocess_safe and r.has_local and r.has_shared and r.global_max is not None
  assert r.local_max == tuple(d.max_work_item_sizes) and r.max_workgroup_size == d.max_work_group_size
  assert r.has_fp64 == ("cl_khr_fp64" in d.extensions.split())
  assert r.flushes_subnormals == (not d.single_fp_config & cl.device_fp_config.DENORM or
                                  (r.has_fp64 and not d.double_fp_config & cl.device_fp_config.DENORM))
  assert all(dev.supports_dtype(dt) for dt in (bl, *dtypes.ints, f32))
  assert all(dev.supports_dtype(dt) == r.has_fp64 for dt in (f64, f16, bf16, dtypes.fp8e4m3, dtypes.fp8e5m2))
  assert not dev.supports_dtype(dtypes.void) and not dev.supports_dtype(f32.ptr(4)) and not dev.supports_dtype(f32.vec(4))

def test_build_options_make_div_sqrt_correctly_rounded_and_relax_nothing():
  dev = gpu()
  offers = bool(dev.cl_device.single_fp_config & cl.device_fp_config.CORRECTLY_ROUNDED_DIVIDE_SQRT)
  assert (opencl.CORRECT_DIV_SQRT_OPTION in dev.options) == offers == dev.renderer.correct_div_sqrt
  assert not set(dev.options) & set(opencl.RELAXING_OPTIONS)  # no fast-math, mad, denorms-are-zero, finite-math
  src = dev.renderer.render("k", lower_for(elementwise(Ops.MULACC, f32, n=4, name="k"), dev.renderer))
  assert "#pragma OPENCL FP_CONTRACT OFF" in src  # OpenCL contracts a*b+c by default

def test_compile_error_carries_the_build_log_and_the_numbered_source():
  with pytest.raises(CompileError) as e: gpu().compiler.compile("__kernel void k(__global int* o) {\n  o[0] = ;\n}\n")
  msg = str(e.value)
  assert "GPU: OpenCL build failed on" in msg and "error" in msg and "   2 |   o[0] = ;" in msg

def test_cache_key_names_the_platform_device_versions_and_options(monkeypatch):
  dev = gpu()
  key = ops_gpu.CLCompiler(dev, keep_binary=True).cachekey
  assert key.startswith("opencl-") and dev.compiler.cachekey in (key, None)
  monkeypatch.setattr(dev, "options", ())
  assert ops_gpu.CLCompiler(dev, keep_binary=True).cachekey != key
  monkeypatch.setattr(dev, "cl_device", types.SimpleNamespace(**{k: getattr(dev.cl_device, k) for k in ("name", "version")},
                                                              driver_version="other driver"))
  assert ops_gpu.CLCompiler(dev, keep_binary=True).cachekey not in (key, None)

def test_on_pocl_the_compiler_reads_no_binary_and_leaves_caching_to_pocls_kernel_cache(monkeypatch, tmp_path):
  """Rule (CLCompiler): on PoCL the lib is the source alone (CL_PROGRAM_BINARIES, a second compile of every kernel, is
  never asked for) and refimpl's disk cache holds nothing; on other platforms the binary is kept and cached."""
  monkeypatch.setenv("REFIMPL_CACHE_DIR", str(tmp_path))
  dev = gpu()
  on_pocl = ops_gpu.POCL in dev.cl_platform.name.lower()
  assert (dev.compiler.cachekey is None) == on_pocl == (not ops_gpu.CLCompiler(dev).keep_binary)
  if not on_pocl: pytest.skip(f"not PoCL: {dev.cl_platform.name}")
  p = elementwise(Ops.MUL, f32, n=8)
  src = dev.renderer.render(p.name, lower_for(p, dev.renderer))
  asked: list[str] = []
  class Watched:  # the built program, noting what the compiler reads of it
    def __init__(self, prg): self.prg = prg
    def __getattr__(self, name): return asked.append(name) or getattr(self.prg, name)
  real = ops_gpu.CLCompiler.build
  monkeypatch.setattr(ops_gpu.CLCompiler, "build", lambda self, s, binary=b"": Watched(real(self, s, binary)))
  lib = dev.compiler.compile_cached(src)
  assert ops_gpu.unpack_lib(lib) == (src, b"") and "binaries" not in asked and not list(tmp_path.rglob("*"))
  monkeypatch.undo()
  dev._built.clear()  # the runtime builds the program from the lib's source
  _assert_squares(dev, ops_gpu.CLProgram(dev, p.name, lib))

def test_compiled_program_keeps_the_binary_and_rebuilds_from_source_when_the_binary_is_refused(monkeypatch, tmp_path):
  monkeypatch.setenv("REFIMPL_CACHE_DIR", str(tmp_path))
  dev = gpu()
  p = elementwise(Ops.MUL, f32, n=8)
  src = dev.renderer.render(p.name, lower_for(p, dev.renderer))
  comp = ops_gpu.CLCompiler(dev, keep_binary=True)  # on any platform: PoCL's default keeps none
  calls = []
  real = comp.compile
  monkeypatch.setattr(comp, "compile", lambda s: calls.append(s) or real(s))
  lib = comp.compile_cached(src)
  assert comp.compile_cached(src) == lib and len(calls) == 1  # cached
  text, binary = ops_gpu.unpack_lib(lib)
  assert text == src and len(binary) > 0
  (entry,) = [q for q in tmp_path.rglob("*") if q.is_file()]
  entry.write_bytes(entry.read_bytes()[:-7])  # truncated: detected (sha256) and rebuilt, never used
  assert ops_gpu.unpack_lib(comp.compile_cached(src))[0] == src and len(calls) == 2
  dev._built.clear()  # the program compile() just built is kept for the runtime: load these from their bytes
  for bad in (lib, ops_gpu.pack_lib(src, b"not a binary"), src.encode()):  # the binary, a refused one, a plain source
    _assert_squares(dev, ops_gpu.CLProgram(dev, p.name, bad))

def _assert_squares(dev, prg):
  """prg, the 8-lane elementwise MUL, squares 0..7 on the device (its first buffer the output)."""
  x = np.arange(8, dtype=np.float32)
  bufs = [dev.allocator.alloc(32) for _ in range(3)]
  for b_, arr in zip(bufs[1:], (x, x)): dev.allocator._copyin(b_, memoryview(arr))
  prg(*bufs, global_size=(8, 1, 1), local_size=(1, 1, 1), wait=True)
  out = np.zeros(8, np.float32)
  dev.allocator._copyout(memoryview(out), bufs[0])
  assert (out == x * x).all()

def test_a_context_is_never_used_across_a_fork():
  dev = ops_gpu.GPUDevice("GPU")
  assert dev.context.pid == os.getpid()
  dev._context.pid = -1  # as a forked child sees its parent's context
  with pytest.raises(RuntimeError, match=r"cannot be used after a fork"): dev.context
  dev.synchronize()  # a no-op in the child, never a call into the parent's queue


# ***** OpenCL C specifics: bool storage, division and square root, transcendentals *****

def test_bool_buffers_read_any_nonzero_byte_as_true():
  # a bool buffer is uchar storage in OpenCL: a loaded byte is tested != 0 (a bool is 1 byte of 0 / 1 in numpy, so the
  # uint8 view of the input carries other nonzero bytes)
  raw = np.array([0, 1, 2, 255, 128, 0], np.uint8)
  got = ew("GPU", Ops.CAST, bl, raw.view(np.bool_), out_dtype=i32)
  assert got.tolist() == [0, 1, 1, 1, 1, 0]

def test_float32_div_sqrt_through_double_are_correctly_rounded_without_the_build_option(monkeypatch):
  """The renderer's fallback for devices without CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT: compute in double, round once with
  convert_float_rte (exact: 53 >= 2*24 + 2). Built here without -cl-fp32-correctly-rounded-divide-sqrt."""
  dev = ops_gpu.GPUDevice("GPU")
  if not dev.renderer.has_fp64: pytest.skip("the fallback needs cl_khr_fp64")
  monkeypatch.setattr(dev, "options", ())
  r = opencl.OpenCLRenderer("GPU", has_local=True, has_shared=True, global_max=ops_gpu.GLOBAL_MAX, correct_div_sqrt=False)
  rng = np.random.default_rng(6)
  x, y = random_values(f32, 2000, rng), random_values(f32, 2000, rng)
  b = ProgramBuilder("div_sqrt_fallback")
  outs = [b.global_buf(f32, 2000) for _ in range(3)]
  xb, yb = b.global_buf(f32, 2000), b.global_buf(f32, 2000)
  i = b.gidx(0, 2000)
  vx, vy = b.load(xb, i), b.load(yb, i)
  for o, v in zip(outs, (b.alu(Ops.FDIV, vx, vy), b.alu(Ops.SQRT, vx), b.alu(Ops.RECIP, vx))): b.store(o, i, v)
  p = b.build()
  src = r.render(p.name, lower_for(p, r))
  assert src.count("convert_float_rte(") == 3
  got = _run_on(dev, p, src, [np.zeros(2000, np.float32)] * 3 + [x, y])
  with np.errstate(all="ignore"):
    for g, want, what in zip(got, (x / y, np.sqrt(x), np.float32(1) / x), ("FDIV", "SQRT", "RECIP")): assert_same(g, want, what)

def _run_on(dev, program, src, arrays):
  """Builds `src` on `dev` (its options, no cache) and runs it once; returns the buffers after."""
  prg = ops_gpu.CLProgram(dev, program.name, dev.compiler.compile(src))
  bufs = [dev.allocator.alloc(x.nbytes) for x in arrays]
  for buf, x in zip(bufs, arrays): dev.allocator._copyin(buf, memoryview(np.ascontiguousarray(x)).cast("B"))
  prg(*bufs, global_size=program.global_size, local_size=program.local_size, wait=True)
  outs = [np.empty_like(x) for x in arrays]
  for buf, o in zip(bufs, outs): dev.allocator._copyout(memoryview(o).cast("B"), buf)
  return outs

@pytest.mark.parametrize("dt", FLOATS, ids=dtype_to_str)
def test_exp2_log2_sin_are_opencls_on_float32_float64_and_decomposed_on_narrow_formats(dt):
  """float32/float64 EXP2/LOG2/SIN call OpenCL's exp2/log2/sin (while native_transcendentals); float16/bfloat16 are
  decomposed by refimpl.lower.transcendental. refimpl/conformance/rules/test_transcendental.py holds both to the spec's
  bounds. A NaN stays NaN through exp2 (the renderer's guard: PoCL folds exp2 of a NaN constant to 0)."""
  require("GPU", dt)
  r = gpu().renderer
  native = dt in (f32, f64) and r.native_transcendentals
  for op, name in ((Ops.EXP2, "exp2"), (Ops.LOG2, "log2"), (Ops.SIN, "sin")):
    src = r.render("k", lower_for(elementwise(op, dt, n=4, name="k"), r))
    assert (f" {name}(v" in src) == native, (op, dt)


# ***** limits *****

def test_workgroup_and_local_memory_limits_are_checked_before_rendering():
  r = gpu().renderer
  b = ProgramBuilder("too_wide")
  out = b.global_buf(i32, 1)
  lid = b.lidx(0, min(r.local_max[0], r.max_workgroup_size))
  lid1 = b.lidx(1, 2)
  b.store(out, b.const(0, i32), b.alu(Ops.ADD, lid, lid1), gate=b.alu(Ops.CMPNE, lid, lid))
  with pytest.raises(ProgramError, match=r"maximum workgroup size"): lower_for(b.build(), r)
  b = ProgramBuilder("too_much_local")
  out, tmp = b.global_buf(i32, 1), b.local_buf(dtypes.int64, r.local_memory_bytes // 8 + 1)
  b.store(tmp, b.const(0, i32), b.const(1, dtypes.int64))
  b.barrier()
  b.store(out, b.const(0, i32), b.cast(b.load(tmp, b.const(0, i32)), i32))
  with pytest.raises(ProgramError, match=r"bytes of local memory"): lower_for(b.build(), r)


# ***** a device without cl_khr_fp64 *****

def test_without_fp64_nothing_needs_double_and_the_rest_still_runs():
  r = opencl.OpenCLRenderer("GPU", has_local=True, has_shared=True, global_max=ops_gpu.GLOBAL_MAX, has_fp64=False,
                            supported_dtypes=opencl.supported_dtypes(False))
  p = elementwise(Ops.THREEFRY, dtypes.uint64, n=4, name="tf_no_fp64")
  src = r.render(p.name, lower_for(p, r))
  assert "double" not in src and "cl_khr_fp64" not in src
  x, key = a([0, 1, 2, 3], dtypes.uint64), a([5, 5, 5, 5], dtypes.uint64)
  got = _run_on(ops_gpu.GPUDevice("GPU"), p, src, [np.zeros(4, np.uint64), x, key])[0]
  assert got.tolist() == emulate(p, [np.zeros(4, np.uint64), x, key]).buffers[0].tolist()
  for dt in (f64, f16, bf16, dtypes.fp8e5m2):  # the narrow formats compute in double
    with pytest.raises(ProgramError, match=r"is not supported"): lower_for(elementwise(Ops.CAST, dt, n=4, out_dtype=f32), r)
  b = ProgramBuilder("wmma32")
  out, av = b.global_buf(f32, 1), b.global_buf(f32, 1)
  zero = b.const(0, INDEX_DTYPE)
  v = b.load(av, zero)
  b.store(out, zero, b.wmma(v, v, v, (1, 1, 1)))
  with pytest.raises(CompileError, match=r"WMMA accumulates in double"): lower_for(b.build(), r)


# ***** kernel names *****

OPENCL_BUILTINS = """
acos acosh acospi asin asinh asinpi atan atan2 atanh atanpi atan2pi cbrt ceil copysign cos cosh cospi erfc erf exp exp2
exp10 expm1 fabs fdim floor fma fmax fmin fmod fract frexp hypot ilogb ldexp lgamma lgamma_r log log2 log10 log1p logb mad
maxmag minmag modf nan nextafter pow pown powr remainder remquo rint rootn round rsqrt sin sincos sinh sinpi sqrt tan tanh
tanpi tgamma trunc half_cos half_divide half_exp half_exp2 half_exp10 half_log half_log2 half_log10 half_powr half_recip
half_rsqrt half_sin half_sqrt half_tan native_cos native_divide native_exp native_exp2 native_exp10 native_log native_log2
native_log10 native_powr native_recip native_rsqrt native_sin native_sqrt native_tan abs abs_diff add_sat hadd rhadd clamp
clz ctz mad_hi mad_sat max min mul_hi rotate sub_sat upsample popcount mad24 mul24 degrees mix radians step smoothstep sign
cross dot distance length normalize fast_distance fast_length fast_normalize isequal isnotequal isgreater isgreaterequal
isless islessequal islessgreater isfinite isinf isnan isnormal isordered isunordered signbit any all bitselect select vload2
vload4 vload8 vload16 vstore2 vstore4 vstore8 vstore16 vload_half vstore_half vloada_half vstorea_half shuffle shuffle2
vec_step barrier work_group_barrier mem_fence read_mem_fence write_mem_fence async_work_group_copy wait_group_events prefetch
atomic_add atomic_sub atomic_xchg atomic_inc atomic_dec atomic_cmpxchg atomic_min atomic_max atomic_and atomic_or atomic_xor
atom_add get_work_dim get_global_size get_global_id get_local_size get_local_id get_num_groups get_group_id
get_global_offset read_imagef write_imagef get_image_width printf convert_float convert_int as_int as_float
kernel global local constant private half float4 uchar uint ulong image2d_t sampler_t event_t size_t
""".split()

def test_every_opencl_builtin_name_is_a_valid_kernel_name():
  """Rule: any identifier the verifier accepts names a kernel on every backend. OpenCL C reserves its built-in functions
  and type names; the kernel's symbol is cstyle.kernel_symbol(name), and the runtime finds the kernel by it. All the
  kernels are built in one program here; one of them runs through the device's runtime."""
  from refimpl.backends.cstyle import kernel_symbol
  dev = gpu()
  progs = [dataclasses.replace(elementwise(Ops.ADD, i32, n=4), name=n) for n in OPENCL_BUILTINS]
  built = dev.compiler.build("\n".join(dev.renderer.render(p.name, lower_for(p, dev.renderer)) for p in progs))
  for p in progs: cl.Kernel(built, kernel_symbol(p.name))
  mad = progs[OPENCL_BUILTINS.index("mad")]
  prg = ops_gpu.CLProgram(dev, "mad", dev.compiler.compile(dev.renderer.render("mad", lower_for(mad, dev.renderer))))
  bufs = [dev.allocator.alloc(16) for _ in range(3)]
  x = np.arange(4, dtype=np.int32)
  for b_ in bufs[1:]: dev.allocator._copyin(b_, memoryview(x))
  prg(*bufs, global_size=mad.global_size, local_size=mad.local_size, wait=True)
  out = np.zeros(4, np.int32)
  dev.allocator._copyout(memoryview(out), bufs[0])
  assert out.tolist() == [0, 2, 4, 6]
