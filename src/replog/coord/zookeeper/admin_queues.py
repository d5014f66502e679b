"""The ZooKeeper backend's admin request queues: a persistent node
``/admin/queues/<target>/<request_id:010d>`` per queued request; the request id is the seq of
its submission. The queue rules (checks, what a full queue drops) are ``replog.coord.admin``'s."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from replog.coord import codec
from replog.coord.admin import requests_to_drop
from replog.coord.zookeeper.controller import ZkController
from replog.coord.zookeeper.znode_io import Op, Plan, ZkIo
from replog.coord.zookeeper.znodes import QUEUES, queue_dir
from replog.errors import ErrorCode, invariant
from replog.metadata import records
from replog.metadata.types import AdminPayload, AdminRequest, AlterPartitionResult

__all__ = ["ZkAdminQueues"]


def _decode(data: bytes) -> AdminRequest:
    request = codec.loads(data)
    invariant(isinstance(request, AdminRequest), "an admin queue node holds an AdminRequest")
    return request  # type: ignore[no-any-return]


class ZkAdminQueues:
    """The queues under the chroot of ``io``, read and written with the ``main`` client, or
    as ``controller``'s writes when a controller completes a request; each queue holds at most
    ``limit`` requests (calls run inside the caller's ``kazoo_errors``)."""

    def __init__(self, io: ZkIo, main: Any, limit: int, controller: ZkController) -> None:
        self._io = io
        self._main = main
        self._limit = limit
        self._controller = controller

    def _pending(
        self, target: int, deadline: float, names: list[str] | None = None
    ) -> list[tuple[AdminRequest, Any]]:
        """The queued requests with their stats (``names``: the queue's names, if just read)."""
        qdir = queue_dir(target)
        if names is None:
            names = self._io.children(self._main, qdir, deadline)
        got = self._io.gets(self._main, [f"{qdir}/{n}" for n in names], deadline)
        return [(_decode(g[0]), g[1]) for g in got if g is not None]

    def pending(self, target: int, deadline: float) -> list[AdminRequest]:
        """The target's queued requests, oldest first."""
        return [r for r, _ in self._pending(target, deadline)]

    def submit(self, target: int, payload: AdminPayload, deadline: float) -> AdminRequest:
        """Queue a request (checked by the caller with ``validate_admin_request``), dropping
        superseded ones if the queue is full, in one multi-op."""
        io, c, qdir = self._io, self._main, queue_dir(target)
        io.ensure(c, [qdir], deadline)

        def prepare(seq: int) -> Plan[AdminRequest]:
            # Only a full queue needs its requests read (to find the superseded ones): below
            # the limit the names are enough, so a submit costs the same with 1 or 1,000
            # requests queued (after a fault every leader queues one or two at once).
            names = io.children(c, qdir, deadline)
            pending = self._pending(target, deadline, names) if len(names) >= self._limit else []
            dropped = requests_to_drop([r for r, _ in pending], target, self._limit)
            versions = {r.request_id: stat.version for r, stat in pending}
            request = AdminRequest(
                request_id=seq, target=target, payload=payload, submitted_seq=seq
            )
            ops: list[Op] = [
                ("delete", f"{qdir}/{old.request_id:010d}", versions[old.request_id])
                for old in dropped
            ]
            ops.append(("create", f"{qdir}/{seq:010d}", codec.dumps_bytes(request), False))
            return Plan(request, ops, records.admin_submitted(seq, request, dropped))

        return io.transact(c, prepare, deadline)

    def complete(
        self,
        request_id: int,
        outcome: ErrorCode,
        message: str,
        result: AlterPartitionResult | None,
        controller_epoch: int | None,
        deadline: float,
    ) -> bool:
        """Remove a queued request and record its outcome; False if it is not queued.

        With ``controller_epoch`` (a controller's completion) the write goes through that
        controller's client and its fence (which raises ``FencedControllerError`` unless the
        epoch is the active one) is checked first, and its version checks go into the same
        multi-op as the removal, so a controller replaced meanwhile removes nothing."""
        if controller_epoch is None:
            return self._complete(request_id, outcome, message, result, deadline)
        epoch, controller = controller_epoch, self._controller
        client = controller.client_for(epoch, deadline)
        return self._complete(
            request_id,
            outcome,
            message,
            result,
            deadline,
            client=client,
            fence=lambda: controller.fence(client, epoch, deadline),
        )

    def _complete(
        self,
        request_id: int,
        outcome: ErrorCode,
        message: str,
        result: AlterPartitionResult | None,
        deadline: float,
        *,
        client: Any = None,
        fence: Callable[[], list[Op]] | None = None,
    ) -> bool:
        io = self._io
        c = self._main if client is None else client
        dirs = io.children(c, QUEUES, deadline)
        paths = [f"{QUEUES}/{d}/{request_id:010d}" for d in dirs]
        found = [p for p, g in zip(paths, io.gets(c, paths, deadline), strict=True) if g]
        if not found:
            if fence is not None:
                fence()  # a fenced caller is told so even when there is nothing to remove
            return False
        path = found[0]

        def prepare(seq: int) -> Plan[bool]:
            ops: list[Op] = [] if fence is None else fence()
            got = io.get(c, path, deadline)
            if got is None:
                return Plan(False, write=False)
            done = records.admin_completed(seq, _decode(got[0]), outcome, message, result)
            ops.append(("delete", path, got[1].version))
            return Plan(True, ops, done)

        return io.transact(c, prepare, deadline)
