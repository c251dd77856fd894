"""The WEBGPU backend (refimpl/backends/wgsl.py + ops_webgpu.py): what is specific to it. Saying what to install when
wgpu or an adapter is missing, the dtypes it declares and why, the renderings that keep a spec rule where WGSL or its
compiler would not (packed 8/16-bit stores that do not race with a neighbour's, constants that never form a WGSL
const-expression, float constants and operands the compiler cannot fold), grids wider than the adapter's dispatch limit,
programs with more buffers than it binds, and the known failure it declares. The spec's rules themselves are checked on
every backend in refimpl/conformance/rules/.

The missing-wgpu test runs without an adapter; every other test needs the WEBGPU device to open.
"""
import dataclasses
import sys

import numpy as np
import pytest

from refimpl.backends import ops_webgpu, wgsl
from refimpl.device import Device, DeviceUnavailable
from refimpl.dtype import dtypes
from refimpl.emulator.machine import emulate
from refimpl.ir import Ops, ProgramBuilder, ProgramError, dtype_to_str
from refimpl.lower import lower_for
from refimpl.testing.programs import assert_same, run

OPEN_ERROR = Device.open_error("WEBGPU")
i8, u8, i16, i32, u32, f32, bl = dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.int32, dtypes.uint32, dtypes.float32, dtypes.bool

def without_device(fn):
  """Marks a test that runs whether or not the WEBGPU device opens here."""
  fn.without_device = True
  return fn

@pytest.fixture(autouse=True)
def _needs_webgpu(request):
  if OPEN_ERROR is not None and not getattr(request.function, "without_device", False):
    pytest.skip(f"WEBGPU does not open here: {OPEN_ERROR}")


# ***** opening the device *****

@without_device
def test_without_wgpu_the_device_is_unavailable_with_the_install_line(monkeypatch):
  monkeypatch.setitem(sys.modules, "wgpu", None)  # `import wgpu` raises ImportError
  with pytest.raises(DeviceUnavailable, match=r"pip install 'refimpl\[webgpu\]'.*mesa-vulkan-drivers"):
    ops_webgpu.WebGPUDevice()

def test_supported_dtypes_are_tinygrads_webgpu_rule_plus_what_the_adapter_runs_and_each_refusal_has_a_reason():
  """bool, int8..uint32, float32 always; int64/uint64 with shader-int64; float64 and the narrow floats (lowered through
  float64 and int64) with shader-f64 as well."""
  dev = Device["WEBGPU"]
  every = {bl, *dtypes.ints, *dtypes.floats}
  int64 = "shader-int64" in dev.gpu.features
  want = {bl, i8, u8, i16, dtypes.uint16, i32, u32, f32} | (set(wgsl.INT64) if int64 else set())
  if int64 and "shader-f64" in dev.gpu.features: want |= set(wgsl.WITH_F64)
  assert {dt for dt in every if dev.supports_dtype(dt)} == want
  assert every - want == set(dev.unsupported_reasons) and all(dev.unsupported_reasons.values())


# ***** packed storage: 8/16-bit ints and bool share 32-bit words *****

