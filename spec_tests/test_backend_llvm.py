"""The LLVM backend (refimpl/backends/llvmir.py + ops_llvm.py): what is specific to it, at the default optimization level
(O2, device "LLVM") and unoptimized (O0, device "LLVM:O0"). Opt levels and their cache keys, llvmlite's errors, IR free of
fast-math and wrap flags, objects that need no external symbol, EXP2/LOG2/SIN as the shared decomposition bit for bit,
MULACC rendered unfused. The spec's rules themselves are checked on every backend in refimpl/conformance/rules/, where the
`backend` fixture covers LLVM at O2; test_shared_rules_hold_unoptimized runs every one of them on LLVM:O0 too.
"""
import inspect
import re
import sys

import numpy as np
import pytest

from refimpl import spec
from refimpl.conformance import rules
from refimpl.device import CompileError, Device, DeviceError, DeviceUnavailable
from refimpl.dtype import dtypes, to_np
from refimpl.emulator.machine import emulate
from refimpl.ir import INDEX_DTYPE, GroupOp, Ops, ProgramBuilder, alu_allows, dtype_to_str, elementwise
from refimpl.lower import lower_for
from refimpl.lower.transcendental import decompose_transcendentals
from refimpl.testing.differential import OpCase
from refimpl.testing.programs import a, assert_same, ew, mulacc_tie, ops_kernel, run
from refimpl.testing.ulp import ulp_errors
from refimpl.testing.values import from_bits, random_values

try: Device["LLVM"]
except DeviceError as e: pytest.skip(f"LLVM does not open here: {e}", allow_module_level=True)

from refimpl.backends import ops_llvm
from refimpl.backends.elf import parse_sections, parse_symbols

i32, f32, f64, f16, bf16, bl = dtypes.int32, dtypes.float32, dtypes.float64, dtypes.float16, dtypes.bfloat16, dtypes.bool
FLOATS = (f16, bf16, f32, f64)
ALL = (bl, *dtypes.ints, *dtypes.floats)
LEVELS = pytest.mark.parametrize("dev", ["LLVM", "LLVM:O0"], ids=["O2", "O0"])

def undefined_symbols(obj: bytes) -> list[str]:
  return [s.name for s in parse_symbols(obj, parse_sections(obj)[1])[1:] if s.shndx == 0]


# ***** the device, the compiler, the cache *****

def test_device_declares_its_capabilities_truthfully():
  dev = Device["LLVM"]
  assert dev.renderer.global_max is None and not dev.renderer.has_local and ops_llvm.LLVMDevice.subprocess_safe
  assert all(dev.supports_dtype(dt) for dt in ALL)
  assert not dev.supports_dtype(dtypes.void) and not dev.supports_dtype(f32.ptr(4))

def test_missing_llvmlite_is_reported_with_what_to_install(monkeypatch):
  monkeypatch.setitem(sys.modules, "llvmlite", None)
  monkeypatch.setitem(sys.modules, "llvmlite.binding", None)
  with pytest.raises(DeviceUnavailable) as e: ops_llvm.LLVMDevice("LLVM")
  assert str(e.value) == "LLVM: llvmlite is not installed; pip install llvmlite (included in refimpl[llvm])"

def test_optimization_level_comes_from_the_argument_the_device_name_or_LLVM_OPT(monkeypatch):
  monkeypatch.delenv("LLVM_OPT", raising=False)
  assert ops_llvm.opt_level("LLVM") == 2 and Device["LLVM"].compiler.opt == 2  # the default
  assert ops_llvm.opt_level("LLVM:O0") == 0 and Device["LLVM:O0"].compiler.opt == 0
  monkeypatch.setenv("LLVM_OPT", "1")
  assert ops_llvm.opt_level("LLVM") == 1 and ops_llvm.opt_level("LLVM:O3") == 3 and ops_llvm.opt_level("LLVM:O3", opt=0) == 0
  for bad in ("fast", "4"):
    monkeypatch.setenv("LLVM_OPT", bad)
    with pytest.raises(ValueError, match="optimization level must be 0, 1, 2 or 3"): ops_llvm.opt_level("LLVM")
  with pytest.raises(ValueError, match="optimization level"): ops_llvm.LLVMDevice("LLVM", opt=7)

def test_each_level_has_its_own_cache_key_and_code():
  o0, o2 = Device["LLVM:O0"].compiler, Device["LLVM"].compiler
  assert o0.cachekey != o2.cachekey and o2.cachekey == ops_llvm.LLVMCompiler(2).cachekey
  assert o0.cachekey.startswith("llvm-O0-") and o2.cachekey.startswith("llvm-O2-")
  p = lower_for(elementwise(Ops.MUL, f32, n=256), Device["LLVM"].renderer)
  src = Device["LLVM"].renderer.render(p.name, p)
  assert "<16 x float>" in o2.optimized_ir(src) or "<8 x float>" in o2.optimized_ir(src)  # O2 vectorizes the loop
  assert "x float>" not in o0.optimized_ir(src)                                            # O0 leaves it alone

