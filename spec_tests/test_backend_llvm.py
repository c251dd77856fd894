"""The LLVM backend (refimpl/backends/llvmir.py + ops_llvm.py): the spec's rules hold in the compiled LLVM IR, at the
default optimization level (O2, device "LLVM") and unoptimized (O0, device "LLVM:O0").

The oracle is the emulator's op semantics (refimpl.emulator.alu, refimpl.emulator.machine.emulate): exact ops are
compared bit for bit (every NaN one value), MAX and MULACC against their allowed sets, EXP2/LOG2/SIN bit for bit against
the emulated decomposition (the backend runs that same decomposition) and within the spec's ULP bounds. Inputs the
spec leaves undefined are replaced by defined ones before a launch. A few tests state a rule directly, with the
expected values computed from the rule in Python ints, fractions or IEEE float64.
"""
import math
import random
import re
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings

from refimpl import spec
from refimpl.device import CompileError, Device, DeviceError, DeviceUnavailable
from refimpl.dtype import dtypes, to_np, truncate
from refimpl.emulator.alu import allowed_results, exec_alu, exec_cast
from refimpl.emulator.machine import emulate
from refimpl.ir import INDEX_DTYPE, GroupOp, Ops, ProgramBuilder, alu_allows, dtype_to_str, elementwise
from refimpl.ir.strategies import RandomChooser, random_program
from refimpl.lower import lower_grid_to_loops
from refimpl.lower.transcendental import decompose_transcendentals, ulp_errors
from refimpl.runner import Kernel
from refimpl.testing.values import array_strategy, edge_values, from_bits, random_values, to_bits

try: Device["LLVM"]
except DeviceError as e: pytest.skip(f"LLVM does not open here: {e}", allow_module_level=True)

from refimpl.backends import ops_llvm
from refimpl.backends.elf import parse_sections, parse_symbols

i32, f32, f64, f16, bf16, bl = dtypes.int32, dtypes.float32, dtypes.float64, dtypes.float16, dtypes.bfloat16, dtypes.bool
u64, i64 = dtypes.uint64, dtypes.int64
FLOATS = (f16, bf16, f32, f64)
ALL = (bl, *dtypes.ints, *dtypes.floats)
LEVELS = pytest.mark.parametrize("dev", ["LLVM", "LLVM:O0"], ids=["O2", "O0"])
EXACT_OPS = sorted(GroupOp.ALU - GroupOp.Transcendental, key=lambda o: o.value)

def run(program, *arrays, dev="LLVM", vals=()): return Kernel(program, dev)(*arrays, vals=vals)

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

def arity(op) -> int: return 1 if op in GroupOp.Unary else 2 if op in GroupOp.Binary else 3

def defined_inputs(op, dt, xs):
  """xs with every lane the spec leaves undefined (the emulator's ALU says which) replaced by ones (defined for every op)."""
  o = exec_alu(op, dt, *xs)
  if o.undefined is None: return xs
  return [np.where(o.undefined, x.dtype.type(1), x) for x in xs]

def ops_kernel(name: str, cases: list, n: int, builder: ProgramBuilder | None = None):
  """One kernel computing out_j[i] = op_j(ins_j[i]) for every case (op, operand dtype, out dtype, input dtypes); the
  buffers are, per case, its output then its inputs. CAST/BITCAST convert their input to the out dtype."""
  b = builder or ProgramBuilder(name)
  bufs = [(b.global_buf(out, n), [b.global_buf(d, n) for d in ins]) for _, _, out, ins in cases]
  i = b.gidx(0, n)
  for (op, _, out, _), (o, ib) in zip(cases, bufs):
    xs = [b.load(x, i) for x in ib]
    b.store(o, i, b.uop(op, out, tuple(xs)) if op in (Ops.CAST, Ops.BITCAST) else b.alu(op, *xs))
  return b.build()

def alu_case(op, dt):
  ins = [bl if op is Ops.WHERE and k == 0 else dt for k in range(arity(op))]
  return (op, dt, bl if op in GroupOp.Comparison else dt, ins)

def check_ops(dev: str, dt, ops, inputs: dict, n: int):
  """Runs every op of `ops` on dtype dt over its `inputs[op]` in one kernel; each result lane must be an allowed result."""
  cases = [alu_case(op, dt) for op in ops]
  arrays = []
  for case in cases: arrays += [np.zeros(n, to_np(case[2])), *inputs[case[0]]]
  res = run(ops_kernel(f"ops_{dt.name.replace(' ', '_')}_{n}", cases, n), *arrays, dev=dev)
  at = 0
  for op in ops:
    got, xs = res[at], inputs[op]
    at += 1 + len(xs)
    ok = np.zeros(n, bool)
    for want in allowed_results(op, dt, *xs): ok |= same_bits(got, want)
    bad = np.flatnonzero(~ok)[:3]
    assert ok.all(), f"{dev} {op.name} {dt.name}: {(~ok).sum()} lanes, e.g. {[[x[k] for x in xs] for k in bad]} gave {got[bad]}"

