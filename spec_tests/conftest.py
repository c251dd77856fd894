"""Shared configuration of the spec suite: hypothesis profiles (ci is the default; dev is quick; thorough is long)."""
import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=30, deadline=None)
settings.register_profile("thorough", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("REFIMPL_HYPOTHESIS_PROFILE", "ci"))
