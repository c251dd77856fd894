"""The GPU backend (refimpl/backends/opencl.py + ops_gpu.py): the spec's rules hold in the OpenCL C it builds, on the
platform it opens (PoCL on the CPU by default), and the grid (workgroups, __local memory, barriers) means what the emulator
says it means.

Expected values come from the rule each test names, computed with Python ints / fractions, IEEE floats, numpy's own
float16 and ml_dtypes' bfloat16/fp8 arithmetic (independent implementations), or the emulator's op semantics
(refimpl.emulator) as the oracle for the broad op x dtype and cast sweeps and whole programs. The device-selection and
no-platform tests run without an OpenCL device (pyopencl is faked); every other test needs the GPU device to open.
"""
import math
import os
import sys
import types
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from refimpl.device import CompileError, Device, DeviceUnavailable
from refimpl.dtype import dtypes, to_np, truncate
from refimpl.emulator.alu import allowed_results, exec_alu, exec_cast
from refimpl.emulator.machine import emulate
from refimpl.ir import INDEX_DTYPE, GroupOp, Ops, ProgramBuilder, ProgramError, alu_allows, dtype_to_str, elementwise
from refimpl.runner import Kernel
from refimpl.testing.compare import compare
from refimpl.testing.values import edge_values, from_bits, random_values, to_bits

try:
  import pyopencl as cl
except ImportError: cl = None

from refimpl.backends import opencl, ops_gpu

OPEN_ERROR = Device.open_error("GPU")

i32, f32, f64, f16, bf16, bl = dtypes.int32, dtypes.float32, dtypes.float64, dtypes.float16, dtypes.bfloat16, dtypes.bool
FLOATS = (f16, bf16, f32, f64)
ALL = (bl, *dtypes.ints, *dtypes.floats)

def without_device(fn):
  """Marks a test that runs whether or not the GPU device opens here."""
  fn.without_device = True
  return fn

@pytest.fixture(autouse=True)
def _needs_the_gpu(request):
  if OPEN_ERROR is not None and not getattr(request.function, "without_device", False):
    pytest.skip(f"GPU does not open here: {OPEN_ERROR}")

def run(program, *arrays, vals=()): return Kernel(program, "GPU")(*arrays, vals=vals)
def emu(program, *arrays, vals=()): return emulate(program, list(arrays), vals=vals).buffers

def ew(op, dt, *xs, out_dtype=None):
  """out[i] = op(xs...[i]) on GPU."""
  xs = [np.asarray(x) for x in xs]
  out = out_dtype or (bl if op in GroupOp.Comparison else dt)
  return run(elementwise(op, dt, n=len(xs[-1]), out_dtype=out_dtype), np.zeros(len(xs[-1]), to_np(out)), *xs)[0]

def a(values, dt): return np.array(values, dtype=to_np(dt))

def same_bits(got, want):
  """Exact comparison: bit for bit, every NaN one value."""
  got, want = np.asarray(got), np.asarray(want)
  if got.dtype.kind in "biu": return got == want
  with np.errstate(invalid="ignore"): g, w = got.astype(np.float64), want.astype(np.float64)
  return (to_bits(got) == to_bits(want)) | (np.isnan(g) & np.isnan(w))

def assert_same(got, want, what=""):
  ok = same_bits(got, want)
  bad = np.flatnonzero(~ok)[:5]
  assert ok.all(), f"{what}: {(~ok).sum()} lanes differ, e.g. {[(int(k), got[k], want[k]) for k in bad]}"

def wrap(v: int, dt) -> int:
  lo, bits = int(dtypes.min(dt)), 8 * dt.itemsize
  return (v - lo) % (1 << bits) + lo

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
  src = dev.renderer.render("k", elementwise(Ops.MULACC, f32, n=4, name="k"))
  assert "#pragma OPENCL FP_CONTRACT OFF" in src  # OpenCL contracts a*b+c by default

def test_compile_error_carries_the_build_log_and_the_numbered_source():
  with pytest.raises(CompileError) as e: gpu().compiler.compile("__kernel void k(__global int* o) {\n  o[0] = ;\n}\n")
  msg = str(e.value)
  assert "GPU: OpenCL build failed on" in msg and "error" in msg and "   2 |   o[0] = ;" in msg

def test_cache_key_names_the_platform_device_versions_and_options(monkeypatch):
  dev = gpu()
  key = ops_gpu.CLCompiler(dev).cachekey
  assert key == dev.compiler.cachekey and key.startswith("opencl-")
  monkeypatch.setattr(dev, "options", ())
  assert ops_gpu.CLCompiler(dev).cachekey != key
  monkeypatch.setattr(dev, "cl_device", types.SimpleNamespace(**{k: getattr(dev.cl_device, k) for k in ("name", "version")},
                                                              driver_version="other driver"))
  assert ops_gpu.CLCompiler(dev).cachekey not in (key, None)

def test_compiled_program_keeps_the_binary_and_rebuilds_from_source_when_the_binary_is_refused(monkeypatch, tmp_path):
  monkeypatch.setenv("REFIMPL_CACHE_DIR", str(tmp_path))
  dev = gpu()
  p = elementwise(Ops.MUL, f32, n=8)
  src = dev.renderer.render(p.name, p)
  comp = ops_gpu.CLCompiler(dev)
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
  x = np.arange(8, dtype=np.float32)
  for bad in (lib, ops_gpu.pack_lib(src, b"not a binary"), src.encode()):  # the binary, a refused one, a plain source
    prg = ops_gpu.CLProgram(dev, p.name, bad)
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