@pytest.mark.parametrize("dt", [i8, u8, i16, bl], ids=dtype_to_str)
def test_neighbouring_packed_elements_stored_at_once_all_arrive(dt):
  """Rule: STORE writes its element only (no race between distinct elements). The elements of a word are stored by
  neighbouring invocations of one workgroup at once (lavapipe runs them as lanes of one SIMD operation, so a
  read-modify-write of the whole word keeps only one lane's element), and by every workgroup of the grid."""
  n, wg = 4096, 64
  b = ProgramBuilder(f"packed_{dt.itemsize}_{int(dtypes.is_unsigned(dt))}_{int(dt == bl)}")
  out, inp = b.global_buf(dt, n), b.global_buf(dt, n)
  i = b.alu(Ops.ADD, b.alu(Ops.MUL, b.gidx(0, n // wg), b.const(wg, i32)), b.lidx(0, wg))
  b.store(out, i, b.load(inp, i))
  x = (np.arange(n) % 2 == 0) if dt == bl else (np.arange(n) * 37 + 11).astype(np.dtype(dt.fmt))
  got = run("WEBGPU", b.build(), np.zeros(n, x.dtype), x)[0]
  assert_same(got, x, "stores")


# ***** constants: no WGSL const-expression, no folding by the compiler *****

def test_int_overflow_of_two_constants_wraps_instead_of_failing_to_compile():
  """Rule: int ADD wraps. INT_MAX + 1 of two constants would be a WGSL const-expression that fails shader creation."""
  b = ProgramBuilder("wrap_consts")
  out = b.global_buf(i32, 2)
  b.store(out, b.const(0, i32), b.alu(Ops.ADD, b.const(2**31 - 1, i32), b.const(1, i32)))
  b.store(out, b.const(1, i32), b.alu(Ops.MUL, b.const(-2**31, i32), b.const(-1, i32)))
  assert run("WEBGPU", b.build(), np.zeros(2, np.int32))[0].tolist() == [-2**31, -2**31]

def test_float_identities_of_constants_keep_nan_infinity_and_signed_zero():
  """Rule: float ops are IEEE. x - x is NaN for x = inf, x * 0 is -0 for negative x, -0 + 0 is +0, 1 / 0 is inf, and a
  NaN compares unequal to itself; a compiler that assumes finite math folds each of these differently."""
  b = ProgramBuilder("float_consts")
  out, flag = b.global_buf(f32, 5), b.global_buf(bl, 1)
  inf, nan = b.const(float("inf"), f32), b.const(float("nan"), f32)
  exprs = [b.alu(Ops.SUB, inf, inf), b.alu(Ops.MUL, b.const(-3.0, f32), b.const(0.0, f32)),
           b.alu(Ops.ADD, b.const(-0.0, f32), b.const(0.0, f32)), b.alu(Ops.RECIP, b.const(0.0, f32)),
           b.alu(Ops.SUB, b.const(1.0, f32), b.const(1.0, f32))]
  for k, e in enumerate(exprs): b.store(out, b.const(k, i32), e)
  b.store(flag, b.const(0, i32), b.alu(Ops.CMPNE, nan, nan))
  p = b.build()
  got, flag_got = run("WEBGPU", p, np.zeros(5, np.float32), np.zeros(1, np.bool_))
  assert_same(got, emulate(p, [np.zeros(5, np.float32), np.zeros(1, np.bool_)]).buffers[0], "float identities")
  assert flag_got.tolist() == [True]


def test_float_to_int_to_float_truncates_then_converts_and_keeps_no_negative_zero():
  """Rule: CAST float->int truncates, int->float converts the int. -0.5 -> 0 -> +0.0; a compiler that folds the pair
  into trunc(x) gives -0.0 (lavapipe did, found by the fuzzer)."""
  b = ProgramBuilder("f2i2f")
  out, inp = b.global_buf(f32, 4), b.global_buf(f32, 4)
  i = b.gidx(0, 4)
  b.store(out, i, b.cast(b.cast(b.load(inp, i), i32), f32))
  x = np.array([-0.5, -0.0, -1.5, 0.75], np.float32)
  assert_same(run("WEBGPU", b.build(), np.zeros(4, np.float32), x)[0], np.array([0.0, 0.0, -1.0, 0.0], np.float32), "f2i2f")


# ***** the grid and the bindings: the adapter's limits are not the program's *****

def test_a_grid_wider_than_the_dispatch_limit_runs_every_workgroup():
  per_dim = Device["WEBGPU"].gpu.limits["max-compute-workgroups-per-dimension"]
  n = per_dim + 7
  b = ProgramBuilder("wide_grid")
  out = b.global_buf(i32, n)
  i = b.gidx(0, n)
  b.store(out, i, i)
  assert (run("WEBGPU", b.build(), np.zeros(n, np.int32))[0] == np.arange(n)).all()
  assert len(Device["WEBGPU"].dispatches((n, 1, 1))) == 2

def test_more_buffers_than_the_adapter_binds_run_through_the_arenas():
  limit = Device["WEBGPU"].renderer.max_buffers
  nbuf = limit + 3
  b = ProgramBuilder("many_buffers")
  wide = dtypes.int64 if Device["WEBGPU"].supports_dtype(dtypes.int64) else i16  # all three arenas where int64 exists
  kinds = [i32] + [(u8, i32, wide)[k % 3] for k in range(1, nbuf)]
  bufs = [b.global_buf(dt, 4) for dt in kinds]
  i = b.gidx(0, 4)
  x = b.cast(b.load(bufs[0], i), u32)
  for k in range(1, nbuf): b.store(bufs[k], i, b.cast(b.alu(Ops.ADD, x, b.const(k, u32)), kinds[k]))
  p = b.build()
  assert wgsl.ARENA_TAG in Device["WEBGPU"].renderer.render("many_buffers", lower_for(p, Device["WEBGPU"].renderer))
  arrays = [np.array([5, 6, 7, 8], np.int32)] + [np.zeros(4, np.dtype(dt.fmt)) for dt in kinds[1:]]
  got = run("WEBGPU", p, *[x.copy() for x in arrays])
  want = emulate(p, [x.copy() for x in arrays]).buffers
  for k in range(nbuf): assert_same(got[k], want[k], f"buffer {k}")


# ***** what cannot be made to hold is declared *****

def test_sin_without_shader_int64_is_refused_as_a_capability_and_declared_a_known_failure():
  """SIN on float32 is decomposed with uint64 arithmetic: with shader-int64 it renders (and the conformance rule tests
  hold it to the spec); without, it is refused by capability, and the device declares the failing tests."""
  b = ProgramBuilder("sin")
  out = b.global_buf(f32, 1)
  b.store(out, b.const(0, i32), b.alu(Ops.SIN, b.const(1.0, f32)))
  p = b.build()
  with pytest.raises(ProgramError, match="uint64"):
    lower_for(p, dataclasses.replace(Device["WEBGPU"].renderer, has_int64=False, supported_dtypes=wgsl.SUPPORTED))
  assert "WEBGPU-SIN-f32" in wgsl.KNOWN_FAILURES
  if Device["WEBGPU"].renderer.has_int64:
    assert Device["WEBGPU"].known_failures == {}
    assert run("WEBGPU", p, np.zeros(1, np.float32))[0].dtype == np.float32
