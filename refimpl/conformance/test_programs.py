"""Every backend against the emulator on whole programs: memory, control flow, vectors, workgroups, random programs.

A program runs on the emulator (strict for the hand-written ones, permissive for random ones) and on the backend. Every
buffer element the emulator marks exact must match bit for bit (all NaNs one value); loose elements (downstream of a
tolerance or allowed-set op, or a NaN an op produced) are not compared at program level: the op-level suite holds
those ops to their rules. Random programs that do anything undefined never reach a native backend (an integer division
by zero would trap inside the test process)."""
from __future__ import annotations

import random

import numpy as np
import pytest

from refimpl.conformance import PROGRAMS_DIR
from refimpl.dtype import dtypes, to_np
from refimpl.emulator.machine import emulate
from refimpl.fuzz.case import Case, prepare
from refimpl.ir import Ops, Program, ProgramBuilder, load_program
from refimpl.ir.strategies import RandomChooser, random_program
from refimpl.runner import Kernel
from refimpl.testing.programs import check_against_emulator, device_scalars, program_dtypes, refused, require
from refimpl.testing.values import random_values

f32, i32 = dtypes.float32, dtypes.int32

def running_sum() -> Program:
  """out[g] = sum over j < 32 of x[g*32 + j] (float32, in order), 8 threads: a loop with an accumulator."""
  b = ProgramBuilder("running_sum")
  out, x = b.global_buf(f32, 8), b.global_buf(f32, 256)
  g = b.gidx(0, 8)
  acc = b.acc(b.const(0.0, f32))
  with b.loop(32) as j:
    idx = b.alu(Ops.ADD, b.alu(Ops.MUL, g, b.const(32, i32)), j)
    b.assign(acc, b.alu(Ops.ADD, acc, b.load(x, idx)))
  b.store(out, g, acc)
  return b.build()

def gated_memory() -> Program:
  """Threads load x[g] only where x[g] > 0 is known from a mask buffer, else -1; store only on even threads."""
  b = ProgramBuilder("gated_memory")
  out, x, mask = b.global_buf(i32, 64), b.global_buf(i32, 64), b.global_buf(dtypes.bool, 64)
  g = b.gidx(0, 64)
  value = b.load(x, g, gate=b.load(mask, g), alt=b.const(-1, i32))
  even = b.alu(Ops.CMPNE, b.alu(Ops.AND, g, b.const(1, i32)), b.const(1, i32))
  b.store(out, g, b.alu(Ops.MUL, value, b.const(3, i32)), gate=even)
  return b.build()

def vectors() -> Program:
  """float4 loads, lane shuffles (GEP), VECTORIZE and a float4 store: out[4g..4g+3] = (x.w, x.z*2, x.y, x.x + y.x)."""
  b = ProgramBuilder("vectors")
  out, x, y = b.global_buf(f32, 64), b.global_buf(f32, 64), b.global_buf(f32, 64)
  g = b.gidx(0, 16)
  base = b.alu(Ops.MUL, g, b.const(4, i32))
  vx, vy = b.load(x, base, count=4), b.load(y, base, count=4)
  lane = lambda v, k: b.gep(v, k)
  result = b.vectorize(lane(vx, 3), b.alu(Ops.MUL, lane(vx, 2), b.const(2.0, f32)), lane(vx, 1),
                       b.alu(Ops.ADD, lane(vx, 0), lane(vy, 0)))
  b.store(out, base, result)
  return b.build()

def triangular_loops() -> Program:
  """out[g] = sum over i <= g, j < i of x[j] (int32, wrapping): nested loops whose bounds differ per thread."""
  b = ProgramBuilder("triangular_loops")
  out, x = b.global_buf(i32, 16), b.global_buf(i32, 16)
  g = b.gidx(0, 16)
  acc = b.acc(b.const(0, i32))
  with b.loop_uops(b.const(0, i32), b.alu(Ops.ADD, g, b.const(1, i32))) as i, b.loop_uops(b.const(0, i32), i) as j:
    b.assign(acc, b.alu(Ops.ADD, acc, b.load(x, j)))
  b.store(out, g, acc)
  return b.build()

def casts_and_branches() -> Program:
  """Inside IF (x[g] < limit, a DEFINE_VAR): int8 -> float16 -> bfloat16 -> int32 casts and a BITCAST round trip."""
  b = ProgramBuilder("casts_and_branches")
  out, bits, x = b.global_buf(i32, 32), b.global_buf(dtypes.uint16, 32), b.global_buf(dtypes.int8, 32)
  limit = b.var("limit", -128, 127)
  g = b.gidx(0, 32)
  v = b.load(x, g)
  with b.when(b.alu(Ops.CMPLT, b.cast(v, i32), limit)):
    half = b.cast(v, dtypes.float16)
    b.store(out, g, b.cast(b.cast(b.alu(Ops.MUL, half, half), dtypes.bfloat16), i32))
    b.store(bits, g, b.bitcast(half, dtypes.uint16))
  return b.build()

def workgroup_reduction() -> Program:
  """Per workgroup of 8 threads: stage x into local memory, BARRIER, then thread 0 sums the 8 values (int32)."""
  b = ProgramBuilder("workgroup_reduction")
  out, x = b.global_buf(i32, 4), b.global_buf(i32, 32)
  tmp = b.local_buf(i32, 8)
  g, lid = b.gidx(0, 4), b.lidx(0, 8)
  b.store(tmp, lid, b.load(x, b.alu(Ops.ADD, b.alu(Ops.MUL, g, b.const(8, i32)), lid)))
  b.barrier()
  first = b.alu(Ops.CMPLT, lid, b.const(1, i32))
  acc = b.acc(b.const(0, i32))
  with b.loop(8) as k: b.assign(acc, b.alu(Ops.ADD, acc, b.load(tmp, k)))
  b.store(out, g, acc, gate=first)
  return b.build()