@pytest.mark.parametrize("dt", ALL, ids=dtype_to_str)
def test_every_supported_dtype_loads_and_stores_its_bits(dt):
  x = from_bits(np.arange(256, dtype=np.uint64) * np.uint64(0x0101010101010101), dt) if dt != bl else np.arange(256) % 3 == 0
  b = ProgramBuilder("copy")
  out, inp = b.global_buf(dt, 256), b.global_buf(dt, 256)
  i = b.gidx(0, 256)
  b.store(out, i, b.load(inp, i))
  got = run(b.build(), np.zeros(256, to_np(dt)), x)[0]
  assert (got == x).all() if dt == bl else (to_bits(got) == to_bits(x)).all()  # bits, signalling NaN payloads included

@pytest.mark.parametrize("dt", ALL, ids=dtype_to_str)
def test_constants_render_exactly(dt):
  vals = edge_values(dt)
  b = ProgramBuilder("consts")
  out = b.global_buf(dt, len(vals))
  for k, v in enumerate(vals.tolist()): b.store(out, b.const(k, i32), b.const(v, dt))
  assert_same(run(b.build(), np.zeros(len(vals), to_np(dt)))[0], vals, dt.name)  # -0.0, subnormals, MIN, MAX, inf

def test_selfcheck_reports_gpu_pass():
  from refimpl.selfcheck import check_device
  assert check_device("GPU")[0] == "PASS"


# ***** integers *****

