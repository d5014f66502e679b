"""The broker without sockets, threads or clock reads: ``BrokerDriver`` (``core``) and its parts.

Inputs are method calls carrying ``now_ms``; outputs are effect values (``effects``) that a
shell carries out. The parts are typed against ports (``ports``), never against the driver:
``MetadataChannel`` (the one metadata image), ``ReplicaManager`` (the hosted partitions),
``FetchSessions``, ``ControllerRole``, ``GroupHost``, ``LogCleaning``, ``ClientRequests`` over
the request handlers (``requests``), and ``StopSequence`` (the shutdown both shells run).
"""

from __future__ import annotations

from replog.broker.driver.core import BrokerDriver, BrokerState

__all__ = ["BrokerDriver", "BrokerState"]