def negative_constants() -> Program:
  """out[g] = (x[g] - -0.0) - -2.5 * -1.5, in float32 and float64: negative literals next to a minus (a C renderer once
  printed "a--0x0.0p+0f", which does not parse)."""
  b = ProgramBuilder("negative_constants")
  out32, out64, x = b.global_buf(f32, 8), b.global_buf(dtypes.float64, 8), b.global_buf(f32, 8)
  g = b.gidx(0, 8)
  for out, dt in ((out32, f32), (out64, dtypes.float64)):
    v = b.alu(Ops.SUB, b.cast(b.load(x, g), dt), b.const(-0.0, dt))
    b.store(out, g, b.alu(Ops.SUB, v, b.alu(Ops.MUL, b.const(-2.5, dt), b.const(-1.5, dt))))
  return b.build()

def vars_declared_first() -> Program:
  """out[r] = r + m for r < n, with a DEFINE_VAR declared before the buffer: the call signature is still every buffer
  in number order, then every var (a C renderer once took the declaration order, and the kernel wrote through n)."""
  b = ProgramBuilder("vars_declared_first")
  n = b.var("n", 0, 8)
  out = b.global_buf(i32, 8)
  m = b.var("m", 0, 100)
  with b.loop_uops(b.const(0, i32), n) as r: b.store(out, r, b.alu(Ops.ADD, r, m))
  return b.build()

def accumulator_loop_bound() -> Program:
  """A loop bounded by an accumulator its body increments runs as many times as the accumulator held at the RANGE:
  bounds are values at the RANGE (a C `for` once re-read the bound every iteration)."""
  b = ProgramBuilder("accumulator_loop_bound")
  out = b.global_buf(i32, 16)
  acc = b.acc(b.const(3, i32))
  with b.loop_uops(b.const(0, i32), acc) as r:
    b.store(out, r, b.const(1, i32))
    b.assign(acc, b.alu(Ops.ADD, acc, b.const(1, i32)))
  return b.build()

PROGRAMS = {p.__name__: p for p in (vars_declared_first, accumulator_loop_bound, negative_constants, running_sum,
                                    gated_memory, vectors, triangular_loops, casts_and_branches, workgroup_reduction)}
VALS = {"casts_and_branches": (17,), "vars_declared_first": (5, 40)}

def inputs_for(program: Program, rng: np.random.Generator) -> list[np.ndarray]:
  return [random_values(ptr.base, ptr.size, rng) for _, ptr in sorted(program.buffers.items())]

@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_backend_matches_the_emulator_on_hand_written_programs(backend, name):
  program = PROGRAMS[name]()
  require(backend, *program_dtypes(program))
  compared = check_against_emulator(backend, program, inputs_for(program, np.random.default_rng(7)), VALS.get(name, ()))
  assert compared > 0

DEFINED_PROGRAMS, MAX_SEEDS = 12, 96

def test_backend_matches_the_emulator_on_random_defined_programs(backend):
  """Random valid programs (refimpl.ir.strategies, locals and barriers included: loop backends run them lowered) with
  random edge-biased inputs, seeds 0, 1, ... until 12 of them are defined; those with any undefined behaviour are set
  aside before the backend sees them."""
  ran = compared = 0
  for seed in range(MAX_SEEDS):
    program = random_program(RandomChooser(random.Random(seed)), steps=10, grid=True, locals=True, barrier=True,
                             scalars=device_scalars(backend))
    inputs = inputs_for(program, np.random.default_rng(seed))
    vals = tuple(lo for _, lo, _ in program.vars)
    if emulate(program, inputs, vals=vals, strict=False).events or refused(backend, program): continue
    compared += check_against_emulator(backend, program, inputs, vals)
    ran += 1
    if ran == DEFINED_PROGRAMS: break
  assert ran == DEFINED_PROGRAMS and compared > 0, f"only {ran} of {MAX_SEEDS} random programs were defined"


# ***** what only the fuzzer caught, as fixed programs *****

@pytest.mark.parametrize("path", sorted(PROGRAMS_DIR.glob("fuzz-*.json")), ids=lambda p: p.stem)
def test_constant_chains_match_the_emulator_by_the_fuzzers_rules(backend, path):
  """Kernels whose operands are constants in the kernel and whose ops are chained, one per class the fuzzer found and
  the op-level kernels (every operand loaded from memory) missed: contraction of MUL -> ADD/SUB (mulacc_tie operands,
  every float dtype), double rounding of int64 -> float32 and float64 -> float16/bfloat16 (each also through the wider
  format, as the program says), subnormal products and quotients, wrapping int ADD/SUB/MUL/NEG and compares of wrapped
  sums, NaN/infinity/signed-zero arithmetic and compares, float64 -> int64 and fp8 -> int32 casts. Constants let a
  compiler fold and rewrite (relaxed math, nsw, contraction), which it cannot do to values it loads. Compared with the
  fuzzer's rules (refimpl.fuzz.expect: NaN as one value, exact elsewhere) against the emulator."""
  p = load_program(path)
  require(backend, *{ptr.base for ptr in p.buffers.values()} | {u.dtype.scalar() for u in p.uops if u.op is Ops.CONST})
  zeros = [np.zeros(ptr.size, to_np(ptr.base)) for _, ptr in sorted(p.buffers.items())]
  expected = prepare(Case(p, zeros)).expected
  mismatch, tally = expected.check(p, Kernel(p, backend)(*[z.copy() for z in zeros]))
  assert mismatch is None, f"{backend} {p.name}: {mismatch.describe()}"
  assert tally.skipped == 0
