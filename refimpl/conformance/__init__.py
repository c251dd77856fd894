"""The conformance suite, shipped inside refimpl: the spec's tests of a backend, for any backend.

  python -m refimpl.conformance --backend my_pkg.device:MyDevice --report out.html      (see __main__.py)
  pytest --pyargs refimpl.conformance --backend my_pkg.device:MyDevice --conformance-report out.md

Its modules (each test takes the `backend` fixture of the refimpl pytest plugin, refimpl.testing.pytest_plugin, which
pytest loads through refimpl's `pytest11` entry point):

  test_ops.py       every ALU op x dtype, every CAST and BITCAST pair: sweeps of edge and random values, and hypothesis
                    examples, compared with the emulator by each op's rule (the conformance report's cases)
  rules/            the spec's rules stated one by one, one module per rule family (rules/test_idiv_mod.py: IDIV and MOD;
                    the list: rules/__init__.py), with expected values from the rule (exact rational arithmetic, IEEE
                    rounding written out, Python ints): rounding, subnormals, casts, memory, loops, locals, names
  test_programs.py  whole programs, hand-written and random, against the emulator

A porter declares known failures and narrows the suite with the plugin's options: --xfail PATTERN (repeatable),
--xfail-file FILE (one pattern per line, # comments), --only PATTERN, --skip PATTERN. A pattern matches a test's
parametrization id, e.g. "MY-IDIV-i8" or "*-f16*" (fnmatch), or its name. `pytest spec_tests` in refimpl's own repository
runs these modules too (spec_tests/test_conformance_*.py).
"""
from pathlib import Path

PROGRAMS_DIR = Path(__file__).parent / "programs"  # real kernels kept as regression programs (JSON, refimpl.ir.load_program)
