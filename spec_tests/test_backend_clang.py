"""The CLANG backend (refimpl/backends/cstyle.py + ops_clang.py): the spec's rules hold in the compiled C.

Expected values come from the rule each test names, computed with Python ints / fractions, IEEE floats, numpy's own
float16 and ml_dtypes' bfloat16/fp8 arithmetic (independent implementations), or the emulator's op semantics
(refimpl.emulator) as the oracle for the broad op x dtype and cast sweeps and whole programs.
"""
import math
import subprocess
import sys
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from refimpl.device import CompileError, Device, DeviceError, DeviceUnavailable
from refimpl.dtype import dtypes, to_np, truncate
from refimpl.emulator.alu import allowed_results, exec_alu, exec_cast
from refimpl.emulator.machine import emulate
from refimpl.ir import INDEX_DTYPE, GroupOp, Ops, ProgramBuilder, alu_allows, dtype_to_str, elementwise
from refimpl.lower import lower_grid_to_loops
from refimpl.runner import Kernel
from refimpl.testing.values import edge_values, from_bits, random_values, to_bits

try: Device["CLANG"]
except DeviceError as e: pytest.skip(f"CLANG does not open here: {e}", allow_module_level=True)

from refimpl.backends import ops_clang
from refimpl.backends.elf import parse_sections, parse_symbols

i32, f32, f64, f16, bf16, bl = dtypes.int32, dtypes.float32, dtypes.float64, dtypes.float16, dtypes.bfloat16, dtypes.bool
FLOATS = (f16, bf16, f32, f64)
ALL = (bl, *dtypes.ints, *dtypes.floats)

def run(program, *arrays, vals=()): return Kernel(program, "CLANG")(*arrays, vals=vals)

def ew(op, dt, *xs, out_dtype=None):
  """out[i] = op(xs...[i]) on CLANG."""
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


# ***** device, toolchain, cache *****

def test_device_declares_its_capabilities_truthfully():
  dev = Device["CLANG"]
  assert dev.renderer.global_max is None and not dev.renderer.has_local and ops_clang.ClangDevice.subprocess_safe
  assert all(dev.supports_dtype(dt) for dt in ALL)
  assert not dev.supports_dtype(dtypes.void) and not dev.supports_dtype(f32.ptr(4))

@pytest.mark.parametrize("dt", ALL, ids=dtype_to_str)
def test_every_supported_dtype_loads_and_stores_its_bits(dt):
  x = from_bits(np.arange(256, dtype=np.uint64) * np.uint64(0x0101010101010101), dt) if dt != bl else np.arange(256) % 3 == 0
  b = ProgramBuilder("copy")
  out, inp = b.global_buf(dt, 256), b.global_buf(dt, 256)
  i = b.gidx(0, 256)
  b.store(out, i, b.load(inp, i))
  got = run(b.build(), np.zeros(256, to_np(dt)), x)[0]
  assert (got == x).all() if dt == bl else (to_bits(got) == to_bits(x)).all()  # bits, NaN payloads included

@pytest.mark.parametrize("dt", ALL, ids=dtype_to_str)
def test_constants_render_exactly(dt):
  vals = edge_values(dt)
  b = ProgramBuilder("consts")
  out = b.global_buf(dt, len(vals))
  for k, v in enumerate(vals.tolist()): b.store(out, b.const(k, i32), b.const(v, dt))
  assert_same(run(b.build(), np.zeros(len(vals), to_np(dt)))[0], vals, dt.name)  # -0.0, subnormals, MIN, MAX, inf

def test_missing_clang_is_reported_with_what_to_install(monkeypatch, tmp_path):
  monkeypatch.setenv("PATH", str(tmp_path))
  monkeypatch.setattr(ops_clang, "_ziglang_command", lambda: None)
  with pytest.raises(DeviceUnavailable, match=r"CLANG: no clang found; install clang or `pip install ziglang` "
                                             r"\(included in refimpl\[clang\]\)"):
    ops_clang.ClangDevice("CLANG")

def test_ziglang_clang_is_the_fallback_without_a_system_clang(monkeypatch, tmp_path):
  monkeypatch.setenv("PATH", str(tmp_path))
  zig = ops_clang._ziglang_command()
  if zig is None:
    with pytest.raises(DeviceUnavailable): ops_clang.find_clang()
    return
  assert ops_clang.find_clang() == (zig, "zig")
  assert ops_clang.ClangCompiler().compile("void k(int* restrict o) { o[0] = 1; }").startswith(b"\x7fELF")