@pytest.mark.parametrize("dt", dtypes.ints, ids=dtype_to_str)
def test_add_sub_mul_neg_mulacc_wrap_around_twos_complement(dt):
  lo, hi = int(dtypes.min(dt)), int(dtypes.max(dt))
  vals = sorted({lo, lo + 1, -1 if lo else 2, 0, 1, hi - 1, hi, hi // 2 + 1, lo // 2 - 1 if lo else hi // 3})
  pairs = [(x, y) for x in vals for y in vals]
  xa, ya = a([p[0] for p in pairs], dt), a([p[1] for p in pairs], dt)
  for op, f in ((Ops.ADD, lambda x, y: x + y), (Ops.SUB, lambda x, y: x - y), (Ops.MUL, lambda x, y: x * y)):
    assert ew(op, dt, xa, ya).tolist() == [wrap(f(x, y), dt) for x, y in pairs], op
  assert ew(Ops.NEG, dt, xa).tolist() == [wrap(-x, dt) for x, _ in pairs]
  assert ew(Ops.MULACC, dt, xa, ya, xa).tolist() == [wrap(x * y + x, dt) for x, y in pairs]

def test_narrow_unsigned_products_do_not_overflow_through_int_promotion():
  assert ew(Ops.MUL, dtypes.uint16, a([65535, 65535], dtypes.uint16), a([65535, 2], dtypes.uint16)).tolist() == [1, 65534]
  assert ew(Ops.MUL, dtypes.int16, a([-32768], dtypes.int16), a([-32768], dtypes.int16)).tolist() == [0]

@pytest.mark.parametrize("dt", dtypes.ints, ids=dtype_to_str)
def test_idiv_truncates_toward_zero_and_mod_takes_the_dividends_sign(dt):
  lo, hi = int(dtypes.min(dt)), int(dtypes.max(dt))
  xs = [v for v in (7, -7, 13, -13, 0, hi, lo, lo + 1, 1, -1) if lo <= v <= hi]
  ys = [v for v in (2, -2, 3, -3, 1, -1, hi, lo, 7) if lo <= v <= hi and v != 0]
  pairs = [(x, y) for x in xs for y in ys if not (x == lo and y == -1)]  # MIN / -1 is undefined
  q = [(abs(x) // abs(y)) * (1 if (x < 0) == (y < 0) else -1) for x, y in pairs]
  xa, ya = a([p[0] for p in pairs], dt), a([p[1] for p in pairs], dt)
  assert ew(Ops.IDIV, dt, xa, ya).tolist() == q
  assert ew(Ops.MOD, dt, xa, ya).tolist() == [x - qq * y for (x, y), qq in zip(pairs, q)]

@pytest.mark.parametrize("dt", dtypes.ints, ids=dtype_to_str)
def test_shl_works_on_the_bit_pattern_and_shr_is_arithmetic_on_signed_logical_on_unsigned(dt):
  # OpenCL masks shift counts to the promoted width; counts in [0, bits) of the dtype are below it, so nothing is masked
  bits = 8 * dt.itemsize
  xs = [int(v) for v in edge_values(dt)]
  pairs = [(x, s) for x in xs for s in range(bits)]
  xa, sa = a([p[0] for p in pairs], dt), a([p[1] for p in pairs], dt)
  assert ew(Ops.SHL, dt, xa, sa).tolist() == [wrap(x << s, dt) for x, s in pairs]
  assert ew(Ops.SHR, dt, xa, sa).tolist() == [x >> s for x, s in pairs]  # Python's >> is arithmetic; unsigned x >= 0


# ***** floats *****

@pytest.mark.parametrize("dt", FLOATS, ids=dtype_to_str)
def test_max_propagates_nan(dt):
  nan, inf = float("nan"), float("inf")
  x, y = a([nan, 1, nan, -inf, 2, 0.0, -0.0, inf], dt), a([1, nan, nan, 3, -5, -0.0, 0.0, -inf], dt)
  got = ew(Ops.MAX, dt, x, y).astype(np.float64)
  assert np.isnan(got[:3]).all() and got[3:].tolist() == [3, 2, 0, 0, inf]  # max(+0, -0): either zero

@pytest.mark.parametrize("dt", FLOATS, ids=dtype_to_str)
def test_compares_are_ieee_with_nan_and_signed_zero(dt):
  nan, inf = float("nan"), float("inf")
  pairs = [(nan, 1), (1, nan), (nan, nan), (-0.0, 0.0), (0.0, -0.0), (-inf, inf), (1, 1), (1, 2), (inf, inf)]
  x, y = a([p[0] for p in pairs], dt), a([p[1] for p in pairs], dt)
  assert ew(Ops.CMPLT, dt, x, y).tolist() == [p < q for p, q in pairs]    # Python floats compare by IEEE 754
  assert ew(Ops.CMPNE, dt, x, y).tolist() == [p != q for p, q in pairs]

def test_bool_ops_follow_the_spec_table():
  x, y = a([0, 0, 1, 1], bl), a([0, 1, 0, 1], bl)
  table = {Ops.ADD: lambda p, q: p or q, Ops.MUL: lambda p, q: p and q, Ops.MAX: lambda p, q: p or q,
           Ops.CMPLT: lambda p, q: (not p) and q, Ops.CMPNE: lambda p, q: p != q, Ops.XOR: lambda p, q: p != q,
           Ops.OR: lambda p, q: p or q, Ops.AND: lambda p, q: p and q}
  for op, f in table.items(): assert ew(op, bl, x, y).tolist() == [f(p, q) for p, q in zip(x, y)], op
  c = a([0, 0, 0, 0, 1, 1, 1, 1], bl)
  x2, y2 = np.tile(x, 2), np.tile(y, 2)
  assert ew(Ops.WHERE, bl, c, x2, y2).tolist() == [bool(p if r else q) for p, q, r in zip(x2, y2, c)]

def test_bool_buffers_read_any_nonzero_byte_as_true():
  # a bool buffer is uchar storage in OpenCL: a loaded byte is tested != 0 (a bool is 1 byte of 0 / 1 in numpy, so the
  # uint8 view of the input carries other nonzero bytes)
  raw = np.array([0, 1, 2, 255, 128, 0], np.uint8)
  got = ew(Ops.CAST, bl, raw.view(np.bool_), out_dtype=i32)
  assert got.tolist() == [0, 1, 1, 1, 1, 0]

def rne(q: Fraction, dt) -> float:
  """An exact rational rounded once to dt (float(Fraction) rounds correctly to float64; narrower: refimpl.dtype.truncate)."""
  f = float(q)
  if dt == f64: return f
  assert Fraction(f) == q, "example must be exact in float64"
  return truncate[dt](f)

@pytest.mark.parametrize("dt", FLOATS, ids=dtype_to_str)
def test_mulacc_is_fused_or_unfused(dt):
  # a*b = 1 + 2^-k1 + 2^-k2 + 2^-p is a tie at precision p: unfused rounds it (to even) and a*b+c gives 0; fused gives 2^-p
  p = dtypes.finfo(dt)[1] + 1
  k1, k2 = p // 2, p - p // 2
  av, bv = 1 + Fraction(1, 2**k1), 1 + Fraction(1, 2**k2)
  cv = -(1 + Fraction(1, 2**k1) + Fraction(1, 2**k2))
  fused, unfused = rne(av * bv + cv, dt), rne(Fraction(rne(av * bv, dt)) + cv, dt)
  assert fused != unfused
  got = float(ew(Ops.MULACC, dt, a([float(av)], dt), a([float(bv)], dt), a([float(cv)], dt))[0])
  assert got in (fused, unfused)

def test_float32_fdiv_sqrt_recip_are_correctly_rounded():
  rng = np.random.default_rng(5)
  x, y = random_values(f32, 3000, rng), random_values(f32, 3000, rng)
  with np.errstate(all="ignore"):
    assert_same(ew(Ops.FDIV, f32, x, y), x / y, "FDIV")  # numpy float32 ops are IEEE, correctly rounded
    assert_same(ew(Ops.SQRT, f32, x), np.sqrt(x), "SQRT")
    assert_same(ew(Ops.RECIP, f32, x), np.float32(1) / x, "RECIP")
    assert_same(ew(Ops.SQRT, f64, x.astype(np.float64)), np.sqrt(x.astype(np.float64)), "float64 SQRT")

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
  src = r.render(p.name, p)
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

def test_subnormals_are_kept():
  tiny32, tiny64 = np.float32(2.0**-149), 2.0**-1074
  assert ew(Ops.MUL, f32, a([2.0**-140, 3.0 * 2**-149], f32), a([2.0**-9, 1.0], f32)).tolist() == [tiny32, 3 * tiny32]
  assert ew(Ops.FDIV, f32, a([2.0**-126], f32), a([4.0], f32)).tolist() == [2.0**-128]
  assert ew(Ops.ADD, f64, a([tiny64, 2.0**-1022], f64), a([tiny64, -(2.0**-1023)], f64)).tolist() == [2 * tiny64, 2.0**-1023]
  assert ew(Ops.MUL, f16, a([2.0**-14], f16), a([2.0**-10], f16)).tolist() == [2.0**-24]

def test_float16_unary_ops_exhaustively_round_once():
  x = from_bits(np.arange(1 << 16), f16)
  with np.errstate(all="ignore"):  # numpy's float16 ops compute in float32 and round once: exact for sqrt and division
    assert_same(ew(Ops.SQRT, f16, x), np.sqrt(x), "SQRT")
    assert_same(ew(Ops.RECIP, f16, x), np.float16(1) / x, "RECIP")
    assert_same(ew(Ops.NEG, f16, x), -x, "NEG")

@pytest.mark.parametrize("dt, npt", [(f16, np.float16), (bf16, ml_dtypes.bfloat16)], ids=["float16", "bfloat16"])
def test_half_and_bfloat16_binary_ops_round_once(dt, npt):
  rng = np.random.default_rng(7)
  x, y = random_values(dt, 4000, rng), random_values(dt, 4000, rng)
  with np.errstate(all="ignore"):  # numpy float16 / ml_dtypes bfloat16 arithmetic: float32 result rounded once
    for op, f in ((Ops.ADD, np.add), (Ops.SUB, np.subtract), (Ops.MUL, np.multiply), (Ops.FDIV, np.divide)):
      assert_same(ew(op, dt, x, y), f(x, y).astype(npt), op.name)

def test_casts_round_once_to_nearest_even():
  # each value is just above a tie of the target; a conversion through an intermediate format would round to even instead
  assert float(ew(Ops.CAST, dtypes.int64, a([2**62 + 2**54 + 1], dtypes.int64), out_dtype=bf16)[0]) == 2.0**62 + 2**55
  assert float(ew(Ops.CAST, i32, a([2**30 + 2**22 + 1], i32), out_dtype=bf16)[0]) == 2.0**30 + 2**23
  assert float(ew(Ops.CAST, f64, a([1 + 2**-11 + 2**-40], f64), out_dtype=f16)[0]) == 1 + 2**-10
  big = a([2**64 - 1, 2**63 + 2**39 + 1, 2**53 + 1, 12345678901234567], dtypes.uint64)
  assert ew(Ops.CAST, dtypes.uint64, big, out_dtype=f32).tolist() == [truncate[f32](int(v)) for v in big]
  i64 = dtypes.int64
  assert ew(Ops.CAST, i64, a([2**53 + 1, -(2**53) - 3], i64), out_dtype=f64).tolist() == [2.0**53, -(2.0**53) - 4]
  assert ew(Ops.CAST, f64, a([1 + 2**-24, 1 + 2**-24 + 2**-50], f64), out_dtype=f32).tolist() == [1.0, 1 + 2**-23]

def test_casts_between_float_formats_match_numpy_and_ml_dtypes():
  rng = np.random.default_rng(3)
  x = np.concatenate([random_values(f32, 6000, rng), a([464, 465, 448, 61440, 61439, 65520, 65519, 3.4e38], f32)])
  for dt, npt in ((f16, np.float16), (bf16, ml_dtypes.bfloat16), (dtypes.fp8e4m3, ml_dtypes.float8_e4m3fn),
                  (dtypes.fp8e5m2, ml_dtypes.float8_e5m2)):
    with np.errstate(all="ignore"): want = x.astype(npt)  # single correct roundings from float32
    assert_same(ew(Ops.CAST, f32, x, out_dtype=dt), want, f"float32 -> {dt.name}")

def test_float_to_int_truncates_toward_zero():
  x = [-2.75, -0.5, -0.0, 0.5, 2.75, 126.9, -128.9]
  for src in (f16, f32, f64):
    for dst in (dtypes.int8, i32, dtypes.int64):
      assert ew(Ops.CAST, src, a(x, src), out_dtype=dst).tolist() == [math.trunc(float(v)) for v in a(x, src)]
  assert ew(Ops.CAST, f32, a([255.9, 0.99, 4294967040.0], f32), out_dtype=dtypes.uint32).tolist() == [255, 0, 4294967040]

def test_casts_to_bool_are_nonzero_tests():
  assert ew(Ops.CAST, f32, a([float("nan"), -0.0, 0.0, 1e-45, -float("inf")], f32), out_dtype=bl).tolist() == \
    [True, False, False, True, True]
  assert ew(Ops.CAST, i32, a([256, 0, -1], i32), out_dtype=bl).tolist() == [True, False, True]  # not the low bit
  assert ew(Ops.CAST, bl, a([True, False], bl), out_dtype=f16).tolist() == [1.0, 0.0]

@pytest.mark.parametrize("src, dst", [(f16, dtypes.int16), (f16, bf16), (bf16, dtypes.uint16), (dtypes.fp8e4m3, dtypes.uint8),
                                      (dtypes.fp8e5m2, dtypes.int8)], ids=dtype_to_str)
def test_bitcast_keeps_every_bit_pattern(src, dst):
  bits = np.arange(1 << (8 * src.itemsize))
  x = from_bits(bits, src)
  assert (to_bits(ew(Ops.BITCAST, src, x, out_dtype=dst)) == bits).all()  # NaN payloads and signalling NaNs included
  assert (to_bits(ew(Ops.BITCAST, dst, from_bits(bits, dst), out_dtype=src)) == bits).all()

def test_bitcast_of_32_and_64_bit_floats_keeps_bits():
  rng = np.random.default_rng(11)
  b32 = np.concatenate([rng.integers(0, 2**32, 2000, dtype=np.uint64), [0x7f800001, 0xffc00001, 0x80000000, 1]])
  b64 = np.concatenate([rng.integers(0, 2**63, 2000, dtype=np.uint64) * 2 + 1, [0x7ff0000000000001]]).astype(np.uint64)
  assert (ew(Ops.BITCAST, f32, from_bits(b32, f32), out_dtype=dtypes.uint32) == b32).all()
  assert (to_bits(ew(Ops.BITCAST, i32, from_bits(b32, i32), out_dtype=f32)) == b32).all()
  assert (ew(Ops.BITCAST, f64, from_bits(b64, f64), out_dtype=dtypes.uint64) == b64).all()
  assert (to_bits(ew(Ops.BITCAST, dtypes.int64, from_bits(b64, dtypes.int64), out_dtype=f64)) == b64).all()

def test_threefry_matches_the_random123_known_answers():
  # threefry2x32_20 known-answer vectors (Random123 kat_vectors): (ctr0, ctr1, key0, key1) -> (out0, out1); low word first
  kat = [((0, 0, 0, 0), (0x6b200159, 0x99ba4efe)), ((0xffffffff,) * 4, (0x1cb996fc, 0xbb002be7)),
         ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xc4923a9c, 0x483df7a0))]
  x = a([c1 << 32 | c0 for (c0, c1, _, _), _ in kat], dtypes.uint64)
  key = a([k1 << 32 | k0 for (_, _, k0, k1), _ in kat], dtypes.uint64)
  assert ew(Ops.THREEFRY, dtypes.uint64, x, key).tolist() == [o1 << 32 | o0 for _, (o0, o1) in kat]


# ***** EXP2 LOG2 SIN *****

def _transcendental_inputs(dt):
  """float16/bfloat16: every bit pattern; float32/float64: edge values, random patterns, and the ranges where each
  function does its work (exp2 near the overflow/underflow thresholds, sin at large arguments)."""
  if dt in (f16, bf16): return from_bits(np.arange(1 << 16), dt)
  rng = np.random.default_rng(13)
  e = 1 << (dtypes.finfo(dt)[0] - 1)
  parts = [edge_values(dt), random_values(dt, 6000, rng), rng.uniform(-e - 60, e + 4, 3000), rng.uniform(-10, 10, 3000),
           rng.uniform(0, 1e6, 1000), np.exp2(rng.uniform(-60, 120 if dt == f32 else 1000, 1000)) * rng.choice([-1, 1], 1000),
           np.arange(-40, 41)]
  with np.errstate(over="ignore"): return np.concatenate([p.astype(to_np(dt)) for p in parts])

@pytest.mark.parametrize("dt", FLOATS, ids=dtype_to_str)
def test_exp2_log2_sin_are_within_the_spec_bounds(dt):
  """refimpl.spec.ULP_BOUNDS (float32/float64 3/3/4 ulp, narrow 2/2/2) against the correctly rounded reference; special
  values exact (refimpl.testing.compare). float32/float64 use OpenCL's exp2/log2/sin; float16/bfloat16 are decomposed."""
  x = _transcendental_inputs(dt)
  n = len(x)
  ops = (Ops.EXP2, Ops.LOG2, Ops.SIN)
  b = ProgramBuilder(f"transcendental_{dt.name.replace(' ', '_')}")
  outs, inp = [b.global_buf(dt, n) for _ in ops], b.global_buf(dt, n)
  i = b.gidx(0, n)
  v = b.load(inp, i)
  for o, op in zip(outs, ops): b.store(o, i, b.alu(op, v))
  p = b.build()
  src = gpu().renderer.render(p.name, p)
  native = dt in (f32, f64) and gpu().renderer.native_transcendentals
  assert all((f"{name}(v" in src) == native for name in ("exp2", "log2", "sin"))
  got = run(p, *[np.zeros(n, to_np(dt)) for _ in ops], x)
  for op, g in zip(ops, got):
    verdict = compare(op, dt, [x], g)
    bad = np.flatnonzero(verdict.bad)[:5]
    assert verdict.ok, f"{op.name} {dt.name} ({verdict.rule}): {[(x[k], g[k], verdict.expected[k]) for k in bad]}"


# ***** every op and cast against the emulator's semantics *****

def _defined_inputs(op, dt, xs):
  """xs with every lane the spec leaves undefined replaced by a defined lane (the emulator's ALU says which)."""
  o = exec_alu(op, dt, *xs)
  if o.undefined is None: return xs
  ok = ~o.undefined
  return [np.where(ok, x, x[np.argmax(ok)]) for x in xs]

@pytest.mark.parametrize("dt", [bl, *dtypes.ints, f16, bf16, f32, f64], ids=dtype_to_str)
def test_every_alu_op_matches_the_emulator(dt):
  """One kernel per dtype computes every ALU op the spec defines on it; each result is an allowed result (exact ops bit for
  bit, MAX/MULACC from their allowed sets; EXP2/LOG2/SIN have their own tolerance test)."""
  n, rng = 512, np.random.default_rng(dt.priority * 31 + dt.itemsize)
  ops = [op for op in sorted(GroupOp.ALU - GroupOp.Transcendental, key=lambda o: o.value) if alu_allows(op, dt)]
  b = ProgramBuilder(f"all_ops_{dt.name.replace(' ', '_')}")
  bufs, inputs, arrays = [], [], []
  for op in ops:
    k = 1 if op in GroupOp.Unary else 2 if op in GroupOp.Binary else 3
    xs = _defined_inputs(op, dt, [random_values(bl if op is Ops.WHERE and j == 0 else dt, n, rng) for j in range(k)])
    out_dt = bl if op in GroupOp.Comparison else dt
    bufs.append((b.global_buf(out_dt, n), [b.global_buf(bl if x.dtype == np.bool_ else dt, n) for x in xs]))
    inputs.append(xs)
    arrays += [np.zeros(n, to_np(out_dt)), *xs]
  i = b.gidx(0, n)
  for op, (o, ib) in zip(ops, bufs): b.store(o, i, b.alu(op, *[b.load(x, i) for x in ib]))
  res = run(b.build(), *arrays)
  got = [res[sum(1 + len(xs) for xs in inputs[:j])] for j in range(len(ops))]
  for op, xs, g in zip(ops, inputs, got):
    ok = np.zeros(n, bool)
    for want in allowed_results(op, dt, *xs): ok |= same_bits(g, want)
    bad = np.flatnonzero(~ok)[:3]
    assert ok.all(), f"{op.name} {dt.name}: e.g. inputs {[[x[k] for x in xs] for k in bad]} gave {g[bad]}"

@pytest.mark.parametrize("src", ALL, ids=dtype_to_str)
def test_every_cast_from_a_dtype_matches_the_emulator(src):
  """CAST from src to every dtype (all patterns of an 8/16-bit src, edge and random values otherwise); float->int lanes the
  spec leaves undefined (NaN, inf, out of range) are replaced by 0 for that target."""
  bits = 8 * src.itemsize
  x = from_bits(np.arange(1 << bits), src) if src != bl and bits <= 16 else random_values(src, 3000, np.random.default_rng(bits))
  n = len(x)
  b = ProgramBuilder(f"casts_from_{src.name.replace(' ', '_')}")
  pairs = [(b.global_buf(d, n), b.global_buf(src, n), d) for d in ALL]
  i = b.gidx(0, n)
  for o, inp, d in pairs: b.store(o, i, b.cast(b.load(inp, i), d))
  arrays, wants = [], []
  for d in ALL:
    out = exec_cast(x, src, d)
    xd = x if out.undefined is None else np.where(out.undefined, np.zeros(1, x.dtype), x)
    arrays += [np.zeros(n, to_np(d)), xd]
    wants.append(exec_cast(xd, src, d).values)
  got = run(b.build(), *arrays)
  for d, g, w in zip(ALL, got[0::2], wants): assert_same(g, w, f"{src.name} -> {d.name}")


# ***** whole programs *****

def test_loop_accumulator_sums_rows_like_the_emulator():
  b = ProgramBuilder("row_sums")
  out, x = b.global_buf(f32, 8), b.global_buf(f32, 8 * 16)
  row = b.gidx(0, 8)
  acc = b.acc(b.const(0.0, f32))
  with b.loop(16) as k:
    v = b.load(x, b.alu(Ops.ADD, b.alu(Ops.MUL, row, b.const(16, i32)), k))
    b.assign(acc, b.alu(Ops.ADD, acc, b.alu(Ops.MUL, v, v)))
  b.store(out, row, acc)
  p = b.build()
  xs = np.random.default_rng(0).standard_normal(128).astype(np.float32)
  got = run(p, np.zeros(8, np.float32), xs)[0]
  assert_same(got, emu(p, np.zeros(8, np.float32), xs)[0], "row sums")
  want = np.zeros(8, np.float32)
  for k in range(16): want = want + xs.reshape(8, 16)[:, k] ** 2  # in order, float32, unfused
  assert_same(got, want, "row sums")

def test_gated_loads_and_stores_touch_only_gated_elements():
  b = ProgramBuilder("gated")
  out, x, lim = b.global_buf(i32, 16), b.global_buf(i32, 16), b.var("lim", 0, 16)
  i = b.gidx(0, 16)
  gate = b.alu(Ops.CMPLT, i, lim)
  v = b.load(x, i, gate=gate, alt=b.const(-7, i32))
  b.store(out, i, b.alu(Ops.ADD, v, b.const(100, i32)), gate=b.alu(Ops.CMPNE, i, b.const(3, i32)))
  p = b.build()
  xs, init = np.arange(16, dtype=np.int32) * 10, np.full(16, -1, np.int32)
  got = run(p, init, xs, vals=(9,))[0]
  assert got.tolist() == [-1 if k == 3 else (10 * k if k < 9 else -7) + 100 for k in range(16)]
  assert got.tolist() == emu(p, init, xs, vals=(9,))[0].tolist()

def test_if_blocks_and_define_var_loop_bounds():
  b = ProgramBuilder("if_loop")
  out, n = b.global_buf(i32, 32), b.var("n", 0, 32)
  with b.loop_uops(b.const(0, i32), n) as r:
    not_third = b.alu(Ops.CMPNE, b.alu(Ops.MOD, r, b.const(3, i32)), b.const(0, i32))
    with b.when(not_third): b.store(out, r, b.alu(Ops.MUL, r, r))
  p = b.build()
  assert run(p, np.zeros(32, np.int32), vals=(20,))[0].tolist() == [k * k if k < 20 and k % 3 else 0 for k in range(32)]

def test_vectors_load_compute_shuffle_and_store():
  b = ProgramBuilder("vec4")
  out, x = b.global_buf(f32, 32), b.global_buf(f32, 32)
  g = b.gidx(0, 8)
  base = b.alu(Ops.MUL, g, b.const(4, i32))
  v = b.load(x, base, count=4)
  w = b.alu(Ops.MUL, v, b.const((1.0, 2.0, 3.0, 4.0), f32.vec(4)))
  rev = b.gep(w, 3, 2, 1, 0)
  pair = b.vectorize(b.gep(rev, 0), b.gep(v, 0))
  b.store(out, base, rev)
  b.store(out, b.alu(Ops.ADD, base, b.const(0, i32)), b.gep(pair, 0, 1), gate=b.alu(Ops.CMPLT, g, b.const(2, i32)))
  p = b.build()
  xs = np.arange(32, dtype=np.float32) + 0.5
  got = run(p, np.zeros(32, np.float32), xs)[0]
  assert got.tolist() == emu(p, np.zeros(32, np.float32), xs)[0].tolist()
  quad = (xs.reshape(8, 4) * [1, 2, 3, 4])[:, ::-1].copy()
  quad[:2, 1] = xs.reshape(8, 4)[:2, 0]
  assert got.tolist() == quad.ravel().tolist()

def test_wmma_accumulates_like_the_emulator():
  N, M, K = 2, 3, 4
  b = ProgramBuilder("wmma")
  out, abuf, bbuf, cbuf = b.global_buf(f32, M * N), b.global_buf(f16, M * K), b.global_buf(f16, K * N), b.global_buf(f32, M * N)
  zero = b.const(0, INDEX_DTYPE)
  d = b.wmma(b.load(abuf, zero, count=M * K), b.load(bbuf, zero, count=K * N), b.load(cbuf, zero, count=M * N), (N, M, K))
  b.store(out, zero, d)
  p = b.build()
  rng = np.random.default_rng(4)
  av, bv, cv = (rng.standard_normal(s).astype(t) for s, t in ((M * K, np.float16), (K * N, np.float16), (M * N, np.float32)))
  got = run(p, np.zeros(M * N, np.float32), av, bv, cv)[0]
  assert_same(got, emu(p, np.zeros(M * N, np.float32), av, bv, cv)[0], "WMMA")


# ***** the grid: workgroups, local ids, __local memory, barriers *****

def test_gidx_is_the_workgroup_id_and_lidx_the_id_within_it_in_every_dimension():
  """Launch = global_size workgroups of local_size work items (tinygrad's convention): thread (g, l) writes
  g0 + 10 g1 + 100 g2 + 1000 l0 + 10000 l1 + 100000 l2 at its own linear index."""
  G, L = (3, 2, 2), (4, 2, 1)
  b = ProgramBuilder("ids3d")
  total = math.prod(G) * math.prod(L)
  out = b.global_buf(i32, total)
  g = [b.gidx(d, G[d]) for d in range(3)]
  lid = [b.lidx(d, L[d]) for d in range(2)]
  code, idx = b.const(0, i32), b.const(0, i32)
  for k, (u, weight) in enumerate(zip([*g, *lid], (1, 10, 100, 1000, 10000))):
    code = b.alu(Ops.ADD, code, b.alu(Ops.MUL, u, b.const(weight, i32)))
    stride = math.prod([*G, *L][:k])
    idx = b.alu(Ops.ADD, idx, b.alu(Ops.MUL, u, b.const(stride, i32)))
  b.store(out, idx, code)
  p = b.build()
  assert p.global_size == G and p.local_size == L
  got = run(p, np.full(total, -1, np.int32))[0]
  want = [g0 + 10 * g1 + 100 * g2 + 1000 * l0 + 10000 * l1
          for l1 in range(L[1]) for l0 in range(L[0]) for g2 in range(G[2]) for g1 in range(G[1]) for g0 in range(G[0])]
  assert got.tolist() == want
  assert got.tolist() == emu(p, np.full(total, -1, np.int32))[0].tolist()

def test_local_memory_is_one_array_per_workgroup():
  # every workgroup fills tmp with its own id, then reads a neighbour's slot after the barrier: it sees its own group's values
  G, L = 6, 8
  b = ProgramBuilder("local_per_group")
  out, tmp = b.global_buf(i32, G * L), b.local_buf(i32, L)
  g, lid = b.gidx(0, G), b.lidx(0, L)
  b.store(tmp, lid, b.alu(Ops.ADD, b.alu(Ops.MUL, g, b.const(100, i32)), lid))
  b.barrier()
  other = b.alu(Ops.SUB, b.const(L - 1, i32), lid)
  b.store(out, b.alu(Ops.ADD, b.alu(Ops.MUL, g, b.const(L, i32)), lid), b.load(tmp, other))
  p = b.build()
  got = run(p, np.zeros(G * L, np.int32))[0]
  assert got.tolist() == [100 * gg + (L - 1 - ll) for gg in range(G) for ll in range(L)]
  assert got.tolist() == emu(p, np.zeros(G * L, np.int32))[0].tolist()

def _tree_reduction(G: int, L: int, dt):
  """out[g] = sum of x[g*L : g*L+L], a workgroup tree: tmp[l] = x; barrier; for s = L/2 .. 1: tmp[l] += tmp[l+s] on the
  threads l < s (gated load and store), barrier; thread 0 stores tmp[0]."""
  b = ProgramBuilder(f"tree_sum_{dt.name.replace(' ', '_')}")
  out, x, tmp = b.global_buf(dt, G), b.global_buf(dt, G * L), b.local_buf(dt, L)
  g, lid = b.gidx(0, G), b.lidx(0, L)
  b.store(tmp, lid, b.load(x, b.alu(Ops.ADD, b.alu(Ops.MUL, g, b.const(L, i32)), lid)))
  b.barrier()
  s = L // 2
  while s >= 1:
    active = b.alu(Ops.CMPLT, lid, b.const(s, i32))
    mine, theirs = b.load(tmp, lid, gate=active), b.load(tmp, b.alu(Ops.ADD, lid, b.const(s, i32)), gate=active)
    b.store(tmp, lid, b.alu(Ops.ADD, mine, theirs), gate=active)
    b.barrier()
    s //= 2
  b.store(out, g, b.load(tmp, b.const(0, i32)), gate=b.alu(Ops.CMPLT, lid, b.const(1, i32)))
  return b.build()

@pytest.mark.parametrize("dt", [f32, i32, f16], ids=dtype_to_str)
def test_workgroup_tree_reduction_with_define_local_and_barriers_matches_the_emulator(dt):
  G, L = 16, 64
  p = _tree_reduction(G, L, dt)
  rng = np.random.default_rng(21)
  xs = random_values(dt, G * L, rng) if dt == i32 else (rng.standard_normal(G * L) * 8).astype(to_np(dt))
  got = run(p, np.zeros(G, to_np(dt)), xs)[0]
  assert_same(got, emu(p, np.zeros(G, to_np(dt)), xs)[0], "tree sum vs emulator")
  tree = xs.reshape(G, L).copy()
  while tree.shape[1] > 1:  # the same pairing, in the dtype (numpy: one rounding per add; ints wrap)
    h = tree.shape[1] // 2
    with np.errstate(over="ignore"): tree = (tree[:, :h] + tree[:, h:]).astype(to_np(dt))
  assert_same(got, tree[:, 0], "tree sum vs numpy")

def test_grid_with_vector_loads_gated_stores_and_a_var():
  """2D grid, float4 loads from global, a gated vector store into __local, a barrier, and a DEFINE_VAR limit."""
  G0, G1, L = 4, 3, 8
  n = G0 * G1 * L * 4
  b = ProgramBuilder("grid_vec")
  out, x, tmp, lim = b.global_buf(f32, n), b.global_buf(f32, n), b.local_buf(f32, L * 4), b.var("lim", 0, 1 << 20)
  g0, g1, lid = b.gidx(0, G0), b.gidx(1, G1), b.lidx(0, L)
  group = b.alu(Ops.ADD, b.alu(Ops.MUL, g1, b.const(G0, i32)), g0)
  base = b.alu(Ops.MUL, b.alu(Ops.ADD, b.alu(Ops.MUL, group, b.const(L, i32)), lid), b.const(4, i32))
  v = b.load(x, base, count=4)
  b.store(tmp, b.alu(Ops.MUL, lid, b.const(4, i32)), b.alu(Ops.MUL, v, b.const(2.0, f32.vec(4))))
  b.barrier()
  back = b.load(tmp, b.alu(Ops.MUL, b.alu(Ops.SUB, b.const(L - 1, i32), lid), b.const(4, i32)), count=4)
  b.store(out, base, back, gate=b.alu(Ops.CMPLT, base, lim))
  p = b.build()
  xs = np.arange(n, dtype=np.float32) * 0.25
  init = np.full(n, -1, np.float32)
  got = run(p, init, xs, vals=(n - 37,))[0]
  assert got.tolist() == emu(p, init, xs, vals=(n - 37,))[0].tolist()
  want = (xs.reshape(G0 * G1, L, 4)[:, ::-1, :] * 2).ravel()
  assert got[: n - 40].tolist() == want[: n - 40].tolist() and (got[n - 36:] == -1).all()

def test_workgroup_and_local_memory_limits_are_checked_before_building():
  r = gpu().renderer
  b = ProgramBuilder("too_wide")
  out = b.global_buf(i32, 1)
  lid = b.lidx(0, min(r.local_max[0], r.max_workgroup_size))
  lid1 = b.lidx(1, 2)
  b.store(out, b.const(0, i32), b.alu(Ops.ADD, lid, lid1), gate=b.alu(Ops.CMPNE, lid, lid))
  with pytest.raises(ProgramError, match=r"maximum workgroup size"): r.render("too_wide", b.build())
  b = ProgramBuilder("too_much_local")
  out, tmp = b.global_buf(i32, 1), b.local_buf(dtypes.int64, r.local_memory_bytes // 8 + 1)
  b.store(tmp, b.const(0, i32), b.const(1, dtypes.int64))
  b.barrier()
  b.store(out, b.const(0, i32), b.cast(b.load(tmp, b.const(0, i32)), i32))
  with pytest.raises(ProgramError, match=r"bytes of local memory"): r.render("too_much_local", b.build())


# ***** a device without cl_khr_fp64 *****

def test_without_fp64_nothing_needs_double_and_the_rest_still_runs():
  r = opencl.OpenCLRenderer("GPU", has_local=True, has_shared=True, global_max=ops_gpu.GLOBAL_MAX, has_fp64=False,
                            supported_dtypes=opencl.supported_dtypes(False))
  p = elementwise(Ops.THREEFRY, dtypes.uint64, n=4, name="tf_no_fp64")
  src = r.render(p.name, p)
  assert "double" not in src and "cl_khr_fp64" not in src
  x, key = a([0, 1, 2, 3], dtypes.uint64), a([5, 5, 5, 5], dtypes.uint64)
  got = _run_on(ops_gpu.GPUDevice("GPU"), p, src, [np.zeros(4, np.uint64), x, key])[0]
  assert got.tolist() == emu(p, np.zeros(4, np.uint64), x, key)[0].tolist()
  for dt in (f64, f16, bf16, dtypes.fp8e5m2):  # the narrow formats compute in double
    with pytest.raises(ProgramError, match=r"is not supported"): r.render("k", elementwise(Ops.CAST, dt, n=4, out_dtype=f32))
  b = ProgramBuilder("wmma32")
  out, av = b.global_buf(f32, 1), b.global_buf(f32, 1)
  zero = b.const(0, INDEX_DTYPE)
  v = b.load(av, zero)
  b.store(out, zero, b.wmma(v, v, v, (1, 1, 1)))
  with pytest.raises(CompileError, match=r"WMMA accumulates in double"): r.render("wmma32", b.build())