def exact_ops(dt): return [op for op in EXACT_OPS if alu_allows(op, dt)]

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
  p = lower_grid_to_loops(elementwise(Ops.MUL, f32, n=256))
  src = Device["LLVM"].renderer.render(p.name, p)
  assert "<16 x float>" in o2.optimized_ir(src) or "<8 x float>" in o2.optimized_ir(src)  # O2 vectorizes the loop
  assert "x float>" not in o0.optimized_ir(src)                                            # O0 leaves it alone

def test_compiles_go_through_the_disk_cache_and_a_damaged_entry_is_rebuilt(monkeypatch, tmp_path):
  monkeypatch.setenv("REFIMPL_CACHE_DIR", str(tmp_path))
  comp = ops_llvm.LLVMCompiler(2)
  calls = []
  real = comp.compile
  monkeypatch.setattr(comp, "compile", lambda src: calls.append(src) or real(src))
  p = lower_grid_to_loops(elementwise(Ops.ADD, i32, n=8))
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

def test_selfcheck_reports_llvm_pass():
  from refimpl.selfcheck import check_device
  assert check_device("LLVM") == ("PASS", "[1, 2, 3] * 2 = [2, 4, 6]")


# ***** what the IR and the object may contain *****

def everything_program():
  """One kernel with every ALU op on every dtype it is defined on (EXP2/LOG2/SIN included), every CAST and BITCAST pair,
  and two loops that LLVM's loop idiom recognition would turn into memset and memcpy calls."""
  cases = [alu_case(op, dt) for dt in (bl, *dtypes.ints, *FLOATS) for op in sorted(GroupOp.ALU, key=lambda o: o.value)
           if alu_allows(op, dt)]
  cases += [(Ops.CAST, s, d, [s]) for s in ALL for d in ALL if s != d]
  cases += [(Ops.BITCAST, s, d, [s]) for s in ALL for d in ALL if s != d and s.itemsize == d.itemsize and bl not in (s, d)]
  b = ProgramBuilder("everything")
  z, c = b.global_buf(i32, 4096), b.global_buf(i32, 4096)
  with b.loop(4096) as r: b.store(z, r, b.const(0, i32))
  with b.loop(4096) as r: b.store(c, r, b.load(z, r))
  return lower_grid_to_loops(ops_kernel("everything", cases, 4, b))

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


# ***** op by op, against the emulator *****

@LEVELS
@pytest.mark.parametrize("dt", [bl, *dtypes.ints, *FLOATS], ids=dtype_to_str)
def test_every_alu_op_matches_the_emulator(dev, dt):
  """Every exact and allowed-set ALU op on dt, edge-biased random inputs (a third edge values), one kernel."""
  n, rng = 1024, np.random.default_rng(dt.priority * 31 + dt.itemsize)
  ops = exact_ops(dt)
  inputs = {op: defined_inputs(op, dt, [random_values(bl if op is Ops.WHERE and k == 0 else dt, n, rng)
                                        for k in range(arity(op))]) for op in ops}
  check_ops(dev, dt, ops, inputs, n)

@LEVELS
@pytest.mark.parametrize("dt", [bl, dtypes.int8, dtypes.uint8], ids=dtype_to_str)
def test_every_8bit_input_pair_matches_the_emulator(dev, dt):
  """Exhaustive: every binary op over all 2^16 operand pairs (ternary ops: every pair, the third operand random)."""
  vals = np.array([False, True]) if dt == bl else from_bits(np.arange(256), dt)
  x, y = np.repeat(vals, len(vals)), np.tile(vals, len(vals))
  z = np.random.default_rng(1).permutation(x)
  ops = exact_ops(dt)
  inputs = {}
  for op in ops:
    xs = [y] if op in GroupOp.Unary else [x, y] if op in GroupOp.Binary else [x.astype(np.bool_) if op is Ops.WHERE else x, y, z]
    inputs[op] = defined_inputs(op, dt, xs)
  check_ops(dev, dt, ops, inputs, len(x))

