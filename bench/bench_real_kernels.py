"""The emulator on real kernels: every kernel of the tinygrad 0.10.1 corpus, six large ones and tinygrad workloads' matmuls,
against refimpl CLANG.

    python bench/bench_real_kernels.py [--repeat 3] [--only NAME] [--tinygrad] [--capture]

Kernels:
  - corpus/tinygrad-0.10.1/{CLANG,GPU,PYTHON}/*.json, with the inputs their cases hold;
  - bench/kernels/*.json, six kernels tinygrad 0.10.1 generated for large shapes, in the two forms (loop: CLANG, one
    thread; grid: GPU): elementwise a*b+1 over 2^20 float32, a 1024x1024 row sum, a 128^3 matmul (loop form), and
    elementwise 2^20, a 2^20 sum, a 256^3 matmul (grid form). Inputs: standard normal float32 (seed 0).
    `--capture` regenerates them with tinygrad (needs its CLANG and GPU devices: `refimpl.tinygrad.v0_10.toolchain`);
  - bench/kernels/tinygrad_*.json, the matmul kernels of bench/bench_tinygrad.py's 1024 matmul, causal attention and
    transformer block as tinygrad 0.10.1 makes them for the REFIMPL device (TINYGRAD_MATMULS; `--capture` too).
Times (best of --repeat after WARMUP untimed runs, buffers already on the device): the PYTHON device (the emulator,
in place, strict) and CLANG's kernel alone (Kernel.last_time). Printed: a table, the ratio per kernel and the geometric
mean per group.
`--tinygrad`: also tinygrad's own emulator (its PYTHON device's PythonProgram), one run per kernel: on the uops tinygrad
generated for the six (recaptured, so it implies --capture; zeroed buffers), and on each corpus kernel exported to
tinygrad's uops (refimpl.tinygrad.v0_10.exporter, for tinygrad's PYTHON renderer; the case's inputs). Printed: its time, the
speedup of refimpl's emulator over it, and a summary line (slowest speedup overall and on kernels of 64K elements or
more); a kernel tinygrad's emulator fails on shows its error instead.
Every emulator result is checked against CLANG's before anything is timed (bit for bit where the emulator says exact).
Cost per uop: each corpus kernel's emulator time divided by its uop count, in units of one `np.add` of two 64-element
float32 arrays timed in the same run (`add64_seconds`): a figure of the emulator's own overhead that does not depend
on the machine's speed. Printed: its median and quartiles over the corpus, and its median per shape of kernel
(`shape_of`: straight-line, with loops, with barriers) beside the straight-line kernels' median.
numpy's floor: the spec's sequential fold as numpy does it at best, an in-place `multiply` then an in-place `add` over
float32 lanes (two flops per lane and step), timed at 65,536 and 2^20 lanes in the same run. Each kernel's float work
(`float_ops`: every float ALU op a launch executes, MULACC as two) over its emulator time is its GFLOP/s, printed with
its share of the 65,536-lane floor (nan where a loop's bounds are not known: `float_ops`). Every matmul kernel gets a
summary line: the six's with the floor of the fold as a matmul's tile must do it (`outer_floor_gflops`: rank-1 updates
of the N x N output, a broadcast multiply of a column by a row and an in-place add, timed in the same run), tinygrad's
workloads' with numpy's floor at the kernel's width (its outputs as lanes, at most 65,536), as small ones have few lanes.
Ratios are from one run; the machine is noisy.
"""
from __future__ import annotations

import argparse
import math
import pathlib
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from anywhere in a checkout

from refimpl.dtype import DType, dtypes, to_np  # noqa: E402
from refimpl.emulator import alu  # noqa: E402
from refimpl.emulator.machine import emulate  # noqa: E402
from refimpl.fuzz.corpus import load_finding  # noqa: E402
from refimpl.ir import GroupOp, Ops, Program, program_from_json, program_to_json  # noqa: E402
from refimpl.runner import Kernel  # noqa: E402

KERNELS = ROOT / "bench" / "kernels"
CORPUS = ROOT / "corpus" / "tinygrad-0.10.1"
# name -> (tinygrad device, shapes of the inputs, the tinygrad expression over Tensors a, b)
SIX = {
  "loop_elementwise_1M": ("CLANG", [(1 << 20,), (1 << 20,)], lambda a, b: a * b + 1),
  "loop_rowsum_1024x1024": ("CLANG", [(1024, 1024)], lambda a: a.sum(axis=1)),
  "loop_matmul_128": ("CLANG", [(128, 128), (128, 128)], lambda a, b: a @ b),
  "grid_elementwise_1M": ("GPU", [(1 << 20,), (1 << 20,)], lambda a, b: a * b + 1),
  "grid_reduce_1M": ("GPU", [(1 << 20,)], lambda a: a.sum()),
  "grid_matmul_256": ("GPU", [(256, 256), (256, 256)], lambda a, b: a @ b),
}


