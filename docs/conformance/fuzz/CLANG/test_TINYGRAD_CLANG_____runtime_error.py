"""A reproducer written by `python -m refimpl.fuzz`: TINYGRAD:CLANG - - runtime-error.
UndefinedBehavior: undefined behavior at uop 116 (STORE), lane (0, 0, 0, 0, 0, 0): a STORE's value is undefined (element 0 of buffer 0); operands (0,); the value is undefined since uop 102 (CAST), lane (0, 0, 0, 0, 0, 0): float->int cast of nan; operands (nan,)
It passes once TINYGRAD:CLANG agrees with the spec on this program. Replay: python -m refimpl.fuzz replay TINYGRAD_CLANG-----runtime-error.json"""
from pathlib import Path

from refimpl.fuzz.corpus import assert_case_passes


def test_tinygrad_clang_____runtime_error():
  assert_case_passes(Path(__file__).with_name('TINYGRAD_CLANG-----runtime-error.json'))