@LEVELS
@pytest.mark.parametrize("dt", [t for t in (*dtypes.ints, *FLOATS) if t.itemsize > 1], ids=dtype_to_str)
def test_every_edge_value_pair_and_every_16bit_input_match_the_emulator(dev, dt):
  """Binary and ternary ops over every pair of edge values (ternary: the third operand random); unary ops over every
  input of a 16-bit dtype (NEG; SQRT and RECIP on floats), edge and random values of wider ones."""
  edges = edge_values(dt)
  n = max(1 << 17 if dt.itemsize == 2 else 0, len(edges) ** 2)
  rng = np.random.default_rng(dt.itemsize + dt.priority)
  fill = random_values(dt, n - len(edges) ** 2, rng)
  x = np.concatenate([np.repeat(edges, len(edges)), fill])
  y = np.concatenate([np.tile(edges, len(edges)), rng.permutation(fill)])
  every = np.resize(from_bits(np.arange(1 << 16), dt), n) if dt.itemsize == 2 else x
  ops = exact_ops(dt)
  inputs = {}
  for op in ops:
    if op in GroupOp.Unary: xs = [every]
    elif op in GroupOp.Binary: xs = [x, y]
    else: xs = [rng.integers(0, 2, n).astype(np.bool_) if op is Ops.WHERE else rng.permutation(x), x, y]
    inputs[op] = defined_inputs(op, dt, xs)
  check_ops(dev, dt, ops, inputs, n)

@LEVELS
@pytest.mark.parametrize("src", ALL, ids=dtype_to_str)
def test_every_cast_from_a_dtype_matches_the_emulator(dev, src):
  """CAST from src to every other dtype in one kernel: every bit pattern of an 8/16-bit src, else edge-biased random
  values. Lanes the spec leaves undefined for a target (float -> int of NaN, inf, out of range) are replaced by 0."""
  bits = 8 * src.itemsize
  if src == bl: x = np.arange(512) % 3 == 0
  elif bits <= 16: x = from_bits(np.arange(1 << bits), src)
  else: x = random_values(src, 4096, np.random.default_rng(bits + src.priority))
  targets = [d for d in ALL if d != src]
  cases, arrays, wants = [], [], []
  for d in targets:
    out = exec_cast(x, src, d)
    xd = x if out.undefined is None else np.where(out.undefined, np.zeros(1, x.dtype), x)
    cases.append((Ops.CAST, src, d, [src]))
    arrays += [np.zeros(len(x), to_np(d)), xd]
    wants.append(exec_cast(xd, src, d).values)
  got = run(ops_kernel(f"casts_{src.name.replace(' ', '_')}", cases, len(x)), *arrays, dev=dev)
  for d, g, w in zip(targets, got[0::2], wants): assert_same(g, w, f"{dev} CAST {src.name} -> {d.name}")

@LEVELS
def test_every_bitcast_pair_keeps_every_bit(dev):
  """BITCAST between every same-size pair: every pattern of 8/16-bit sources (NaN payloads and signalling NaNs of the
  narrow formats included), random patterns of 32/64-bit ones; the result's bits are the source's bits."""
  pairs = [(s, d) for s in ALL for d in ALL if s != d and s.itemsize == d.itemsize and bl not in (s, d)]
  n = 1 << 16
  rng = np.random.default_rng(9)
  pattern = {1: np.arange(n) % 256, 2: np.arange(n), 4: rng.integers(0, 2**32, n, dtype=np.uint64),
             8: rng.integers(0, 2**63, n, dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, n, dtype=np.uint64)}
  cases = [(Ops.BITCAST, s, d, [s]) for s, d in pairs]
  arrays = []
  for s, d in pairs: arrays += [np.zeros(n, to_np(d)), from_bits(pattern[s.itemsize], s)]
  got = run(ops_kernel("bitcasts", cases, n), *arrays, dev=dev)
  for (s, d), g in zip(pairs, got[0::2]):
    assert (to_bits(g).astype(np.uint64) == pattern[s.itemsize].astype(np.uint64)).all(), f"{dev} BITCAST {s.name} -> {d.name}"

HYPOTHESIS_N = 8

@pytest.fixture(scope="module")
def hypothesis_kernels():
  return {dt: Kernel(ops_kernel(f"hyp_{dt.name.replace(' ', '_')}", [alu_case(op, dt) for op in exact_ops(dt)], HYPOTHESIS_N),
                     "LLVM") for dt in (f16, f32, i32, u64)}

def _hypothesis_check(kernel, dt, xs_all):
  ops = exact_ops(dt)
  inputs, arrays, it = {}, [], iter(xs_all)
  for op in ops:
    xs = [next(it) for _ in range(arity(op))]
    if op is Ops.WHERE: xs[0] = xs[0] != 0
    inputs[op] = xs = defined_inputs(op, dt, xs)
    arrays += [np.zeros(HYPOTHESIS_N, to_np(bl if op in GroupOp.Comparison else dt)), *xs]
  res = kernel(*arrays)
  at = 0
  for op in ops:
    got, xs = res[at], inputs[op]
    at += 1 + len(xs)
    ok = np.zeros(HYPOTHESIS_N, bool)
    for want in allowed_results(op, dt, *xs): ok |= same_bits(got, want)
    assert ok.all(), f"{op.name} {dt.name}: inputs {xs} gave {got}"

