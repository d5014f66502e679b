"""Producer-id blocks in the ZooKeeper backend: the latest block of every broker, in one node
(``/replog/producer_ids``, codec JSON of a tuple of ``ProducerIdBlock``). Allocation sets that
node at the version read, in one multi-op with the controller fence; it writes no feed record."""

from __future__ import annotations

from typing import Any

from replog.coord import codec, rules
from replog.coord.errors import CoordinatorUnavailableError
from replog.coord.zookeeper.controller import ZkController
from replog.coord.zookeeper.znode_io import Plan, ZkIo, kazoo_errors
from replog.coord.zookeeper.znodes import PRODUCER_IDS
from replog.metadata.types import ProducerIdBlock

__all__ = ["ZkProducerIds"]


class ZkProducerIds:
    """The blocks node: read with ``io`` and the ``main`` client, allocated as
    ``controller``'s writes. Callers pass deadlines (monotonic seconds)."""

    def __init__(self, io: ZkIo, main: Any, controller: ZkController) -> None:
        self._io = io
        self._main = main
        self._controller = controller

    def allocate(
        self,
        broker_id: int,
        broker_epoch: int,
        count: int,
        controller_epoch: int,
        deadline: float,
    ) -> ProducerIdBlock:
        """``allocate_producer_ids``: the next block for ``broker_id``."""
        io, controller = self._io, self._controller
        with kazoo_errors():
            client = controller.client_for(controller_epoch, deadline)

            def prepare() -> Plan[ProducerIdBlock]:
                ops = controller.fence(client, controller_epoch, deadline)
                got = io.get(client, PRODUCER_IDS, deadline)
                if got is None:
                    raise CoordinatorUnavailableError(f"the ZooKeeper layout lacks {PRODUCER_IDS}")
                stored = codec.loads(got[0]) if got[0] else ()
                block, blocks = rules.allocated_producer_ids(stored, broker_id, broker_epoch, count)
                ops.append(("set", PRODUCER_IDS, codec.dumps_bytes(blocks), got[1].version))
                return Plan(block, ops)

            return io.commit_unfed(client, prepare, deadline)

    def block(self, broker_id: int, deadline: float) -> ProducerIdBlock | None:
        """``producer_id_block``: the broker's latest block."""
        with kazoo_errors():
            got = self._io.get(self._main, PRODUCER_IDS, deadline)
        blocks: tuple[ProducerIdBlock, ...] = codec.loads(got[0]) if got and got[0] else ()
        return next((b for b in blocks if b.broker_id == broker_id), None)
