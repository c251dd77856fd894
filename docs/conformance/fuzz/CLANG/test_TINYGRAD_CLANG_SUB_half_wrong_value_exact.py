"""A reproducer written by `python -m refimpl.fuzz`: TINYGRAD:CLANG SUB half wrong-value:exact.
buffer 0 (half) element 0: expected np.float16(0.4375) (0x3700), got np.float16(0.4377) (0x3701) [exact]
It passes once TINYGRAD:CLANG agrees with the spec on this program. Replay: python -m refimpl.fuzz replay TINYGRAD_CLANG-SUB-half-wrong-value-exact.json"""
from pathlib import Path

from refimpl.fuzz.corpus import assert_case_passes


def test_tinygrad_clang_sub_half_wrong_value_exact():
  assert_case_passes(Path(__file__).with_name('TINYGRAD_CLANG-SUB-half-wrong-value-exact.json'))
