"""Straight-line stretches (refimpl/emulator/straight.py) compute what the handler loop computes, op for op: the same
buffers bit for bit, the same certainty levels, the same events and deferred origins, the same strict-mode report."""
from __future__ import annotations

import pathlib

import numpy as np
import pytest
from generated import both_forms, scaled

from refimpl.dtype import dtypes
from refimpl.emulator import settings
from refimpl.emulator.machine import emulate
from refimpl.emulator.plan import Plan
from refimpl.emulator.straight import stretches
from refimpl.errors import UndefinedBehavior
from refimpl.fuzz.corpus import load_finding
from refimpl.ir import Ops, ProgramBuilder

CORPUS = pathlib.Path(__file__).resolve().parent.parent / "corpus" / "tinygrad-0.10.1"


def _outcome(program, inputs, vals, strict: bool):
  """Everything a run shows, bit for bit (NaN payloads included: the stretches run the same numpy calls)."""
  try:
    e = emulate(program, inputs, vals, strict=strict)
    return ([b.tobytes() for b in e.buffers], [c.tobytes() for c in e.certainty], [repr(ev) for ev in e.events],
            [repr(ev) for ev in e.deferred])
  except UndefinedBehavior as ex:
    return ("UB", repr(ex), ex.count, repr(ex.origin))

def _both(program, inputs, vals, strict: bool, monkeypatch) -> tuple:
  """(the handler loop's outcome, the stretches' outcome) of one run each."""
  monkeypatch.setattr(settings, "STRAIGHT_FROM", None)
  loop = _outcome(program, inputs, vals, strict)
  monkeypatch.setattr(settings, "STRAIGHT_FROM", 1)
  return loop, _outcome(program, inputs, vals, strict)

def _stretches_made(program, vals) -> int:
  """How many stretches of the program's plan run as steps."""
  table = Plan.of(program, tuple(vals)).straight
  return 0 if table is None else sum(1 for h in table if hasattr(h, "steps"))


def test_stretches_are_runs_of_ops_between_block_boundaries():
  """A stretch is a maximal run of at least two ops that neither opens nor closes a block and that no loop folds."""
  ops = [Ops.DEFINE_GLOBAL, Ops.CONST, Ops.RANGE, Ops.LOAD, Ops.ADD, Ops.MUL, Ops.ENDRANGE, Ops.IF, Ops.STORE, Ops.ENDIF]
  class U:  # only .op matters to `stretches`
    def __init__(self, op): self.op = op
  uops = [U(op) for op in ops]
  assert stretches(uops, set()) == [(0, 2), (3, 6)]
  assert stretches(uops, {4}) == [(0, 2)]  # LOAD alone and MUL alone are no stretches
  assert stretches(uops, {0}) == [(3, 6)]


def test_straight_runs_are_the_handler_loop_on_the_corpus(monkeypatch):
  """Every corpus kernel (tinygrad's, as its backends render them), strict and permissive."""
  paths = sorted(CORPUS.glob("*/*.json"))
  assert len(paths) > 300
  made = 0
  for path in paths:
    case = load_finding(path).case
    for strict in (True, False):
      loop, straight = _both(case.program, case.inputs, case.vals, strict, monkeypatch)
      assert straight == loop, f"{path.name} strict={strict}"
    made += _stretches_made(case.program, case.vals) > 0
  assert made == len(paths)


def test_plain_accesses_are_the_general_path_on_the_corpus(monkeypatch):
  """A plain LOAD or STORE (Plan.plain_accesses: a view of memory, in the handler and so in every step) gives what the
  general path gives: every corpus kernel, strict and permissive, with the plain path and without it."""
  paths = sorted(CORPUS.glob("*/*.json"))
  for path in paths:
    case = load_finding(path).case
    for strict in (True, False):
      plain = _outcome(case.program, case.inputs, case.vals, strict)
      with monkeypatch.context() as patch:
        patch.setattr(Plan, "_plain_access", lambda self, u: None)
        Plan._cache.clear()
        general = _outcome(case.program, case.inputs, case.vals, strict)
      Plan._cache.clear()
      assert plain == general, f"{path.name} strict={strict}"