def _hypothesis_test(dt):
  count = sum(arity(op) for op in exact_ops(dt))
  @settings(max_examples=60)
  @given(arrays=array_strategy(dt, HYPOTHESIS_N * count))
  def test(hypothesis_kernels, arrays):
    _hypothesis_check(hypothesis_kernels[dt], dt, np.split(arrays, count))
  test.__name__ = f"test_hypothesis_edge_biased_inputs_match_the_emulator_{dt.name.replace(' ', '_')}"
  test.__doc__ = f"Hypothesis (edge-biased values, shrinking to one lane): every exact/allowed-set op on {dt.name}."
  return test

test_hypothesis_edge_biased_inputs_match_the_emulator_half = _hypothesis_test(f16)
test_hypothesis_edge_biased_inputs_match_the_emulator_float = _hypothesis_test(f32)
test_hypothesis_edge_biased_inputs_match_the_emulator_int = _hypothesis_test(i32)
test_hypothesis_edge_biased_inputs_match_the_emulator_ulong = _hypothesis_test(u64)

@LEVELS
@pytest.mark.parametrize("dt", FLOATS, ids=dtype_to_str)
def test_exp2_log2_sin_are_the_decomposition_bit_for_bit_and_within_the_spec_bounds(dev, dt):
  """EXP2/LOG2/SIN run refimpl.lower.transcendental's decomposition, which is built from exact ops only: the results must
  equal the emulator running that decomposition bit for bit, and so stay within refimpl.spec.ULP_BOUNDS of the exact
  value (every input of float16/bfloat16; edge-biased random inputs, large SIN arguments included, otherwise)."""
  n = 1 << 16 if dt.itemsize == 2 else 4096
  x = from_bits(np.arange(n), dt) if dt.itemsize == 2 else random_values(dt, n, np.random.default_rng(dt.itemsize))
  ops = sorted(GroupOp.Transcendental, key=lambda o: o.value)
  p = ops_kernel(f"transcendental_{dt.name}", [alu_case(op, dt) for op in ops], n)
  arrays = [arr for _ in ops for arr in (np.zeros(n, to_np(dt)), x)]
  got = run(p, *arrays, dev=dev)[0::2]
  want = emulate(decompose_transcendentals(p), arrays).buffers[0::2]
  for op, g, w in zip(ops, got, want):
    assert_same(g, w, f"{dev} {op.name} {dt.name} vs the emulated decomposition")
    err = ulp_errors(op, dt, x, g)
    worst = int(np.argmax(err))
    assert err[worst] <= spec.ULP_BOUNDS[dt][op], f"{op.name} {dt.name}({x[worst]}) = {g[worst]}: {err[worst]} ulp"


# ***** rules LLVM could get wrong, stated directly *****

@LEVELS
@pytest.mark.parametrize("dt", dtypes.ints, ids=dtype_to_str)
def test_int_add_sub_mul_neg_wrap_around_and_shifts_work_on_the_bit_pattern(dev, dt):
  """Two's complement wrap-around (no nsw/nuw: INT_MAX + 1 is INT_MIN, not poison); SHL on the bit pattern; SHR arithmetic
  on signed, logical on unsigned. Expected values from Python ints."""
  lo, hi, bits = int(dtypes.min(dt)), int(dtypes.max(dt)), 8 * dt.itemsize
  vals = sorted({lo, lo + 1, 0, 1, hi - 1, hi, -1 if lo else 2})
  pairs = [(x, y) for x in vals for y in vals]
  xa, ya = a([p[0] for p in pairs], dt), a([p[1] for p in pairs], dt)
  rules = {Ops.ADD: lambda x, y: x + y, Ops.SUB: lambda x, y: x - y, Ops.MUL: lambda x, y: x * y}
  for op, f in rules.items():
    got = run(elementwise(op, dt, n=len(pairs)), np.zeros(len(pairs), to_np(dt)), xa, ya, dev=dev)[0]
    assert got.tolist() == [wrap(f(x, y), dt) for x, y in pairs], op
  assert run(elementwise(Ops.NEG, dt, n=len(pairs)), np.zeros(len(pairs), to_np(dt)), xa, dev=dev)[0].tolist() == \
    [wrap(-x, dt) for x, _ in pairs]
  sx, sc = a([x for x in vals for _ in range(bits)], dt), a([c for _ in vals for c in range(bits)], dt)
  shl = run(elementwise(Ops.SHL, dt, n=len(sx)), np.zeros(len(sx), to_np(dt)), sx, sc, dev=dev)[0]
  shr = run(elementwise(Ops.SHR, dt, n=len(sx)), np.zeros(len(sx), to_np(dt)), sx, sc, dev=dev)[0]
  assert shl.tolist() == [wrap(int(x) << int(c), dt) for x, c in zip(sx, sc)]
  assert shr.tolist() == [int(x) >> int(c) for x, c in zip(sx, sc)]  # Python's >> is arithmetic; unsigned x >= 0

