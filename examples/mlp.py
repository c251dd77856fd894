"""A 64-128-10 ReLU classifier: three training steps on a batch of 32 with cross-entropy, with SGD (lr 2^-6, the
default) or Adam (lr 1e-3).

    python -m refimpl.tinygrad run -- examples/mlp.py [--optimizer adam]          # every kernel on refimpl's emulator
    python -m refimpl.tinygrad run --check CLANG -- examples/mlp.py               # tinygrad's CLANG, each kernel checked
"""
import argparse
import time

import numpy as np
from tinygrad import GlobalCounters, Tensor, nn


def training():
  """Training mode: tinygrad 0.10.1's Tensor.train(), tinygrad 0.14's Context(TRAINING=1)."""
  if hasattr(Tensor, "train"): return Tensor.train()
  from tinygrad.helpers import Context
  return Context(TRAINING=1)


ap = argparse.ArgumentParser()
ap.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd")
args = ap.parse_args()
rng = np.random.default_rng(0)
l1, l2 = nn.Linear(64, 128), nn.Linear(128, 10)
params = nn.state.get_parameters([l1, l2])
for p in params: p.assign(Tensor((rng.standard_normal(p.shape) * 0.1).astype(np.float32))).realize()
x = Tensor(rng.standard_normal((32, 64)).astype(np.float32))
y = Tensor(rng.integers(0, 10, 32).astype(np.int32))
opt = nn.optim.SGD(params, lr=2**-6) if args.optimizer == "sgd" else nn.optim.Adam(params, lr=1e-3)
start = time.perf_counter()
with training():
  for step in range(3):
    opt.zero_grad()
    loss = l2(l1(x).relu()).sparse_categorical_crossentropy(y).backward()
    opt.step()
    print(f"step {step}: loss {loss.item():.6f}")
print(f"{GlobalCounters.kernel_count} kernels in {time.perf_counter() - start:.2f} s")
