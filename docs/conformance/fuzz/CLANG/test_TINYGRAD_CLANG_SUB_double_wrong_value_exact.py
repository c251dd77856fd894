"""A reproducer written by `python -m refimpl.fuzz`: TINYGRAD:CLANG SUB double wrong-value:exact.
buffer 1 (double) element 0: expected np.float64(0.8797711590669852) (0x3fec2715d88503d0), got np.float64(0.879771159066985) (0x3fec2715d88503ce) [exact]
It passes once TINYGRAD:CLANG agrees with the spec on this program. Replay: python -m refimpl.fuzz replay TINYGRAD_CLANG-SUB-double-wrong-value-exact.json"""
from pathlib import Path

from refimpl.fuzz.corpus import assert_case_passes


def test_tinygrad_clang_sub_double_wrong_value_exact():
  assert_case_passes(Path(__file__).with_name('TINYGRAD_CLANG-SUB-double-wrong-value-exact.json'))
