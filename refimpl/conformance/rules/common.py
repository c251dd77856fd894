"""What several rule modules share: dtype shortcuts, IEEE special pairs, and the rounded-once rule of a basic operation."""
import math
from fractions import Fraction

import numpy as np

from refimpl.dtype import dtypes, to_np
from refimpl.testing.oracle import FMT, as_floats, rne_any

i32, f32, f64, f16, bf16, bl = dtypes.int32, dtypes.float32, dtypes.float64, dtypes.float16, dtypes.bfloat16, dtypes.bool
i64, u64 = dtypes.int64, dtypes.uint64
FLOATS = (f16, bf16, f32, f64)
ALL = (bl, *dtypes.ints, *dtypes.floats)

NAN, INF = float("nan"), float("inf")
IEEE_PAIRS = [(NAN, 1), (1, NAN), (NAN, NAN), (-0.0, 0.0), (0.0, -0.0), (-INF, INF), (1, 1), (1, 2), (INF, INF), (NAN, -INF),
              (-INF, 3), (2, -5), (INF, -INF)]

def exactly(v: float):
  """v as the oracle's exact value (a Fraction; zeros, infinities and NaN stay floats)."""
  return Fraction(v) if math.isfinite(v) and v != 0 else v

def rounded_once(dt, exact_op, *xs) -> np.ndarray:
  """The IEEE rule for a basic operation: the exact result (an oracle op of refimpl.testing.oracle) rounded once to dt."""
  lanes = zip(*(as_floats(x) for x in xs))
  exact = np.array([rne_any(exact_op(*v), FMT[dt]) for v in lanes], np.float64)
  with np.errstate(invalid="ignore"): return exact.astype(to_np(dt))  # exact: values of dt (NaN stays NaN)