@pytest.mark.generated
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_straight_runs_are_the_handler_loop_on_generated_programs(seed, monkeypatch):
  """Fuzzer programs (grid form and lowered to loops; barriers, NaNs, loose ops and undefined behaviour left in), strict
  and permissive, and again in chunks of workgroups."""
  made = 0
  for index, p, inputs, vals in both_forms(seed, scaled(30)):
    for strict in (True, False):
      loop, straight = _both(p, inputs, vals, strict, monkeypatch)
      assert straight == loop, f"seed {seed} program {index} strict={strict}"
    made += _stretches_made(p, vals) > 0
    plan = Plan.of(p, tuple(vals))
    if plan.grid.workgroups > 1:
      monkeypatch.setattr(settings, "LANE_MEMORY", settings.CHUNK_SHARE * plan.grid.group * plan.lane_bytes)
      loop, straight = _both(p, inputs, vals, False, monkeypatch)
      monkeypatch.undo()
      assert straight == loop, f"seed {seed} program {index}, in chunks"
  assert made >= 40


def test_straight_runs_mark_the_reads_a_later_write_races(monkeypatch):
  """Races (RACY_READ): x = buf[(i+1) % 8] + 1 is raced by thread i+1's later write of buf[i+1]; out[i] = x, and
  out2[i] = WHERE(i < 0, x, 7) discards it. Stretches and the handler loop agree: strict report and permissive masks."""
  i32 = dtypes.int32
  b = ProgramBuilder("war_straight")
  buf, out, out2 = b.global_buf(i32, 8), b.global_buf(i32, 8), b.global_buf(i32, 8)
  i = b.gidx(0, 8)
  x = b.alu(Ops.ADD, b.load(buf, b.alu(Ops.MOD, b.alu(Ops.ADD, i, b.const(1, i32)), b.const(8, i32))), b.const(1, i32))
  b.store(buf, i, i)
  b.store(out2, i, b.alu(Ops.WHERE, b.alu(Ops.CMPLT, i, b.const(0, i32)), x, b.const(7, i32)))
  b.store(out, i, x)
  p = b.build()
  inputs = [np.arange(8, dtype=np.int32), np.zeros(8, np.int32), np.zeros(8, np.int32)]
  for strict in (True, False):
    loop, straight = _both(p, inputs, (), strict, monkeypatch)
    assert straight == loop and (loop[0] == "UB") == strict
  assert _stretches_made(p, ()) > 0


def test_straight_runs_read_each_run_s_buffers(monkeypatch):
  """A plan's steps serve every later run: each reads its own buffers (the inplace buffers of the PYTHON device)."""
  path = sorted(CORPUS.glob("*/*.json"))[0]
  case = load_finding(path).case
  monkeypatch.setattr(settings, "STRAIGHT_FROM", 1)
  rng = np.random.default_rng(0)
  for _ in range(3):
    inputs = [rng.standard_normal(b.shape).astype(b.dtype) if b.dtype.kind == "f" else b.copy() for b in case.inputs]
    monkeypatch.setattr(settings, "STRAIGHT_FROM", None)
    want = _outcome(case.program, inputs, case.vals, True)
    monkeypatch.setattr(settings, "STRAIGHT_FROM", 1)
    assert _outcome(case.program, inputs, case.vals, True) == want
  assert _stretches_made(case.program, case.vals) > 0


def test_stretches_are_made_from_run_straight_from_on(monkeypatch):
  """The first STRAIGHT_FROM - 1 runs of a plan go through the handler loop; the next makes the steps, once."""
  case = load_finding(sorted(CORPUS.glob("*/*.json"))[0]).case
  program = case.program
  monkeypatch.setattr(settings, "STRAIGHT_FROM", 3)
  plan = Plan.of(program, tuple(case.vals))
  plan.runs, plan.straight = 0, None
  for _ in range(2): emulate(program, case.inputs, case.vals)
  assert plan.straight is None
  emulate(program, case.inputs, case.vals)
  made = plan.straight
  assert made is not None and _stretches_made(program, case.vals) > 0
  emulate(program, case.inputs, case.vals)
  assert plan.straight is made
