"""The CAST oracle shared by the conversion families: the spec's value of CAST x from exact arithmetic (int -> int wraps,
to float rounds once to nearest even, float -> int truncates or is undefined, bool casts), and the sources' values."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from refimpl.dtype import dtypes, to_np
from refimpl.emulator.alu import exec_cast
from refimpl.ir.dtype_text import dtype_to_str
from refimpl.testing.oracle import FMT, UINT, as_floats, random_bits, rne, same

INTS = (dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.uint64)
FLOATS = (dtypes.fp8e4m3, dtypes.fp8e5m2, dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)
ALL = (dtypes.bool, *INTS, *FLOATS)
ids = lambda dts: [dtype_to_str(d) for d in dts]

def int_range(dt) -> tuple[int, int]:
  bits = 8 * dt.itemsize
  return (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if dt in dtypes.sints else (0, 2**bits - 1)

def oracle(x, src, dst):
  """The spec's value of CAST x (a Python bool / int / float holding the exact source value), or None if undefined."""
  if dst is dtypes.bool: return x != 0  # NaN != 0 is true, -0 != 0 is false
  if src is dtypes.bool: return (1.0 if x else 0.0) if dst in FLOATS else int(x)
  if dst in INTS:
    if src in INTS:
      lo, hi = int_range(dst)
      return (x - lo) % (hi - lo + 1) + lo
    if math.isnan(x) or math.isinf(x): return None
    t = math.trunc(x)  # exact for floats
    lo, hi = int_range(dst)
    return t if lo <= t <= hi else None
  if isinstance(x, float) and (math.isnan(x) or math.isinf(x) or x == 0): return rne(x, FMT[dst])
  return rne(Fraction(x), FMT[dst])

def values_of(a: np.ndarray, dt) -> list:
  return as_floats(a) if dt in FLOATS else a.reshape(-1).tolist()

def check(x: np.ndarray, src, dst) -> list[str]:
  out = exec_cast(x, src, dst)
  assert out.values.dtype == to_np(dst) and out.values.shape == x.shape
  got, xs = values_of(out.values, dst), values_of(x, src)
  undef = np.zeros(len(xs), bool) if out.undefined is None else out.undefined.reshape(-1)
  loose = np.zeros(len(xs), bool) if out.loose is None else out.loose.reshape(-1)
  bad = []
  for i, (g, v) in enumerate(zip(got, xs)):
    want = oracle(v, src, dst)
    if want is None: ok = bool(undef[i]) and g == 0
    elif dst in FLOATS: ok = same(g, want) and not undef[i] and bool(loose[i]) == math.isnan(want)
    else: ok = g == want and not undef[i] and not loose[i]
    if not ok: bad.append(f"CAST {v!r} {dtype_to_str(src)}->{dtype_to_str(dst)} = {g!r} ({bool(undef[i])=}), want {want!r}")
  return bad[:5]

def every(dt) -> np.ndarray:
  """Every value of an 8- or 16-bit dtype (bool: both)."""
  if dt is dtypes.bool: return np.array([False, True])
  return np.arange(2 ** (8 * dt.itemsize), dtype=np.uint64).astype(UINT[8 * dt.itemsize]).view(to_np(dt))

def midpoints(src, dst, n: int, seed: int) -> np.ndarray:
  """Values of src at and next to the midpoints between neighbouring values of dst (the rounding boundaries)."""
  ys = np.sort(np.abs(as_floats_arr(random_bits(dst, n, seed))))
  ys = ys[np.isfinite(ys)]
  nxt = np.nextafter(ys.astype(FMT[dst].np), FMT[dst].np.type(np.inf)).astype(np.float64)
  mids = (ys + nxt) / 2  # exact in float64 (dst has at most 24 significand bits)
  with np.errstate(over="ignore"):
    m = mids.astype(FMT[src].np)
  up, down = np.nextafter(m, FMT[src].np.type(np.inf)), np.nextafter(m, FMT[src].np.type(0))
  out = np.concatenate([m, up, down])
  return np.concatenate([out, -out])

def as_floats_arr(a: np.ndarray) -> np.ndarray: return np.array(as_floats(a))

def int_edges(dt) -> list[int]:
  """Edge ints of dt for casts: the extremes and the values beside the powers of two where floats lose precision."""
  lo, hi = int_range(dt)
  vals = {0, 1, -1, lo, hi, lo + 1, hi - 1} | {s * 2**k + d for k in (8, 11, 12, 16, 24, 25, 31, 52, 53, 54, 62, 63)
                                                for s in (1, -1) for d in (-1, 0, 1, 2**(k // 2))}
  return sorted(v for v in vals if lo <= v <= hi)
