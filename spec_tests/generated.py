"""A fixture of the spec tests (not of the packaged suite, refimpl/conformance): generated programs for tests that hold
one way of running a program to another: the fuzzer's programs, undefined behaviour left in, each in grid form and
lowered to loops; `scaled` sizes such loops by the hypothesis profile (the tests that use it are marked `generated`,
which `pytest --properties-only` keeps). Test files import it as `generated` (pytest puts spec_tests/ on the path)."""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from refimpl.fuzz.generate import Profile, generate
from refimpl.ir import Program
from refimpl.lower.grid_to_loops import lower_grid_to_loops

CI_EXAMPLES = 200  # the `ci` hypothesis profile's examples (refimpl.testing.pytest_plugin.PROFILES)

def scaled(count: int) -> int:
  """`count` programs, times the loaded hypothesis profile's examples over ci's: a test that loops over generated
  programs runs 50x as many under the `flush` profile, as its hypothesis tests run 50x as many examples."""
  from hypothesis import settings
  return count * max(1, settings().max_examples // CI_EXAMPLES)

def both_forms(seed: int, count: int, profile: Profile | None = None, start: int = 0) -> Iterator[
    tuple[int, Program, list[np.ndarray], list[int]]]:
  """(index, program, inputs, vals) for programs start..start+count-1 of campaign `seed` (default profile: with
  barriers), each once in grid form and once lowered to loops."""
  for index in range(start, start + count):
    g, arrays, vals = generate(seed, index, profile or Profile(barrier=True))
    grid = g.program(check=False)
    inputs = [arrays[id(buf)] for buf in g.globals()]
    for p in (grid, lower_grid_to_loops(grid)): yield index, p, inputs, vals