@LEVELS
@pytest.mark.parametrize("dt", FLOATS, ids=dtype_to_str)
def test_compares_are_ordered_lt_and_unordered_ne_and_max_propagates_nan(dev, dt):
  """IEEE: NaN < x is false (fcmp olt), NaN != x is true (fcmp une), -0 == +0; MAX is NaN when either input is NaN and
  max(+0, -0) is either zero. Expected values from Python's IEEE float comparisons."""
  nan, inf = float("nan"), float("inf")
  pairs = [(nan, 1), (1, nan), (nan, nan), (-0.0, 0.0), (0.0, -0.0), (-inf, inf), (1, 1), (1, 2), (inf, inf), (nan, -inf)]
  x, y = a([p[0] for p in pairs], dt), a([p[1] for p in pairs], dt)
  n = len(pairs)
  lt = run(elementwise(Ops.CMPLT, dt, n=n), np.zeros(n, bool), x, y, dev=dev)[0]
  ne = run(elementwise(Ops.CMPNE, dt, n=n), np.zeros(n, bool), x, y, dev=dev)[0]
  mx = run(elementwise(Ops.MAX, dt, n=n), np.zeros(n, to_np(dt)), x, y, dev=dev)[0].astype(np.float64)
  assert lt.tolist() == [p < q for p, q in pairs] and ne.tolist() == [p != q for p, q in pairs]
  for (p, q), m in zip(pairs, mx.tolist()):
    assert (math.isnan(m) if math.isnan(p) or math.isnan(q) else m == max(p, q)), (p, q, m)

def rne(q: Fraction, dt) -> float:
  """An exact rational rounded once to nearest even in dt (float(Fraction) is correctly rounded to float64; the
  examples are exact in float64, and truncate rounds a float64 once to the narrower dtypes)."""
  f = float(q)
  if dt == f64: return f
  assert Fraction(f) == q, "example must be exact in float64"
  return truncate[dt](f)

@LEVELS
@pytest.mark.parametrize("dt", FLOATS, ids=dtype_to_str)
def test_mulacc_is_unfused_and_mul_then_add_is_never_contracted(dev, dt):
  """a*b = 1 + 2^-k1 + 2^-k2 + 2^-p is a tie at precision p: rounding the product first (to even) makes a*b + c = 0, the
  fused result is 2^-p. MULACC is rendered unfused (a choice inside the allowed set); MUL then ADD must be unfused."""
  p = dtypes.finfo(dt)[1] + 1
  k1, k2 = p // 2, p - p // 2
  av, bv = 1 + Fraction(1, 2**k1), 1 + Fraction(1, 2**k2)
  cv = -(1 + Fraction(1, 2**k1) + Fraction(1, 2**k2))
  fused, unfused = rne(av * bv + cv, dt), rne(Fraction(rne(av * bv, dt)) + cv, dt)
  assert fused != unfused
  bld = ProgramBuilder("mul_add")
  o1, o2, xa, xb, xc = (bld.global_buf(dt, 1) for _ in range(5))
  z = bld.const(0, INDEX_DTYPE)
  va, vb, vc = bld.load(xa, z), bld.load(xb, z), bld.load(xc, z)
  bld.store(o1, z, bld.alu(Ops.MULACC, va, vb, vc))
  bld.store(o2, z, bld.alu(Ops.ADD, bld.alu(Ops.MUL, va, vb), vc))
  res = run(bld.build(), a([0], dt), a([0], dt), a([float(av)], dt), a([float(bv)], dt), a([float(cv)], dt), dev=dev)
  assert float(res[0][0]) == unfused and float(res[1][0]) == unfused

