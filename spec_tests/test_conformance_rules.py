"""The packaged conformance suite's rule tests (refimpl/conformance/rules/test_<family>.py), run as part of refimpl's own
suite."""
from refimpl.conformance import rules

globals().update(rules.tests())
