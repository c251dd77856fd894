"""A reproducer written by `python -m refimpl.fuzz`: TINYGRAD:CLANG ADD half wrong-value:exact.
buffer 0 (half) element 0: expected np.float16(3.03) (0x420f), got np.float16(3.027) (0x420e) [exact]
It passes once TINYGRAD:CLANG agrees with the spec on this program. Replay: python -m refimpl.fuzz replay TINYGRAD_CLANG-ADD-half-wrong-value-exact.json"""
from pathlib import Path

from refimpl.fuzz.corpus import assert_case_passes


def test_tinygrad_clang_add_half_wrong_value_exact():
  assert_case_passes(Path(__file__).with_name('TINYGRAD_CLANG-ADD-half-wrong-value-exact.json'))
