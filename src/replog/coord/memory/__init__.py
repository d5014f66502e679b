"""The in-memory backend (``memory://name``): the embedded default and the reference semantics
of the contract. ``MemoryCoordinator`` is the store (one process, one lock, an injected clock);
``MemoryHandle`` is one caller's handle on a shared store, what ``connect`` returns."""

from __future__ import annotations

from replog.coord.memory.coordinator import FEED_RETENTION_MAX, MemoryCoordinator
from replog.coord.memory.handle import MemoryHandle

__all__ = ["FEED_RETENTION_MAX", "MemoryCoordinator", "MemoryHandle"]
