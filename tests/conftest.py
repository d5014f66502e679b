"""Test-wide settings.

Hypothesis runs without per-example deadlines: the machines that run the suite are shared and
noisy, and a timing limit would make correct code fail at random. Timing belongs in the
benchmarks, never in tests. Set HYPOTHESIS_PROFILE=thorough for many more examples locally.
"""

from __future__ import annotations

import os

import pytest
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


#: markers whose tests are all system tests (real processes, a JVM): ``make check`` skips them
_SYSTEM_KINDS = ("faults", "spark")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if any(item.get_closest_marker(kind) for kind in _SYSTEM_KINDS):
            item.add_marker(pytest.mark.system)
