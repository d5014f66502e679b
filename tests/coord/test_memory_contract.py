"""The coordinator contract suite against the in-memory backend."""

from __future__ import annotations

import pytest

from replog.coord.memory import MemoryCoordinator
from replog.coord.testing import CoordinatorContract, CoordinatorFactory


class TestMemoryCoordinator(CoordinatorContract):
    """Every contract test, on a fresh ``MemoryCoordinator`` with a manual clock."""

    @pytest.fixture
    def coordinator_factory(self) -> CoordinatorFactory:
        return MemoryCoordinator
