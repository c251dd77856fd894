"""A reproducer written by `python -m refimpl.fuzz`: TINYGRAD:CLANG SUB float wrong-value:exact.
buffer 0 (float) element 0: expected np.float32(nan) (0xffc00000), got np.float32(-inf) (0xff800000) [exact]
It passes once TINYGRAD:CLANG agrees with the spec on this program. Replay: python -m refimpl.fuzz replay TINYGRAD_CLANG-SUB-float-wrong-value-exact.json"""
from pathlib import Path

from refimpl.fuzz.corpus import assert_case_passes


def test_tinygrad_clang_sub_float_wrong_value_exact():
  assert_case_passes(Path(__file__).with_name('TINYGRAD_CLANG-SUB-float-wrong-value-exact.json'))
