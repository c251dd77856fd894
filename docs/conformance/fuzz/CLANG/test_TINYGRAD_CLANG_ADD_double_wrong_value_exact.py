"""A reproducer written by `python -m refimpl.fuzz`: TINYGRAD:CLANG ADD double wrong-value:exact.
buffer 1 (double) element 0: expected np.float64(10.341078091215063) (0x4024aea1c99e4d36), got np.float64(10.341078091215062) (0x4024aea1c99e4d35) [exact]
It passes once TINYGRAD:CLANG agrees with the spec on this program. Replay: python -m refimpl.fuzz replay TINYGRAD_CLANG-ADD-double-wrong-value-exact.json"""
from pathlib import Path

from refimpl.fuzz.corpus import assert_case_passes


def test_tinygrad_clang_add_double_wrong_value_exact():
  assert_case_passes(Path(__file__).with_name('TINYGRAD_CLANG-ADD-double-wrong-value-exact.json'))
