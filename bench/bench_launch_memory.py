"""The emulator's memory bound on large launches: peak memory of one run of out = a * b + 1 (float32, workgroups of 256
threads) as the launch grows, beside the bytes of its buffers.

    python bench/bench_launch_memory.py [--log2 20 22 24 26]

Each size runs in its own process (peak RSS from getrusage). "lane state" is the peak less the process just before
the run (buffers already allocated): what the emulator's values took; "estimate" is the machine's own estimate for the
launch in one piece (lanes x Plan.lane_bytes). It should level off at about LANE_MEMORY / CHUNK_SHARE
once launches run in chunks (refimpl/emulator/machine.py, "Memory bound"), however large the launch.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import resource
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def one(log2: int) -> dict:
  """Runs in the child: builds the launch, runs it once, reports sizes and times."""
  sys.path.insert(0, str(ROOT))
  import numpy as np

  from refimpl.dtype import dtypes
  from refimpl.emulator import settings
  from refimpl.emulator.machine import emulate
  from refimpl.emulator.plan import Plan
  from refimpl.ir import Ops, ProgramBuilder
  n, f32 = 1 << log2, dtypes.float32
  b = ProgramBuilder("axpb")
  out, x, y = b.global_buf(f32, n), b.global_buf(f32, n), b.global_buf(f32, n)
  i = b.alu(Ops.ADD, b.alu(Ops.MUL, b.gidx(0, n // 256), b.const(256, dtypes.int32)), b.lidx(0, 256))
  b.store(out, i, b.alu(Ops.ADD, b.alu(Ops.MUL, b.load(x, i), b.load(y, i)), b.const(1.0, f32)))
  p = b.build()
  bufs = [np.full(n, -1.0, np.float32), np.full(n, 2.0, np.float32), np.full(n, 3.0, np.float32)]  # pages touched
  before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
  plan = Plan.of(p, ())
  start = time.perf_counter()
  got = emulate(p, bufs, inplace=True).buffers[0]
  seconds = time.perf_counter() - start
  assert got[0] == 7.0 and got[-1] == 7.0
  peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
  whole = plan.grid.lanes * plan.lane_bytes
  return {"threads": n, "buffers": 3 * 4 * n, "peak": peak, "before": before, "seconds": seconds,
          "chunked": whole > settings.LANE_MEMORY, "estimate": whole}


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--log2", type=int, nargs="+", default=[20, 22, 24, 26])
  ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
  args = ap.parse_args()
  if args.child is not None:
    print(json.dumps(one(args.child)))
    return 0
  print(f"{'threads':>11s} {'buffers':>9s} {'peak RSS':>9s} {'lane state':>11s} {'estimate':>9s} {'chunked':>8s} {'time':>8s}")
  for k in args.log2:
    res = subprocess.run([sys.executable, __file__, "--child", str(k)], capture_output=True, text=True, check=True)
    r = json.loads(res.stdout)
    lane = r["peak"] - r["before"]
    mib = lambda x: f"{x / 2**20:7.0f}M"
    print(f"{r['threads']:11d} {mib(r['buffers']):>9s} {mib(r['peak']):>9s} {mib(lane):>11s} {mib(r['estimate']):>9s} "
          f"{r['chunked']!s:>8s} {r['seconds']:7.2f}s")
  return 0


if __name__ == "__main__":
  sys.exit(main())
