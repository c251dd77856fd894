"""The classifier of mlp_sgd.py trained with Adam (lr 1e-3): three steps.

    python -m refimpl.tinygrad run -- examples/mlp_adam.py
"""
import time

import numpy as np
from tinygrad import GlobalCounters, Tensor, nn

rng = np.random.default_rng(0)
l1, l2 = nn.Linear(64, 128), nn.Linear(128, 10)
params = nn.state.get_parameters([l1, l2])
for p in params: p.assign(Tensor((rng.standard_normal(p.shape) * 0.1).astype(np.float32))).realize()
x = Tensor(rng.standard_normal((32, 64)).astype(np.float32))
y = Tensor(rng.integers(0, 10, 32).astype(np.int32))
opt = nn.optim.Adam(params, lr=1e-3)
start = time.perf_counter()
with Tensor.train():
  for step in range(3):
    opt.zero_grad()
    loss = l2(l1(x).relu()).sparse_categorical_crossentropy(y).backward()
    opt.step()
    print(f"step {step}: loss {loss.item():.6f}")
print(f"{GlobalCounters.kernel_count} kernels in {time.perf_counter() - start:.2f} s")
