"""What tinygrad 0.10.1's kernels rely on that the spec or some of its own renderers do not promise: three classes of
the report.

  report_classes(...)       all three, over the corpus, a training step and the edge cases: the report's data, and
                            each kernel found saved as a case file (its reproducer: `python -m refimpl.fuzz replay FILE`)

  barrier_reliance(cases)   kernels that are defined by the spec's BARRIER (it orders the workgroup's locals and
                            globals) but not when a barrier orders locals only (emulate's barrier_scope="local"), which is
                            how tinygrad's OpenCL, Metal and WGSL renderers fence (barrier(CLK_LOCAL_MEM_FENCE),
                            threadgroup_barrier(mem_flags::mem_threadgroup), workgroupBarrier()): a GROUP reduction that
                            loads a global on every thread, BARRIER, then stores it from thread 0. A portability hazard
                            under those memory models, not a wrong answer on the CPUs here.
  discarded_casts(cases)    kernels that are defined but compute a float->int CAST, a shift or an integer division of a
                            deferred kind out of its domain on a lane a WHERE then discards (its range reductions; its
                            test_div_int's (t > 0).where(1 // t, t)): an undefined value, harmless in the spec (and, for
                            the cast and the shift, in LLVM IR), but C undefined behaviour in the C source tinygrad's
                            CLANG renders ((int)x of an out-of-range float, 1 / 0), which clang is allowed to exploit
                            and x86's idiv traps on.

  lockstep_reliance(cases)  kernels that the spec leaves undefined because a thread reads an element that another
                            thread of its workgroup writes after it with no BARRIER between (RACY_READ: the read's value
                            is undefined) and that are defined when the workgroup runs in lock step (emulate's
                            lockstep=True), reads of one step before writes of the next, as one warp does and as
                            tinygrad's PYTHON device runs: a missing BARRIER in tinygrad's kernel, which no GPU memory
                            model covers for a whole workgroup. test_linearizer's test_mid_dim_multireduce is one
                            (`linearizer_cases`); the spec's stop on it is this decision (SPEC.md, Decisions: "races").

A case is (name, refimpl.fuzz.case.Case): the kernel and inputs it ran on. `corpus_cases` reads the tinygrad corpus of
a checkout (corpus/tinygrad-0.10.1/<device>/*.json); `training_step_cases` captures a classifier's training step (its
bias update is a GROUP reduction across a BARRIER); `edge_cases` captures tinygrad's transcendental kernels on edge
inputs (half sin(-0.0), float32 exp(1488522240.0), ...), where range reductions overflow, and test_div_int's discarded
division by zero.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from refimpl.emulator.machine import emulate
from refimpl.emulator.ub import UB
from refimpl.errors import UndefinedBehavior
from refimpl.fuzz.case import Case
from refimpl.ir import Ops

C_UNDEFINED = (UB.CAST_RANGE, UB.SHIFT_COUNT, UB.DIVISOR_ZERO, UB.DIVISION_OVERFLOW)  # deferred, but UB in C


@dataclass(frozen=True)
class Reliance:
  """One kernel of a class: where it comes from, and the uop, thread and reason the emulator names."""
  kernel: str
  uop: int | None
  op: str
  lane: tuple | None
  reason: str


def _defined(case: Case):
  """The spec's strict run of the case (its Emulation), or None when the case is undefined under the spec itself."""
  try: return emulate(case.program, case.inputs, case.vals)
  except UndefinedBehavior: return None

def _racy_read(case: Case) -> UndefinedBehavior | None:
  """The spec's strict run's finding when it is a use of a value a racing read made undefined (RACY_READ), else None."""
  try: emulate(case.program, case.inputs, case.vals)
  except UndefinedBehavior as e: return e if (e.origin or e).kind is UB.RACY_READ else None
  return None

