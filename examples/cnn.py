"""A small CNN (Conv2d, BatchNorm2d, ReLU, max_pool2d, Linear): two SGD steps on 8 1x12x12 images.

    python -m refimpl.tinygrad run -- examples/cnn.py
"""
import time

import numpy as np
from tinygrad import GlobalCounters, Tensor, nn


def training():
  """Training mode: tinygrad 0.10.1's Tensor.train(), tinygrad 0.14's Context(TRAINING=1)."""
  if hasattr(Tensor, "train"): return Tensor.train()
  from tinygrad.helpers import Context
  return Context(TRAINING=1)


rng = np.random.default_rng(0)
conv, bn, fc = nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.Linear(4 * 5 * 5, 10)
params = [conv.weight, conv.bias, bn.weight, bn.bias, fc.weight, fc.bias]  # BatchNorm's running statistics are not trained
for p in params: p.assign(Tensor((rng.standard_normal(p.shape) * 0.1).astype(np.float32))).realize()
x = Tensor(rng.standard_normal((8, 1, 12, 12)).astype(np.float32))
y = Tensor(rng.integers(0, 10, 8).astype(np.int32))
opt = nn.optim.SGD(params, lr=2**-5)
start = time.perf_counter()
with training():
  for step in range(2):
    opt.zero_grad()
    h = bn(conv(x)).relu().max_pool2d()
    loss = fc(h.reshape(8, -1)).sparse_categorical_crossentropy(y).backward()
    opt.step()
    print(f"step {step}: loss {loss.item():.6f}")
print(f"{GlobalCounters.kernel_count} kernels in {time.perf_counter() - start:.2f} s")
