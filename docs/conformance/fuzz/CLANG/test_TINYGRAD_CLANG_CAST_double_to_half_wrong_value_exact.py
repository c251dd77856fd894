"""A reproducer written by `python -m refimpl.fuzz`: TINYGRAD:CLANG CAST double->half wrong-value:exact.
buffer 0 (half) element 0: expected np.float16(-6.55e+04) (0xfbff), got np.float16(-6.547e+04) (0xfbfe) [exact]
It passes once TINYGRAD:CLANG agrees with the spec on this program. Replay: python -m refimpl.fuzz replay TINYGRAD_CLANG-CAST-double-to-half-wrong-value-exact.json"""
from pathlib import Path

from refimpl.fuzz.corpus import assert_case_passes


def test_tinygrad_clang_cast_double_to_half_wrong_value_exact():
  assert_case_passes(Path(__file__).with_name('TINYGRAD_CLANG-CAST-double-to-half-wrong-value-exact.json'))
