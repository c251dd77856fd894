"""The suite catches real bugs in a real backend: tinygrad 0.10.1's own CLANG (TINYGRAD:CLANG, refimpl.tinygrad.v0_10.backend).

Each case is a small program with inputs where the bug shows, compared element by element with the spec (refimpl's
emulator, the PYTHON device). The cases known to break the spec on tinygrad 0.10.1's CLANG are strict xfails keyed by
case id (KNOWN_BAD): a tinygrad that fixes one turns its test red, so the list stays true. On refimpl's own backends
every case passes. Skipped only when tinygrad is not installed (it is in the dev extra)."""
from __future__ import annotations

import numpy as np
import pytest

from refimpl.device import Device
from refimpl.dtype import dtypes
from refimpl.emulator.machine import emulate
from refimpl.errors import UndefinedBehavior
from refimpl.ir import Ops, ProgramBuilder
from refimpl.runner import Kernel
from refimpl.testing.compare import same_value
from refimpl.testing.differential import OpCase, OpHarness, sweep_inputs
from refimpl.tinygrad.report.classes import CLASSES

pytest.importorskip("tinygrad")

TG_CLANG = "TINYGRAD:CLANG"
F32 = dtypes.float32


def _add_plain():
  """out = a + b on ordinary values: the control case, right on every backend."""
  b = ProgramBuilder("add_plain")
  out, x, y = (b.global_buf(F32, 4) for _ in range(3))
  i = b.gidx(0, 4)
  b.store(out, i, b.alu(Ops.ADD, b.load(x, i), b.load(y, i)))
  return b.build(), [np.zeros(4, np.float32), np.array([1, 2.5, -3, 1e30], np.float32), np.array([2, 0.25, 3, 1e30], np.float32)]


def _sum_loop():
  """out[0] = sum of 8 int32 through a DEFINE_ACC / ASSIGN loop (wrap-around arithmetic, exact)."""
  b = ProgramBuilder("sum_loop")
  out, x = b.global_buf(dtypes.int32, 1), b.global_buf(dtypes.int32, 8)
  zero = b.const(0, dtypes.int32)
  acc = b.acc(zero)
  with b.loop(8) as r: b.assign(acc, b.alu(Ops.ADD, acc, b.load(x, r)))
  b.store(out, zero, acc)
  return b.build(), [np.zeros(1, np.int32), np.array([1, 2, 3, 2**31 - 1, -5, 6, 7, 8], np.int32)]


# the report's reproducers of three classes (refimpl.tinygrad.report.classes.CLASSES), and two controls
REPORTED = ("contraction-mul-add-f32", "reassociation-add-f32", "max-nan-f32")
PROGRAMS = {**{c.id: c.reproducer for c in CLASSES if c.id in REPORTED},
            "control-add-f32": _add_plain, "control-sum-loop-i32": _sum_loop}
KNOWN_BAD = {
  "contraction-mul-add-f32": "tinygrad's clang flags have no -ffp-contract=off: clang fuses the inlined a*b+c into an FMA",
  "reassociation-add-f32": "tinygrad's C renderer strips the parens of a nested ADD: a+(b+c) is rendered a+b+c",
  "max-nan-f32": "tinygrad renders MAX as (a<b)?b:a, which drops a NaN in b",
}
BACKENDS = ["PYTHON", "CLANG", TG_CLANG]


def _params():
  for backend in BACKENDS:
    for case in PROGRAMS:
      marks = [pytest.mark.xfail(strict=True, reason=KNOWN_BAD[case])] if backend == TG_CLANG and case in KNOWN_BAD else []
      yield pytest.param(backend, case, marks=marks, id=f"{backend}-{case}")


def _need(backend: str) -> None:
  reason = Device.open_error(backend)
  if reason is not None: pytest.skip(f"{backend} does not open here: {reason}")


@pytest.mark.parametrize("device,case", list(_params()))
def test_program_matches_the_spec(device, case):
  _need(device)
  program, inputs = PROGRAMS[case]()
  want = emulate(program, inputs).buffers
  got = Kernel(program, device)(*[a.copy() for a in inputs])
  for k, (g, w) in enumerate(zip(got, want)):
    assert same_value(g, w).all(), f"{device} {case}: buffer {k}: got {g!r}, the spec gives {w!r}"


