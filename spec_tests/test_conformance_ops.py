"""The packaged conformance suite (refimpl/conformance/test_ops.py), run as part of refimpl's own suite."""
from refimpl.conformance.test_ops import *  # noqa: F403
