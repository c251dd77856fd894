"""The CLANG backend (refimpl/backends/cstyle.py + ops_clang.py): what is specific to it. Finding clang (or ziglang's),
its diagnostics, compile flags, the cache and batch compiles, the rendered C free of signed-overflow and shift UB under
UBSan, and objects that need no libm or compiler runtime. The spec's rules themselves are checked on every backend in
refimpl/conformance/rules/.
"""
import dataclasses
import os
import pathlib
import shlex
import shutil
import subprocess
import sys

import numpy as np
import pytest

from refimpl.conformance import PROGRAMS_DIR
from refimpl.device import CompileError, Device, DeviceError, DeviceUnavailable
from refimpl.dtype import dtypes
from refimpl.ir import Ops, ProgramBuilder, elementwise, load_program, verify
from refimpl.lower import lower_for
from refimpl.testing.programs import a

try: Device["CLANG"]
except DeviceError as e: pytest.skip(f"CLANG does not open here: {e}", allow_module_level=True)

from refimpl.backends import ops_clang
from refimpl.backends.elf import parse_sections, parse_symbols

i32, f32, f64, f16, bf16, bl = dtypes.int32, dtypes.float32, dtypes.float64, dtypes.float16, dtypes.bfloat16, dtypes.bool
ALL = (bl, *dtypes.ints, *dtypes.floats)


# ***** device, toolchain, cache *****

def test_device_declares_its_capabilities_truthfully():
  dev = Device["CLANG"]
  assert dev.renderer.global_max is None and not dev.renderer.has_local and ops_clang.ClangDevice.subprocess_safe
  assert all(dev.supports_dtype(dt) for dt in ALL)
  assert not dev.supports_dtype(dtypes.void) and not dev.supports_dtype(f32.ptr(4))

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

def test_cache_key_does_not_name_where_clang_is_installed(tmp_path):
  """Two installs of one clang (a fresh virtual environment, CI's clone) share the disk cache: the key leaves out the
  InstalledDir line of `clang --version`, and so does the tinygrad devices' toolchain identity."""
  real = ops_clang.ClangCompiler()
  moved = tmp_path / "clang"
  moved.write_text(f'#!/bin/sh\n{shlex.join(real.command)} "$@" | sed "s|^InstalledDir: .*|InstalledDir: {tmp_path}|"\n')
  moved.chmod(0o755)
  other = ops_clang.ClangCompiler(command=[str(moved)], kind=real.kind)
  assert other.version != real.version and f"InstalledDir: {tmp_path}" in other.version, other.version
  assert other.cachekey == real.cachekey
  from refimpl.tinygrad.v0_10.toolchain import toolchain_identity
  where = os.path.dirname(shutil.which(real.command[0]) or real.command[0])  # the install's folder
  assert "InstalledDir" not in toolchain_identity() and (not where or where not in toolchain_identity())
  assert ops_clang.identity_text(real.version) in toolchain_identity()

def test_cache_rebuilds_a_corrupted_entry(monkeypatch, tmp_path):
  monkeypatch.setenv("REFIMPL_CACHE_DIR", str(tmp_path))
  comp = ops_clang.ClangCompiler()
  calls = []
  real = comp.compile
  monkeypatch.setattr(comp, "compile", lambda src: calls.append(src) or real(src))
  prog = elementwise(Ops.MUL, f32, n=8)
  src = Device["CLANG"].renderer.render(prog.name, lower_for(prog, Device["CLANG"].renderer))
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
  srcs = [r.render(p.name, lower_for(p, r)) for p in progs]
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


# ***** what the rendered C and the object may contain *****

SANITIZE = ["-fsanitize=signed-integer-overflow,shift", "-fsanitize-trap=signed-integer-overflow,shift"]
RUN_OBJECT = """import sys, numpy as np
from refimpl.backends.ops_clang import ClangProgram
x = np.load(sys.argv[2])
ClangProgram(sys.argv[3], open(sys.argv[1], 'rb').read())(*[a.ctypes.data for a in x])
"""

def _run_sanitized(tmp_path, src: str, name: str, arrays: list[np.ndarray]) -> int:
  comp = ops_clang.ClangCompiler()
  comp.args = comp.args[:-3] + SANITIZE + comp.args[-3:]  # before "-c -x c"
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
  p = lower_for(b.build(), Device["CLANG"].renderer)
  xs = a([2**31 - 1, -2**31, -2**31, 3], i32), a([1, 1, -1, 2**30], i32)
  src = Device["CLANG"].renderer.render(p.name, p)
  assert _run_sanitized(tmp_path, src, p.name, [np.zeros(4, np.int32)] * 6 + list(xs)) == 0
  naive = "void k_naive(int* restrict o, int* restrict x, int* restrict y) { for (int i = 0; i < 4; i++) o[i] = x[i] + y[i]; }"
  assert _run_sanitized(tmp_path, naive, "naive", [np.zeros(4, np.int32), *xs]) != 0

