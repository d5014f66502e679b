"""The etcd backend's admin request queues: ``admin/q/<target>/<id, 20 digits>`` holds a
queued AdminRequest and ``admin/id/<id>`` its target; the request id is the seq of its
submission. The queue rules (checks, what a full queue drops) are ``replog.coord.admin``'s."""

from __future__ import annotations

from replog.coord import codec
from replog.coord.admin import requests_to_drop
from replog.coord.etcd.client import op_delete, op_put, op_range
from replog.coord.etcd.controller import EtcdController
from replog.coord.etcd.store import Done, EtcdStore, TxnPlan, plan
from replog.errors import ErrorCode
from replog.metadata import records
from replog.metadata.types import AdminPayload, AdminRequest, AlterPartitionResult, MetadataChange

__all__ = ["EtcdAdminQueues"]


class EtcdAdminQueues:
    """The queues in ``store``, each holding at most ``limit`` requests; a controller's
    completion is guarded as ``controller``'s write."""

    def __init__(self, store: EtcdStore, controller: EtcdController, limit: int) -> None:
        self._store = store
        self._controller = controller
        self._limit = limit

    def submit(self, target: int, payload: AdminPayload, timeout_ms: int | None) -> AdminRequest:
        """``submit_admin_request`` (checked by the caller with ``validate_admin_request``):
        the request id is the submission's seq."""
        store = self._store
        queue_p = store.k(f"admin/q/{target}/")

        def attempt() -> TxnPlan[AdminRequest]:
            last, seq_mod, (queued,) = store.seq_read([op_range(queue_p, prefix=True)], timeout_ms)
            pending: list[AdminRequest] = [codec.loads(kv.value) for kv in queued]
            dropped = requests_to_drop(pending, target, self._limit)
            request_id = last + 1
            request = AdminRequest(
                request_id=request_id, target=target, payload=payload, submitted_seq=request_id
            )
            ops = [
                op_put(f"{queue_p}{request_id:020d}", codec.dumps(request)),
                op_put(store.k(f"admin/id/{request_id:020d}"), str(target)),
            ]
            for old in dropped:
                ops.append(op_delete(f"{queue_p}{old.request_id:020d}"))
                ops.append(op_delete(store.k(f"admin/id/{old.request_id:020d}")))

            def build(seq: int) -> list[MetadataChange]:
                return records.admin_submitted(seq, request, dropped)

            return plan(last, seq_mod, [], ops, build, lambda _: request)

        return store.run(timeout_ms, attempt)

    def pending(self, target: int, timeout_ms: int | None) -> list[AdminRequest]:
        """``pending_admin_requests``."""
        store = self._store
        (kvs,) = store.read([op_range(store.k(f"admin/q/{target}/"), prefix=True)], timeout_ms)
        return [codec.loads(kv.value) for kv in kvs]

    def complete(
        self,
        request_id: int,
        outcome: ErrorCode,
        message: str,
        result: AlterPartitionResult | None,
        controller_epoch: int | None,
        timeout_ms: int | None,
    ) -> bool:
        """``complete_admin_request``: with ``controller_epoch``, the controller keys are read
        with the index and compared in the removal's txn, as in other controller writes."""
        store, controller = self._store, self._controller
        id_key = store.k(f"admin/id/{request_id:020d}")
        ctl_ops = [] if controller_epoch is None else controller.ctl_ops()

        def attempt() -> TxnPlan[bool] | Done[bool]:
            last, seq_mod, got = store.seq_read([*ctl_ops, op_range(id_key)], timeout_ms)
            compares = (
                [] if controller_epoch is None else controller.guard(controller_epoch, got[:3])
            )
            index = got[-1]
            if not index:
                return Done(False)
            queue_key = store.k(f"admin/q/{int(index[0].value)}/{request_id:020d}")
            (queued,) = store.read([op_range(queue_key)], timeout_ms)
            if not queued:
                return Done(False)
            request: AdminRequest = codec.loads(queued[0].value)

            def build(seq: int) -> list[MetadataChange]:
                return records.admin_completed(seq, request, outcome, message, result)

            ops = [op_delete(id_key), op_delete(queue_key)]
            return plan(last, seq_mod, compares, ops, build, lambda _: True)

        return store.run(timeout_ms, attempt)
