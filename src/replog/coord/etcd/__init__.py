"""The etcd v3 backend (``etcd://host:port[,host:port]/prefix``, over etcd's HTTP/JSON gateway):
every write one txn guarded by the feed counter, sessions as leases.
``EtcdCoordinator.from_url`` is its ``replog.coordinators`` entry point."""

from __future__ import annotations

from replog.coord.etcd.coordinator import EtcdCoordinator

__all__ = ["EtcdCoordinator"]