def test_no_libm_or_compiler_runtime_call_remains():
  b = ProgramBuilder("needs_nothing")
  outs = {dt: b.global_buf(dt, 4) for dt in (f32, f64, f16, bf16)}
  x = b.global_buf(dtypes.uint64, 4)
  i = b.gidx(0, 4)
  v = b.load(x, i)
  for dt, o in outs.items(): b.store(o, i, b.alu(Ops.SQRT, b.cast(v, dt)))
  p = lower_for(b.build(), Device["CLANG"].renderer)
  obj = Device["CLANG"].compiler.compile(Device["CLANG"].renderer.render(p.name, p))
  undefined = [s.name for s in parse_symbols(obj, parse_sections(obj)[1])[1:] if s.shndx == 0]
  assert undefined == []


# ***** compiles that must not hang; which clang is used *****

PROGRAMS = PROGRAMS_DIR
HUNG_CLANG_22 = sorted(PROGRAMS.glob("clang-hang-*.json"))  # tinygrad 0.10.1 max reductions over a local array

@pytest.mark.parametrize("path", HUNG_CLANG_22, ids=lambda p: p.stem)
def test_max_reductions_that_hung_clang_22_compile_on_the_native_path(path):
  """Rule: a small kernel compiles with the default flags. These two spun past 120 s in zig's clang 22 with
  -march=native (LLVM's loop vectorizer, exponential in the unrolled length of the old three-select MAX); the one-select
  MAX compiles at once. The native path itself must finish: no generic-CPU retry and no time limit (the result does not
  depend on the machine's speed; the old rendering would hang this test)."""
  comp = ops_clang.ClangCompiler()
  p = lower_for(load_program(path), Device["CLANG"].renderer)
  assert comp._run(comp.args, Device["CLANG"].renderer.render(p.name, p), None).startswith(b"\x7fELF")

def test_a_native_compile_past_its_limit_is_redone_for_the_generic_cpu(monkeypatch):
  comp = ops_clang.ClangCompiler()
  if comp.generic_args is None: pytest.skip("no -march=native for this host")
  monkeypatch.setattr(ops_clang, "NATIVE_TIMEOUT_S", 0)
  with pytest.warns(UserWarning, match=r"-march=native took more than 0 s; compiled for the generic CPU"):
    assert comp.compile("void k(int* restrict o) { o[0] = 1; }").startswith(b"\x7fELF")

def _script(path: pathlib.Path, body: str) -> pathlib.Path:
  path.write_text(f"#!/bin/sh\n{body}\n")
  path.chmod(0o755)
  return path

def test_a_clang_on_path_that_is_a_zig_wrapper_gets_zig_target_flags(monkeypatch, tmp_path):
  """A `clang` on PATH that is `zig cc` rejects --target=x86_64-unknown-linux-gnu: it is probed and used with zig's."""
  zig = ops_clang._ziglang_command()
  if zig is None or len(zig) != 2: pytest.skip("the ziglang package's binary is not here")
  clang = _script(tmp_path / "clang", f'exec "{zig[0]}" cc "$@"')
  monkeypatch.setenv("PATH", str(tmp_path))
  assert ops_clang.find_clang() == ([str(clang)], "zig")
  comp = ops_clang.ClangCompiler()
  assert comp.kind == "zig" and comp.compile("void k(int* restrict o) { o[0] = 1; }").startswith(b"\x7fELF")

def test_a_clang_on_path_that_builds_nothing_gives_way_to_ziglang(monkeypatch, tmp_path):
  zig = ops_clang._ziglang_command()
  if zig is None: pytest.skip("no ziglang package here")
  _script(tmp_path / "clang", 'echo "clang: error: unknown target" >&2; exit 1')
  monkeypatch.setenv("PATH", str(tmp_path))
  assert ops_clang.find_clang() == (zig, "zig")

def test_no_working_clang_is_one_clear_line(monkeypatch, tmp_path):
  _script(tmp_path / "clang", 'echo "clang: error: unknown target" >&2; exit 1')
  monkeypatch.setenv("PATH", str(tmp_path))
  monkeypatch.setattr(ops_clang, "_ziglang_command", lambda: None)
  with pytest.raises(DeviceUnavailable) as e: ops_clang.find_clang()
  msg = str(e.value)
  assert "\n" not in msg and msg.startswith("CLANG: no clang here builds") and "clang: error: unknown target" in msg
  assert "install clang or `pip install ziglang`" in msg

C_KEYWORDS = ("auto break case char const continue default do double else enum extern float for goto if inline int long "
              "register restrict return short signed sizeof static struct switch typedef union unsigned void volatile while "
              "_Bool _Complex main rf_u32 rf_u64 rf_fbits rf_threefry RF_PRELUDE data0 v0").split()

def test_every_c_keyword_and_prelude_name_is_a_valid_kernel_name():
  """Rule: any identifier the verifier accepts names a kernel that compiles and loads (the C symbol is k_<name>)."""
  dev, comp = Device["CLANG"], ops_clang.ClangCompiler()
  progs = [lower_for(dataclasses.replace(elementwise(Ops.ADD, i32, n=4), name=n), dev.renderer) for n in C_KEYWORDS]
  for p in progs: verify(p)
  libs = comp.compile_batch([dev.renderer.render(p.name, p) for p in progs])
  for p, lib in zip(progs, libs): ops_clang.ClangProgram(p.name, lib)