def _entry(name: str, e: UndefinedBehavior) -> Reliance:
  at = e.origin or e
  return Reliance(name, at.uop_index, getattr(at.op, "name", str(at.op)), at.lane, e.reason if e.origin is None else
                  f"{e.reason} ({e.use}); {at.reason}")


def barrier_reliance(cases: Iterable[tuple[str, Case]]) -> list[Reliance]:
  """The cases with a BARRIER that the spec defines and that are undefined (a race) when barriers order locals only."""
  out = []
  for name, case in cases:
    if not any(u.op is Ops.BARRIER for u in case.program.uops) or _defined(case) is None: continue
    try: emulate(case.program, case.inputs, case.vals, barrier_scope="local")
    except UndefinedBehavior as e:
      if e.kind in (UB.RACE, UB.RACY_READ): out.append(_entry(name, e))
  return out


def discarded_casts(cases: Iterable[tuple[str, Case]]) -> list[Reliance]:
  """The cases the spec defines in which a CAST, a shift or a division still made an undefined value (a WHERE
  discarded it)."""
  out = []
  for name, case in cases:
    run = _defined(case)
    if run is None: continue
    for d in run.deferred:
      if d.kind in C_UNDEFINED: out.append(Reliance(name, d.uop_index, d.op.name, d.lane, d.reason))
  return out


def lockstep_reliance(cases: Iterable[tuple[str, Case]]) -> list[Reliance]:
  """The cases the spec leaves undefined through a racing read (RACY_READ) that are defined in lock step."""
  out = []
  for name, case in cases:
    e = _racy_read(case)
    if e is None: continue
    try: emulate(case.program, case.inputs, case.vals, lockstep=True)
    except UndefinedBehavior: continue
    out.append(_entry(name, e))
  return out


def corpus_cases(root: Path) -> Iterator[tuple[str, Case]]:
  """The tinygrad corpus under root (<device>/<kernel>.json), as ("<device>/<kernel>", case)."""
  from refimpl.fuzz.corpus import load_finding
  for path in sorted(root.glob("*/*.json")): yield f"{path.parent.name}/{path.stem}", load_finding(path).case


def training_step_cases(device: str = "PYTHON") -> Iterator[tuple[str, Case]]:
  """The kernels of one SGD step (lr 2^-6) of a 64-128-10 ReLU classifier on a batch of 32 with cross-entropy, its
  parameters buffers of their own as nn.Linear's (which is what makes tinygrad update the last bias with a GROUP
  reduction across a BARRIER), captured on tinygrad's `device`, as ("training step <kernel>", case)."""
  from tinygrad import Tensor, nn

  from refimpl.tinygrad.v0_10.capture import capture
  rng = np.random.default_rng(0)
  shapes = [(128, 64), (128,), (10, 128), (10,)]
  params = [Tensor.empty(*s, device=device, requires_grad=True) for s in shapes]
  for p, s in zip(params, shapes): p.assign(Tensor((rng.standard_normal(s) * 0.1).astype(np.float32), device=device)).realize()
  x = Tensor(rng.standard_normal((32, 64)).astype(np.float32), device=device)
  y = Tensor(rng.integers(0, 10, 32).astype(np.int32), device=device)
  opt = nn.optim.SGD(params, lr=2**-6)
  with capture() as kernels, Tensor.train():
    opt.zero_grad()
    ((x @ params[0].T + params[1]).relu() @ params[2].T + params[3]).sparse_categorical_crossentropy(y).backward()
    opt.step()
  for k in kernels:
    if k.program is not None: yield f"training step {k.name}", Case(k.program, k.inputs, k.vals)


EDGES = (("half", "sin", -0.0), ("float", "exp", 1488522240.0), ("half", "exp", 12.0), ("float", "sin", 1e30),
         ("float", "cos", -1e30), ("half", "log", 0.0), ("float", "log", np.inf))
"""(dtype, tinygrad Tensor method, input): one-element programs whose range reductions leave their domain."""
DIV_INT = [-1, 0, 1, 2]
"""tinygrad's test_ops.py test_div_int divides 1 // t on every lane, the zero one too, and a WHERE discards it."""