def test_compile_error_carries_clang_diagnostics_and_the_numbered_source():
  with pytest.raises(CompileError) as e: Device["CLANG"].compiler.compile("void k(int* o) {\n  o[0] = ;\n}\n")
  msg = str(e.value)
  assert "CLANG: clang failed" in msg and "error" in msg and "expected expression" in msg and "   2 |   o[0] = ;" in msg

def test_cache_key_names_the_compiler_flags_and_target():
  a_, b_ = ops_clang.ClangCompiler(), ops_clang.ClangCompiler()
  assert a_.cachekey == b_.cachekey and a_.cachekey.startswith("clang-")
  assert ops_clang.ClangCompiler(native=False).cachekey != a_.cachekey
  assert ops_clang.ClangCompiler(arch="aarch64" if a_.arch == "x86_64" else "x86_64").cachekey != a_.cachekey

def test_cache_rebuilds_a_corrupted_entry(monkeypatch, tmp_path):
  monkeypatch.setenv("REFIMPL_CACHE_DIR", str(tmp_path))
  comp = ops_clang.ClangCompiler()
  calls = []
  real = comp.compile
  monkeypatch.setattr(comp, "compile", lambda src: calls.append(src) or real(src))
  prog = elementwise(Ops.MUL, f32, n=8)
  src = Device["CLANG"].renderer.render(prog.name, lower_grid_to_loops(prog))
  lib = comp.compile_cached(src)
  assert len(calls) == 1 and comp.compile_cached(src) == lib and len(calls) == 1  # cached
  (entry,) = [p for p in tmp_path.rglob("*") if p.is_file()]
  data = bytearray(entry.read_bytes())
  data[-40] ^= 0xff  # flip bits inside the object
  entry.write_bytes(bytes(data))
  assert comp.compile_cached(src) == lib and len(calls) == 2  # detected and rebuilt, never returned damaged
  entry.write_bytes(entry.read_bytes()[:30])  # truncated
  assert comp.compile_cached(src) == lib and len(calls) == 3
  x = np.arange(8, dtype=np.float32)
  out = np.zeros(8, np.float32)
  ops_clang.ClangProgram(prog.name, comp.compile_cached(src))(out.ctypes.data, x.ctypes.data, x.ctypes.data)
  assert (out == x * x).all()

def test_batch_compiles_many_kernels_in_one_clang_call(monkeypatch, tmp_path):
  monkeypatch.setenv("REFIMPL_CACHE_DIR", str(tmp_path))
  comp, r = ops_clang.ClangCompiler(), Device["CLANG"].renderer
  progs = [elementwise(op, i32, n=4, name=f"k_{op.name.lower()}") for op in (Ops.ADD, Ops.SUB, Ops.MUL)]
  srcs = [r.render(p.name, lower_grid_to_loops(p)) for p in progs]
  calls = []
  real = comp.compile
  monkeypatch.setattr(comp, "compile", lambda src: calls.append(src) or real(src))
  libs = comp.compile_batch(srcs)
  assert len(calls) == 1 and comp.compile_batch(srcs) == libs and len(calls) == 1  # then all cached
  x, y = np.array([1, 2, 3, 4], np.int32), np.array([5, 6, 7, 8], np.int32)
  for p, lib, want in zip(progs, libs, (x + y, x - y, x * y)):
    out = np.zeros(4, np.int32)
    ops_clang.ClangProgram(p.name, lib)(out.ctypes.data, x.ctypes.data, y.ctypes.data)
    assert (out == want).all()

def test_selfcheck_reports_clang_pass():
  from refimpl.selfcheck import check_device
  assert check_device("CLANG")[0] == "PASS"


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
  # 65535 * 65535 overflows a C int: the rendering must multiply in unsigned int
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
  bits = 8 * dt.itemsize
  xs = [int(v) for v in edge_values(dt)]
  pairs = [(x, s) for x in xs for s in range(bits)]
  xa, sa = a([p[0] for p in pairs], dt), a([p[1] for p in pairs], dt)
  assert ew(Ops.SHL, dt, xa, sa).tolist() == [wrap(x << s, dt) for x, s in pairs]
  assert ew(Ops.SHR, dt, xa, sa).tolist() == [x >> s for x, s in pairs]  # Python's >> is arithmetic; unsigned x >= 0
  if dt == i32: assert ew(Ops.SHL, dt, a([1], dt), a([31], dt)).tolist() == [-(2**31)]