# bench/bench_tinygrad.py's workloads -> their matmul kernels as tinygrad 0.10.1 makes them for the REFIMPL device
# (GPU-shaped: workgroups of 8 x 16, a 4 x 4 upcast tile per thread), stored as bench/kernels/tinygrad_<workload>_<kernel>
TINYGRAD_MATMULS = {
  "matmul 1024": ("r_32_16_8_16_256_4_4_4",),
  "causal attention": ("r_2_2_8_8_16_4_4_4", "r_4_8_16_4_4_32"),  # q k^T; the weights times v, its sum unrolled
  "transformer block": ("r_2_2_8_16_32_4_4_4", "r_4_16_8_16_4_4_4", "r_2_8_16_32_4_4_4", "r_2_2_8_16_32_4_4_4n1",
                        "r_2_8_8_16_32_4_4_4", "r_2_2_8_16_128_4_4_4"),  # q k v, q k^T, weights v, out, MLP up+GELU, down
}


def six_inputs(program: Program) -> list[np.ndarray]:
  """Zeros for the output (buffer 0), standard normal values for the others."""
  rng = np.random.default_rng(0)
  out = []
  for k in sorted(program.buffers):
    dt = program.buffers[k]
    if k == 0: out.append(np.zeros(dt.size, to_np(dt.base)))
    else: out.append(rng.standard_normal(dt.size).astype(to_np(dt.base)))
  return out


def capture_six() -> dict[str, list]:
  """Runs the six in tinygrad; writes bench/kernels/<name>[_k].json (one per kernel, the last is the interesting one
  for a split reduce) and returns name -> tinygrad ProgramSpecs."""
  from tinygrad import Tensor

  from refimpl.tinygrad.v0_10.capture import capture
  from refimpl.tinygrad.v0_10.toolchain import prepare_tinygrad
  ready = prepare_tinygrad()
  KERNELS.mkdir(exist_ok=True)
  specs = {}
  for name, (device, shapes, fn) in SIX.items():
    if ready.get(device): raise SystemExit(f"cannot capture {name}: tinygrad {device}: {ready[device]}")
    rng = np.random.default_rng(0)
    args = [Tensor(rng.standard_normal(s).astype(np.float32), device=device).realize() for s in shapes]
    with capture() as kernels: fn(*args).realize()
    specs[name] = []
    for k, kern in enumerate(kernels):
      stem = name if len(kernels) == 1 else f"{name}_{k}"
      (KERNELS / f"{stem}.json").write_text(program_to_json(kern.program))
      specs[name].append((stem, kern.spec))
  return specs


def _stem(workload: str, kernel: str) -> str: return f"tinygrad_{workload.replace(' ', '_')}_{kernel}"


def capture_tinygrad_matmuls() -> None:
  """Runs bench/bench_tinygrad.py's workloads of TINYGRAD_MATMULS on tinygrad's REFIMPL device (refimpl's own) and
  writes their matmul kernels, as REFIMPL gets them, to bench/kernels/tinygrad_<workload>_<kernel>.json."""
  sys.path.insert(0, str(ROOT / "bench"))
  from bench_tinygrad import refimpl_kernels
  for workload, names in TINYGRAD_MATMULS.items():
    made = {k.name: k for k in refimpl_kernels(workload)}
    missing = [name for name in names if name not in made or made[name].program is None]
    if missing: raise SystemExit(f"cannot capture {workload}: tinygrad made no kernel {', '.join(missing)} that translates "
                                 f"(it made {', '.join(sorted(made))}); TINYGRAD_MATMULS names tinygrad 0.10.1's")
    for name in names: (KERNELS / f"{_stem(workload, name)}.json").write_text(program_to_json(made[name].program))


def kernels() -> list[tuple[str, str, Program, list[np.ndarray], tuple[int, ...]]]:
  """(group, name, program, inputs, vals) of every kernel benchmarked."""
  out = []
  for path in sorted(KERNELS.glob("*.json")):
    p = program_from_json(path.read_text())
    out.append(("tinygrad" if path.stem.startswith("tinygrad_") else "six", path.stem, p, six_inputs(p), ()))
  for path in sorted(CORPUS.glob("*/*.json")):
    case = load_finding(path).case
    out.append((f"corpus {path.parent.name}", f"{path.parent.name}/{path.stem}", case.program, case.inputs, case.vals))
  return out


