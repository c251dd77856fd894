"""Shared configuration of the spec suite: the refimpl pytest plugin (--backend, --conformance-report) and hypothesis
profiles: `ci` (the default), `dev` (quick), `thorough` (long). Choose with --hypothesis-profile or REFIMPL_HYPOTHESIS_PROFILE."""
import os

from hypothesis import HealthCheck, settings

pytest_plugins = ["refimpl.testing.pytest_plugin"]

settings.register_profile("ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("REFIMPL_HYPOTHESIS_PROFILE", "ci"))