@LEVELS
def test_conversions_round_once_to_nearest_even(dev):
  """int -> float and float -> narrower float are one correct rounding: each value lies just above a tie of the target,
  so rounding through an intermediate format would land on the even neighbour instead. Expected values from the rule."""
  def cast(xs, s, d):
    return run(elementwise(Ops.CAST, s, n=len(xs), out_dtype=d), np.zeros(len(xs), to_np(d)), a(xs, s), dev=dev)[0]
  assert float(cast([2**62 + 2**54 + 1], i64, bf16)[0]) == 2.0**62 + 2**55
  assert float(cast([2**63 + 2**55 + 1], u64, bf16)[0]) == 2.0**63 + 2**56
  assert float(cast([-(2**62 + 2**51 + 1)], i64, f16)[0]) == -math.inf  # far beyond half's range
  assert float(cast([1 + 2**-11 + 2**-40], f64, f16)[0]) == 1 + 2**-10
  assert float(cast([1 + 2**-8 + 2**-40], f64, bf16)[0]) == 1 + 2**-7
  big = [2**64 - 1, 2**63 + 2**39 + 1, 2**53 + 1, 2**63 + 2**40]  # uitofp of a u64 >= 2^63 (no native x86 instruction)
  assert cast(big, u64, f32).tolist() == [truncate[f32](v) for v in big]
  assert cast(big, u64, f64).tolist() == [truncate[f64](v) for v in big]
  assert cast([1 + 2**-24 + 2**-50, 1 + 2**-24], f64, f32).tolist() == [1 + 2**-23, 1.0]  # above the tie; the tie to even
  assert cast([float("nan"), -0.0, 0.0, 5e-324, -float("inf")], f64, bl).tolist() == [True, False, False, True, True]
  assert cast([464.0, 465.0, 57344.0, 61440.0], f32, dtypes.fp8e4m3).astype(np.float32)[:1].tolist() == [448.0]
  assert np.isnan(cast([465.0], f32, dtypes.fp8e4m3).astype(np.float32)).all()  # e4m3fn: beyond 464 is NaN (no inf)

def test_threefry_matches_the_random123_known_answers():
  # threefry2x32_20 known-answer vectors (Random123 kat_vectors): (ctr0, ctr1, key0, key1) -> (out0, out1); low word first
  kat = [((0, 0, 0, 0), (0x6b200159, 0x99ba4efe)), ((0xffffffff,) * 4, (0x1cb996fc, 0xbb002be7)),
         ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xc4923a9c, 0x483df7a0))]
  x = a([c1 << 32 | c0 for (c0, c1, _, _), _ in kat], u64)
  key = a([k1 << 32 | k0 for (_, _, k0, k1), _ in kat], u64)
  for dev in ("LLVM", "LLVM:O0"):
    got = run(elementwise(Ops.THREEFRY, u64, n=3), np.zeros(3, np.uint64), x, key, dev=dev)[0]
    assert got.tolist() == [o1 << 32 | o0 for _, (o0, o1) in kat]


# ***** whole programs *****

def check_program(p, arrays, dev, vals=()):
  """The program's buffers after a run on dev equal the emulator's bit for bit (NaN as one value), except the elements
  the emulator marks loose (allowed-set results such as MULACC's, NaN payloads)."""
  got = run(p, *arrays, dev=dev, vals=vals)
  want = emulate(p, arrays, vals=vals)
  for k, (g, w, loose) in enumerate(zip(got, want.buffers, want.loose)):
    bad = ~same_bits(g, w) & ~loose
    assert not bad.any(), f"{p.name} buffer {k} on {dev}: got {g[bad][:4]}, want {w[bad][:4]}"
  return got

@LEVELS
def test_loops_and_accumulators_match_the_emulator(dev):
  """Row sums of squares (unfused, in order), a max accumulator re-initialised for every row, a vector accumulator, and
  accumulators read after their loop closed."""
  b = ProgramBuilder("acc_loops")
  sums, maxes, pair, x = b.global_buf(f32, 8), b.global_buf(f16, 8), b.global_buf(i64, 16), b.global_buf(f32, 8 * 16)
  row = b.gidx(0, 8)
  s = b.acc(b.const(0.0, f32))
  v = b.acc(b.const((0, 1), i64.vec(2)))
  with b.loop(8) as rep:
    m = b.acc(b.const(-math.inf, f16))
    with b.loop(16) as k:
      e = b.load(x, b.alu(Ops.ADD, b.alu(Ops.MUL, row, b.const(16, i32)), k))
      b.assign(m, b.alu(Ops.MAX, m, b.cast(e, f16)))
      with b.when(b.alu(Ops.CMPLT, rep, b.const(1, i32))): b.assign(s, b.alu(Ops.ADD, s, b.alu(Ops.MUL, e, e)))
    b.store(maxes, row, m)
    b.assign(v, b.alu(Ops.MUL, v, b.vectorize(b.cast(rep, i64), b.const(3, i64))))
  b.store(sums, row, s)
  b.store(pair, b.alu(Ops.MUL, row, b.const(2, i32)), v)
  p = b.build()
  xs = np.random.default_rng(0).standard_normal(128).astype(np.float32) * 100
  got = check_program(p, [np.zeros(8, np.float32), np.zeros(8, np.float16), np.zeros(16, np.int64), xs], dev)
  want = np.zeros(8, np.float32)
  for k in range(16): want = want + xs.reshape(8, 16)[:, k] ** 2  # float32, in order, unfused
  assert_same(got[0], want, "row sums")
  assert got[2].tolist() == [0, 3**8] * 8  # lane 0: 0 * rep, lane 1: 1 * 3^8 (wraps nowhere)