def test_compiles_go_through_the_disk_cache_and_a_damaged_entry_is_rebuilt(monkeypatch, tmp_path):
  monkeypatch.setenv("REFIMPL_CACHE_DIR", str(tmp_path))
  comp = ops_llvm.LLVMCompiler(2)
  calls = []
  real = comp.compile
  monkeypatch.setattr(comp, "compile", lambda src: calls.append(src) or real(src))
  p = lower_for(elementwise(Ops.ADD, i32, n=8), Device["LLVM"].renderer)
  src = Device["LLVM"].renderer.render(p.name, p)
  lib = comp.compile_cached(src)
  assert len(calls) == 1 and comp.compile_cached(src) == lib and len(calls) == 1
  (entry,) = [q for q in tmp_path.rglob("*") if q.is_file()]
  data = bytearray(entry.read_bytes())
  data[-20] ^= 0xff
  entry.write_bytes(bytes(data))
  assert comp.compile_cached(src) == lib and len(calls) == 2  # detected and rebuilt, never returned damaged
  x = np.arange(8, dtype=np.int32)
  out = np.zeros(8, np.int32)
  ops_llvm.LLVMProgram(p.name, comp.compile_cached(src))(out.ctypes.data, x.ctypes.data, x.ctypes.data)
  assert (out == 2 * x).all()

def test_malformed_ir_gives_a_compile_error_with_the_offending_line():
  comp = Device["LLVM"].compiler
  bad_parse = "define void @k(ptr %o) {\nentry:\n  %x = add i32 1\n  ret void\n}\n"
  with pytest.raises(CompileError) as e: comp.compile(bad_parse)
  msg = str(e.value)
  assert "LLVM: parsing the IR failed" in msg and "--- at line" in msg and "|   ret void" in msg
  # the verifier's kind of error: a use that its definition does not dominate (no line number in LLVM's message)
  bad_verify = "define void @k(i32 %a) {\nentry:\n  %x = add i32 %y, 1\n  %y = add i32 %a, 1\n  ret void\n}\n"
  with pytest.raises(CompileError) as e: comp.compile(bad_verify)
  msg = str(e.value)
  assert "LLVM: verifying the IR failed" in msg and "dominate" in msg
  assert re.search(r">\s+[34] \|   %[xy] = add i32", msg), msg


# ***** what the IR and the object may contain *****

def everything_program():
  """One kernel with every ALU op on every dtype it is defined on (EXP2/LOG2/SIN included), every CAST and BITCAST pair,
  and two loops that LLVM's loop idiom recognition would turn into memset and memcpy calls."""
  cases = [OpCase(op, dt) for dt in (bl, *dtypes.ints, *FLOATS) for op in sorted(GroupOp.ALU, key=lambda o: o.value)
           if alu_allows(op, dt)]
  cases += [OpCase(Ops.CAST, s, d) for s in ALL for d in ALL if s != d]
  cases += [OpCase(Ops.BITCAST, s, d) for s in ALL for d in ALL if s != d and s.itemsize == d.itemsize and bl not in (s, d)]
  b = ProgramBuilder("everything")
  z, c = b.global_buf(i32, 4096), b.global_buf(i32, 4096)
  with b.loop(4096) as r: b.store(z, r, b.const(0, i32))
  with b.loop(4096) as r: b.store(c, r, b.load(z, r))
  return lower_for(ops_kernel("everything", cases, 4, b), Device["LLVM"].renderer)

@pytest.fixture(scope="module")
def everything_src():
  p = everything_program()
  return Device["LLVM"].renderer.render(p.name, p)

def test_rendered_ir_has_no_fast_math_or_wrap_flags(everything_src):
  # fast-math flags change results; nsw/nuw/exact would make wrap-around poison. The only flagged instruction is the
  # loop counter's increment, which cannot wrap (r < end <= INT32_MAX).
  assert not re.search(r"\b(nnan|ninf|nsz|arcp|contract|afn|reassoc|fast)\b", everything_src)
  flagged = [ln.strip() for ln in everything_src.splitlines() if re.search(r"\b(nsw|nuw|exact)\b", ln)]
  assert flagged and all(re.fullmatch(r"%r\d+_next = add nsw i32 %r\d+, 1", ln) for ln in flagged)
  assert not re.search(r"@llvm\.(maxnum|minnum|fma|fmuladd)", everything_src)  # MAX must propagate NaN; MULACC is unfused

@LEVELS
def test_objects_need_no_external_symbol(dev, everything_src):
  """No libm, no compiler-rt (half conversions, 64-bit int <-> float), no memset/memcpy from the loop idioms: the ELF
  loader would refuse any of them."""
  obj = Device[dev].compiler.compile(everything_src)
  assert undefined_symbols(obj) == []

