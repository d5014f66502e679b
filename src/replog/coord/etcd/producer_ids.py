"""Producer-id blocks in the etcd backend: the latest block of every broker in one key
(``producer_ids``, codec JSON of a tuple of ``ProducerIdBlock``), put at the mod revision read
and guarded by the controller fence. Allocation writes no feed record, so it commits its own
txn instead of going through the feed's write loop."""

from __future__ import annotations

from replog.clock import monotonic_s
from replog.coord import codec, rules
from replog.coord.etcd.client import cmp_mod, op_put, op_range
from replog.coord.etcd.controller import EtcdController
from replog.coord.etcd.store import EtcdStore, mod_rev
from replog.errors import RequestTimeoutError
from replog.metadata.types import ProducerIdBlock

__all__ = ["EtcdProducerIds"]


class EtcdProducerIds:
    """The blocks key in ``store``, allocated as ``controller``'s writes."""

    def __init__(self, store: EtcdStore, controller: EtcdController) -> None:
        self._store = store
        self._controller = controller

    def allocate(
        self,
        broker_id: int,
        broker_epoch: int,
        count: int,
        controller_epoch: int,
        timeout_ms: int | None,
    ) -> ProducerIdBlock:
        """``allocate_producer_ids``: the next block for ``broker_id``, retried on conflict
        until the call's timeout."""
        store, controller = self._store, self._controller
        key = store.k("producer_ids")
        budget = store.default_timeout_ms if timeout_ms is None else timeout_ms
        deadline = monotonic_s() + budget / 1000
        while True:
            got = store.read([*controller.ctl_ops(), op_range(key)], timeout_ms)
            compares = controller.guard(controller_epoch, got[:3])
            stored = codec.loads(got[3][0].value) if got[3] else ()
            block, blocks = rules.allocated_producer_ids(stored, broker_id, broker_epoch, count)
            compares.append(cmp_mod(key, mod_rev(got[3])))
            ops = [op_put(key, codec.dumps(blocks))]
            left_ms = max(1, int((deadline - monotonic_s()) * 1000))
            if store.client.txn(compares, ops, timeout_ms=left_ms).succeeded:
                return block
            if monotonic_s() > deadline:
                raise RequestTimeoutError(f"etcd write kept conflicting for {budget} ms")

    def block(self, broker_id: int, timeout_ms: int | None) -> ProducerIdBlock | None:
        """``producer_id_block``: the broker's latest block."""
        got = self._store.read([op_range(self._store.k("producer_ids"))], timeout_ms)
        blocks: tuple[ProducerIdBlock, ...] = codec.loads(got[0][0].value) if got[0] else ()
        return next((b for b in blocks if b.broker_id == broker_id), None)
