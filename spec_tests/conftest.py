"""Shared configuration of the spec suite. The refimpl pytest plugin (--backend, --conformance-report, --xfail, ...) is
loaded through refimpl's pytest11 entry point; hypothesis profiles `ci` (the default), `dev` (quick), `thorough` (long):
choose with --hypothesis-profile or REFIMPL_HYPOTHESIS_PROFILE."""
from refimpl.testing.pytest_plugin import load_hypothesis_profile

load_hypothesis_profile()