def test_loop_idioms_would_become_library_calls_without_no_builtins(everything_src):
  """The check above can fail: the same IR without the "no-builtins" attribute gets memset/memcpy calls at O2."""
  obj = Device["LLVM"].compiler.compile(everything_src.replace(' "no-builtins"', ""))
  assert {"memset", "memcpy"} & set(undefined_symbols(obj))


# ***** how LLVM computes what the spec allows several ways *****

@LEVELS
@pytest.mark.parametrize("dt", FLOATS, ids=dtype_to_str)
def test_exp2_log2_sin_are_the_decomposition_bit_for_bit_and_within_the_spec_bounds(dev, dt):
  """EXP2/LOG2/SIN run refimpl.lower.transcendental's decomposition, which is built from exact ops only: the results must
  equal the emulator running that decomposition bit for bit, and so stay within refimpl.spec.ULP_BOUNDS of the exact
  value (every input of float16/bfloat16; edge-biased random inputs, large SIN arguments included, otherwise)."""
  n = 1 << 16 if dt.itemsize == 2 else 4096
  x = from_bits(np.arange(n), dt) if dt.itemsize == 2 else random_values(dt, n, np.random.default_rng(dt.itemsize))
  ops = sorted(GroupOp.Transcendental, key=lambda o: o.value)
  p = ops_kernel(f"transcendental_{dt.name}", [OpCase(op, dt) for op in ops], n)
  arrays = [arr for _ in ops for arr in (np.zeros(n, to_np(dt)), x)]
  got = run(dev, p, *arrays)[0::2]
  want = emulate(decompose_transcendentals(p), arrays).buffers[0::2]
  for op, g, w in zip(ops, got, want):
    assert_same(g, w, f"{dev} {op.name} {dt.name} vs the emulated decomposition")
    err = ulp_errors(op, dt, x, g)
    worst = int(np.argmax(err))
    assert err[worst] <= spec.ULP_BOUNDS[dt][op], f"{op.name} {dt.name}({x[worst]}) = {g[worst]}: {err[worst]} ulp"

@LEVELS
@pytest.mark.parametrize("dt", FLOATS, ids=dtype_to_str)
def test_mulacc_is_rendered_unfused_on_scalars_and_vectors(dev, dt):
  """MULACC's allowed set is {fused, unfused}; LLVM renders it unfused (fmul then fadd, never llvm.fma or fmuladd), at
  every level, on scalars and on 4-wide vectors. At the tie of refimpl.testing.programs.mulacc_tie the two differ."""
  av, bv, cv, _, unfused = mulacc_tie(dt)
  assert float(ew(dev, Ops.MULACC, dt, a([av], dt), a([bv], dt), a([cv], dt))[0]) == unfused
  b = ProgramBuilder("mulacc_vec4")
  out, x = b.global_buf(dt, 4), b.global_buf(dt, 12)
  va, vb, vc = (b.load(x, b.const(4 * k, INDEX_DTYPE), count=4) for k in range(3))
  b.store(out, b.const(0, INDEX_DTYPE), b.alu(Ops.MULACC, va, vb, vc))
  got = run(dev, b.build(), np.zeros(4, to_np(dt)), a([av] * 4 + [bv] * 4 + [cv] * 4, dt))[0]
  assert got.astype(np.float64).tolist() == [unfused] * 4


# ***** every rule of refimpl/conformance/rules/, unoptimized *****

def _shared_rule_cases() -> list:
  """Every test of refimpl/conformance/rules/ with each of its parametrizations, as pytest.param(test, arguments)."""
  cases = []
  for name, fn in rules.tests().items():
    if not name.startswith("test_") or not callable(fn): continue
    combos = [({}, [])]  # (arguments, id parts)
    for mark in getattr(fn, "pytestmark", []):
      if mark.name != "parametrize": continue
      names = [s.strip() for s in mark.args[0].split(",")] if isinstance(mark.args[0], str) else list(mark.args[0])
      ids = mark.kwargs.get("ids")
      expanded = []
      for k, values in enumerate(mark.args[1]):
        values = tuple(values) if len(names) > 1 else (values,)
        label = ids[k] if isinstance(ids, list) else "-".join(ids(v) if callable(ids) else str(v) for v in values)
        expanded += [({**kw, **dict(zip(names, values))}, [*labels, label]) for kw, labels in combos]
      combos = expanded
    cases += [pytest.param(fn, kw, id="-".join([name.removeprefix("test_"), *labels])) for kw, labels in combos]
  return cases

@pytest.mark.parametrize("rule, arguments", _shared_rule_cases())
def test_shared_rules_hold_unoptimized(rule, arguments, request):
  """The rule test `rule` of refimpl/conformance/rules/, run on LLVM:O0 (its `backend` fixture covers LLVM at O2)."""
  if "tmp_path" in inspect.signature(rule).parameters: arguments = {**arguments, "tmp_path": request.getfixturevalue("tmp_path")}
  rule(backend="LLVM:O0", **arguments)
