"""Batches (refimpl/emulator/batches.py): the k isomorphic ops of a straight-line stretch run as one numpy call over their
stacked lanes, and compute what their ops' own steps compute: the same buffers bit for bit, the same certainty levels,
the same events, the same strict-mode report, whatever order the copies' ops stand in."""
from __future__ import annotations

import numpy as np
import pytest

from refimpl.dtype import dtypes
from refimpl.emulator import settings
from refimpl.emulator.batches import batches
from refimpl.emulator.certainty import Certainty
from refimpl.emulator.machine import emulate
from refimpl.emulator.plan import Plan
from refimpl.emulator.straight import stretches
from refimpl.errors import UndefinedBehavior
from refimpl.ir import Ops, Program, ProgramBuilder

F32, I32, BOOL = dtypes.float32, dtypes.int32, dtypes.bool
SPECIAL = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-45, 3e38, -2.5, 0.5, 7.0], np.float32)


def _outcome(program: Program, inputs: list[np.ndarray], batched: bool, monkeypatch) -> tuple:
  """Everything a run shows (as test_emulator_straight's), with its stretches as steps and batches on or off; a new
  plan, so that its steps are made with that setting."""
  monkeypatch.setattr(settings, "STRAIGHT_FROM", 1)
  monkeypatch.setattr(settings, "BATCHES", batched)
  Plan._cache.clear()
  out = _run(program, inputs)
  Plan._cache.clear()
  return out

def _run(program: Program, inputs: list[np.ndarray]) -> tuple:
  """What one strict run shows: the buffers and levels bit for bit and the events, or its report."""
  try:
    e = emulate(program, [x.copy() for x in inputs], (), strict=True)
    return [b.tobytes() for b in e.buffers], [c.tobytes() for c in e.certainty], [repr(ev) for ev in e.events]
  except UndefinedBehavior as ex:
    return "UB", repr(ex), ex.count

def _batched_ops(program: Program) -> int:
  """How many ops of the program's stretches stand in a batch."""
  plan = Plan.of(program, ())
  return sum(len(ops) for lo, hi in stretches(program.uops, plan.folded | plan.from_memory)
             for ops in batches(plan, lo, hi))


# ***** k copies of one random chain, as tinygrad's upcast tiles are *****

def _template(rng: np.random.Generator, steps: int) -> list[tuple]:
  """A chain of `steps` ops: (op, result dtype, operands), an operand ("own", dtype) the copy's own load of that dtype,
  ("element", dtype) the copy's element of a vector load four copies share (a GEP), ("shared", dtype) one value every
  copy reads, or ("chain", t) the chain's t-th op. Ops of every kind a batch takes
  (ufuncs, WHERE, exact conversions) and some it leaves to their own steps (EXP2 and RECIP, which are loose or not one
  ufunc, a float to int CAST, undefined out of range, an IDIV by a constant)."""
  made: dict = {F32: [("own", F32), ("shared", F32), ("element", F32)], I32: [("own", I32), ("shared", I32)], BOOL: []}
  chain = []
  def pick(dt): return made[dt][rng.integers(len(made[dt]))]
  for t in range(steps):
    kind = rng.choice(["float", "float", "compare", "where", "int", "cast", "other"])
    if kind == "float": step = (Ops(rng.choice([Ops.ADD, Ops.MUL, Ops.SUB, Ops.MAX, Ops.FDIV])), F32, (pick(F32), pick(F32)))
    elif kind == "compare": step = (Ops(rng.choice([Ops.CMPLT, Ops.CMPNE])), BOOL, (pick(F32), pick(F32)))
    elif kind == "where" and made[BOOL]: step = (Ops.WHERE, F32, (pick(BOOL), pick(F32), pick(F32)))
    elif kind == "int": step = (Ops(rng.choice([Ops.ADD, Ops.MUL, Ops.XOR, Ops.CMPLT])), None, (pick(I32), pick(I32)))
    elif kind == "cast": step = (Ops.CAST, F32, (pick(I32),))
    else:
      op = rng.choice(["exp2", "recip", "trunc", "idiv"])
      step = {"exp2": (Ops.EXP2, F32, (pick(F32),)), "recip": (Ops.RECIP, F32, (pick(F32),)),
              "trunc": (Ops.CAST, I32, (pick(F32),)), "idiv": (Ops.IDIV, I32, (pick(I32), ("const", I32)))}[op]
    op, dt, src = step
    if dt is None: dt = BOOL if op is Ops.CMPLT else I32
    chain.append((op, dt, src))
    made[dt].append(("chain", t))
  return chain

