"""Host memory as numpy arrays of a program's buffer dtypes: in place (what the emulator's devices run on) and copied
(what a capture records). One rule each, read by the PYTHON device (ops_python.py) and by the tinygrad bridge's REFIMPL
devices and captures (refimpl.tinygrad), whichever tinygrad line. Imports no device layer."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from refimpl.dtype import DType, PtrDType, dtypes, to_np


def views(signature: Sequence[PtrDType], bufs: Sequence) -> list[np.ndarray]:
  """A launch's buffers (anything `memoryview` takes: host memory, in call order) as writable numpy arrays viewing them
  in place, each of its pointer's element dtype. A buffer larger than its pointer's declared size is viewed up to that
  size, as a compiled kernel would see it; a smaller one is viewed whole, so that the emulator's argument check names
  the mismatch (refimpl.ir.arguments)."""
  out = []
  for buf, ptr in zip(bufs, signature):
    a = np.frombuffer(memoryview(buf).cast("B"), dtype=to_np(ptr.base))
    out.append(a[:ptr.size] if 0 <= ptr.size < a.size else a)
  return out


def copy_of(raw, dtype: DType) -> np.ndarray:
  """A copy of host memory (anything `memoryview` takes) as a flat numpy array of `dtype`. A bool byte other than 0 or
  1 (memory a kernel has not written yet) is read as C reads it: true."""
  data = bytes(memoryview(raw).cast("B"))
  if dtype == dtypes.bool: return np.frombuffer(data, dtype=np.uint8) != 0
  return np.frombuffer(data, dtype=to_np(dtype)).copy()
