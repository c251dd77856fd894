"""A reproducer written by `python -m refimpl.fuzz`: TINYGRAD:CLANG SIN float wrong-value:tolerance.
buffer 0 (float) element 62: expected np.float32(0.13199662) (0x3e072a1f), got np.float32(0.13199654) (0x3e072a1a) [tolerance 4 ulp]
It passes once TINYGRAD:CLANG agrees with the spec on this program. Replay: python -m refimpl.fuzz replay TINYGRAD_CLANG-SIN-float-wrong-value-tolerance.json"""
from pathlib import Path

from refimpl.fuzz.corpus import assert_case_passes


def test_tinygrad_clang_sin_float_wrong_value_tolerance():
  assert_case_passes(Path(__file__).with_name('TINYGRAD_CLANG-SIN-float-wrong-value-tolerance.json'))
