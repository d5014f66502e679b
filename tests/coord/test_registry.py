"""Choosing a backend by URL."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs
import pytest

from replog.coord import registry
from replog.coord.contract import Coordinator
from replog.coord.errors import CoordinatorClosedError, UnknownBackendError
from replog.coord.memory import MemoryCoordinator, MemoryHandle
from replog.errors import InvalidConfigError
from replog.metadata.types import SessionState


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    yield
    for name in ("a", "b", "default", "opts"):
        registry.drop_memory_store(name)
    registry._registered.clear()


@attrs.define
class FakeEntryPoint:
    name: str
    target: Any

    def load(self) -> Any:
        if isinstance(self.target, Exception):
            raise self.target
        return self.target


def test_memory_urls_share_one_store_per_name() -> None:
    a1, a2, b = (registry.connect(u) for u in ("memory://a", "memory://a", "memory://b"))
    assert isinstance(a1, MemoryHandle) and isinstance(a2, MemoryHandle)
    assert isinstance(b, MemoryHandle)
    assert a1 is not a2 and a1.store is a2.store and a1.store is not b.store
    assert isinstance(a1.store, MemoryCoordinator)
    a1.register_broker(1, "h", 1, session_timeout_ms=60_000)
    assert 1 in a2.live_brokers() and b.live_brokers() == {}
    default = registry.connect("memory://")
    assert isinstance(default, MemoryHandle)
    same = registry.connect("MEMORY://default")
    assert isinstance(same, MemoryHandle) and same.store is default.store


def test_memory_options_apply_at_creation_only() -> None:
    store = registry.connect("memory://opts", feed_retention_max=5)
    assert isinstance(store, MemoryHandle)
    again = registry.connect("memory://opts", feed_retention_max=5)
    assert isinstance(again, MemoryHandle) and again.store is store.store
    plain = registry.connect("memory://opts")
    assert isinstance(plain, MemoryHandle) and plain.store is store.store
    with pytest.raises(InvalidConfigError):
        registry.connect("memory://opts", feed_retention_max=6)
    with pytest.raises(InvalidConfigError):
        registry.connect("memory://x", no_such_option=1)
    with pytest.raises(InvalidConfigError):
        registry.connect("memory://a/path")


def test_closing_a_memory_handle_leaves_the_store_to_the_others() -> None:
    """Closing an Admin's (or any) handle once broke every broker of the process: the store
    was closed for all of them. A closed handle refuses calls; the others go on."""
    first, second = registry.connect("memory://shared"), registry.connect("memory://shared")
    info = second.register_broker(7, "h", 7, session_timeout_ms=60_000)
    first.close()
    with pytest.raises(CoordinatorClosedError):
        first.live_brokers()
    assert second.heartbeat(7, info.incarnation_epoch) is SessionState.CONNECTED
    assert registry.connect("memory://shared").live_brokers() == {7: info}
    registry.drop_memory_store("shared")
    with pytest.raises(CoordinatorClosedError):
        second.live_brokers()


def test_a_dropped_memory_store_is_replaced() -> None:
    first = registry.connect("memory://a")
    assert isinstance(first, MemoryHandle)
    registry.drop_memory_store("a")
    second = registry.connect("memory://a")
    assert isinstance(second, MemoryHandle) and second.store is not first.store


def test_unknown_scheme_lists_the_known_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_entry_points", lambda: [FakeEntryPoint("sqlite", None)])
    with pytest.raises(UnknownBackendError) as e:
        registry.connect("zookeeper://127.0.0.1:2181/replog")
    assert e.value.scheme == "zookeeper"
    assert e.value.known_schemes == ["memory", "sqlite"]
    assert "memory, sqlite" in str(e.value)
    with pytest.raises(UnknownBackendError):
        registry.connect("no-scheme-here")


def test_entry_point_backends_are_loaded_by_scheme(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[tuple[str, dict[str, Any]]] = []

    def factory(url: str, /, **options: Any) -> Coordinator:
        made.append((url, options))
        return MemoryCoordinator()

    monkeypatch.setattr(
        registry,
        "_entry_points",
        lambda: [
            FakeEntryPoint("etcd", factory),
            FakeEntryPoint("broken", ImportError("no module named kazoo")),
            FakeEntryPoint("odd", lambda url, **o: object()),
        ],
    )
    coordinator = registry.connect("etcd://127.0.0.1:2379/replog", timeout_ms=5)
    assert isinstance(coordinator, MemoryCoordinator)
    assert made == [("etcd://127.0.0.1:2379/replog", {"timeout_ms": 5})]
    with pytest.raises(InvalidConfigError, match="failed to load"):
        registry.connect("broken://x")
    with pytest.raises(InvalidConfigError, match="not a Coordinator"):
        registry.connect("odd://x")


def test_register_backend_in_process() -> None:
    registry.register_backend("test", lambda url, **o: MemoryCoordinator())
    assert isinstance(registry.connect("test://x"), MemoryCoordinator)
    assert "test" in registry.known_schemes()
    with pytest.raises(InvalidConfigError):
        registry.register_backend("test", lambda url, **o: MemoryCoordinator())
    with pytest.raises(InvalidConfigError):
        registry.register_backend("memory", lambda url, **o: MemoryCoordinator())
