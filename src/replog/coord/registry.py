"""Choosing a coordination backend by URL: ``connect("memory://name")``, ``connect(
"zookeeper://host:port/chroot")``, ``connect("etcd://host:port/prefix")``, or any scheme a
third-party package provides.

A backend is a factory ``(url: str, **options) -> Coordinator``. Built-in factories come first
(only ``memory`` today); then factories registered in this process with ``register_backend``;
then entry points in the group ``replog.coordinators``, whose name is the URL scheme, e.g. in a
backend's ``pyproject.toml``::

    [project.entry-points."replog.coordinators"]
    sqlite = "replog_sqlite:SqliteCoordinator.from_url"

``memory://name`` returns a new handle (``MemoryHandle``) on the one in-process store of that
name (created on first use), so several brokers in a process share the store while each owns
its handle: closing one releases what was made through it and nothing else.
``memory://`` is the store named ``default``. Its options (those of ``MemoryCoordinator``;
``clock`` defaults to the monotonic clock here) apply when the store is created; asking again
with different options is an error. ``drop_memory_store`` closes a store for every handle.
"""

from __future__ import annotations

import importlib.metadata
import threading
import urllib.parse
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from replog.clock import monotonic_ms
from replog.coord.contract import Coordinator
from replog.coord.errors import UnknownBackendError
from replog.coord.memory import MemoryCoordinator, MemoryHandle
from replog.errors import InvalidConfigError

__all__ = [
    "ENTRY_POINT_GROUP",
    "BackendFactory",
    "connect",
    "drop_memory_store",
    "known_schemes",
    "register_backend",
]

ENTRY_POINT_GROUP = "replog.coordinators"


BackendFactory = Callable[..., Coordinator]
"""Builds a coordinator: ``factory(url: str, **options) -> Coordinator``."""


class _EntryPoint(Protocol):
    name: str

    def load(self) -> Any: ...


_lock = threading.Lock()
_registered: dict[str, BackendFactory] = {}
_memory_stores: dict[str, tuple[MemoryCoordinator, dict[str, Any]]] = {}


def _memory_from_url(url: str, /, **options: Any) -> Coordinator:
    parts = urllib.parse.urlsplit(url)
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise InvalidConfigError(f"a memory URL is memory://<name>, not {url!r}")
    name = parts.netloc or "default"
    with _lock:
        existing = _memory_stores.get(name)
        if existing is not None and not existing[0].closed:
            store, created_with = existing
            if options and options != created_with:
                raise InvalidConfigError(
                    f"memory store {name!r} exists with options {sorted(created_with)}; "
                    "options apply only when a store is created"
                )
            return MemoryHandle(store)
        try:
            store = MemoryCoordinator(**{"clock": monotonic_ms, **options})
        except TypeError as e:
            raise InvalidConfigError(f"bad option for the memory backend: {e}") from e
        _memory_stores[name] = (store, dict(options))
        return MemoryHandle(store)


_BUILTIN: dict[str, BackendFactory] = {"memory": _memory_from_url}


def _entry_points() -> Iterable[_EntryPoint]:
    """Installed backends (a seam for tests)."""
    return importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)


def register_backend(scheme: str, factory: BackendFactory, *, replace: bool = False) -> None:
    """Make ``scheme`` available to ``connect`` in this process, without packaging (tests,
    applications with their own store). Built-in schemes cannot be replaced."""
    scheme = scheme.lower()
    if scheme in _BUILTIN:
        raise InvalidConfigError(f"scheme {scheme!r} is built in and cannot be replaced")
    with _lock:
        if scheme in _registered and not replace:
            raise InvalidConfigError(f"scheme {scheme!r} is already registered")
        _registered[scheme] = factory


def known_schemes() -> list[str]:
    """Every scheme ``connect`` can serve: built in, registered, installed."""
    with _lock:
        names = set(_BUILTIN) | set(_registered)
    names |= {ep.name.lower() for ep in _entry_points()}
    return sorted(names)


def _find(url: str, scheme: str) -> BackendFactory:
    with _lock:
        factory = _BUILTIN.get(scheme) or _registered.get(scheme)
    if factory is not None:
        return factory
    for ep in _entry_points():
        if ep.name.lower() != scheme:
            continue
        try:
            loaded = ep.load()
        except Exception as e:  # an installed backend that cannot import is a config error
            raise InvalidConfigError(
                f"coordination backend {scheme!r} is installed but failed to load: {e}"
            ) from e
        if not callable(loaded):
            raise InvalidConfigError(f"entry point {scheme!r} does not name a callable")
        backend: BackendFactory = loaded
        return backend
    raise UnknownBackendError(url, scheme, known_schemes())


def connect(url: str, **options: Any) -> Coordinator:
    """Open a coordinator for ``url``, choosing the backend by its scheme. Raises
    ``UnknownBackendError`` (listing the known schemes) for a scheme nobody provides."""
    if "://" not in url:
        raise UnknownBackendError(url, "", known_schemes())
    scheme = url.split("://", 1)[0].lower()
    coordinator = _find(url, scheme)(url, **options)
    if not isinstance(coordinator, Coordinator):
        raise InvalidConfigError(
            f"backend {scheme!r} returned {type(coordinator).__name__}, not a Coordinator"
        )
    return coordinator


def drop_memory_store(name: str = "default") -> None:
    """Close and forget the named in-process store (tests; the next connect makes a new one)."""
    with _lock:
        entry = _memory_stores.pop(name, None)
    if entry is not None:
        entry[0].close()
