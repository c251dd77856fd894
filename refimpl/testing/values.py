"""Input values for testing ops: the edge values of every dtype, and hypothesis strategies biased towards them.

Edge values are where implementations go wrong: zeros of both signs, ±1, the extremes, infinities, NaNs with several
payloads, subnormals, powers of two and their neighbours, and values next to rounding ties and overflow thresholds.
Everything is produced as bit patterns and viewed as the dtype, so NaN payloads and -0.0 survive exactly."""
from __future__ import annotations

import functools

import numpy as np

from refimpl.dtype import DType, dtypes, to_np

_UINT_OF_SIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

def float_layout(dtype: DType) -> tuple[int, int]:
  """(exponent bits, mantissa bits) of a float dtype."""
  return dtypes.finfo(dtype)

def from_bits(bits: np.ndarray | list[int], dtype: DType) -> np.ndarray:
  """Bit patterns (unsigned ints) viewed as `dtype`."""
  return np.asarray(bits, dtype=np.uint64).astype(_UINT_OF_SIZE[dtype.itemsize]).view(to_np(dtype))

def to_bits(values: np.ndarray) -> np.ndarray:
  """The bit patterns of an array (as unsigned ints of the same size)."""
  return values.view(_UINT_OF_SIZE[values.dtype.itemsize])

def _int_edges(dtype: DType) -> list[int]:
  lo, hi = int(dtypes.min(dtype)), int(dtypes.max(dtype))
  bits = 8 * dtype.itemsize
  powers = [p for k in range(bits) for p in (2**k - 1, 2**k, 2**k + 1, -(2**k), -(2**k) + 1, -(2**k) - 1)]
  candidates = [0, 1, -1, 2, -2, 3, lo, lo + 1, lo + 2, hi, hi - 1, hi - 2, bits - 1, bits, bits + 1, *powers]
  return sorted({v for v in candidates if lo <= v <= hi})

def _float_edge_bits(dtype: DType) -> list[int]:
  exp_bits, man_bits = float_layout(dtype)
  sign = 1 << (exp_bits + man_bits)
  exp_all = ((1 << exp_bits) - 1) << man_bits
  man_all = (1 << man_bits) - 1
  quiet = 1 << (man_bits - 1) if man_bits else 0
  bias = (1 << (exp_bits - 1)) - 1
  def pattern(exp_field: int, mantissa: int) -> int: return (exp_field << man_bits) | mantissa
  magnitudes = {
    0, 1, 2, man_all, quiet,                                   # zero, smallest subnormals, largest subnormal
    pattern(1, 0), pattern(1, 1), pattern(1, man_all),         # smallest normals
    pattern(bias, 0), pattern(bias, 1), pattern(bias - 1, man_all), pattern(bias, quiet),  # 1, its neighbours, 1.5
    pattern(bias - 1, 0), pattern(bias + 1, 0), pattern(bias + 1, quiet),  # 0.5, 2, 3
    exp_all - 1, exp_all - 2,                                  # largest finite and its neighbour
    exp_all, exp_all | quiet, exp_all | 1, exp_all | man_all,  # inf, quiet NaN, signalling NaN, all-ones NaN
  }
  magnitudes |= {pattern(e, m) for e in range(1, (1 << exp_bits) - 1, max(1, ((1 << exp_bits) - 2) // 24))
                 for m in (0, 1, man_all, quiet | 1)}          # powers of two across the range and their neighbours
  if dtype == dtypes.fp8e4m3: magnitudes = {m & (exp_all | man_all) for m in magnitudes}  # e4m3fn: only 0x7f is NaN
  return sorted(m | s for m in magnitudes for s in (0, sign))

@functools.cache
def edge_values(dtype: DType) -> np.ndarray:
  """The edge values of a scalar dtype, each once (as an array of that dtype)."""
  if dtype == dtypes.bool: return np.array([False, True])
  if dtypes.is_int(dtype): return np.array(_int_edges(dtype), dtype=to_np(dtype))
  if dtypes.is_float(dtype): return from_bits(_float_edge_bits(dtype), dtype)
  raise ValueError(f"no edge values for {dtype!r}")

def random_values(dtype: DType, n: int, rng: np.random.Generator) -> np.ndarray:
  """n values: a third edge values, a third uniformly random bit patterns, a third small magnitudes (for floats near ±8)."""
  if dtype == dtypes.bool: return rng.integers(0, 2, n).astype(np.bool_)
  edges = edge_values(dtype)
  bits = 8 * dtype.itemsize
  raw = from_bits(rng.integers(0, 2**bits, n, dtype=np.uint64, endpoint=False), dtype)
  if dtypes.is_int(dtype): small = rng.integers(-100 if not dtypes.is_unsigned(dtype) else 0, 100, n).astype(to_np(dtype))
  else: small = (rng.standard_normal(n) * 4).astype(np.float32).astype(to_np(dtype))
  pick = rng.integers(0, 3, n)
  return np.where(pick == 0, rng.choice(edges, n), np.where(pick == 1, raw, small))

def value_strategy(dtype: DType):
  """A hypothesis strategy of one scalar of `dtype` (a 0-d numpy array), biased to edge values, shrinking towards them."""
  from hypothesis import strategies as st
  if dtype == dtypes.bool: return st.booleans().map(np.bool_)
  edges = edge_values(dtype)
  bits = 8 * dtype.itemsize
  from_edges = st.sampled_from(range(len(edges))).map(lambda i: edges[i])
  from_pattern = st.integers(0, 2**bits - 1).map(lambda b: from_bits([b], dtype)[0])
  return st.one_of(from_edges, from_pattern)

def array_strategy(dtype: DType, n: int):
  """A hypothesis strategy of an array of n values of `dtype` built from value_strategy."""
  from hypothesis import strategies as st
  return st.lists(value_strategy(dtype), min_size=n, max_size=n).map(lambda xs: np.array(xs, dtype=to_np(dtype)))
