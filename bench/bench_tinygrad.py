"""The tinygrad bridge's costs: importing real kernels, a training step on the reference device, and whole workloads.

    python bench/bench_tinygrad.py [--repeat 20] [--steps 5] [--runs 5] [--no-python] [--only NAME] [--kernels]

1. Import + verify: every distinct kernel of corpus/workload.py on tinygrad's PYTHON device (captured
   in this process), translated with refimpl.tinygrad.v0_10.importer.from_tinygrad (which verifies the program)
   --repeat times each: median and largest per-kernel time, and the total per kernel on average. Each translation
   verifies a new Program, so the verifier's memo never answers.
2. An MLP training step (8-16-4, ReLU, MSE, SGD) on the REFIMPL device (every kernel on refimpl's emulator, strict)
   against tinygrad's own PYTHON emulator: the median of --steps warm steps after one warm-up (kernels compiled then).
3. End to end: whole tinygrad workloads on REFIMPL, tinygrad's CLANG and tinygrad's PYTHON, each the median of --runs
   warm runs after one warm-up run (which compiles, translates and plans every kernel): the small ones (WORKLOADS: an
   MLP training step, CNN inference, causal attention, a 256x256 matmul) and the kernel-heavy ones (KERNEL_HEAVY: a
   1024x1024 matmul, the CNN's training step at batch 32, a transformer block; tinygrad's PYTHON device would take
   hours on them and is not run). A run realizes the workload on fresh input Tensors of the
   same shapes, so every kernel comes from the device's caches. Every device's result is checked against CLANG's
   (rtol 1e-4) before anything is timed. PYTHON, tinygrad's own emulator, takes minutes (--no-python skips it).
`--cpu-shaped`: the REFIMPL device gets the kernels tinygrad makes for a CPU (its renderer's launch options set as
CLANG's: no locals, no global size limit, so every kernel is one thread that loops) instead of the GPU-shaped ones of
tinygrad's PYTHON renderer (workgroups, locals, 8x16 local sizes), to compare the two shapes' cost on the emulator.
`--kernels`: after each workload's table line, its kernels on REFIMPL and on CLANG (their names differ: REFIMPL gets
tinygrad's GPU-shaped kernels, CLANG its CPU-shaped ones), each with its CPU time in one warm run, its share of the run
and its GFLOP/s (tinygrad's own estimate of the kernel's operations).
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

from refimpl.tinygrad.v0_10.capture import capture  # noqa: E402
from refimpl.tinygrad.v0_10.importer import translate  # noqa: E402
from refimpl.tinygrad.v0_10.reference import install_reference_device  # noqa: E402


def import_times(repeat: int) -> list[float]:
  from tinygrad.device import Device
  Device.DEFAULT = "PYTHON"
  with capture() as kernels: runpy.run_path(str(ROOT / "corpus" / "workload.py"), run_name="__main__")
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


def _mlp_training_step(device: str, rng: np.random.Generator):
  """A 64-128-10 MLP, batch 32: forward, softmax cross-entropy, backward, one SGD update; the new weights."""
  from tinygrad import Tensor
  w1, w2 = (Tensor((rng.standard_normal(s) * 0.1).astype(np.float32), device=device, requires_grad=True)
            for s in ((64, 128), (128, 10)))
  x = Tensor(rng.standard_normal((32, 64)).astype(np.float32), device=device)
  y = Tensor(rng.integers(0, 10, 32).astype(np.int32), device=device)
  with Tensor.train():
    (x @ w1).relu().matmul(w2).sparse_categorical_crossentropy(y).backward()
    return [(w - w.grad * 0.01).realize() for w in (w1, w2)]

def _cnn_inference(device: str, rng: np.random.Generator):
  """8x1x28x28 images: conv 3x3 (8 channels), ReLU, 2x2 max pool, conv 3x3 (16), ReLU, pool, linear 400 -> 10, softmax."""
  from tinygrad import Tensor
  t = lambda *s: Tensor((rng.standard_normal(s) * 0.1).astype(np.float32), device=device)
  x, c1, c2, fc = t(8, 1, 28, 28), t(8, 1, 3, 3), t(16, 8, 3, 3), t(400, 10)
  h = x.conv2d(c1).relu().max_pool2d().conv2d(c2).relu().max_pool2d()
  return [(h.reshape(8, -1) @ fc).softmax().realize()]

def _attention(device: str, rng: np.random.Generator):
  """Causal scaled-dot-product attention over q, k, v of 4 heads x 32 positions x 64."""
  from tinygrad import Tensor
  q, k, v = (Tensor(rng.standard_normal((4, 32, 64)).astype(np.float32), device=device) for _ in range(3))
  return [q.scaled_dot_product_attention(k, v, is_causal=True).realize()]

def _matmul(device: str, rng: np.random.Generator):
  """A 256x256 by 256x256 float32 matmul."""
  from tinygrad import Tensor
  a, b = (Tensor(rng.standard_normal((256, 256)).astype(np.float32), device=device) for _ in range(2))
  return [(a @ b).realize()]

WORKLOADS = {"MLP training step": _mlp_training_step, "CNN inference": _cnn_inference, "causal attention": _attention,
             "matmul 256": _matmul}

def _matmul_1024(device: str, rng: np.random.Generator):
  """A 1024x1024 by 1024x1024 float32 matmul."""
  from tinygrad import Tensor
  a, b = (Tensor(rng.standard_normal((1024, 1024)).astype(np.float32), device=device) for _ in range(2))
  return [(a @ b).realize()]

def _cnn_training_step(device: str, rng: np.random.Generator):
  """The CNN of CNN inference at batch 32: forward, softmax cross-entropy, backward, one SGD update; the new weights."""
  from tinygrad import Tensor
  w = lambda *s: Tensor((rng.standard_normal(s) * 0.1).astype(np.float32), device=device, requires_grad=True)
  c1, c2, fc = w(8, 1, 3, 3), w(16, 8, 3, 3), w(400, 10)
  x = Tensor(rng.standard_normal((32, 1, 28, 28)).astype(np.float32), device=device)
  y = Tensor(rng.integers(0, 10, 32).astype(np.int32), device=device)
  with Tensor.train():
    h = x.conv2d(c1).relu().max_pool2d().conv2d(c2).relu().max_pool2d()
    (h.reshape(32, -1) @ fc).sparse_categorical_crossentropy(y).backward()
    return [(p - p.grad * 0.01).realize() for p in (c1, c2, fc)]

def _transformer_block(device: str, rng: np.random.Generator):
  """A pre-norm transformer block, forward, on 64 positions x 128 features: layernorm, 4-head causal self-attention
  (q, k, v and output projections), residual, layernorm, a GELU MLP of width 512, residual."""
  from tinygrad import Tensor
  t = lambda *s: Tensor((rng.standard_normal(s) * 0.05).astype(np.float32), device=device)
  x, wq, wk, wv, wo, w1, w2 = t(64, 128), t(128, 128), t(128, 128), t(128, 128), t(128, 128), t(128, 512), t(512, 128)
  heads = lambda z: z.reshape(64, 4, 32).transpose(0, 1)
  h = x.layernorm()
  att = heads(h @ wq).scaled_dot_product_attention(heads(h @ wk), heads(h @ wv), is_causal=True)
  x = x + att.transpose(0, 1).reshape(64, 128) @ wo
  return [(x + (x.layernorm() @ w1).gelu() @ w2).realize()]

KERNEL_HEAVY = {"matmul 1024": _matmul_1024, "CNN training step b32": _cnn_training_step,
                "transformer block": _transformer_block}


def refimpl_kernels(workload: str) -> list:
  """The distinct kernels one run of a workload (WORKLOADS or KERNEL_HEAVY) launches on tinygrad's REFIMPL device, as
  refimpl.tinygrad.v0_10.capture records them: the translated Program, the buffers before the run, the vals."""
  device = install_reference_device()
  with capture() as kernels:
    for t in {**WORKLOADS, **KERNEL_HEAVY}[workload](device, np.random.default_rng(0)): t.numpy()
  return kernels


class KernelTimes:
  """While active, every compiled kernel tinygrad launches is timed (CPU time of this process: both devices compute in
  it) and counted by (device, kernel name), with tinygrad's estimate of its operations."""
  def __enter__(self) -> KernelTimes:
    from tinygrad.engine.realize import CompiledRunner
    from tinygrad.ops import sym_infer
    self.runner, self.seconds, self.ops, self.calls = CompiledRunner, {}, {}, {}
    original = self.original = CompiledRunner.__call__
    def timed(runner, rawbufs, var_vals, wait=False):
      start = time.process_time()
      out = original(runner, rawbufs, var_vals, wait)
      key = (runner.device.split(":")[0], runner.p.function_name)
      self.seconds[key] = self.seconds.get(key, 0.0) + time.process_time() - start
      self.ops[key] = self.ops.get(key, 0) + int(sym_infer(runner.estimates.ops, var_vals))
      self.calls[key] = self.calls.get(key, 0) + 1
      return out
    CompiledRunner.__call__ = timed
    return self

  def __exit__(self, *exc) -> None: self.runner.__call__ = self.original

  def print(self, device: str, top: int = 8) -> None:
    mine = sorted(((s, k) for k, s in self.seconds.items() if k[0] == device), reverse=True)
    total = sum(s for s, _ in mine) or 1e-12
    for s, k in mine[:top]:
      print(f"    {device:8s} {k[1]:36s} {self.calls[k]:4d} calls {s * 1e3:9.2f} ms {100 * s / total:5.1f}%  "
            f"{self.ops[k] / max(s, 1e-12) / 1e9:7.2f} GFLOP/s")
    rest = sum(s for s, _ in mine[top:])
    if len(mine) > top: print(f"    {device:8s} ... and {len(mine) - top} more kernels, {rest * 1e3:.2f} ms")

