"""The coordinator contract suite against the in-memory backend: a plain ``MemoryCoordinator``
store, and handles from ``connect("memory://name")`` on one shared store (the second-handle
tests: closing one handle must never affect another)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from replog.coord import connect
from replog.coord.memory import MemoryCoordinator
from replog.coord.registry import drop_memory_store
from replog.coord.testing import CoordinatorContract, CoordinatorFactory, SecondHandleContract


class TestMemoryCoordinator(CoordinatorContract):
    """Every contract test, on a fresh ``MemoryCoordinator`` with a manual clock."""

    @pytest.fixture
    def coordinator_factory(self) -> CoordinatorFactory:
        return MemoryCoordinator


class TestMemoryHandles(SecondHandleContract):
    """Every contract test on handles of a named in-process store (``memory://<name>``)."""

    @pytest.fixture
    def store_name(self) -> Iterator[str]:
        name = f"contract-{uuid.uuid4().hex[:12]}"
        try:
            yield name
        finally:
            drop_memory_store(name)

    @pytest.fixture
    def coordinator_factory(self, store_name: str) -> CoordinatorFactory:
        return lambda: connect(f"memory://{store_name}")

    @pytest.fixture
    def peer_factory(self, coordinator_factory: CoordinatorFactory) -> CoordinatorFactory:
        return coordinator_factory
