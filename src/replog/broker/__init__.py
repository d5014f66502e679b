"""replog.broker: the broker runtime -- asyncio server, replica manager, fetchers, lifecycle.

``Broker`` runs one broker on the current event loop; ``Cluster.local(n)`` runs n of them in
this process behind a synchronous facade. ``ReplicaManager`` is the sans-IO-style core that a
deterministic simulator can drive without sockets or clocks.
"""

from __future__ import annotations

from replog.broker.broker import Broker, BrokerState
from replog.broker.cluster import Cluster
from replog.broker.config import BrokerConfig
from replog.broker.replica_manager import ManagerReady, ReplicaManager

__all__ = ["Broker", "BrokerConfig", "BrokerState", "Cluster", "ManagerReady", "ReplicaManager"]
