"""Scaled dot-product attention (causal, 2 heads of 16 over 8 positions): forward and backward.

    python -m refimpl.tinygrad run -- examples/attention.py
"""
import time

import numpy as np
from tinygrad import GlobalCounters, Tensor

rng = np.random.default_rng(0)


def leaf(a: np.ndarray) -> Tensor:
  """A tensor whose gradient backward() fills: tinygrad 0.10.1 asks requires_grad, tinygrad 0.14 fills every float one."""
  t = Tensor(a)
  if hasattr(t, "requires_grad"): t.requires_grad = True
  return t


q, k, v = (leaf(rng.standard_normal((1, 2, 8, 16)).astype(np.float32)) for _ in range(3))
start = time.perf_counter()
out = q.scaled_dot_product_attention(k, v, is_causal=True)
out.square().sum().backward()
print(f"out sum {out.sum().item():.6f}, dq sum {q.grad.sum().item():.6f}")
print(f"{GlobalCounters.kernel_count} kernels in {time.perf_counter() - start:.2f} s")
