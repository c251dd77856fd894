"""A linear layer over batches of varying size, the batch a symbolic Variable (tinygrad's symbolic shapes): one kernel
for every batch size, launched with each.

    python -m refimpl.tinygrad run -- examples/symbolic_batch.py
"""
import time

import numpy as np
from tinygrad import GlobalCounters, Tensor, Variable

rng = np.random.default_rng(0)
w = Tensor(rng.standard_normal((16, 4)).astype(np.float32))
batch = Variable("batch", 1, 8)
start = time.perf_counter()
for n in (3, 5, 8):
  x = Tensor(rng.standard_normal((n, 16)).astype(np.float32)).reshape(batch.bind(n), 16)
  out = (x @ w).relu().sum(axis=1)
  print(f"batch {n}: {out.reshape(n).numpy().round(4).tolist()}")
print(f"{GlobalCounters.kernel_count} kernels in {time.perf_counter() - start:.2f} s")