@LEVELS
def test_gated_loads_and_stores_with_a_false_gate_touch_no_memory(dev, tmp_path):
  """A false gate does no access: the index of a false-gated LOAD/STORE points 2^28 elements past the buffer (a segfault
  if touched), and the run happens in a child process so that a fault fails this test instead of the suite."""
  b = ProgramBuilder("gated_far")
  out, x, lim = b.global_buf(i32, 16), b.global_buf(i32, 16), b.var("lim", 0, 16)
  i = b.gidx(0, 16)
  gate = b.alu(Ops.CMPLT, i, lim)
  far = b.alu(Ops.WHERE, gate, i, b.alu(Ops.ADD, i, b.const(1 << 28, i32)))
  v = b.load(x, far, gate=gate, alt=b.const(-7, i32))
  b.store(out, far, b.alu(Ops.ADD, v, b.const(100, i32)), gate=gate)
  b.store(out, i, v, gate=b.alu(Ops.CMPLT, lim, b.alu(Ops.ADD, i, b.const(1, i32))))
  p = b.build()
  init, xs = np.full(16, -1, np.int32), np.arange(16, dtype=np.int32) * 10
  want = emulate(p, [init, xs], vals=(9,)).buffers[0]
  assert want.tolist() == [10 * k + 100 for k in range(9)] + [-7] * 7  # the rule, stated
  code = ("import sys, numpy as np\nfrom refimpl.ir import Program\nfrom refimpl.runner import Kernel\n"
          "p = Program.load(sys.argv[1])\n"
          "out = Kernel(p, sys.argv[2])(np.full(16, -1, np.int32), np.arange(16, dtype=np.int32) * 10, vals=(9,))[0]\n"
          "print(out.tolist())\n")
  p.save(tmp_path / "p.json")
  res = subprocess.run([sys.executable, "-c", code, str(tmp_path / "p.json"), dev], capture_output=True, timeout=300, text=True)
  assert res.returncode == 0, f"exit status {res.returncode}: {res.stderr[-2000:]}"
  assert res.stdout.strip() == str(want.tolist())

@LEVELS
def test_range_bounds_are_read_once_at_the_range(dev):
  """RANGE's srcs are values at the RANGE: a loop bounded by an accumulator its body increments still runs the number of
  times the accumulator held when the loop began (3 here), as the emulator runs it."""
  b = ProgramBuilder("acc_bound")
  out = b.global_buf(i32, 16)
  acc = b.acc(b.const(3, i32))
  with b.loop_uops(b.const(0, i32), acc) as r:
    b.store(out, r, b.const(1, i32))
    b.assign(acc, b.alu(Ops.ADD, acc, b.const(1, i32)))
  assert check_program(b.build(), [np.zeros(16, np.int32)], dev)[0].tolist() == [1, 1, 1] + [0] * 13

@LEVELS
def test_if_blocks_and_define_var_loop_bounds(dev):
  b = ProgramBuilder("if_loop")
  out, n = b.global_buf(i32, 32), b.var("n", 0, 32)
  with b.loop_uops(b.const(0, i32), n) as r:
    not_third = b.alu(Ops.CMPNE, b.alu(Ops.MOD, r, b.const(3, i32)), b.const(0, i32))
    with b.when(not_third): b.store(out, r, b.alu(Ops.MUL, r, r))
  p = b.build()
  for n_ in (20, 0, 32):
    got = check_program(p, [np.zeros(32, np.int32)], dev, vals=(n_,))[0]
    assert got.tolist() == [k * k if k < n_ and k % 3 else 0 for k in range(32)]

@LEVELS
def test_arguments_are_the_buffers_then_the_vars_whatever_the_declaration_order(dev):
  """The call signature is every buffer (DEFINE_GLOBAL number order), then every DEFINE_VAR, even when a DEFINE_VAR is
  declared first."""
  b = ProgramBuilder("var_first")
  n = b.var("n", 0, 8)
  out = b.global_buf(i32, 8)
  m = b.var("m", 0, 100)
  with b.loop_uops(b.const(0, i32), n) as r: b.store(out, r, b.alu(Ops.ADD, r, m))
  got = check_program(b.build(), [np.zeros(8, np.int32)], dev, vals=(5, 40))[0]
  assert got.tolist() == [40, 41, 42, 43, 44, 0, 0, 0]

