"""A reproducer written by `python -m refimpl.fuzz`: TINYGRAD:CLANG CAST long->__bf16 wrong-value:exact.
buffer 1 (__bf16) element 0: expected -1.08213e+09 (0xce81), got -1.07374e+09 (0xce80) [exact]
It passes once TINYGRAD:CLANG agrees with the spec on this program. Replay: python -m refimpl.fuzz replay TINYGRAD_CLANG-CAST-long-to-__bf16-wrong-value-exact.json"""
from pathlib import Path

from refimpl.fuzz.corpus import assert_case_passes


def test_tinygrad_clang_cast_long_to___bf16_wrong_value_exact():
  assert_case_passes(Path(__file__).with_name('TINYGRAD_CLANG-CAST-long-to-__bf16-wrong-value-exact.json'))
