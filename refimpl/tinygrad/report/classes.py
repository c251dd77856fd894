"""The disagreement classes of the tinygrad report: what tinygrad 0.10.1's backends do that the spec does not allow,
each with the rule it breaks and a shrunk reproducer (a 4-lane program and its inputs).

`run_reproducer(c, device)` runs one class's reproducer on a device and says whether it breaks the rule there;
`replay(class_id, device)` prints it (`replay_command` is the shell line the pages show). The report
(refimpl.tinygrad.report.runner) runs every class on every backend it tests and on refimpl's own CLANG, LLVM and
GPU; its pages (refimpl.tinygrad.report.pages) show each class with its reproducer.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from refimpl.dtype import DType, dtypes
from refimpl.ir import Ops, Program, ProgramBuilder


def safe_label(backend: str) -> str:
  """A file-name-safe form of a backend label (a porter's module:Class included)."""
  return re.sub(r"[^A-Za-z0-9_.-]", "_", backend)


def suite_report(backend: str) -> str: return f"tinygrad-0.10.1-{safe_label(backend)}-suite"

REFIMPL_BACKENDS = ("CLANG", "LLVM", "GPU")
F32 = dtypes.float32


def _elementwise(name: str, op: Ops, inputs: list[np.ndarray], out: DType | None = None) -> tuple[Program, list[np.ndarray]]:
  """out[i] = op(in...[i]) over 4 lanes; inputs[0] is the output buffer."""
  from refimpl.dtype import from_np
  b = ProgramBuilder(name)
  bufs = [b.global_buf(from_np(x.dtype), 4) for x in inputs]
  i = b.gidx(0, 4)
  vals = [b.load(x, i) for x in bufs[1:]]
  b.store(bufs[0], i, b.uop(op, out, tuple(vals)) if op is Ops.CAST else b.alu(op, *vals))
  return b.build(), inputs


def _mul_add():
  """a*b + c as MUL then ADD (each rounds once): a = b = 1+2^-12, c = -(1+2^-11) gives 0; an FMA gives 2^-24."""
  one = np.float32(1 + 2**-12)
  b = ProgramBuilder("mul_add")
  out, x, y, z = (b.global_buf(F32, 4) for _ in range(4))
  i = b.gidx(0, 4)
  b.store(out, i, b.alu(Ops.ADD, b.alu(Ops.MUL, b.load(x, i), b.load(y, i)), b.load(z, i)))
  return b.build(), [np.zeros(4, np.float32), np.full(4, one), np.full(4, one), np.full(4, -(1 + 2**-11), np.float32)]


def _add_nested():
  """a + (b + c) with a = 1, b = c = 2^-24: 1+2^-23; (a + b) + c rounds twice to 1."""
  b = ProgramBuilder("add_nested")
  out, x, y, z = (b.global_buf(F32, 4) for _ in range(4))
  i = b.gidx(0, 4)
  b.store(out, i, b.alu(Ops.ADD, b.load(x, i), b.alu(Ops.ADD, b.load(y, i), b.load(z, i))))
  return b.build(), [np.zeros(4, np.float32), np.ones(4, np.float32), np.full(4, 2**-24, np.float32),
                     np.full(4, 2**-24, np.float32)]


def _max_nan():
  return _elementwise("max_nan", Ops.MAX, [np.zeros(4, np.float32), np.array([1, np.nan, 2, -3], np.float32),
                                           np.array([np.nan, 1, np.nan, np.nan], np.float32)])


def _cmplt_nan():
  return _elementwise("cmplt_nan", Ops.CMPLT, [np.zeros(4, np.bool_), np.array([np.nan, 1, np.nan, 1], np.float32),
                                               np.array([1, np.nan, np.nan, 2], np.float32)])


def _shl_i32():
  return _elementwise("shl_i32", Ops.SHL, [np.zeros(4, np.int32), np.array([1, 3, -1, 5], np.int32),
                                           np.array([2, 4, 31, 0], np.int32)])


def _neg_u32():
  return _elementwise("neg_u32", Ops.NEG, [np.zeros(4, np.uint32), np.array([1, 3, 0, 2**31], np.uint32)])


def _add_i8():
  return _elementwise("add_i8", Ops.ADD, [np.zeros(4, np.int8), np.array([-1, 100, -128, 5], np.int8),
                                          np.array([-1, 100, -1, 6], np.int8)])


def _exp2_subnormal():
  return _elementwise("exp2_subnormal", Ops.EXP2, [np.zeros(4, np.float32), np.array([-134.31805, -130, -140, -149], np.float32)])


def _cast_through_u8():
  """CAST int32 -> uint8 -> int32: -19 wraps to 237 (and 416 to 160)."""
  b = ProgramBuilder("cast_through_u8")
  out, x = b.global_buf(dtypes.int32, 4), b.global_buf(dtypes.int32, 4)
  i = b.gidx(0, 4)
  b.store(out, i, b.uop(Ops.CAST, dtypes.int32, (b.uop(Ops.CAST, dtypes.uint8, (b.load(x, i),)),)))
  return b.build(), [np.zeros(4, np.int32), np.array([-19, 416, 255, 7], np.int32)]


def _sub_negative_constant():
  """x - (-1.5): a SUB whose second operand is a negative constant."""
  b = ProgramBuilder("sub_negative_constant")
  out, x = b.global_buf(F32, 4), b.global_buf(F32, 4)
  i = b.gidx(0, 4)
  b.store(out, i, b.alu(Ops.SUB, b.load(x, i), b.const(-1.5, F32)))
  return b.build(), [np.zeros(4, np.float32), np.array([0, 1, -2, 0.25], np.float32)]


@dataclass(frozen=True)
class DisagreementClass:
  id: str
  backends: tuple[str, ...]  # where it was first seen (the report runs it on every backend)
  what: str
  rule: str
  reproducer: Callable[[], tuple[Program, list[np.ndarray]]]
  tolerance: Ops | None = None  # compared within this op's float32 ulp bound (spec.ulp_bound) rather than exactly


CLASSES = [
  DisagreementClass("contraction-mul-add-f32", ("CLANG", "GPU"),
                    "a MUL feeding an ADD is fused into one FMA: tinygrad's clang flags have no -ffp-contract=off and "
                    "the C renderer inlines a*b into the ADD (OpenCL contracts too)",
                    "SPEC.md, arith: ADD and MUL round once each (exact); MULACC is the only op that may fuse", _mul_add),
  DisagreementClass("reassociation-add-f32", ("CLANG", "GPU"),
                    "the C-style renderer strips the parens of a nested ADD: a+(b+c) is rendered a+b+c, which C evaluates "
                    "as (a+b)+c", "SPEC.md, arith: each ADD rounds once, in the program's order", _add_nested),
  DisagreementClass("max-nan-f32", ("CLANG", "LLVM", "GPU", "WEBGPU", "PYTHON"),
                    "MAX is rendered (a<b)?b:a (tinygrad's extra_matcher), which drops a NaN in b (LLVM: fcmp ult, "
                    "true on NaN, drops a NaN in a instead)",
                    "SPEC.md, maximum: NaN when either operand is NaN", _max_nan),
  DisagreementClass("cmplt-nan-f32", ("LLVM",), "CMPLT is rendered `fcmp ult` (unordered: true when an operand is NaN)",
                    "SPEC.md, compare: a comparison with NaN is false (CMPLT)", _cmplt_nan),
  DisagreementClass("shift-i32-does-not-compile", ("WEBGPU", "LLVM"),
                    "SHL / SHR of int32: WGSL is rendered `a<<b` with an i32 count, and WGSL takes only a u32 shift count, "
                    "so the shader does not compile; tinygrad's LLVM renderer has no SHL (KeyError: render error)",
                    "SPEC.md, shifts: SHL / SHR of int32 by a count in [0, 32) are defined", _shl_i32),
  DisagreementClass("neg-unsigned-does-not-compile", ("WEBGPU", "LLVM"),
                    "NEG of uint32: WGSL is rendered `-a`, and WGSL has no unary minus on u32 (the shader does not "
                    "compile); tinygrad's LLVM renderer fails to render NEG of an unsigned int",
                    "SPEC.md, arith: NEG of an unsigned int wraps (two's complement, 0 - a)", _neg_u32),
  DisagreementClass("wgsl-cast-to-u8-keeps-high-bits", ("WEBGPU",),
                    "CAST to uint8 is rendered as a cast to WGSL's u32 (WGSL has no 8-bit type) without masking: "
                    "int32 -19 -> uint8 -> int32 gives -19, 416 gives 416 (found by the fuzzer)",
                    "SPEC.md, cast: an int to int cast wraps modulo 2^bits of the target (-19 -> 237, 416 -> 160)",
                    _cast_through_u8),
  DisagreementClass("sub-negative-constant-does-not-compile", ("CLANG", "GPU", "WEBGPU", "LLVM"),
                    "x - c with a negative constant c is rendered `(x--1.5f)` by the C-style renderers (C, OpenCL C, WGSL): "
                    "`--` is the decrement token and the kernel does not compile; tinygrad's LLVM renderer has no SUB "
                    "(KeyError). tinygrad's own kernels turn x - c into x + (-c) before rendering, so only a program that "
                    "keeps its SUB shows it (found by the fuzzer on WEBGPU)",
                    "SPEC.md, arith: SUB is defined for every float32 operand", _sub_negative_constant),
  DisagreementClass("wgsl-narrow-int-sign-extension", ("WEBGPU",),
                    "int8 / int16 loads (packed in u32 words) are sign-extended with the constant expression "
                    "`4294967295u<<8u`, which WGSL rejects as overflowing: no kernel of int8 or int16 compiles (the "
                    "probe reports both unsupported)", "SPEC.md, dtypes: int8 and int16 are value dtypes", _add_i8),
  DisagreementClass("wgsl-exp2-subnormal-f32", ("WEBGPU",),
                    "EXP2 is WGSL's exp2 builtin, which on this Vulkan driver (Mesa lavapipe) returns 0 where the "
                    "result is subnormal (LOG2 of a subnormal likewise answers -127)",
                    "SPEC.md, transcendental: EXP2 within its ulp bound of 2^x, subnormal results included", _exp2_subnormal,
                    tolerance=Ops.EXP2),
]
CLASS_BY_ID = {c.id: c for c in CLASSES}
OTHER_CLASSES = ("narrow floats (`__fp16` / `__bf16` arithmetic computed in float and rounded once, not per op), tinygrad's "
                 "own EXP2 / LOG2 / SIN decompositions beyond the spec's ulp bounds, FDIV (no FDIV in tinygrad's C and WGSL "
                 "renderers' code_for_op: render error), vector types of unsigned C types (`unsigned long4`, a compile "
                 "error); on WEBGPU, bool kernels rendered with `bool + bool` (WGSL rejects them: bool unsupported), a "
                 "float4 store that does not render (AttributeError in the WGSL renderer) and float32 FDIV (no FDIV)")


def run_reproducer(c: DisagreementClass, device: str) -> tuple[bool | None, str]:
  """(breaks the rule on `device`, what it gave): the reproducer's output against the emulator's (exact, or by the
  spec's tolerance rule for a transcendental class: refimpl.testing.compare.within_tolerance); an exception is a
  failure, with its whole message (scrubbed of this machine's paths); None on a device judged below level ran
  (refimpl.tinygrad.v0_10.standins) whose kernel rendered (and compiled) but cannot run here."""
  from refimpl import spec
  from refimpl.emulator.machine import emulate
  from refimpl.runner import Kernel
  from refimpl.testing.compare import same_value, within_tolerance
  from refimpl.testing.report_html import scrub
  from refimpl.tinygrad.v0_10.standins import NotRunHere
  program, inputs = c.reproducer()
  want = emulate(program, inputs).buffers[0]
  try: got = Kernel(program, device)(*[a.copy() for a in inputs])[0]
  except NotRunHere as e: return None, scrub(str(e))
  except Exception as e: return True, scrub(f"{type(e).__name__}: {e}")
  if c.tolerance is None: ok = same_value(got, want)
  else: ok = within_tolerance(got, want, spec.ulp_bound(c.tolerance, F32) or 0)
  return not bool(ok.all()), f"got {got.tolist()}, the spec gives {want.tolist()}"


def replay(class_id: str, device: str) -> None:
  """Prints what class `class_id`'s reproducer gives on `device` (e.g. replay("max-nan-f32", "TINYGRAD:CLANG"))."""
  c = CLASS_BY_ID[class_id]
  bad, detail = run_reproducer(c, device)
  verdict = "cannot run here, so neither breaks nor keeps" if bad is None else ("breaks" if bad else "keeps")
  print(f"{class_id} on {device}: {verdict} the rule ({c.rule}): {detail}")


def replay_command(class_id: str, device: str = "TINYGRAD:CLANG") -> str:
  """The shell command that reruns a class's reproducer on a device."""
  return f"python -c \"from refimpl.tinygrad.report.classes import replay; replay('{class_id}', '{device}')\""




def failing(c: DisagreementClass, backends: dict) -> list[str]:
  """The backends on which class c's reproducer broke its rule (in a report's results)."""
  return [b for b, r in backends.items() if r.get("classes", {}).get(c.id, (None,))[0]]
