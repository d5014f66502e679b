"""Broker registrations in the ZooKeeper backend: reads of the ephemeral ``/brokers/ids/<id>``
znodes and the controller's admission of a registration (its flags rewritten in that znode, in
one multi-op with the controller fence). Registering, updating and unregistering are the
sessions' (``replog.coord.zookeeper.sessions``)."""

from __future__ import annotations

from typing import Any

from replog.coord import rules
from replog.coord.zookeeper.controller import ZkController
from replog.coord.zookeeper.znode_io import Plan, ZkIo, kazoo_errors
from replog.coord.zookeeper.znodes import IDS, decode_broker, encode_broker
from replog.metadata import records
from replog.metadata.types import BrokerInfo

__all__ = ["ZkBrokers", "read_brokers"]


def read_brokers(io: ZkIo, client: Any, deadline: float) -> dict[int, BrokerInfo]:
    """Every live registration, by broker id (inside the caller's ``kazoo_errors``)."""
    ids = sorted(int(n) for n in io.children(client, IDS, deadline))
    got = io.gets(client, [f"{IDS}/{b}" for b in ids], deadline)
    return {b: decode_broker(b, g[0]) for b, g in zip(ids, got, strict=True) if g is not None}


class ZkBrokers:
    """The registrations: read with ``io`` and the ``main`` client, admitted as
    ``controller``'s writes. Callers pass deadlines (monotonic seconds)."""

    def __init__(self, io: ZkIo, main: Any, controller: ZkController) -> None:
        self._io = io
        self._main = main
        self._controller = controller

    def get(self, broker_id: int, deadline: float) -> BrokerInfo | None:
        """``get_broker``."""
        with kazoo_errors():
            got = self._io.get(self._main, f"{IDS}/{broker_id}", deadline)
        return None if got is None else decode_broker(broker_id, got[0])

    def live(self, deadline: float) -> dict[int, BrokerInfo]:
        """``live_brokers``."""
        with kazoo_errors():
            return read_brokers(self._io, self._main, deadline)

    def admit(
        self, broker_id: int, incarnation_epoch: int, controller_epoch: int, deadline: float
    ) -> bool:
        """``admit_broker``: the flags go into the broker's (ephemeral) registration znode,
        in one multi-op with the controller fence."""
        io, path, controller = self._io, f"{IDS}/{broker_id}", self._controller
        with kazoo_errors():
            client = controller.client_for(controller_epoch, deadline)

            def prepare(seq: int) -> Plan[bool]:
                ops = controller.fence(client, controller_epoch, deadline)
                got = io.get(client, path, deadline)
                old = None if got is None else decode_broker(broker_id, got[0])
                new = rules.admitted_broker(old, incarnation_epoch)
                if got is None or new is None:
                    return Plan(False, write=False)
                if new == old:
                    return Plan(True, write=False)
                ops.append(("set", path, encode_broker(new), got[1].version))
                return Plan(True, ops, records.broker_updated(seq, new))

            return io.transact(client, prepare, deadline)