SANITIZE = ["-fsanitize=signed-integer-overflow,shift", "-fsanitize-trap=signed-integer-overflow,shift"]
RUN_OBJECT = """import sys, numpy as np
from refimpl.backends.ops_clang import ClangProgram
x = np.load(sys.argv[2])
ClangProgram(sys.argv[3], open(sys.argv[1], 'rb').read())(*[a.ctypes.data for a in x])
"""

def _run_sanitized(tmp_path, src: str, name: str, arrays: list[np.ndarray]) -> int:
  comp = ops_clang.ClangCompiler()
  comp.args = comp.args[:-6] + SANITIZE + comp.args[-6:]  # before "-c -x c - -o -"
  (tmp_path / "k.o").write_bytes(comp.compile(src))
  np.save(tmp_path / "x.npy", np.stack(arrays))
  return subprocess.run([sys.executable, "-c", RUN_OBJECT, str(tmp_path / "k.o"), str(tmp_path / "x.npy"), name],
                        capture_output=True, timeout=120).returncode

def test_rendered_integer_code_has_no_signed_overflow_or_shift_ub(tmp_path):
  """UBSan in trap mode (no runtime) on the rendered code at INT_MIN/INT_MAX: nothing may trap. A naive C `a + b` with
  the same inputs and flags does trap, so the check can fail."""
  b = ProgramBuilder("wrap_ub")
  out = [b.global_buf(i32, 4) for _ in range(6)]
  x, y = b.global_buf(i32, 4), b.global_buf(i32, 4)
  i = b.gidx(0, 4)
  vx, vy = b.load(x, i), b.load(y, i)
  for o, v in zip(out, (b.alu(Ops.ADD, vx, vy), b.alu(Ops.SUB, vx, vy), b.alu(Ops.MUL, vx, vy), b.alu(Ops.NEG, vx),
                        b.alu(Ops.MULACC, vx, vy, vy), b.alu(Ops.SHL, vx, b.const(31, i32)))):
    b.store(o, i, v)
  p = lower_grid_to_loops(b.build())
  xs = a([2**31 - 1, -2**31, -2**31, 3], i32), a([1, 1, -1, 2**30], i32)
  src = Device["CLANG"].renderer.render(p.name, p)
  assert _run_sanitized(tmp_path, src, p.name, [np.zeros(4, np.int32)] * 6 + list(xs)) == 0
  naive = "void naive(int* restrict o, int* restrict x, int* restrict y) { for (int i = 0; i < 4; i++) o[i] = x[i] + y[i]; }"
  assert _run_sanitized(tmp_path, naive, "naive", [np.zeros(4, np.int32), *xs]) != 0


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
  assert ew(Ops.MULACC, bl, x2, y2, c).tolist() == [bool((p and q) or r) for p, q, r in zip(x2, y2, c)]
  assert ew(Ops.WHERE, bl, c, x2, y2).tolist() == [bool(p if r else q) for p, q, r in zip(x2, y2, c)]

def rne(q: Fraction, dt) -> float:
  """An exact rational rounded once to dt: float(Fraction) rounds correctly to float64; narrower dtypes take values
  exact in float64 and round them once with refimpl.dtype.truncate."""
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
    assert_same(ew(Ops.ADD, f64, x.astype(np.float64), y.astype(np.float64)), x.astype(np.float64) + y.astype(np.float64),
                "float64 ADD")

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
  assert float(ew(Ops.CAST, dtypes.uint64, a([2**63 + 2**55 + 1], dtypes.uint64), out_dtype=bf16)[0]) == 2.0**63 + 2**56
  assert float(ew(Ops.CAST, f64, a([1 + 2**-11 + 2**-40], f64), out_dtype=f16)[0]) == 1 + 2**-10
  assert float(ew(Ops.CAST, f64, a([1 + 2**-8 + 2**-40], f64), out_dtype=bf16)[0]) == 1 + 2**-7
  big = a([2**64 - 1, 2**63 + 2**39 + 1, 2**53 + 1, 12345678901234567], dtypes.uint64)
  assert ew(Ops.CAST, dtypes.uint64, big, out_dtype=f32).tolist() == [truncate[f32](int(v)) for v in big]

