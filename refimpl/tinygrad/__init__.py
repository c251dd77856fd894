"""refimpl's bridge to tinygrad: tinygrad's kernels on the reference, and tinygrad's devices under refimpl's suite.

One core serves every tinygrad line; one adapter per line holds what depends on it (lines.py names the lines and picks
the installed one):

  lines.py, names.py, translation.py, session.py, program.py, cases.py   the core: the lines served, kernel names,
               what both importers share, a run's report of undefined behaviour, the REFIMPL devices' program class,
               captured kernels as fuzzer case files
  devices.py   what both lines' TINYGRAD devices share;  line_device.py  the TINYGRAD device class of the installed line
  selftest.py  tinygrad's own tests on the reference (either line);  __main__.py  the command line
  report/      the tinygrad conformance report: runner.py (runs it), classes.py (the disagreement classes and their
               reproducers), reliance.py (what tinygrad's kernels rely on), pages.py (the pages)
  v0_10/       tinygrad 0.10.1: importer, capture, the REFIMPL device (reference.py), exporter, the TINYGRAD devices
               (backend.py), their toolchains, NVIDIA's toolchain, the stand-ins of devices without their hardware
  v0_14/       tinygrad 0.14.0: the same jobs for its kernel form (see its __init__)

The package imports nothing itself: importing one line's adapter never loads the other's.
"""