@LEVELS
def test_vectors_load_compute_shuffle_and_store(dev):
  b = ProgramBuilder("vec4")
  out, hout, x = b.global_buf(f32, 32), b.global_buf(f16, 32), b.global_buf(f32, 32)
  g = b.gidx(0, 8)
  base = b.alu(Ops.MUL, g, b.const(4, i32))
  v = b.load(x, base, count=4)
  w = b.alu(Ops.MUL, v, b.const((1.0, 2.0, 3.0, 4.0), f32.vec(4)))
  rev = b.gep(w, 3, 2, 1, 0)
  pair = b.vectorize(b.gep(rev, 0), b.gep(v, 0))
  b.store(out, base, rev)
  b.store(out, base, b.gep(pair, 0, 1), gate=b.alu(Ops.CMPLT, g, b.const(2, i32)))
  hv = b.cast(v, f16.vec(4))
  b.store(hout, base, b.alu(Ops.MULACC, hv, hv, b.alu(Ops.SQRT, hv)))
  p = b.build()
  xs = np.arange(32, dtype=np.float32) + 0.5
  got = check_program(p, [np.zeros(32, np.float32), np.zeros(32, np.float16), xs], dev)
  h = xs.astype(np.float16)
  assert_same(got[1], h * h + np.sqrt(h), "MULACC of half vectors, unfused")  # numpy rounds each float16 op once
  got = got[0]
  quad = (xs.reshape(8, 4) * [1, 2, 3, 4])[:, ::-1].copy()
  quad[:2, 1] = xs.reshape(8, 4)[:2, 0]
  assert got.tolist() == quad.ravel().tolist()

@LEVELS
def test_grid_programs_and_locals_run_through_the_loop_lowering(dev):
  b = ProgramBuilder("grid2d")
  out, x = b.global_buf(f32, 6 * 8), b.global_buf(f32, 6 * 8)
  tmp = b.local_buf(f32, 4)
  g0, g1, l0 = b.gidx(0, 2), b.gidx(1, 6), b.lidx(0, 4)
  col = b.alu(Ops.ADD, b.alu(Ops.MUL, g0, b.const(4, i32)), l0)
  idx = b.alu(Ops.ADD, b.alu(Ops.MUL, g1, b.const(8, i32)), col)
  b.store(tmp, l0, b.alu(Ops.ADD, b.load(x, idx), b.cast(g1, f32)))
  b.store(out, idx, b.load(tmp, l0))
  p = b.build()
  xs = np.arange(48, dtype=np.float32)
  got = check_program(p, [np.zeros(48, np.float32), xs], dev)[0]
  assert got.tolist() == (xs + np.repeat(np.arange(6), 8)).tolist()

@LEVELS
def test_wmma_accumulates_like_the_emulator(dev):
  N, M, K = 2, 3, 4
  b = ProgramBuilder("wmma")
  out, abuf, bbuf, cbuf = b.global_buf(f32, M * N), b.global_buf(f16, M * K), b.global_buf(f16, K * N), b.global_buf(f32, M * N)
  zero = b.const(0, INDEX_DTYPE)
  d = b.wmma(b.load(abuf, zero, count=M * K), b.load(bbuf, zero, count=K * N), b.load(cbuf, zero, count=M * N), (N, M, K))
  b.store(out, zero, d)
  p = b.build()
  rng = np.random.default_rng(4)
  av, bv, cv = (rng.standard_normal(s).astype(t) for s, t in ((M * K, np.float16), (K * N, np.float16), (M * N, np.float32)))
  got = check_program(p, [np.zeros(M * N, np.float32), av, bv, cv], dev)[0]
  want = cv.reshape(M, N).astype(np.float64) + av.reshape(M, K).astype(np.float64) @ bv.reshape(K, N).astype(np.float64)
  np.testing.assert_allclose(got, want.ravel().astype(np.float32), rtol=1e-6)

@LEVELS
def test_random_programs_match_the_emulator(dev):
  """refimpl.ir.strategies' random programs (every op family, casts, bitcasts, vectors, gated and vector memory, loops,
  IF blocks, grids, locals) on edge-biased inputs; programs where the emulator finds undefined behaviour are skipped,
  and elements the emulator marks loose (NaN payloads, allowed sets) are not compared."""
  compared = 0
  for seed in range(120):
    p = random_program(RandomChooser(random.Random(seed)), steps=20)
    rng = np.random.default_rng(seed)
    bufs = [random_values(ptr.base, ptr.size, rng) for _, ptr in sorted(p.buffers.items())]
    vals = [int(rng.integers(lo, hi + 1)) for _, lo, hi in p.vars]
    em = emulate(p, bufs, vals, strict=False)
    if em.events: continue
    got = run(p, *bufs, dev=dev, vals=vals)
    for k, (g, w, loose) in enumerate(zip(got, em.buffers, em.loose)):
      bad = ~same_bits(g, w) & ~loose
      assert not bad.any(), f"seed {seed} buffer {k}: got {g[bad][:4]}, want {w[bad][:4]}\n{p}"
    compared += 1
  assert compared >= 30  # enough programs are free of undefined behaviour to mean something