def test_casts_between_float_formats_match_numpy_and_ml_dtypes():
  rng = np.random.default_rng(3)
  x = np.concatenate([random_values(f32, 6000, rng), a([464, 465, 448, 61440, 61439, 65520, 65519, 3.4e38], f32)])
  for dt, npt in ((f16, np.float16), (bf16, ml_dtypes.bfloat16), (dtypes.fp8e4m3, ml_dtypes.float8_e4m3fn),
                  (dtypes.fp8e5m2, ml_dtypes.float8_e5m2)):
    with np.errstate(all="ignore"): want = x.astype(npt)  # single correct roundings from float32
    assert_same(ew(Ops.CAST, f32, x, out_dtype=dt), want, f"float32 -> {dt.name}")
    src = from_bits(np.arange(1 << (8 * dt.itemsize)), dt)
    assert_same(ew(Ops.CAST, dt, src, out_dtype=f32), src.astype(np.float32), f"{dt.name} -> float32 (exhaustive)")

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
                                      (dtypes.fp8e5m2, dtypes.int8), (dtypes.fp8e4m3, dtypes.fp8e5m2)],
                         ids=dtype_to_str)
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

def test_threefry_matches_the_random123_known_answers():
  # threefry2x32_20 known-answer vectors (Random123 kat_vectors): (ctr0, ctr1, key0, key1) -> (out0, out1); low word first
  kat = [((0, 0, 0, 0), (0x6b200159, 0x99ba4efe)), ((0xffffffff,) * 4, (0x1cb996fc, 0xbb002be7)),
         ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xc4923a9c, 0x483df7a0))]
  x = a([c1 << 32 | c0 for (c0, c1, _, _), _ in kat], dtypes.uint64)
  key = a([k1 << 32 | k0 for (_, _, k0, k1), _ in kat], dtypes.uint64)
  assert ew(Ops.THREEFRY, dtypes.uint64, x, key).tolist() == [o1 << 32 | o0 for _, (o0, o1) in kat]

ULP_BOUND = {Ops.EXP2: 3, Ops.LOG2: 3, Ops.SIN: 4}  # the spec's float32 bounds (DESIGN.md)

def test_exp2_log2_sin_are_decomposed_within_the_spec_bounds():
  rng = np.random.default_rng(2)
  x = np.concatenate([rng.uniform(-140, 130, 1500), rng.uniform(1e-30, 1e4, 1500) * rng.choice([-1, 1], 1500),
                      [0, -0.0, 1e30, float("inf"), -float("inf"), float("nan"), 3.0, 0.5]]).astype(np.float32)
  refs = {Ops.EXP2: lambda v: 2.0 ** v, Ops.LOG2: math.log2, Ops.SIN: math.sin}
  for op, ref in refs.items():
    got = ew(op, f32, x)
    for v, g in zip(x.tolist(), got.tolist()):
      if math.isnan(v) or (op is Ops.SIN and math.isinf(v)) or (op is Ops.LOG2 and v < 0):
        assert math.isnan(g), (op, v, g)
        continue
      if op is Ops.LOG2 and v == 0: want = -math.inf
      elif (op is Ops.LOG2 and v == math.inf) or (op is Ops.EXP2 and v > 128): want = math.inf
      else:
        try: want = ref(v)
        except OverflowError: want = math.inf
      if math.isinf(want) or want == 0 or g == want:
        assert g == want or (want == 0 and abs(g) <= 2**-149), (op, v, g, want)
        continue
      ulp = float(np.spacing(np.float32(abs(want))))
      assert abs(g - want) <= ULP_BOUND[op] * ulp, (op, v, g, want)

def test_no_libm_or_compiler_runtime_call_remains():
  b = ProgramBuilder("needs_nothing")
  outs = {dt: b.global_buf(dt, 4) for dt in (f32, f64, f16, bf16)}
  x = b.global_buf(dtypes.uint64, 4)
  i = b.gidx(0, 4)
  v = b.load(x, i)
  for dt, o in outs.items(): b.store(o, i, b.alu(Ops.SQRT, b.cast(v, dt)))
  p = lower_grid_to_loops(b.build())
  obj = Device["CLANG"].compiler.compile(Device["CLANG"].renderer.render(p.name, p))
  undefined = [s.name for s in parse_symbols(obj, parse_sections(obj)[1])[1:] if s.shndx == 0]
  assert undefined == []


