"""The built-in metadata quorum as a coordination backend (``raft://``).

The coordination contract (``replog.coord.contract``) is the state machine of a Raft-replicated
metadata log (``replog.raft``, KRaft-style): ``commands`` and ``codec`` are the log's records,
``machine`` applies them, ``frontend`` serves requests on a voter (pure), ``server`` runs one
voter over TCP (``wire``), ``client`` is the ``Coordinator`` brokers use (registered as the
``raft`` entry point of ``replog.coordinators``; its session keeping in ``sessions``, its feed
subscriptions in ``subscription``), ``main`` is ``replog controller`` and ``local``
runs a quorum in-process. ``replog.testing.quorum_sim`` runs the quorum under the Raft
simulator's faults.

It is its own package, above both ``replog.raft`` and ``replog.coord`` (see the layer contract
in pyproject.toml): ``replog.raft`` stays free of sockets and threads, ``replog.coord`` does
not depend on the quorum, and the broker reaches this backend only through ``coord.connect``.
"""

from replog.quorum.client import RaftCoordinator

__all__ = ["RaftCoordinator"]