OP_CASES = {"MAX-f32": OpCase(Ops.MAX, F32), "ADD-f32": OpCase(Ops.ADD, F32), "MUL-f32": OpCase(Ops.MUL, F32),
            "IDIV-i32": OpCase(Ops.IDIV, dtypes.int32), "CMPLT-f32": OpCase(Ops.CMPLT, F32),
            "CAST-f32-to-i32": OpCase(Ops.CAST, F32, dtypes.int32)}
KNOWN_BAD_OPS = {"MAX-f32": KNOWN_BAD["max-nan-f32"]}


@pytest.mark.parametrize("case_id", [pytest.param(c, marks=[pytest.mark.xfail(strict=True, reason=KNOWN_BAD_OPS[c])]
                                                   if c in KNOWN_BAD_OPS else [], id=f"{TG_CLANG}-{c}") for c in OP_CASES])
def test_op_sweep_on_tinygrad_clang(case_id):
  """The op suite's own sweep (every edge value and pair, then random values; undefined lanes never sent)."""
  _need(TG_CLANG)
  case = OP_CASES[case_id]
  h = OpHarness(TG_CLANG, case, lanes=1 << 12)
  inputs = [x[: 1 << 12] for x in sweep_inputs(case, lanes=1 << 12)]
  verdict = h.check(inputs)
  assert verdict.ok, h.failure_report(inputs, verdict)


def test_undefined_inputs_never_reach_tinygrad_clang():
  """7 // 0 traps (SIGFPE) in tinygrad's CLANG code; the device refuses the launch with UndefinedBehavior instead (SPEC.md,
  idiv_mod: division by zero gives an undefined value, and storing it is undefined). Reaching the assertion at all
  means the process did not die."""
  _need(TG_CLANG)
  b = ProgramBuilder("div")
  out, x, y = (b.global_buf(dtypes.int32, 2) for _ in range(3))
  i = b.gidx(0, 2)
  b.store(out, i, b.alu(Ops.IDIV, b.load(x, i), b.load(y, i)))
  kernel = Kernel(b.build(), TG_CLANG)
  with pytest.raises(UndefinedBehavior, match="division by zero"):
    kernel(np.zeros(2, np.int32), np.array([7, 1], np.int32), np.array([0, 1], np.int32))
  assert kernel(np.zeros(2, np.int32), np.array([7, -7], np.int32), np.array([2, 2], np.int32))[0].tolist() == [3, -3]


def _plus_var(hi: int):
  """out[g] = x[g] + n for a DEFINE_VAR n in [0, hi]: the bound is in no source, so programs of two bounds compile to
  the same machine code on tinygrad's CLANG (its binary is the bare code, jit_loader's)."""
  b = ProgramBuilder("plus_var")
  out, x = b.global_buf(dtypes.int32, 4), b.global_buf(dtypes.int32, 4)
  n = b.var("n", 0, hi)
  i = b.gidx(0, 4)
  b.store(out, i, b.alu(Ops.ADD, b.load(x, i), n))
  return b.build()

def test_each_kernel_of_a_batch_is_checked_as_its_own_program():
  """A launch on a TINYGRAD device is checked against the program built under its kernel name, even where another
  program of the batch compiled to the same binary: the wide bound's kernel runs with n = 7, which the narrow
  bound's program would refuse (a false runtime-error finding, as the fuzzer once reported)."""
  from refimpl.fuzz.execute import build, run
  _need(TG_CLANG)
  wide, narrow = build(Device[TG_CLANG], [_plus_var(10), _plus_var(3)], cache=False)
  assert wide.kernel.lib == narrow.kernel.lib, "the two programs no longer share a binary: the test checks nothing"
  assert run(wide.kernel, [np.zeros(4, np.int32), np.arange(4, dtype=np.int32)], (7,))[0].tolist() == [7, 8, 9, 10]
  assert run(narrow.kernel, [np.zeros(4, np.int32), np.arange(4, dtype=np.int32)], (3,))[0].tolist() == [3, 4, 5, 6]
