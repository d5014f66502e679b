"""The coordinator contract suite: every backend runs it, so all behave the same.

A backend author subclasses ``CoordinatorContract`` in a pytest file (the class name must start
with ``Test``) and provides a ``coordinator_factory`` fixture returning a callable that opens a
fresh, empty, isolated store (a new chroot, key prefix or database)::

    class TestSqliteCoordinator(CoordinatorContract):
        @pytest.fixture
        def coordinator_factory(self, tmp_path):
            return lambda: SqliteCoordinator.open(tmp_path / "meta.db")

Session tests need the backend to implement ``SessionFaults`` and are skipped otherwise.
A backend that can open a second handle on one store also subclasses ``SecondHandleContract``
(instead of ``CoordinatorContract``) and provides a ``peer_factory`` fixture that opens one
(often ``coordinator_factory`` itself, when it reopens one chroot, key prefix or file); its
tests check what the second handle sees.
Listener assertions wait up to ``settle_timeout_s`` for asynchronous backends; the in-memory
backend delivers before the writing call returns.
"""

from __future__ import annotations

from replog.coord.testing.base import CoordinatorFactory, replay
from replog.coord.testing.suite import CoordinatorContract, SecondHandleContract

__all__ = ["CoordinatorContract", "CoordinatorFactory", "SecondHandleContract", "replay"]