def shape_of(program: Program) -> str:
  """A kernel's shape for the cost per uop: "barrier" (locals and barriers: tinygrad's grouped reductions), else "loop"
  (a RANGE), else "straight-line"."""
  ops = {u.op for u in program.uops}
  return "barrier" if Ops.BARRIER in ops else "loop" if Ops.RANGE in ops else "straight-line"


FLOAT_ALU = {Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.MAX, Ops.NEG, Ops.RECIP, Ops.SQRT, Ops.EXP2, Ops.LOG2, Ops.SIN}

def _int_alu(op: Ops, dtype: DType, args: list[int]) -> int | None:
  """An integer ALU op on one lane of known operands by refimpl's own rule (alu.exec_alu); None where the rule leaves
  it undefined."""
  out = alu.exec_alu(op, dtype, *(np.array([a], to_np(dtype)) for a in args))
  return None if out.undefined is not None and out.undefined.any() else int(out.values[0])

def float_ops(program: Program, vals: tuple[int, ...]) -> int | None:
  """The float operations one launch executes: each float ALU uop (MULACC: two) times its vector width, the trip counts
  of the RANGEs around it (bounds: constants, DEFINE_VARs and integer ALU ops of them, by refimpl's rules: `_int_alu`)
  and the launch's work items; None where a bound is anything else."""
  var = {i: v for i, v in zip((i for i, u in enumerate(program.uops) if u.op is Ops.DEFINE_VAR), vals)}
  def value(j: int) -> int | None:
    u = program.uops[j]
    if j in var or u.op is Ops.CONST: return var[j] if j in var else int(u.arg)
    if u.op not in GroupOp.ALU or u.dtype is None or u.dtype.count != 1 or not dtypes.is_int(u.dtype): return None
    args = [value(s) for s in u.src]
    return None if None in args else _int_alu(u.op, u.dtype, args)
  trips, total = [1], 0
  for u in program.uops:
    if u.op is Ops.RANGE:
      lo, hi = value(u.src[0]), value(u.src[1])
      if lo is None or hi is None: return None
      trips.append(trips[-1] * max(0, hi - lo))
    elif u.op is Ops.ENDRANGE: trips.pop()
    elif u.dtype is not None and dtypes.is_float(u.dtype.scalar()) and u.op in FLOAT_ALU | {Ops.MULACC}:
      total += trips[-1] * u.dtype.count * (2 if u.op is Ops.MULACC else 1)
  return total * math.prod(program.global_size) * math.prod(program.local_size)


# timings of a floor, the best kept: as many as a kernel's --repeat 20, so that a floor is not lower for fewer samples
FLOOR_RUNS = 20

def _best_fold_seconds(x: np.ndarray, y: np.ndarray, acc_shape: tuple[int, ...], steps: int) -> float:
  """The best of FLOOR_RUNS timings of `steps` fold steps: a multiply of x by y (broadcast) into a product, then an in-place
  add of it into a float32 accumulator of `acc_shape`."""
  acc, tmp, best = np.zeros(acc_shape, np.float32), np.empty(acc_shape, np.float32), math.inf
  for _ in range(FLOOR_RUNS):
    start = time.perf_counter()
    for _ in range(steps):
      np.multiply(x, y, out=tmp)
      np.add(acc, tmp, out=acc)
    best = min(best, time.perf_counter() - start)
  return best


def fold_floor_gflops(lanes: int, steps: int = 64) -> float:
  """numpy's floor (module docstring): GFLOP/s of `steps` in-place multiply-then-add steps over `lanes` float32 lanes,
  the best of FLOOR_RUNS."""
  rng = np.random.default_rng(0)
  a, b = rng.standard_normal(lanes, np.float32), rng.standard_normal(lanes, np.float32)
  return 2 * lanes * steps / _best_fold_seconds(a, b, (lanes,), steps) / 1e9


def outer_floor_gflops(n: int, steps: int = 64) -> float:
  """numpy's floor for the same fold as a matmul's tile does it: GFLOP/s of `steps` rank-1 updates of an n x n float32
  tile (a broadcast multiply of a column by a row into a product, then an in-place add), the best of FLOOR_RUNS."""
  rng = np.random.default_rng(0)
  x, y = rng.standard_normal((n, 1), np.float32), rng.standard_normal((1, n), np.float32)
  return 2 * n * n * steps / _best_fold_seconds(x, y, (n, n), steps) / 1e9


