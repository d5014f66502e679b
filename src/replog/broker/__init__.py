"""replog.broker: the broker runtime, as a sans-IO driver and the shells that run it.

``Broker`` runs one broker on the current event loop; ``Cluster.local(n)`` runs n of them in
this process behind a synchronous facade (both in ``replog.broker.shell``). Every decision is
in ``replog.broker.driver`` (``BrokerDriver`` and its parts, ``ReplicaManager`` among them),
which the deterministic simulator drives without sockets or clocks.
"""

from __future__ import annotations

from replog.broker.config import BrokerConfig
from replog.broker.driver.replica_manager import ManagerReady, ReplicaManager
from replog.broker.shell.broker import Broker, BrokerState
from replog.broker.shell.cluster import Cluster

__all__ = ["Broker", "BrokerConfig", "BrokerState", "Cluster", "ManagerReady", "ReplicaManager"]
