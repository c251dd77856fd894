"""A reproducer written by `python -m refimpl.fuzz`: TINYGRAD:CLANG MUL float wrong-value:exact.
buffer 0 (float) element 3: expected np.float32(3.0187755) (0x4041339e), got np.float32(3.0187752) (0x4041339d) [exact]
It passes once TINYGRAD:CLANG agrees with the spec on this program. Replay: python -m refimpl.fuzz replay TINYGRAD_CLANG-MUL-float-wrong-value-exact.json"""
from pathlib import Path

from refimpl.fuzz.corpus import assert_case_passes


def test_tinygrad_clang_mul_float_wrong_value_exact():
  assert_case_passes(Path(__file__).with_name('TINYGRAD_CLANG-MUL-float-wrong-value-exact.json'))