def add64_seconds(calls: int = 2000) -> float:
  """The time of one np.add of two 64-element float32 arrays (a batch of `calls`). Timed again before every kernel, and
  the run's best used, as the kernels' best times are."""
  a, b = np.ones(64, np.float32), np.ones(64, np.float32)
  start = time.perf_counter()
  for _ in range(calls): np.add(a, b)
  return (time.perf_counter() - start) / calls


# untimed runs first, to time the steady state of a kernel launched again and again: the emulator makes its plan on a
# program's first run and compiles its stretches on the second, and Python specialises their bytecode over a few more
WARMUP = 10

def best(kernel: Kernel, bufs: list[np.ndarray], vals: tuple[int, ...], repeat: int) -> float:
  for _ in range(WARMUP): kernel(*bufs, vals=vals)
  times = []
  for _ in range(repeat):
    kernel(*bufs, vals=vals)
    times.append(kernel.last_time)
  return min(times)


def tinygrad_emulator_seconds(spec) -> float:
  """One run of tinygrad's own emulator (PythonProgram) on a kernel's uops, on zeroed buffers."""
  from tinygrad.ops import Ops as TinygradOps
  from tinygrad.runtime.ops_python import PythonCompiler, PythonProgram, PythonRenderer
  lib = PythonCompiler().compile(PythonRenderer().render(spec.function_name, spec.uops))  # made here, not read from a file
  prg = PythonProgram(spec.function_name, lib)
  bufs = [memoryview(bytearray(u.dtype.size * u.dtype.itemsize)) for u in spec.uops if u.op is TinygradOps.DEFINE_GLOBAL]
  vals = tuple(0 for _ in spec.vars)
  start = time.perf_counter()
  prg(*bufs, global_size=tuple(spec.global_size or (1, 1, 1)), local_size=tuple(spec.local_size or (1, 1, 1)), vals=vals,
      wait=True)
  return time.perf_counter() - start