# ***** every op and cast against the emulator's semantics *****

def _defined_inputs(op, dt, xs):
  """xs with every lane the spec leaves undefined replaced by a defined lane (the emulator's ALU says which)."""
  o = exec_alu(op, dt, *xs)
  if o.undefined is None: return xs
  ok = ~o.undefined
  return [np.where(ok, x, x[np.argmax(ok)]) for x in xs]

@pytest.mark.parametrize("dt", [bl, *dtypes.ints, f16, bf16, f32, f64], ids=dtype_to_str)
def test_every_alu_op_matches_the_emulator(dt):
  """One kernel per dtype computes every ALU op the spec defines on it; each result is an allowed result (exact ops
  bit for bit, MAX/MULACC from their allowed sets; EXP2/LOG2/SIN have their own tolerance test)."""
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
  """CAST from src to every dtype (all patterns of an 8/16-bit src, edge and random values otherwise); float->int lanes
  the spec leaves undefined (NaN, inf, out of range) are replaced by 0 for that target."""
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
  assert_same(got, emulate(p, [np.zeros(8, np.float32), xs]).buffers[0], "row sums")
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
  want = [-1 if k == 3 else (10 * k if k < 9 else -7) + 100 for k in range(16)]
  assert got.tolist() == want
  assert got.tolist() == emulate(p, [init, xs], vals=(9,)).buffers[0].tolist()

def test_if_blocks_and_define_var_loop_bounds():
  b = ProgramBuilder("if_loop")
  out, n = b.global_buf(i32, 32), b.var("n", 0, 32)
  with b.loop_uops(b.const(0, i32), n) as r:
    not_third = b.alu(Ops.CMPNE, b.alu(Ops.MOD, r, b.const(3, i32)), b.const(0, i32))
    with b.when(not_third): b.store(out, r, b.alu(Ops.MUL, r, r))
  p = b.build()
  got = run(p, np.zeros(32, np.int32), vals=(20,))[0]
  assert got.tolist() == [k * k if k < 20 and k % 3 else 0 for k in range(32)]

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
  assert got.tolist() == emulate(p, [np.zeros(32, np.float32), xs]).buffers[0].tolist()
  quad = (xs.reshape(8, 4) * [1, 2, 3, 4])[:, ::-1].copy()
  quad[:2, 1] = xs.reshape(8, 4)[:2, 0]
  assert got.tolist() == quad.ravel().tolist()

def test_grid_programs_run_through_the_loop_lowering():
  b = ProgramBuilder("grid2d")
  out, x = b.global_buf(f32, 6 * 8), b.global_buf(f32, 6 * 8)
  g0, g1, l0 = b.gidx(0, 2), b.gidx(1, 6), b.lidx(0, 4)
  col = b.alu(Ops.ADD, b.alu(Ops.MUL, g0, b.const(4, i32)), l0)
  idx = b.alu(Ops.ADD, b.alu(Ops.MUL, g1, b.const(8, i32)), col)
  b.store(out, idx, b.alu(Ops.ADD, b.load(x, idx), b.cast(g1, f32)))
  p = b.build()
  xs = np.arange(48, dtype=np.float32)
  got = run(p, np.zeros(48, np.float32), xs)[0]
  assert got.tolist() == (xs + np.repeat(np.arange(6), 8)).tolist()
  assert got.tolist() == emulate(p, [np.zeros(48, np.float32), xs]).buffers[0].tolist()

def test_define_local_is_a_function_scope_array_in_the_loop_form():
  b = ProgramBuilder("local_scratch")
  out, tmp = b.global_buf(i32, 8), b.local_buf(i32, 8)
  with b.loop(8) as r: b.store(tmp, r, b.alu(Ops.MUL, r, b.const(3, i32)))
  with b.loop(8) as r: b.store(out, r, b.load(tmp, b.alu(Ops.SUB, b.const(7, i32), r)))
  p = b.build()
  assert run(p, np.zeros(8, np.int32))[0].tolist() == [3 * (7 - k) for k in range(8)]

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
  assert_same(got, emulate(p, [np.zeros(M * N, np.float32), av, bv, cv]).buffers[0], "WMMA")
  want = (cv.reshape(M, N).astype(np.float64) + av.reshape(M, K).astype(np.float64) @ bv.reshape(K, N).astype(np.float64))
  np.testing.assert_allclose(got, want.ravel().astype(np.float32), rtol=1e-6)
