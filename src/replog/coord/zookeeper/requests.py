"""The admin request queue and producer-id blocks of the ZooKeeper backend: requests are
persistent nodes ``/admin/queues/<target>/<request_id>`` (``ZkAdminQueues``), completed with the
controller fence in the removal's multi-op; producer-id blocks live in one node
(``/replog/producer_ids``), allocated at the version read.

``ZkRequestsMixin`` is a part of ``ZooKeeperCoordinator``: it uses the handle's state and
helpers, declared below, and is not used on its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from replog.coord import codec, rules
from replog.coord.admin import validate_admin_request
from replog.coord.errors import CoordinatorUnavailableError
from replog.coord.zookeeper.admin_queues import ZkAdminQueues
from replog.coord.zookeeper.znode_io import Op, Plan, ZkIo, kazoo_errors
from replog.coord.zookeeper.znodes import PRODUCER_IDS
from replog.errors import ErrorCode
from replog.metadata.types import (
    PRODUCER_ID_BLOCK_SIZE,
    AdminPayload,
    AdminRequest,
    AlterPartitionResult,
    ProducerIdBlock,
)

__all__ = ["ZkRequestsMixin"]


class ZkRequestsMixin:
    """The admin-queue and producer-id part of ``ZooKeeperCoordinator``."""

    _io: ZkIo
    _main: Any
    _admin: ZkAdminQueues

    if TYPE_CHECKING:  # provided by ZooKeeperCoordinator; declared here for the type checker

        def _deadline(self, timeout_ms: int | None) -> float: ...

        def _controller_client(self, controller_epoch: int, deadline: float) -> Any: ...

        def _fence(self, client: Any, controller_epoch: int, deadline: float) -> list[Op]: ...

    # ---- admin queue ----

    def submit_admin_request(
        self, target: int, payload: AdminPayload, *, timeout_ms: int | None = None
    ) -> AdminRequest:
        """See ``Coordinator.submit_admin_request``: a persistent node
        ``/admin/queues/<target>/<request_id>``; the request id is the submission's seq."""
        validate_admin_request(target, payload)
        deadline = self._deadline(timeout_ms)
        with kazoo_errors():
            return self._admin.submit(target, payload, deadline)

    def pending_admin_requests(
        self, target: int, *, timeout_ms: int | None = None
    ) -> list[AdminRequest]:
        """See ``Coordinator.pending_admin_requests``."""
        deadline = self._deadline(timeout_ms)
        with kazoo_errors():
            return self._admin.pending(target, deadline)

    def complete_admin_request(
        self,
        request_id: int,
        *,
        outcome: ErrorCode = ErrorCode.NONE,
        message: str = "",
        result: AlterPartitionResult | None = None,
        controller_epoch: int | None = None,
        timeout_ms: int | None = None,
    ) -> bool:
        """See ``Coordinator.complete_admin_request``: with ``controller_epoch``, the checks
        on the controller nodes go into the removal's multi-op, as in other controller writes."""
        deadline = self._deadline(timeout_ms)
        with kazoo_errors():
            if controller_epoch is None:
                return self._admin.complete(request_id, outcome, message, result, deadline)
            epoch = controller_epoch
            client = self._controller_client(epoch, deadline)
            return self._admin.complete(
                request_id,
                outcome,
                message,
                result,
                deadline,
                client=client,
                fence=lambda: self._fence(client, epoch, deadline),
            )

    # ---- producer ids ----

    def allocate_producer_ids(
        self,
        broker_id: int,
        broker_epoch: int,
        *,
        count: int = PRODUCER_ID_BLOCK_SIZE,
        controller_epoch: int,
        timeout_ms: int | None = None,
    ) -> ProducerIdBlock:
        """See ``Coordinator.allocate_producer_ids``: the blocks node is set at the version
        read, in one multi-op with the controller fence (no feed record)."""
        deadline = self._deadline(timeout_ms)
        io = self._io
        with kazoo_errors():
            client = self._controller_client(controller_epoch, deadline)

            def prepare() -> Plan[ProducerIdBlock]:
                ops = self._fence(client, controller_epoch, deadline)
                got = io.get(client, PRODUCER_IDS, deadline)
                if got is None:
                    raise CoordinatorUnavailableError(f"the ZooKeeper layout lacks {PRODUCER_IDS}")
                stored = codec.loads(got[0]) if got[0] else ()
                block, blocks = rules.allocated_producer_ids(stored, broker_id, broker_epoch, count)
                ops.append(("set", PRODUCER_IDS, codec.dumps_bytes(blocks), got[1].version))
                return Plan(block, ops)

            return io.commit_unfed(client, prepare, deadline)

    def producer_id_block(
        self, broker_id: int, *, timeout_ms: int | None = None
    ) -> ProducerIdBlock | None:
        """See ``Coordinator.producer_id_block``."""
        deadline = self._deadline(timeout_ms)
        with kazoo_errors():
            got = self._io.get(self._main, PRODUCER_IDS, deadline)
        blocks: tuple[ProducerIdBlock, ...] = codec.loads(got[0]) if got and got[0] else ()
        return next((b for b in blocks if b.broker_id == broker_id), None)