def tinygrad_export_seconds(program: Program, bufs: list[np.ndarray], vals: tuple[int, ...]) -> float | str:
  """One run of tinygrad's own emulator on a refimpl program exported to tinygrad's uops; its error when it fails."""
  from tinygrad.runtime.ops_python import PythonCompiler, PythonProgram, PythonRenderer

  from refimpl.tinygrad.v0_10.exporter import to_tinygrad
  renderer = PythonRenderer()
  try:
    lib = PythonCompiler().compile(renderer.render(program.name, to_tinygrad(program, renderer)))
    prg = PythonProgram(program.name, lib)
    views = [memoryview(bytearray(b.tobytes())) for b in bufs]
    start = time.perf_counter()
    prg(*views, global_size=tuple(program.global_size), local_size=tuple(program.local_size), vals=vals, wait=True)
    return time.perf_counter() - start
  except Exception as e:  # any failure of tinygrad's emulator is reported, not fatal
    return f"{type(e).__name__}: {e}"[:60]


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--repeat", type=int, default=3)
  ap.add_argument("--only", default="", help="only kernels whose name contains this")
  ap.add_argument("--tinygrad", action="store_true", help="also time tinygrad's own emulator")
  ap.add_argument("--capture", action="store_true", help="regenerate bench/kernels with tinygrad first")
  args = ap.parse_args()
  specs = capture_six() if args.capture or args.tinygrad else {}
  if args.capture: capture_tinygrad_matmuls()
  tg_time = {stem: tinygrad_emulator_seconds(spec) for name in specs for stem, spec in specs[name]} if args.tinygrad else {}
  rows, groups, speedups, per_uop, matmuls = [], {}, [], [], []
  add64 = math.inf
  floor = fold_floor_gflops(1 << 16)
  print(f"numpy's floor (in-place multiply, then add, float32): {floor:.2f} GFLOP/s at 65,536 lanes, "
        f"{fold_floor_gflops(1 << 20, 16):.2f} at 2^20")
  print(f"{'kernel':50s} {'elements':>9s} {'emulator':>11s} {'CLANG':>10s} {'ratio':>8s} {'GFLOP/s':>8s} {'floor':>6s}" +
        (f" {'tinygrad emu':>13s} {'speedup':>8s}" if args.tinygrad else ""))
  for group, name, program, bufs, vals in kernels():
    if args.only not in name: continue
    emu, clang = Kernel(program, "PYTHON"), Kernel(program, "CLANG")
    want = emulate(program, [b.copy() for b in bufs], vals, strict=False)
    got = clang(*[b.copy() for b in bufs], vals=vals)
    for k, (w, g) in enumerate(zip(want.buffers, got)):
      exact = ~(want.loose[k] | want.undefined[k])
      if not np.array_equal(w.view(np.uint8).reshape(w.size, -1)[exact], g.view(np.uint8).reshape(g.size, -1)[exact]):
        print(f"{name}: buffer {k} differs between the emulator and CLANG")
    add64 = min(add64, add64_seconds())
    e, c = best(emu, [b.copy() for b in bufs], vals, args.repeat), best(clang, [b.copy() for b in bufs], vals, args.repeat)
    size = max(b.size for b in bufs)
    flops = float_ops(program, vals)
    gflops = math.nan if flops is None else flops / e / 1e9
    line = f"{name:50s} {size:9d} {e * 1e3:9.3f}ms {c * 1e3:8.3f}ms {e / c:7.1f}x {gflops:8.2f} {100 * gflops / floor:5.0f}%"
    if group == "tinygrad" or "matmul" in name: matmuls.append((group, name, gflops, size, bufs[0].size))
    if args.tinygrad:
      tg = tg_time[name] if name in tg_time else tinygrad_export_seconds(program, [b.copy() for b in bufs], vals)
      if isinstance(tg, str): line += f"  tinygrad's emulator failed: {tg}"
      else:
        line += f" {tg:11.4f}s {tg / e:7.1f}x"
        speedups.append((size, tg / e))
    print(line)
    rows.append((group, e / c))
    if group.startswith("corpus"): per_uop.append((shape_of(program), e / len(program.uops)))
    groups.setdefault(group, []).append(e / c)
  print()
  for group, ratios in groups.items():
    print(f"{group:20s} {len(ratios):4d} kernels  geometric mean {math.exp(np.mean(np.log(ratios))):7.1f}x CLANG  "
          f"worst {max(ratios):8.1f}x")
  widths = {}  # numpy's floor at a kernel's width (its outputs, as lanes; 65,536 at most: numpy folds wider ones in blocks)
  for group, name, gflops, size, outputs in matmuls:
    line = f"{name}: {gflops:.2f} GFLOP/s, {100 * gflops / floor:.0f}% of numpy's floor at 65,536 lanes"
    if group == "six":
      n = math.isqrt(size)
      outer = outer_floor_gflops(n)
      line += (f"; numpy's rank-1 updates of a {n}x{n} tile: {outer:.2f} GFLOP/s ({100 * outer / floor:.0f}% of the "
               f"floor), the kernel {100 * gflops / outer:.0f}% of them")
    else:
      width = min(outputs, 1 << 16)
      if width not in widths: widths[width] = fold_floor_gflops(width)
      line += (f"; numpy's floor at its width ({width:,} lanes): {widths[width]:.2f} GFLOP/s, the kernel "
               f"{100 * gflops / widths[width]:.0f}% of it")
    print(line)
  corpus = [r for g, r in rows if g.startswith("corpus")]
  if corpus:
    print(f"{'corpus (all)':20s} {len(corpus):4d} kernels  geometric mean {math.exp(np.mean(np.log(corpus))):7.1f}x CLANG")
  if per_uop:
    q1, med, q3 = np.percentile([c for _, c in per_uop], [25, 50, 75]) / add64
    print(f"corpus cost per uop: median {med:.1f} np.add-64 calls (quartiles {q1:.1f}, {q3:.1f}; one np.add-64 took "
          f"{add64 * 1e9:.0f} ns)")
    medians = {shape: np.median([c for s, c in per_uop if s == shape]) / add64 for shape in sorted({s for s, _ in per_uop})}
    straight = medians.get("straight-line")
    print("  median per shape: " + ", ".join(
      f"{shape} {m:.1f}" + ("" if straight is None or shape == "straight-line" else f" ({m / straight:.2f}x straight-line)")
      for shape, m in medians.items()))
  if speedups:
    big = [x for n, x in speedups if n >= 1 << 16]
    print(f"against tinygrad's emulator: {len(speedups)} kernels, faster on {sum(x > 1 for _, x in speedups)}, "
          f"slowest speedup {min(x for _, x in speedups):.1f}x" +
          (f"; {len(big)} of 64K+ elements, slowest speedup {min(big):.0f}x" if big else ""))
  return 0


if __name__ == "__main__":
  sys.exit(main())
