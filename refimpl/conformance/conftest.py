"""The packaged suite's configuration: the hypothesis profile (REFIMPL_HYPOTHESIS_PROFILE or --hypothesis-profile,
default ci). The plugin itself comes through refimpl's pytest11 entry point."""
from refimpl.testing.pytest_plugin import load_hypothesis_profile

load_hypothesis_profile()
