"""Importing real tinygrad 0.10.1 kernels (refimpl.tinygrad): every captured kernel verifies, the emulator
reproduces tinygrad's PYTHON-device outputs, the JSON form round-trips, each translation rule fires on a real kernel,
and what refimpl cannot express raises TranslationError naming the uop."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tinygrad")

from tinygrad import Tensor
from tinygrad import dtypes as tg_dtypes
from tinygrad.engine.realize import get_kernel
from tinygrad.ops import Ops as TgOps
from tinygrad.ops import UOp as TgUOp
from tinygrad.renderer.cstyle import ClangRenderer

from refimpl.dtype import dtypes, truncate
from refimpl.emulator.machine import emulate
from refimpl.ir import Ops, load_program, save_program, verify
from refimpl.tinygrad.v0_10.capture import capture
from refimpl.tinygrad.v0_10.importer import TRANSLATION_RULES, TranslationError, from_tinygrad, translate

D = "PYTHON"


def _t(x: np.ndarray) -> Tensor: return Tensor(x, device=D)

def _f32(n: int, lo: float = -4.0, hi: float = 4.0, seed: int = 0) -> np.ndarray:
  return np.random.default_rng(seed).uniform(lo, hi, n).astype(np.float32)

def run_captured(fn) -> list:
  """Run fn() under capture() on the PYTHON device; return the captured kernels (all of which must translate)."""
  with capture() as kernels: fn()
  assert kernels, "no kernel ran"
  for k in kernels: assert k.program is not None, f"{k.name} did not translate: {k.error}"
  return kernels

def check_kernel(k, tmp_path) -> None:
  """The Program verifies, round-trips through JSON, and the emulator reproduces tinygrad's outputs: bit for bit,
  except float buffers of a kernel where a float CONST was rounded (rule 8), which must agree to float32 precision."""
  p = verify(k.program)
  path = tmp_path / f"{p.name}.json"
  save_program(p, path)
  assert load_program(path) == p
  res = emulate(p, k.inputs, vals=k.vals)
  for n, (got, want) in enumerate(zip(res.buffers, k.outputs)):
    got = np.asarray(got).reshape(-1)
    assert got.dtype == want.dtype and got.shape == want.shape, (k.name, n)
    if "float-const" in k.fired and want.dtype.kind == "f":
      np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True, err_msg=f"{k.name} buffer {n}")
    else:
      assert got.tobytes() == want.tobytes(), f"{k.name} buffer {n}: {got} != {want}"

def check_all(fn, tmp_path) -> list:
  kernels = run_captured(fn)
  for k in kernels: check_kernel(k, tmp_path)
  return kernels

def fired(kernels, rule: str) -> list[str]: return [k.name for k in kernels if rule in k.fired]

def clang_specs(t: Tensor) -> list:
  """The ProgramSpecs tinygrad's CLANG renderer makes for t's schedule (rendered only: no compiler needed)."""
  return [get_kernel(ClangRenderer(), si.ast).to_program() for si in t.schedule() if si.ast.op is TgOps.SINK]


# ***** workloads: every captured kernel verifies, round-trips and matches tinygrad *****

WORKLOADS = {
  "add": lambda: (_t(_f32(16)) + _t(_f32(16, seed=1))).numpy(),
  "mul": lambda: (_t(_f32(16)) * _t(_f32(16, seed=1))).numpy(),
  "cast_int_float": lambda: _t(np.arange(-8, 8, dtype=np.int32)).cast(tg_dtypes.float32).numpy(),
  "cast_uint_sub": lambda: (_t(np.arange(16, dtype=np.float32)).cast(tg_dtypes.uint32) - 1).numpy(),
  "sum": lambda: _t(_f32(16)).sum().numpy(),
  "max": lambda: _t(_f32(16).reshape(4, 4)).max(axis=1).numpy(),
  "matmul": lambda: (_t(_f32(16).reshape(4, 4)) @ _t(_f32(16, seed=1).reshape(4, 4))).numpy(),
  "exp": lambda: _t(_f32(16)).exp().numpy(),
  "log": lambda: _t(_f32(16, 0.1, 10.0)).log().numpy(),
  "int_div": lambda: (_t(np.arange(-20, 12, dtype=np.int32)) // 3).numpy(),
  "where": lambda: (_t(_f32(16)) > 0).where(_t(_f32(16, seed=1)), _t(_f32(16, seed=2))).numpy(),
}

@pytest.mark.parametrize("workload", list(WORKLOADS))
def test_workload(workload, tmp_path):
  check_all(WORKLOADS[workload], tmp_path)


def test_capture_dedups_by_program(tmp_path):
  def twice():
    x = _t(_f32(16))
    (x + 1).numpy()
    (x + 1).numpy()
  kernels = run_captured(twice)
  assert len({k.program for k in kernels}) == len(kernels)
  assert all(k.name.isidentifier() for k in kernels)


# ***** one test per translation rule, on a real kernel where it occurs *****

def test_rules_table():
  assert list(TRANSLATION_RULES) == ["noop-alias", "vector-ptr-cast", "acc-srcs", "acc-id", "barrier-src", "if-barrier",
                                     "load-barrier", "float-const", "int-const", "launch-none", "special-size",
                                     "unsized-pointer", "store-if"]
  assert all(f.__doc__ and f.__doc__.startswith(f"Rule {n}:") for n, f in enumerate(TRANSLATION_RULES.values(), 1))

def test_rule1_noop_alias():
  # tinygrad's C renderers put a NOOP before each BITCAST (exp2's decomposition has BITCASTs)
  specs = clang_specs(Tensor.empty(16, device=D).exp())
  t = translate(specs[-1])
  assert t.fired["noop-alias"] and not any(u.op.name == "NOOP" for u in t.program.uops)
  assert any(u.op is Ops.BITCAST for u in t.program.uops)
  assert sum(u.op is TgOps.NOOP for u in specs[-1].uops) == len(t.fired["noop-alias"])

def test_rule2_vector_ptr_cast(tmp_path):
  kernels = check_all(WORKLOADS["add"], tmp_path)
  assert fired(kernels, "vector-ptr-cast")
  p = next(k.program for k in kernels if "vector-ptr-cast" in k.fired)
  assert any(u.op is Ops.LOAD and u.dtype == dtypes.float32.vec(4) for u in p.uops)
  assert any(u.op is Ops.STORE and p.uops[u.src[1]].dtype == dtypes.float32.vec(4) for u in p.uops)
  assert not any(u.op is Ops.CAST and hasattr(u.dtype, "base") and u.dtype.base != u.dtype for u in p.uops)

def test_rules3_to_7_reduce_with_locals(tmp_path):
  # a sum on the PYTHON device: a local buffer, BARRIER (local STORE), IF (gate, BARRIER), DEFINE_ACC (0.0, RANGE)
  kernels = check_all(WORKLOADS["sum"], tmp_path)
  for rule in ("acc-srcs", "acc-id", "barrier-src", "if-barrier", "load-barrier"): assert fired(kernels, rule), rule
  k = next(k for k in kernels if "acc-id" in k.fired)
  tg = [u for u in k.spec.uops if u.op is TgOps.DEFINE_ACC]
  assert [u.arg for u in tg] == [(0,)] and len(tg[0].src) == 2
  accs = [u for u in k.program.uops if u.op is Ops.DEFINE_ACC]
  assert [(u.arg, len(u.src)) for u in accs] == [(0, 1)]
  assert all(not u.src for u in k.program.uops if u.op is Ops.BARRIER)
  assert all(len(u.src) == 1 for u in k.program.uops if u.op is Ops.IF)

def test_rule4_upcast_accumulators(tmp_path):
  # a 64x64 matmul upcasts its accumulator: DEFINE_ACC args (0, 0) .. (0, 15) become ids 0 .. 15
  a, b = _f32(64 * 64).reshape(64, 64), _f32(64 * 64, seed=1).reshape(64, 64)
  kernels = check_all(lambda: (_t(a) @ _t(b)).numpy(), tmp_path)
  k = next(k for k in kernels if "acc-id" in k.fired)
  assert [u.arg for u in k.spec.uops if u.op is TgOps.DEFINE_ACC] == [(0, j) for j in range(16)]
  assert [u.arg for u in k.program.uops if u.op is Ops.DEFINE_ACC] == list(range(16))
  np.testing.assert_allclose(k.outputs[0].reshape(64, 64), a @ b, rtol=1e-4, atol=1e-4)

def test_rule8_float_const(tmp_path):
  kernels = check_all(WORKLOADS["exp"], tmp_path)
  k = next(k for k in kernels if "float-const" in k.fired)
  log2e = 1.4426950408889634
  tg = [u for u in k.spec.uops if u.op is TgOps.CONST and u.arg == log2e]
  assert tg and k.spec.uops.index(tg[0]) in k.fired["float-const"]
  consts = {u.arg for u in k.program.uops if u.op is Ops.CONST and u.dtype == dtypes.float32}
  assert log2e not in consts and float(np.float32(log2e)) in consts
  # half goes through float32 (the C literal is a float, then cast)
  half = translate([TgUOp(TgOps.CONST, tg_dtypes.half, (), 1e-05)], name="k").program.uops[0].arg
  assert half == float(truncate[dtypes.float16](float(np.float32(1e-05))))

def test_rule9_int_const(tmp_path):
  kernels = check_all(WORKLOADS["cast_uint_sub"], tmp_path)
  k = next(k for k in kernels if "int-const" in k.fired)
  assert any(u.op is TgOps.CONST and u.dtype == tg_dtypes.uint32 and u.arg == -1 for u in k.spec.uops)
  assert any(u.op is Ops.CONST and u.dtype == dtypes.uint32 and u.arg == 2**32 - 1 for u in k.program.uops)

def test_rule10_launch_none():
  x = np.arange(16, dtype=np.float32)
  spec = clang_specs(_t(x) * 2)[-1]
  assert spec.global_size is None and spec.local_size is None
  t = translate(spec)
  assert "launch-none" in t.fired and t.program.global_size == t.program.local_size == (1, 1, 1)
  res = emulate(t.program, [np.zeros(16, np.float32), x])
  assert res.buffers[0].reshape(-1).tobytes() == (x * 2).tobytes()


# ***** what does not translate *****

def _buf(n: int = 4): return TgUOp(TgOps.DEFINE_GLOBAL, tg_dtypes.float.ptr(n), (), 0)

def test_vconst_raises():
  g = _buf()
  uops = [g, TgUOp(TgOps.VCONST, tg_dtypes.float.vec(2), (), (1.0, 2.0))]
  with pytest.raises(TranslationError, match=r"uop 1 VCONST") as e: from_tinygrad(uops)
  assert e.value.index == 1 and e.value.op == "VCONST"

def _gated_store(gate_value: bool, after_endif: bool = False) -> list:
  """buf[0] = 1.0 as tinygrad gates a STORE: STORE (INDEX, value, IF) inside the IF block of the gate (or after it)."""
  g, c0 = _buf(), TgUOp(TgOps.CONST, tg_dtypes.int, (), 0)
  gate = TgUOp(TgOps.CONST, tg_dtypes.bool, (), gate_value)
  iff = TgUOp(TgOps.IF, tg_dtypes.void, (gate,))
  idx = TgUOp(TgOps.INDEX, g.dtype, (g, c0))
  val = TgUOp(TgOps.CONST, tg_dtypes.float, (), 1.0)
  st, end = TgUOp(TgOps.STORE, tg_dtypes.void, (idx, val, iff)), TgUOp(TgOps.ENDIF, tg_dtypes.void, (iff,))
  return [g, c0, gate, iff, idx, val, end, st] if after_endif else [g, c0, gate, iff, idx, val, st, end]

def test_rule13_store_if():
  """Rule 13: the IF block gates the STORE: it stores where the gate holds and not elsewhere; a STORE that names an IF
  whose block has ended does not translate."""
  for gate in (True, False):
    t = translate(_gated_store(gate))
    assert "store-if" in t.fired and all(len(u.src) == 2 for u in t.program.uops if u.op is Ops.STORE)
    assert emulate(t.program, [np.zeros(4, np.float32)]).buffers[0][0] == (1.0 if gate else 0.0)
  with pytest.raises(TranslationError, match=r"uop 7 STORE: a STORE gated through an IF whose block has ended"):
    from_tinygrad(_gated_store(True, after_endif=True))

def test_rule12_unsized_pointer():
  """Rule 12: a pointer with no size (ptr(-1), as tinygrad's hand-built test kernels use) takes its buffer's size at
  launch (buffer_sizes), and so does its INDEX; without the sizes the kernel does not translate."""
  g = TgUOp(TgOps.DEFINE_GLOBAL, tg_dtypes.float.ptr(), (), 0)
  c1 = TgUOp(TgOps.CONST, tg_dtypes.int, (), 5)
  idx = TgUOp(TgOps.INDEX, g.dtype, (g, c1))
  uops = [g, c1, idx, TgUOp(TgOps.CONST, tg_dtypes.float, (), 2.0)]
  uops.append(TgUOp(TgOps.STORE, tg_dtypes.void, (idx, uops[-1])))
  t = translate(uops, buffer_sizes=[6])
  assert "unsized-pointer" in t.fired and t.program.buffers[0].size == 6
  assert emulate(t.program, [np.zeros(6, np.float32)]).buffers[0][5] == 2.0
  with pytest.raises(TranslationError, match=r"uop 0 DEFINE_GLOBAL: pointer .* has no size"): from_tinygrad(uops)

def test_image_special_wmma_unknown_raise():
  img = TgUOp(TgOps.DEFINE_GLOBAL, tg_dtypes.imagef((2, 2, 4)), (), 0)
  with pytest.raises(TranslationError, match=r"uop 0 DEFINE_GLOBAL: image dtype"): from_tinygrad([img])
  with pytest.raises(TranslationError, match=r"uop 1 SPECIAL: SPECIAL arg \('idx0', 4\)"):
    from_tinygrad([_buf(), TgUOp(TgOps.SPECIAL, tg_dtypes.int, (), ("idx0", 4))])
  v = TgUOp(TgOps.CONST, tg_dtypes.float.vec(2), (), 1.0)
  wmma = TgUOp(TgOps.WMMA, tg_dtypes.float.vec(2), (v, v, v), ("WMMA_8_8_8", (8, 8, 8), tg_dtypes.half, tg_dtypes.float))
  with pytest.raises(TranslationError, match=r"uop 1 WMMA: tinygrad's WMMA arg"): from_tinygrad([v, wmma])
  with pytest.raises(TranslationError, match=r"uop 1 SINK: SINK is not an op"):
    from_tinygrad([_buf(), TgUOp(TgOps.SINK, tg_dtypes.void, ())])




def test_a_translation_that_breaks_the_ir_names_the_tinygrad_uop():
  """A uint32 shift count on an int32 value (possible in 0.10.1): refimpl's shifts take one dtype, so the translation is
  refused, naming the tinygrad uop and the IR rule."""
  g, c0 = _buf(), TgUOp(TgOps.CONST, tg_dtypes.int, (), 0)
  noop_src = TgUOp(TgOps.CONST, tg_dtypes.int, (), 1)
  noop = TgUOp(TgOps.NOOP, tg_dtypes.int, (noop_src,))  # an alias: refimpl's uop indices shift by one after it
  gi = TgUOp(TgOps.DEFINE_GLOBAL, tg_dtypes.int.ptr(4), (), 1)
  idx = TgUOp(TgOps.INDEX, gi.dtype, (gi, c0))
  sh = TgUOp(TgOps.SHL, tg_dtypes.int, (noop, TgUOp(TgOps.CONST, tg_dtypes.uint, (), 3)))
  uops = [g, c0, noop_src, noop, gi, idx, sh.src[1], sh, TgUOp(TgOps.STORE, tg_dtypes.void, (idx, sh))]
  want = r"uop 7 SHL: its refimpl translation is not valid IR: uop 6 SHL: \[alu-dtypes\]"
  with pytest.raises(TranslationError, match=want) as e: from_tinygrad(uops)
  assert e.value.index == 7 and e.value.op == "SHL"
