"""The tinygrad bridge's costs: importing real kernels, and a training step on the reference device.

    python bench/bench_tinygrad.py [--repeat 20] [--steps 5]

1. Import + verify: every distinct kernel of corpus/tinygrad-0.10.1/workload.py on tinygrad's PYTHON device (captured
   in this process), translated with refimpl.tinygrad.from_tinygrad (which verifies the program) --repeat times each:
   median and largest per-kernel time, and the total per kernel on average. Each translation verifies a new Program, so
   the verifier's memo never answers.
2. An MLP training step (8-16-4, ReLU, MSE, SGD) on the REFIMPL device (every kernel on refimpl's emulator, strict)
   against tinygrad's own PYTHON emulator: the median of --steps warm steps after one warm-up (kernels compiled then).
Ratios are from one run; the machine is noisy.
"""
from __future__ import annotations

import argparse
import pathlib
import runpy
import statistics
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from anywhere in a checkout

from refimpl.tinygrad import capture, translate  # noqa: E402
from refimpl.tinygrad.reference import install_reference_device  # noqa: E402


def import_times(repeat: int) -> list[float]:
  from tinygrad.device import Device
  Device.DEFAULT = "PYTHON"
  with capture() as kernels: runpy.run_path(str(ROOT / "corpus" / "tinygrad-0.10.1" / "workload.py"), run_name="__main__")
  per_kernel = []
  for k in kernels:
    gs, ls = k.program.global_size, k.program.local_size
    start = time.perf_counter()
    for _ in range(repeat): translate(k.spec, global_size=gs, local_size=ls)
    per_kernel.append((time.perf_counter() - start) / repeat)
  return per_kernel


def mlp_step_time(device: str, steps: int) -> float:
  from tinygrad import Tensor, nn
  rng = np.random.default_rng(0)
  params = [Tensor(rng.standard_normal(s).astype(np.float32), device=device, requires_grad=True)
            for s in ((16, 8), (16,), (4, 16), (4,))]
  x, y = (Tensor(rng.standard_normal(s).astype(np.float32), device=device) for s in ((4, 8), (4, 4)))
  opt = nn.optim.SGD(params, lr=2**-6)
  times = []
  for _ in range(steps + 1):
    start = time.perf_counter()
    with Tensor.train():
      loss = (((x @ params[0].T + params[1]).relu() @ params[2].T + params[3] - y) ** 2).mean()
      opt.zero_grad()
      loss.backward()
      opt.step()
    loss.numpy()
    times.append(time.perf_counter() - start)
  return statistics.median(times[1:])


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--repeat", type=int, default=20)
  ap.add_argument("--steps", type=int, default=5)
  args = ap.parse_args()
  t = import_times(args.repeat)
  print(f"import + verify: {len(t)} kernels, median {statistics.median(t) * 1e3:.2f} ms, largest {max(t) * 1e3:.2f} ms, "
        f"mean {statistics.mean(t) * 1e3:.2f} ms per kernel")
  ref = install_reference_device()
  t_ref, t_py = mlp_step_time(ref, args.steps), mlp_step_time("PYTHON", args.steps)
  print(f"MLP training step (warm, median of {args.steps}): REFIMPL {t_ref * 1e3:.1f} ms, tinygrad PYTHON {t_py * 1e3:.1f} ms "
        f"(REFIMPL / PYTHON = {t_ref / t_py:.2f})")


if __name__ == "__main__":
  main()
