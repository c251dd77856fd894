"""A reproducer written by `python -m refimpl.fuzz`: TINYGRAD:CLANG ADD __bf16 wrong-value:exact.
buffer 0 (__bf16) element 0: expected -14.6875 (0xc16b), got -14.75 (0xc16c) [exact]
It passes once TINYGRAD:CLANG agrees with the spec on this program. Replay: python -m refimpl.fuzz replay TINYGRAD_CLANG-ADD-__bf16-wrong-value-exact.json"""
from pathlib import Path

from refimpl.fuzz.corpus import assert_case_passes


def test_tinygrad_clang_add___bf16_wrong_value_exact():
  assert_case_passes(Path(__file__).with_name('TINYGRAD_CLANG-ADD-__bf16-wrong-value-exact.json'))
