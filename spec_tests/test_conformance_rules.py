"""The packaged conformance suite (refimpl/conformance/test_rules.py), run as part of refimpl's own suite."""
from refimpl.conformance.test_rules import *  # noqa: F403