def workload_time(fn, device: str, runs: int) -> tuple[float, list[np.ndarray]]:
  """The median CPU time of this process over `runs` warm runs of a workload on a device (after one warm-up run), and
  its results. CPU time, not wall time: every device here computes in this process, and CPU time does not count the
  time other processes take the machine from it."""
  results = [t.numpy() for t in fn(device, np.random.default_rng(0))]
  times = []
  for _ in range(runs):
    start = time.process_time()
    for t in fn(device, np.random.default_rng(0)): t.numpy()
    times.append(time.process_time() - start)
  return statistics.median(times), results

def cpu_shaped(device: str) -> None:
  """Makes tinygrad shape the kernels of `device` as it does for CLANG (ClangRenderer's launch options: no locals, no
  global size limit: one thread whose loops do the work); before the device's first kernel, since tinygrad caches them."""
  from tinygrad.device import Device
  from tinygrad.renderer.cstyle import ClangRenderer
  renderer = Device[device].renderer
  renderer.has_local, renderer.has_shared, renderer.global_max = ClangRenderer.has_local, False, ClangRenderer.global_max

def end_to_end(runs: int, python: bool, only: str, kernels: bool = False, cpu: bool = False) -> None:
  from refimpl.tinygrad.v0_10.toolchain import prepare_tinygrad
  why = prepare_tinygrad().get("CLANG")
  if why: raise SystemExit(f"tinygrad CLANG: {why}")
  ref = install_reference_device()
  if cpu: cpu_shaped(ref)
  devices = ["CLANG", *(["PYTHON"] if python else []), ref]
  print(f"{'workload':22s}" + "".join(f"{'tinygrad ' + d if d != ref else d:>17s}" for d in devices) + f"{'REFIMPL/CLANG':>15s}"
        + (f"{'PYTHON/REFIMPL':>16s}" if python else ""))
  for name, fn in {**WORKLOADS, **KERNEL_HEAVY}.items():
    if only not in name: continue
    seconds, results = {}, {}
    for d in devices:
      if d == "PYTHON" and name in KERNEL_HEAVY: continue
      seconds[d], results[d] = workload_time(fn, d, runs if d != "PYTHON" else 1)
    for d in results:  # sums in another order round differently: tolerance relative to the result's scale
      for want, got in zip(results["CLANG"], results[d]):
        if not np.allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max())): print(f"{name}: {d} differs from CLANG")
    line = f"{name:22s}" + "".join(f"{seconds[d]:16.3f}s" if d in seconds else f"{'-':>17s}" for d in devices)
    line += f"{seconds[ref] / seconds['CLANG']:14.1f}x"
    print(line + (f"{seconds['PYTHON'] / seconds[ref]:15.1f}x" if "PYTHON" in seconds else ""))
    if kernels:
      with KernelTimes() as kt:
        for d in ("CLANG", ref):
          for t in fn(d, np.random.default_rng(0)): t.numpy()
      kt.print(ref)
      kt.print("CLANG")


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--repeat", type=int, default=20)
  ap.add_argument("--steps", type=int, default=5)
  ap.add_argument("--runs", type=int, default=5, help="warm runs per end-to-end workload and device (PYTHON: one)")
  ap.add_argument("--no-python", action="store_true", help="end to end without tinygrad's PYTHON device (minutes)")
  ap.add_argument("--only", default=None, help="only the end-to-end workloads whose name contains this")
  ap.add_argument("--kernels", action="store_true", help="each workload's kernels on REFIMPL and CLANG: time, GFLOP/s")
  ap.add_argument("--cpu-shaped", action="store_true", help="REFIMPL gets CLANG's kernel shapes (one thread, loops)")
  args = ap.parse_args()
  if args.only is not None:
    end_to_end(args.runs, not args.no_python, args.only, args.kernels, args.cpu_shaped)
    return
  t = import_times(args.repeat)
  print(f"import + verify: {len(t)} kernels, median {statistics.median(t) * 1e3:.2f} ms, largest {max(t) * 1e3:.2f} ms, "
        f"mean {statistics.mean(t) * 1e3:.2f} ms per kernel")
  ref = install_reference_device()
  t_ref, t_py = mlp_step_time(ref, args.steps), mlp_step_time("PYTHON", args.steps)
  print(f"MLP training step (warm, median of {args.steps}): REFIMPL {t_ref * 1e3:.1f} ms, tinygrad PYTHON {t_py * 1e3:.1f} ms "
        f"(REFIMPL / PYTHON = {t_ref / t_py:.2f})")
  print()
  end_to_end(args.runs, not args.no_python, "", args.kernels, args.cpu_shaped)


if __name__ == "__main__":
  main()
