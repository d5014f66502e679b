"""Test-wide settings.

Hypothesis runs without per-example deadlines: the machines that run the suite are shared and
noisy, and a timing limit would make correct code fail at random. Timing belongs in the
benchmarks, never in tests. Set HYPOTHESIS_PROFILE=thorough for many more examples locally.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "default",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.register_profile(
    "thorough",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
    max_examples=1000,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
