"""A reproducer written by `python -m refimpl.fuzz`: TINYGRAD:CLANG MAX double wrong-value:exact.
buffer 0 (double) element 0: expected np.float64(nan) (0x7ff8000000000000), got np.float64(0.0) (0x0000000000000000) [exact]
It passes once TINYGRAD:CLANG agrees with the spec on this program. Replay: python -m refimpl.fuzz replay TINYGRAD_CLANG-MAX-double-wrong-value-exact.json"""
from pathlib import Path

from refimpl.fuzz.corpus import assert_case_passes


def test_tinygrad_clang_max_double_wrong_value_exact():
  assert_case_passes(Path(__file__).with_name('TINYGRAD_CLANG-MAX-double-wrong-value-exact.json'))
