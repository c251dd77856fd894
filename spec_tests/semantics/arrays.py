"""Dtype shortcuts and array constructors shared by the families' decision-row tests."""
import numpy as np

from refimpl.dtype import dtypes

I32, F32, F16, BF16 = dtypes.int32, dtypes.float32, dtypes.float16, dtypes.bfloat16
i32 = lambda *v: np.array(v, dtype=np.int32)
f32 = lambda *v: np.array(v, dtype=np.float32)
