"""A reproducer written by `python -m refimpl.fuzz`: TINYGRAD:CLANG SIN double wrong-value:tolerance.
buffer 0 (double) element 0: expected np.float64(-0.704823075791521) (0xbfe68de91f7fb3ea), got np.float64(-0.0) (0x8000000000000000) [tolerance 4 ulp]
It passes once TINYGRAD:CLANG agrees with the spec on this program. Replay: python -m refimpl.fuzz replay TINYGRAD_CLANG-SIN-double-wrong-value-tolerance.json"""
from pathlib import Path

from refimpl.fuzz.corpus import assert_case_passes


def test_tinygrad_clang_sin_double_wrong_value_tolerance():
  assert_case_passes(Path(__file__).with_name('TINYGRAD_CLANG-SIN-double-wrong-value-tolerance.json'))