def _tile(rng: np.random.Generator, copies: int, lanes: int, order: str) -> tuple[Program, list[np.ndarray]]:
  """`copies` copies of a random chain, each over its own loads, on `lanes` threads; the copies' ops op-major (step t
  of every copy, then step t+1), chain-major (each copy's whole chain, then the next's) or interleaved at random; each
  copy's last float and int values stored. Inputs: special floats and small and large ints."""
  chain = _template(rng, int(rng.integers(6, 16)))
  b = ProgramBuilder("tile")
  fout, iout = b.global_buf(F32, lanes * copies), b.global_buf(I32, lanes * copies)
  fin, iin = b.global_buf(F32, lanes * copies), b.global_buf(I32, lanes * copies)
  shared_f = b.global_buf(F32, lanes)
  groups = (copies + 3) // 4
  vin = b.global_buf(F32, lanes * groups * 4)
  i = b.gidx(0, lanes)
  at = [b.alu(Ops.ADD, b.alu(Ops.MUL, i, b.const(copies, I32)), b.const(c, I32)) for c in range(copies)]
  own = [{F32: b.load(fin, at[c]), I32: b.load(iin, at[c])} for c in range(copies)]
  shared = {F32: b.load(shared_f, i), I32: b.const(int(rng.integers(-5, 5)), I32)}
  divisor = b.const(int(rng.choice([3, 7, -2])), I32)
  values: list[list[int]] = [[] for _ in range(copies)]
  # the vector loads first, as tinygrad places them; each copy's element picked where the copy first reads it
  vectors = [b.load(vin, b.alu(Ops.ADD, b.alu(Ops.MUL, i, b.const(groups * 4, I32)), b.const(4 * g, I32)), count=4)
             for g in range(groups)]
  elements: dict[int, int] = {}
  def element(c: int) -> int:
    if c not in elements: elements[c] = b.gep(vectors[c // 4], c % 4)
    return elements[c]
  def emit(c: int, t: int) -> None:
    op, dt, src = chain[t]
    def operand(s):
      if s[0] == "own": return own[c][s[1]]
      if s[0] == "shared": return shared[s[1]]
      if s[0] == "const": return divisor
      if s[0] == "element": return element(c)
      return values[c][s[1]]
    args = [operand(s) for s in src]
    values[c].append(b.cast(args[0], dt) if op is Ops.CAST else b.alu(op, *args))
  if order == "op-major": sequence = [(c, t) for t in range(len(chain)) for c in range(copies)]
  elif order == "chain-major": sequence = [(c, t) for c in range(copies) for t in range(len(chain))]
  else:
    left, sequence = [0] * copies, []
    while any(n < len(chain) for n in left):
      c = int(rng.choice([c for c in range(copies) if left[c] < len(chain)]))
      sequence.append((c, left[c]))
      left[c] += 1
  for c, t in sequence: emit(c, t)
  last = {dt: max((t for t, (_, d, _) in enumerate(chain) if d is dt), default=None) for dt in (F32, I32)}
  for c in range(copies):
    b.store(fout, at[c], own[c][F32] if last[F32] is None else values[c][last[F32]])
    b.store(iout, at[c], own[c][I32] if last[I32] is None else values[c][last[I32]])
  return b.build(), _inputs(rng, copies, lanes)

def _inputs(rng: np.random.Generator, copies: int, lanes: int) -> list[np.ndarray]:
  """A tile's buffers: zeroed outputs, special or normal floats, extreme or small ints, a normal shared row, the
  vectors (special or normal floats)."""
  floats = rng.choice(SPECIAL, lanes * copies) if rng.random() < 0.5 else rng.standard_normal(lanes * copies)
  ints = rng.choice([-(2**31), -7, -1, 0, 1, 3, 2**31 - 1], lanes * copies) if rng.random() < 0.5 else \
    rng.integers(-100, 100, lanes * copies)
  size = lanes * ((copies + 3) // 4) * 4  # a vector of four per group of four copies, per lane
  vector = rng.choice(SPECIAL, size) if rng.random() < 0.5 else rng.standard_normal(size)
  return [np.zeros(lanes * copies, np.float32), np.zeros(lanes * copies, np.int32), floats.astype(np.float32),
          ints.astype(np.int32), rng.standard_normal(lanes).astype(np.float32), vector.astype(np.float32)]


@pytest.mark.parametrize("order", ["op-major", "chain-major", "interleaved"])
@pytest.mark.parametrize("seed", range(4))
def test_batches_compute_what_their_ops_own_steps_compute(seed, order, monkeypatch):
  """Random tiles (k copies of a chain, as tinygrad's upcasts), NaNs, infinities, loose values and undefined behaviour
  in them: with batches, every run shows what it shows without, and batches were made."""
  rng = np.random.default_rng([seed, ["op-major", "chain-major", "interleaved"].index(order)])
  made = 0
  for n in range(12):
    program, inputs = _tile(rng, int(rng.choice([4, 8, 16, 31])), int(rng.choice([1, 16, 256])), order)
    want = _outcome(program, inputs, False, monkeypatch)
    assert _outcome(program, inputs, True, monkeypatch) == want, f"seed {seed} {order} tile {n}"
    made += _batched_ops(program) > 0
  assert made >= 3


def test_a_plan_s_batches_serve_every_later_run(monkeypatch):
  """One plan, its batches made once, runs on new inputs again and again (NaNs and loose values in some runs, not in
  others): each run shows what a run without batches shows."""
  rng = np.random.default_rng(7)
  for n in range(8):
    program, first = _tile(rng, 16, 16, "op-major" if n % 2 else "interleaved")
    runs = [first] + [_inputs(rng, 16, 16) for _ in range(4)]
    wants = [_outcome(program, inputs, False, monkeypatch) for inputs in runs]
    monkeypatch.setattr(settings, "BATCHES", True)
    for inputs, want in zip(runs, wants): assert _run(program, inputs) == want, f"tile {n}"
    Plan._cache.clear()


def _copies_of(op: Ops, inputs: list[float], loose: bool = False) -> tuple[Program, list[np.ndarray]]:
  """16 copies of op(x_c, 1.5), x_c the c-th input (each its own load; EXP2 of it where `loose`), one thread."""
  b = ProgramBuilder("copies")
  out, xs = b.global_buf(F32, 16), b.global_buf(F32, 16)
  one_half = b.const(1.5, F32)
  loads = [b.load(xs, b.const(c, I32)) for c in range(16)]
  if loose: loads = [b.alu(Ops.EXP2, x) for x in loads]
  values = [b.alu(op, x, one_half) for x in loads]
  for c, v in enumerate(values): b.store(out, b.const(c, I32), v)
  return b.build(), [np.zeros(16, np.float32), np.array(inputs, np.float32)]


def test_a_batch_with_a_loose_operand_runs_its_ops_own_steps(monkeypatch):
  """ADD(EXP2(x_c), 1.5) for 16 copies: EXP2 is a tolerance op, so each sum is loose (UNKNOWN, its level carried), as
  the ops' own steps make it; a batch that took its operands as exact would call them EXACT."""
  program, inputs = _copies_of(Ops.ADD, list(np.linspace(-3, 3, 16)), loose=True)
  assert _batched_ops(program) == 16
  want = _outcome(program, inputs, False, monkeypatch)
  assert _outcome(program, inputs, True, monkeypatch) == want
  levels = np.frombuffer(want[1][0], np.uint8)
  assert (levels == Certainty.UNKNOWN).all()


def test_a_batch_marks_the_nans_it_makes_as_its_ops_do(monkeypatch):
  """MUL(x_c, 1.5) for 16 copies, x_c NaN for some: those products are NAN_PAYLOAD and the others EXACT, in the batch
  as in the ops' own steps."""
  xs = [np.nan if c % 5 == 0 else c for c in range(16)]
  program, inputs = _copies_of(Ops.MUL, xs)
  assert _batched_ops(program) == 16
  want = _outcome(program, inputs, False, monkeypatch)
  assert _outcome(program, inputs, True, monkeypatch) == want
  levels = np.frombuffer(want[1][0], np.uint8)
  assert list(levels) == [Certainty.NAN_PAYLOAD if c % 5 == 0 else Certainty.EXACT for c in range(16)]


def test_a_batch_reads_a_register_after_the_stretch_s_assign_before_its_op(monkeypatch):
  """acc_c += x_c, then acc_c * 2, copy after copy (chain-major) in one stretch of a loop's body: each product reads its
  register after that copy's ASSIGN, so no product may run before the last copy's ASSIGN before it (a batch of them
  would read the registers' old values)."""
  b = ProgramBuilder("registers")
  out, xs = b.global_buf(F32, 16), b.global_buf(F32, 16)
  two, zero = b.const(2.0, F32), b.const(0.0, F32)
  accs = [b.acc(zero) for _ in range(16)]
  with b.loop(3) as r:
    for c in range(16):
      at = b.alu(Ops.ADD, b.alu(Ops.MUL, r, b.const(0, I32)), b.const(c, I32))
      b.assign(accs[c], b.alu(Ops.ADD, accs[c], b.load(xs, at)))
      b.store(out, at, b.alu(Ops.MUL, accs[c], two))
  program = b.build()
  inputs = [np.zeros(16, np.float32), np.arange(16, dtype=np.float32)]
  want = _outcome(program, inputs, False, monkeypatch)
  assert _outcome(program, inputs, True, monkeypatch) == want
  assert list(np.frombuffer(want[0][0], np.float32)) == [6.0 * c for c in range(16)]  # 2 * (3 * x_c)


def test_a_batch_of_picks_from_a_loose_vector_runs_its_ops_own_steps(monkeypatch):
  """16 GEPs, each an element of one of four vectors of EXP2 results (tolerance values), each plus 1.5: the picks keep
  their elements' TOLERANCE level and the sums carry it as UNKNOWN, as the ops' own steps give them; a batch of picks
  that took its vectors as exact would call them EXACT."""
  b = ProgramBuilder("picks")
  out, xs = b.global_buf(F32, 16), b.global_buf(F32, 16)
  one_half = b.const(1.5, F32)
  loose = [b.alu(Ops.EXP2, b.load(xs, b.const(c, I32))) for c in range(16)]
  vectors = [b.vectorize(*loose[4 * g:4 * g + 4]) for g in range(4)]
  picks = [b.gep(vectors[c // 4], c % 4) for c in range(16)]
  for c, x in enumerate(picks): b.store(out, b.const(c, I32), b.alu(Ops.ADD, x, one_half))
  program, inputs = b.build(), [np.zeros(16, np.float32), np.linspace(-3, 3, 16).astype(np.float32)]
  plan = Plan.of(program, ())
  made = [ops for lo, hi in stretches(program.uops, plan.folded | plan.from_memory) for ops in batches(plan, lo, hi)]
  assert sorted(picks) in [list(ops) for ops in made]
  want = _outcome(program, inputs, False, monkeypatch)
  assert _outcome(program, inputs, True, monkeypatch) == want
  assert (np.frombuffer(want[1][0], np.uint8) == Certainty.UNKNOWN).all()
