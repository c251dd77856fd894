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


def symbolic(t: Tensor, n: int, *rest: int) -> Tensor:
  """t (n rows) with its batch size the bound Variable: tinygrad 0.10.1 reshapes to it, tinygrad 0.14 shrinks to it."""
  if hasattr(t, "shrink_to"): return t.shrink_to(batch.bind(n), *rest)
  return t.reshape(batch.bind(n), *rest)


def concrete(t: Tensor, n: int) -> Tensor:
  """A symbolic-size t at its bound size n."""
  return t.shrink_to(n) if hasattr(t, "shrink_to") else t.reshape(n)


start = time.perf_counter()
for n in (3, 5, 8):
  x = symbolic(Tensor(rng.standard_normal((n, 16)).astype(np.float32)), n, 16)
  out = (x @ w).relu().sum(axis=1)
  print(f"batch {n}: {concrete(out, n).numpy().round(4).tolist()}")
print(f"{GlobalCounters.kernel_count} kernels in {time.perf_counter() - start:.2f} s")
