"""The packaged conformance suite (refimpl/conformance/test_programs.py), run as part of refimpl's own suite."""
from refimpl.conformance.test_programs import *  # noqa: F403
