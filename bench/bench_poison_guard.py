"""What refimpl.lower.guard_poison costs: the same kernels on one device with the guard (as the device renders them) and
without it (`native_poison=True`: C's raw conversions and shifts), A/B in one run.

    python bench/bench_poison_guard.py [--device CLANG] [--repeat 5] [--n 1048576]

Kernels (float32 inputs in every cast's range and shift counts in [0, 32), so the unguarded code runs no C undefined
behaviour either and both variants compute the same bits, which is checked):
  - cast      out[i] = int32(x[i])
  - shift     out[i] = a[i] << (n[i] & 31)  (and >>)
  - exp, sin  tinygrad 0.10.1's own float32 exp and sin kernels over n elements (their range reductions cast to int32 on
              every lane and WHERE discards the overflowing ones), captured with tinygrad's CLANG device.
Times: best of --repeat warm launches of the kernel alone (Kernel.last_time). Printed: both times and guarded/raw.
"""
from __future__ import annotations

import argparse
import dataclasses
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from anywhere in a checkout

from refimpl.device import Buffer, Device  # noqa: E402
from refimpl.dtype import dtypes, to_np  # noqa: E402
from refimpl.ir import Ops, Program, ProgramBuilder  # noqa: E402
from refimpl.lower import lower_for  # noqa: E402


def cast_kernel(n: int) -> Program:
  b = ProgramBuilder("cast")
  out, x = b.global_buf(dtypes.int32, n), b.global_buf(dtypes.float32, n)
  g = b.gidx(0, n)
  b.store(out, g, b.cast(b.load(x, g), dtypes.int32))
  return b.build()

def shift_kernel(n: int) -> Program:
  b = ProgramBuilder("shift")
  out, a, c = b.global_buf(dtypes.int32, n), b.global_buf(dtypes.int32, n), b.global_buf(dtypes.int32, n)
  g = b.gidx(0, n)
  av, cv = b.load(a, g), b.load(c, g)
  b.store(out, g, b.alu(Ops.XOR, b.alu(Ops.SHL, av, cv), b.alu(Ops.SHR, av, cv)))
  return b.build()

def tinygrad_kernels(n: int) -> dict[str, Program]:
  """tinygrad's float32 exp and sin over n elements, as refimpl Programs (the last kernel each makes)."""
  from tinygrad import Tensor

  from refimpl.tinygrad.v0_10.capture import capture
  from refimpl.tinygrad.v0_10.toolchain import prepare_tinygrad
  why = prepare_tinygrad()["CLANG"]
  if why is not None: raise SystemExit(f"tinygrad's CLANG does not run here: {why}")
  out = {}
  for name, fn in (("exp", Tensor.exp), ("sin", Tensor.sin)):
    x = Tensor(np.linspace(-80, 80, n, dtype=np.float32), device="CLANG").realize()
    with capture() as kernels: fn(x).realize()
    out[name] = kernels[-1].program
  return out

def inputs(program: Program, rng: np.random.Generator) -> list[np.ndarray]:
  """Buffers for a kernel: float32 in [-80, 80) (every cast in range), int32 counts in [0, 32) for the shift kernel."""
  out = []
  for k in sorted(program.buffers):
    ptr = program.buffers[k]
    if ptr.base == dtypes.float32: out.append(rng.uniform(-80, 80, ptr.size).astype(np.float32))
    else: out.append(rng.integers(0, 32, ptr.size).astype(to_np(ptr.base)))
  return out

def compiled(program: Program, device, renderer):
  runnable = lower_for(program, renderer)
  src = renderer.render(program.name, runnable)
  return device.runtime(program.name, device.compiler.compile_cached(src)), len(runnable.uops)

def timed(prg, device, program: Program, arrays: list[np.ndarray], repeat: int) -> tuple[float, list[np.ndarray]]:
  bufs = [Buffer(device.device, a.size, program.buffers[k].base, initial_value=a.tobytes())
          for k, a in zip(sorted(program.buffers), arrays)]
  raw, grid = [b._buf for b in bufs], device.renderer.global_max is not None
  best = float("inf")
  for _ in range(repeat):
    t = prg(*raw, global_size=program.global_size, local_size=program.local_size, wait=True) if grid else prg(*raw, wait=True)
    best = min(best, t)
  return best, [np.frombuffer(b.as_buffer(), dtype=to_np(b.dtype)).copy() for b in bufs]

def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--device", default="CLANG")
  ap.add_argument("--repeat", type=int, default=5)
  ap.add_argument("--n", type=int, default=1 << 20)
  args = ap.parse_args()
  device = Device[args.device]
  raw_renderer = dataclasses.replace(device.renderer, native_poison=True)
  progs = {"cast": cast_kernel(args.n), "shift": shift_kernel(args.n), **tinygrad_kernels(args.n)}
  print(f"{args.device}, n = {args.n}, best of {args.repeat}")
  print(f"{'kernel':8} {'uops raw':>9} {'guarded':>8} {'raw ms':>8} {'guarded ms':>11} {'guarded/raw':>12}")
  for name, p in progs.items():
    arrays = inputs(p, np.random.default_rng(0))
    (raw_prg, raw_uops), (guard_prg, guard_uops) = compiled(p, device, raw_renderer), compiled(p, device, device.renderer)
    t_raw, out_raw = timed(raw_prg, device, p, arrays, args.repeat)
    t_guard, out_guard = timed(guard_prg, device, p, arrays, args.repeat)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(out_raw, out_guard)), f"{name}: the variants disagree"
    print(f"{name:8} {raw_uops:9} {guard_uops:8} {t_raw * 1e3:8.3f} {t_guard * 1e3:11.3f} {t_guard / t_raw:12.2f}")
  return 0

if __name__ == "__main__": sys.exit(main())
