"""The asyncio shell around ``replog.broker.driver``: ``Broker`` (sockets, threads, time), its
Kafka-protocol server, the links to other brokers, Prometheus metrics, and ``Cluster.local``."""

from __future__ import annotations

from replog.broker.shell.broker import Broker
from replog.broker.shell.cluster import Cluster

__all__ = ["Broker", "Cluster"]