def edge_cases(device: str = "CLANG") -> Iterator[tuple[str, Case]]:
  """tinygrad's kernels for EDGES and test_div_int's `(t > 0).where(1 // t, t)` on t = [-1, 0, 1, 2] (DIV_INT), captured
  on its `device` (refimpl.tinygrad.v0_10.capture), as ("<dtype> <fn>(<x>) <kernel>", case) and ("div_int <kernel>", case)."""
  from tinygrad import Tensor, dtypes

  from refimpl.tinygrad.v0_10.capture import capture
  for dt, fn, x in EDGES:
    with capture() as kernels: getattr(Tensor([x], dtype=getattr(dtypes, dt), device=device), fn)().realize()
    for k in kernels:
      if k.program is not None: yield f"{dt} {fn}({x!r}) {k.name}", Case(k.program, k.inputs, k.vals)
  t = Tensor(DIV_INT, device=device)
  with capture() as kernels: (t > 0).where(1 // t, t).realize()
  for k in kernels:
    if k.program is not None: yield f"div_int {k.name}", Case(k.program, k.inputs, k.vals)


MID_DIM_OPTS = (("LOCAL", 0, 3), ("GROUPTOP", 0, 2), ("GROUPTOP", 1, 2))
"""One of test_linearizer's test_mid_dim_multireduce opt lists (locals with grouping): its kernel r_9_5_3_2_2_16_16 reads
the local its threads write next with no BARRIER between."""


def linearizer_cases(device: str = "PYTHON") -> Iterator[tuple[str, Case]]:
  """tinygrad's kernel for test_linearizer's test_mid_dim_multireduce AST, sum over b of (x[a,b,c] - sum over j of
  x[a,j,c]) for x of shape (27, 32, 5), with MID_DIM_OPTS applied by its Kernel for `device`'s renderer, translated
  (refimpl.tinygrad.v0_10.importer) and run on x = standard normal values (seed 0), as ("mid_dim_multireduce <kernel>",
  case)."""
  from tinygrad import Device, dtypes
  from tinygrad.codegen.kernel import Kernel, Opt, OptOps
  from tinygrad.ops import Ops as TOps
  from tinygrad.ops import UOp
  from tinygrad.shape.shapetracker import ShapeTracker

  from refimpl.tinygrad.v0_10.importer import from_tinygrad
  st = ShapeTracker.from_shape((27, 32, 5))
  out, x = (UOp(TOps.DEFINE_GLOBAL, dtypes.float.ptr(), arg=i) for i in range(2))
  column = UOp(TOps.LOAD, dtypes.float, (x, st.reshape((27, 1, 32, 5)).expand((27, 32, 32, 5)).to_uop()))
  column_sum = UOp(TOps.REDUCE_AXIS, dtypes.float, (column,), (TOps.ADD, (2,)))
  here = UOp(TOps.LOAD, dtypes.float, (x, st.reshape((27, 32, 1, 5)).to_uop()))
  minus_one = UOp.const(dtypes.float, -1.0).valid(ShapeTracker.from_shape((1, 1, 1, 1)).expand((27, 32, 1, 5)))
  total = UOp(TOps.REDUCE_AXIS, dtypes.float, (here + column_sum * minus_one,), (TOps.ADD, (1,)))
  store = UOp(TOps.STORE, src=(out, ShapeTracker.from_shape((27, 1, 1, 5)).to_uop(), total))
  k = Kernel(UOp(TOps.SINK, src=(store,)), opts=Device[device].renderer)
  for op, axis, amount in MID_DIM_OPTS: k.apply_opt(Opt(getattr(OptOps, op), axis, amount))
  spec = k.to_program()
  program = from_tinygrad(spec, name=spec.function_name, buffer_sizes=[27 * 5, 27 * 32 * 5])
  inputs = [np.zeros(27 * 5, np.float32), np.random.default_rng(0).standard_normal(27 * 32 * 5).astype(np.float32)]
  yield f"mid_dim_multireduce {spec.function_name}", Case(program, inputs)


CHECKOUT_CORPUS = Path(__file__).resolve().parents[2] / "corpus" / "tinygrad-0.10.1"  # present in a checkout

def report_classes(reference_device: str, clang: bool, out: Path | None = None) -> dict[str, list[dict]]:
  """The three classes over what this machine can capture: the checkout's corpus (when there is one), a training step
  on `reference_device`, when tinygrad's CLANG runs (`clang`) the edge cases on it, and test_linearizer's mid-dim
  multireduce kernel; as {"barrier": [...], "casts": [...], "lockstep": [...]} of Reliance fields (the report's data).
  With `out`, each kernel found is saved as a case file under out/reliance/<class>/ (the folder is made afresh: no file
  of an earlier run stays) and its entry names it ("file", relative to out)."""
  def cases() -> Iterator[tuple[str, Case]]:
    if CHECKOUT_CORPUS.is_dir(): yield from corpus_cases(CHECKOUT_CORPUS)
    yield from training_step_cases(reference_device)
    if clang: yield from edge_cases("CLANG")
    yield from linearizer_cases()
  captured = list(cases())
  found = {"barrier": barrier_reliance(captured), "casts": discarded_casts(captured), "lockstep": lockstep_reliance(captured)}
  data = {key: [vars(r) for r in rows] for key, rows in found.items()}
  if out is not None: save_reproducers(out, found, data, dict(captured))
  return data


def save_reproducers(out: Path, found: dict[str, list[Reliance]], data: dict[str, list[dict]], cases: dict[str, Case]) -> None:
  """Each kernel of each class as a case file in out/reliance/<class>/ (made afresh), named in its entry of `data`."""
  import shutil

  from refimpl.tinygrad.cases import case_finding, save_case
  shutil.rmtree(out / "reliance", ignore_errors=True)
  for key, rows in found.items():
    for r, entry in zip(rows, data[key]):
      case = cases[r.kernel]
      f = case_finding(case.program, case.inputs, case.vals, key, r.kernel, detail=f"{key}: {r.reason}")
      entry["file"] = save_case(out / "reliance" / key, f).relative_to(out).as_posix()


RELIANCE_TEXT = {
  "barrier": ("Kernels that need a BARRIER to order global memory",
              "Defined by the spec (a BARRIER orders its workgroup's locals and globals) but a race when a barrier orders "
              "locals only, which is how tinygrad's OpenCL, Metal and WGSL renderers fence: a portability hazard under "
              "those memory models, not a wrong answer on the CPUs here. Found by emulate(barrier_scope=\"local\")."),
  "casts": ("Kernels whose C casts out of range or divides by zero on lanes a WHERE discards",
            "Defined by the spec (an out-of-range float->int CAST, an over-wide shift, an integer division by zero or "
            "INT_MIN / -1 gives an undefined value, which WHERE drops) but C undefined behaviour in the C source "
            "tinygrad's CLANG renders, (int)x of a float out of range or 1 / 0, which clang may exploit (and x86's idiv "
            "traps on). refimpl's own C renderer guards these casts, shifts and divisors (refimpl.lower.guard_poison, "
            "guard_division)."),
  "lockstep": ("Kernels that need their workgroup to run in lock step",
               "Undefined by the spec: a thread reads an element that another thread of its workgroup writes after it "
               "with no BARRIER between, so the value read is undefined (RACY_READ), and the kernel uses it. Defined "
               "when every read of one step happens before any write of the next, as within one warp and on tinygrad's "
               "PYTHON device, but no GPU memory model promises that for a whole workgroup: a missing BARRIER in the "
               "kernel tinygrad generates. Found by emulate(lockstep=True); the spec's stop on these kernels is this "
               "decision (SPEC.md, Decisions: races).")}
