"""A reproducer written by `python -m refimpl.fuzz`: TINYGRAD:CLANG MAX __bf16 wrong-value:exact.
buffer 0 (__bf16) element 0: expected nan (0x7fc0), got 0 (0x0000) [exact]
It passes once TINYGRAD:CLANG agrees with the spec on this program. Replay: python -m refimpl.fuzz replay TINYGRAD_CLANG-MAX-__bf16-wrong-value-exact.json"""
from pathlib import Path

from refimpl.fuzz.corpus import assert_case_passes


def test_tinygrad_clang_max___bf16_wrong_value_exact():
  assert_case_passes(Path(__file__).with_name('TINYGRAD_CLANG-MAX-__bf16-wrong-value-exact.json'))
