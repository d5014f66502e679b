"""The etcd backend's admin request queues: ``admin/q/<target>/<id, 20 digits>`` holds a
queued AdminRequest and ``admin/id/<id>`` its target; the request id is the seq of its
submission. The queue rules (checks, what a full queue drops) are ``replog.coord.admin``'s.

``EtcdAdminMixin`` is a part of ``EtcdCoordinator``, not used on its own."""

from __future__ import annotations

from typing import TYPE_CHECKING

from replog.coord import codec
from replog.coord.admin import requests_to_drop, validate_admin_request
from replog.coord.etcd_client import JsonObj, KeyValue, op_delete, op_put, op_range
from replog.coord.etcd_txn import Done, EtcdTxnBase, TxnPlan, plan
from replog.errors import ErrorCode
from replog.metadata import records
from replog.metadata.types import AdminPayload, AdminRequest, AlterPartitionResult, MetadataChange

__all__ = ["EtcdAdminMixin"]


class EtcdAdminMixin(EtcdTxnBase):
    """The admin-queue part of ``EtcdCoordinator``."""

    _admin_limit: int

    def submit_admin_request(
        self, target: int, payload: AdminPayload, *, timeout_ms: int | None = None
    ) -> AdminRequest:
        """See ``Coordinator.submit_admin_request`` (request id = the submission's seq)."""
        validate_admin_request(target, payload)
        queue_p = self._k(f"admin/q/{target}/")

        def attempt() -> TxnPlan[AdminRequest]:
            last, seq_mod, (queued,) = self._seq_read([op_range(queue_p, prefix=True)], timeout_ms)
            pending: list[AdminRequest] = [codec.loads(kv.value) for kv in queued]
            dropped = requests_to_drop(pending, target, self._admin_limit)
            request_id = last + 1
            request = AdminRequest(
                request_id=request_id, target=target, payload=payload, submitted_seq=request_id
            )
            ops = [
                op_put(f"{queue_p}{request_id:020d}", codec.dumps(request)),
                op_put(self._k(f"admin/id/{request_id:020d}"), str(target)),
            ]
            for old in dropped:
                ops.append(op_delete(f"{queue_p}{old.request_id:020d}"))
                ops.append(op_delete(self._k(f"admin/id/{old.request_id:020d}")))

            def build(seq: int) -> list[MetadataChange]:
                return records.admin_submitted(seq, request, dropped)

            return plan(last, seq_mod, [], ops, build, lambda _: request)

        return self._run(timeout_ms, attempt)

    def pending_admin_requests(
        self, target: int, *, timeout_ms: int | None = None
    ) -> list[AdminRequest]:
        """See ``Coordinator.pending_admin_requests``."""
        (kvs,) = self._read([op_range(self._k(f"admin/q/{target}/"), prefix=True)], timeout_ms)
        return [codec.loads(kv.value) for kv in kvs]

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
        """See ``Coordinator.complete_admin_request``: with ``controller_epoch``, the controller
        keys are read with the index and compared in the removal's txn, as in other controller
        writes."""
        id_key = self._k(f"admin/id/{request_id:020d}")
        ctl_ops = [] if controller_epoch is None else self._ctl_ops()

        def attempt() -> TxnPlan[bool] | Done[bool]:
            last, seq_mod, got = self._seq_read([*ctl_ops, op_range(id_key)], timeout_ms)
            compares = [] if controller_epoch is None else self._guard(controller_epoch, got[:3])
            index = got[-1]
            if not index:
                return Done(False)
            queue_key = self._k(f"admin/q/{int(index[0].value)}/{request_id:020d}")
            (queued,) = self._read([op_range(queue_key)], timeout_ms)
            if not queued:
                return Done(False)
            request: AdminRequest = codec.loads(queued[0].value)

            def build(seq: int) -> list[MetadataChange]:
                return records.admin_completed(seq, request, outcome, message, result)

            ops = [op_delete(id_key), op_delete(queue_key)]
            return plan(last, seq_mod, compares, ops, build, lambda _: True)

        return self._run(timeout_ms, attempt)

    if TYPE_CHECKING:  # provided by EtcdCoordinator; declared here for the type checker

        def _ctl_ops(self) -> list[JsonObj]:
            """The reads a controller check needs."""

        def _guard(self, controller_epoch: int, got: list[list[KeyValue]]) -> list[JsonObj]:
            """Check ``controller_epoch`` is the active controller's; the compares keeping it."""
